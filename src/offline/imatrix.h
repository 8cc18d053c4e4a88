/* offline/imatrix.h - importance matrices: per weight matrix and per input column,
 * the mean square of the activations that column multiplies, collected
 * while the model runs over calibration text, then used to weight the
 * quantization error (pk_quantize_params.imatrix).
 *
 * Collection follows llama.cpp's llama-imatrix: every matrix-vector product
 * of a tensor whose name starts with "blk." is recorded (attention, router,
 * dense and shared FFNs, experts); output.weight only when asked
 * (process_output); token embeddings never (they are row lookups). For a
 * tensor with ne[2] > 1 (merged experts, ffn_*_exps) statistics are kept per
 * expert, and only the experts a token was routed to see it: counts[e] is
 * the number of tokens expert e processed. Dense tensors have one count.
 *
 * File format: llama.cpp's GGUF imatrix (what llama-imatrix writes by default
 * and llama-quantize --imatrix reads), so files go both ways:
 *   general.type        string  "imatrix"
 *   imatrix.datasets    [string] calibration files
 *   imatrix.chunk_count u32     chunks processed
 *   imatrix.chunk_size  u32     tokens per chunk
 * and per collected tensor NAME, in name order:
 *   NAME.in_sum2  F32 [ne0, n_mat]  sum over tokens of x[j]^2
 *   NAME.counts   F32 [1, n_mat]    tokens seen (per expert)
 *   NAME.in_sum   F32 [ne0, n_mat]  sum of x[j] (newer llama.cpp; optional
 *                                   when reading)
 * (trailing dimensions of 1 are dropped from n_dims, as ggml writes them).
 *
 * Lookup (the quantizer's view): mean square per column, in_sum2 / count,
 * per expert; an expert with count 0 (no calibration token was routed to it)
 * gets importance 1 for every column - uniform, i.e. the plain weighted
 * error without column preferences, exactly what llama-quantize does.
 */
#ifndef PK_IMATRIX_H
#define PK_IMATRIX_H

#include <stdint.h>
#include "pocket.h"

typedef struct pk_imatrix pk_imatrix;

/* An empty matrix (to collect into). */
int pk_imatrix_new(pk_imatrix **out, pk_error *err);
void pk_imatrix_free(pk_imatrix *im);

/* Start recording every matrix-vector product of context c into im (replaces
 * any observer c had); process_output also records output.weight. im must
 * outlive the attachment. Detach before freeing either. */
void pk_imatrix_attach(pk_imatrix *im, pk_context *c, int process_output);
void pk_imatrix_detach(pk_context *c);
/* Collection cannot fail inside the forward pass; a failure (out of memory,
 * a non-finite activation, a tensor seen with two different shapes) is kept
 * and reported here: PK_OK, or the first error with its message. */
int pk_imatrix_status(const pk_imatrix *im, pk_error *err);

/* Metadata written by pk_imatrix_save: one more calibration file name, and
 * the chunks processed / their size (chunk_count adds to what was loaded). */
int pk_imatrix_add_dataset(pk_imatrix *im, const char *name, pk_error *err);
void pk_imatrix_set_chunks(pk_imatrix *im, uint32_t chunk_count, uint32_t chunk_size);

/* Write im as a GGUF imatrix file (PATH.tmp then renamed). PK_ERR_ARG if
 * nothing was collected, PK_ERR_IO naming the file. */
int pk_imatrix_save(const pk_imatrix *im, const char *path, pk_error *err);

/* Read a GGUF imatrix file (llama.cpp's or ours). Entries for some of a
 * model's tensors may be missing (lookup then returns NULL for them); an
 * entry's in_sum is optional; old-style files with one count for a 3-D
 * entry have it broadcast to every expert. Errors: PK_ERR_IO (unreadable),
 * PK_ERR_FORMAT (not GGUF, general.type not "imatrix", an entry with in_sum2
 * but no counts or the reverse, wrong tensor type, sizes that do not match,
 * negative or non-finite counts), naming the file and the tensor. */
int pk_imatrix_load(const char *path, pk_imatrix **out, pk_error *err);

/* The importances of a tensor, in the shape pk_quantize_params.imatrix wants:
 * ne0 * n_mat floats (expert-major), *n set to that count; NULL (and *n = 0)
 * when the matrix has no entry for tensor_name. imatrix is a pk_imatrix *.
 * The array stays valid until pk_imatrix_free; not thread-safe against
 * concurrent collection. */
const float *pk_imatrix_lookup(void *imatrix, const char *tensor_name, int64_t *n);

/* ---- inspection ------------------------------------------------------------ */
int pk_imatrix_n_entries(const pk_imatrix *im);
/* Entry i (in name order): its tensor name, columns, matrices (experts) and
 * counts (n_mat values). Returns PK_ERR_ARG for i out of range. */
int pk_imatrix_entry(const pk_imatrix *im, int i, const char **name, int64_t *ne0,
                     int64_t *n_mat, const int64_t **counts);
uint32_t pk_imatrix_chunk_count(const pk_imatrix *im);
uint32_t pk_imatrix_chunk_size(const pk_imatrix *im);

#endif
