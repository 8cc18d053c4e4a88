/* testhelp.h - a tiny test harness (after Redis' testhelp.h).
 * TEST_COND(name, cond) records one check; TEST_REPORT() prints the totals
 * and returns the process exit status (non-zero if anything failed). */
#ifndef PK_TESTHELP_H
#define PK_TESTHELP_H
#include <stdio.h>

static int th_passed, th_failed;

#define TEST_COND(descr, cond) do { \
    if (cond) th_passed++; \
    else { th_failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, descr); } \
} while (0)

/* Like TEST_COND but with a printf-style message on failure. */
#define TEST_CHECK(cond, ...) do { \
    if (cond) th_passed++; \
    else { th_failed++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#define TEST_REPORT() ( \
    fprintf(stderr, "%s: %d checks passed, %d failed\n", __FILE__, th_passed, th_failed), \
    th_failed ? 1 : 0)

#endif
