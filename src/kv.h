/* kv.h - the attention key/value cache of one sequence.
 * K and V of layer l at position p: F32 vectors of n_head_kv * head_dim
 * (resp. head_dim_v) floats, stored contiguously per layer by position. */
#ifndef PK_KV_H
#define PK_KV_H

#include <stddef.h>
#include <stdint.h>

typedef struct pk_kv {
    int n_layer, n_ctx;
    int k_dim, v_dim;      /* floats per position */
    float *k, *v;          /* [n_layer][n_ctx][dim] */
} pk_kv;

/* Allocate for n_ctx positions; returns PK_OK or PK_ERR_NOMEM. */
int pk_kv_init(pk_kv *kv, int n_layer, int n_ctx, int k_dim, int v_dim);
void pk_kv_free(pk_kv *kv);
static inline float *pk_kv_k(const pk_kv *kv, int l, int pos) {
    return kv->k + ((size_t)l * kv->n_ctx + pos) * kv->k_dim;
}
static inline float *pk_kv_v(const pk_kv *kv, int l, int pos) {
    return kv->v + ((size_t)l * kv->n_ctx + pos) * kv->v_dim;
}

#endif
