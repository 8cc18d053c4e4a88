/* balloon.c - emulate a smaller machine: hold memory so that only a given
 * amount stays available to everything else, until killed.
 *
 *   cc -O2 bench/balloon.c -o build/balloon
 *   build/balloon --leave 8G &      # MemAvailable left at about 8 GiB
 *   build/balloon 16G &             # or: hold exactly 16 GiB
 *
 * The memory is allocated, written (so it is really resident) and locked
 * with mlock (as root, or with a large enough RLIMIT_MEMLOCK; without the
 * lock the kernel may swap it out where there is swap). It prints one line
 * when it holds the memory, then sleeps until SIGTERM/SIGINT. Not a test:
 * bench/budget.sh uses it to run pocket and llama.cpp on a "device" with
 * less memory than the file. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static unsigned long long mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb << 10;
}

static unsigned long long size_arg(const char *s) {
    char *end;
    double v = strtod(s, &end);
    double mul = *end == 'G' || *end == 'g' ? 1073741824.0 : *end == 'M' || *end == 'm' ? 1048576.0 : 1.0;
    if (end == s || v < 0 || (mul == 1.0 && *end) || (mul > 1.0 && end[1])) {
        fprintf(stderr, "balloon: '%s' is not a size (e.g. 8G, 512M)\n", s);
        exit(2);
    }
    return (unsigned long long)(v * mul);
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

int main(int argc, char **argv) {
    unsigned long long hold;
    if (argc == 3 && !strcmp(argv[1], "--leave")) {
        unsigned long long avail = mem_available(), leave = size_arg(argv[2]);
        if (avail <= leave) {
            fprintf(stderr, "balloon: only %.2f GiB available, nothing to hold\n", avail / 1073741824.0);
            return 1;
        }
        hold = avail - leave;
    } else if (argc == 2) {
        hold = size_arg(argv[1]);
    } else {
        fprintf(stderr, "usage: balloon SIZE | balloon --leave SIZE\n");
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    const size_t chunk = (size_t)1 << 30;
    size_t held = 0;
    while (held < hold && !stop) {
        size_t n = hold - held < chunk ? (size_t)(hold - held) : chunk;
        char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("balloon: mmap");
            return 1;
        }
        memset(p, 0x5a, n);
        if (mlock(p, n) != 0) perror("balloon: mlock (held, not locked)");
        held += n;
    }
    printf("balloon: holding %.2f GiB; MemAvailable now %.2f GiB\n", held / 1073741824.0,
           mem_available() / 1073741824.0);
    fflush(stdout);
    while (!stop) pause();
    return 0;
}
