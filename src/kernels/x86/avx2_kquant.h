/* kernels/x86/avx2_kquant.h - the AVX2 / AVX-VNNI prompt kernels of the K-quants
 * (Q2_K .. Q6_K, IQ4_XS) and the i-quants below 4 bits x Q8_K activations:
 * per-row kernels over a tile of tokens, 2-row kernels (Q2_K .. Q6_K on
 * plain AVX2; IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S, IQ2_S, IQ1_S, IQ1_M on both) and, with
 * K8_ON, the 8-row interleaved ones of kri8.h. Part of
 * avx2_gemm.c: included there once, inside its ISA guard, after the byte
 * permutations and the tile sizes (TK_*) it uses; not a header of its own. */

/* ---- K-quants x Q8_K -------------------------------------------------------- */

#include "kernels/x86/iq2_ops.h"
#include "kernels/x86/avx2_iq1.h"

/* One token's super-block, prepared for a kind of kernel (1: Q6_K, 2: Q5_K,
 * 3: Q4_K, 4: Q3_K, 5: Q2_K, 6: IQ2_XXS, 7: IQ2_XS, 8: IQ1_S, 9: IQ1_M, 10-12:
 * IQ3_XXS, IQ3_S, IQ2_S): the levels permuted (kind 1 perm1, 2 perm2, 3-5
 * perm3; the signed kinds 6-12: in order, + 128 as unsigned bytes); P = d *
 * bsums (kind 5: per 16, kinds 2-4: per 32); the level offsets' int16 lane
 * sums c (kind 1: 32 * the lane's activations summed over registers 0..3 |
 * 4..7; kind 4: 4 * the sum over all 8 registers); and d. */
typedef struct {
    int8_t q[256];
    float P[16];
    int16_t c[32];
    float d;
    float pad[7];
} xk;

static void prep_k(int kind, int tk, int nt, const pk_block_q8_K *const *xs, int kb, xk *X, float *D) {
    for (int i = 0; i < kb * tk; i++) D[i] = 0.0f;
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < kb; b++) {
            const pk_block_q8_K *s = &xs[t][b];
            xk *o = &X[t * kb + b];
            __m256i v[8];
            for (int k = 0; k < 8; k++) v[k] = ld(s->qs + 32 * k);
            if (kind == 1) perm1(v);
            else if (kind == 2) perm2(v);
            else if (kind >= 3 && kind <= 5) perm3(v);
            else for (int k = 0; k < 8; k++) v[k] = _mm256_xor_si256(v[k], _mm256_set1_epi8((char)0x80));
            for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(o->q + 32 * k), v[k]);
            if (kind == 1) {   /* 32 * pair sums, summed over 4 registers: |.| <= 32512 */
                const __m256i k32 = _mm256_set1_epi8(32);
                __m256i ca = _mm256_setzero_si256(), cb = ca;
                for (int k = 0; k < 4; k++) {
                    ca = _mm256_add_epi16(ca, _mm256_maddubs_epi16(k32, v[k]));
                    cb = _mm256_add_epi16(cb, _mm256_maddubs_epi16(k32, v[k + 4]));
                }
                _mm256_store_si256((__m256i *)o->c, ca);
                _mm256_store_si256((__m256i *)(o->c + 16), cb);
            } else if (kind == 4) {   /* 4 * pair sums over 8 registers: |.| <= 8128 */
                const __m256i k4 = _mm256_set1_epi8(4);
                __m256i c = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) c = _mm256_add_epi16(c, _mm256_maddubs_epi16(k4, v[k]));
                _mm256_store_si256((__m256i *)o->c, c);
            }
            __m256i bs = ld(s->bsums);
            __m256 d = _mm256_set1_ps(s->d);
            if (kind == 5) {
                _mm256_store_ps(o->P, _mm256_mul_ps(d, _mm256_cvtepi32_ps(
                                          _mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs)))));
                _mm256_store_ps(o->P + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(
                                              _mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs, 1)))));
            } else if (kind <= 5) {
                _mm256_store_ps(o->P, _mm256_mul_ps(d, _mm256_cvtepi32_ps(
                                          _mm256_madd_epi16(bs, _mm256_set1_epi16(1)))));
            }
            o->d = s->d;
            D[b * tk + t] = s->d;
        }
}


/* y[t * ys] (+)= the sum of acc[t] */
static inline void store_acc(int nt, const __m256 *acc, float *y, int64_t ys, int first) {
    for (int t = 0; t < nt; t++) {
        float v = hsum8(acc[t]);
        y[t * ys] = first ? v : y[t * ys] + v;
    }
}

/* sum of 4 vpmaddubsw products (v[i..i+3] with the prepared q at 32 i) in int16 */
GI __m256i mb4(const __m256i *v, const int8_t *q) {
    return _mm256_add_epi16(_mm256_add_epi16(mb(v[0], q), mb(v[1], q + 32)),
                            _mm256_add_epi16(mb(v[2], q + 64), mb(v[3], q + 96)));
}

/* bits `from` of q's bytes moved to bit `to`, masked by mask */
GI __m256i bit_to(__m256i q, const int from, const int to, int mask) {
    __m256i s = from < to ? _mm256_slli_epi16(q, to - from) : from > to ? _mm256_srli_epi16(q, from - to) : q;
    return _mm256_and_si256(s, _mm256_set1_epi8((char)mask));
}

/* v[k] |= bit k of hb's bytes moved to bit `to` (mask: that bit), k < 8 */
GI void or_bits(__m256i *v, __m256i hb, const int to, int mask) {
    for (int k = 0; k < 8; k++) v[k] = _mm256_or_si256(v[k], bit_to(hb, k, to, mask));
}

/* The int16 lane scales of 16-element sub-blocks (Q6_K, Q3_K) from their 16
 * int8 scales, in the lane order of a permutation (the sub-block of lane i
 * is idx[i]). */
GI __m256i lane_scales(__m128i sc8, __m128i idx) { return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, idx)); }

/* The per-row K-quant kernels, by kind (the prep_k kind of the type) */
enum { KQ_Q6_K = 1, KQ_Q5_K = 2, KQ_Q4_K = 3, KQ_Q3_K = 4, KQ_Q2_K = 5, KQ_IQ2_XXS = 6, KQ_IQ2_XS = 7,
       KQ_IQ1_S = 8, KQ_IQ1_M = 9, KQ_IQ3_XXS = 10, KQ_IQ3_S = 11, KQ_IQ2_S = 12 };
GI int kq_iq2k(const int K) { return K == KQ_IQ2_XXS || K == KQ_IQ2_XS; }
GI int kq_iq1k(const int K) { return K == KQ_IQ1_S || K == KQ_IQ1_M; }
/* the lattice i-quants (kernels/x86/iq_lattice.h) and their IQL_* */
GI int kq_latk(const int K) { return K >= KQ_IQ3_XXS; }
GI int kq_iql(const int K) { return K == KQ_IQ3_XXS ? IQL_IQ3_XXS : K == KQ_IQ3_S ? IQL_IQ3_S : IQL_IQ2_S; }
/* signed levels against the activations + 128: IQ2_XXS, IQ2_XS and the lattice types */
GI int kq_signed(const int K) { return kq_iq2k(K) || kq_latk(K) || kq_iq1k(K); }
/* two halves of level registers with scales of their own (S, SB) */
GI int kq_halves(const int K) { return K == KQ_Q5_K || K == KQ_Q6_K; }

