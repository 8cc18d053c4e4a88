/* test_xcache.c - the routed-expert cache's bookkeeping (src/model/xcache.c):
 * random routing traces with read-ahead guesses mixed in, through acquire
 * and through begin/next (one at a time, or all that are ready, up to a cap)
 * with each expert released when done (every pinned
 * expert's bytes equal its slice of the file, distinct experts never share
 * a slot, hits + misses = lookups, prefetched experts get used), the
 * same from two threads at once (one cache shared by two contexts), the
 * least-recently-used order, the storage bytes counted per miss and per
 * prefetch (whole pages, counted when queued, so reads that finish outside
 * a layer's wait count too), argument checks, and a file truncated under
 * the cache (a clear I/O error, nothing left pinned). Run from the project
 * root (the bundled model is models/kjv-moe-f16.gguf). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "model/model.h"
#include "testhelp.h"
#include "model/xcache.h"

#define MODEL "models/kjv-moe-f16.gguf"
enum { SLOTS = 3 };

static const pk_tensor *exps(const pk_model *m, int il, int k) {
    const pk_layer *L = &m->layers[il];
    return k == 0 ? &L->gate_exps : k == 1 ? &L->up_exps : &L->down_exps;
}

/* bytes the cache asks the device for to read expert e of layer il: each
 * slice's covering 4 KiB pages, the last ending at the file's last page */
static uint64_t read_bytes(const pk_model *m, int il, int e) {
    const uint64_t P = 4096, fend = (m->gguf->size + P - 1) / P * P;
    uint64_t sum = 0;
    for (int k = 0; k < 3; k++) {
        const pk_tensor *t = exps(m, il, k);
        const uint64_t len = (uint64_t)t->ne[1] * t->row_bytes;
        const uint64_t off = (uint64_t)((const uint8_t *)t->data - m->gguf->map) + (uint64_t)e * len;
        uint64_t end = (off + len + P - 1) / P * P;
        if (end > fend) end = fend;
        sum += end - off / P * P;
    }
    return sum;
}

typedef struct {
    const pk_model *m;
    uint64_t seed;
    int iters, bad_bytes, bad_slot, bad_rc;
    pk_xcache_stats st;
} trace_arg;

