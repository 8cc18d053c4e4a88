/* offline/offline.h - what the offline tools share inside the library:
 * the quantizer's type planner, which the build sizes (offline/build.c)
 * run without quantizing. */
#ifndef PK_OFFLINE_H
#define PK_OFFLINE_H

#include "gguf/gguf.h"

/* The types pk_quantize_file would give f's tensors under preset, with no
 * overrides: types[i] for f->tensors[i] (f->n_tensors entries), by the same
 * rules, counters and fallbacks. imatrix: as quantized with an importance
 * matrix (some rules differ). n_expert > 0: as if f's expert_count were
 * n_expert (the file pruned first). *needs_imatrix is set when some tensor's
 * type needs an importance matrix and imatrix is 0 (pk_quantize_file would
 * refuse). Errors: PK_ERR_ARG (unknown preset, naming the known ones),
 * PK_ERR_FORMAT (hyperparameters, a tensor's layer), PK_ERR_UNSUPPORTED (a
 * row length with no fallback type), PK_ERR_NOMEM. */
int pk_quantize_plan_types(const gguf_file *f, const char *preset, int imatrix, int n_expert, int *types,
                           int *needs_imatrix, pk_error *err);

#endif
