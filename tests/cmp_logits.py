#!/usr/bin/python3
"""cmp_logits.py - compare pocket's logits with the numpy reference's.

usage: cmp_logits.py STEP LABEL REF.npy POCKET.f32 TOL

REF.npy: the (n_tokens, n_vocab) float64 array tests/ref_forward.py writes;
POCKET.f32: the raw little-endian float32 logits tests/tool_logits writes
(the same rows). Prints one line - "ok" or "FAIL [STEP]", the label, the
largest |pocket - ref| (and relative to the largest |ref|), where it is, and
how often the argmax agrees - and exits 0 iff that difference is below TOL
and every logit is finite.
"""
import sys

import numpy as np


def main(argv):
    if len(argv) != 5:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    step, label, ref_path, got_path, tol = argv
    tol = float(tol)
    ref = np.load(ref_path)
    raw = np.fromfile(got_path, dtype="<f4")
    if raw.size != ref.size:
        print("FAIL [%s] %-30s %s has %d floats, expected %d x %d = %d"
              % (step, label, got_path, raw.size, ref.shape[0], ref.shape[1],
                 ref.size))
        return 1
    got = raw.astype(np.float64).reshape(ref.shape)
    if not np.all(np.isfinite(got)):
        print("FAIL [%s] %-30s non-finite logits from pocket" % (step, label))
        return 1
    d = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(d), d.shape)
    rel = d.max() / max(1e-30, float(np.abs(ref).max()))
    am_ok = np.mean(np.argmax(got, axis=1) == np.argmax(ref, axis=1))
    ok = d.max() < tol
    print("%s %-30s max|pocket-ref| = %.3e (tol %.0e; %.1e of max |ref|) at "
          "token %d id %d; argmax agree %.0f%%"
          % ("ok  " if ok else "FAIL [%s]" % step, label, d.max(), tol, rel,
             worst[0], worst[1], 100 * am_ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
