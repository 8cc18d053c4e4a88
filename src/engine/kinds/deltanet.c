/* engine/kinds/deltanet.c - the Gated DeltaNet mixer of hybrid architectures (Qwen3.5 /
 * POCKET-35B's linear-attention layers), for a batch of tokens.
 *
 * For the layer input h of each token:
 *   qkv = attn_qkv . h,  z = attn_gate . h,
 *   beta = sigmoid(ssm_beta . h),  g = softplus(ssm_alpha . h + dt_bias) * ssm_a
 *   c = silu(causal depthwise conv over the last `conv` qkv rows)
 *   q, k, v = split(c); q, k L2-normalised per head, q scaled by 1/sqrt(state)
 *   per v head j (using q/k head kh(j)), state S (key x value):
 *     S = exp(g) S;  delta = beta (v - S^T k);  S += k delta^T;  o = S^T q
 *   o_j = rmsnorm(o_j, ssm_norm) * silu(z_j);  out = ssm_out . o
 * The projections run batched (weights read once per batch) and the conv
 * steps through the batch, a head's channels per thread (conv_run).
 * Decoding (fewer than PK_DN_CHUNK_MIN tokens) applies the recurrence token by token; a prompt batch uses the chunked
 * form of the same delta rule (WY representation, chunks of PK_DN_CHUNK):
 * within a chunk with entry state S0 and G_r = sum_{i<=r} g_i,
 *   T = (I + A)^-1, A_ri = beta_r exp(G_r - G_i) k_r.k_i  (i < r)
 *   U = T (beta V) - T (beta exp(G) K) S0           (pseudo-values)
 *   o_r = exp(G_r) q_r S0 + sum_{i<=r} exp(G_r - G_i) (q_r.k_i) u_i
 *   S = exp(G_last) S0 + sum_i exp(G_last - G_i) k_i u_i^T
 * which equals the recurrence up to float rounding (tests/ref/t_qwen35_ref.sh,
 * tests/cli/t_batch.sh). Heads are independent: each thread takes whole heads
 * through the whole batch. The conv state and S live in the sequence memory
 * (engine/kv.h).
 * The head layout is the layer's (pk_ssm_shape): kh(j) = j mod k_heads for
 * tiled v heads (qwen35*), j / r for grouped ones (qwen3next, r = v heads
 * per k head); beta and alpha come from ssm_beta and ssm_alpha or from one
 * ssm_ba tensor interleaved per k head, into one buffer of 2 v_heads rows
 * per token that ba_index() reads.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/context.h"

/* The kind's buffers in the context's arena, for a batch of B tokens. */
typedef struct dn_ws {
    float *qkv;              /* (channels) projection, then conv output */
    float *z;                /* (v_heads * state) */
    float *ba;               /* (2 * v_heads) beta and alpha projections (ba_index) */
    float *o;                /* (v_heads * state) */
    float *scratch;          /* [v_heads][scratch_per]: the chunked delta rule
                                (only for batches of PK_DN_CHUNK_MIN or more) */
    size_t scratch_per;
} dn_ws;

