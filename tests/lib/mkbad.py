#!/usr/bin/env python3
"""mkbad.py - write well-formed GGUF files that are wrong as models.

usage: mkbad.py GOOD.gguf OUTDIR

Reads GOOD.gguf (a small F32 model from gen_model.py) and writes one file per
kind of mistake into OUTDIR; the file name says the mistake and the line after
it in stdout names what pocket's error message must mention:
    NAME.gguf<TAB>expected substring
"""
import os
import sys

import gguf_py as G


def rewrite(g, path, drop_keys=(), set_keys=None, drop_tensors=(), reshape=None, as_i16=()):
    w = G.GGUFWriter()
    for k in g.kv_order:
        if k in drop_keys:
            continue
        vt, at = g.kv_types[k]
        v = g.kv[k]
        if set_keys and k in set_keys:
            v, vt = set_keys[k]
        w.add(k, v, vt, at if vt == G.ARRAY else None)
    for name in g.tensor_order:
        if name in drop_tensors:
            continue
        a = g.tensors[name]
        if reshape and name in reshape:
            a = reshape[name](a)
        if name in as_i16:       # a type no weight is computed in: I16, zeros
            w.add_raw_tensor(name, reversed(a.shape), 25, bytes(2 * a.size))
        else:
            w.add_tensor(name, a, G.T_F32)
    w.write(path)


def write_cases(good, out, cases):
    """Write each case (NAME, KW, EXPECT) of GOOD.gguf as OUT/NAME.gguf and
    print "NAME.gguf<TAB>EXPECT". KW: rewrite()'s options, plus extra
    (tensors added: name -> numpy array) and extra_keys (keys added: name ->
    (value, vtype, arr_type or None))."""
    os.makedirs(out, exist_ok=True)
    g = G.read_gguf(good)
    for name, kw, expect in cases:
        kw = dict(kw)
        extra, extra_keys = kw.pop("extra", {}), kw.pop("extra_keys", {})
        for t, a in extra.items():
            g.tensors[t] = a
            g.tensor_order.append(t)
        for k, (v, vt, at) in extra_keys.items():
            g.kv[k], g.kv_types[k] = v, (vt, at)
            g.kv_order.append(k)
        rewrite(g, os.path.join(out, name + ".gguf"), **kw)
        for t in extra:
            del g.tensors[t]
            g.tensor_order.remove(t)
        for k in extra_keys:
            del g.kv[k], g.kv_types[k]
            g.kv_order.remove(k)
        print("%s.gguf\t%s" % (name, expect))


def main():
    good, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    g = G.read_gguf(good)
    arch = g.kv["general.architecture"]
    cases = [
        ("unknown_arch", dict(set_keys={"general.architecture": ("gpt-j", G.STRING)}), "gpt-j"),
        ("no_block_count", dict(drop_keys=(arch + ".block_count",)), arch + ".block_count"),
        ("bad_head_count", dict(set_keys={arch + ".attention.head_count": (3, G.UINT32)}), "head_count"),
        ("missing_tensor", dict(drop_tensors=("blk.1.attn_q.weight",)), "blk.1.attn_q.weight"),
        ("wrong_shape", dict(reshape={"blk.0.attn_k.weight": lambda a: a[:-1]}), "blk.0.attn_k.weight"),
        ("no_vocab", dict(drop_keys=("tokenizer.ggml.tokens",)), "tokenizer.ggml.tokens"),
        ("type_string_for_int", dict(set_keys={arch + ".block_count": ("two", G.STRING)}), arch + ".block_count"),
        ("uncomputable_type", dict(as_i16=("blk.0.ffn_down_exps.weight",)),
         "'blk.0.ffn_down_exps.weight' has type I16, which pocket cannot compute"),
    ]
    for name, kw, expect in cases:
        rewrite(g, os.path.join(out, name + ".gguf"), **kw)
        print(f"{name}.gguf\t{expect}")


if __name__ == "__main__":
    sys.exit(main())
