/* storage.c - read bandwidth of a model file's device (see storage.h).
 *
 * Three patterns, each over at most 512 MiB of the file (so a probe takes a
 * few seconds): sequential 4 MiB reads with one in flight; random 4 MiB
 * reads and random reads of the expert cache's block size, `depth` threads
 * each issuing one pread at a time (the expert cache's I/O threads do the
 * same). Offsets are page-aligned, spread over the whole file by a fixed
 * pseudo-random sequence. With O_DIRECT the page cache plays no part;
 * without it (tmpfs, some network file systems) the file's pages are
 * dropped first (POSIX_FADV_DONTNEED), and the figure is what such a file
 * system gives. */
#include "storage.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/sysmacros.h>
#endif
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define BIG ((size_t)4 << 20)
#define BUDGET ((uint64_t)512 << 20)

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    int fd;
    uint64_t size;             /* file bytes */
    size_t block;
    uint64_t seed, bytes;      /* bytes to read; read */
    int err;
} job;

static void *rnd_reader(void *arg) {
    job *j = arg;
    void *buf;
    if (posix_memalign(&buf, PAGE, j->block)) { j->err = ENOMEM; return NULL; }
    uint64_t span = j->size > j->block ? (j->size - j->block) / PAGE : 0, x = j->seed, done = 0;
    while (done < j->bytes) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        off_t off = (off_t)((span ? (x >> 17) % span : 0) * PAGE);
        ssize_t r = pread(j->fd, buf, j->block, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { j->err = r < 0 ? errno : EIO; break; }
        done += (uint64_t)r;
    }
    j->bytes = done;
    free(buf);
    return NULL;
}

/* GB/s of `depth` threads reading `total` bytes at random in blocks */
static double rnd_gbs(int fd, uint64_t size, size_t block, int depth, uint64_t total, int *err) {
    pthread_t th[64];
    job jb[64];
    if (depth > 64) depth = 64;
    double t0 = wall();
    int started = 0;
    for (int i = 0; i < depth; i++) {
        jb[i] = (job){.fd = fd, .size = size, .block = block, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1),
                      .bytes = total / (uint64_t)depth};
        if (pthread_create(&th[i], NULL, rnd_reader, &jb[i]) == 0) started++;
        else break;
    }
    uint64_t got = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (jb[i].err) *err = jb[i].err;
        got += jb[i].bytes;
    }
    double dt = wall() - t0;
    return started && dt > 0 ? (double)got / dt / 1e9 : 0;
}

static double seq_gbs(int fd, uint64_t size, int *err) {
    void *buf;
    if (posix_memalign(&buf, PAGE, BIG)) { *err = ENOMEM; return 0; }
    uint64_t n = size < BUDGET ? size / BIG * BIG : BUDGET, got = 0;
    double t0 = wall();
    for (uint64_t off = 0; off < n;) {
        ssize_t r = pread(fd, buf, BIG, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { *err = r < 0 ? errno : EIO; break; }
        off += (uint64_t)r;
        got += (uint64_t)r;
    }
    double dt = wall() - t0;
    free(buf);
    return dt > 0 ? (double)got / dt / 1e9 : 0;
}

static int cache_path(char *buf, size_t cap, int mkdirs) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[512];
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache", home);
    else return -1;
    if (mkdirs) mkdir(dir, 0755);
    size_t n = strlen(dir);
    if (n + 16 >= sizeof dir) return -1;
    snprintf(dir + n, sizeof dir - n, "/pocket");
    if (mkdirs) mkdir(dir, 0755);
    snprintf(buf, cap, "%s/storage", dir);
    return 0;
}

int st_get(const char *path, size_t block, int depth, int refresh, st_result *out, char *why, size_t cap) {
    memset(out, 0, sizeof *out);
    block = (block + PAGE - 1) / PAGE * PAGE;
    if (block < PAGE) block = PAGE;
    if (depth < 1) depth = 1;
    out->block = block;
    out->depth = depth;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, cap, "%s: cannot stat: %s", path, strerror(errno));
        return -1;
    }
    char key[128], cpath[600], line[256];
    snprintf(key, sizeof key, "dev=%llx block=%zu depth=%d", (unsigned long long)st.st_dev, block, depth);
    if (!refresh && cache_path(cpath, sizeof cpath, 0) == 0) {
        FILE *f = fopen(cpath, "r");
        while (f && fgets(line, sizeof line, f)) {
            double a, b, c;
            int d, n = 0;
            if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ' ' &&
                sscanf(line + strlen(key), " seq=%lf rnd4m=%lf rnd=%lf direct=%d%n", &a, &b, &c, &d, &n) == 4 && n) {
                out->seq_gbs = a, out->rnd4m_gbs = b, out->rnd_gbs = c, out->direct = d, out->cached = 1;
            }
        }
        if (f) fclose(f);
        if (out->cached) return 0;
    }
    int fd = -1;
#ifdef O_DIRECT
    fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd >= 0) {
        void *probe;
        if (posix_memalign(&probe, PAGE, PAGE) == 0) {
            if (pread(fd, probe, PAGE, 0) < 0) { close(fd); fd = -1; }
            free(probe);
        }
    }
#endif
    out->direct = fd >= 0;
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
#ifdef POSIX_FADV_DONTNEED
    if (!out->direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#endif
    int err = 0;
    uint64_t size = (uint64_t)st.st_size;
    out->seq_gbs = seq_gbs(fd, size, &err);
#ifdef POSIX_FADV_DONTNEED
    if (!out->direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#endif
    if (!err) out->rnd4m_gbs = rnd_gbs(fd, size, BIG, depth, BUDGET / 2, &err);
#ifdef POSIX_FADV_DONTNEED
    if (!out->direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#endif
    if (!err) out->rnd_gbs = rnd_gbs(fd, size, block, depth, BUDGET / 2, &err);
    close(fd);
    if (err || !(out->seq_gbs > 0 && out->rnd4m_gbs > 0 && out->rnd_gbs > 0)) {
        snprintf(why, cap, "%s: storage probe failed: %s", path, strerror(err ? err : EIO));
        return -1;
    }
    if (cache_path(cpath, sizeof cpath, 1) == 0) {
        FILE *f = fopen(cpath, "a");
        if (f) {
            fprintf(f, "%s seq=%.4f rnd4m=%.4f rnd=%.4f direct=%d\n", key, out->seq_gbs, out->rnd4m_gbs, out->rnd_gbs,
                    out->direct);
            fclose(f);
        }
    }
    return 0;
}

int st_dev_counters(const char *path, st_dev_count *out) {
    memset(out, 0, sizeof *out);
#ifndef __linux__
    (void)path;
    return -1;
#else
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    char sp[96];
    snprintf(sp, sizeof sp, "/sys/dev/block/%u:%u/stat", major(st.st_dev), minor(st.st_dev));
    FILE *f = fopen(sp, "r");
    if (!f) return -1;
    /* reads, merged, sectors, ms; writes, merged, sectors, ms; in flight, io_ticks */
    unsigned long long v[10];
    int n = 0;
    while (n < 10 && fscanf(f, "%llu", &v[n]) == 1) n++;
    fclose(f);
    if (n < 10) return -1;
    out->read_bytes = (uint64_t)v[2] * 512u;
    out->busy_ms = (uint64_t)v[9];
    return 0;
#endif
}
