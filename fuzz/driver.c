/* driver.c - run a libFuzzer harness without libFuzzer: every file named on
 * the command line (or inside a directory named there) is passed once to
 * LLVMFuzzerTestOneInput. `make` links each fuzz/fuzz_*.c with this into
 * $(BUILD)/fuzz/, and tests/cli/t_fuzz_regress.sh replays the committed seeds
 * and the inputs of past findings (fuzz/regress/NAME) through them, under
 * ASan + UBSan in `make sanitize`. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "driver: cannot open %s\n", path); return 1; }
    size_t cap = 1 << 16, n = 0, r;
    uint8_t *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) { uint8_t *b = realloc(buf, cap *= 2); if (!b) { free(buf); buf = NULL; } else buf = b; }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "driver: out of memory for %s\n", path); return 1; }
    /* an exact-size copy, so that ASan sees any read past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return 1; }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int bad = 0, runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "driver: no such file %s\n", argv[i]); bad = 1; continue; }
        if (!S_ISDIR(st.st_mode)) { bad |= run_file(argv[i]); runs++; continue; }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            bad |= run_file(p);
            runs++;
        }
        if (d) closedir(d);
    }
    printf("%s: %d inputs run\n", argv[0], runs);
    return bad;
}
