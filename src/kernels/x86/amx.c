/* kernels/x86/amx.c - AMX-INT8 multi-token kernels (Sapphire Rapids and later)
 * for prompt processing with Q2_K..Q6_K weights against Q8_K activations,
 * and Q8_0 against Q8_0 (its own section below). kernels/kernels.c uses them only
 * after the CPU reports AMX-TILE and AMX-INT8 and Linux has granted this
 * process the tile state (pk_amx_enable); each thread loads its tile
 * configuration on first use.
 *
 * Tuned for: prompt batches, where one weight row meets many tokens. A tile
 * product (TDPBUSD) is 16 weight rows x 64 levels times 64 levels x 16
 * tokens, 16384 multiply-adds in one instruction, several times what AVX-512
 * VNNI does in the same time. Per call:
 *   - activations: each 16-token tile's Q8_K levels are transposed once into
 *     the tile layout (4 consecutive levels of each token side by side),
 *     with the tokens' scales and bsums beside them;
 *   - weights: 16 rows at a time are decoded into int8 tiles with the
 *     sub-block scales multiplied in, so that a whole super-block (256
 *     levels) accumulates in one int32 tile. A product sc * q needs up to 13
 *     bits, so it is split in two planes, v = lo + 128 * hi with lo in
 *     [0, 127] (unsigned) and hi signed: two tile products, summed when the
 *     accumulators are read back (Q2_K's sc * q <= 45 needs one plane);
 *   - per super-block the int32 tiles are read back and scaled into float
 *     accumulators: d_w * d_x per (row, token), minus the K-quant mins term
 *     dmin * sum_j m_j * bsum_j, computed exactly in int32 with vpdpwssd.
 *   Two token tiles share each weight tile (8 tile registers: 2 weight
 *   planes, 2 activation tiles, 4 accumulators).
 * Small token counts (where decoding the weights is not repaid: below 10
 * tokens, 4 for Q8_0) use the AVX-512 kernels.
 *
 * Numerics: within a super-block every product and sum is exact int32
 * (|sc * q * x| summed over 256 levels < 2^28); Q6_K's -32 offset is folded
 * into the levels (v = sc * (q - 32)). Only the float accumulation across
 * super-blocks differs from the reference, as in the other kernels.
 */
#include <string.h>
#include "kernels/kernels.h"
#include "core/threads.h"

/* gcc spells the AMX macros __AMX_TILE__ / __AMX_INT8__, clang 14 __AMXTILE__ / __AMXINT8__ */
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_INT8__) || defined(__AMXINT8__)) && \
    defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__F16C__) && \
    defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kernels/x86/avx512_levels.h"

#define GI static inline __attribute__((always_inline))

enum {
    MIN_TOK_KQ = 10,            /* fewer tokens: the AVX-512 kernels (measured crossover) */
    MIN_TOK_Q8 = 4,
    ROWS = 16, TOKS = 16,       /* tile shape */
    A_PLANE = ROWS * 256,       /* one plane of 16 rows x 256 levels */
    /* per super-block of a row block: lo, hi planes, d[16], dmin[16], m pairs[16][8] */
    A_SB = 2 * A_PLANE + 64 + 64 + 16 * 8 * 4,
    /* per super-block of a token tile: 4 tiles of 1 KiB, d[16], bsum pairs[8][16] */
    B_SB = 4 * 1024 + 64 + 8 * 16 * 4,
};

/* ---- process and thread state ----------------------------------------------- */