GI size_t kq_bsize(const int K) {
    return K == KQ_IQ3_XXS ? sizeof(pk_block_iq3_xxs) : K == KQ_IQ3_S ? sizeof(pk_block_iq3_s)
         : K == KQ_IQ2_S ? sizeof(pk_block_iq2_s) : K == KQ_IQ1_S ? sizeof(pk_block_iq1_s) : K == KQ_IQ1_M ? sizeof(pk_block_iq1_m)
         : K == KQ_IQ2_XXS ? sizeof(pk_block_iq2_xxs) : K == KQ_IQ2_XS ? sizeof(pk_block_iq2_xs)
         : K == KQ_Q2_K ? sizeof(pk_block_q2_K) : K == KQ_Q3_K ? sizeof(pk_block_q3_K)
         : K == KQ_Q4_K ? sizeof(pk_block_q4_K) : K == KQ_Q5_K ? sizeof(pk_block_q5_K) : sizeof(pk_block_q6_K);
}
/* the token tile on rows of more than 3 super-blocks */
GI int kq_tkl(const int K) {
    return K == KQ_Q2_K ? TK_Q2_K : K == KQ_Q3_K ? TK_Q3_K : K == KQ_Q4_K ? TK_Q4_K : K == KQ_Q5_K ? TK_Q5_K : TK_Q6_K;
}

/* One row's super-block, decoded: the 8 permuted level registers v, the
 * int16 lane scales (S; Q5_K, Q6_K: SA for registers 0..3 in S, SB for
 * 4..7; IQ2_XXS, IQ2_XS: sc, register by register), the float mins (Q4_K,
 * Q5_K: mins0 per sub-block; Q2_K: mins0 | mins1 for sub-blocks 0..7 |
 * 8..15, both times dmin), the signed kinds' corr and d (IQ2_XXS, IQ2_XS: / 8;
 * the lattice types: times iql_factor; IQ1_S, IQ1_M: / 8, kq_iq1). */
typedef struct {
    __m256i v[8];
    __m256i S, SB;
    __m256i sc[8], corr;
    __m256 mins0, mins1;
    float dwf;
} kq_dec;

/* IQ2_XXS, IQ2_XS: the signed levels (magnitude times sign, |.| <= 43) of
 * the 8 sub-blocks (kernels/x86/iq2_ops.h), each register's int16 scales 2 ls
 * + 1, and corr = 128 * sum of scale * level per int32 lane: against the
 * activations + 128 as unsigned bytes, vpmaddubsw pairs (<= 2 * 255 * 43 <
 * 2^15) summed by vpmaddwd with the scales, minus corr, are the reference's
 * isum exactly (8x the block's sum: dwf is d / 8); lanes < 2^24. */
GI void kq_iq2(const int XS, const uint8_t *w, kq_dec *o) {
    const __m256i halves = XS ? iq2_xs_halves(w) : _mm256_setzero_si256();
    __m256i c = _mm256_setzero_si256();
#pragma GCC unroll 8   /* s a constant in iq2_sub / iq2_scale */
    for (int s = 0; s < 8; s++) {
        __m256i pts, sgn;
        iq2_sub(XS, w, s, &pts, &sgn);
        o->v[s] = _mm256_sign_epi8(pts, sgn);
        o->sc[s] = iq2_scale(XS, w, s, halves);
        c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), o->v[s]), o->sc[s]));
    }
    o->corr = _mm256_slli_epi32(c, 7);
    uint16_t d;
    memcpy(&d, w, 2);
    o->dwf = 0.125f * f16f(d);
}

/* IQ3_XXS, IQ3_S, IQ2_S: as kq_iq2, the signed levels of the 8 sub-blocks
 * (grid coordinates <= 62 with their signs: vpmaddubsw pairs <= 2 * 255 *
 * 62 < 2^15), each register's int16 scales 2 ls + 1 (IQ2_S: its halves';
 * the IQ3 types: one per sub-block) and corr; dwf is d times iql_factor.
 * The sub-block loops here and in kq_iq2 are unrolled: with s a variable,
 * gcc built iql_sub_scale's vpshufb control byte by byte per sub-block
 * (about a dozen instructions), and a decode took 104 cycles on Zen 3
 * (IQ2_S; IQ3_S 134, IQ2_XXS 72) instead of 61 (77, 59; bench/results/
 * 2026-12-07-epyc-zen3-iq-kernels.md). */
GI void kq_lattice(const int L, const void *w, kq_dec *o) {
    const void *grid = iql_grid(L);
    iql_idx ix;
    iql_index(L, w, &ix);
    __m256i slo, shi;
    iql_odd_scales(L, w, &slo, &shi);
    __m256i c = _mm256_setzero_si256();
#pragma GCC unroll 8   /* sb a constant: iql_sub_scale's vpshufb control too (not built per sub-block) */
    for (int s = 0; s < 8; s++) {
        o->v[s] = _mm256_sign_epi8(iql_levels(L, w, s, grid, &ix), iql_signs(L, w, s));
        o->sc[s] = iql_sub_scale(slo, shi, s);
        c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), o->v[s]), o->sc[s]));
    }
    o->corr = _mm256_slli_epi32(c, 7);
    uint16_t d;
    memcpy(&d, w, 2);   /* every lattice block starts with its fp16 d */
    o->dwf = iql_factor(L) * f16f(d);
}

/* IQ1_S, IQ1_M as the signed kinds: eight times each level, 8 g + 1 or
 * 8 g - 1 (|.| <= 9) for the grid point's g in {-1, 0, 1} and the group's
 * delta sign (so the product with the activations is exact in integers),
 * register s sub-block s in order; sc[s] its int16 scales 2 ls + 1 (IQ1_M:
 * one per half of the sub-block, its 128-bit lane; IQ1_S one per
 * sub-block); corr as kq_iq2; dwf = d / 8. */
