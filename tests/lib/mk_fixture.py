#!/usr/bin/python3
"""mk_fixture.py - rebuild a llama.cpp reference fixture model, byte for byte.

usage: mk_fixture.py SPEC.json OUT.gguf [--compare REAL.gguf]

The fixtures of ../shared/fixtures/ARCH (small random-weight models that
llama.cpp's reference outputs were computed on) are rebuilt here from
tests/data/fixtures/ARCH/spec.json, so that a clone of the repository needs
only those outputs (the .json files beside the spec), not the 3-5 MB models.
The written file must have the spec's size and sha256 (the fixture's);
otherwise OUT is removed and the exit status is 1, with one line saying so.

The spec holds the fixture's header and how its weights were drawn:
  seed, stream   tensor t draws from numpy default_rng([seed, crc32(name)])
                 ("crc32") or default_rng([seed, index of t in the file])
                 ("index")
  kv             [key, TYPE, value] in file order; TYPE a GGUF value type
                 (UINT32, FLOAT32, STRING, ..., ARRAY:ELEMENT); "COPY": the
                 key and its value from models/kjv-moe-f16.gguf (the fixtures
                 carry the bundled model's tokenizer)
  tensors        [name, ne, type] in file order (type F32 or MXFP4)
  init           [regex, rule]: the first rule whose regex matches the whole
                 tensor name draws it:
                   {"mean": M, "std": S, "fan_in": true, "draw": "f32"}
                     M + S' * standard_normal, drawn and computed in float32
                     or (the default) float64, S' = S / sqrt(ne0) with fan_in
                   {"uniform": [A, B], "negate": true}   -U(A, B)
                   {"dt_bias": [A, B]}   log(expm1(dt)), dt log-uniform in [A, B]
                   {"runs": [[N, V], ...]}   N values V, in order (no draw)
                 plus "rows": [PERIOD, FROM, TO, SCALE]: the rows r (numpy's
                 first axis) with FROM <= r % PERIOD < TO scaled by SCALE.
                 Values are rounded to float32, MXFP4 tensors quantised by
                 tests/lib/mxfp4_ref.py (as gguf-py's quantiser).
--compare REAL.gguf lists the tensors whose bytes differ from REAL's.
"""

import hashlib
import json
import os
import re
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_py as G  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TOKENIZER_SOURCE = os.path.join(ROOT, "models", "kjv-moe-f16.gguf")
TYPES = {n: i for i, n in enumerate(G.VTYPE_NAMES)}
TENSOR_TYPES = {"F32": G.T_F32, "MXFP4": G.T_MXFP4}


def draw(spec, index, name, ne, rule):
    key = [spec["seed"], zlib.crc32(name.encode()) if spec["stream"] == "crc32" else index]
    rng = np.random.default_rng(key)
    shape = tuple(reversed(ne))
    if "runs" in rule:
        a = np.concatenate([np.full(n, v, dtype=np.float64) for n, v in rule["runs"]]).reshape(shape)
    elif "uniform" in rule:
        lo, hi = rule["uniform"]
        a = rng.uniform(lo, hi, shape)
        if rule.get("negate"):
            a = -a
    elif "dt_bias" in rule:
        lo, hi = rule["dt_bias"]
        a = np.log(np.expm1(np.exp(rng.uniform(np.log(lo), np.log(hi), shape))))
    else:
        dtype = np.float32 if rule.get("draw") == "f32" else np.float64
        std = rule.get("std", 1.0)
        if rule.get("fan_in"):
            std = std / np.sqrt(ne[0])
        a = rng.standard_normal(shape, dtype=dtype) * dtype(std) + dtype(rule.get("mean", 0.0))
    if "rows" in rule:
        period, lo, hi, scale = rule["rows"]
        r = np.arange(shape[0]) % period
        a[(r >= lo) & (r < hi)] *= scale
    return a.astype(np.float32)


def build(spec):
    src = G.read_gguf(TOKENIZER_SOURCE, False)
    w = G.GGUFWriter()
    for item in spec["kv"]:
        key, vtype = item[0], item[1]
        if vtype == "COPY":
            vt, at = src.kv_types[key]
            w.kv.append((key, vt, src.kv[key], at))
        elif vtype.startswith("ARRAY:"):
            w.add(key, item[2], G.ARRAY, TYPES[vtype[6:]])
        else:
            w.add(key, item[2], TYPES[vtype])
    rules = [(re.compile(rx), rule) for rx, rule in spec["init"]]
    for index, (name, ne, ttype) in enumerate(spec["tensors"]):
        rule = next((r for rx, r in rules if rx.fullmatch(name)), None)
        if rule is None:
            raise SystemExit("mk_fixture: no init rule matches %s" % name)
        w.add_tensor(name, draw(spec, index, name, ne, rule), TENSOR_TYPES[ttype])
    return w


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--compare"):
        sys.stderr.write(__doc__)
        return 2
    spec = json.load(open(argv[0]))
    w = build(spec)
    data = w.to_bytes()
    if len(argv) == 4:
        real = G.read_gguf(argv[3], False)
        with open(argv[3], "rb") as f:
            rb = f.read()
        for name, ne, ttype, raw in w.tensors:
            ti = real.tinfo.get(name)
            got = None if ti is None else rb[real.data_offset + ti["offset"]:][:len(raw)]
            if got != raw:
                print("differs: %s" % name)
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != spec["bytes"] or digest != spec["sha256"]:
        print("mk_fixture: %s: rebuilt %d bytes, sha256 %s; the fixture has %d bytes, sha256 %s"
              % (argv[0], len(data), digest, spec["bytes"], spec["sha256"]))
        return 1
    tmp = argv[1] + ".tmp%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
