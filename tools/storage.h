/* storage.h - read bandwidth of the device a model file lives on, for
 * `pocket bench` under a memory budget (--mem): reads of the file itself,
 * O_DIRECT where the file system allows (no page cache), as the expert
 * cache reads it. Cached per device (st_dev) and pattern in
 * $XDG_CACHE_HOME/pocket/storage (default ~/.cache/pocket/storage). */
#ifndef POCKET_STORAGE_H
#define POCKET_STORAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_result {
    double seq_gbs;        /* sequential 4 MiB reads, one in flight */
    double rnd4m_gbs;      /* random 4 MiB reads, `depth` in flight */
    double rnd_gbs;        /* random reads of `block` bytes, `depth` in flight */
    size_t block;          /* the expert cache's read size (page-rounded slice) */
    int depth;             /* reads in flight (the expert cache's I/O threads) */
    int direct;            /* 1: O_DIRECT */
    int cached;            /* 1: from the cache file */
} st_result;

/* Probe (or read the cached figures of) the device of path; block: the read
 * size to test besides 4 MiB; depth: reads in flight. refresh re-measures.
 * Returns 0, or -1 with a one-line reason in why[cap]. */
int st_get(const char *path, size_t block, int depth, int refresh, st_result *out, char *why, size_t cap);

/* The kernel's counters of the block device path lives on
 * (/sys/dev/block/MAJ:MIN/stat): milliseconds with a request in flight
 * (io_ticks) and bytes read, for the device's busy share of a timed run.
 * Returns 0, or -1 where the file system has no such device (tmpfs, NFS). */
typedef struct st_dev_count { uint64_t busy_ms, read_bytes; } st_dev_count;
int st_dev_counters(const char *path, st_dev_count *out);

#endif