GI void kq_iq1(const int M, const void *wv, kq_dec *o) {
    const uint64_t *grid = pk_iq1s_grid();
    uint16_t idx[32] __attribute__((aligned(32)));
    int16_t ls[16] __attribute__((aligned(32)));
    uint16_t d16;
    if (M) {
        const pk_block_iq1_m *w = wv;
        __m256i neg[2];
        iq1_m_index(w, idx, neg);
        _mm256_store_si256((__m256i *)(void *)ls, iq1_m_scales(w));
        d16 = pk_iq1_m_d(w->scales);
    } else {
        const pk_block_iq1_s *w = wv;
        iq1_s_index(w, idx);
        _mm_store_si128((__m128i *)(void *)ls, iq1_s_scales(w));
        d16 = w->d;
    }
    iq1_stored();
    /* IQ1_M: the delta sign of group 4s + g is bit 3 (g even) or 7 of qh[2s + g / 2] */
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m256i bit = _mm256_setr_epi64x(0x0808080808080808ll, (long long)0x8080808080808080ull,
                                           0x0808080808080808ll, (long long)0x8080808080808080ull);
    __m256i c = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        const uint16_t *i = idx + 4 * s;
        __m256i g = _mm256_setr_epi64x((long long)grid[i[0]], (long long)grid[i[1]], (long long)grid[i[2]],
                                       (long long)grid[i[3]]);
        __m256i neg;   /* -1 in the bytes of a group whose delta is negative */
        if (M) {
            uint16_t h;
            memcpy(&h, ((const pk_block_iq1_m *)wv)->qh + 2 * s, 2);
            __m256i b = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi16((short)h), pick), bit);
            neg = _mm256_cmpeq_epi8(b, bit);
            o->sc[s] = _mm256_setr_m128i(_mm_set1_epi16(ls[2 * s]), _mm_set1_epi16(ls[2 * s + 1]));
        } else {
            uint16_t h;
            memcpy(&h, ((const pk_block_iq1_s *)wv)->qh + s, 2);
            neg = _mm256_srai_epi16(_mm256_set1_epi16((short)h), 15);
            o->sc[s] = _mm256_set1_epi16(ls[s]);
        }
        o->v[s] = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), _mm256_or_si256(neg, _mm256_set1_epi8(1)));
        c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), o->v[s]), o->sc[s]));
    }
    o->corr = _mm256_slli_epi32(c, 7);
    o->dwf = 0.125f * f16f(d16);
}

/* Q4_K, Q5_K: the 8 nibble registers, natural register 2h = low nibbles of
 * qs[32h..], 2h+1 = high nibbles (sub-blocks 2h, 2h+1) */
GI void kq_nibbles(const uint8_t *qs, __m256i *v) {
    for (int h = 0; h < 4; h++) {
        __m256i q = ld(qs + 32 * h);
        v[2 * h] = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
        v[2 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
    }
}
/* Q4_K, Q5_K: the 8 sub-block mins times dmin */
GI __m256 kq_mins8(const uint8_t *mn, uint16_t dmin) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn))),
                         _mm256_set1_ps(f16f(dmin)));
}
/* Q3_K, Q2_K: natural register 4h + k = bits 2k of qs[32h + l] */
GI void kq_crumbs(const uint8_t *qs, __m256i *v) {
    for (int h = 0; h < 2; h++) {
        __m256i q = ld(qs + 32 * h);
        const __m256i m2 = _mm256_set1_epi8(3);
        v[4 * h + 0] = _mm256_and_si256(q, m2);
        v[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 2), m2);
        v[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m2);
        v[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(q, 6), m2);
    }
}

/* Q4_K: after perm3 lane i of every register is sub-block i.
 * Q5_K: Q4_K plus the fifth bit k of qh[l] for natural register k; perm2:
 * registers 0..3 lanes [0 1 2 3 0 1 2 3] (sub-blocks), 4..7 [4 5 6 7 ...].
 * Q6_K: natural register 4h + k (elements 128h + 32k + l): low nibble from
 * ql[64h + 32(k & 1) + l] (high nibble for k >= 2), bits 4-5 from bits 2k of
 * qh[32h + l]; levels 0..63. After perm1 four registers share each lane's
 * sub-block: their vpmaddubsw products (each <= 2 * 63 * 127) are summed in
 * int16 and the -32 offset (c) subtracted, wrapping: the true sum of 8
 * products (q - 32) x is within 8 * 32 * 127 < 2^15, so it comes out exact;
 * then one vpmaddwd per 4 registers.
 * Q3_K: natural register 4h + k: bits 2k of qs[32h + l] and bit 4h + k of
 * hmask[l] as bit 2: levels 0..7; 6-bit scales minus 32 unpacked with
 * 32-bit word operations. After perm3 all 8 registers share each lane's
 * sub-block: products summed in int16 (<= 8 * 2 * 7 * 127), the -4 offset
 * (c) subtracted, one vpmaddwd.
 * Q2_K: natural register 4h + k = bits 2k of qs[32h + l] (sub-blocks 2r |
 * 2r + 1 of register r); after perm3 the 8 registers' products (each lane
 * <= 2 * 3 * 127) are summed in int16, then one vpmaddwd with the 4-bit
 * scales; the mins in float against d * bsums. */
GI void kq_decode(const int K, const void *wv, kq_dec *o) {
    __m256i *v = o->v;
    if (kq_iq2k(K)) {
        kq_iq2(K == KQ_IQ2_XS, wv, o);
    } else if (kq_latk(K)) {
        kq_lattice(kq_iql(K), wv, o);
    } else if (kq_iq1k(K)) {
        kq_iq1(K == KQ_IQ1_M, wv, o);
    } else if (K == KQ_Q4_K) {
        const pk_block_q4_K *wb = wv;
        uint8_t sc[8], mn[8];
        pk_get_scales_mins_k4(wb->scales, sc, mn);
        o->S = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
        o->mins0 = kq_mins8(mn, wb->dmin);
        o->dwf = f16f(wb->d);
        kq_nibbles(wb->qs, v);
        perm3(v);
    } else if (K == KQ_Q5_K) {
        const pk_block_q5_K *wb = wv;
        uint8_t sc[8], mn[8];
        pk_get_scales_mins_k4(wb->scales, sc, mn);
        const __m128i sc16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc));
        o->S = _mm256_broadcastsi128_si256(_mm_unpacklo_epi64(sc16, sc16));
        o->SB = _mm256_broadcastsi128_si256(_mm_unpackhi_epi64(sc16, sc16));
        o->mins0 = kq_mins8(mn, wb->dmin);
        o->dwf = f16f(wb->d);
        const __m256i qh = ld(wb->qh);
        kq_nibbles(wb->qs, v);
        or_bits(v, qh, 4, 0x10);
        perm2(v);
    } else if (K == KQ_Q6_K) {
        const pk_block_q6_K *wb = wv;
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
        o->S = lane_scales(sc8, _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5, 7, 7));
        o->SB = lane_scales(sc8, _mm_setr_epi8(8, 8, 10, 10, 12, 12, 14, 14, 9, 9, 11, 11, 13, 13, 15, 15));
        o->dwf = f16f(wb->d);
        for (int h = 0; h < 2; h++) {
            __m256i la = ld(wb->ql + 64 * h), lb = ld(wb->ql + 64 * h + 32), qh = ld(wb->qh + 32 * h);
            const __m256i m4 = _mm256_set1_epi8(0x0F);
            v[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(la, m4), bit_to(qh, 0, 4, 0x30));
            v[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(lb, m4), bit_to(qh, 2, 4, 0x30));
            v[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), bit_to(qh, 4, 4, 0x30));
            v[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4), bit_to(qh, 6, 4, 0x30));
        }
        perm1(v);
    } else if (K == KQ_Q3_K) {
        const pk_block_q3_K *wb = wv;
        uint32_t a0, a1, a2;
        memcpy(&a0, wb->scales, 4); memcpy(&a1, wb->scales + 4, 4); memcpy(&a2, wb->scales + 8, 4);
        const __m128i sc8 = _mm_sub_epi8(_mm_setr_epi32(
            (int)((a0 & 0x0F0F0F0Fu) | (a2 & 0x03030303u) << 4),
            (int)((a1 & 0x0F0F0F0Fu) | ((a2 >> 2) & 0x03030303u) << 4),
            (int)(((a0 >> 4) & 0x0F0F0F0Fu) | ((a2 >> 4) & 0x03030303u) << 4),
            (int)(((a1 >> 4) & 0x0F0F0F0Fu) | ((a2 >> 6) & 0x03030303u) << 4)), _mm_set1_epi8(32));
        o->S = lane_scales(sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        o->dwf = f16f(wb->d);
        const __m256i hm = ld(wb->hmask);
        kq_crumbs(wb->qs, v);
        or_bits(v, hm, 2, 0x04);
        perm3(v);
    } else {
        const pk_block_q2_K *wb = wv;
        const __m128i s8 = _mm_loadu_si128((const __m128i *)wb->scales);
        o->S = lane_scales(_mm_and_si128(s8, _mm_set1_epi8(0x0F)),
                           _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
        const __m128i m8 = _mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F));
        const __m256 dmin = _mm256_set1_ps(f16f(wb->dmin));
        o->mins0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m8)), dmin);
        o->mins1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(m8, 8))), dmin);
        o->dwf = f16f(wb->d);
        kq_crumbs(wb->qs, v);
        perm3(v);
    }
}

