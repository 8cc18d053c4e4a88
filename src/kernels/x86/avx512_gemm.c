/* kernels/x86/avx512_gemm.c - AVX-512 multi-token kernels for prompt
 * processing: each block of weights is loaded once and applied to several
 * tokens' activations. Entries left NULL fall back to the gemv kernel per
 * token (see kernels/kernels.h).
 *
 * Tuned for: prompt processing, which is compute-bound. Blocking:
 *   - the reduction dimension is cut into k-blocks (a few KiB of
 *     activations per token), so a tile of tokens' activations stays in L1;
 *   - F16 / F32 (built with PK_GEMM_FLOAT only): tokens in tiles of up to
 *     TT = 8; per (k-block, token tile) F16 activations become F32 once in a
 *     stack buffer shared by every row; each weight row is applied to the
 *     tile's tokens: 1 row x NT tokens of 512-bit accumulators. Partial sums
 *     of later k-blocks are added to y.
 *   - MXFP4, Q5_0, Q4_0, Q8_0 (kernels/x86/ri8.h's layout) and Q2_K, Q4_K,
 *     Q6_K (kernels/x86/avx512_kri.h): 16 rows at a time, decoded
 *     row-interleaved once per (k-block, tile of up to 96 / 32 tokens), so
 *     each 512-bit product covers 16 rows x 4 elements of one token and the
 *     accumulator lanes are rows: no reduction per row; MXFP4..Q8_0 keep 12
 *     tokens in flight (independent vpdpbusd chains).
 * Tails: NT (1..8) is a compile-time constant of each tile instance (the
 * switch in each driver); F16/F32 lengths use masked loads.
 *
 * Numerics: within a (super-)block all products and sums are exact int32.
 *   MXFP4, Q5_0, Q4_0, Q8_0: vpdpbusd on activations + 128 (unsigned,
 *     0..255) x signed levels (MXFP4 ggml's kvalues_mxfp4, Q5_0 -16..15,
 *     Q4_0 -8..7, Q8_0 -128..127), seeded per row and block with -128 *
 *     the block's level sum - exact for the full int8 range of both
 *     operands (|sum| <= 32 * 255 * 128 < 2^31).
 *   Q2_K, Q4_K, Q6_K: vpdpbusd on the unsigned levels, per sub-block
 *     exact int32; scales, mins and Q6_K's offset as kernels/x86/avx512_kri.h
 *     says.
 * Only float accumulation across blocks differs from the reference.
 */
#include <string.h>
#include "kernels/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__F16C__)
#include <immintrin.h>
#include "kernels/x86/avx512_levels.h"
#include "kernels/x86/avx512_q32.h"
#include "kernels/x86/ri8.h"

#define GI static inline __attribute__((always_inline))

enum {
    TT = 8,        /* tokens per tile */
    KB_K = 8,      /* K-quant super-blocks per k-block (2048 elements) */
    KB_F = 1024,   /* F16 / F32 elements per k-block */
};

/* ---- K-quants x Q8_K: 16 rows at a time (kernels/x86/avx512_kri.h) ------------------ */

#include "kernels/x86/avx512_kri.h"
RI_ENTRY(q2_K, kr_gemm, KR_Q2_K)
RI_ENTRY(q3_K, kr_gemm, KR_Q3_K)
RI_ENTRY(q4_K, kr_gemm, KR_Q4_K)
RI_ENTRY(q5_K, kr_gemm, KR_Q5_K)
RI_ENTRY(q6_K, kr_gemm, KR_Q6_K)

/* ---- MXFP4, Q5_0, Q4_0, Q8_0 x Q8_0: 16 rows at a time -------------------------
 * Rows in groups of 16, decoded row-interleaved (the layout of
 * kernels/x86/ri8.h, 16 dword lanes = 16 rows, but signed levels: MXFP4
 * ggml's kvalues_mxfp4, Q5_0 -16..15, Q4_0 -8..7, Q8_0 as stored) with 512-bit loads and
 * transposes once per (k-block, tile of up to RI_TS tokens) into a stack
 * buffer, with each row's -128 * (sum of the block's levels). The tile's
 * activations are packed once per k-block as unsigned bytes x + 128 (32 per
 * block and token, token-minor) with their scales. Per block: for each of
 * the 8 weight registers, one vpdpbusd (activations u8 x levels s8) per
 * token of the inner tile (RI_NT independent int32 chains), seeded with the
 * rows' -128 * sum: exact int32 sum of x * level; then per token one
 * convert and one multiply-add into the 16 rows' floats. */
