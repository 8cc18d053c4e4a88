/* test_platform.c - the portability layer (src/core/platform.h) and the thread
 * pool on top of it, in whichever branch this build compiled (Linux futex,
 * or the POSIX fallback with -DPK_PORTABLE / `make PORTABLE=1`).
 *
 * Checks: the branch is the one the build asked for; word wait/wake as a
 * ping-pong between two threads (a lost wake-up would hang: an alarm turns
 * that into a failure); a wait on a word that already differs returns; the
 * pool runs every chunk exactly once across many jobs with sleeping workers;
 * the CPU name is set and printable; the mapping hint accepts a mapping.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "testhelp.h"
#include "core/platform.h"
#include "core/threads.h"
#include "pocket.h"

#define ROUNDS 20000

static atomic_uint word;

/* Thread B: wait for odd values, answer with the next even one. */
static void *pong(void *arg) {
    (void)arg;
    for (unsigned i = 0; i < ROUNDS; i++) {
        unsigned want = 2 * i + 1;
        unsigned w;
        while ((w = atomic_load(&word)) != want) pk_word_wait(&word, w);
        atomic_store(&word, want + 1);
        pk_word_wake_all(&word);
    }
    return NULL;
}

static void test_ping_pong(void) {
    atomic_store(&word, 0);
    pthread_t t;
    TEST_COND("pthread_create", pthread_create(&t, NULL, pong, NULL) == 0);
    for (unsigned i = 0; i < ROUNDS; i++) {
        atomic_store(&word, 2 * i + 1);
        pk_word_wake_all(&word);
        unsigned w;
        while ((w = atomic_load(&word)) != 2 * i + 2) pk_word_wait(&word, w);
    }
    pthread_join(t, NULL);
    TEST_CHECK(atomic_load(&word) == 2 * ROUNDS, "ping-pong ended at %u", atomic_load(&word));
    atomic_store(&word, 7);
    pk_word_wait(&word, 6); /* already differs: must return */
    TEST_COND("wait on a changed word returns", 1);
}

typedef struct { atomic_int *hits; } pool_arg;
static void count_chunk(void *va, int i) {
    pool_arg *a = va;
    atomic_fetch_add(&a->hits[i], 1);
}

static void test_pool(void) {
    pk_pool *p = pk_pool_new(3);
    TEST_COND("pk_pool_new", p != NULL);
    if (!p) return;
    enum { N = 37 };
    atomic_int hits[N];
    pool_arg a = {hits};
    int bad = 0;
    for (int job = 0; job < 300; job++) {
        for (int i = 0; i < N; i++) atomic_store(&hits[i], 0);
        /* now and then let the workers fall asleep, so wake-ups are exercised */
        if (job % 50 == 0) usleep(20000);
        pk_pool_run(p, count_chunk, &a, N);
        for (int i = 0; i < N; i++) bad += atomic_load(&hits[i]) != 1;
    }
    TEST_CHECK(bad == 0, "pool: %d chunks not run exactly once", bad);
    pk_pool_free(p);
}

static void test_cpu_name(void) {
    char name[256];
    pk_cpu_name(name, sizeof name);
    int printable = name[0] != 0;
    for (const char *c = name; *c; c++) printable &= (unsigned char)*c >= 32 && *c != '\t';
    TEST_CHECK(printable, "cpu name '%s'", name);
    char tiny[4];
    pk_cpu_name(tiny, sizeof tiny);
    TEST_COND("cpu name fits a small buffer", strlen(tiny) < sizeof tiny);
    fprintf(stderr, "platform %s, cpu %s, arm features 0x%x\n", pk_platform_name(), name,
            pk_arm_features());
}

static void test_branch(void) {
#if defined(PK_PORTABLE) || !(defined(__linux__) || defined(__APPLE__))
    const char *want = "posix";
#elif defined(__linux__)
    const char *want = "linux";
#else
    const char *want = "apple";
#endif
    TEST_CHECK(!strcmp(pk_platform_name(), want), "platform %s, want %s", pk_platform_name(), want);
#if !defined(__aarch64__)
    TEST_CHECK(pk_arm_features() == 0, "arm features 0x%x off AArch64", pk_arm_features());
#endif
}

static void test_map_hint(void) {
    size_t n = (size_t)4 << 20;
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TEST_COND("mmap", m != MAP_FAILED);
    if (m == MAP_FAILED) return;
    pk_map_hint_sequential(m, n);
    TEST_COND("mapping readable after the hint", ((volatile char *)m)[n - 1] == 0);
    munmap(m, n);
}

int main(void) {
    alarm(120); /* a lost wake-up hangs: fail instead (SIGALRM) */
    test_branch();
    test_ping_pong();
    test_pool();
    test_cpu_name();
    test_map_hint();
    return TEST_REPORT();
}