/* acc plus one token's product with the decoded super-block k: xp its
 * prepared block, dd the super-block factor d * dx */
GI __m256 kq_body(const int K, const kq_dec *k, const xk *xp, const float *dd, __m256 acc) {
    const __m256i *v = k->v;
    if (K == KQ_Q4_K) {
        __m256i s16 = _mm256_add_epi16(mb4(v, xp->q), mb4(v + 4, xp->q + 128));
        __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, k->S));
        acc = _mm256_fmadd_ps(f, _mm256_broadcast_ss(dd), acc);
        return _mm256_fnmadd_ps(k->mins0, _mm256_load_ps(xp->P), acc);
    }
    if (K == KQ_Q5_K) {
        __m256i i32 = _mm256_add_epi32(_mm256_madd_epi16(mb4(v, xp->q), k->S),
                                       _mm256_madd_epi16(mb4(v + 4, xp->q + 128), k->SB));
        __m256 f = _mm256_cvtepi32_ps(i32);
        acc = _mm256_fmadd_ps(f, _mm256_broadcast_ss(dd), acc);
        return _mm256_fnmadd_ps(k->mins0, _mm256_load_ps(xp->P), acc);
    }
    if (K == KQ_Q6_K) {
        __m256i sa = _mm256_sub_epi16(mb4(v, xp->q), _mm256_load_si256((const __m256i *)xp->c));
        __m256i sb = _mm256_sub_epi16(mb4(v + 4, xp->q + 128), _mm256_load_si256((const __m256i *)(xp->c + 16)));
        __m256i i32 = _mm256_add_epi32(_mm256_madd_epi16(sa, k->S), _mm256_madd_epi16(sb, k->SB));
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), _mm256_broadcast_ss(dd), acc);
    }
    if (K == KQ_Q3_K) {
        __m256i s16 = _mm256_sub_epi16(_mm256_add_epi16(mb4(v, xp->q), mb4(v + 4, xp->q + 128)),
                                       _mm256_load_si256((const __m256i *)xp->c));
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16, k->S)), _mm256_broadcast_ss(dd), acc);
    }
    __m256i s16 = _mm256_add_epi16(mb4(v, xp->q), mb4(v + 4, xp->q + 128));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16, k->S)), _mm256_broadcast_ss(dd), acc);
    acc = _mm256_fnmadd_ps(k->mins0, _mm256_load_ps(xp->P), acc);
    return _mm256_fnmadd_ps(k->mins1, _mm256_load_ps(xp->P + 8), acc);
}

/* The driver: per k-block and token tile (TKT tokens), prepare; per row,
 * decode each super-block (kq_decode), form dd[t] = dwf * d of every token
 * (a multiply per 8), and add every token's product (kq_body) to its
 * accumulator acc[t]. */
#ifndef KQ_PFB
#define KQ_PFB 2304   /* bytes of k-blocks prefetched ahead: 4 rows of 4 Q4_K super-blocks */
#endif
/* the rows ahead whose k-block of `bytes` is prefetched: 4 or more, ~KQ_PFB
 * bytes (chosen by bench/ab_gemm with cold weights; fewer rows ahead gained
 * less: bench/README.md) */
GI int64_t kq_pf(size_t bytes) {
    int64_t r = (int64_t)(KQ_PFB / bytes);
    return r < 4 ? 4 : r > 16 ? 16 : r;
}
GI void kq_tile(const int K, const int TKT, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                const void *w, size_t rb, const void *const *x) {
    const size_t bs = kq_bsize(K);
    xk X[TK_MAX * KBK] __attribute__((aligned(32)));
    float D[KBK * TK_MAX] __attribute__((aligned(32))), dd[TK_MAX] __attribute__((aligned(32)));
    int64_t nb = n / PK_QK_K;
    for (int64_t k0 = 0; k0 < nb; k0 += KBK) {
        int kb = nb - k0 < KBK ? (int)(nb - k0) : KBK;
        for (int64_t t0 = 0; t0 < ntok; t0 += TKT) {
            int nt = ntok - t0 < TKT ? (int)(ntok - t0) : TKT;
            const pk_block_q8_K *xs[TK_MAX];
            for (int t = 0; t < nt; t++) xs[t] = (const pk_block_q8_K *)x[t0 + t] + k0;
            prep_k(K, TKT, nt, xs, kb, X, D);
            const int64_t pfr = kq_pf((size_t)kb * bs);
            for (int64_t r = 0; r < nrows; r++) {
                const char *wr = (const char *)w + (size_t)r * rb + (size_t)k0 * bs;
                if (r + pfr < nrows) pf_rows(wr + pfr * rb, rb, 1, (size_t)kb * bs);
                __m256 acc[TK_MAX];
                for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
                for (int b = 0; b < kb; b++) {
                    kq_dec k;
                    kq_decode(K, wr + (size_t)b * bs, &k);
                    const __m256 dwv = _mm256_set1_ps(k.dwf);
                    for (int i = 0; i < nt; i += 8)
                        _mm256_store_ps(dd + i, _mm256_mul_ps(dwv, _mm256_load_ps(D + b * TKT + i)));
                    for (int t = 0; t < nt; t++) acc[t] = kq_body(K, &k, &X[t * kb + b], &dd[t], acc[t]);
                }
                store_acc(nt, acc, y + t0 * ys + r, ys, k0 == 0);
            }
        }
    }
}
/* the per-row kernel of kind K: TK_MAX tokens per tile on rows of up to 3
 * super-blocks, else kq_tkl(K); one function per type (gemm_row_*) */
