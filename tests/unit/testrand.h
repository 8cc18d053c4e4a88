/* testrand.h - deterministic test data for the kernel tests: splitmix64 from
 * the seed the including file defines as TESTRAND_SEED, uniform and roughly
 * normal floats from it, the fixed input of the quantizer checks, and the
 * FNV-1a 64 hash the tests compare bytes with (expected hashes computed once
 * from llama.cpp's output). */
#ifndef PK_TESTRAND_H
#define PK_TESTRAND_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifndef TESTRAND_SEED
#error "define TESTRAND_SEED before including testrand.h"
#endif

static uint64_t rng_state = TESTRAND_SEED;
static inline uint64_t rnd64(void) {              /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* uniform in [-1, 1) */
static inline float rndf(void) { return (float)((rnd64() >> 40) * 0x1p-24) * 2.0f - 1.0f; }
/* roughly normal: sum of 4 uniforms */
static inline float rndn(void) { return (rndf() + rndf() + rndf() + rndf()) * 0.8660254f; }

/* the quantizer checks' input (the llama.cpp hashes were made on it): an
 * integer hash -> [-1, 1), per-256 scale 2^(b % 7 - 3), a spike every 97
 * elements, every 11th 32-block zero */
static inline void gold_input(float *x, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t h = (uint32_t)i * 2654435761u;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        float v = (float)(h >> 8) * 0x1p-23f - 1.0f;
        v *= ldexpf(1.0f, (i / 256) % 7 - 3);
        if (i % 97 == 0) v *= 6.0f;
        if ((i / 32) % 11 == 10) v = 0.0f;
        x[i] = v;
    }
}

static inline uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

#endif
