/* kv.c - allocation of the KV cache (see kv.h). */
#include <stdlib.h>
#include "common.h"
#include "kv.h"

int pk_kv_init(pk_kv *kv, int n_layer, int n_ctx, int k_dim, int v_dim) {
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->k_dim = k_dim;
    kv->v_dim = v_dim;
    size_t per = (size_t)n_layer * (size_t)n_ctx;
    kv->k = pk_calloc(per, (size_t)k_dim * sizeof(float));
    kv->v = pk_calloc(per, (size_t)v_dim * sizeof(float));
    if (!kv->k || !kv->v) {
        pk_kv_free(kv);
        return PK_ERR_NOMEM;
    }
    return PK_OK;
}

void pk_kv_free(pk_kv *kv) {
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}
