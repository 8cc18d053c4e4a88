/* engine/kv.c - allocation of the sequence memory (see engine/kv.h). */
#include <stdlib.h>
#include <string.h>
#include "core/common.h"
#include "engine/kv.h"
#include "quant/quant.h"

int pk_kv_init(pk_kv *kv, int n_layer, const pk_kv_need *need, int n_ctx, int type_k, int type_v) {
    memset(kv, 0, sizeof *kv);
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->type_k = type_k;
    kv->type_v = type_v;
    const pk_kv_need *rec = NULL, *lat = NULL;
    for (int l = 0; l < n_layer; l++) {
        if (need[l].kind == PK_MEM_STATE && !rec) rec = &need[l];
        if (need[l].kind == PK_MEM_LATENT && !lat) lat = &need[l];
    }
    if (lat) {
        kv->lat_dim = lat->lat_dim;
        kv->lat_row = pk_row_size(type_k, lat->lat_dim);
    }
    if (rec) {
        kv->conv_rows = rec->conv_rows;
        kv->conv_dim = rec->conv_dim;
        kv->ssm_size = rec->ssm_size;
    }
    int n_att = 0, n_rec = 0, n_lat = 0;
    if (!(kv->slot = pk_calloc((size_t)n_layer, sizeof *kv->slot)) ||
        !(kv->kind = pk_calloc((size_t)n_layer, sizeof *kv->kind)) ||
        !(kv->att = pk_calloc((size_t)n_layer, sizeof *kv->att))) {
        pk_kv_free(kv);
        return PK_ERR_NOMEM;
    }
    size_t k_bytes = 0, v_bytes = 0;   /* each layer's block follows the last */
    for (int l = 0; l < n_layer; l++) {
        const pk_kv_need *n = &need[l];
        PK_ASSERT(n->kind != PK_MEM_STATE || (n->conv_rows == rec->conv_rows && n->conv_dim == rec->conv_dim &&
                                              n->ssm_size == rec->ssm_size));
        PK_ASSERT(n->kind != PK_MEM_LATENT || n->lat_dim == lat->lat_dim);
        kv->kind[l] = n->kind;
        kv->slot[l] = n->kind == PK_MEM_KV ? n_att++ : n->kind == PK_MEM_STATE ? n_rec++
                      : n->kind == PK_MEM_LATENT ? n_lat++ : -1;
        if (n->kind != PK_MEM_KV) continue;
        PK_ASSERT(n->n_head_kv > 0 && n->k_dim % n->n_head_kv == 0 && n->v_dim % n->n_head_kv == 0);
        pk_kv_layer *a = &kv->att[l];
        a->k_dim = n->k_dim;
        a->v_dim = n->v_dim;
        a->n_head_kv = n->n_head_kv;
        a->k_head = pk_row_size(type_k, n->k_dim / n->n_head_kv);
        a->v_head = pk_row_size(type_v, n->v_dim / n->n_head_kv);
        a->k_row = a->k_head * (size_t)n->n_head_kv;
        a->v_row = a->v_head * (size_t)n->n_head_kv;
        a->k_off = k_bytes;
        a->v_off = v_bytes;
        /* F16 keys in whole tiles of PK_KT positions (pk_kv_kt16) */
        k_bytes += a->k_row * (type_k == PK_TYPE_F16 ? pk_kv_ctx_tiles(kv) * PK_KT : (size_t)n_ctx);
        v_bytes += a->v_row * (size_t)n_ctx;
        kv->row_bytes += a->k_row + a->v_row;
    }
    kv->n_att = n_att;
    kv->n_rec = n_rec;
    kv->n_lat = n_lat;
    kv->k = pk_calloc(k_bytes > 0 ? k_bytes : 1, 1);
    kv->v = pk_calloc(v_bytes > 0 ? v_bytes : 1, 1);
    kv->conv = pk_calloc((size_t)n_rec * kv->conv_rows, (size_t)kv->conv_dim * sizeof(float));
    kv->ssm = pk_calloc((size_t)n_rec, (size_t)kv->ssm_size * sizeof(float));
    kv->lat = pk_calloc((size_t)n_lat * (size_t)n_ctx, kv->lat_row > 0 ? kv->lat_row : 1);
    if (!kv->k || !kv->v || !kv->conv || !kv->ssm || !kv->lat) {
        pk_kv_free(kv);
        return PK_ERR_NOMEM;
    }
    return PK_OK;
}

void pk_kv_clear(pk_kv *kv) {
    memset(kv->conv, 0, (size_t)kv->n_rec * kv->conv_rows * kv->conv_dim * sizeof(float));
    memset(kv->ssm, 0, (size_t)kv->n_rec * kv->ssm_size * sizeof(float));
}

void pk_kv_free(pk_kv *kv) {
    free(kv->slot);
    free(kv->kind);
    free(kv->att);
    free(kv->k);
    free(kv->v);
    free(kv->conv);
    free(kv->ssm);
    free(kv->lat);
    kv->lat = NULL;
    kv->slot = kv->kind = NULL;
    kv->att = NULL;
    kv->k = kv->v = NULL;
    kv->conv = kv->ssm = NULL;
}
