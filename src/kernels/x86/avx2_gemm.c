/* kernels/x86/avx2_gemm.c - AVX2 multi-token kernels for prompt processing, and
 * the AVX2 F32 matrix product (sgemm), exp_sub and silu_mul of the AVX2
 * table. Entries of pk_kernels_avx2_gemm left NULL fall back to the gemv kernel per
 * token (kernels/kernels.h). Compiled with -mavx2 -mfma -mf16c (the Makefile's
 * kernels_avx2_% rule); only called after kernels/kernels.c has checked the CPU.
 *
 * Tuned for: prompt processing (compute-bound) on AVX2 machines without
 * AVX-512 or VNNI, where the int8 multiply ports (vpmaddubsw, vpmaddwd: two
 * per cycle on Intel, fewer on AMD Zen 2/3) are the bottleneck. The design
 * cuts the multiplies per weight-token product rather than the loads:
 *   - the reduction dimension is cut into k-blocks (1024 elements) so that a
 *     tile of tokens' activations (16 or 32 for the K-quants: TK_MAX below,
 *     8 for the 32-element block types) stays in or near L1; per (k-block,
 *     token tile) the activations are prepared once in a stack buffer, in
 *     the byte order the weight decoder produces, and shared by every row;
 *   - each weight row's super-block (or group of 4 blocks) is decoded once
 *     per (k-block, token tile) into eight 256-bit registers of levels and
 *     applied to every token of the tile (1 row x 16 or 32 tokens,
 *     accumulators in L1: the 16 ymm registers hold the decoded row); on
 *     plain AVX2, Q2_K, Q3_K and Q4_K instead decode two rows into an L1
 *     buffer and take a register tile of 2 rows x 4 tokens, each level
 *     and activation register loaded once for its 2 or 4 products
 *     (kernels/x86/avx2_kquant.h, kt_gemm), as do the signed i-quants;
 *     above 16 tokens that tile runs on activations prepared for a chunk
 *     of up to 64 tokens in the thread's scratch (L2), each row decoded
 *     once per chunk (ka_gemm);
 *   - K-quants: the decoded registers are byte-permuted (unpack stages,
 *     shuffle ports) so that several registers carry the same sub-block in
 *     the same 16-bit lane; the vpmaddubsw products of those registers are
 *     summed in int16 before one vpmaddwd with the sub-block scales: per
 *     super-block and token, Q4_K takes 8 vpmaddubsw + 1 vpmaddwd (sum of
 *     eight: 8 * 2 * 15 * 127 = 30480 < 2^15), Q5_K 8 + 2 (sum of four:
 *     4 * 2 * 31 * 127 < 2^15), Q6_K 8 + 2 (four registers, the -32 level
 *     offset subtracted in int16 - wrapping, as the true sum of 8 products
 *     fits: 8 * 32 * 127 < 2^15), Q3_K 8 + 1 (eight, offset -4), Q2_K 8 + 1
 *     (eight);
 *     the mins (Q2_K, Q4_K, Q5_K) are subtracted in float as dmin * m times
 *     (d * bsums) of the activations, prepared once per token; the
 *     super-block factor d * dx of all the tile's tokens takes two
 *     multiplies per row super-block;
 *   - IQ4_XS (signed levels up to 127): int16 on both sides, levels times
 *     the sub-block scale at decode, 16 vpmaddwd per super-block and token;
 *   - IQ2_XXS, IQ2_XS and the lattice i-quants IQ3_XXS, IQ3_S, IQ2_S (grid
 *     points with signs, |level| <= 62): the
 *     K-quants' per-row kernel, signed levels at decode against
 *     activations + 128 as unsigned bytes, the 128 * level sums subtracted
 *     once per row super-block: 8 vpmaddubsw + 8 vpmaddwd per super-block
 *     and token;
 *   - IQ1_S, IQ1_M (grid points of -1, 0, 1 and a delta of +-1/8 per
 *     group): as the signed kinds, eight times the levels (8 g +- 1, so
 *     |level| <= 9) at decode, the scale per sub-block (IQ1_M: per half);
 *   - Q4_1, Q5_1, IQ4_NL: weights widened to int16 at decode,
 *     activations widened once per token tile, products by vpmaddwd (no
 *     sign fix-up per token); four blocks' sums are reduced with horizontal
 *     adds and scaled with one float multiply-add;
 *   - MXFP4, Q5_0, Q4_0 (signed levels within -16..15): 8 rows at a time,
 *     decoded row-interleaved (kernels/x86/ri8.h) once per (k-block, tile
 *     of up to 64 tokens); vpmaddubsw (AVX-VNNI: vpdpbusd) of one token's 4
 *     activations + 128, broadcast, with the signed levels gives the 8 rows
 *     side by side, so the accumulator lanes are rows (no horizontal adds);
 *     each row's -128 * level sum, computed once per decoded block, seeds
 *     the int32 sums;
 *   - Q8_0: AVX-VNNI as MXFP4 (vpdpbusd does not saturate); AVX2 8 rows at
 *     a time with the signed levels widened to int16 and vpmaddwd against
 *     int16 activations (vpmaddubsw pairs of 8-bit levels could saturate):
 *     16 vpmaddwd per block, token and 8 rows.
 * The activations must be in [-127, 127] (every Q8_0 / Q8_K / Q8_1
 * quantizer's output): the int16 sums above rely on it.
 *
 * Memory: a prompt's expert matrices come from RAM, read once per token
 * tile as short runs of each row (one k-block), which the hardware
 * prefetcher picks up late; every kernel prefetches the rows it decodes
 * next (pf_rows: per-row kernels ~2 KB / 4+ rows ahead, 8-row kernels the
 * next 8 rows).
 *
 * Numerics: within a block or super-block every product and sum is exact
 * int32, as in the reference (IQ4_XS: the reference's super-block isum
 * itself); the K-quant mins are applied in float (as the AVX-512 gemm), the
 * 32-element types' block sums are converted as two exact halves. Only
 * the float accumulation across blocks differs from the reference
 * (reassociated, within the tolerance of tests/unit/test_gemm.c). F16, BF16 and
 * F32 have no gemm here: tests/cli/t_batch.sh wants batched logits of F16 / F32
 * models bitwise equal to one-token decoding, i.e. the gemv's summation
 * order (see kernels/x86/avx512_gemm.c).
 *
 * sgemm: 4 rows x 24 columns of C in 12 ymm accumulators, one FMA per k in
 * order from zero (masked loads for a column tail): every element is the
 * same sum whatever M, N and its position in the tile, so batched and
 * one-token attention agree bitwise. exp_sub / silu_mul: 8 lanes of
 * exp(x) = 2^k e^r with a degree-6 polynomial (as kernels/x86/avx512.c), 2^k
 * applied in two halves so that results down to the subnormal range and
 * x = 88.7 are right.
 */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"