static size_t dn_layout(const pk_context *c, const pk_ssm_shape *s, void *base, dn_ws *w) {
    pk_arena ar = {base, 0};
    const size_t B = (size_t)c->n_batch, VD = (size_t)s->v_heads * s->state;
    w->qkv = pk_arena_take(&ar, B * s->channels, sizeof(float));
    w->z = pk_arena_take(&ar, B * VD, sizeof(float));
    w->ba = pk_arena_take(&ar, B * 2 * s->v_heads, sizeof(float));
    w->o = pk_arena_take(&ar, B * VD, sizeof(float));
    w->scratch_per = (size_t)2 * PK_DN_CHUNK * PK_DN_CHUNK + (size_t)2 * PK_DN_CHUNK * s->state + 2 * PK_DN_CHUNK;
    w->scratch = c->n_batch >= PK_DN_CHUNK_MIN ? pk_arena_take(&ar, (size_t)s->v_heads * w->scratch_per, sizeof(float))
                                               : NULL;
    return ar.used;
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* x /= max(||x||, eps) */
static void l2_normalize(float *x, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float norm = sqrtf((float)ss);
    float inv = 1.0f / (norm > eps ? norm : eps);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* q/k head of v head j, and where j's beta sits in a token's 2 v_heads
   beta|alpha rows (its alpha: s->alpha_off further) */
static int k_head(const pk_ssm_shape *s, int j) { return j / s->vk_div % s->k_heads; }
static int ba_index(const pk_ssm_shape *s, int j) {
    const int r = s->v_heads / s->k_heads;
    return j / r * s->ba_group + j % r;
}

typedef struct dn_task {
    pk_context *c;
    const pk_ssm_shape *s;
    const dn_ws *w;
    int layer;
} dn_task;

typedef struct dn_conv_task {
    pk_context *c;
    const pk_ssm_shape *s;
    float *qkv, *st;            /* the batch's projections (conv output in place); the layer's conv state */
    const float *w;             /* ssm_conv1d: channel ch's K taps at w + ch K */
    int B, layer;
    float eps, qscale;
} dn_conv_task;

/* Channels g d .. g d + d - 1 (one q, k or v head) through the batch, token
 * by token: the causal depthwise conv (taps 0..K-2 on the state rows,
 * oldest first; tap K-1 on the current row), the state shifted, SiLU; a q
 * or k head then L2-normalised (q also scaled by 1/sqrt(d)); after a token
 * where a checkpoint is planned, these channels of the state copied into
 * it. The groups touch disjoint channels: any split gives the same bits.
 * The taps are copied tap-major first, so that each step is a loop over
 * the head's channels (vectorised; the same operations in the same order per
 * channel), and SiLU is the kernel table's silu_mul with u = 1 (the
 * reference's is g / (1 + exp(-g)) * u, this file's formula). */
static void conv_run(void *arg, int g) {
    const dn_conv_task *t = arg;
    pk_context *c = t->c;
    const pk_ssm_shape *sh = t->s;
    const int C = sh->channels, K = sh->conv, d = sh->state, c0 = g * d;
    const size_t conv_off = pk_ckpt_conv_offset(c, t->layer);
    float *wt = pk_thread_scratch(sizeof(float) * (size_t)(K + 2) * d);   /* K x d taps, the sums, ones */
    if (!wt) { c->scratch_oom = 1; return; }
    float *acc = wt + (size_t)K * d, *one = acc + d;
    for (int j = 0; j < K; j++)
        for (int i = 0; i < d; i++) wt[(size_t)j * d + i] = t->w[(size_t)(c0 + i) * K + j];
    for (int i = 0; i < d; i++) one[i] = 1.0f;
    float *st = t->st + c0;
    for (int b = 0, mk = 0; b < t->B; b++) {
        float *x = t->qkv + (size_t)b * C + c0;
        const float *wl = wt + (size_t)(K - 1) * d;
        for (int i = 0; i < d; i++) acc[i] = wl[i] * x[i];
        for (int j = 0; j < K - 1; j++) {
            const float *wj = wt + (size_t)j * d, *sj = st + (size_t)j * C;
            for (int i = 0; i < d; i++) acc[i] += wj[i] * sj[i];
        }
        for (int j = 0; j + 1 < K - 1; j++) memcpy(st + (size_t)j * C, st + (size_t)(j + 1) * C, (size_t)d * sizeof *st);
        if (K > 1) memcpy(st + (size_t)(K - 2) * C, x, (size_t)d * sizeof *x);
        memcpy(x, acc, (size_t)d * sizeof *x);
        pk_kern_act_mul(c->kern, 0, x, one, d);
        for (; mk < c->n_mark && c->mark_off[mk] == b + 1; mk++)   /* a checkpoint after this token */
            for (int j = 0; j < K - 1; j++)
                memcpy(c->mark_data[mk] + conv_off + (size_t)j * C + c0, st + (size_t)j * C,
                       (size_t)d * sizeof *st);
        if (g < 2 * sh->k_heads) {   /* a q head (g < k_heads) or a k head */
            l2_normalize(x, d, t->eps);
            if (g < sh->k_heads)
                for (int i = 0; i < d; i++) x[i] *= t->qscale;
        }
    }
}

/* Tokens b0..b0+n-1 of v head j in the chunked form (see the top comment);
 * leaves the outputs (before the gated norm) in ws->o and the state in S.
 * The products over the chunk run as F32 matrix products (pk_sgemm_fn):
 * K K^T, T (beta exp(G) K), T (beta V), W S0, Q S0, Q K^T, P U and K'^T U;
 * the triangular inverse is a loop here, row by row (each row of T a sum
 * of the rows above it, scaled: vectorisable, and each element's terms in
 * the order of the column-wise recurrence, q = m .. i-1). */
static void dn_chunk(const dn_task *t, const pk_layer *L, int j, int b0, int n, float *S) {
    pk_context *c = t->c;
    const pk_ssm_shape *sh = t->s;
    const dn_ws *ws = t->w;
    const pk_kernels *kn = c->kern;
    const int d = sh->state, hk = k_head(sh, j), C = sh->channels;
    const int HV = sh->v_heads, VD = HV * d, ib = ba_index(sh, j), ia = ib + sh->alpha_off;
    float *A = ws->scratch + (size_t)j * ws->scratch_per;   /* n x n */
    float *T = A + PK_DN_CHUNK * PK_DN_CHUNK;                       /* n x n */
    float *W = T + PK_DN_CHUNK * PK_DN_CHUNK;                       /* n x d */
    float *U = W + (size_t)PK_DN_CHUNK * d;                         /* n x d */
    float *G = U + (size_t)PK_DN_CHUNK * d, *bet = G + PK_DN_CHUNK;
    /* this thread's: K^T (d x n), scaled rows (n x d), n x n, and d x d (at least n: a row's decays) */
    const size_t ny = (size_t)d * d > (size_t)n ? (size_t)d * d : (size_t)n;
    float *KT = pk_thread_scratch(sizeof(float) * ((size_t)2 * d * n + (size_t)n * n + ny));
    if (!KT) { c->scratch_oom = 1; return; }
    float *X = KT + (size_t)d * n, *P = X + (size_t)n * d, *Y = P + (size_t)n * n;
    const float dt = ((const float *)L->ssm_dt.data)[j], a = ((const float *)L->ssm_a.data)[j];
    const float *Q0 = ws->qkv + (size_t)b0 * C + (size_t)hk * d;
    const float *K0 = ws->qkv + (size_t)b0 * C + (size_t)(sh->k_heads + hk) * d;
    const float *V0 = ws->qkv + (size_t)b0 * C + (size_t)2 * sh->k_heads * d + (size_t)j * d;
    float *O = ws->o + (size_t)b0 * VD + (size_t)j * d;
    for (int i = 0; i < n; i++) {
        const float *ba = ws->ba + (size_t)(b0 + i) * 2 * HV;
        G[i] = (i ? G[i - 1] : 0.0f) + softplusf(ba[ia] + dt) * a;
        bet[i] = sigmoidf(ba[ib]);
    }
    for (int i = 0; i < n; i++)
        for (int e = 0; e < d; e++) KT[(size_t)e * n + i] = K0[(size_t)i * C + e];
    pk_kern_sgemm(kn, n, n, d, K0, C, KT, n, P, n);               /* P = K K^T */
    for (int i = 0; i < n; i++) {      /* exp(G_i - G_m) as exp(-G_m - -G_i): the same difference */
        float *Ai = A + (size_t)i * n;
        for (int m = 0; m < i; m++) Ai[m] = -G[m];
        pk_kern_exp_sub(kn, Ai, i, -G[i]);
        for (int m = 0; m < i; m++) Ai[m] = bet[i] * Ai[m] * P[i * n + m];
    }
    for (int i = 0; i < n; i++) {       /* T = (I + A)^-1, unit lower triangular: */
        float *ti = T + (size_t)i * n;  /* T_im = -sum_{m<=q<i} A_iq T_qm, in order of q, by rows */
        memset(ti, 0, (size_t)n * sizeof *ti);
        for (int q = 0; q < i; q++) {
            const float aq = A[i * n + q], *tq = T + (size_t)q * n;
            for (int m = 0; m <= q; m++) ti[m] += aq * tq[m];
        }
        for (int m = 0; m < i; m++) ti[m] = -ti[m];
        ti[i] = 1.0f;
    }
    for (int i = 0; i < n; i++) {       /* X = beta exp(G) K */
        const float f = bet[i] * expf(G[i]);
        for (int e = 0; e < d; e++) X[(size_t)i * d + e] = f * K0[(size_t)i * C + e];
    }
    pk_kern_sgemm(kn, n, d, n, T, n, X, d, W, d);                /* W = T X */
    for (int i = 0; i < n; i++)         /* X = beta V */
        for (int e = 0; e < d; e++) X[(size_t)i * d + e] = bet[i] * V0[(size_t)i * C + e];
    pk_kern_sgemm(kn, n, d, n, T, n, X, d, U, d);                /* U = T X */
    pk_kern_sgemm(kn, n, d, d, W, d, S, d, X, d);                /* U -= W S0 */
    for (int i = 0; i < n * d; i++) U[i] -= X[i];
    pk_kern_sgemm(kn, n, d, d, Q0, C, S, d, O, VD);              /* O = Q S0 ... */
    pk_kern_sgemm(kn, n, n, d, Q0, C, KT, n, P, n);              /* P = Q K^T */
    for (int r = 0; r < n; r++) {       /* ... times exp(G_r); P masked and decayed */
        const float eg = expf(G[r]);
        for (int e = 0; e < d; e++) O[(size_t)r * VD + e] *= eg;
        for (int i = 0; i <= r; i++) Y[i] = -G[i];   /* Y: scratch until the state update */
        pk_kern_exp_sub(kn, Y, r + 1, -G[r]);
        for (int i = 0; i <= r; i++) P[r * n + i] *= Y[i];
        for (int i = r + 1; i < n; i++) P[r * n + i] = 0.0f;
    }
    pk_kern_sgemm(kn, n, d, n, P, n, U, d, X, d);                /* O += P U */
    for (int r = 0; r < n; r++)
        for (int e = 0; e < d; e++) O[(size_t)r * VD + e] += X[(size_t)r * d + e];
    /* state carried on: S = exp(G_last) S0 + K'^T U, K'_i = exp(G_last - G_i) k_i */
    for (int i = 0; i < n; i++) {
        const float f = expf(G[n - 1] - G[i]);
        for (int e = 0; e < d; e++) KT[(size_t)e * n + i] *= f;
    }
    pk_kern_sgemm(kn, d, d, n, KT, n, U, d, Y, d);
    const float eg = expf(G[n - 1]);
    for (int key = 0; key < d * d; key++) S[key] = S[key] * eg + Y[key];
}

/* o *= silu(z), the gated norm's gate, by the kernel table's silu_mul (z,
 * read once, receives the product: o's copy) */
static void gate(pk_context *c, float *o, float *z, int d) {
    pk_kern_act_mul(c->kern, 0, z, o, d);
    memcpy(o, z, (size_t)d * sizeof *o);
}

/* Tokens b0..b1-1 of v head j: decay, delta-rule update, read (token by
 * token, or chunked when there are enough of them); then the gated RMSNorm. */
static void dn_segment(const dn_task *t, const pk_layer *L, int j, int b0, int b1, float *S) {
    pk_context *c = t->c;
    const pk_ssm_shape *sh = t->s;
    const dn_ws *ws = t->w;
    const int d = sh->state, hk = k_head(sh, j), C = sh->channels;
    const int VD = sh->v_heads * d, HV = sh->v_heads, ib = ba_index(sh, j), ia = ib + sh->alpha_off;
    const float dt = ((const float *)L->ssm_dt.data)[j], a = ((const float *)L->ssm_a.data)[j];
    if (b1 - b0 >= PK_DN_CHUNK_MIN) {
        for (int c0 = b0; c0 < b1; c0 += PK_DN_CHUNK)
            dn_chunk(t, L, j, c0, b1 - c0 < PK_DN_CHUNK ? b1 - c0 : PK_DN_CHUNK, S);
        for (int b = b0; b < b1; b++) {
            float *o = ws->o + (size_t)b * VD + (size_t)j * d;
            pk_rmsnorm(o, o, L->ssm_norm.data, d, c->m->hp.rms_eps);
            gate(c, o, ws->z + (size_t)b * VD + (size_t)j * d, d);
        }
        return;
    }
    for (int b = b0; b < b1; b++) {
        const float *qkv = ws->qkv + (size_t)b * C;
        const float *q = qkv + (size_t)hk * d;
        const float *k = qkv + (size_t)(sh->k_heads + hk) * d;
        const float *v = qkv + (size_t)2 * sh->k_heads * d + (size_t)j * d;
        float *o = ws->o + (size_t)b * VD + (size_t)j * d;
        const float *ba = ws->ba + (size_t)b * 2 * HV;
        const float decay = expf(softplusf(ba[ia] + dt) * a);
        const float beta = sigmoidf(ba[ib]);
        pk_kern_delta_step(c->kern, S, d, q, k, v, decay, beta, o);
        pk_rmsnorm(o, o, L->ssm_norm.data, d, c->m->hp.rms_eps);
        gate(c, o, ws->z + (size_t)b * VD + (size_t)j * d, d);
    }
}

/* One v head through the batch, in segments cut at the batch's checkpoint
 * marks (engine/state.c), each as a batch of its own would run: after each,
 * the head's state goes into the mark's checkpoint. */
static void dn_head(void *arg, int j) {
    const dn_task *t = arg;
    pk_context *c = t->c;
    const pk_layer *L = &c->m->layers[t->layer];
    const size_t dd = (size_t)t->s->state * t->s->state;
    float *S = pk_kv_ssm(&c->kv, t->layer) + (size_t)j * dd;   /* [key i][value] */
    int b0 = 0;
    for (int k = 0; k < c->n_mark; k++) {
        dn_segment(t, L, j, b0, c->mark_off[k], S);
        memcpy(c->mark_data[k] + pk_ckpt_ssm_offset(c, t->layer) + (size_t)j * dd, S, dd * sizeof *S);
        b0 = c->mark_off[k];
    }
    dn_segment(t, L, j, b0, c->cur_batch, S);
}

static int dn_forward(pk_context *c, const pk_block *bk, const pk_layer *L, int il) {
    const pk_ssm_shape *sh = &bk->ssm;
    const int C = sh->channels, HV = sh->v_heads, d = sh->state, K = sh->conv;
    const int B = c->cur_batch, D = c->m->hp.n_embd, VD = HV * d;
    const float eps = c->m->hp.rms_eps;
    dn_ws wsb;
    const size_t used = dn_layout(c, sh, c->arena, &wsb);
    PK_ASSERT(used <= c->arena_bytes);   /* dn_scratch asked for it */
    (void)used;
    const dn_ws *ws = &wsb;
    const char *kind = bk->mixer->name;   /* the profile's parent phase */
    pk_prof_mark pm;
    pk_prof_begin(c, &pm);
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    /* beta|alpha rows: ssm_beta then ssm_alpha, or all of ssm_ba (dn_bind
       binds one or the other) */
    pk_mv proj[5] = {
        {.w = &L->attn_qkv, .row0 = 0, .nrows = C, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = ws->qkv,
         .y_stride = C},
        {.w = &L->attn_z, .row0 = 0, .nrows = VD, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = ws->z,
         .y_stride = VD},
    };
    const pk_tensor *baw[3] = {&L->ssm_beta, &L->ssm_alpha, &L->ssm_ba};
    const int baoff[3] = {0, HV, 0};
    int np = 2;
    for (int i = 0; i < 3; i++)
        if (baw[i]->data)
            proj[np++] = (pk_mv){.w = baw[i], .row0 = 0, .nrows = baw[i]->ne[1], .slot = PK_SLOT_X, .n_tok = B,
                                 .idx = NULL, .y = ws->ba + baoff[i], .y_stride = 2 * HV};
    pk_matvec(c, proj, np);
    pk_prof_end(c, "projections", kind, &pm);
    pk_prof_begin(c, &pm);

    /* causal depthwise conv and the q/k norms, in groups of d channels (a
       q, k or v head each: conv_run) on the threads */
    c->weight_bytes += (uint64_t)C * L->ssm_conv1d.row_bytes + L->ssm_dt.row_bytes +
                       L->ssm_a.row_bytes + L->ssm_norm.row_bytes;
    dn_conv_task ct = {.c = c, .s = sh, .qkv = ws->qkv, .st = pk_kv_conv(&c->kv, il), .w = L->ssm_conv1d.data,
                       .B = B, .layer = il, .eps = eps, .qscale = 1.0f / sqrtf((float)d)};
    c->scratch_oom = 0;
    if ((int64_t)B * C * K < (1 << 13))
        for (int g = 0; g < C / d; g++) conv_run(&ct, g);
    else
        pk_pool_run(c->pool, conv_run, &ct, C / d);
    pk_prof_end(c, "conv, q/k norms", kind, &pm);
    pk_prof_begin(c, &pm);
    uint64_t passes = 0;
    for (int k = 0, b0 = 0; k <= c->n_mark; k++) {   /* per segment (dn_head) */
        const int b1 = k < c->n_mark ? c->mark_off[k] : B, n = b1 - b0;
        passes += n >= PK_DN_CHUNK_MIN ? (uint64_t)(n + PK_DN_CHUNK - 1) / PK_DN_CHUNK : (uint64_t)n;
        b0 = b1;
    }
    c->state_bytes += 2 * sizeof(float) * (passes * (uint64_t)HV * (uint64_t)d * (uint64_t)d +
                                           (uint64_t)B * (uint64_t)(K > 1 ? K - 1 : 0) * (uint64_t)C);
    if (c->scratch_oom) return PK_ERR_NOMEM;
    dn_task t = {.c = c, .s = sh, .w = ws, .layer = il};
    if ((int64_t)B * HV * d * d < (1 << 14))
        for (int j = 0; j < HV; j++) dn_head(&t, j);
    else
        pk_pool_run(c->pool, dn_head, &t, HV);
    pk_prof_end(c, "recurrence", kind, &pm);

    pk_prof_begin(c, &pm);
    pk_act_set(c, PK_SLOT_ATT, ws->o, B, VD, 0);
    pk_mv out = {.w = &L->ssm_out, .row0 = 0, .nrows = D, .slot = PK_SLOT_ATT, .n_tok = B, .idx = NULL, .y = c->xb2,
                 .y_stride = D};
    pk_matvec(c, &out, 1);
    pk_prof_end(c, "projections", kind, &pm);
    return c->scratch_oom ? PK_ERR_NOMEM : PK_OK;
}

/* ---- the kind's other methods ----------------------------------------------------- */

static int dn_bind(pk_model *m, int il, pk_error *err) {
    const pk_ssm_shape *sh = &m->blocks[il].ssm;
    pk_layer *L = &m->layers[il];
    if (!pk_has_tensor(m, il, "attn_qkv.weight") && pk_has_tensor(m, il, "ssm_in.weight"))
        return pk_errorf(err, PK_ERR_UNSUPPORTED,
                         "%s: tensor 'blk.%d.ssm_in.weight' (the fused q|k|v|z projection of old GGUF files) is not "
                         "supported; a current conversion writes attn_qkv and attn_gate", m->path, il);
    const int64_t D = m->hp.n_embd, C = sh->channels, HV = sh->v_heads, VD = HV * sh->state;
    /* beta and alpha: one ssm_ba tensor, or ssm_beta and ssm_alpha */
    const pk_tensor_spec spec[] = {
        {.t = &L->attn_qkv, .suffix = "attn_qkv.weight", .required = 1, .n_dims = 2, .ne = {D, C}},
        {.t = &L->attn_z, .suffix = "attn_gate.weight", .required = 1, .n_dims = 2, .ne = {D, VD}},
        {.t = &L->ssm_conv1d, .suffix = "ssm_conv1d.weight", .required = 1, .n_dims = 2, .ne = {sh->conv, C},
         .role = PK_ROLE_F32},
        {.t = &L->ssm_dt, .suffix = "ssm_dt.bias", .required = 1, .n_dims = 1, .ne = {HV}, .role = PK_ROLE_F32},
        {.t = &L->ssm_a, .suffix = "ssm_a", .required = 1, .n_dims = 1, .ne = {HV}, .role = PK_ROLE_F32},
        {.t = &L->ssm_ba, .suffix = sh->ba ? "ssm_ba.weight" : NULL, .required = 1, .n_dims = 2, .ne = {D, 2 * HV}},
        {.t = &L->ssm_beta, .suffix = sh->ba ? NULL : "ssm_beta.weight", .required = 1, .n_dims = 2, .ne = {D, HV}},
        {.t = &L->ssm_alpha, .suffix = sh->ba ? NULL : "ssm_alpha.weight", .required = 1, .n_dims = 2, .ne = {D, HV}},
        {.t = &L->ssm_norm, .suffix = "ssm_norm.weight", .required = 1, .n_dims = 1, .ne = {sh->state},
         .role = PK_ROLE_F32},
        {.t = &L->ssm_out, .suffix = "ssm_out.weight", .required = 1, .n_dims = 2, .ne = {VD, D}},
    };
    return pk_bind_specs(m, il, spec, (int)(sizeof spec / sizeof spec[0]), err);
}

/* the last conv - 1 conv inputs, and a state x state matrix per v head */
static void dn_memory(const pk_model *m, const pk_block *b, pk_kv_need *out) {
    const pk_ssm_shape *sh = &b->ssm;
    *out = (pk_kv_need){.kind = PK_MEM_STATE, .conv_rows = sh->conv > 0 ? sh->conv - 1 : 0,
                        .conv_dim = sh->channels, .ssm_size = sh->v_heads * sh->state * sh->state};
}

static void dn_scratch(const pk_context *c, const pk_block *b, pk_scratch *s) {
    dn_ws ws;
    const int64_t B = c->n_batch;
    /* the projections: up to 4 jobs (qkv, z, beta, alpha) of B rows */
    pk_scratch_raise(s, (int64_t)dn_layout(c, &b->ssm, NULL, &ws), PK_SLOT_ATT,
                     B * b->ssm.v_heads * b->ssm.state, 5, 4 * B);
}

static int dn_describe(const pk_model *m, const pk_block *b, char *buf, size_t cap) {
    const pk_ssm_shape *sh = &b->ssm;
    return snprintf(buf, cap, "deltanet(%d k / %d v heads, head %d, conv %d)", sh->k_heads, sh->v_heads, sh->state,
                    sh->conv);
}

const pk_block_kind pk_mixer_deltanet = {.name = "deltanet", .bind = dn_bind, .memory = dn_memory,
                                         .scratch = dn_scratch, .forward = dn_forward, .describe = dn_describe};
