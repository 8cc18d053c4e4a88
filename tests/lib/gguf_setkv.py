#!/usr/bin/env python3
"""gguf_setkv.py - set integer keys of a GGUF file in place.

usage: gguf_setkv.py FILE KEY=VALUE [KEY=VALUE ...]

Each KEY must be a scalar integer key of FILE; VALUE is written in the
key's own type (so nothing moves: the tensors stay where they are), and
must fit it. Used to push one key of a generated model past a load-time
limit without generating (or rewriting) the tensors (tests/cli/t_limits.sh).
"""
import struct
import sys

import gguf_py as G


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    path, want = argv[0], {}
    for a in argv[1:]:
        k, _, v = a.partition("=")
        want[k] = int(v)
    with open(path, "rb") as f:
        data = f.read()
    b = G._Buf(data)
    if b.take(4) != G.GGUF_MAGIC:
        sys.exit("%s: not a GGUF file" % path)
    b.u32()
    b.u64()
    n_kv = b.u64()
    at = {}
    for _ in range(n_kv):
        key = b.string()
        vtype = b.u32()
        at[key] = (b.p, vtype)
        G._read_value(b, vtype)
    with open(path, "r+b") as f:
        for k, v in want.items():
            if k not in at:
                sys.exit("%s: no key %s" % (path, k))
            off, vtype = at[k]
            if vtype in (G.STRING, G.ARRAY, G.FLOAT32, G.FLOAT64, G.BOOL):
                sys.exit("%s: key %s is not an integer" % (path, k))
            f.seek(off)
            f.write(struct.pack(G._SCALAR_FMT[vtype], v))


if __name__ == "__main__":
    main(sys.argv[1:])
