#!/usr/bin/env python3
"""cache_sim.py - hit rates of expert-cache policies on a routing trace
(bench/route_trace.c), per layer, averaged over layers. Not a test.

    python3 bench/cache_sim.py trace.txt 4 6 8      # capacities (experts per layer)

Policies, each a cache of C experts per layer that must hold all of a
token's experts while it runs (as pocket's cache: they are pinned):
  lru     least recently used (what src/model/xcache.c does)
  lfu     least frequently used so far, ties by recency
  belady  the offline optimum: evict the expert whose next use is furthest
          in the future (an upper bound no online policy beats)
  static  the C experts used most over the whole trace, never evicted
          (an oracle of popularity, no adaptation)
Prints one line per capacity: hit rate of each policy, and the rate a
uniform router would give (C / n_experts).
"""
import sys
from collections import Counter


def read_trace(path):
    toks, head = [], ""
    for line in open(path):
        if line.startswith("#"):
            head = line.strip()
            continue
        toks.append([[int(e) for e in part.split(",") if e] for part in line.strip().split("|")])
    return head, toks


def simulate(seq, cap, policy):
    """seq: list of expert sets (one per token) of one layer; returns hits, lookups."""
    cache, last, freq, hits, look = set(), {}, Counter(), 0, 0
    nxt = None
    if policy == "belady":            # next use of each expert after each step
        nxt = [None] * len(seq)
        upcoming = {}
        for t in range(len(seq) - 1, -1, -1):
            nxt[t] = dict(upcoming)
            for e in seq[t]:
                upcoming[e] = t
    if policy == "static":
        cnt = Counter(e for s in seq for e in s)
        keep = {e for e, _ in cnt.most_common(cap)}
        for s in seq:
            for e in s:
                look += 1
                hits += e in keep
        return hits, look
    for t, s in enumerate(seq):
        for e in s:
            look += 1
            freq[e] += 1
            if e in cache:
                hits += 1
            else:
                if len(cache) >= cap:
                    victims = [v for v in cache if v not in s]
                    if policy == "lru":
                        v = min(victims, key=lambda v: last[v])
                    elif policy == "lfu":
                        v = min(victims, key=lambda v: (freq[v], last[v]))
                    else:
                        v = max(victims, key=lambda v: nxt[t].get(v, 1 << 60))
                    cache.discard(v)
                cache.add(e)
            last[e] = t
    return hits, look


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: cache_sim.py TRACE CAP [CAP ...]")
    head, toks = read_trace(sys.argv[1])
    L = len(toks[0])
    n_exp = 1 + max(e for tok in toks for layer in tok for e in layer)
    k = len(toks[0][0])
    print(f"{head}\n{len(toks)} tokens, {L} layers, {n_exp} experts seen, top-{k}")
    for cap in (int(c) for c in sys.argv[2:]):
        if cap < k:
            print(f"capacity {cap}: below top-{k}, skipped")
            continue
        row = []
        for pol in ("lru", "lfu", "belady", "static"):
            h = n = 0
            for il in range(L):
                a, b = simulate([tok[il] for tok in toks], cap, pol)
                h, n = h + a, n + b
            row.append(f"{pol} {100 * h / n:5.1f}%")
        print(f"capacity {cap:3d} of {n_exp} per layer: " + "  ".join(row) + f"  (uniform {100 * cap / n_exp:.1f}%)")


if __name__ == "__main__":
    main()