enum {
    RI_NT = 12,   /* tokens per inner tile: independent vpdpbusd chains */
    RI_TS = 96,   /* tokens per prepared tile at most */
    RI_KB = 16,   /* blocks per k-block at most (512 elements) */
};
typedef struct { __m512i q[8]; __m512i c; __m512 d; } ri16;
/* per k-block and tile: activations X[b][t] + 128 (32 bytes) and scales */
typedef struct { uint8_t x[RI_KB][RI_TS][32]; float d[RI_KB][RI_TS]; } ri16_act;

/* 16 dwords at base + o (o: rows 0-7 and 8-15 as 64-bit offsets) */
GI __m512i ri16_gather(const uint8_t *base, __m512i olo, __m512i ohi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_i64gather_epi32(olo, base, 1)),
                              _mm512_i64gather_epi32(ohi, base, 1), 1);
}

/* Blocks 0 .. nbk - 1 of 16 rows at w (rows rb bytes apart; rows >= nr read
 * row 0 and get a zero scale) into W: each row's 16 bytes of quants, rows
 * r, r + 4, r + 8, r + 12 to a register, a 4 x 4 dword transpose within
 * 128-bit lanes (dword lane = row), then the nibbles split and made signed
 * levels; the scales and Q5_0's high bits gathered; the seeds from the
 * levels' byte sums (8 registers of |level| <= 16: |sum| <= 128). */
GI void ri16_decode(const int T, const uint8_t *w, size_t rb, int nr, int nbk, ri16 *W) {
    const size_t bs = ri_bsize(T), qo = T == RI_MXFP4 ? 1 : T == RI_Q5_0 ? 6 : 2;
    const uint8_t *p[16];
    long long o[16];
    for (int r = 0; r < 16; r++) {
        o[r] = (long long)(r < nr ? r : 0) * (long long)rb;
        p[r] = w + o[r] + qo;
    }
    const __m512i olo = _mm512_loadu_si512(o), ohi = _mm512_loadu_si512(o + 8);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int b = 0; b < nbk; b++) {
        const size_t bo = (size_t)b * bs;
        ri16 *ob = &W[b];
        __m512i z[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p[k] + bo)));
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[k + 4] + bo)), 1);
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[k + 8] + bo)), 2);
            z[k] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p[k + 12] + bo)), 3);
        }
        const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
        const __m512i Q[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                              _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
        __m512i q[8];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            q[j] = _mm512_and_si512(Q[j], m4);
            q[j + 4] = _mm512_and_si512(_mm512_srli_epi16(Q[j], 4), m4);
        }
        const __m512i g = ri16_gather(w + bo, olo, ohi);   /* each row's first 4 bytes */
        if (T == RI_MXFP4) {
            const __m512i tab = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)pk_mxfp4_values));
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) q[j] = _mm512_shuffle_epi8(tab, q[j]);
            /* PK_E8M0_HALF_BITS of the E8M0 byte */
            const __m512i e = _mm512_and_si512(g, _mm512_set1_epi32(0xFF));
            __m512i d = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
            d = _mm512_mask_sllv_epi32(d, _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)),
                                       _mm512_set1_epi32(0x00200000), e);
            ob->d = _mm512_castsi512_ps(_mm512_maskz_mov_epi32(live, d));
        } else {
            ob->d = _mm512_maskz_mov_ps(live, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
        }
        if (T == RI_Q5_0) {   /* element e's fifth bit: bit e % 8 of qh byte e / 8 */
            const __m512i H = ri16_gather(w + bo + 2, olo, ohi), k16 = _mm512_set1_epi8(16);
            const __m512i lane = _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {   /* elements 4j .. 4j + 3 (j < 4), 16 + 4(j - 4) .. (j >= 4) */
                const int e0 = j < 4 ? 4 * j : 16 + 4 * (j - 4);
                const __m512i idx = _mm512_add_epi8(_mm512_set1_epi8((char)(e0 / 8)), lane);
                const __m512i bm = _mm512_set1_epi32(e0 % 8 ? (int)0x80402010 : 0x08040201);
                const __mmask64 k = _mm512_test_epi8_mask(_mm512_shuffle_epi8(H, idx), bm);
                q[j] = _mm512_mask_add_epi8(q[j], k, q[j], k16);
            }
        }
        if (T != RI_MXFP4) {
            const __m512i off = _mm512_set1_epi8((char)ri_off(T));
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) q[j] = _mm512_sub_epi8(q[j], off);
        }
        __m512i sum = _mm512_add_epi8(_mm512_add_epi8(_mm512_add_epi8(q[0], q[1]), _mm512_add_epi8(q[2], q[3])),
                                      _mm512_add_epi8(_mm512_add_epi8(q[4], q[5]), _mm512_add_epi8(q[6], q[7])));
        ob->c = _mm512_sub_epi32(_mm512_setzero_si512(),
                                 _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), sum));
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) _mm512_store_si512(&ob->q[j], q[j]);
    }
}