static uint32_t rnd(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

static void *trace(void *arg) {
    trace_arg *a = arg;
    const pk_model *m = a->m;
    const int E = m->hp.n_expert, L = m->hp.n_layer;
    for (int it = 0; it < a->iters; it++) {
        int il = (int)(rnd(&a->seed) % (uint32_t)L), n = 1 + (int)(rnd(&a->seed) % SLOTS), ex[SLOTS];
        for (int i = 0; i < n; i++) {
            int e, dup;
            do {
                e = (int)(rnd(&a->seed) % (uint32_t)E);
                dup = 0;
                for (int j = 0; j < i; j++) dup |= ex[j] == e;
            } while (dup);
            ex[i] = e;
        }
        const void *ptr[3 * SLOTS];
        pk_error err = {0};
        if (rnd(&a->seed) % 3 == 0) {           /* read ahead a guess, maybe of this very layer */
            int g[2] = {(int)(rnd(&a->seed) % (uint32_t)E), (int)(rnd(&a->seed) % (uint32_t)E)};
            pk_xcache_prefetch(m->xc, rnd(&a->seed) % 2 ? il : (il + 1) % L, g, g[0] != g[1] ? 2 : 1, &a->st);
        }
        if (rnd(&a->seed) % 2) {                 /* in two steps, each expert released when done */
            int slot[SLOTS], seen = 0;
            uint8_t taken[SLOTS];
            pk_xcache_set set = {.il = il, .n = n, .n_taken = 0, .ex = ex, .slot = slot, .taken = taken};
            if (pk_xcache_begin(m->xc, &set, &a->st, &err)) { a->bad_rc++; continue; }
            const int rounds = rnd(&a->seed) % 2;   /* one at a time, or all that are ready (up to cap) */
            for (int left = n; left > 0;) {
                const void *p[3 * SLOTS];
                int idx[SLOTS], got;
                if (rounds) {
                    const int cap = 1 + (int)(rnd(&a->seed) % (uint32_t)left);
                    got = pk_xcache_next_ready(m->xc, &set, idx, p, cap, &a->st, &err);
                    if (got < 1 || got > cap) { a->bad_rc++; break; }
                } else {
                    got = 1;
                    idx[0] = pk_xcache_next(m->xc, &set, p, &a->st, &err);
                }
                int bad = 0;
                for (int j = 0; j < got; j++) {
                    const int i = idx[j];
                    if (i < 0 || i >= n || (seen >> i & 1) || (j && i <= idx[j - 1])) { bad = 1; break; }
                    seen |= 1 << i;
                    for (int k = 0; k < 3; k++) {
                        const pk_tensor *t = exps(m, il, k);
                        size_t len = (size_t)t->ne[1] * t->row_bytes;
                        if (memcmp(p[3 * j + k], (const uint8_t *)t->data + (size_t)ex[i] * len, len)) a->bad_bytes++;
                    }
                    pk_xcache_release(m->xc, il, &ex[i], 1);
                }
                if (bad) { a->bad_rc++; break; }
                left -= got;
            }
            const void *p[3];
            if (seen == (1 << n) - 1 && pk_xcache_next(m->xc, &set, p, &a->st, &err) != -1) a->bad_rc++;
            continue;
        }
        if (pk_xcache_acquire(m->xc, il, ex, n, ptr, &a->st, &err)) { a->bad_rc++; continue; }
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 3; k++) {
                const pk_tensor *t = exps(m, il, k);
                size_t len = (size_t)t->ne[1] * t->row_bytes;
                if (memcmp(ptr[3 * i + k], (const uint8_t *)t->data + (size_t)ex[i] * len, len)) a->bad_bytes++;
                for (int j = 0; j < i; j++)
                    if (ptr[3 * j + k] == ptr[3 * i + k]) a->bad_slot++;
            }
        if (rnd(&a->seed) % 4 == 0) usleep(50);  /* hold the pins a while */
        pk_xcache_release(m->xc, il, ex, n);
    }
    return NULL;
}

static pk_model *load(const char *path, int slots) {
    pk_model_params mp = pk_model_default_params();
    mp.expert_slots = slots;
    pk_model *m = NULL;
    pk_error err = {0};
    if (pk_model_load_params(path, &mp, &m, &err)) fprintf(stderr, "load %s: %s\n", path, err.msg);
    return m;
}