int pk_amx_enable(void) {
    /* ask Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM,
       XFEATURE_XTILEDATA), then check XCR0 bits 17 and 18 */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

enum { CFG_KQ = 1, CFG_Q8 = 2 };
static _Thread_local int tile_cfg_loaded;   /* which configuration this thread has */

/* This thread's scratch (pk_thread_scratch) of at least n bytes, with tile
 * configuration cfg_id loaded (CFG_KQ: every tile 16 rows x 64 bytes;
 * CFG_Q8: tiles 0-1 16 x 32, 2-3 8 x 64, 4-7 16 x 64); NULL if out of
 * memory. */
static uint8_t *thread_scratch(size_t n, int cfg_id) {
    uint8_t *s = pk_thread_scratch(n);
    if (s && tile_cfg_loaded != cfg_id) {
        tile_cfg cfg __attribute__((aligned(64)));
        memset(&cfg, 0, sizeof cfg);
        cfg.palette = 1;
        for (int i = 0; i < 8; i++) { cfg.rows[i] = 16; cfg.colsb[i] = 64; }
        if (cfg_id == CFG_Q8) {
            cfg.colsb[0] = cfg.colsb[1] = 32;
            cfg.rows[2] = cfg.rows[3] = 8;
        }
        /* not _tile_loadconfig: GCC 12 treats its operand as one byte and
           drops the stores of rows and colsb as dead */
        __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
        tile_cfg_loaded = cfg_id;
    }
    return s;
}

/* ---- activations: token tiles ------------------------------------------------ */

/* 16 x 16 transpose of 32-bit elements */
GI void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* r[4i + j], 128-bit lane L: column 4L + j of rows 4i .. 4i + 3 */
    for (int j = 0; j < 4; j++) {
        __m512i ab0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44), ab1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
        __m512i cd0 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44), cd1 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_i32x4(ab0, cd0, 0x88);
        t[4 + j] = _mm512_shuffle_i32x4(ab0, cd0, 0xDD);
        t[8 + j] = _mm512_shuffle_i32x4(ab1, cd1, 0x88);
        t[12 + j] = _mm512_shuffle_i32x4(ab1, cd1, 0xDD);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Token tile of tokens x[0..nt) (nt <= 16), super-block s, into dst (B_SB
 * bytes): tile k holds levels 64k .. 64k + 63, row j = levels 4j .. 4j + 3 of
 * tokens 0..15; then the tokens' d, then bsum pairs: npair rows of 16 int32,
 * each (bsum[2p], bsum[2p + 1]) as int16 (pair32: bsums over 32 levels). */
static void pack_tokens(const pk_block_q8_K *const *x, int nt, int64_t s, uint8_t *dst, int pair32) {
    for (int k = 0; k < 4; k++) {
        __m512i r[16];
        for (int t = 0; t < 16; t++)
            r[t] = t < nt ? _mm512_loadu_si512(x[t][s].qs + 64 * k) : _mm512_setzero_si512();
        transpose16(r);
        for (int j = 0; j < 16; j++) _mm512_store_si512(dst + 1024 * k + 64 * j, r[j]);
    }
    float *d = (float *)(dst + 4096);
    int32_t *bp = (int32_t *)(dst + 4096 + 64);
    for (int t = 0; t < 16; t++) {
        d[t] = t < nt ? x[t][s].d : 0.0f;
        for (int p = 0; p < 8; p++) {
            int32_t a = 0, b = 0;
            if (t < nt) {
                const int16_t *bs = x[t][s].bsums;
                if (pair32) {
                    if (p < 4) { a = bs[4 * p] + bs[4 * p + 1]; b = bs[4 * p + 2] + bs[4 * p + 3]; }
                } else {
                    a = bs[2 * p]; b = bs[2 * p + 1];
                }
            }
            bp[p * 16 + t] = (int32_t)((uint32_t)(uint16_t)a | (uint32_t)b << 16);
        }
    }
}

/* ---- weights: row blocks --------------------------------------------------------- */

/* The two planes of 64 products v (words) given as even- and odd-byte words
 * we, wo: lo = v & 127 (bytes), hi = v >> 7 (bytes; arithmetic). */
GI void planes(__m512i we, __m512i wo, uint8_t *lo, uint8_t *hi) {
    const __m512i sel = _mm512_set1_epi16(0x00FF);
    /* bytes: low from we, high from wo (bitwise select by sel) */
    __m512i l = _mm512_ternarylogic_epi32(sel, we, _mm512_slli_epi16(wo, 8), 0xCA);
    _mm512_store_si512(lo, _mm512_and_si512(l, _mm512_set1_epi8(0x7F)));
    if (hi) {
        __m512i h = _mm512_ternarylogic_epi32(sel, _mm512_srai_epi16(we, 7), _mm512_slli_epi16(wo, 1), 0xCA);
        _mm512_store_si512(hi, h);
    }
}

/* products of 64 unsigned levels q with per-word scales sw (words, signed;
 * one scale per position's sub-block), minus off (words) */