#include "core/threads.h"

/* Built twice: here as the avx2 variant's pk_kernels_avx2_gemm, and by
 * kernels/x86/avxvnni.c (PK_VNNI256, -mavxvnni) as pk_kernels_avxvnni_gemm, where the
 * int8 products of the x86_dpbusd calls are single VEX vpdpbusd. The F32
 * sgemm, exp_sub and silu_mul are only in the first. */
#ifdef PK_VNNI256
#define PK_GEMM_TABLE pk_kernels_avxvnni_gemm
#else
#define PK_GEMM_TABLE pk_kernels_avx2_gemm
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && (!defined(PK_VNNI256) || defined(__AVXVNNI__))
#include <immintrin.h>
#include "kernels/x86/ri8.h"
#include "kernels/x86/iq_lattice.h"

#define GI static inline __attribute__((always_inline))

enum {
    TK = 16,      /* tokens per tile, IQ4_XS (the K-quants: TK_Q*_K below) */
    KBK = 4,      /* K-quant super-blocks per k-block (1024 elements) */
    TQ = 8,       /* tokens per tile, 32-element block types */
    KBQ = 32,     /* 32-element blocks per k-block (a multiple of 4) */
};
/* The per-row K-quant kernels' token tile: TK_MAX tokens on rows of up to
   3 super-blocks (an expert's down matrix: 768 or 512 columns), on longer
   rows TK_Q*_K (-D for trials). A tile's prepared activations take TK x
   KBK x 416 bytes: 32 x 4 (53 KB) overflows a 48 KB L1, which Q4_K and
   Q5_K bear, Q6_K does not, and Q2_K / Q3_K measured both ways
   (bench/README.md, "The AVX2 K-quant prompt kernels' token tile") */
#define TK_MAX 32
#ifndef TK_Q2_K
#define TK_Q2_K 16
#endif
#ifndef TK_Q3_K
#define TK_Q3_K 16
#endif
#ifndef TK_Q4_K
#define TK_Q4_K 32
#endif
#ifndef TK_Q5_K
#define TK_Q5_K 32
#endif
#ifndef TK_Q6_K
#define TK_Q6_K 16
#endif

GI float f16f(uint16_t h) { return _cvtsh_ss(h); }

GI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

GI __m256i ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
GI __m256i mb(__m256i w, const int8_t *x) { return _mm256_maddubs_epi16(w, ld(x)); }

/* Software prefetch of `bytes` at p in each of `rows` rows rb apart: the
 * weights a kernel decodes next, ahead of their decode (a prompt's experts
 * come from memory, read once per token tile in short strided runs that the
 * hardware prefetcher picks up late). */
GI void pf_rows(const void *p, size_t rb, int rows, size_t bytes) {
    for (int r = 0; r < rows; r++)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + (size_t)r * rb + o, _MM_HINT_T0);
}
/* the 8-row kernels: the next group's `bytes` of each row (of the `left`
 * rows after this group, 8 at most), wr this group's first row */
GI void pf_next8(const uint8_t *wr, size_t rb, int64_t left, size_t bytes) {
    pf_rows(wr + 8 * rb, rb, left < 8 ? (int)left : 8, bytes);
}

/* ---- byte permutations shared by weights and activations -------------------
 * Applied to the 8 registers of natural order (register k = elements 32k ..
 * 32k + 31 of a super-block) of both the decoded weights and the
 * activations, so products still pair the right elements. Each stage is a
 * pair of unpacks (a bijection on bytes). */
GI void st16(__m256i *a, __m256i *b) {
    __m256i lo = _mm256_unpacklo_epi16(*a, *b), hi = _mm256_unpackhi_epi16(*a, *b);
    *a = lo; *b = hi;
}
GI void st32(__m256i *a, __m256i *b) {
    __m256i lo = _mm256_unpacklo_epi32(*a, *b), hi = _mm256_unpackhi_epi32(*a, *b);
    *a = lo; *b = hi;
}
GI void st64(__m256i *a, __m256i *b) {
    __m256i lo = _mm256_unpacklo_epi64(*a, *b), hi = _mm256_unpackhi_epi64(*a, *b);
    *a = lo; *b = hi;
}
/* kind 1: a 32-bit transpose per half within registers 0..3 and 4..7: every
 * register of a group carries dwords [0 1 2 3] (input indices within the
 * group) in each half. With 16-element sub-blocks (register k = subs 2k |
 * 2k + 1) registers 0..3 carry int16 lanes of subs [0 0 2 2 4 4 6 6 | 1 1 3
 * 3 5 5 7 7], registers 4..7 the same plus 8. */