int main(void) {
    pk_model *m = load(MODEL, SLOTS);
    TEST_COND("bundled model loads with an expert cache", m && m->xc);
    if (!m || !m->xc) return TEST_REPORT();
    TEST_COND("slots as asked", pk_xcache_slots(m->xc) == SLOTS);
    pk_model_plan pl;
    pk_model_get_plan(m, &pl);
    TEST_CHECK(pl.streaming && pl.expert_slots == SLOTS && pl.n_expert == 16,
               "plan: streaming %d, slots %d, experts %d", pl.streaming, pl.expert_slots, pl.n_expert);

    /* one thread: a random trace */
    trace_arg a = {.m = m, .seed = 0x9e3779b97f4a7c15ull, .iters = 3000};
    trace(&a);
    TEST_CHECK(!a.bad_rc && !a.bad_bytes && !a.bad_slot, "trace: %d failed acquires, %d wrong slices, %d shared slots",
               a.bad_rc, a.bad_bytes, a.bad_slot);
    TEST_CHECK(a.st.hits + a.st.misses > 3000 && a.st.hits > 0 && a.st.misses > 0,
               "trace counters: %llu hits, %llu misses", (unsigned long long)a.st.hits, (unsigned long long)a.st.misses);
    TEST_CHECK(a.st.prefetches > 0 && a.st.prefetch_hits > 0 && a.st.prefetch_hits <= a.st.prefetches,
               "prefetch counters: %llu issued, %llu used", (unsigned long long)a.st.prefetches,
               (unsigned long long)a.st.prefetch_hits);

    /* two threads on one cache (two contexts of one model) */
    trace_arg b[2] = {{.m = m, .seed = 1, .iters = 1500}, {.m = m, .seed = 2, .iters = 1500}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, trace, &b[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        TEST_CHECK(!b[i].bad_rc && !b[i].bad_bytes && !b[i].bad_slot,
                   "thread %d: %d failed acquires, %d wrong slices, %d shared slots", i, b[i].bad_rc, b[i].bad_bytes,
                   b[i].bad_slot);
    pk_model_free(m);

    /* least frequently used, then least recently used: 3 slots of layer 0 */
    m = load(MODEL, SLOTS);
    TEST_COND("reload", m && m->xc);
    if (!m) return TEST_REPORT();
    /* 3 evicts 1 (used once, before 2); 1 evicts 2 (2 and 3 used once, 2
       earlier); 2 evicts 3 (used once); 4 evicts 2 (used twice; 0 and 1
       three times) where LRU would evict 0; 2 then evicts 4 */
    const int seq[] = {0, 1, 2, 0, 3, 1, 0, 2, 1, 4, 2, 1, 0};
    const int miss[] = {1, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        pk_xcache_stats st = {0};
        const void *ptr[3];
        pk_error err = {0};
        int rc = pk_xcache_acquire(m->xc, 0, &seq[i], 1, ptr, &st, &err);
        TEST_CHECK(!rc && st.misses == (uint64_t)miss[i], "LRU step %zu (expert %d): rc %d, misses %llu, want %d", i,
                   seq[i], rc, (unsigned long long)st.misses, miss[i]);
        const uint64_t want = miss[i] ? read_bytes(m, 0, seq[i]) : 0;
        TEST_CHECK(st.bytes_read == want, "LRU step %zu: %llu bytes read counted, want %llu", i,
                   (unsigned long long)st.bytes_read, (unsigned long long)want);
        pk_xcache_release(m->xc, 0, &seq[i], 1);
    }
    {
        /* a prefetch counts its bytes when queued, before (and whether or
           not) any lookup waits for it; a guess already cached reads nothing */
        pk_xcache_stats st = {0};
        const int g[2] = {7, 0};   /* 7 never looked up; 0 cached above */
        pk_xcache_prefetch(m->xc, 0, g, 2, &st);
        TEST_CHECK(st.prefetches == 1 && st.bytes_read == read_bytes(m, 0, 7),
                   "prefetch: %llu issued, %llu bytes counted, want 1 and %llu", (unsigned long long)st.prefetches,
                   (unsigned long long)st.bytes_read, (unsigned long long)read_bytes(m, 0, 7));
        const void *ptr[3];
        pk_error err = {0};
        pk_xcache_stats st2 = {0};
        TEST_CHECK(pk_xcache_acquire(m->xc, 0, &g[0], 1, ptr, &st2, &err) == PK_OK && st2.hits == 1 &&
                   st2.prefetch_hits == 1 && st2.bytes_read == 0,
                   "prefetched expert: %llu hits, %llu prefetch hits, %llu bytes counted again",
                   (unsigned long long)st2.hits, (unsigned long long)st2.prefetch_hits,
                   (unsigned long long)st2.bytes_read);
        pk_xcache_release(m->xc, 0, &g[0], 1);
    }
    {
        /* guesses settled by the layer's routing, the readers held so that
           none has started: of guesses {8, 9} for layer 1, 8 is in the set
           {8, 10} (read at once as a demand read: a prefetch hit), 9 is not
           (withdrawn: uncounted, no longer cached, its slot free again) */
        pk_xcache_stats st = {0};
        const int g[2] = {8, 9}, want[2] = {8, 10};
        pk_xcache_hold(m->xc, 1);
        pk_xcache_prefetch(m->xc, 1, g, 2, &st);
        TEST_CHECK(st.prefetches == 2 && st.bytes_read == read_bytes(m, 1, 8) + read_bytes(m, 1, 9),
                   "two guesses queued: %llu issued, %llu bytes", (unsigned long long)st.prefetches,
                   (unsigned long long)st.bytes_read);
        int slot[2], idx[2];
        uint8_t taken[2];
        const void *ptr[6];
        pk_error err = {0};
        pk_xcache_set set = {.il = 1, .n = 2, .n_taken = 0, .ex = want, .slot = slot, .taken = taken};
        TEST_COND("begin {8, 10}", pk_xcache_begin(m->xc, &set, &st, &err) == PK_OK);
        TEST_CHECK(st.prefetches == 1 && st.prefetch_hits == 1 && st.misses == 1 && st.hits == 1 &&
                       st.bytes_read == read_bytes(m, 1, 8) + read_bytes(m, 1, 10),
                   "settled: %llu prefetches, %llu used, %llu hits, %llu misses, %llu bytes (want 1 1 1 1 %llu)",
                   (unsigned long long)st.prefetches, (unsigned long long)st.prefetch_hits,
                   (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.bytes_read,
                   (unsigned long long)(read_bytes(m, 1, 8) + read_bytes(m, 1, 10)));
        pk_xcache_hold(m->xc, 0);
        int got = 0, bad = 0;
        while (got < 2) {
            int k = pk_xcache_next_ready(m->xc, &set, idx, ptr, 2, &st, &err);
            if (k < 1) { bad = 1; break; }
            for (int j = 0; j < k; j++)
                for (int t = 0; t < 3; t++) {
                    const pk_tensor *tt = exps(m, 1, t);
                    size_t len = (size_t)tt->ne[1] * tt->row_bytes;
                    bad |= memcmp(ptr[3 * j + t], (const uint8_t *)tt->data + (size_t)want[idx[j]] * len, len) != 0;
                }
            got += k;
        }
        TEST_COND("the promoted guess and the miss arrive with the file's bytes", !bad && got == 2);
        pk_xcache_release(m->xc, 1, want, 2);
        pk_xcache_stats st3 = {0};
        TEST_CHECK(pk_xcache_acquire(m->xc, 1, &g[1], 1, ptr, &st3, &err) == PK_OK && st3.misses == 1,
                   "the withdrawn guess is not cached: %llu misses", (unsigned long long)st3.misses);
        pk_xcache_release(m->xc, 1, &g[1], 1);
        /* another caller's begin leaves this caller's queued guesses alone */
        pk_xcache_stats mine = {0}, other = {0};
        const int g2 = 11, o2 = 12;
        pk_xcache_hold(m->xc, 1);
        pk_xcache_prefetch(m->xc, 2, &g2, 1, &mine);
        pk_xcache_set s2 = {.il = 2, .n = 1, .n_taken = 0, .ex = &o2, .slot = slot, .taken = taken};
        TEST_COND("begin of another caller", pk_xcache_begin(m->xc, &s2, &other, &err) == PK_OK);
        pk_xcache_hold(m->xc, 0);
        TEST_COND("its expert arrives", pk_xcache_next(m->xc, &s2, ptr, &other, &err) == 0);
        pk_xcache_release(m->xc, 2, &o2, 1);
        TEST_CHECK(mine.prefetches == 1 && mine.bytes_read == read_bytes(m, 2, 11),
                   "the first caller's guess stays: %llu prefetches", (unsigned long long)mine.prefetches);
        pk_xcache_stats st4 = {0};
        TEST_CHECK(pk_xcache_acquire(m->xc, 2, &g2, 1, ptr, &st4, &err) == PK_OK && st4.hits == 1 &&
                       st4.prefetch_hits == 1,
                   "and is a hit when looked up: %llu hits", (unsigned long long)st4.hits);
        pk_xcache_release(m->xc, 2, &g2, 1);
    }
    {
        const int four[4] = {0, 1, 2, 3};
        const void *ptr[12];
        pk_error err = {0};
        TEST_COND("more experts than slots at once: PK_ERR_ARG",
                  pk_xcache_acquire(m->xc, 0, four, 4, ptr, NULL, &err) == PK_ERR_ARG && err.msg[0]);
        TEST_COND("layer out of range: PK_ERR_ARG", pk_xcache_acquire(m->xc, 99, four, 1, ptr, NULL, &err) == PK_ERR_ARG);
        /* all ready at once: room for none is refused, the two come back
           (in one call or two), then none is left */
        int slot[2], idx[2];
        uint8_t taken[2];
        pk_xcache_set set = {.il = 0, .n = 2, .n_taken = 0, .ex = four, .slot = slot, .taken = taken};
        TEST_COND("begin two", pk_xcache_begin(m->xc, &set, NULL, &err) == PK_OK);
        err.msg[0] = 0;
        TEST_COND("next_ready with room for none: -1 and a message",
                  pk_xcache_next_ready(m->xc, &set, idx, ptr, 0, NULL, &err) == -1 && err.msg[0]);
        int got = 0, tries = 0;
        while (got < 2 && tries++ < 2) {
            int g = pk_xcache_next_ready(m->xc, &set, idx + got, ptr + 3 * got, 2 - got, NULL, &err);
            if (g < 1) break;
            got += g;
        }
        TEST_CHECK(got == 2 && idx[0] + idx[1] == 1 && idx[0] != idx[1], "next_ready: %d experts, indices %d %d", got,
                   idx[0], idx[1]);
        TEST_COND("next_ready with none left: -1",
                  pk_xcache_next_ready(m->xc, &set, idx, ptr, 2, NULL, &err) == -1);
        pk_xcache_release(m->xc, 0, four, 2);
    }
    pk_model_free(m);

    /* a file truncated under the cache: the read fails cleanly */
    char tmp[] = "/tmp/pocket-xcache-XXXXXX";
    int fd = mkstemp(tmp);
    TEST_COND("temp file", fd >= 0);
    FILE *in = fopen(MODEL, "rb");
    char buf[1 << 16];
    size_t r, total = 0;
    while (in && (r = fread(buf, 1, sizeof buf, in)) > 0) total += (size_t)write(fd, buf, r);
    if (in) fclose(in);
    m = load(tmp, 1);
    TEST_COND("copy loads", m && m->xc);
    if (m) {
        const int L = m->hp.n_layer;
        const pk_tensor *t = exps(m, L - 1, 2);
        uint64_t cut = (uint64_t)((const uint8_t *)t->data - m->gguf->map);
        TEST_COND("truncate", ftruncate(fd, (off_t)cut) == 0);
        int e = 5;
        const void *ptr[3];
        pk_error err = {0};
        int rc = pk_xcache_acquire(m->xc, L - 1, &e, 1, ptr, NULL, &err);
        TEST_CHECK(rc == PK_ERR_IO && strstr(err.msg, "end of file") && strstr(err.msg, tmp),
                   "truncated file: rc %d, '%s'", rc, err.msg);
        /* nothing stays pinned: a later acquire of another layer still works */
        e = 1;
        rc = pk_xcache_acquire(m->xc, 0, &e, 1, ptr, NULL, &err);
        TEST_CHECK(rc == PK_OK, "acquire after the failure: rc %d '%s'", rc, err.msg);
        if (!rc) pk_xcache_release(m->xc, 0, &e, 1);
        pk_model_free(m);
    }
    (void)total;
    close(fd);
    unlink(tmp);
    return TEST_REPORT();
}