/* Q8_0's blocks 0 .. nbk - 1 of 16 rows into W: the levels as they are
 * (kernels/x86/avx512_q32.h's transposes), the seeds by vpdpbusd of 128 with
 * them (the byte sums of ri16_decode would overflow int8 here). */
GI void ri16_decode_q8_0(const uint8_t *w, size_t rb, int nr, int nbk, ri16 *W) {
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    for (int b = 0; b < nbk; b++) {
        ri16 *ob = &W[b];
        __m512i q[8], c = _mm512_setzero_si512();
        ri16_levels_q8_0(w, rb, nr, b, q, &ob->d);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            c = _mm512_dpbusd_epi32(c, k80, q[j]);
            _mm512_store_si512(&ob->q[j], q[j]);
        }
        ob->c = _mm512_sub_epi32(_mm512_setzero_si512(), c);
    }
}

/* The tile's nt tokens (at xs[t], nbk blocks) into A. Inlined: as a
 * separate static function GCC 12.2 at -O1 / -O2 dropped the call (its IPA
 * mod-ref + pure-const summaries; either flag off, or noipa, kept it). */
GI void ri16_prep(int nt, const pk_block_q8_0 *const *xs, int nbk, ri16_act *A) {
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < nbk; b++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)xs[t][b].qs);
            _mm256_storeu_si256((__m256i *)A->x[b][t], _mm256_xor_si256(q, k80));
            A->d[b][t] = _cvtsh_ss(xs[t][b].d);
        }
}

/* NT tokens (from t0 of A) x the 16 rows of W over nbk blocks. */
GI void tile_ri16(const int NT, const ri16 *W, int nbk, const ri16_act *A, int t0, float *y, int64_t ys, int nr,
                  int first) {
    __m512 acc[RI_NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nbk; b++) {
        const ri16 *wb = &W[b];
        const uint8_t(*xb)[32] = A->x[b] + t0;
        __m512i s[RI_NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) s[t] = wb->c;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m512i q = _mm512_load_si512(&wb->q[j]);
#pragma GCC unroll 16
            for (int t = 0; t < NT; t++) s[t] = _mm512_dpbusd_epi32(s[t], _mm512_set1_epi32(ri_x4((const int8_t *)xb[t] + 4 * j)), q);
        }
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(wb->d, _mm512_set1_ps(A->d[b][t0 + t])),
                                     acc[t]);
    }
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    for (int t = 0; t < NT; t++) {
        float *yt = y + t * ys;
        _mm512_mask_storeu_ps(yt, m, first ? acc[t] : _mm512_add_ps(acc[t], _mm512_maskz_loadu_ps(m, yt)));
    }
}

/* Part i of n split into parts of sizes differing by at most one: its start. */
GI int64_t ri16_part(int64_t n, int64_t parts, int64_t i) { return i * (n / parts) + (i < n % parts ? i : n % parts); }

