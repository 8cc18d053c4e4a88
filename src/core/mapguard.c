/* core/mapguard.c - turn a read fault inside a mapped model file into a one-line
 * error.
 *
 * A model is mapped, not copied (gguf/gguf.c). If another program truncates the
 * file while it is mapped (an in-place `cp` over it, a download restarted
 * into the same path), every access to a page past the new end raises
 * SIGBUS; MAP_PRIVATE does not prevent that, and no check at load can.
 * Replacing the file by rename is harmless: the mapping keeps the old inode.
 *
 * The registry is a fixed table written by gguf_open / gguf_close and read
 * by the signal handler, so it uses only atomics: a slot is claimed by a
 * compare-and-swap on its state, filled, then published; the handler reads
 * published slots only. The handler uses only async-signal-safe calls
 * (write, _exit, sigaction). A fault outside every registered mapping (or
 * one not caused by a memory access) goes to the handler that was installed
 * before ours (a sanitizer's, say), or to the default action, by restoring
 * it and returning, so the faulting access runs again and dies as it would
 * have.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/mapguard.h"
#include "pocket.h"

#define GUARD_SLOTS 64
#define GUARD_PATH 400

enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE };

static struct guard_slot {
    atomic_int state;
    uintptr_t base;
    size_t len;
    char path[GUARD_PATH];
} slots[GUARD_SLOTS];

void pk_mapguard_add(const void *addr, size_t len, const char *path) {
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_BUSY)) continue;
        slots[i].base = (uintptr_t)addr;
        slots[i].len = len;
        size_t n = strlen(path);
        if (n >= GUARD_PATH) n = GUARD_PATH - 1;
        memcpy(slots[i].path, path, n);
        slots[i].path[n] = 0;
        atomic_store(&slots[i].state, SLOT_LIVE);
        return;
    }
}

void pk_mapguard_remove(const void *addr) {
    for (int i = 0; i < GUARD_SLOTS; i++)
        if (atomic_load(&slots[i].state) == SLOT_LIVE && slots[i].base == (uintptr_t)addr) {
            atomic_store(&slots[i].state, SLOT_BUSY);
            slots[i].base = 0;
            atomic_store(&slots[i].state, SLOT_FREE);
            return;
        }
}

/* ---- the handler ------------------------------------------------------------ */

static struct sigaction previous;
static atomic_int installed;

static void put(char *buf, size_t *k, size_t cap, const char *s) {
    while (*s && *k + 1 < cap) buf[(*k)++] = *s++;
}

static void put_u64(char *buf, size_t *k, size_t cap, uint64_t v) {
    char d[24];
    int n = 0;
    do { d[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n > 0 && *k + 1 < cap) buf[(*k)++] = d[--n];
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; si->si_code > 0 && i < GUARD_SLOTS; i++) {
        if (atomic_load(&slots[i].state) != SLOT_LIVE) continue;
        if (a < slots[i].base || a - slots[i].base >= slots[i].len) continue;
        char msg[GUARD_PATH + 256];
        size_t k = 0;
        put(msg, &k, sizeof msg, "pocket: error: ");
        put(msg, &k, sizeof msg, slots[i].path);
        put(msg, &k, sizeof msg, ": the model file changed while in use (truncated or overwritten by another "
                                 "program?): read fault at file offset ");
        put_u64(msg, &k, sizeof msg, (uint64_t)(a - slots[i].base));
        put(msg, &k, sizeof msg, "; reload it\n");
        ssize_t w = write(STDERR_FILENO, msg, k);
        (void)w;
        _exit(1);
    }
    /* not ours: whoever was there before, or the default action */
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
}

int pk_fault_guard_install(void) {
    int expect = 0;
    if (!atomic_compare_exchange_strong(&installed, &expect, 1)) return PK_OK;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &previous) != 0) {
        atomic_store(&installed, 0);
        return PK_ERR_IO;
    }
    return PK_OK;
}
