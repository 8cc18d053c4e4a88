/* kernels/x86/avx2_deltanet.c - the Gated DeltaNet decode step (pk_delta_step_fn)
 * with AVX2 + FMA: used by the avx2 table and inherited by avx512 and amx.
 *
 * Tuned for: decoding POCKET-35B-class models, whose 30 recurrent layers x
 * 32 heads each carry a 128 x 128 float state (64 KiB: it comes from DRAM
 * once per token and stays in L2 between the two passes below). One read-only
 * pass computes S0^T k and S0^T q together, one read-write pass updates S:
 *   delta = beta (v - decay S0^T k)
 *   o     = decay S0^T q + delta (k . q)          (= S^T q after the update)
 *   S     = decay S0 + k delta^T
 * Columns go in blocks of 32 (8 accumulators in registers), then 8, then one.
 *
 * Numerics: the same maths as the reference recurrence, reassociated (decay
 * applied after the sums; o from S0 rather than from the updated S; FMA):
 * equal to float rounding, not bitwise.
 */
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* kvs[e] = sum_i S[i][e] k[i], qvs[e] = sum_i S[i][e] q[i] for e in [e0, e0 + 8 NB), for
 * every whole block of 8 NB columns from e0 on; returns the first column left */
static inline __attribute__((always_inline)) int read_blocks(const int NB, const float *S, int d, const float *q,
                                                             const float *k, float *kvs, float *qvs, int e0) {
    for (; e0 + 8 * NB <= d; e0 += 8 * NB) {
        __m256 ak[4], aq[4];   /* NB <= 4 */
        for (int b = 0; b < NB; b++) ak[b] = aq[b] = _mm256_setzero_ps();
        for (int i = 0; i < d; i++) {
            const float *row = S + (size_t)i * d + e0;
            const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
            for (int b = 0; b < NB; b++) {
                __m256 s = _mm256_loadu_ps(row + 8 * b);
                ak[b] = _mm256_fmadd_ps(s, ki, ak[b]);
                aq[b] = _mm256_fmadd_ps(s, qi, aq[b]);
            }
        }
        for (int b = 0; b < NB; b++) {
            _mm256_storeu_ps(kvs + e0 + 8 * b, ak[b]);
            _mm256_storeu_ps(qvs + e0 + 8 * b, aq[b]);
        }
    }
    return e0;
}

static void delta_step(float *S, int d, const float *q, const float *k, const float *v, float decay,
                       float beta, float *o) {
    float kvs[PK_MAX_SSM_STATE], qvs[PK_MAX_SSM_STATE], delta[PK_MAX_SSM_STATE];
    int e0 = read_blocks(4, S, d, q, k, kvs, qvs, 0);
    e0 = read_blocks(1, S, d, q, k, kvs, qvs, e0);
    for (; e0 < d; e0++) {
        float sk = 0.0f, sq = 0.0f;
        for (int i = 0; i < d; i++) {
            sk += S[(size_t)i * d + e0] * k[i];
            sq += S[(size_t)i * d + e0] * q[i];
        }
        kvs[e0] = sk;
        qvs[e0] = sq;
    }
    float kq = 0.0f;
    for (int i = 0; i < d; i++) kq += k[i] * q[i];
    for (int e = 0; e < d; e++) {
        delta[e] = beta * (v[e] - decay * kvs[e]);
        o[e] = decay * qvs[e] + delta[e] * kq;
    }
    const __m256 dc = _mm256_set1_ps(decay);
    for (int i = 0; i < d; i++) {
        float *row = S + (size_t)i * d;
        const __m256 ki = _mm256_set1_ps(k[i]);
        int e = 0;
        for (; e + 8 <= d; e += 8)
            _mm256_storeu_ps(row + e, _mm256_fmadd_ps(ki, _mm256_loadu_ps(delta + e),
                                                      _mm256_mul_ps(dc, _mm256_loadu_ps(row + e))));
        for (; e < d; e++) row[e] = decay * row[e] + k[i] * delta[e];
    }
}

const pk_kernels pk_kernels_avx2_deltanet = {.delta_step = delta_step};
#else
const pk_kernels pk_kernels_avx2_deltanet = {0};
#endif