GI void scaled(__m512i q, __m512i sw, __m512i off, uint8_t *lo, uint8_t *hi) {
    __m512i se = _mm512_and_si512(sw, _mm512_set1_epi16(0x00FF)), so = _mm512_slli_epi16(sw, 8);
    __m512i we = _mm512_sub_epi16(_mm512_maddubs_epi16(q, se), off);
    __m512i wo = _mm512_sub_epi16(_mm512_maddubs_epi16(q, so), off);
    planes(we, wo, lo, hi);
}

/* Row r of a row block: super-block w into the planes at a (row r) */
/* the Q4_K / Q5_K tail of a row's super-block: d, dmin, min pairs */
static void k4_row_tail(uint16_t d16, uint16_t dmin16, const uint8_t mn[8], uint8_t *a, int r) {
    float *d = (float *)(a + 2 * A_PLANE), *dm = d + 16;
    d[r] = _cvtsh_ss(d16);
    dm[r] = _cvtsh_ss(dmin16);
    /* mins as int16 pairs (m[2p], m[2p + 1]) */
    int32_t *mp = (int32_t *)(a + 2 * A_PLANE + 128) + 8 * r;
    for (int p = 0; p < 4; p++)
        mp[p] = (int32_t)((uint32_t)mn[2 * p] | (uint32_t)mn[2 * p + 1] << 16);
}

/* Row r of a row block: Q4_K (five = 0) or Q5_K (five = 1) super-block w
 * into the planes at a (row r). sc * q <= 63 * 31: hi in [0, 15]. */
GI void conv_k45(const void *wv, uint8_t *a, int r, int five) {
    const pk_block_q4_K *w4 = wv;
    const pk_block_q5_K *w5 = wv;
    uint8_t sc[8], mn[8];
    pk_get_scales_mins_k4(five ? w5->scales : w4->scales, sc, mn);
    __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    uint8_t *lo = a + 256 * r, *hi = a + A_PLANE + 256 * r;
    for (int z = 0; z < 4; z++)
        scaled(five ? lv_q5_K(w5, z) : lv_q4_K(w4, z), _mm512_permutexvar_epi16(lv_ldidx(lv_idx32[z]), sc16),
               _mm512_setzero_si512(), lo + 64 * z, hi + 64 * z);
    k4_row_tail(five ? w5->d : w4->d, five ? w5->dmin : w4->dmin, mn, a, r);
}
static void conv_q4_K(const void *w, uint8_t *a, int r) { conv_k45(w, a, r, 0); }
static void conv_q5_K(const void *w, uint8_t *a, int r) { conv_k45(w, a, r, 1); }

/* Q3_K: v = (sc - 32) * (q - 4) in [-124, 128]: hi in [-1, 1] (signed) */
static void conv_q3_K(const void *wv, uint8_t *a, int r) {
    const pk_block_q3_K *w = wv;
    __m512i sw = _mm512_castsi256_si512(lv_q3_scales(w->scales));
    uint8_t *lo = a + 256 * r, *hi = a + A_PLANE + 256 * r;
    for (int z = 0; z < 4; z++) {
        __m512i s = _mm512_permutexvar_epi16(lv_ldidx(lv_idx16[z]), sw);
        scaled(lv_q3_K(w, z), s, _mm512_slli_epi16(s, 2), lo + 64 * z, hi + 64 * z);
    }
    ((float *)(a + 2 * A_PLANE))[r] = _cvtsh_ss(w->d);
}

static void conv_q6_K(const void *wv, uint8_t *a, int r) {
    const pk_block_q6_K *w = wv;
    __m512i sw = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales)));
    uint8_t *lo = a + 256 * r, *hi = a + A_PLANE + 256 * r;
    for (int z = 0; z < 4; z++) {
        __m512i s = _mm512_permutexvar_epi16(lv_ldidx(lv_idx16[z]), sw);
        scaled(lv_q6_K(w, z), s, _mm512_slli_epi16(s, 5), lo + 64 * z, hi + 64 * z);
    }
    float *d = (float *)(a + 2 * A_PLANE);
    d[r] = _cvtsh_ss(w->d);
}