GI void gemm_ri16(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                  size_t rb, const void *const *x) {
    ri16 W[RI_KB];
    ri16_act A __attribute__((aligned(64)));
    /* k-blocks and token tiles of balanced sizes: no short tail tile */
    int64_t nb = n / 32, nkb = (nb + RI_KB - 1) / RI_KB, kbs = (nb + nkb - 1) / nkb;
    int64_t ntt = (ntok + RI_TS - 1) / RI_TS;
    for (int64_t k0 = 0; k0 < nb; k0 += kbs) {
        int nbk = nb - k0 < kbs ? (int)(nb - k0) : (int)kbs;
        for (int64_t tt = 0; tt < ntt; tt++) {
            int64_t t0 = ri16_part(ntok, ntt, tt);
            int nts = (int)(ri16_part(ntok, ntt, tt + 1) - t0);
            const pk_block_q8_0 *xs[RI_TS];
            for (int t = 0; t < nts; t++) xs[t] = (const pk_block_q8_0 *)x[t0 + t] + k0;
            ri16_prep(nts, xs, nbk, &A);
            const int nin = (nts + RI_NT - 1) / RI_NT;
            for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
                int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
                const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * rb + (size_t)k0 * ri_bsize(T);
                if (T == RI_Q8_0)
                    ri16_decode_q8_0(wr, rb, nr, nbk, W);
                else
                    ri16_decode(T, wr, rb, nr, nbk, W);
                float *yr = y + t0 * ys + r0;
                for (int i = 0; i < nin; i++) {
                    int t = (int)ri16_part(nts, nin, i), nt = (int)ri16_part(nts, nin, i + 1) - t;
                    switch (nt) {   /* NT a compile-time constant of each instance */
                    case 1: tile_ri16(1, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 2: tile_ri16(2, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 3: tile_ri16(3, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 4: tile_ri16(4, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 5: tile_ri16(5, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 6: tile_ri16(6, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 7: tile_ri16(7, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 8: tile_ri16(8, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 9: tile_ri16(9, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 10: tile_ri16(10, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    case 11: tile_ri16(11, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    default: tile_ri16(12, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0); break;
                    }
                }
            }
        }
    }
}
RI_ENTRY(mxfp4, gemm_ri16, RI_MXFP4)
RI_ENTRY(q5_0, gemm_ri16, RI_Q5_0)
RI_ENTRY(q4_0, gemm_ri16, RI_Q4_0)
RI_ENTRY(q8_0, gemm_ri16, RI_Q8_0)

/* ---- F32, F16 -------------------------------------------------------------------
 * They are not registered by default: tests/cli/t_batch.sh requires batched
 * logits to be bitwise identical to one-token decoding on its F16 / F32
 * models, and these kernels sum in a different order than the gemvs (within
 * float rounding, as tests/unit/test_gemm.c checks). Build with -DPK_GEMM_FLOAT=1
 * to use them for weights. */
#ifndef PK_GEMM_FLOAT
#define PK_GEMM_FLOAT 0
#endif
#if PK_GEMM_FLOAT

/* y[t * ys] (+)= the sum of acc[t], t < NT. Eight accumulators are reduced
 * together (transposing adds); fewer are padded with zeros. */
GI void store_sums(const int NT, const __m512 *acc, float *y, int64_t ys, int first) {
    __m512 a[8];
    for (int t = 0; t < 8; t++) a[t] = t < NT ? acc[t] : _mm512_setzero_ps();
    /* pairs: 256-bit halves summed -> [t0 x8 | t1 x8] */
    __m512 p[4];
    for (int i = 0; i < 4; i++)
        p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    /* quads: 128-bit lanes summed -> [t0 x4 | t1 x4 | t2 x4 | t3 x4] */
    __m512 q0 = _mm512_add_ps(_mm512_shuffle_f32x4(p[0], p[1], 0x88),
                              _mm512_shuffle_f32x4(p[0], p[1], 0xDD));
    __m512 q1 = _mm512_add_ps(_mm512_shuffle_f32x4(p[2], p[3], 0x88),
                              _mm512_shuffle_f32x4(p[2], p[3], 0xDD));
    /* within 128-bit lanes: lane L -> [tL, t(4+L), tL, t(4+L)] after two steps */
    __m512 u = _mm512_add_ps(_mm512_unpacklo_ps(q0, q1), _mm512_unpackhi_ps(q0, q1));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));
    float s[16];
    _mm512_storeu_ps(s, u);
    for (int t = 0; t < NT; t++) {
        float v = s[4 * (t & 3) + (t >> 2)];
        y[t * ys] = first ? v : y[t * ys] + v;
    }
}

/* One row of len elements (F32 or F16 at w) times NT F32 activation rows. */
GI void tile_f(const int NT, int is16, const void *w, const float *const *xf, int64_t len,
               float *y, int64_t ys, int first) {
    __m512 acc[TT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m512 wv = is16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)))
                         : _mm512_loadu_ps((const float *)w + i);
        for (int t = 0; t < NT; t++) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xf[t] + i), acc[t]);
    }
    if (i < len) {
        __mmask16 m = (__mmask16)((1u << (len - i)) - 1);
        __m512 wv = is16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i))
                         : _mm512_maskz_loadu_ps(m, (const float *)w + i);
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xf[t] + i), acc[t]);
    }
    store_sums(NT, acc, y, ys, first);
}