GI void perm1(__m256i v[8]) {
    st32(&v[0], &v[1]); st32(&v[2], &v[3]); st32(&v[4], &v[5]); st32(&v[6], &v[7]);
    st64(&v[0], &v[2]); st64(&v[1], &v[3]); st64(&v[4], &v[6]); st64(&v[5], &v[7]);
}
/* kind 2: registers 0..3 carry lanes [0 1 2 3 0 1 2 3] (input indices) in
 * each half, registers 4..7 [4 5 6 7 4 5 6 7]. */
GI void perm2(__m256i v[8]) {
    st16(&v[0], &v[1]); st16(&v[2], &v[3]); st16(&v[4], &v[5]); st16(&v[6], &v[7]);
    st32(&v[0], &v[2]); st32(&v[1], &v[3]); st32(&v[4], &v[6]); st32(&v[5], &v[7]);
}
/* kind 3: a 16-bit transpose per half: every register carries lanes
 * [0 1 2 3 4 5 6 7] (input indices) in each half. */
GI void perm3(__m256i v[8]) {
    perm2(v);
    st64(&v[0], &v[4]); st64(&v[1], &v[5]); st64(&v[2], &v[6]); st64(&v[3], &v[7]);
}

/* The K-quants: the per-row kernels below (kq_tile) in both variants, and
 * under AVX-VNNI also the 8-row interleaved ones of kernels/x86/kri8.h
 * (PK_K8_AVX2 builds those into the AVX2 variant too, for trials). There
 * an entry takes the per-row kernel for few tokens, k8_min_tok: the 8-row
 * kernel decodes 8 rows' super-block once per token tile, which pays only
 * over enough tokens, and an MoE expert's share of a prompt is often
 * fewer (about 10 per expert in Qwen3-Next's 512-token prompt); the
 * per-row kernel's cost per row and token (a horizontal sum and store) is
 * amortized over n, so its lead lasts longer on long rows. The counts were
 * chosen on an Intel Xeon with AVX-VNNI and checked on Zen 5 (bench/README.md,
 * "K-quant prompt kernels by token count"). */
#if (defined(X86_VNNI256) || defined(PK_K8_AVX2)) && !defined(PK_NO_K8)
#define K8_ON 1
#endif
#include "kernels/x86/avx2_kquant.h"

/* ---- 32-element blocks x Q8_0 / Q8_1 -----------------------------------------
 * Per token and group of 4 blocks: the 128 activations widened to int16,
 * the 4 scales as [d0 d1 d2 d3 | d0 d1 d2 d3] (the lane order of the
 * reduced sums) and, for Q8_1, the 4 s = d * sum(qs) as [s0..s3 | 0 0 0 0]. */
typedef struct {
    int16_t q[128];
    float d[8];
    float s[8];
} xq;

static void prep_q8(int nt, const void *const *x, int64_t k0, int q81, int nbk, int ng, xq *X) {
    const size_t bsz = q81 ? sizeof(pk_block_q8_1) : sizeof(pk_block_q8_0), qoff = q81 ? 4 : 2;
    for (int t = 0; t < nt; t++) {
        const uint8_t *base = (const uint8_t *)x[t] + (size_t)k0 * bsz;
        for (int g = 0; g < ng; g++) {
            xq *o = &X[t * ng + g];
            for (int j = 0; j < 4; j++) {
                int b = 4 * g + j;
                if (b < nbk) {
                    const uint8_t *blk = base + (size_t)b * bsz;
                    __m256i q = ld(blk + qoff);
                    _mm256_store_si256((__m256i *)(o->q + 32 * j), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)));
                    _mm256_store_si256((__m256i *)(o->q + 32 * j + 16),
                                       _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)));
                    uint16_t d, s = 0;
                    memcpy(&d, blk, 2);
                    if (q81) memcpy(&s, blk + 2, 2);
                    o->d[j] = o->d[j + 4] = f16f(d);
                    o->s[j] = f16f(s);
                } else {
                    _mm256_store_si256((__m256i *)(o->q + 32 * j), _mm256_setzero_si256());
                    _mm256_store_si256((__m256i *)(o->q + 32 * j + 16), _mm256_setzero_si256());
                    o->d[j] = o->d[j + 4] = 0.0f;
                    o->s[j] = 0.0f;
                }
                o->s[j + 4] = 0.0f;
            }
        }
    }
}

/* [v0 v1 v2 v3 | v0 v1 v2 v3] from 4 fp16 values */
GI __m256 f16x4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    uint64_t u = (uint64_t)a | (uint64_t)b << 16 | (uint64_t)c << 32 | (uint64_t)d << 48;
    __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)u));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(f), f, 1);
}

/* 16 int8 levels (elements 0..15 | 16..31 of a block) to two int16 registers */
GI void widen2(__m128i lo, __m128i hi, __m256i *w) {
    w[0] = _mm256_cvtepi8_epi16(lo);
    w[1] = _mm256_cvtepi8_epi16(hi);
}

/* 5th bits of a Q5 block (bit j of qh: element j) as 0x10 bytes: elements
 * 0..15 in lo, 16..31 in hi */
GI void q5_high(const uint8_t *qhp, __m128i *lo, __m128i *hi) {
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    const __m128i bits = _mm_set1_epi64x((long long)0x8040201008040201ull);
    __m128i v = _mm_cvtsi32_si128((int)qh);
    __m128i b0 = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    __m128i b1 = _mm_shuffle_epi8(v, _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    *lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b0, bits), bits), _mm_set1_epi8(0x10));
    *hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b1, bits), bits), _mm_set1_epi8(0x10));
}

/* Decoders: 4 blocks -> W[8] (int16 levels, natural order), dw (scales) and
 * mw (Q4_1 / Q5_1 offsets), both in the [x0..x3 | x0..x3] order. */