static void conv_q2_K(const void *wv, uint8_t *a, int r) {
    const pk_block_q2_K *w = wv;
    __m128i s8 = _mm_loadu_si128((const __m128i *)w->scales);
    __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F))));
    uint8_t *lo = a + 256 * r;
    for (int z = 0; z < 4; z++)
        scaled(lv_q2_K(w, z), _mm512_permutexvar_epi16(lv_ldidx(lv_idx16[z]), sc16), _mm512_setzero_si512(),
               lo + 64 * z, NULL);
    float *d = (float *)(a + 2 * A_PLANE), *dm = d + 16;
    d[r] = _cvtsh_ss(w->d);
    dm[r] = _cvtsh_ss(w->dmin);
    int32_t *mp = (int32_t *)(a + 2 * A_PLANE + 128) + 8 * r;
    for (int p = 0; p < 8; p++)
        mp[p] = (int32_t)((uint32_t)(w->scales[2 * p] >> 4) | (uint32_t)(w->scales[2 * p + 1] >> 4) << 16);
}

/* ---- the product -------------------------------------------------------------------- */

/* Read back the accumulators of nt token tiles (cb: [tile][plane][16][16]
 * int32) of one super-block into acc ([tile][row][token] floats). */
GI void flush(int nt, const int32_t *cb, const uint8_t *a, const uint8_t *const *b, float *acc,
              int npair, int two_planes) {
    const float *d = (const float *)(a + 2 * A_PLANE), *dm = d + 16;
    const int32_t *mp = (const int32_t *)(a + 2 * A_PLANE + 128);
    for (int t = 0; t < nt; t++) {
        const __m512 dx = _mm512_load_ps(b[t] + 4096);
        const int32_t *bp = (const int32_t *)(b[t] + 4096 + 64);
        __m512i bpv[8];
        for (int p = 0; p < npair; p++) bpv[p] = _mm512_load_si512(bp + 16 * p);
        const int32_t *clo = cb + t * 512, *chi = clo + 256;
        float *at = acc + t * 256;
        for (int r = 0; r < 16; r++) {
            __m512i c = _mm512_load_si512(clo + 16 * r);
            if (two_planes) c = _mm512_add_epi32(c, _mm512_slli_epi32(_mm512_load_si512(chi + 16 * r), 7));
            __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), _mm512_mul_ps(dx, _mm512_set1_ps(d[r])),
                                       _mm512_load_ps(at + 16 * r));
            if (npair) {
                __m512i m = _mm512_setzero_si512();
                for (int p = 0; p < npair; p++)
                    m = _mm512_dpwssd_epi32(m, _mm512_set1_epi32(mp[8 * r + p]), bpv[p]);
                v = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dx, _mm512_set1_ps(dm[r])), v);
            }
            _mm512_store_ps(at + 16 * r, v);
        }
    }
}

/* Step k (levels 64k .. 64k + 63) of a super-block: tile registers 0 lo
 * weights, 1 hi weights (TWO planes; signed if HI_SIGNED), 2-3 tokens (NT
 * token tiles), 4-7 accumulators (token tile t: 4 + 2t lo, 5 + 2t hi). The
 * tile numbers are immediates, so every flag is a compile-time constant. */
GI void tile_step(const int HI_SIGNED, const int TWO, const int NT, const uint8_t *a, const uint8_t *const *b,
                  int k) {
    _tile_loadd(0, a + 64 * k, 256);
    if (TWO) _tile_loadd(1, a + A_PLANE + 64 * k, 256);
    _tile_loadd(2, b[0] + 1024 * k, 64);
    _tile_dpbusd(4, 0, 2);
    if (TWO) { if (HI_SIGNED) _tile_dpbssd(5, 1, 2); else _tile_dpbusd(5, 1, 2); }
    if (NT == 2) {
        _tile_loadd(3, b[1] + 1024 * k, 64);
        _tile_dpbusd(6, 0, 3);
        if (TWO) { if (HI_SIGNED) _tile_dpbssd(7, 1, 3); else _tile_dpbusd(7, 1, 3); }
    }
}

