#!/usr/bin/python3
"""check_fixture.py - compare logits with the llama.cpp reference JSON files of
../shared/fixtures/ARCH (qwen35moe, qwen3next, deepseek2; format: prompt_ids,
prompt_rows[i].{argmax, top}, steps[s].{id, top}, gen_ids; see that
directory's README).

usage:
  check_fixture.py                     validate tests/ref_forward.py on the
                                       fixture: greedy.json and long150.json,
                                       DeltaNet recurrent, chunked:64 and
                                       chunked:16, plus recurrent vs chunked
                                       (deepseek2: latent attention
                                       decompressed and absorbed)
  check_fixture.py ids REF.json        print the teacher-forced id sequence
                                       (prompt_ids + gen_ids[:-1])
  check_fixture.py ref REF.json MODEL.gguf [--deltanet SPEC]
                                       numpy reference vs REF.json (SPEC
                                       also mla:decompressed|absorbed)
  check_fixture.py logits REF.json LOGITS.f32 N_VOCAB
                                       float32 logits (n x N_VOCAB, e.g. from
                                       tool_logits fed the "ids" sequence one
                                       token at a time) vs REF.json
  options: --tol T (default 1e-3), --arch ARCH (default qwen35moe: the
  files tiny-ARCH.*), --fixture-dir DIR (default ../shared/fixtures/ARCH)

Row i of the logits is the distribution after the i-th fed token. Prompt row
i is compared with prompt_rows[i], greedy step s with row n_prompt - 1 + s.
Acceptance (the fixture README's): every compared row's argmax equals the
reference (prompt_rows[i].argmax / steps[s].id) and, for each of the row's 20
reference ids, |ours - ref| <= T * max(1, |ref|) (compared by token id, not
rank). Exit status 0 iff everything passes.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FIXTURES = os.path.join(HERE, "..", "..", "shared", "fixtures")


def fixture_files(arch):
    """(model, (greedy json, long150 json)) file names of an arch's fixture."""
    return ("tiny-%s.gguf" % arch,
            ("tiny-%s.greedy.json" % arch, "tiny-%s.long150.json" % arch))


def teacher_ids(ref):
    return list(ref["prompt_ids"]) + list(ref["gen_ids"][:-1])


def compare(label, ref, logits, tol):
    """Returns (ok, summary dict); prints one line per failure (capped)."""
    P = len(ref["prompt_ids"])
    rows = [(i, r["argmax"], r["top"], "prompt row %d" % i)
            for i, r in enumerate(ref["prompt_rows"])]
    rows += [(P - 1 + s, st["id"], st["top"], "step %d" % s)
             for s, st in enumerate(ref["steps"])]
    need = max(r[0] for r in rows) + 1
    if logits.shape[0] < need:
        print("FAIL %s: %d logit rows, need %d" % (label, logits.shape[0],
                                                  need))
        return False, {}
    bad = 0
    shown = 0
    max_abs = max_rel = 0.0
    argmax_bad = 0
    for row, want, top, what in rows:
        x = logits[row]
        if not np.all(np.isfinite(x)):
            bad += 1
            if shown < 10:
                print("FAIL %s %s: non-finite logits" % (label, what))
                shown += 1
            continue
        am = int(np.argmax(x))
        if am != want:
            bad += 1
            argmax_bad += 1
            if shown < 10:
                print("FAIL %s %s: argmax %d (%.6f) != reference %d "
                      "(ours %.6f)" % (label, what, am, x[am], want, x[want]))
                shown += 1
        for tid, tl in top:
            d = abs(float(x[tid]) - tl)
            rel = d / max(1.0, abs(tl))
            max_abs = max(max_abs, d)
            max_rel = max(max_rel, rel)
            if rel > tol:
                bad += 1
                if shown < 10:
                    print("FAIL %s %s: token %d logit %.6f vs reference %.6f"
                          % (label, what, tid, x[tid], tl))
                    shown += 1
    ok = bad == 0
    print("%s %-34s %3d rows: max|d| %.2e, max rel %.2e (tol %g), "
          "argmax mismatches %d"
          % ("ok  " if ok else "FAIL", label, len(rows), max_abs, max_rel,
             tol, argmax_bad))
    return ok, dict(max_abs=max_abs, max_rel=max_rel)