GI void kq_row(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
               size_t rb, const void *const *x) {
    if (n <= 3 * PK_QK_K) kq_tile(K, TK_MAX, n, nrows, ntok, y, ys, w, rb, x);
    else kq_tile(K, kq_tkl(K), n, nrows, ntok, y, ys, w, rb, x);
}
/* out of line: inlined into kq_gemm beside the 2-row kernel (Q5_K, Q6_K),
 * gcc 12 compiled them 1.4x slower (bench/ab_gemm, Q6_K at 8-17 tokens) */
#define KQ_ROW_DECL(NAME) \
    static void gemm_##NAME(int64_t, int64_t, int64_t, float *, int64_t, const void *, size_t, const void *const *) \
        __attribute__((noinline));
KQ_ROW_DECL(row_q4_K)
KQ_ROW_DECL(row_q5_K)
KQ_ROW_DECL(row_q6_K)
KQ_ROW_DECL(row_q3_K)
KQ_ROW_DECL(row_q2_K)
RI_ENTRY(row_q4_K, kq_row, KQ_Q4_K)
RI_ENTRY(row_q5_K, kq_row, KQ_Q5_K)
RI_ENTRY(row_q6_K, kq_row, KQ_Q6_K)
RI_ENTRY(row_q3_K, kq_row, KQ_Q3_K)
RI_ENTRY(row_q2_K, kq_row, KQ_Q2_K)

/* ---- the 2-row kernels (Q2_K .. Q6_K on plain AVX2; the signed kinds) -----------
 * kq_tile keeps one decoded row in registers and takes each token's
 * activations from L1 as the memory operand of its vpmaddubsw: one load per
 * product, besides the spills of a register file too small for the 8
 * level registers, the scales, the mins and the accumulators. kt_gemm
 * decodes the rows' super-blocks of a k-block once per token tile into an
 * L1 buffer (kq_decode, the same registers), and a register tile of 2 rows
 * x up to 4 tokens (kt_tile: 8 int16 accumulators) loads each register of
 * levels and of activations once for all its products: 6 loads for 8
 * vpmaddubsw. The sums and their epilogue per super-block and token are
 * kq_body's (the same int16 sums, scales, mins and float order: the
 * results are bitwise those of kq_tile). Measured on AMD Zen 3 (one core,
 * bench/ab_gemm, bench/results/2026-12-07-epyc-zen3-q2k-prompt.md): Q2_K
 * 1.07-1.19x kq_tile's speed from 4 to 128 tokens on 512 x 2048, 1.10-1.39x
 * on 2048 x 512; Q3_K and Q4_K 1.03-1.06x on rows of 512 below 32 tokens
 * and 1.28-1.4x from 32 on, or on Q4_K's rows of 2048 (where kq_tile's
 * 32-token tile overflows a 32 KB L1), but 0.94-1.02x on rows of 2048 with
 * kq_tile's 16-token tile. kt_use picks by that. Q5_K and Q6_K, whose
 * registers 0..3 and 4..7 have lane scales of their own, run the register
 * steps in two halves, each summed in int16 and put through its vpmaddwd
 * (Q6_K: minus its offset sums c) into an int32 sum per tile element: kq_body's
 * int32 sums, then its epilogue.
 * The signed kinds (IQ2_XXS, IQ2_XS, the lattice types, IQ1_S, IQ1_M) take the 2-row
 * kernel alone: per register j of levels each of the R x T vpmaddubsw pairs
 * goes through vpmaddwd with its row's scales sc[j] into int32 accumulators
 * that start at -corr (14 registers: the accumulators, 2 rows' levels and
 * scales, an activation): one load per vpmaddubsw + vpmaddwd where the
 * per-row kernel, whose decoded row and scales (16 registers) did not stay
 * in the register file, had three (its integer sums, the same results).
 * bench/ab_gemm on Zen 3 (one core, idle; bench/results/
 * 2026-12-07-epyc-zen3-iq-kernels.md): IQ2_S 1.10-1.17x the per-row kernel
 * from 8 to 256 tokens on 512 x 2048 and 2048 x 512; a buffer of 32 tokens
 * (each row decoded half as often, 2 super-blocks per k-block) measured the
 * same as 16. Above KT_TK tokens ka_gemm runs the same tiles on rows decoded
 * once per chunk of up to 64 tokens (below). IQ1_S and IQ1_M joined them
 * from a per-row kernel of their own (levels + 1 against activations in the
 * grid's order, the deltas through group sums): slower from 24 tokens on and
 * on a dense prompt's matrices, a few percent faster at 16 tokens and fewer
 * (bench/results/2026-12-07-epyc-zen3-iq1-prompt.md). */
enum { KT_R = 2, KT_T = 4, KT_KB = 4, KT_TK = 16 };   /* rows, tokens per tile; super-blocks, tokens per buffer */

GI int64_t kt_part(int64_t n, int64_t parts, int64_t i) { return i * (n / parts) + (i < n % parts ? i : n % parts); }

/* the accumulators of a register tile kept in registers across the loop
 * (else gcc copies each one to another register per step, or spills) */
GI void kt_pin(const int R, const int T, __m256i a[KT_R][KT_T]) {
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) __asm__("" : "+x"(a[r][t]));
}

/* R rows (W[r * kb + b]) x T tokens (X[t * xst + b]) over kb super-blocks;
 * dd[(r * kb + b) * ddk + t] the factors d * dx; y[t * ys + r] (+)= the
 * products. */
