/* test_mapguard.c - a model file that changes while it is mapped.
 *
 * A copy of the bundled model is loaded and decoded, then truncated (as an
 * in-place `cp` or a restarted download would) behind the loaded model:
 *   - pk_model_check_file reports the change, naming the file and sizes (and
 *     an in-place write that keeps the size, by the modification time);
 *   - decoding again in a child process with pk_fault_guard_install faults
 *     inside the mapping (SIGBUS), and the guard turns that into exit status
 *     1 with one line on stderr naming the file (without the guard the child
 *     would die from the signal);
 *   - a file replaced by rename is not a change (the mapping keeps the old
 *     inode): the check stays PK_OK and decoding goes on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pocket.h"
#include "testhelp.h"

#define MODEL "models/kjv-moe-f16.gguf"

static char dir[512], copy[600], other[600];

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[1 << 16];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out)) ok = 0;
    return ok;
}

static int decode_some(pk_model *m, pk_context *c, pk_error *err) {
    int32_t ids[16];
    int n = pk_model_tokenize(m, "And God said", 12, ids, 16, 1, 0);
    if (n < 1 || n > 16) return PK_ERR_ARG;
    pk_context_reset(c);
    return pk_decode(c, ids, n, err);
}

int main(void) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(dir, sizeof dir, "%s/tmp/mapguard", build);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) { fprintf(stderr, "cannot make %s\n", dir); return 1; }
    snprintf(copy, sizeof copy, "%s/copy.gguf", dir);
    snprintf(other, sizeof other, "%s/other.gguf", dir);
    TEST_CHECK(copy_file(MODEL, copy), "copy %s to %s", MODEL, copy);

    pk_error err = {0};
    pk_model *m = NULL;
    pk_context *c = NULL;
    TEST_CHECK(pk_model_load(copy, &m, &err) == PK_OK, "load %s: %s", copy, err.msg);
    if (!m) return TEST_REPORT();
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    TEST_CHECK(pk_context_new(m, &cp, &c, &err) == PK_OK, "context: %s", err.msg);
    if (!c) return TEST_REPORT();
    TEST_CHECK(decode_some(m, c, &err) == PK_OK, "decode before any change: %s", err.msg);
    TEST_CHECK(pk_model_check_file(m, &err) == PK_OK, "check before any change: %s", err.msg);

    /* replaced by rename: the mapping keeps the old file, nothing changed for us */
    TEST_CHECK(copy_file(MODEL, other) && rename(other, copy) == 0, "rename over %s", copy);
    TEST_CHECK(pk_model_check_file(m, &err) == PK_OK, "check after a rename over the file: %s", err.msg);
    TEST_CHECK(decode_some(m, c, &err) == PK_OK, "decode after a rename over the file: %s", err.msg);
    pk_context_free(c);
    pk_model_free(m);

    /* truncated in place behind a loaded model */
    m = NULL;
    c = NULL;
    TEST_CHECK(pk_model_load(copy, &m, &err) == PK_OK && pk_context_new(m, &cp, &c, &err) == PK_OK,
               "reload %s: %s", copy, err.msg);
    if (!m || !c) return TEST_REPORT();
    TEST_CHECK(decode_some(m, c, &err) == PK_OK, "decode: %s", err.msg);
    /* written in place, same size (the byte rewritten with its own value) */
    usleep(20000);   /* past the file system's timestamp granularity */
    int wfd = open(copy, O_RDWR);
    unsigned char byte = 0;
    TEST_CHECK(wfd >= 0 && pread(wfd, &byte, 1, 100000) == 1 && pwrite(wfd, &byte, 1, 100000) == 1,
               "rewrite a byte of %s", copy);
    if (wfd >= 0) close(wfd);
    err.msg[0] = 0;
    TEST_CHECK(pk_model_check_file(m, &err) == PK_ERR_IO && strstr(err.msg, "written to since it was loaded"),
               "check after an in-place write: '%s'", err.msg);
    struct stat st;
    TEST_CHECK(stat(copy, &st) == 0 && truncate(copy, 200000) == 0, "truncate %s: %s", copy, strerror(errno));
    err.msg[0] = 0;
    int rc = pk_model_check_file(m, &err);
    char want[64];
    snprintf(want, sizeof want, "%lld bytes when loaded, 200000 now", (long long)st.st_size);
    TEST_CHECK(rc == PK_ERR_IO && strstr(err.msg, copy) && strstr(err.msg, want) && !strchr(err.msg, '\n'),
               "check after truncation: rc %d, message '%s'", rc, err.msg);

    int fds[2];
    TEST_CHECK(pipe(fds) == 0, "pipe");
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        if (pk_fault_guard_install() != PK_OK) _exit(7);
        pk_error e = {0};
        decode_some(m, c, &e);      /* reads the truncated pages: must not come back */
        _exit(9);
    }
    close(fds[1]);
    char out[2048];
    size_t k = 0;
    ssize_t r;
    while (k + 1 < sizeof out && (r = read(fds[0], out + k, sizeof out - 1 - k)) > 0) k += (size_t)r;
    out[k] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const char *nl = strchr(out, '\n');
    TEST_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "guarded child: %s %d (want exit 1); stderr: %s",
               WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
    TEST_CHECK(!strncmp(out, "pocket: error: ", 15) && strstr(out, copy) && strstr(out, "changed while in use") &&
               nl && nl[1] == 0, "guarded child's stderr is not one error line naming the file: [%s]", out);
    pk_context_free(c);
    pk_model_free(m);
    unlink(copy);
    return TEST_REPORT();
}
