"""Checks of `pocket info --mem SIZE --json` (tests/cli/t_info_fit.sh).

usage:
  check_fit.py tsv TABLE.tsv DOC...
      every row of the quality table is in its doc's table: the preset's (or
      the kept count's) row holds the same PPL, KLD and same-top figures
  check_fit.py advice FIT.json TABLE.tsv MEM
      the advice for a budget of MEM bytes: a build fits exactly when its
      need_bytes <= MEM; the model's own need is its loaded plan's resident +
      experts + context + 64 MiB; fitting builds come first, by KL divergence
      (builds without a figure after them); every figure is the table's (a
      preset with pruning: the KLDs added, the PPL ratios multiplied); the
      commands name the build
  check_fit.py sizes SOURCE.gguf BUILT.gguf BUILD.json LOADED.json [PRUNED]
      the estimate of a build (BUILD.json: one entry of the source's advice)
      against the file made by its commands, read here with gguf_py (no
      pocket code): the tensor data bytes exactly, the file within its
      header's difference, the bytes a token reads, the resident and expert
      bytes computed from the file's tensors; the context against what
      pocket's plan measured loading the built file (LOADED.json, its own
      `pocket info --json`): equal, or for a pruned build (PRUNED) at most
      1% above it (the estimate keeps the source's router scratch)
"""
import json
import os
import re
import sys

import gguf_py as G

# ggml's block sizes: type -> (elements, bytes) per block
BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 16: (256, 66),
         17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
         23: (256, 136), 29: (256, 56)}
MARGIN = 64 << 20


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_table(path):
    rows = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        kind, name, im, kld, ppl, base, top, doc = line.split("\t")
        rows.append(dict(kind=kind, name=name, imatrix=int(im), kld=float(kld), ppl=float(ppl),
                         base=float(base), top=top, doc=doc.strip(), kld_s=kld, ppl_s=ppl, base_s=base))
    return rows


def check_tsv(table, docs):
    rows = read_table(table)
    text = {d: open(d).read() for d in docs}
    for r in rows:
        if r["doc"] not in text:
            fail("%s %s: doc %s not given" % (r["kind"], r["name"], r["doc"]))
        lines = text[r["doc"]].splitlines()
        if r["kind"] == "quant":
            want = [l for l in lines if l.startswith("| %s |" % r["name"]) or
                    l.startswith("| %s+imatrix |" % r["name"]) or l.startswith("| %s by llama-quantize" % r["name"])]
        else:
            want = [l for l in lines if l.startswith("| %s | reap |" % r["name"])]
        hits = [l for l in want if r["ppl_s"] in l and r["kld_s"] in l and r["top"] + "%" in l]
        if len(hits) != 1:
            fail("%s %s: no single row of %s with PPL %s, KLD %s, same top %s%% (candidates: %s)"
                 % (r["kind"], r["name"], r["doc"], r["ppl_s"], r["kld_s"], r["top"], want))
        with_im = "+imatrix" in hits[0] or "IQ1" in r["name"] or "IQ2" in r["name"]
        if r["kind"] == "quant" and r["imatrix"] != with_im:
            fail("%s: imatrix %d, but its row is %s" % (r["name"], r["imatrix"], hits[0]))
        if r["base_s"] not in text[r["doc"]]:
            fail("%s %s: base PPL %s not in %s" % (r["kind"], r["name"], r["base_s"], r["doc"]))
    print("tsv: %d rows found in their docs" % len(rows))