GI void kt_tile(const int K, const int R, const int T, const kq_dec *W, int kb, const xk *X, int xst,
                const float *dd, int ddk, float *y, int64_t ys, int first) {
    __m256 F[KT_R][KT_T];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) F[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < kb; b++) {
        __m256i a[KT_R][KT_T];   /* the signed kinds: int32 from -corr; else int16 sums */
        __m256i I[KT_R][KT_T];   /* Q5_K, Q6_K: the int32 sums of the halves so far */
        for (int r = 0; r < R; r++) {
            const __m256i c = kq_signed(K) ? _mm256_sub_epi32(_mm256_setzero_si256(), W[r * kb + b].corr)
                                           : _mm256_setzero_si256();
            for (int t = 0; t < T; t++) a[r][t] = c, I[r][t] = _mm256_setzero_si256();
        }
        /* Q5_K, Q6_K: registers 0..3 and 4..7 have their own lane scales (S,
           SB): two halves, each summed in int16 and put through its vpmaddwd */
        for (int h = 0; h < (kq_halves(K) ? 2 : 1); h++) {
            const int j0 = kq_halves(K) ? 4 * h : 0, j1 = kq_halves(K) ? j0 + 4 : 8;
            /* a loop, not unrolled: the accumulators stay in registers (unrolled,
               GCC hoists all 8 registers' products and spills them) */
#pragma GCC unroll 1
            for (int j = j0; j < j1; j++) {
                __m256i w[KT_R], s[KT_R];
                for (int r = 0; r < R; r++) {
                    w[r] = _mm256_load_si256(&W[r * kb + b].v[j]);
                    if (kq_signed(K)) s[r] = _mm256_load_si256(&W[r * kb + b].sc[j]);
                }
                for (int t = 0; t < T; t++) {
                    __m256i x = _mm256_load_si256((const __m256i *)(X[t * xst + b].q + 32 * j));
                    __asm__("" : "+x"(x));   /* one load for the R products, not one memory operand each */
                    for (int r = 0; r < R; r++)
                        a[r][t] = kq_signed(K) ? _mm256_add_epi32(a[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w[r]), s[r]))
                                               : _mm256_add_epi16(a[r][t], _mm256_maddubs_epi16(w[r], x));
                }
                kt_pin(R, T, a);
            }
            if (!kq_halves(K)) break;
            for (int r = 0; r < R; r++)   /* kq_body's int32 sum: the halves' vpmaddwd added */
                for (int t = 0; t < T; t++) {
                    __m256i s16 = a[r][t];
                    if (K == KQ_Q6_K)
                        s16 = _mm256_sub_epi16(s16, _mm256_load_si256((const __m256i *)(X[t * xst + b].c + 16 * h)));
                    const __m256i i32 = _mm256_madd_epi16(s16, h ? W[r * kb + b].SB : W[r * kb + b].S);
                    I[r][t] = _mm256_add_epi32(I[r][t], i32);
                    a[r][t] = _mm256_setzero_si256();
                }
        }
        for (int r = 0; r < R; r++) {
            const kq_dec *k = &W[r * kb + b];
            for (int t = 0; t < T; t++) {
                const xk *xp = &X[t * xst + b];
                const __m256 ddv = _mm256_broadcast_ss(&dd[(r * kb + b) * ddk + t]);
                if (kq_signed(K)) {
                    F[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[r][t]), ddv, F[r][t]);
                    continue;
                }
                if (kq_halves(K)) {
                    F[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[r][t]), ddv, F[r][t]);
                    if (K == KQ_Q5_K) F[r][t] = _mm256_fnmadd_ps(k->mins0, _mm256_load_ps(xp->P), F[r][t]);
                    continue;
                }
                __m256i s16 = a[r][t];
                if (K == KQ_Q3_K) s16 = _mm256_sub_epi16(s16, _mm256_load_si256((const __m256i *)xp->c));
                F[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16, k->S)), ddv, F[r][t]);
                if (K != KQ_Q3_K) F[r][t] = _mm256_fnmadd_ps(k->mins0, _mm256_load_ps(xp->P), F[r][t]);
                if (K == KQ_Q2_K) F[r][t] = _mm256_fnmadd_ps(k->mins1, _mm256_load_ps(xp->P + 8), F[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++) store_acc(T, F[r], y + r, ys, first);
}

/* kt_tile for R (1, 2) rows and nt (1 .. KT_T) tokens: one specialised copy per count */
GI void kt_tiles(const int K, const int R, int nt, const kq_dec *W, int kb, const xk *X, int xst, const float *dd,
                 int ddk, float *y, int64_t ys, int first) {
    switch (nt) {
    case 1: kt_tile(K, R, 1, W, kb, X, xst, dd, ddk, y, ys, first); break;
    case 2: kt_tile(K, R, 2, W, kb, X, xst, dd, ddk, y, ys, first); break;
    case 3: kt_tile(K, R, 3, W, kb, X, xst, dd, ddk, y, ys, first); break;
    default: kt_tile(K, R, 4, W, kb, X, xst, dd, ddk, y, ys, first); break;
    }
}

/* Rows r0, r0 + 1 (those below nrows) of k-block k0 (kb super-blocks)
 * decoded into W[r * kb + b], dd[(r * kb + b) * ddt + t] = their d times the
 * tokens' D[b * dst + t], then the register tiles of the nt tokens
 * (X[t * xst + b]) on them; y[t * ys + r0 + r] (+)= the products. */
GI void kt_rows(const int K, const void *w, size_t rb, int64_t nrows, int64_t r0, int64_t k0, int kb, int nt,
                const float *D, int dst, const xk *X, int xst, kq_dec *W, float *dd, int ddt, float *y,
                int64_t ys) {
    const size_t bs = kq_bsize(K);
    const int64_t pfr = kq_pf((size_t)kb * bs);
    const int nr = nrows - r0 < KT_R ? (int)(nrows - r0) : KT_R;
    for (int r = 0; r < nr; r++) {
        const char *wr = (const char *)w + (size_t)(r0 + r) * rb + (size_t)k0 * bs;
        if (r0 + r + pfr < nrows) pf_rows(wr + pfr * rb, rb, 1, (size_t)kb * bs);
        for (int b = 0; b < kb; b++) {
            kq_decode(K, wr + (size_t)b * bs, &W[r * kb + b]);
            const __m256 dwv = _mm256_set1_ps(W[r * kb + b].dwf);
            for (int t = 0; t < nt; t += 8)
                _mm256_store_ps(dd + (r * kb + b) * ddt + t, _mm256_mul_ps(dwv, _mm256_load_ps(D + b * dst + t)));
        }
    }
    const int nin = (nt + KT_T - 1) / KT_T;
    for (int i = 0; i < nin; i++) {
        int t = (int)kt_part(nt, nin, i), n_t = (int)kt_part(nt, nin, i + 1) - t;
        float *yt = y + t * ys + r0;
        if (nr == 2) kt_tiles(K, 2, n_t, W, kb, X + t * xst, xst, dd + t, ddt, yt, ys, k0 == 0);
        else kt_tiles(K, 1, n_t, W, kb, X + t * xst, xst, dd + t, ddt, yt, ys, k0 == 0);
    }
}

/* rows of n x ntok tokens: per k-block (KT_KB super-blocks) and token tile
 * (KT_TK tokens, balanced), the activations prepared (prep_k); per pair of
 * rows their super-blocks decoded and d * dx formed, then the tiles of up to
 * 4 tokens */
GI void kt_gemm(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                size_t rb, const void *const *x) {
    xk X[KT_TK * KT_KB] __attribute__((aligned(32)));
    kq_dec Wd[KT_R * KT_KB];
    float D[KT_KB * KT_TK] __attribute__((aligned(32)));
    float dd[KT_R * KT_KB * KT_TK] __attribute__((aligned(32)));
    const int64_t nb = n / PK_QK_K, ntt = (ntok + KT_TK - 1) / KT_TK;
    for (int64_t k0 = 0; k0 < nb; k0 += KT_KB) {   /* kq_tile's k-blocks: the same float sums */
        int kb = nb - k0 < KT_KB ? (int)(nb - k0) : KT_KB;
        for (int64_t tt = 0; tt < ntt; tt++) {
            int64_t t0 = kt_part(ntok, ntt, tt);
            int nt = (int)(kt_part(ntok, ntt, tt + 1) - t0);
            const pk_block_q8_K *xs[KT_TK];
            for (int t = 0; t < nt; t++) xs[t] = (const pk_block_q8_K *)x[t0 + t] + k0;
            prep_k(K, KT_TK, nt, xs, kb, X, D);
            for (int64_t r0 = 0; r0 < nrows; r0 += KT_R)
                kt_rows(K, w, rb, nrows, r0, k0, kb, nt, D, KT_TK, X, kb, Wd, dd, KT_TK, y + t0 * ys, ys);
        }
    }
}

