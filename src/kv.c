/* kv.c - allocation of the sequence memory (see kv.h). */
#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "kv.h"
#include "quant.h"

int pk_kv_init(pk_kv *kv, int n_layer, const pk_kv_need *need, int n_ctx, int type_k, int type_v) {
    memset(kv, 0, sizeof *kv);
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->type_k = type_k;
    kv->type_v = type_v;
    const pk_kv_need *att = NULL, *rec = NULL, *lat = NULL;
    for (int l = 0; l < n_layer; l++) {
        if (need[l].kind == PK_MEM_KV && !att) att = &need[l];
        if (need[l].kind == PK_MEM_STATE && !rec) rec = &need[l];
        if (need[l].kind == PK_MEM_LATENT && !lat) lat = &need[l];
    }
    if (lat) {
        kv->lat_dim = lat->lat_dim;
        kv->lat_row = pk_row_size(type_k, lat->lat_dim);
    }
    if (att) {
        kv->k_dim = att->k_dim;
        kv->v_dim = att->v_dim;
        kv->n_head_kv = att->n_head_kv;
    }
    if (rec) {
        kv->conv_rows = rec->conv_rows;
        kv->conv_dim = rec->conv_dim;
        kv->ssm_size = rec->ssm_size;
    }
    kv->n_head_kv = kv->n_head_kv > 0 ? kv->n_head_kv : 1;
    kv->k_head = pk_row_size(type_k, kv->k_dim / kv->n_head_kv);
    kv->v_head = pk_row_size(type_v, kv->v_dim / kv->n_head_kv);
    kv->k_row = kv->k_head * (size_t)kv->n_head_kv;
    kv->v_row = kv->v_head * (size_t)kv->n_head_kv;
    int n_att = 0, n_rec = 0, n_lat = 0;
    if (!(kv->slot = pk_calloc((size_t)n_layer, sizeof *kv->slot))) return PK_ERR_NOMEM;
    for (int l = 0; l < n_layer; l++) {
        const pk_kv_need *n = &need[l];
        PK_ASSERT(n->kind != PK_MEM_KV || (n->k_dim == att->k_dim && n->v_dim == att->v_dim &&
                                           n->n_head_kv == att->n_head_kv));
        PK_ASSERT(n->kind != PK_MEM_STATE || (n->conv_rows == rec->conv_rows && n->conv_dim == rec->conv_dim &&
                                              n->ssm_size == rec->ssm_size));
        PK_ASSERT(n->kind != PK_MEM_LATENT || n->lat_dim == lat->lat_dim);
        kv->slot[l] = n->kind == PK_MEM_KV ? n_att++ : n->kind == PK_MEM_STATE ? n_rec++
                      : n->kind == PK_MEM_LATENT ? n_lat++ : -1;
    }
    kv->n_att = n_att;
    kv->n_rec = n_rec;
    kv->n_lat = n_lat;
    size_t per = (size_t)n_att * (size_t)n_ctx;
    kv->k = pk_calloc(per, kv->k_row > 0 ? kv->k_row : 1);
    kv->v = pk_calloc(per, kv->v_row > 0 ? kv->v_row : 1);
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
    free(kv->k);
    free(kv->v);
    free(kv->conv);
    free(kv->ssm);
    free(kv->lat);
    kv->lat = NULL;
    kv->slot = NULL;
    kv->k = kv->v = NULL;
    kv->conv = kv->ssm = NULL;
}
