/* kernels/att_driver.h - the attention drivers over F16 / Q8_0 KV caches of
 * kernels/arm/neon_att.c (kernels/x86/avx2_att.c has its own, register-blocked
 * over rows and positions). Not a translation unit: included inside the ISA
 * guard, after the vocabulary; the including file defines the four tiles
 * declared here:
 *   kq_f16_tile(MT, n, Q, ldq, k, s, lds)     scores of MT (1..4) queries
 *                                             against one F16 key row
 *   kq_q8_0_tile(MT, nb, Q, ldq, k, s, lds)   the same, a Q8_0 key row
 *   pv_f16_rows(MT, nk, n, P, ldp, V, ...)    MT (1..4) output rows from the
 *                                             F16 value rows (any n; may use
 *                                             pv_f16_tail for the last < 1
 *                                             vector of elements)
 *   pv_q8_0_tile(MT, nk, P, ldp, V, ..., b)   MT (1..2) output rows, the 32
 *                                             elements of block b
 * The drivers tile the M queries / probability rows (4, then 3, 2, 1; Q8_0
 * values 2, then 1) and walk the key rows; a query's result depends on its
 * tile size only through the tile's own code, which every ISA file keeps
 * the same for every size (see their numerics notes). */

AI void kq_f16_tile(const int MT, int n, const float *Q, int64_t ldq, const uint16_t *k, float *s, int64_t lds);
AI void kq_q8_0_tile(const int MT, int nb, const float *Q, int64_t ldq, const pk_block_q8_0 *k, float *s,
                     int64_t lds);
AI void pv_f16_rows(const int MT, int nk, int n, const float *P, int64_t ldp, const uint8_t *V, size_t stride,
                    float *O, int64_t ldo);
AI void pv_q8_0_tile(const int MT, int nk, const float *P, int64_t ldp, const uint8_t *V, size_t stride, int b,
                     float *O, int64_t ldo);

/* rows i < MT, elements [e0, n) of F16 value rows, in scalar (the tail
 * shorter than a vector) */
static void pv_f16_tail(int MT, int nk, const float *P, int64_t ldp, const uint8_t *V, size_t stride, int e0,
                        int n, float *O, int64_t ldo) {
    for (int i = 0; i < MT; i++) {
        float *o = O + i * ldo;
        for (int e = e0; e < n; e++) o[e] = 0.0f;
        for (int p = 0; p < nk; p++) {
            const float w = P[i * ldp + p];
            if (w == 0.0f) continue;
            const uint16_t *v = (const uint16_t *)(V + (size_t)p * stride);
            for (int e = e0; e < n; e++) o[e] += w * pk_fp16_to_fp32(v[e]);
        }
    }
}

static void att_kq_f16(int M, int nk, int n, const float *Q, int64_t ldq, const void *K, size_t stride,
                       float *S, int64_t lds) {
    for (int p = 0; p < nk; p++) {
        const uint16_t *k = (const uint16_t *)((const uint8_t *)K + (size_t)p * stride);
        int m = 0;
        for (; m + 4 <= M; m += 4) kq_f16_tile(4, n, Q + m * ldq, ldq, k, S + m * lds + p, lds);
        switch (M - m) {
        case 3: kq_f16_tile(3, n, Q + m * ldq, ldq, k, S + m * lds + p, lds); break;
        case 2: kq_f16_tile(2, n, Q + m * ldq, ldq, k, S + m * lds + p, lds); break;
        case 1: kq_f16_tile(1, n, Q + m * ldq, ldq, k, S + m * lds + p, lds); break;
        default: break;
        }
    }
}

static void att_kq_q8_0(int M, int nk, int n, const float *Q, int64_t ldq, const void *K, size_t stride,
                        float *S, int64_t lds) {
    const int nb = n / PK_QK8_0;
    for (int p = 0; p < nk; p++) {
        const pk_block_q8_0 *k = (const pk_block_q8_0 *)((const uint8_t *)K + (size_t)p * stride);
        int m = 0;
        for (; m + 4 <= M; m += 4) kq_q8_0_tile(4, nb, Q + m * ldq, ldq, k, S + m * lds + p, lds);
        switch (M - m) {
        case 3: kq_q8_0_tile(3, nb, Q + m * ldq, ldq, k, S + m * lds + p, lds); break;
        case 2: kq_q8_0_tile(2, nb, Q + m * ldq, ldq, k, S + m * lds + p, lds); break;
        case 1: kq_q8_0_tile(1, nb, Q + m * ldq, ldq, k, S + m * lds + p, lds); break;
        default: break;
        }
    }
}

static void att_pv_f16(int M, int nk, int n, const float *P, int64_t ldp, const void *V, size_t stride,
                       float *O, int64_t ldo) {
    int m = 0;
    for (; m + 4 <= M; m += 4) pv_f16_rows(4, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo);
    switch (M - m) {
    case 3: pv_f16_rows(3, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo); break;
    case 2: pv_f16_rows(2, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo); break;
    case 1: pv_f16_rows(1, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo); break;
    default: break;
    }
}

static void att_pv_q8_0(int M, int nk, int n, const float *P, int64_t ldp, const void *V, size_t stride,
                        float *O, int64_t ldo) {
    const int nb = n / PK_QK8_0;
    int m = 0;
    for (; m + 2 <= M; m += 2)
        for (int b = 0; b < nb; b++) pv_q8_0_tile(2, nk, P + m * ldp, ldp, V, stride, b, O + m * ldo, ldo);
    if (m < M)
        for (int b = 0; b < nb; b++) pv_q8_0_tile(1, nk, P + m * ldp, ldp, V, stride, b, O + m * ldo, ldo);
}
