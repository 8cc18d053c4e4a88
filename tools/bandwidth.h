/* bandwidth.h - memory read bandwidth of this machine, for `pocket bench`:
 * a STREAM-style read probe (sum of a large array by N threads), cached per
 * CPU model and thread count in $XDG_CACHE_HOME/pocket/bandwidth (default
 * ~/.cache/pocket/bandwidth). */
#ifndef POCKET_BANDWIDTH_H
#define POCKET_BANDWIDTH_H

#include <stddef.h>

typedef struct bw_result {
    double best_gbs;   /* fastest pass, 1e9 bytes/s */
    double mean_gbs;   /* mean over the timed passes */
    double min_gbs;    /* slowest pass */
    int n_threads, passes;
    size_t bytes;      /* array size */
    long when;         /* unix time of the measurement */
    int cached;        /* 1: read from the cache file */
} bw_result;

/* The CPU model, into buf[cap]: pk_cpu_name (include/pocket.h) - "model
 * name" of /proc/cpuinfo on x86 Linux, the board, SoC or core (MIDR) on
 * AArch64 Linux, machdep.cpu.brand_string on Apple, else "unknown". */
void bw_cpu_model(char *buf, size_t cap);

/* Read bytes of memory (rounded down to whole 4 KiB pages; at least 1 MiB)
 * passes times with n_threads threads (each summing its own slice, placed
 * by first touch), after one untimed pass. Returns 0, or -1 with a one-line
 * reason in why[cap] (out of memory, thread creation failed). */
int bw_measure(size_t bytes, int n_threads, int passes, bw_result *out, char *why, size_t cap);

/* The cached figure for (cpu, n_threads), or, when there is none or refresh
 * is set, a fresh 1 GiB x 5-pass measurement that is then stored (a cache
 * that cannot be written is not an error). A build with AddressSanitizer
 * neither reads nor writes the cache. Returns 0 or -1 as bw_measure. */
int bw_get(const char *cpu, int n_threads, int refresh, bw_result *out, char *why, size_t cap);

#endif