GI void superblock(int nt, const uint8_t *a, const uint8_t *const *b, int32_t *cb, int hi_signed,
                   int two) {
    _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
    if (nt == 2) {
        for (int k = 0; k < 4; k++) {
            if (hi_signed) tile_step(1, 1, 2, a, b, k);
            else if (two) tile_step(0, 1, 2, a, b, k);
            else tile_step(0, 0, 2, a, b, k);
        }
    } else {
        for (int k = 0; k < 4; k++) {
            if (hi_signed) tile_step(1, 1, 1, a, b, k);
            else if (two) tile_step(0, 1, 1, a, b, k);
            else tile_step(0, 0, 1, a, b, k);
        }
    }
    _tile_stored(4, cb, 64);
    if (two) _tile_stored(5, cb + 256, 64);
    if (nt == 2) {
        _tile_stored(6, cb + 512, 64);
        if (two) _tile_stored(7, cb + 768, 64);
    }
}

typedef void (*conv_fn)(const void *w, uint8_t *a, int r);

/* few tokens (or no scratch): the AVX-512 gemm, or its gemv per token */
static void few_tokens(int type, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                       size_t rb, const void *const *x) {
    if (pk_kernels_avx512_gemm.gemm[type]) {
        pk_kernels_avx512_gemm.gemm[type](n, nrows, ntok, y, ys, w, rb, x);
        return;
    }
    for (int64_t t = 0; t < ntok; t++) pk_kernels_avx512_table.gemv[type](n, nrows, y + t * ys, w, rb, x[t]);
}

/* The K-quant types (type: PK_TYPE_Q2_K .. PK_TYPE_Q6_K, a compile-time
 * constant): min pairs per row (0: none), pairs over 32 levels, a signed
 * hi plane, two planes. */
GI int kq_npair(const int type) {
    return type == PK_TYPE_Q2_K ? 8 : type == PK_TYPE_Q4_K || type == PK_TYPE_Q5_K ? 4 : 0;
}
GI int kq_pair32(const int type) { return type == PK_TYPE_Q4_K || type == PK_TYPE_Q5_K; }
GI int kq_hi_signed(const int type) { return type == PK_TYPE_Q3_K || type == PK_TYPE_Q6_K; }
GI int kq_two(const int type) { return type != PK_TYPE_Q2_K; }

/* type's blocks are blk bytes, conv converts a row's block */
GI void gemm_amx(const int type, size_t blk, conv_fn conv, int64_t n, int64_t nrows, int64_t ntok, float *y,
                 int64_t ys, const void *w, size_t rb, const void *const *x) {
    const int npair = kq_npair(type), pair32 = kq_pair32(type), hi_signed = kq_hi_signed(type), two = kq_two(type);
    const int64_t nb = n / PK_QK_K, ntt = (ntok + TOKS - 1) / TOKS;
    uint8_t *s = ntok >= MIN_TOK_KQ ? thread_scratch((size_t)(nb * A_SB + ntt * nb * B_SB) + 4 * 1024 + 2 * 1024,
                                                  CFG_KQ)
                                 : NULL;
    if (!s) { few_tokens(type, n, nrows, ntok, y, ys, w, rb, x); return; }
    uint8_t *A = s, *B = A + nb * A_SB;
    int32_t *cb = (int32_t *)(B + ntt * nb * B_SB);
    float *acc = (float *)(cb + 1024);
    for (int64_t tt = 0; tt < ntt; tt++) {
        int nt = ntok - tt * TOKS < TOKS ? (int)(ntok - tt * TOKS) : TOKS;
        for (int64_t sb = 0; sb < nb; sb++)
            pack_tokens((const pk_block_q8_K *const *)x + tt * TOKS, nt, sb, B + (tt * nb + sb) * B_SB, pair32);
    }
    for (int64_t r0 = 0; r0 < nrows; r0 += ROWS) {
        int nr = nrows - r0 < ROWS ? (int)(nrows - r0) : ROWS;
        for (int64_t sb = 0; sb < nb; sb++) {
            uint8_t *a = A + sb * A_SB;
            for (int r = 0; r < nr; r++) conv((const uint8_t *)w + (size_t)(r0 + r) * rb + sb * blk, a, r);
            if (nr < ROWS) {  /* zero rows: no contribution, finite scales */
                for (int r = nr; r < ROWS; r++) {
                    memset(a + 256 * r, 0, 256);
                    memset(a + A_PLANE + 256 * r, 0, 256);
                    ((float *)(a + 2 * A_PLANE))[r] = 0.0f;
                    ((float *)(a + 2 * A_PLANE))[16 + r] = 0.0f;
                    memset(a + 2 * A_PLANE + 128 + 32 * r, 0, 32);
                }
            }
        }
        for (int64_t tt = 0; tt < ntt; tt += 2) {
            int nt = ntt - tt >= 2 ? 2 : 1;
            memset(acc, 0, (size_t)nt * 256 * sizeof(float));
            for (int64_t sb = 0; sb < nb; sb++) {
                const uint8_t *a = A + sb * A_SB;
                const uint8_t *b[2] = {B + (tt * nb + sb) * B_SB, B + ((tt + nt - 1) * nb + sb) * B_SB};
                superblock(nt, a, b, cb, hi_signed, two);
                flush(nt, cb, a, b, acc, npair, two);
            }
            /* acc is [row][token]: transposed, each token's 16 rows are
               contiguous in y */
            const __mmask16 rm = (__mmask16)((1u << nr) - 1);
            for (int t = 0; t < nt; t++) {
                int64_t tok0 = (tt + t) * TOKS;
                int ntk = ntok - tok0 < TOKS ? (int)(ntok - tok0) : TOKS;
                __m512i v[16];
                for (int r = 0; r < 16; r++) v[r] = _mm512_load_si512(acc + t * 256 + 16 * r);
                transpose16(v);
                for (int k = 0; k < ntk; k++)
                    _mm512_mask_storeu_ps(y + (tok0 + k) * ys + r0, rm, _mm512_castsi512_ps(v[k]));
            }
        }
    }
}

