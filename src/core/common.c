/* core/common.c - error messages, checked allocation, clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/common.h"

int pk_errorf(pk_error *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
        /* one line: never let a newline from a file's bytes through */
        for (char *p = e->msg; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
    }
    return code;
}

void pk_assert_fail(const char *cond, const char *file, int line, const char *func) {
    fprintf(stderr, "pocket: assertion failed: %s (%s:%d, %s)\n", cond, file, line, func);
    abort();
}

_Thread_local uint64_t pk_alloc_bytes;

void *pk_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p) pk_alloc_bytes += (uint64_t)(n ? n : 1) * (size ? size : 1);
    return p;
}

double pk_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *pk_status_str(int code) {
    switch (code) {
    case PK_OK: return "ok";
    case PK_ERR_IO: return "i/o error";
    case PK_ERR_FORMAT: return "format error";
    case PK_ERR_UNSUPPORTED: return "unsupported";
    case PK_ERR_NOMEM: return "out of memory";
    case PK_ERR_ARG: return "bad argument";
    case PK_ERR_CONTEXT: return "context full";
    }
    return "unknown error";
}

static inline uint64_t rotl64(uint64_t x, int r) { return x << r | x >> (64 - r); }

/* MurmurHash3-style mixing of 8-byte words, the length folded in, then a
   final avalanche. */
uint64_t pk_hash64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    const uint64_t k1 = 0x87c37b91114253d5ull, k2 = 0x4cf5ad432745937full;
    h ^= (uint64_t)n * 0x9e3779b97f4a7c15ull;
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h ^= rotl64(w * k1, 31) * k2;
        h = rotl64(h, 27) * 5 + 0x52dce729;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)b[i] << (8 * i);
    h ^= rotl64(w * k1, 31) * k2;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 33;
}
