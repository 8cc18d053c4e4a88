/* core/common.h - internal helpers shared by every pocket source file: status
 * codes, error reporting with a message, checked size arithmetic. */
#ifndef PK_COMMON_H
#define PK_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include "pocket.h"

/* Fill e->msg with a printf-style message (if e is not NULL) and return code.
 * Messages name the file, the field and the value, on one line. */
int pk_errorf(pk_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Overflow-checked arithmetic: return 1 and store the result when it fits,
 * 0 when it would overflow (the output is then unspecified). */
static inline int pk_mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int pk_add_ok(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* PK_ASSERT(cond): a contract the code relies on but does not check at run
 * time in normal builds (capacities, layouts, counts). Built with
 * -DPK_ASSERTS (`make sanitize`, `make fuzz`, or ASSERTS=1) a violation
 * prints "pocket: assertion failed: COND (file:line, function)" and aborts;
 * otherwise it compiles to nothing (cond is type-checked, never evaluated).
 * Bad input never reaches one: input is checked with an error message. */
#ifdef PK_ASSERTS
#define PK_ASSERT(cond) ((cond) ? (void)0 : pk_assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define PK_ASSERT(cond) ((void)sizeof(!(cond)))
#endif
void pk_assert_fail(const char *cond, const char *file, int line, const char *func)
    __attribute__((noreturn));

/* Allocation that returns NULL on overflow of n*size; memory is zeroed.
 * pk_alloc_bytes counts the bytes this thread asked pk_calloc for (a
 * context's memory is the difference across its creation). */
void *pk_calloc(size_t n, size_t size);
extern _Thread_local uint64_t pk_alloc_bytes;

/* Monotonic wall clock in seconds. */
double pk_time(void);

/* A 64-bit hash of n bytes, continuing from h (0 to start): chunks hashed
 * one after the other give one hash of the sequence of chunks (not of their
 * concatenation). For identities and checksums, not for security. */
uint64_t pk_hash64(uint64_t h, const void *p, size_t n);

#endif
