/* engine/kv.h - the sequence memory of one context: everything a sequence carries
 * from one token to the next.
 *  - attention layers: the key/value cache, keys and values each in their
 *    own element type (F32, F16 or Q8_0; pk_context_params.type_k/type_v).
 *    F32 (for sgemm): values one row of v_dim floats per position; keys
 *    transposed, per layer k_dim rows of n_ctx positions, so a head's keys
 *    are already the right-hand matrix of the scores product Q K^T. Other
 *    types (for att_kq / att_pv): per layer and kv head, one row of a
 *    head's elements per position, so attention streams each head's keys
 *    and values contiguously (a Q8_0 block cannot span positions, which
 *    are written one token at a time);
 *  - latent attention layers (engine/kinds/mla.c): one row of lat_dim elements per
 *    position, [latent c | rope key], in the key type (a K-only cache, as
 *    llama.cpp keeps it: the values are the latent itself), not transposed;
 *  - Gated DeltaNet layers: the conv state (the last conv-1 pre-conv input
 *    rows, oldest first) and the recurrent state (per v head a
 *    state x state matrix, key dim by value dim), always F32.
 * Each layer owns one kind (its mixer's memory method: pk_kv_need) and,
 * for keys and values, its own shape (pk_kv_layer: dims, heads, offsets);
 * a per-layer slot index maps into the state arrays.
 */
#ifndef PK_KV_H
#define PK_KV_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/kernels.h"

/* What a layer keeps per sequence (a mixer kind's memory method). */
enum pk_mem_kind {
    PK_MEM_NONE = 0,   /* nothing */
    PK_MEM_KV = 1,     /* keys and values per position */
    PK_MEM_STATE = 2,  /* a fixed-size state: conv rows + recurrent state */
    PK_MEM_LATENT = 3, /* one latent row per position (keys and values in one) */
};
typedef struct pk_kv_need {
    int kind;                        /* enum pk_mem_kind */
    int n_head_kv, k_dim, v_dim;     /* PK_MEM_KV: heads, elements per position */
    int conv_rows, conv_dim;         /* PK_MEM_STATE: conv state rows x channels */
    int ssm_size;                    /* PK_MEM_STATE: recurrent state floats */
    int lat_dim;                     /* PK_MEM_LATENT: elements per position */
} pk_kv_need;

/* One attention layer's keys and values: its own shape (layers may differ:
 * gemma4's sliding and global layers have other head sizes and kv heads). */
typedef struct pk_kv_layer {
    int k_dim, v_dim;      /* elements per position */
    int n_head_kv;         /* kv heads: k_dim / n_head_kv elements per key head */
    size_t k_row, v_row;   /* bytes of one position's keys / values (all heads) */
    size_t k_head, v_head; /* bytes of one head's keys / values at one position */
    size_t k_off, v_off;   /* where the layer's keys / values start in k / v */
} pk_kv_layer;

typedef struct pk_kv {
    int n_layer, n_ctx;
    int type_k, type_v;    /* element types (PK_TYPE_F32, _F16, _Q8_0) */
    pk_kv_layer *att;      /* [n_layer] attention layers' shapes (zero elsewhere) */
    size_t row_bytes;      /* keys + values of one position over all layers */
    int conv_rows, conv_dim; /* conv state rows x channels (DeltaNet layers) */
    int ssm_size;          /* recurrent state floats per DeltaNet layer */
    int lat_dim;           /* latent row elements per position (latent attention layers) */
    size_t lat_row;        /* its bytes, in type_k */
    int n_att, n_rec, n_lat; /* attention layers, DeltaNet layers, latent attention layers */
    int *kind;             /* [n_layer] enum pk_mem_kind */
    int *slot;             /* [n_layer] index among the layers of the same kind (-1: none) */
    uint8_t *k;            /* per attention layer, at its k_off: F32: [k_dim][n_ctx]
                              floats; F16: per kv head, tiles of PK_KT positions
                              transposed, [n_ctx / PK_KT rounded up][head dim][PK_KT]
                              (pk_kv_kt16); Q8_0: [kv head][n_ctx] rows of k_head bytes */
    uint8_t *v;            /* per attention layer, at its v_off: F32: [n_ctx][v_dim]
                              floats; else [kv head][n_ctx] rows of v_head bytes */
    float *conv, *ssm;     /* [DeltaNet layers][...] */
    uint8_t *lat;          /* [latent layers][n_ctx] rows of lat_row bytes */
} pk_kv;

