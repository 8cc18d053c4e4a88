/* offline/quantize.h - convert a GGUF model to another weight type mix ("preset"),
 * as llama.cpp's llama-quantize does, writing a new GGUF file.
 *
 * Presets (llama.cpp names, case-insensitive): F32 F16 BF16 Q8_0 Q6_K Q5_K_M
 * Q5_K_S Q5_0 Q5_1 Q4_K_M Q4_K_S Q4_0 Q4_1 Q3_K_L Q3_K_M Q3_K_S Q2_K IQ4_XS
 * IQ4_NL, and pocket's MOE_Q2_K: routed-expert tensors (*_exps) at Q2_K;
 * attention, shared experts, dense FFNs, token embeddings and output at
 * Q6_K, with attn_v and shared experts at Q8_0; router (ffn_gate_inp) and
 * norms kept as they are.
 *
 * For the llama.cpp presets each tensor gets the type llama-quantize picks:
 * 1-D tensors, norms and the router keep their input type; output.weight
 * (and a tied token_embd) goes to Q6_K; the *_M presets give attn_v and
 * ffn_down more bits on some layers; rows whose length is not a multiple of
 * the block size fall back (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
 * Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, then F16). Tensors are written in
 * llama-quantize's order (by layer, then by name). With the same input,
 * preset and no importance matrix the tensor data equals llama-quantize's
 * bit for bit, given reference quantizers that match ggml's.
 * MXFP4 tensors (gpt-oss experts) are copied unchanged under every preset
 * (llama-quantize would dequantize and re-quantize them); an override that
 * names one converts it like any other tensor.
 */
#ifndef PK_QUANTIZE_H
#define PK_QUANTIZE_H

#include <stdint.h>
#include "pocket.h"

typedef struct pk_quantize_params {
    const char *preset;              /* target mix, e.g. "Q4_K_M" (required) */
    int n_threads;                   /* <= 0: all online cores */
    /* Per-tensor overrides "PATTERN=TYPE" (llama-quantize --tensor-type),
     * checked in order, the first match wins. PATTERN is searched anywhere in
     * the tensor name; '*' matches any run of characters, '?' one character,
     * a leading '^' / trailing '$' anchors it to the start / end of the name;
     * other characters are literal ('.' too). TYPE is a type name (q4_k,
     * Q8_0, f16, ...). Overrides apply only to tensors a preset may quantize
     * (not norms, 1-D tensors, the router); each must match at least one. */
    const char *const *overrides;
    int n_overrides;
    /* Importance matrix hook (may be NULL): for a tensor about to be
     * quantized, return ne[0] * ne[2] floats (per expert, per column), or
     * NULL for none; *n receives the count. */
    const float *(*imatrix)(void *ud, const char *tensor_name, int64_t *n);
    void *imatrix_ud;
    /* Called before each tensor is processed: i in [0, n), the tensor's name
     * and the type it is written as. */
    void (*progress)(void *ud, int i, int n, const char *name, const char *type);
    void *progress_ud;
    /* Only decide the types (progress is called for each tensor); read the
     * input, write nothing, and do not require the quantizers to exist. */
    int dry_run;
} pk_quantize_params;

pk_quantize_params pk_quantize_default_params(void);

/* Quantize the GGUF file `in` into `out` (written as out.tmp, renamed on
 * success; out is left untouched on failure). Metadata is copied, with
 * general.file_type set to the preset's llama.cpp ftype number,
 * general.quantization_version = 2, and pocket.quantize.preset /
 * pocket.quantize.overrides recording the request.
 * Errors: PK_ERR_ARG (unknown preset, bad override, override matching
 * nothing), PK_ERR_IO / PK_ERR_FORMAT (reading in, writing out: the message
 * names the file), PK_ERR_UNSUPPORTED (a tensor type with no reference
 * quantizer or dequantizer yet, split files; names the type and tensor),
 * PK_ERR_NOMEM. */
int pk_quantize_file(const char *in, const char *out, const pk_quantize_params *p,
                     pk_error *err);

/* Number of presets, and the name of preset i (NULL when out of range), for
 * help texts. */
int pk_quantize_n_presets(void);
const char *pk_quantize_preset_name(int i);

#endif
