/* kv.h - the sequence memory of one context: everything a sequence carries
 * from one token to the next.
 *  - attention layers: the key/value cache in F32. Values: v_dim floats per
 *    position, by position. Keys transposed: per layer k_dim rows of n_ctx
 *    positions, so a head's keys are already the right-hand matrix of the
 *    scores product Q K^T;
 *  - Gated DeltaNet layers: the conv state (the last conv-1 pre-conv input
 *    rows, oldest first) and the recurrent state (per v head a
 *    state x state matrix, key dim by value dim).
 * Each layer owns one kind; a per-layer slot index maps into the arrays.
 */
#ifndef PK_KV_H
#define PK_KV_H

#include <stddef.h>
#include <stdint.h>

typedef struct pk_kv {
    int n_layer, n_ctx;
    int k_dim, v_dim;      /* floats per position (attention layers) */
    int conv_rows, conv_dim; /* conv state rows x channels (DeltaNet layers) */
    int ssm_size;          /* recurrent state floats per DeltaNet layer */
    int n_rec;             /* DeltaNet layers */
    int *slot;             /* [n_layer] index among the layers of the same kind */
    float *k;              /* [attention layers][k_dim][n_ctx] */
    float *v;              /* [attention layers][n_ctx][v_dim] */
    float *conv, *ssm;     /* [DeltaNet layers][...] */
} pk_kv;

/* Allocate for n_ctx positions; recurrent[il] != 0 marks DeltaNet layers
 * (recurrent may be NULL: all attention). Returns PK_OK or PK_ERR_NOMEM. */
int pk_kv_init(pk_kv *kv, int n_layer, const uint8_t *recurrent, int n_ctx, int k_dim, int v_dim,
               int conv_rows, int conv_dim, int ssm_size);
void pk_kv_free(pk_kv *kv);
/* Forget the sequence: zero the recurrent states (cached keys/values are
 * simply overwritten as positions are reused). */
void pk_kv_clear(pk_kv *kv);

/* key dimension i of layer l: n_ctx floats, one per position */
static inline float *pk_kv_kt(const pk_kv *kv, int l, int i) {
    return kv->k + ((size_t)kv->slot[l] * kv->k_dim + i) * kv->n_ctx;
}
static inline float *pk_kv_v(const pk_kv *kv, int l, int pos) {
    return kv->v + ((size_t)kv->slot[l] * kv->n_ctx + pos) * kv->v_dim;
}
static inline float *pk_kv_conv(const pk_kv *kv, int l) {
    return kv->conv + (size_t)kv->slot[l] * kv->conv_rows * kv->conv_dim;
}
static inline float *pk_kv_ssm(const pk_kv *kv, int l) {
    return kv->ssm + (size_t)kv->slot[l] * kv->ssm_size;
}

#endif
