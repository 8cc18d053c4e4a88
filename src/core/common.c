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