GI void dec_q4_1(const pk_block_q4_1 *b, __m256i *W, __m256 *dw, __m256 *mw) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        __m128i q = _mm_loadu_si128((const __m128i *)b[j].qs);
        widen2(_mm_and_si128(q, m4), _mm_and_si128(_mm_srli_epi16(q, 4), m4), W + 2 * j);
    }
    *dw = f16x4(b[0].d, b[1].d, b[2].d, b[3].d);
    *mw = f16x4(b[0].m, b[1].m, b[2].m, b[3].m);
}
GI void dec_q5_1(const pk_block_q5_1 *b, __m256i *W, __m256 *dw, __m256 *mw) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        __m128i q = _mm_loadu_si128((const __m128i *)b[j].qs), hl, hh;
        q5_high(b[j].qh, &hl, &hh);
        widen2(_mm_or_si128(_mm_and_si128(q, m4), hl), _mm_or_si128(_mm_and_si128(_mm_srli_epi16(q, 4), m4), hh), W + 2 * j);
    }
    *dw = f16x4(b[0].d, b[1].d, b[2].d, b[3].d);
    *mw = f16x4(b[0].m, b[1].m, b[2].m, b[3].m);
}
/* the 32 nibbles at qs through the 16 int8 levels of lut (IQ4_NL, MXFP4) */
GI void tab_levels(const uint8_t *qs, __m128i lut, __m256i *w) {
    const __m128i m4 = _mm_set1_epi8(0x0F), q = _mm_loadu_si128((const __m128i *)qs);
    widen2(_mm_shuffle_epi8(lut, _mm_and_si128(q, m4)),
           _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4)), w);
}
GI void dec_iq4_nl(const pk_block_iq4_nl *b, __m256i *W, __m256 *dw, __m256 *mw) {
    const __m128i lut = _mm_loadu_si128((const __m128i *)pk_iq4nl_values);
    for (int j = 0; j < 4; j++) tab_levels(b[j].qs, lut, W + 2 * j);
    *dw = f16x4(b[0].d, b[1].d, b[2].d, b[3].d);
    (void)mw;
}
/* 4 blocks x one token: the blocks' int32 sums as [b0 b1 b2 b3 | b0 b1 b2 b3]
 * halves (each lane an exact partial sum) */
GI __m256i dot4(const __m256i *W, const int16_t *q) {
    __m256i p[4];
    for (int j = 0; j < 4; j++)
        p[j] = _mm256_add_epi32(_mm256_madd_epi16(W[2 * j], ld(q + 32 * j)),
                                _mm256_madd_epi16(W[2 * j + 1], ld(q + 32 * j + 16)));
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
}

/* The 32-element block types of the driver below, by kind */
enum { Q32_Q4_1, Q32_Q5_1, Q32_IQ4_NL };

GI size_t q32_bsize(const int T) {
    return T == Q32_Q4_1 ? sizeof(pk_block_q4_1) : T == Q32_Q5_1 ? sizeof(pk_block_q5_1) : sizeof(pk_block_iq4_nl);
}
/* the decoder of type T (4 blocks at b) */
GI void q32_dec(const int T, const void *b, __m256i *W, __m256 *dw, __m256 *mw) {
    if (T == Q32_Q4_1) dec_q4_1(b, W, dw, mw);
    else if (T == Q32_Q5_1) dec_q5_1(b, W, dw, mw);
    else dec_iq4_nl(b, W, dw, mw);
}

/* Per k-block and token tile, prepare; per row and group of 4 blocks,
 * decode (a short group from zeroed blocks past the end), then every
 * token's 4 block sums scaled by one multiply-add (Q4_1, Q5_1: and the
 * offsets' another). */
GI void q32_gemm(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                 size_t rb, const void *const *x) {
    const int q81 = T != Q32_IQ4_NL;
    const size_t bs = q32_bsize(T);
    xq X[TQ * KBQ / 4] __attribute__((aligned(32)));
    int64_t nb = n / 32;
    for (int64_t k0 = 0; k0 < nb; k0 += KBQ) {
        int nbk = nb - k0 < KBQ ? (int)(nb - k0) : KBQ, ng = (nbk + 3) / 4;
        for (int64_t t0 = 0; t0 < ntok; t0 += TQ) {
            int nt = ntok - t0 < TQ ? (int)(ntok - t0) : TQ;
            prep_q8(nt, x + t0, k0, q81, nbk, ng, X);
            const int64_t pfr = kq_pf((size_t)nbk * bs);
            for (int64_t r = 0; r < nrows; r++) {
                const char *wr = (const char *)w + (size_t)r * rb + (size_t)k0 * bs;
                if (r + pfr < nrows) pf_rows(wr + pfr * rb, rb, 1, (size_t)nbk * bs);
                __m256 acc[TQ];
                for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
                for (int g = 0; g < ng; g++) {
                    const void *wb = wr + (size_t)(4 * g) * bs;
                    union { pk_block_q4_1 q4_1[4]; pk_block_q5_1 q5_1[4]; pk_block_iq4_nl iq4_nl[4]; } tail;
                    if (4 * g + 4 > nbk) {  /* zero blocks past the end */
                        memset(&tail, 0, 4 * bs);
                        memcpy(&tail, wb, (size_t)(nbk - 4 * g) * bs);
                        wb = &tail;
                    }
                    __m256i W[8];
                    __m256 dw, mw = _mm256_setzero_ps();
                    q32_dec(T, wb, W, &dw, &mw);
                    for (int t = 0; t < nt; t++) {
                        const xq *xp = &X[t * ng + g];
                        __m256 f = _mm256_cvtepi32_ps(dot4(W, xp->q));
                        acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_load_ps(xp->d)), acc[t]);
                        if (q81) acc[t] = _mm256_fmadd_ps(mw, _mm256_load_ps(xp->s), acc[t]);
                    }
                }
                store_acc(nt, acc, y + t0 * ys + r, ys, k0 == 0);
            }
        }
    }
}
RI_ENTRY(q4_1, q32_gemm, Q32_Q4_1)
RI_ENTRY(q5_1, q32_gemm, Q32_Q5_1)
RI_ENTRY(iq4_nl, q32_gemm, Q32_IQ4_NL)