/* the K-quant entries: gemm_NAME is gemm_amx for the type TYPE, blocks
 * pk_block_NAME, converter conv_NAME */
#define AMX_ENTRY(NAME, TYPE)                                                                       \
    static void gemm_##NAME(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w, \
                            size_t rb, const void *const *x) {                                      \
        gemm_amx(TYPE, sizeof(pk_block_##NAME), conv_##NAME, n, nrows, ntok, y, ys, w, rb, x);      \
    }
AMX_ENTRY(q2_K, PK_TYPE_Q2_K)
AMX_ENTRY(q3_K, PK_TYPE_Q3_K)
AMX_ENTRY(q4_K, PK_TYPE_Q4_K)
AMX_ENTRY(q5_K, PK_TYPE_Q5_K)
AMX_ENTRY(q6_K, PK_TYPE_Q6_K)

/* ---- Q8_0 x Q8_0 ---------------------------------------------------------------------
 * Every 32-level block has its own fp16 scale on both sides, so each block
 * is one tile product (TDPBSSD, 16 rows x 32 levels x 16 tokens) read back
 * at once: acc[row] += C[row] * d_w[row] * d_x. The weight tile is loaded
 * straight from the rows (a block's 32 levels, rows rb bytes apart); the
 * activations are transposed into tile layout two blocks at a time. */

enum { Q8_B = 512 + 64 };         /* per block of a token tile: 8 x 64 levels, d[16] */

/* token tile: blocks b (levels of b in 8 rows of 4 x 16 tokens), then d */
static void pack_q8_0(const pk_block_q8_0 *const *x, int nt, int64_t nb, uint8_t *dst) {
    for (int64_t b = 0; b < nb; b += 2) {
        __m512i r[16];
        const int two = b + 1 < nb;
        for (int t = 0; t < 16; t++) {
            __m256i lo = t < nt ? _mm256_loadu_si256((const __m256i *)x[t][b].qs) : _mm256_setzero_si256();
            __m256i hi = t < nt && two ? _mm256_loadu_si256((const __m256i *)x[t][b + 1].qs) : _mm256_setzero_si256();
            r[t] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        transpose16(r);
        for (int j = 0; j < 8; j++) _mm512_store_si512(dst + b * Q8_B + 64 * j, r[j]);
        if (two)
            for (int j = 0; j < 8; j++) _mm512_store_si512(dst + (b + 1) * Q8_B + 64 * j, r[8 + j]);
        for (int k = 0; k < 1 + two; k++) {
            float *d = (float *)(dst + (b + k) * Q8_B + 512);
            for (int t = 0; t < 16; t++) d[t] = t < nt ? _cvtsh_ss(x[t][b + k].d) : 0.0f;
        }
    }
}

static void gemm_q8_0(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w, size_t rb,
                      const void *const *x) {
    const int64_t nb = n / PK_QK8_0, ntt = (ntok + TOKS - 1) / TOKS;
    /* scratch: token tiles, weight scales [block][16], C, a padded row block */
    const size_t sz_b = (size_t)(ntt * nb * Q8_B), sz_d = (size_t)nb * 64, sz_pad = (size_t)nb * 16 * 32;
    uint8_t *s = ntok >= MIN_TOK_Q8 ? thread_scratch(sz_b + sz_d + 1024 + sz_pad, CFG_Q8) : NULL;
    if (!s) { few_tokens(PK_TYPE_Q8_0, n, nrows, ntok, y, ys, w, rb, x); return; }
    uint8_t *B = s;
    float *dw = (float *)(B + sz_b);
    int32_t *cb = (int32_t *)((uint8_t *)dw + sz_d);
    int8_t *pad = (int8_t *)(cb + 256);
    for (int64_t tt = 0; tt < ntt; tt++) {
        int nt = ntok - tt * TOKS < TOKS ? (int)(ntok - tt * TOKS) : TOKS;
        pack_q8_0((const pk_block_q8_0 *const *)x + tt * TOKS, nt, nb, B + tt * nb * Q8_B);
    }
    for (int64_t r0 = 0; r0 < nrows; r0 += ROWS) {
        const int nr = nrows - r0 < ROWS ? (int)(nrows - r0) : ROWS;
        const uint8_t *w0 = (const uint8_t *)w + (size_t)r0 * rb;
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < 16; r++)
                dw[b * 16 + r] = r < nr ? _cvtsh_ss(((const pk_block_q8_0 *)(w0 + (size_t)r * rb))[b].d) : 0.0f;
        /* a partial row block: its levels copied into zero-padded tiles */
        if (nr < ROWS) {
            memset(pad, 0, sz_pad);
            for (int r = 0; r < nr; r++)
                for (int64_t b = 0; b < nb; b++)
                    memcpy(pad + (b * 16 + r) * 32, ((const pk_block_q8_0 *)(w0 + (size_t)r * rb))[b].qs, 32);
        }
        const __mmask16 rm = (__mmask16)((1u << nr) - 1);
        for (int64_t tt = 0; tt < ntt; tt++) {
            const uint8_t *bt = B + tt * nb * Q8_B;
            __m512 acc[16];
            for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                if (nr < ROWS) _tile_loadd(0, pad + b * 16 * 32, 32);
                else _tile_loadd(0, w0 + b * sizeof(pk_block_q8_0) + 2, rb);
                _tile_loadd(2, bt + b * Q8_B, 64);
                _tile_zero(4);
                _tile_dpbssd(4, 0, 2);
                _tile_stored(4, cb, 64);
                const __m512 dx = _mm512_load_ps((const float *)(bt + b * Q8_B + 512));
                for (int r = 0; r < 16; r++)
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * r)),
                                             _mm512_mul_ps(dx, _mm512_set1_ps(dw[b * 16 + r])), acc[r]);
            }
            /* acc is [row][token]: each token's rows are contiguous in y */
            __m512i v[16];
            for (int r = 0; r < 16; r++) v[r] = _mm512_castps_si512(acc[r]);
            transpose16(v);
            int64_t tok0 = tt * TOKS;
            int ntk = ntok - tok0 < TOKS ? (int)(ntok - tok0) : TOKS;
            for (int k = 0; k < ntk; k++)
                _mm512_mask_storeu_ps(y + (tok0 + k) * ys + r0, rm, _mm512_castsi512_ps(v[k]));
        }
    }
}

const pk_kernels pk_kernels_amx_gemm = {.gemm = {
    [PK_TYPE_Q8_0] = gemm_q8_0,
    [PK_TYPE_Q2_K] = gemm_q2_K,
    [PK_TYPE_Q3_K] = gemm_q3_K,
    [PK_TYPE_Q4_K] = gemm_q4_K,
    [PK_TYPE_Q5_K] = gemm_q5_K,
    [PK_TYPE_Q6_K] = gemm_q6_K,
}};

#else
int pk_amx_enable(void) { return 0; }
const pk_kernels pk_kernels_amx_gemm = {0};
#endif
