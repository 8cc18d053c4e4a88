/* kv.c - allocation of the sequence memory (see kv.h). */
#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "kv.h"
#include "quant.h"

int pk_kv_init(pk_kv *kv, int n_layer, const uint8_t *recurrent, int n_ctx, int n_head_kv, int k_dim,
               int v_dim, int type_k, int type_v, int conv_rows, int conv_dim, int ssm_size) {
    memset(kv, 0, sizeof *kv);
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->k_dim = k_dim;
    kv->v_dim = v_dim;
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->n_head_kv = n_head_kv > 0 ? n_head_kv : 1;
    kv->k_head = pk_row_size(type_k, k_dim / kv->n_head_kv);
    kv->v_head = pk_row_size(type_v, v_dim / kv->n_head_kv);
    kv->k_row = kv->k_head * (size_t)kv->n_head_kv;
    kv->v_row = kv->v_head * (size_t)kv->n_head_kv;
    kv->conv_rows = conv_rows;
    kv->conv_dim = conv_dim;
    kv->ssm_size = ssm_size;
    int n_att = 0, n_rec = 0;
    if (!(kv->slot = pk_calloc((size_t)n_layer, sizeof *kv->slot))) return PK_ERR_NOMEM;
    for (int l = 0; l < n_layer; l++)
        kv->slot[l] = recurrent && recurrent[l] ? n_rec++ : n_att++;
    kv->n_att = n_att;
    kv->n_rec = n_rec;
    size_t per = (size_t)n_att * (size_t)n_ctx;
    kv->k = pk_calloc(per, kv->k_row > 0 ? kv->k_row : 1);
    kv->v = pk_calloc(per, kv->v_row > 0 ? kv->v_row : 1);
    kv->conv = pk_calloc((size_t)n_rec * conv_rows, (size_t)conv_dim * sizeof(float));
    kv->ssm = pk_calloc((size_t)n_rec, (size_t)ssm_size * sizeof(float));
    if (!kv->k || !kv->v || !kv->conv || !kv->ssm) {
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
    kv->slot = NULL;
    kv->k = kv->v = NULL;
    kv->conv = kv->ssm = NULL;
}