GI void gemm_float(int is16, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                       const void *w, size_t rb, const void *const *x) {
    float buf[TT * KB_F] __attribute__((aligned(64)));
    size_t es = is16 ? 2 : 4;
    for (int64_t k0 = 0; k0 < n; k0 += KB_F) {
        int64_t len = n - k0 < KB_F ? n - k0 : KB_F;
        for (int64_t t0 = 0; t0 < ntok; t0 += TT) {
            int nt = ntok - t0 < TT ? (int)(ntok - t0) : TT;
            const float *xf[TT];
            for (int t = 0; t < nt; t++) {
                if (is16) {      /* F16 activations to F32 once per tile */
                    const uint16_t *src = (const uint16_t *)x[t0 + t] + k0;
                    float *dst = buf + t * KB_F;
                    for (int64_t i = 0; i < len; i += 16) {
                        __mmask16 m = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
                        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
                    }
                    xf[t] = dst;
                } else {
                    xf[t] = (const float *)x[t0 + t] + k0;
                }
            }
            float *yt = y + t0 * ys;
            for (int64_t r = 0; r < nrows; r++) {
                const char *wr = (const char *)w + (size_t)r * rb + (size_t)k0 * es;
                switch (nt) {   /* NT a compile-time constant of each instance */
                case 1: tile_f(1, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                case 2: tile_f(2, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                case 3: tile_f(3, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                case 4: tile_f(4, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                case 5: tile_f(5, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                case 6: tile_f(6, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                case 7: tile_f(7, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                default: tile_f(8, is16, wr, xf, len, yt + r, ys, k0 == 0); break;
                }
            }
        }
    }
}

static void gemm_f32(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                     const void *w, size_t rb, const void *const *x) {
    gemm_float(0, n, nrows, ntok, y, ys, w, rb, x);
}
static void gemm_f16(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                     const void *w, size_t rb, const void *const *x) {
    gemm_float(1, n, nrows, ntok, y, ys, w, rb, x);
}
#endif

const pk_kernels pk_kernels_avx512_gemm = {.gemm = {
#if PK_GEMM_FLOAT
    [PK_TYPE_F32] = gemm_f32, [PK_TYPE_F16] = gemm_f16,
#endif
    [PK_TYPE_Q8_0] = gemm_q8_0, [PK_TYPE_MXFP4] = gemm_mxfp4, [PK_TYPE_Q5_0] = gemm_q5_0, [PK_TYPE_Q4_0] = gemm_q4_0,
    [PK_TYPE_Q2_K] = gemm_q2_K, [PK_TYPE_Q3_K] = gemm_q3_K, [PK_TYPE_Q4_K] = gemm_q4_K,
    [PK_TYPE_Q5_K] = gemm_q5_K, [PK_TYPE_Q6_K] = gemm_q6_K,
}};

#else
const pk_kernels pk_kernels_avx512_gemm = {0};
#endif
