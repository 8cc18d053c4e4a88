#!/usr/bin/python3
"""compare_logits.py - pocket's float32 logits against a numpy reference.

usage: compare_logits.py STEP LABEL REF.npy POCKET.f32 TOL

REF.npy: an (n_tokens, n_vocab) array (tests/lib/ref_forward.py); POCKET.f32:
the same shape as raw little-endian float32 (tests/lib/tool_logits.c). Prints one
line (ok, or FAIL [STEP]) with max |pocket - ref|, where it is, and how
often the argmax agrees; exit status 0 iff every logit is finite and
max |pocket - ref| < TOL.
"""
import sys

import numpy as np


def main(argv):
    if len(argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    step, label, ref_path, got_path, tol = argv
    tol = float(tol)
    ref = np.load(ref_path)
    raw = np.fromfile(got_path, dtype="<f4")
    if raw.size != ref.size:
        print("FAIL [%s] %-30s %s has %d floats, expected %d"
              % (step, label, got_path, raw.size, ref.size))
        return 1
    got = raw.astype(np.float64).reshape(ref.shape)
    if not np.all(np.isfinite(got)):
        print("FAIL [%s] %-30s non-finite logits from pocket" % (step, label))
        return 1
    d = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(d), d.shape)
    am_ok = np.mean(np.argmax(got, axis=1) == np.argmax(ref, axis=1))
    ok = d.max() < tol
    print("%s %-30s max|pocket-ref| = %.3e (tol %.0e) at token %d id %d; "
          "argmax agree %.0f%%"
          % ("ok  " if ok else "FAIL [%s]" % step, label, d.max(), tol,
             worst[0], worst[1], 100 * am_ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
