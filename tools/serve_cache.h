/* serve_cache.h - `pocket serve`'s store of saved conversations: the
 * sequence states (pk_state_save) of slots that were reused for another
 * conversation, kept in RAM (--cache-ram: least recently used dropped first,
 * bounded in bytes) and as files in a directory (--cache-dir: bounded in
 * bytes, oldest deleted; indexed at start, so a restarted server finds
 * them), and found again by the longest common prefix of a prompt with their
 * tokens. Thread-safe (one mutex of its own; files are read and written
 * outside it). Every state it cannot use (a corrupt, truncated or foreign
 * file) is skipped with one line on stderr and never loaded. */
#ifndef POCKET_SERVE_CACHE_H
#define POCKET_SERVE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "pocket.h"

typedef struct pcache pcache;

typedef struct pcache_params {
    const pk_model *model;
    uint64_t ram_bytes;     /* bound of the states kept in RAM (0: none kept) */
    const char *dir;        /* directory of the state files (NULL: none) */
    uint64_t dir_bytes;     /* bound of the files' total size */
    int n_ctx;              /* a state longer than the context is skipped */
    int recurrent;          /* the model has recurrent layers (a state's prefix is
                               reachable only at its end or a checkpoint) */
} pcache_params;

typedef struct pcache_stats {
    int ram_states, file_states;
    uint64_t ram_bytes, file_bytes;
    uint64_t saves, restores_ram, restores_file, refused;
} pcache_stats;

/* A store for p (the directory is made if missing, then indexed: one line
 * per file skipped). PK_ERR_IO naming the directory when it cannot be made
 * or read. */
int pcache_open(const pcache_params *p, pcache **out, pk_error *err);
void pcache_free(pcache *pc);

/* The stored state that serves prompt[0..n) best: its id in *id (0: none)
 * and, returned, the prompt tokens it would spare when loaded and cut back
 * to at most limit tokens (for a file whose checkpoints are not known yet,
 * an estimate that pcache_load's caller checks by truncating). */
int pcache_match(pcache *pc, const int32_t *prompt, int n, int limit, uint64_t *id);

enum { PCACHE_RAM = 1, PCACHE_FILE = 2 };
/* Keep the state of c: in RAM when to_ram (and it fits), and as a file when
 * the store has a directory and no file holds these tokens yet. States
 * whose tokens are a prefix of c's are dropped (c's supersedes them).
 * Returns where it is kept now: PCACHE_RAM | PCACHE_FILE, or 0 (too large,
 * or it could not be written: a line on stderr says why). */
int pcache_save(pcache *pc, const pk_context *c, int to_ram);

/* Load the state id into c: 0, with where ("RAM", or the file's name) set;
 * -1 when it is gone or refused (c unchanged; a refused file leaves the
 * index after one line on stderr). A state loaded from RAM leaves RAM (the
 * slot holds it now). */
int pcache_load(pcache *pc, uint64_t id, pk_context *c, char *where, size_t cap);

void pcache_get_stats(pcache *pc, pcache_stats *st);

/* Length of the common prefix of a[0..na) and b[0..nb). */
int pcache_lcp(const int32_t *a, int na, const int32_t *b, int nb);

#endif
