#!/usr/bin/python3
"""check_prune.py - a file written by `pocket prune` against its source.

usage: check_prune.py SOURCE.gguf PRUNED.gguf [K | K0,K1,...] [TOPK]

Checks, reading both files with gguf_py (no pocket code):
  - <arch>.expert_count is K (one value), or the per-layer list (an array);
    expert_used_count is TOPK (default: the source's);
  - pocket.prune.experts lists, layer by layer, K_l distinct increasing
    experts of the source;
  - every tensor that holds experts (by llama.cpp's names: the router
    ffn_gate_inp and its bias, ffn_{gate,up,down,gate_up}_exps and their
    biases, exp_probs_b, ffn_down_exps.scale) has K_l experts along its
    expert dimension, and its bytes are the source's slices of the kept
    experts, in order; its type is the source's;
  - every other tensor (name, shape, type, bytes) and every other key is the
    source's, in the source's order.
Prints a summary; exits 1 with a message on the first difference.
"""
import sys

import numpy as np

import gguf_py as G

# tensor suffix -> the dimension (ne index) that counts the experts
EXPERT_DIMS = {
    "ffn_gate_inp.weight": 1, "ffn_gate_inp.bias": 0, "exp_probs_b.bias": 0,
    "ffn_gate_exps.weight": 2, "ffn_up_exps.weight": 2, "ffn_down_exps.weight": 2,
    "ffn_gate_up_exps.weight": 2, "ffn_gate_exps.bias": 1, "ffn_up_exps.bias": 1,
    "ffn_down_exps.bias": 1, "ffn_down_exps.scale": 0,
}
OWN_KEYS = ("pocket.prune.experts", "pocket.prune.saliency", "pocket.prune.calibration")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def cut(raw, ne, dim, keep):
    """The bytes of the experts keep of a tensor of shape ne along dim."""
    outer = int(np.prod(ne[dim + 1:], dtype=np.int64))
    E = ne[dim]
    unit = len(raw) // (outer * E)
    return b"".join(raw[(o * E + e) * unit:(o * E + e + 1) * unit] for o in range(outer) for e in keep)


def main(argv):
    if len(argv) not in (3, 4, 5):
        sys.stderr.write(__doc__)
        return 2
    src, dst = G.read_gguf(argv[1]), G.read_gguf(argv[2])
    arch = src.get("general.architecture")
    L = int(src.get(arch + ".block_count"))
    E = int(src.get(arch + ".expert_count"))   # a source with one count
    want_k = [int(v) for v in argv[3].split(",")] if len(argv) > 3 else None
    topk = int(argv[4]) if len(argv) > 4 else src.get(arch + ".expert_used_count")
    # the routed layers (leading dense layers have no router)
    routed = [il for il in range(L) if "blk.%d.ffn_gate_inp.weight" % il in src.tinfo]
    ec = dst.get(arch + ".expert_count")
    ks = [int(v) for v in ec] if isinstance(ec, np.ndarray) else [int(ec)] * L
    if isinstance(ec, np.ndarray) and (len(ks) != L or len({ks[il] for il in routed}) == 1):
        fail("expert_count is an array %s (of %d layers, alike: should be one value)" % (ks, L))
    if want_k and [ks[il] for il in routed] != [want_k[0] if len(want_k) == 1 else want_k[il] for il in routed]:
        fail("expert_count %s, expected %s" % (ks, want_k))
    if dst.get(arch + ".expert_used_count") != topk:
        fail("expert_used_count %s, expected %s" % (dst.get(arch + ".expert_used_count"), topk))
    flat = [int(v) for v in dst.get("pocket.prune.experts")]
    if len(flat) != sum(ks[il] for il in routed):
        fail("pocket.prune.experts has %d entries, the routed layers' counts sum to %d"
             % (len(flat), sum(ks[il] for il in routed)))
    kept, i = {}, 0
    for il in routed:
        ex = flat[i:i + ks[il]]
        i += ks[il]
        if any(b <= a for a, b in zip(ex, ex[1:])) or ex[0] < 0 or ex[-1] >= E:
            fail("pocket.prune.experts: layer %d lists %s" % (il, ex))
        kept[il] = ex
    # keys: the source's, in order, but the counts and pocket's own
    changed = {arch + ".expert_count", arch + ".expert_used_count"}
    sk = [k for k in src.kv_order if k not in OWN_KEYS]
    dk = [k for k in dst.kv_order if k not in OWN_KEYS]
    if sk != dk:
        fail("keys differ: %s" % sorted(set(sk) ^ set(dk)))
    for k in sk:
        if k in changed:
            continue
        a, b = src.get(k), dst.get(k)
        same = np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
        if not same or src.kv_types[k] != dst.kv_types[k]:
            fail("key %s differs" % k)
    if src.tensor_order != dst.tensor_order:
        fail("tensor lists or order differ")
    n_cut = 0
    for name in src.tensor_order:
        s, d = src.tinfo[name], dst.tinfo[name]
        parts = name.split(".", 2)
        dim = EXPERT_DIMS.get(parts[2]) if parts[0] == "blk" else None
        if s["type"] != d["type"]:
            fail("%s: type %d, source %d" % (name, d["type"], s["type"]))
        if dim is None:
            if s["ne"] != d["ne"] or src.raw[name] != dst.raw[name]:
                fail("%s: not the source's (shape %s, source %s)" % (name, d["ne"], s["ne"]))
            continue
        il = int(parts[1])
        ne = list(s["ne"])
        ne[dim] = ks[il]
        if d["ne"] != ne:
            fail("%s: shape %s, expected %s" % (name, d["ne"], ne))
        if dst.raw[name] != cut(src.raw[name], s["ne"], dim, kept[il]):
            fail("%s: bytes are not the kept experts' slices %s of the source" % (name, kept[il]))
        n_cut += 1
    print("ok: %s, expert_count %s, top-%d; %d expert tensors cut to the kept slices, %d tensors and %d keys "
          "as in the source" % (argv[2].rsplit("/", 1)[-1], ec.tolist() if isinstance(ec, np.ndarray) else ec, topk, n_cut,
                                len(src.tensor_order) - n_cut, len(sk) - 2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
