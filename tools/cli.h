/* cli.h - shared helpers of the pocket command-line tool: option parsing,
 * one-line fatal errors, model loading, tokenizing. Each command lives in its
 * own tools/cmd_*.c file. */
#ifndef POCKET_CLI_H
#define POCKET_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "pocket.h"

#define DEFAULT_MODEL_NAME "kjv-moe-f16.gguf"

/* Print "pocket: error: ..." on one line and exit 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
double now(void);
long parse_long(const char *flag, const char *v, long lo, long hi);
double parse_double(const char *flag, const char *v, double lo, double hi);
/* Whole file, NUL-terminated; dies naming the file on failure. */
char *read_file(const char *path, size_t *len);
/* The bundled model's path (see pocket --help). */
const char *default_model(void);
/* Load path under the memory plan of o (--mem, -c; NULL: none): without
 * --mem, a budget of the memory available (pk_mem_available) minus a margin
 * if the file does not fit in it, else none. */
struct opts;
pk_model *load_model(const char *path, const struct opts *o, double *secs);
/* "6G", "512M", "1.5GiB", "100000000": bytes; dies naming the flag otherwise */
uint64_t parse_size(const char *flag, const char *v);
/* the memory plan in a few lines ("memory plan ..."), to f */
void print_plan(const pk_model *m, FILE *f);
int32_t *tokenize(const pk_model *m, const char *text, size_t len, int add_special,
                  int parse_special, int *n_out);
void print_piece(const pk_model *m, int32_t id, FILE *out);

typedef struct opts {
    const char *model, *prompt, *prompt_file, *text_file;
    int n_predict, n_threads, n_ctx, n_chunks;
    int type_k, type_v;   /* KV cache types, PK_CACHE_* (0: the library's default) */
    int no_special, ignore_eos, quiet, show_tensors;
    const char *kld_base, *kld;
    uint64_t mem;                 /* --mem (mem_set: given; 0: no budget) */
    int mem_set, expert_slots;
    int n_checkpoints;            /* recurrent-state checkpoints per context (-1: the library's default) */
    pk_sampler_params sp;
    int seed_given;
} opts;

void opts_init(opts *o);
/* Parse one of the flags common to the commands at argv[*i] (advancing *i
 * past its value); returns 0 if argv[*i] is not one. */
int parse_common(opts *o, int argc, char **argv, int *i);
/* The PK_CACHE_* value of a -ctk / -ctv argument; dies naming the flag and
 * the value when it is not a cache type. */
int parse_cache_type(const char *flag, const char *v);
/* Help text of -ctk / -ctv, shared by the commands that take them. */
#define CACHE_TYPE_HELP \
    "  -ctk, --cache-type-k T KV cache type of the keys: f32, f16 (default), q8_0\n" \
    "  -ctv, --cache-type-v T KV cache type of the values: f32, f16 (default), q8_0\n" \
    "                         (q8_0 needs head dims that are multiples of 32; F16\n" \
    "                         halves the cache of f32, q8_0 takes 27%; any mix)\n"
/* 1 if argv[i] asks for help. */
int is_help(const char *a);

int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_template(int argc, char **argv);

#endif