/* kt_gemm for many tokens: the activations of a chunk of up to KA_T tokens
 * (balanced) prepared once for all super-blocks into the thread's scratch
 * (up to KA_BYTES, to stay in a 512 KB L2 beside the weights), then per
 * pair of rows and k-block of up to KA_KB super-blocks the rows decoded
 * once into L1 and the register tiles of every token of the chunk run on
 * them, their activations streaming from L2: a row's super-block is
 * decoded once per chunk instead of once per KT_TK tokens, and summed over
 * 8 super-blocks before its horizontal sum instead of 4. Decoding was ~29%
 * of the signed kinds' time (bench_gemm IQ2_S with the decode skipped:
 * 52 -> 75 G multiply-adds/s). bench/ab_gemm on Zen 3 (one core; kt_gemm
 * as B): IQ2_S / IQ2_XXS 1.19-1.26x from 24 to 96 tokens on 512 x 2048,
 * IQ2_S 1.23x, IQ3_S 1.29x, Q4_K 1.09x, Q2_K 1.07x at 512 x 1024 x 2048;
 * KA_KB 4, 96 KB or 128 tokens / 320 KB measured 0.88-0.98x of these
 * (bench/results/2026-12-07-epyc-zen3-iq-kernels.md). NULL scratch: kt_gemm. */
enum { KA_T = 64, KA_KB = 8, KA_BYTES = 160 * 1024 };
GI void ka_gemm(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                size_t rb, const void *const *x) {
    const int64_t nb = n / PK_QK_K;
    int64_t tmax = KA_BYTES / ((int64_t)sizeof(xk) * nb);
    tmax = tmax > KA_T ? KA_T : tmax < KT_TK ? KT_TK : tmax;
    const int64_t nch = (ntok + tmax - 1) / tmax;
    const int64_t cap = (ntok + nch - 1) / nch;   /* tokens per chunk, at most */
    const int tk = (int)((cap + 7) & ~(int64_t)7);   /* D's row: whole registers */
    char *s = pk_thread_scratch(sizeof(xk) * (size_t)(cap * nb) + sizeof(float) * (size_t)(nb * (tk + KT_TK)));
    if (!s) { kt_gemm(K, n, nrows, ntok, y, ys, w, rb, x); return; }
    xk *X = (xk *)s;   /* X[t * nb + b] */
    float *D = (float *)(s + sizeof(xk) * (size_t)(cap * nb));   /* D[b * tk + t], the tokens' d */
    float *Dg = D + nb * tk;   /* one prep_k group's: Dg[b * KT_TK + t] */
    kq_dec Wd[KT_R * KA_KB];
    float dd[KT_R * KA_KB * KA_T] __attribute__((aligned(32)));
    for (int64_t c = 0; c < nch; c++) {
        const int64_t t0 = kt_part(ntok, nch, c);
        const int nt = (int)(kt_part(ntok, nch, c + 1) - t0);
        memset(D, 0, sizeof(float) * (size_t)(nb * tk));
        for (int i = 0; i < nt; i += KT_TK) {
            const pk_block_q8_K *xs[KT_TK];
            const int m = nt - i < KT_TK ? nt - i : KT_TK;
            for (int t = 0; t < m; t++) xs[t] = (const pk_block_q8_K *)x[t0 + i + t];
            prep_k(K, KT_TK, m, xs, (int)nb, X + (int64_t)i * nb, Dg);
            for (int64_t b = 0; b < nb; b++) memcpy(D + b * tk + i, Dg + b * KT_TK, sizeof(float) * (size_t)m);
        }
        for (int64_t k0 = 0; k0 < nb; k0 += KA_KB) {
            const int kb = nb - k0 < KA_KB ? (int)(nb - k0) : KA_KB;
            for (int64_t r0 = 0; r0 < nrows; r0 += KT_R)
                kt_rows(K, w, rb, nrows, r0, k0, kb, nt, D + k0 * tk, tk, X + k0, (int)nb, Wd, dd, KA_T,
                        y + t0 * ys, ys);
        }
    }
}

/* the 2-row kernel: ka_gemm from KT_TK + 1 tokens on (below, both decode
 * each row once per call) */
GI void kt_gemm_any(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                    size_t rb, const void *const *x) {
#ifndef KA_OFF
    if (ntok > KT_TK) { ka_gemm(K, n, nrows, ntok, y, ys, w, rb, x); return; }
#endif
    kt_gemm(K, n, nrows, ntok, y, ys, w, rb, x);
}
#ifdef K8_ON   /* the 8-row kernel from k8_min_tok tokens on, else the per-row one */
#include "kernels/x86/kri8.h"
GI int kq_k8(const int K) {
    return K == KQ_Q2_K ? K8_Q2_K : K == KQ_Q3_K ? K8_Q3_K : K == KQ_Q4_K ? K8_Q4_K : K == KQ_Q5_K ? K8_Q5_K : K8_Q6_K;
}
/* the token count from which type T's 8-row kernel (K8_Q*) is faster, for rows of n */
GI int64_t k8_min_tok(int T, int64_t n) {
    if (T == K8_Q4_K) return n >= 1024 ? 10 : 6;
    if (T == K8_Q2_K || T == K8_Q6_K) return n >= 1024 ? 16 : n >= 768 ? 8 : 6;
    return 16;   /* Q3_K, Q5_K */
}
#endif
/* the per-row kernel of kind K */
GI pk_gemm_fn kq_row_fn(const int K) {
    return K == KQ_Q2_K ? gemm_row_q2_K : K == KQ_Q3_K ? gemm_row_q3_K : K == KQ_Q4_K ? gemm_row_q4_K
         : K == KQ_Q5_K ? gemm_row_q5_K : gemm_row_q6_K;
}
/* the gemm entry of kind K */
#ifdef K8_ON
GI void kq_gemm(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                size_t rb, const void *const *x) {
    if (ntok >= k8_min_tok(kq_k8(K), n))
        k8_gemm(kq_k8(K), n, nrows, ntok, y, ys, w, rb, x);
    else
        kq_row_fn(K)(n, nrows, ntok, y, ys, w, rb, x);
}
#else
/* the 2-row kernel where it measured faster than the per-row one (above):
 * Q2_K always; Q3_K and Q4_K where the per-row kernel's token tile is 32
 * (rows of up to 3 super-blocks; Q4_K's longer rows from 17 tokens on);
 * Q5_K and Q6_K (in two halves, ka_gemm's decode once per 64 tokens) on
 * rows of up to 3 super-blocks from 24 (Q5_K) or 32 (Q6_K) tokens, Q5_K's
 * longer rows from 48: bench/ab_gemm on Zen 3 (one core, against the
 * per-row kernel built with the library's flags; bench/results/
 * 2026-12-07-epyc-zen3-other-files.md): Q6_K on 2048 x 512 1.01 / 1.09 /
 * 1.03 / 1.10 / 1.14x at 24 / 32 / 48 / 64 / 128 tokens, but on rows of
 * 2048 0.91 / 0.92 / 1.01x at 48 / 128 / 512 (kept per-row); Q5_K 1.02x
 * at 24 tokens on 2048 x 512, 1.34 / 1.46 / 1.47x at 48 / 64 / 512 on 1024
 * x 2048. */