/* ---- MXFP4, Q5_0, Q4_0 x Q8_0: 8 rows at a time ------------------------------
 * Rows in groups of 8, decoded row-interleaved with signed levels and their
 * seeds (kernels/x86/ri8.h) once per (k-block, tile of up to RITS tokens)
 * into a stack buffer; the tile's activations are prepared once per
 * k-block as x + 128 (unsigned bytes, token-minor per block) with their
 * scales. Per block and token then, seeded with the rows' -128 * level sum:
 *   - AVX-VNNI: 8 vpdpbusd (activations u8 x levels s8), one int32 chain
 *     per token, RIT tokens in flight;
 *   - AVX2: 8 vpmaddubsw (no saturation: |pair| <= 2 * 255 * 16), summed
 *     in int16 with the int16 seed by wrapping adds: exact, as the true sum
 *     of each int16 lane (16 elements, |.| <= 16 * 127 * 16 = 32512) fits,
 *     then 1 vpmaddwd; each level register is loaded once for the RIT
 *     tokens (faster than a token at a time on one core:
 *     bench/README.md);
 * then one convert and one multiply-add into the 8 rows' float
 * accumulators. Q8_0 takes this path under AVX-VNNI (its own decode). */
#ifndef RIT
#ifdef X86_VNNI256
#define RIT 6     /* tokens per inner tile: independent int32 chains */
#else
#define RIT 8     /* chosen over 4 on Zen 5 by bench/ab_gemm (bench/README.md) */
#endif
#endif
#ifndef RITS
#define RITS 64   /* tokens per prepared tile at most */
#endif
#ifndef RIKB
#define RIKB 32   /* blocks per k-block at most (1024 elements) */
#endif
/* per k-block and tile: activations X[b][t] + 128 (32 bytes) and scales */
typedef struct { uint8_t x[RIKB][RITS][32]; float d[RIKB][RITS]; } ri_act;

/* The tile's nt tokens (at xs[t], nbk blocks) into A. */
GI void ri_prep(int nt, const pk_block_q8_0 *const *xs, int nbk, ri_act *A) {
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < nbk; b++) {
            _mm256_store_si256((__m256i *)A->x[b][t], _mm256_xor_si256(ld(xs[t][b].qs), k80));
            A->d[b][t] = _cvtsh_ss(xs[t][b].d);
        }
}

/* Part i of n split into parts of sizes differing by at most one: its start. */
GI int64_t ri_part(int64_t n, int64_t parts, int64_t i) { return i * (n / parts) + (i < n % parts ? i : n % parts); }

/* y[t * ys + r] (+)= lane r of acc[t], t < NT, r < nr (8 rows side by side) */
GI void ri_store(const int NT, const __m256 *acc, float *y, int64_t ys, int nr, int first) {
    for (int t = 0; t < NT; t++) {
        float *yt = y + t * ys;
        if (nr == 8) {
            _mm256_storeu_ps(yt, first ? acc[t] : _mm256_add_ps(acc[t], _mm256_loadu_ps(yt)));
        } else {
            float v[8];
            _mm256_storeu_ps(v, acc[t]);
            for (int r = 0; r < nr; r++) yt[r] = first ? v[r] : yt[r] + v[r];
        }
    }
}

/* token t's 4 prepared activations at 4j (of the 32 at xb[t]), broadcast */
GI __m256i ri_bx(const uint8_t (*xb)[32], int t, int j) {
    return _mm256_set1_epi32(ri_x4((const int8_t *)xb[t] + 4 * j));
}

/* NT tokens (from t0 of A) x the 8 rows of W over nbk blocks. */
GI void ri_tile(const int NT, const ri8 *W, int nbk, const ri_act *A, int t0, float *y, int64_t ys, int nr,
                int first) {
    __m256 acc[RIT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nbk; b++) {
        const ri8 *wb = &W[b];
        const uint8_t(*xb)[32] = A->x[b] + t0;
        __m256i s[RIT];
#ifdef X86_VNNI256   /* one int32 chain per token */
        for (int t = 0; t < NT; t++) s[t] = wb->c;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i q = _mm256_load_si256(&wb->q[j]);
            for (int t = 0; t < NT; t++) s[t] = x86_dpbusd(s[t], ri_bx(xb, t, j), q);
        }
#else                /* the seed and the 8 products summed in int16 (wrapping adds), then one vpmaddwd;
                        each level register loaded once for the NT tokens */
        __m256i p[RIT];
        for (int t = 0; t < NT; t++) p[t] = wb->c;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i q = _mm256_load_si256(&wb->q[j]);
            for (int t = 0; t < NT; t++) {
                p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(ri_bx(xb, t, j), q));
                __asm__("" : "+x"(p[t]));   /* else gcc reassociates the sums: 8 NT products stored first */
            }
        }
        for (int t = 0; t < NT; t++) s[t] = _mm256_madd_epi16(p[t], _mm256_set1_epi16(1));
#endif
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(wb->d, _mm256_set1_ps(A->d[b][t0 + t])),
                                     acc[t]);
    }
    ri_store(NT, acc, y, ys, nr, first);
}

