/* model/xcache.h - the routed-expert cache of a model loaded under a memory
 * budget (pk_model_params.mem): the experts' slices (gate, up and down of
 * one expert in one layer) live in a fixed pool of slots per layer and are
 * read from the file on a miss; everything else stays mapped.
 *
 * Shared by every context of the model (pocket serve runs several), so the
 * bookkeeping is under one mutex and a slot in use is pinned: acquire pins
 * the experts a forward pass needs (reading the misses), release unpins them. A call never holds pins while
 * it waits, so contexts cannot deadlock; it needs at most slots_per_layer
 * experts at once (engine/kinds/moe.c runs larger sets in rounds).
 */
#ifndef PK_XCACHE_H
#define PK_XCACHE_H

#include <stdint.h>
#include "core/common.h"
#include "core/threads.h"

struct pk_model;
typedef struct pk_xcache pk_xcache;

/* Counters of one context's use of the cache (added to by acquire). */
typedef struct pk_xcache_stats {
    uint64_t hits, misses;        /* expert lookups */
    uint64_t prefetches;          /* experts queued by pk_xcache_prefetch, less those
                                     withdrawn unread (see there) */
    uint64_t prefetch_hits;       /* lookups that found a prefetched expert */
    uint64_t bytes_read;          /* file bytes its misses and prefetches asked the
                                     device for (whole pages), counted when queued */
    double read_secs;             /* wall time spent waiting for them */
} pk_xcache_stats;

/* A cache of `slots` experts per layer for m's routed expert tensors, read
 * from m->path (O_DIRECT where the file system allows it, else buffered
 * reads that drop the pages they read from the page cache). */
int pk_xcache_new(const struct pk_model *m, int slots, pk_xcache **out, pk_error *err);
void pk_xcache_free(pk_xcache *xc);
int pk_xcache_slots(const pk_xcache *xc);
int pk_xcache_io_depth(void);  /* reads in flight at most (its I/O threads) */
/* bytes of one slot (the three slices with their alignment margins), of
 * xc and of a cache m would get */
uint64_t pk_xcache_slot_bytes(const pk_xcache *xc);
uint64_t pk_xcache_plan_slot_bytes(const struct pk_model *m);

/* Pin experts ex[0..n) (distinct, n <= slots) of layer il, reading those
 * not resident (in parallel, on the cache's I/O threads); ptr[3 * i + k] receives the data of expert ex[i]'s slice of
 * gate (k = 0), up (1) and down (2), each pointing at the expert's first
 * row. On an I/O error nothing stays pinned and err says what failed. Uses
 * the calling thread's pk_thread_scratch (core/threads.h): not to be called
 * while the caller holds it. */
int pk_xcache_acquire(pk_xcache *xc, int il, const int *ex, int n, const void **ptr,
                      pk_xcache_stats *st, pk_error *err);
void pk_xcache_release(pk_xcache *xc, int il, const int *ex, int n);

/* The same in two steps, to compute each expert as soon as its data is in:
 * pk_xcache_begin pins ex[0..n) of layer il and queues the misses' reads
 * (first of all), returning at once; each pk_xcache_next then waits until
 * one of the experts not yet returned is ready and returns its index i in
 * ex (ptr[k]: its slices, as above), or -1 on an I/O error, after which
 * the experts not yet returned are no longer pinned. The caller releases
 * each returned expert (pk_xcache_release) when done with it. set->slot
 * and set->taken are the caller's arrays of n entries. */
typedef struct pk_xcache_set {
    int il, n, n_taken;
    const int *ex;
    int *slot;
    uint8_t *taken;
} pk_xcache_set;
int pk_xcache_begin(pk_xcache *xc, pk_xcache_set *set, pk_xcache_stats *st, pk_error *err);
int pk_xcache_next(pk_xcache *xc, pk_xcache_set *set, const void **ptr, pk_xcache_stats *st, pk_error *err);
/* The same for all of them that are ready: waits until at least one of the
 * experts not yet returned is ready, then returns how many are (1 .. cap),
 * their indices in ex in idx[] (ascending) and their slices in ptr[3 * j + k];
 * -1 as pk_xcache_next (cap < 1: -1 and an error, nothing else changes). */
int pk_xcache_next_ready(pk_xcache *xc, pk_xcache_set *set, int *idx, const void **ptr, int cap,
                         pk_xcache_stats *st, pk_error *err);
/* Queue reads of those of ex[0..n) (layer il) that are not cached, into
 * slots no one has pinned, behind the demand reads; returns at once. A
 * guess: the output does not depend on it, only the hit rate. When the
 * same caller (same st) then begins a set of layer il, its guesses whose
 * reads have not started are settled: those in the set are read at once
 * (as demand reads), the others are withdrawn (their slots emptied, taken
 * back from st's prefetches and bytes_read). */
void pk_xcache_prefetch(pk_xcache *xc, int il, const int *ex, int n, pk_xcache_stats *st);

/* Tests: hold != 0 stops the readers from starting reads (queued ones
 * wait), 0 lets them go on. */
void pk_xcache_hold(pk_xcache *xc, int hold);

#endif