GI int kt_use(const int K, int64_t n, int64_t ntok) {
    if (kq_halves(K)) return n <= 3 * PK_QK_K ? ntok >= (K == KQ_Q6_K ? 32 : 24) : K == KQ_Q5_K && ntok >= 48;
    return K == KQ_Q2_K || ((K == KQ_Q3_K || K == KQ_Q4_K) && n <= 3 * PK_QK_K) || (K == KQ_Q4_K && ntok > 16);
}
GI void kq_gemm(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                size_t rb, const void *const *x) {
    if (kt_use(K, n, ntok)) kt_gemm_any(K, n, nrows, ntok, y, ys, w, rb, x);
    else kq_row_fn(K)(n, nrows, ntok, y, ys, w, rb, x);
}
#endif
RI_ENTRY(iq2_xxs, kt_gemm_any, KQ_IQ2_XXS)   /* the signed kinds: the 2-row kernel alone */
RI_ENTRY(iq2_xs, kt_gemm_any, KQ_IQ2_XS)
RI_ENTRY(iq3_xxs, kt_gemm_any, KQ_IQ3_XXS)
RI_ENTRY(iq3_s, kt_gemm_any, KQ_IQ3_S)
RI_ENTRY(iq2_s, kt_gemm_any, KQ_IQ2_S)
RI_ENTRY(iq1_s, kt_gemm_any, KQ_IQ1_S)
RI_ENTRY(iq1_m, kt_gemm_any, KQ_IQ1_M)
RI_ENTRY(q4_K, kq_gemm, KQ_Q4_K)
RI_ENTRY(q5_K, kq_gemm, KQ_Q5_K)
RI_ENTRY(q6_K, kq_gemm, KQ_Q6_K)
RI_ENTRY(q3_K, kq_gemm, KQ_Q3_K)
RI_ENTRY(q2_K, kq_gemm, KQ_Q2_K)

/* IQ4_XS (signed levels up to 127 in magnitude, which do not fit
 * vpmaddubsw's pairs against activations + 128): both sides int16, levels
 * times their sub-block scale at decode (|127 * 32| < 2^15), activations
 * widened once per token tile, vpmaddwd products summed in int32 over the
 * super-block (the reference's isum exactly: |sum| <= 256 * 4064 * 127 <
 * 2^31). A row's super-block is decoded in two halves of 8 registers; its d
 * scales the tokens' d. */
enum { KBX = 4 };   /* super-blocks per k-block (int16 activations) */
typedef struct {
    int16_t q[256];
    float d;
    float pad[7];
} xk16;

static void prep_k16(int nt, const pk_block_q8_K *const *xs, int kb, xk16 *X, float *D) {
    for (int i = 0; i < KBX * TK; i++) D[i] = 0.0f;
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < kb; b++) {
            const pk_block_q8_K *s = &xs[t][b];
            xk16 *o = &X[t * kb + b];
            for (int k = 0; k < 16; k++)
                _mm256_store_si256((__m256i *)(o->q + 16 * k),
                                   _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(s->qs + 16 * k))));
            o->d = s->d;
            D[b * TK + t] = s->d;
        }
}

/* half `half` (elements 128 half ..) of the IQ4_XS super-block at wv as 8
 * registers of 16 int16 levels times their scales */
GI void x16_decode(const void *wv, int half, __m256i *W) {
    const pk_block_iq4_xs *wb = wv;
    const __m128i m4 = _mm_set1_epi8(0x0F), lut = _mm_loadu_si128((const __m128i *)pk_iq4nl_values);
    for (int j = 0; j < 4; j++) {
        const int sb = 4 * half + j;
        int ls = ((wb->scales_l[sb / 2] >> 4 * (sb % 2)) & 0xF) | ((wb->scales_h >> 2 * sb) & 3) << 4;
        const __m256i sc = _mm256_set1_epi16((short)(ls - 32));
        __m128i q = _mm_loadu_si128((const __m128i *)(wb->qs + 16 * sb));
        W[2 * j] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(q, m4))), sc);
        W[2 * j + 1] = _mm256_mullo_epi16(
            _mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4))), sc);
    }
}

GI void gemm_x16(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                 size_t rb, const void *const *x) {
    xk16 X[TK * KBX] __attribute__((aligned(32)));
    float D[KBX * TK] __attribute__((aligned(32))), dd[TK] __attribute__((aligned(32)));
    __m256i isum[TK];
    const size_t bs = sizeof(pk_block_iq4_xs);
    (void)T;
    int64_t nb = n / PK_QK_K;
    for (int64_t k0 = 0; k0 < nb; k0 += KBX) {
        int kb = nb - k0 < KBX ? (int)(nb - k0) : KBX;
        for (int64_t t0 = 0; t0 < ntok; t0 += TK) {
            int nt = ntok - t0 < TK ? (int)(ntok - t0) : TK;
            const pk_block_q8_K *xs[TK];
            for (int t = 0; t < nt; t++) xs[t] = (const pk_block_q8_K *)x[t0 + t] + k0;
            prep_k16(nt, xs, kb, X, D);
            for (int64_t r = 0; r < nrows; r++) {
                const char *wr = (const char *)w + (size_t)r * rb + (size_t)k0 * bs;
                __m256 acc[TK];
                for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
                for (int b = 0; b < kb; b++) {
                    const char *wb = wr + (size_t)b * bs;
                    const __m256 dwv = _mm256_set1_ps(f16f(((const pk_block_iq4_xs *)(const void *)wb)->d));
                    for (int i = 0; i < nt; i += 8)
                        _mm256_store_ps(dd + i, _mm256_mul_ps(dwv, _mm256_load_ps(D + b * TK + i)));
                    for (int half = 0; half < 2; half++) {
                        __m256i W[8];
                        x16_decode(wb, half, W);
                        for (int t = 0; t < nt; t++) {
                            const int16_t *q = X[t * kb + b].q + 128 * half;
                            __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(W[0], ld(q)), _mm256_madd_epi16(W[1], ld(q + 16)));
                            __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(W[2], ld(q + 32)), _mm256_madd_epi16(W[3], ld(q + 48)));
                            __m256i s2 = _mm256_add_epi32(_mm256_madd_epi16(W[4], ld(q + 64)), _mm256_madd_epi16(W[5], ld(q + 80)));
                            __m256i s3 = _mm256_add_epi32(_mm256_madd_epi16(W[6], ld(q + 96)), _mm256_madd_epi16(W[7], ld(q + 112)));
                            __m256i s = _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
                            if (half == 0) isum[t] = s;
                            else acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum[t], s)),
                                                          _mm256_broadcast_ss(&dd[t]), acc[t]);
                        }
                    }
                }
                store_acc(nt, acc, y + t0 * ys + r, ys, k0 == 0);
            }
        }
    }
}
RI_ENTRY(iq4_xs, gemm_x16, 0)