/* Allocate for n_ctx positions what need[il] asks of each layer, keys and
 * values in element types type_k / type_v whose head rows are whole blocks
 * (latent rows in type_k; the caller checks). Each PK_MEM_KV layer has its
 * own shape; every PK_MEM_STATE and PK_MEM_LATENT layer the same sizes (a
 * PK_ASSERT: the plan gives them one
 * set of hyperparameters). Returns PK_OK or PK_ERR_NOMEM. */
int pk_kv_init(pk_kv *kv, int n_layer, const pk_kv_need *need, int n_ctx, int type_k, int type_v);
void pk_kv_free(pk_kv *kv);
/* Forget the sequence: zero the recurrent states (cached keys/values are
 * simply overwritten as positions are reused). */
void pk_kv_clear(pk_kv *kv);

/* F32 keys only: key dimension i of layer l, n_ctx floats, one per position */
static inline float *pk_kv_kt(const pk_kv *kv, int l, int i) {
    return (float *)(kv->k + kv->att[l].k_off) + (size_t)i * kv->n_ctx;
}
/* F32 values only: the row of layer l at position pos, v_dim floats */
static inline float *pk_kv_v(const pk_kv *kv, int l, int pos) {
    return (float *)(kv->v + kv->att[l].v_off) + (size_t)pos * kv->att[l].v_dim;
}
/* F16 keys: the tiles of kv head g of layer l (kernels/kernels.h, PK_KT):
 * element e of position p at [((p / PK_KT) hd + e) PK_KT + p % PK_KT] */
static inline size_t pk_kv_ctx_tiles(const pk_kv *kv) { return ((size_t)kv->n_ctx + PK_KT - 1) / PK_KT; }
static inline uint16_t *pk_kv_kt16(const pk_kv *kv, int l, int g) {
    const size_t hd = (size_t)kv->att[l].k_dim / (size_t)kv->att[l].n_head_kv;
    return (uint16_t *)(void *)(kv->k + kv->att[l].k_off) + (size_t)g * pk_kv_ctx_tiles(kv) * PK_KT * hd;
}
static inline uint16_t *pk_kv_kt16_at(const pk_kv *kv, int l, int g, int p) {
    const size_t hd = (size_t)kv->att[l].k_dim / (size_t)kv->att[l].n_head_kv;
    return pk_kv_kt16(kv, l, g) + (size_t)(p / PK_KT) * hd * PK_KT + (size_t)(p % PK_KT);
}
/* keys (Q8_0) / values of the other types: kv head g of layer l at position pos
 * (k_head / v_head bytes; the rows of positions pos, pos + 1, ... follow) */
static inline uint8_t *pk_kv_k(const pk_kv *kv, int l, int g, int pos) {
    return kv->k + kv->att[l].k_off + ((size_t)g * kv->n_ctx + pos) * kv->att[l].k_head;
}
static inline uint8_t *pk_kv_vh(const pk_kv *kv, int l, int g, int pos) {
    return kv->v + kv->att[l].v_off + ((size_t)g * kv->n_ctx + pos) * kv->att[l].v_head;
}
/* latent attention layers: the row of layer l at position pos (lat_row
 * bytes; the rows of pos + 1, ... follow) */
static inline uint8_t *pk_kv_lat(const pk_kv *kv, int l, int pos) {
    return kv->lat + ((size_t)kv->slot[l] * kv->n_ctx + pos) * kv->lat_row;
}
static inline float *pk_kv_conv(const pk_kv *kv, int l) {
    return kv->conv + (size_t)kv->slot[l] * kv->conv_rows * kv->conv_dim;
}
static inline float *pk_kv_ssm(const pk_kv *kv, int l) {
    return kv->ssm + (size_t)kv->slot[l] * kv->ssm_size;
}

#endif