/* ri_tile for nt (1 .. RIT) tokens: one specialised copy per count */
GI void ri_tiles(int nt, const ri8 *W, int nbk, const ri_act *A, int t0, float *y, int64_t ys, int nr, int first) {
    switch (nt) {
    case 1: ri_tile(1, W, nbk, A, t0, y, ys, nr, first); break;
    case 2: ri_tile(2, W, nbk, A, t0, y, ys, nr, first); break;
    case 3: ri_tile(3, W, nbk, A, t0, y, ys, nr, first); break;
#if RIT > 4
    case 4: ri_tile(4, W, nbk, A, t0, y, ys, nr, first); break;
    case 5: ri_tile(5, W, nbk, A, t0, y, ys, nr, first); break;
#endif
#if RIT > 6
    case 6: ri_tile(6, W, nbk, A, t0, y, ys, nr, first); break;
    case 7: ri_tile(7, W, nbk, A, t0, y, ys, nr, first); break;
#endif
    default: ri_tile(RIT, W, nbk, A, t0, y, ys, nr, first); break;
    }
}

GI void gemm_ri(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                size_t rb, const void *const *x) {
    ri8 W[RIKB];
    ri_act A __attribute__((aligned(32)));
    /* k-blocks and token tiles of balanced sizes: no short tail tile */
    int64_t nb = n / 32, nkb = (nb + RIKB - 1) / RIKB, kbs = (nb + nkb - 1) / nkb;
    int64_t ntt = (ntok + RITS - 1) / RITS;
    for (int64_t k0 = 0; k0 < nb; k0 += kbs) {
        int nbk = nb - k0 < kbs ? (int)(nb - k0) : (int)kbs;
        for (int64_t tt = 0; tt < ntt; tt++) {
            int64_t t0 = ri_part(ntok, ntt, tt);
            int nts = (int)(ri_part(ntok, ntt, tt + 1) - t0);
            const pk_block_q8_0 *xs[RITS];
            for (int t = 0; t < nts; t++) xs[t] = (const pk_block_q8_0 *)x[t0 + t] + k0;
            ri_prep(nts, xs, nbk, &A);
            const int nin = (nts + RIT - 1) / RIT;
            for (int64_t r0 = 0; r0 < nrows; r0 += 8) {
                int nr = nrows - r0 < 8 ? (int)(nrows - r0) : 8;
                const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * rb + (size_t)k0 * ri_bsize(T);
                pf_next8(wr, rb, nrows - r0 - 8, (size_t)nbk * ri_bsize(T));
                ri8_decode(T, wr, rb, nr, nbk, W);
                float *yr = y + t0 * ys + r0;
                for (int i = 0; i < nin; i++) {
                    int t = (int)ri_part(nts, nin, i), nt = (int)ri_part(nts, nin, i + 1) - t;
                    ri_tiles(nt, W, nbk, &A, t, yr + t * ys, ys, nr, k0 == 0);
                }
            }
        }
    }
}
RI_ENTRY(mxfp4, gemm_ri, RI_MXFP4)
RI_ENTRY(q5_0, gemm_ri, RI_Q5_0)
RI_ENTRY(q4_0, gemm_ri, RI_Q4_0)

/* ---- Q8_0 x Q8_0 --------------------------------------------------------------
 * Under AVX-VNNI: gemm_ri above (signed levels x activations + 128, seeded).
 * AVX2: vpmaddubsw pairs of Q8_0's levels could saturate (2 * 128 * 255 for
 * levels x activations + 128), so 8 rows at a time in int16 with vpmaddwd:
 * the signed levels of ri8_decode sign-extended, against the activations
 * widened once per token tile (exact, no offset). Per ri8 register q[j]
 * (rows' elements 4j .. 4j + 3) the two unpacks give rows 0, 1 | 4, 5 and
 * 2, 3 | 6, 7, each row's 4 elements in two dwords; one broadcast of the
 * token's 4 int16 activations serves both, and one vphaddd per block and
 * token leaves rows 0..7 in order. Per block, token and 8 rows: 16
 * vpmaddwd, no horizontal sums per row. Above Q8TS tokens the widened
 * activations of up to Q8TA tokens (balanced tiles) go to the thread's
 * scratch and stream from L2, so each 8 rows are decoded once per Q8TA
 * tokens instead of per Q8TS: bench/ab_gemm on Zen 3, one core, 2048 x 1408
 * (an expert's down projection of DeepSeek-V2-Lite): 1.12x at 33 tokens,
 * 1.09x at 48, 1.10x at 128, 1.07x at 512; 64-token tiles gained 1.07x,
 * 128 tokens by 8 blocks 0.96-1.02x, 512 by 4 0.91-0.96x. */
#ifdef X86_VNNI256
RI_ENTRY(q8_0, gemm_ri, RI_Q8_0)
#else
enum {
    Q8T = 4,      /* tokens per inner tile */
    Q8TS = 32,    /* tokens per prepared tile */
    Q8KB = 16,    /* blocks per k-block at most (512 elements) */
    Q8TA = 128,   /* tokens per prepared tile in the thread's scratch */
};
typedef struct { __m256i lo[8], hi[8]; __m256 d; } q8ri;
typedef struct { int16_t q[32]; } q8x16;

GI void q8_tile(const int NT, const q8ri *W, int nbk, const q8x16 *X, const float *dx, float *y, int64_t ys,
                int nr, int first) {
    __m256 acc[Q8T];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nbk; b++) {
        const q8ri *wb = &W[b];
        __m256i sl[Q8T], sh[Q8T];
        for (int t = 0; t < NT; t++) sl[t] = sh[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 8; j++) {
            const __m256i wl = wb->lo[j], wh = wb->hi[j];
            for (int t = 0; t < NT; t++) {
                int64_t a;
                memcpy(&a, X[t * Q8KB + b].q + 4 * j, 8);
                const __m256i xa = _mm256_set1_epi64x(a);
                sl[t] = _mm256_add_epi32(sl[t], _mm256_madd_epi16(wl, xa));
                sh[t] = _mm256_add_epi32(sh[t], _mm256_madd_epi16(wh, xa));
            }
        }
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_hadd_epi32(sl[t], sh[t])),
                                     _mm256_mul_ps(wb->d, _mm256_set1_ps(dx[t * Q8KB + b])), acc[t]);
    }
    ri_store(NT, acc, y, ys, nr, first);
}

