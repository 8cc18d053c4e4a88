/* kernels/kqt_driver.h - the driver of att_kqt (pk_att_kqt_fn, kernels/kernels.h:
 * scores over F16 keys in transposed tiles of PK_KT positions) shared by
 * kernels/x86/avx2_att.c and kernels/arm/neon_att.c. Not a translation unit:
 * included inside the ISA guard; the including file defines KQT_R (the most
 * query rows of a tile, 4 or more) and the tile:
 *   kqt_tile(R, n, Q, ldq, Kt, out, ldo)   out[r * ldo + j] = the score of
 *       query row r (R of them, 1..KQT_R) against position j of the key
 *       tile Kt (j < PK_KT), one FMA chain in order over the n elements.
 * The driver walks the positions in blocks of KQT_BLOCK tiles (read by
 * every row tile while they sit in L1) and the rows in tiles of KQT_R (8
 * rows left, a decoded token of an 8-head group, as 4 + 4), then 3, 2, 1;
 * a tile only partly in [p0, p0 + nk) goes through a buffer. A score is the
 * tile's chain whatever its tile size, so it does not depend on M. */

enum { KQT_BLOCK = 3 };   /* 12-24 KiB of keys at heads of 128-256 */

AI void kqt_tile(const int R, int n, const float *Q, int64_t ldq, const uint16_t *Kt, float *out, int64_t ldo);

/* R rows against tiles t0..t1-1 */
AI void kqt_rows(const int R, int p0, int nk, int t0, int t1, int n, const float *Q, int64_t ldq, const uint16_t *K,
                 float *S, int64_t lds) {
    for (int t = t0; t < t1; t++) {
        const uint16_t *Kt = K + (size_t)t * (size_t)n * PK_KT;
        const int first = t * PK_KT - p0;   /* S's column of the tile's first position */
        if (first >= 0 && first + PK_KT <= nk) {
            kqt_tile(R, n, Q, ldq, Kt, S + first, lds);
            continue;
        }
        float edge[KQT_R * PK_KT];
        kqt_tile(R, n, Q, ldq, Kt, edge, PK_KT);
        const int lo = first < 0 ? -first : 0, hi = first + PK_KT > nk ? nk - first : PK_KT;
        for (int r = 0; r < R; r++)
            for (int j = lo; j < hi; j++) S[r * lds + first + j] = edge[r * PK_KT + j];
    }
}

static void att_kqt(int M, int p0, int nk, int n, const float *Q, int64_t ldq, const uint16_t *K, float *S,
                    int64_t lds) {
    if (nk <= 0) return;
    const int t_end = (p0 + nk - 1) / PK_KT + 1;
    const int mr = KQT_R > 4 && M % KQT_R == 2 && M >= 8 ? M - 8 : M / KQT_R * KQT_R;
    for (int t0 = p0 / PK_KT; t0 < t_end; t0 += KQT_BLOCK) {
        const int t1 = t_end - t0 < KQT_BLOCK ? t_end : t0 + KQT_BLOCK;
        int m = 0;
        for (; m < mr; m += KQT_R) kqt_rows(KQT_R, p0, nk, t0, t1, n, Q + m * ldq, ldq, K, S + m * lds, lds);
        for (; M - m >= 4; m += 4) kqt_rows(4, p0, nk, t0, t1, n, Q + m * ldq, ldq, K, S + m * lds, lds);
        switch (M - m) {
        case 3: kqt_rows(3, p0, nk, t0, t1, n, Q + m * ldq, ldq, K, S + m * lds, lds); break;
        case 2: kqt_rows(2, p0, nk, t0, t1, n, Q + m * ldq, ldq, K, S + m * lds, lds); break;
        case 1: kqt_rows(1, p0, nk, t0, t1, n, Q + m * ldq, ldq, K, S + m * lds, lds); break;
        default: break;
        }
    }
}