def check_advice(path, table, mem):
    a = json.load(open(path))
    rows = read_table(table)
    quant = {r["name"]: r for r in rows if r["kind"] == "quant"}
    prune = {int(r["name"]): r for r in rows if r["kind"] == "prune"}
    me, ld = a["model"], a["model"]["loaded"]
    if a["mem"] != mem:
        fail("mem %d, expected %d" % (a["mem"], mem))
    if me["need_bytes"] != ld["resident_bytes"] + ld["expert_bytes"] + ld["context_bytes"] + MARGIN:
        fail("the model's need %d is not its plan's %d + %d + %d + margin" % (
            me["need_bytes"], ld["resident_bytes"], ld["expert_bytes"], ld["context_bytes"]))
    for k in ("resident_bytes", "expert_bytes", "context_bytes", "bytes_per_token"):
        if me[k] != ld[k]:
            fail("the model as it is: estimate %s %d, loaded %d" % (k, me[k], ld[k]))
    if me["fits"] != (me["need_bytes"] <= mem):
        fail("the model's fits is %s with need %d, mem %d" % (me["fits"], me["need_bytes"], mem))
    E = a["n_expert"]
    seen_unfit = seen_unmeasured = False
    last = -1.0
    for b in a["builds"]:
        name = "%s keep %s" % (b["preset"], b["keep"])
        if b["fits"] != (b["need_bytes"] <= mem):
            fail("%s: fits %s with need %d, mem %d" % (name, b["fits"], b["need_bytes"], mem))
        if b["need_bytes"] != b["resident_bytes"] + b["expert_bytes"] + b["context_bytes"] + MARGIN:
            fail("%s: need is not the sum of its parts" % name)
        if b["file_bytes"] >= me["file_bytes"]:
            fail("%s: listed but no smaller than the file (%d >= %d)" % (name, b["file_bytes"], me["file_bytes"]))
        # order: fitting first; measured by KLD, then the rest
        if not b["fits"]:
            seen_unfit = True
            seen_unmeasured = False
            last = -1.0
        elif seen_unfit:
            fail("%s fits but comes after one that does not" % name)
        if b["quality"] == "not measured":
            seen_unmeasured = True
        else:
            if seen_unmeasured:
                fail("%s has a figure but comes after a build without one" % name)
            if b["kld"] < last - 1e-12:
                fail("%s: KLD %g after %g (not best first)" % (name, b["kld"], last))
            last = b["kld"]
        # the figures: the table's
        q = quant.get(b["preset"]) if b["preset"] else None
        p = None
        if b["keep"]:
            if b["keep"] * 16 % E == 0:
                p = prune.get(b["keep"] * 16 // E)
        want_q = (b["preset"] is None or q is not None) and (not b["keep"] or p is not None)
        if want_q != (b["quality"] != "not measured"):
            fail("%s: quality '%s', but the table %s a figure" % (name, b["quality"], "has" if want_q else "lacks"))
        if want_q:
            kld = (q["kld"] if q else 0) + (p["kld"] if p else 0)
            ratio = (q["ppl"] / q["base"] if q else 1) * (p["ppl"] / p["base"] if p else 1)
            if abs(b["kld"] - kld) > 1e-8 * max(1, kld) or abs(b["ppl_ratio"] - ratio) > 1e-8 * ratio:
                fail("%s: KLD %g, PPL ratio %g; the table gives %g, %g" % (name, b["kld"], b["ppl_ratio"], kld, ratio))
            if b["quality"] != ("estimated" if q and p else "measured"):
                fail("%s: quality '%s'" % (name, b["quality"]))
            if q and b["imatrix"] != (q["imatrix"] == 1 or b["imatrix"]):
                fail("%s: imatrix %s" % (name, b["imatrix"]))
        cmds = b["commands"]
        if b["keep"] and not any(("pocket prune " in c and "--keep %d" % b["keep"] in c) for c in cmds):
            fail("%s: no prune command in %s" % (name, cmds))
        if b["preset"] and not re.search(r"pocket quantize \S+ \S+ %s( --imatrix \S+)?$" % re.escape(b["preset"]),
                                         cmds[-1]):
            fail("%s: last command %s" % (name, cmds[-1]))
        if b["imatrix"] != any("pocket imatrix " in c for c in cmds):
            fail("%s: imatrix %s, commands %s" % (name, b["imatrix"], cmds))
    n_fit = sum(b["fits"] for b in a["builds"])
    print("advice: %d builds, %d fit in %d bytes; figures, order and commands checked" % (len(a["builds"]), n_fit, mem))


def tensor_bytes(g, name, ne=None):
    ti = g.tinfo[name]
    ne = ne or ti["ne"]
    bs, bb = BLOCK[ti["type"]]
    n = 1
    for d in ne:
        n *= d
    return n // bs * bb, ne[0] // bs * bb


def check_sizes(src_path, built_path, build_json, loaded_json, pruned):
    src = G.read_gguf(src_path, load_data=False)
    g = G.read_gguf(built_path, load_data=False)
    b = json.load(open(build_json))
    ld = json.load(open(loaded_json))["model"]["loaded"]
    size = os.path.getsize(built_path)
    # the table's sizes against the file's layout: each tensor padded to the alignment
    order = sorted(g.tinfo, key=lambda n: g.tinfo[n]["offset"])
    for i, n in enumerate(order):
        nb = tensor_bytes(g, n)[0]
        end = g.tinfo[order[i + 1]]["offset"] if i + 1 < len(order) else size - g.data_offset
        if not nb <= end - g.tinfo[n]["offset"] < nb + g.alignment:
            fail("%s: %d bytes by the block table, %d in the file" % (n, nb, end - g.tinfo[n]["offset"]))
    data = size - g.data_offset
    if b["file_bytes"] - src.data_offset != data:
        fail("tensor data: estimate %d, file %d" % (b["file_bytes"] - src.data_offset, data))
    if abs(b["file_bytes"] - size) > 65536:
        fail("file: estimate %d, file %d" % (b["file_bytes"], size))
    arch = g.kv["general.architecture"]
    E = int(g.kv[arch + ".expert_count"])
    k = int(g.kv[arch + ".expert_used_count"])
    n_ctx = ld["n_ctx"]
    tied = "output.weight" not in g.tinfo
    emb, emb_row = tensor_bytes(g, "token_embd.weight")
    per_tok = emb_row + (emb if tied else 0)
    resident = (emb if tied else min(n_ctx, g.tinfo["token_embd.weight"]["ne"][1]) * emb_row)
    experts = 0
    for n in g.tinfo:
        if n == "token_embd.weight":
            continue
        nb = tensor_bytes(g, n)[0]
        if re.search(r"_exps\.weight$", n):
            experts += nb
            per_tok += nb // E * k
        else:
            resident += nb
            if n != "rope_freqs.weight":
                per_tok += nb
    for key, want in (("bytes_per_token", per_tok), ("resident_bytes", resident), ("expert_bytes", experts)):
        if b[key] != want:
            fail("%s: estimate %d, the file's tensors %d" % (key, b[key], want))
        if ld[key] != want:
            fail("%s: pocket's plan of the file %d, its tensors %d" % (key, ld[key], want))
    c, lc = b["context_bytes"], ld["context_bytes"]
    if (c != lc) if not pruned else not (lc <= c <= lc * 1.01):
        fail("context: estimate %d, the built file's plan %d" % (c, lc))
    if b["need_bytes"] != resident + experts + c + MARGIN:
        fail("need %d is not resident + experts + context + margin" % b["need_bytes"])
    print("sizes of %s: file %d (estimate %d), %d bytes/token, resident %d, experts %d, context %d (plan %d)"
          % (os.path.basename(built_path), size, b["file_bytes"], per_tok, resident, experts, c, lc))


def main(argv):
    if len(argv) >= 3 and argv[1] == "tsv":
        check_tsv(argv[2], argv[3:])
    elif len(argv) == 5 and argv[1] == "advice":
        check_advice(argv[2], argv[3], int(argv[4]))
    elif len(argv) in (6, 7) and argv[1] == "sizes":
        check_sizes(argv[2], argv[3], argv[4], argv[5], len(argv) == 7)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
