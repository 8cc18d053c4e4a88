#!/usr/bin/env python3
"""check_greedy.py - compare pocket's logits with a llama.cpp greedy reference.

usage: check_greedy.py REF.json LOGITS.f32 N_VOCAB [--tol T]

REF.json is a greedy run in the format of ../shared/models/*.greedy.json:
prompt_ids, and steps[s] = {id, top5 | top: [[id, logit], ...]}. LOGITS.f32
holds pocket's logits (n x N_VOCAB float32) after feeding prompt_ids followed
by steps[0..S-2].id one token at a time (teacher forcing): row
len(prompt_ids) - 1 + s is the distribution step s was drawn from. Greedy
decoding reproduces the reference iff pocket's argmax equals steps[s].id at
every step; the reference's top logits must agree within T * max(1, |ref|)
(compared by token id). Prints a summary; exits 1 on any mismatch.
"""
import json
import sys

import numpy as np


def main():
    args = sys.argv[1:]
    tol = 1e-3
    if "--tol" in args:
        i = args.index("--tol")
        tol = float(args[i + 1])
        del args[i:i + 2]
    ref_path, logits_path, n_vocab = args[0], args[1], int(args[2])
    ref = json.load(open(ref_path))
    logits = np.fromfile(logits_path, dtype="<f4").reshape(-1, n_vocab)
    P = len(ref["prompt_ids"])
    steps = ref["steps"]
    if logits.shape[0] < P - 1 + len(steps):
        print(f"FAIL: {logits.shape[0]} logit rows, need {P - 1 + len(steps)}")
        return 1
    bad = 0
    worst = 0.0
    for s, st in enumerate(steps):
        row = logits[P - 1 + s]
        top = st.get("top5") or st.get("top")
        am = int(np.argmax(row))
        if am != st["id"]:
            print(f"FAIL step {s}: pocket argmax {am} ({row[am]:.5f}) != reference {st['id']} "
                  f"(pocket logit {row[st['id']]:.5f})")
            bad += 1
        for tid, tl in top:
            d = abs(float(row[tid]) - tl) / max(1.0, abs(tl))
            worst = max(worst, d)
            if d > tol:
                print(f"FAIL step {s}: token {tid} logit {row[tid]:.6f} vs reference {tl:.6f}")
                bad += 1
    print(f"{len(steps)} greedy steps: {'all ids match' if not bad else f'{bad} mismatches'}; "
          f"max relative logit difference {worst:.2e} (tolerance {tol:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
