#!/usr/bin/env python3
"""mkalign.py - rewrite a GGUF model with general.alignment = 1.

usage: mkalign.py GOOD.gguf OUTDIR

GGUF allows any power-of-two alignment, 1 included: tensor data then follows
the header and the previous tensor with no padding. Writes two files into
OUTDIR from GOOD.gguf (F32 / F16 / BF16 tensors, same metadata and values):
    odd.gguf     the header ends at an odd offset, so the first tensor starts
                 misaligned for its type (pocket must refuse it, naming it)
    packed.gguf  the header and every tensor size are multiples of 4, so
                 every tensor is aligned although the file declares 1 (pocket
                 must load it and compute exactly what GOOD.gguf computes)
Prints one line: the name of the first tensor (the one odd.gguf misplaces).
"""
import os
import sys

import gguf_py as G


def build(g, pad_len):
    w = G.GGUFWriter(alignment=1)
    for k in g.kv_order:
        if k == "general.alignment":
            continue
        vt, at = g.kv_types[k]
        w.add(k, g.kv[k], vt, at if vt == G.ARRAY else None)
    w.add_str("pocket.test.pad", "x" * pad_len)
    for name in g.tensor_order:
        w.add_tensor(name, g.tensors[name], g.tinfo[name]["type"])
    data = w.to_bytes()
    head = len(data) - sum(len(t[3]) for t in w.tensors)
    return data, head, w


def main():
    good, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    g = G.read_gguf(good)
    odd = packed = None
    for pad in range(8):
        data, head, w = build(g, pad)
        if head % 2 == 1 and odd is None:
            odd = data
        if head % 4 == 0 and packed is None and all(len(t[3]) % 4 == 0 for t in w.tensors):
            packed = data
    if odd is None or packed is None:
        sys.exit("mkalign.py: %s: cannot place the tensors as wanted" % good)
    with open(os.path.join(out, "odd.gguf"), "wb") as f:
        f.write(odd)
    with open(os.path.join(out, "packed.gguf"), "wb") as f:
        f.write(packed)
    print(g.tensor_order[0])


if __name__ == "__main__":
    sys.exit(main())