/* q8_tile for the nt (0 .. Q8T - 1) tokens after the full tiles: one specialised copy per count */
GI void q8_tail(int nt, const q8ri *W, int nbk, const q8x16 *X, const float *dx, float *y, int64_t ys, int nr,
                int first) {
    switch (nt) {
    case 1: q8_tile(1, W, nbk, X, dx, y, ys, nr, first); break;
    case 2: q8_tile(2, W, nbk, X, dx, y, ys, nr, first); break;
    case 3: q8_tile(3, W, nbk, X, dx, y, ys, nr, first); break;
    default: break;
    }
}

static void gemm_q8_0(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w, size_t rb,
                      const void *const *x) {
    q8ri W[Q8KB];
    ri8 R[Q8KB];
    q8x16 Xs[Q8TS * Q8KB];
    float dxs[Q8TS * Q8KB];
    /* up to Q8TA tokens' activations in the thread's scratch (from L2): each
       row block decoded once per Q8TA tokens; else Q8TS on the stack */
    q8x16 *X = Xs;
    float *dx = dxs;
    int64_t cap = Q8TS;
    if (ntok > Q8TS) {
        char *s = pk_thread_scratch((sizeof(q8x16) + sizeof(float)) * (size_t)(Q8TA * Q8KB));
        if (s) { X = (q8x16 *)s; dx = (float *)(s + sizeof(q8x16) * (size_t)(Q8TA * Q8KB)); cap = Q8TA; }
    }
    int64_t nb = n / 32, nkb = (nb + Q8KB - 1) / Q8KB, kbs = (nb + nkb - 1) / nkb;
    int64_t ntt = (ntok + cap - 1) / cap;
    for (int64_t k0 = 0; k0 < nb; k0 += kbs) {
        int nbk = nb - k0 < kbs ? (int)(nb - k0) : (int)kbs;
        for (int64_t tt = 0; tt < ntt; tt++) {
            int64_t t0 = ri_part(ntok, ntt, tt);
            int nts = (int)(ri_part(ntok, ntt, tt + 1) - t0);
            for (int t = 0; t < nts; t++) {
                const pk_block_q8_0 *xs = (const pk_block_q8_0 *)x[t0 + t] + k0;
                for (int b = 0; b < nbk; b++) {
                    __m256i q = ld(xs[b].qs);
                    _mm256_storeu_si256((__m256i *)X[t * Q8KB + b].q, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)));
                    _mm256_storeu_si256((__m256i *)(X[t * Q8KB + b].q + 16),
                                        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)));
                    dx[t * Q8KB + b] = _cvtsh_ss(xs[b].d);
                }
            }
            for (int64_t r0 = 0; r0 < nrows; r0 += 8) {
                int nr = nrows - r0 < 8 ? (int)(nrows - r0) : 8;
                const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * rb + (size_t)k0 * sizeof(pk_block_q8_0);
                pf_next8(wr, rb, nrows - r0 - 8, (size_t)nbk * sizeof(pk_block_q8_0));
                ri8_decode(RI_Q8_0, wr, rb, nr, nbk, R);
                for (int b = 0; b < nbk; b++) {
                    W[b].d = R[b].d;
                    for (int j = 0; j < 8; j++) {   /* sign-extended: the byte in the high half, shifted down */
                        W[b].lo[j] = _mm256_srai_epi16(_mm256_unpacklo_epi8(_mm256_setzero_si256(), R[b].q[j]), 8);
                        W[b].hi[j] = _mm256_srai_epi16(_mm256_unpackhi_epi8(_mm256_setzero_si256(), R[b].q[j]), 8);
                    }
                }
                float *yr = y + t0 * ys + r0;
                int t = 0;
                for (; t + Q8T <= nts; t += Q8T)
                    q8_tile(Q8T, W, nbk, X + t * Q8KB, dx + t * Q8KB, yr + t * ys, ys, nr, k0 == 0);
                q8_tail(nts - t, W, nbk, X + t * Q8KB, dx + t * Q8KB, yr + t * ys, ys, nr, k0 == 0);
            }
        }
    }
}
#endif

const pk_kernels PK_GEMM_TABLE = {.gemm = {
    [PK_TYPE_Q8_0] = gemm_q8_0, [PK_TYPE_Q4_0] = gemm_q4_0, [PK_TYPE_Q4_1] = gemm_q4_1,
    [PK_TYPE_Q5_0] = gemm_q5_0, [PK_TYPE_Q5_1] = gemm_q5_1, [PK_TYPE_IQ4_NL] = gemm_iq4_nl,
    [PK_TYPE_MXFP4] = gemm_mxfp4, [PK_TYPE_Q2_K] = gemm_q2_K, [PK_TYPE_Q3_K] = gemm_q3_K, [PK_TYPE_Q4_K] = gemm_q4_K,
    [PK_TYPE_Q5_K] = gemm_q5_K, [PK_TYPE_Q6_K] = gemm_q6_K, [PK_TYPE_IQ4_XS] = gemm_iq4_xs,
    [PK_TYPE_IQ2_XXS] = gemm_iq2_xxs, [PK_TYPE_IQ2_XS] = gemm_iq2_xs,
    [PK_TYPE_IQ1_S] = gemm_iq1_s, [PK_TYPE_IQ1_M] = gemm_iq1_m,
    [PK_TYPE_IQ3_XXS] = gemm_iq3_xxs, [PK_TYPE_IQ3_S] = gemm_iq3_s, [PK_TYPE_IQ2_S] = gemm_iq2_s,
}};