def run_ref(model_path, ids, spec):
    """spec: a --deltanet value, or mla:decompressed / mla:absorbed (the
    latent attention's two forms)."""
    import ref_forward as R
    if spec.startswith("mla:"):
        return R.Model(model_path, mla=spec[4:]).forward(ids)
    mode, chunk = R.parse_deltanet(spec)
    m = R.Model(model_path, deltanet=mode, chunk=chunk)
    return m.forward(ids)


def ref_specs(arch):
    """The reference's forms compared on a fixture: the delta rule's
    recurrence and chunked forms, or latent attention's decompressed and
    absorbed forms; the first is the base the others must agree with."""
    import ref_forward as R
    if arch in R.MLA_ARCHS:
        return ("mla:decompressed", "mla:absorbed")
    return ("recurrent", "chunked:64", "chunked:16")


def pop_opt(args, name, default, conv=str):
    if name in args:
        i = args.index(name)
        if i + 1 >= len(args):
            raise SystemExit("check_fixture: %s needs a value" % name)
        v = conv(args[i + 1])
        del args[i:i + 2]
        return v
    return default


def main(argv):
    args = list(argv)
    tol = pop_opt(args, "--tol", 1e-3, float)
    arch = pop_opt(args, "--arch", "qwen35moe")
    fdir = pop_opt(args, "--fixture-dir", os.path.join(FIXTURES, arch))
    spec = pop_opt(args, "--deltanet", "recurrent")
    if not args:
        return validate_all(fdir, arch, tol)
    cmd = args[0]
    if cmd == "ids" and len(args) == 2:
        print(",".join(str(i) for i in teacher_ids(json.load(open(args[1])))))
        return 0
    if cmd == "ref" and len(args) == 3:
        ref = json.load(open(args[1]))
        lg = run_ref(args[2], teacher_ids(ref), spec)
        ok, _ = compare("numpy %s %s" % (spec, os.path.basename(args[1])),
                        ref, lg, tol)
        return 0 if ok else 1
    if cmd == "logits" and len(args) == 4:
        ref = json.load(open(args[1]))
        n_vocab = int(args[3])
        raw = np.fromfile(args[2], dtype="<f4")
        n_ids = len(teacher_ids(ref))
        if raw.size != n_ids * n_vocab:
            print("FAIL %s: %d floats, expected %d ids x %d vocab = %d"
                  % (args[2], raw.size, n_ids, n_vocab, n_ids * n_vocab))
            return 1
        lg = raw.astype(np.float64).reshape(n_ids, n_vocab)
        ok, _ = compare("pocket %s" % os.path.basename(args[1]), ref, lg, tol)
        return 0 if ok else 1
    sys.stderr.write(__doc__)
    return 2


def validate_all(fdir, arch, tol):
    model_name, files = fixture_files(arch)
    model = os.path.join(fdir, model_name)
    if not os.path.exists(model):
        print("FAIL: fixture model %s not found" % model)
        return 1
    all_ok = True
    for fn in files:
        ref = json.load(open(os.path.join(fdir, fn)))
        ids = teacher_ids(ref)
        base = None
        for spec in ref_specs(arch):
            lg = run_ref(model, ids, spec)
            ok, _ = compare("numpy %-10s %s" % (spec, fn.split(".")[1]),
                            ref, lg, tol)
            all_ok &= ok
            if base is None:
                base = lg
            else:
                d = float(np.max(np.abs(lg - base)))
                dok = d < 1e-9
                all_ok &= dok
                print("%s %-34s max|%s - %s| over all %d x %d "
                      "logits = %.2e"
                      % ("ok  " if dok else "FAIL",
                         "numpy %-10s %s" % (spec, fn.split(".")[1]),
                         spec, ref_specs(arch)[0],
                         lg.shape[0], lg.shape[1], d))
    print("check_fixture: %s" % ("numpy reference matches llama.cpp"
                                 if all_ok else "FAILED"))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