#ifndef PK_VNNI256
/* ---- F32 matrix product (attention, the chunked delta rule) ------------------- */

/* R rows (<= 4) x NV vectors of 8 columns; the last vector masked by mk
 * when MASK. One FMA per k, in order, from zero. */
GI void sg_tile(const int R, const int NV, const int MASK, int K, const float *A, int64_t lda,
                const float *B, int64_t ldb, float *C, int64_t ldc, __m256i mk) {
    __m256 acc[4][3];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NV; j++) acc[r][j] = _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m256 b[3];
        const float *bk = B + (int64_t)k * ldb;
        for (int j = 0; j < NV; j++)
            b[j] = MASK && j == NV - 1 ? _mm256_maskload_ps(bk + 8 * j, mk) : _mm256_loadu_ps(bk + 8 * j);
        for (int r = 0; r < R; r++) {
            __m256 a = _mm256_broadcast_ss(A + r * lda + k);
            for (int j = 0; j < NV; j++) acc[r][j] = _mm256_fmadd_ps(a, b[j], acc[r][j]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NV; j++) {
            if (MASK && j == NV - 1) _mm256_maskstore_ps(C + r * ldc + 8 * j, mk, acc[r][j]);
            else _mm256_storeu_ps(C + r * ldc + 8 * j, acc[r][j]);
        }
}

/* the M rows of C's columns n0 .. n0 + 8 NV - 1 (the last vector masked by mk
 * when MASK): tiles of 4 rows, then the 1 to 3 left */
GI void sg_rows(const int NV, const int MASK, int M, int K, const float *A, int64_t lda, const float *B,
                int64_t ldb, float *C, int64_t ldc, int n0, __m256i mk) {
    int m = 0;
    for (; m + 4 <= M; m += 4) sg_tile(4, NV, MASK, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, mk);
    switch (M - m) {
    case 3: sg_tile(3, NV, MASK, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, mk); break;
    case 2: sg_tile(2, NV, MASK, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, mk); break;
    case 1: sg_tile(1, NV, MASK, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, mk); break;
    default: break;
    }
}

void pk_avx2_sgemm(int M, int N, int K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                   int64_t ldc) {
    for (int n0 = 0; n0 < N; n0 += 24) {
        int nc = N - n0 < 24 ? N - n0 : 24;
        int nv = (nc + 7) / 8, rem = nc - 8 * (nv - 1);
        __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        if (rem == 8) {
            if (nv == 3) sg_rows(3, 0, M, K, A, lda, B, ldb, C, ldc, n0, mk);
            else if (nv == 2) sg_rows(2, 0, M, K, A, lda, B, ldb, C, ldc, n0, mk);
            else sg_rows(1, 0, M, K, A, lda, B, ldb, C, ldc, n0, mk);
        } else {
            if (nv == 3) sg_rows(3, 1, M, K, A, lda, B, ldb, C, ldc, n0, mk);
            else if (nv == 2) sg_rows(2, 1, M, K, A, lda, B, ldb, C, ldc, n0, mk);
            else sg_rows(1, 1, M, K, A, lda, B, ldb, C, ldc, n0, mk);
        }
    }
}

/* ---- exp, SwiGLU ------------------------------------------------------------------ */

/* exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts),
 * e^r by its degree-6 Taylor polynomial (|r| <= ln 2 / 2: relative error
 * below 2e-7); 2^k as 2^(k/2) * 2^(k - k/2), both normal floats. x below
 * -104 gives 0, above 88.72284 +inf, NaN stays NaN. */
GI __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-104.0f), hi = _mm256_set1_ps(88.72284f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145752f), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.42860677e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

GI __m256i tail_mask(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

void pk_avx2_exp_sub(float *x, int64_t n, float sub) {
    const __m256 s = _mm256_set1_ps(sub);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(x + i, m, exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), s)));
    }
}

GI __m256 silu8(__m256 v, __m256 u) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    return _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void pk_avx2_silu_mul(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, silu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(g + i, m, silu8(_mm256_maskload_ps(g + i, m), _mm256_maskload_ps(u + i, m)));
    }
}

/* tanh(y): for |y| < 0.625 the odd polynomial y + y^3 P(y^2) (a
 * least-squares fit in relative error, below 8e-8 there); above, sign(y)
 * (1 - 2 / (e^(2|y|) + 1)) by exp8 (below 3e-7). +-inf give +-1 (exp8
 * saturates to +inf), NaN stays NaN (it takes the second form), -0 stays
 * -0: both forms on |y|, then y's sign. */
GI __m256 tanh8(__m256 y) {
    const __m256 sgn = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 a = _mm256_andnot_ps(sgn, y), z = _mm256_mul_ps(y, y);
    __m256 p = _mm256_set1_ps(-5.69198560e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06262916e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37353195e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33313820e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332807e-1f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), a, a);
    const __m256 e = exp8(_mm256_add_ps(a, a));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 t = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
    return _mm256_or_ps(t, _mm256_and_ps(y, sgn));   /* tanh(|y|), y's sign (also of -0) */
}

void pk_avx2_softcap(float *x, int64_t n, float cap) {
    const __m256 inv = _mm256_set1_ps(1.0f / cap), c = _mm256_set1_ps(cap);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv)), c));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(tanh8(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv)), c));
    }
}

#endif  /* !PK_VNNI256 */

#else  /* compiler without AVX2 (or AVX-VNNI): no entries, never selected */
const pk_kernels PK_GEMM_TABLE = {0};
#endif
