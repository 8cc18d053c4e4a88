/* info_fit.c - `pocket info --mem SIZE`'s advice: which builds of the model
 * (a pocket quantize preset, K of E experts kept by pocket prune, or both)
 * would be held in SIZE whole, with their file size, bytes read per token
 * and the quality measured for them on the bundled model.
 *
 * Sizes come from the library (pk_build_estimate: the quantizer's own
 * planner over this model's tensors, the engine's ledger and memory plan);
 * the presets from the quantizer's list (pk_quantize_preset_name); the
 * quality from tools/fit_quality.tsv, which the Makefile embeds as
 * pocket_fit_quality_tsv. Those figures were measured on the bundled
 * 16-expert model, not on the model described: the output says so. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "info_fit.h"

extern const char pocket_fit_quality_tsv[];   /* $(BUILD)/gen/fit_quality.c */

/* ---- the measured quality ------------------------------------------------------ */

typedef struct quality {
    char kind[8];          /* "quant" or "prune" */
    char name[32];         /* preset, or experts kept of 16 */
    int imatrix;
    double kld, ppl, base_ppl;
} quality;

enum { MAX_QUALITY = 64, BUNDLED_EXPERTS = 16 };

/* The embedded table's rows (comments skipped); dies on a malformed row,
 * which is a build error, not the user's. */
static int load_quality(quality *q) {
    int n = 0;
    for (const char *line = pocket_fit_quality_tsv; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        if (len && line[0] != '#' && len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = 0;
            if (n == MAX_QUALITY ||
                sscanf(buf, "%7s %31s %d %lf %lf %lf", q[n].kind, q[n].name, &q[n].imatrix, &q[n].kld, &q[n].ppl,
                       &q[n].base_ppl) != 6 || !(q[n].base_ppl > 0))
                die("info: the embedded quality table has a bad row: %s", buf);
            n++;
        }
        line += len + (end != NULL);
    }
    return n;
}

static const quality *find_quality(const quality *q, int n, const char *kind, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(q[i].kind, kind) && !strcasecmp(q[i].name, name)) return &q[i];
    return NULL;
}

/* ---- the builds ---------------------------------------------------------------- */

typedef struct fit_build {
    const char *preset;        /* NULL: the file's own types */
    int keep;                  /* experts kept per routed layer; 0: all */
    pk_build_size sz;
    int fits;
    int quality;               /* 0: not measured, 1: measured, 2: estimated from two measurements */
    double kld, ppl_ratio;
} fit_build;

/* Best first: measured / estimated quality (least KL divergence), then the
 * builds without a figure, biggest first; ties by size. */
static int cmp_build(const void *pa, const void *pb) {
    const fit_build *a = pa, *b = pb;
    if (a->fits != b->fits) return b->fits - a->fits;
    if (!a->quality != !b->quality) return a->quality ? -1 : 1;
    if (a->quality && a->kld != b->kld) return a->kld < b->kld ? -1 : 1;
    if (a->sz.file_bytes != b->sz.file_bytes) return a->sz.file_bytes > b->sz.file_bytes ? -1 : 1;
    return 0;
}

/* The pruning levels offered: these fractions of the experts, as a count per
 * layer (at least the top-k, below all of them). */
static const int keep_frac[][2] = {{3, 4}, {1, 2}, {3, 8}, {1, 4}};

static void fill_quality(fit_build *b, const quality *q, int nq, int n_expert) {
    const quality *qq = NULL, *qp = NULL;
    if (b->preset && !(qq = find_quality(q, nq, "quant", b->preset))) return;
    if (b->keep) {
        if (b->keep * BUNDLED_EXPERTS % n_expert) return;   /* no bundled-model count at this share */
        char k[16];
        snprintf(k, sizeof k, "%d", b->keep * BUNDLED_EXPERTS / n_expert);
        if (!(qp = find_quality(q, nq, "prune", k))) return;
    }
    b->kld = (qq ? qq->kld : 0) + (qp ? qp->kld : 0);
    b->ppl_ratio = (qq ? qq->ppl / qq->base_ppl : 1) * (qp ? qp->ppl / qp->base_ppl : 1);
    b->quality = qq && qp ? 2 : 1;
}

/* Every build: the file as it is, each preset, each pruning level, each of
 * those quantized; presets that do not make the file smaller are left out,
 * pruned too (F16 of an F16 file is the file).
 * Returns the count; *self: the file as it is. */
static int make_builds(const pk_model *m, uint64_t mem, fit_build **out, fit_build *self) {
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    quality q[MAX_QUALITY];
    const int nq = load_quality(q);
    const int np = pk_quantize_n_presets(), nk = (int)(sizeof keep_frac / sizeof keep_frac[0]);
    int keeps[8] = {0}, n_keep = 1;
    pk_error err = {0};
    for (int i = 0; mi.n_expert && pk_prune_check(m, &err) == PK_OK && i < nk; i++) {
        const int k = (mi.n_expert * keep_frac[i][0] + keep_frac[i][1] / 2) / keep_frac[i][1];
        if (k >= mi.n_expert || k < mi.n_expert_used || k == keeps[n_keep - 1]) continue;
        keeps[n_keep++] = k;
    }
    fit_build *b = calloc((size_t)(np + 1) * (size_t)n_keep, sizeof *b);
    int *keep = calloc((size_t)mi.n_layer, sizeof *keep);
    unsigned char *smaller = calloc((size_t)np, 1);   /* the preset makes the file smaller */
    if (!b || !keep || !smaller) die("out of memory");
    int n = 0;
    for (int ik = 0; ik < n_keep; ik++) {
        for (int il = 0; il < mi.n_layer; il++) keep[il] = keeps[ik];
        for (int ip = -1; ip < np; ip++) {
            if (ik && ip >= 0 && !smaller[ip]) continue;
            fit_build *x = &b[n];
            memset(x, 0, sizeof *x);   /* a build left out before may have used it */
            x->preset = ip < 0 ? NULL : pk_quantize_preset_name(ip);
            x->keep = keeps[ik];
            fill_quality(x, q, nq, mi.n_expert);
            const quality *qq = x->preset ? find_quality(q, nq, "quant", x->preset) : NULL;
            const pk_build_params bp = {.preset = x->preset, .imatrix = qq && qq->imatrix,
                                        .keep = x->keep ? keep : NULL};
            if (pk_build_estimate(m, &bp, &x->sz, &err)) {
                if (err.code == PK_ERR_NOMEM) die("%s", err.msg);
                continue;         /* a build this model cannot have (a rule, a layer's count) */
            }
            x->fits = mem && x->sz.need_bytes <= mem;
            if (!x->preset && !x->keep) {
                x->quality = 1;    /* itself */
                *self = *x;
            } else if (!x->keep && x->sz.file_bytes >= self->sz.file_bytes) {
                continue;          /* a preset no smaller than the file does not help (F16 of F16) */
            }
            if (!ik && ip >= 0) smaller[ip] = 1;
            n++;
        }
    }
    qsort(b, (size_t)n, sizeof *b, cmp_build);
    free(keep);
    free(smaller);
    *out = b;
    return n;
}

/* ---- output -------------------------------------------------------------------- */

static void gib(char *buf, size_t n, uint64_t v) {
    if (v >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", (double)v / 1073741824.0);
    else snprintf(buf, n, "%.2f MiB", (double)v / 1048576.0);
}

/* "FILE" without its .gguf */
static void stem(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    if (n > 5 && !strcasecmp(path + n - 5, ".gguf")) n -= 5;
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), path);
}

/* The commands that make build b of path, one per line into cmd[] (at most 3). */
static int build_commands(const char *path, const fit_build *b, char cmd[3][4096]) {
    char base[1024], src[1100];
    stem(path, base, sizeof base);
    int n = 0;
    snprintf(src, sizeof src, "%s", path);
    if (b->keep) {
        snprintf(src, sizeof src, "%s-k%d.gguf", base, b->keep);
        snprintf(cmd[n++], sizeof cmd[0], "pocket prune %s %s -f CALIB.txt --keep %d", path, src, b->keep);
    }
    if (b->preset) {
        char sb[1100], im[1200] = "";
        stem(src, sb, sizeof sb);
        if (b->sz.imatrix) {
            snprintf(im, sizeof im, " --imatrix %s.imatrix.gguf", sb);
            snprintf(cmd[n++], sizeof cmd[0], "pocket imatrix -m %s -f CALIB.txt -o %s.imatrix.gguf", src, sb);
        }
        snprintf(cmd[n++], sizeof cmd[0], "pocket quantize %s %s-%s.gguf %s%s", src, sb, b->preset, b->preset, im);
    }
    return n;
}

static void build_name(const fit_build *b, int n_expert, char *out, size_t cap) {
    if (!b->preset && !b->keep) snprintf(out, cap, "as it is");
    else if (!b->keep) snprintf(out, cap, "%s", b->preset);
    else snprintf(out, cap, "%s%skeep %d/%d", b->preset ? b->preset : "", b->preset ? " + " : "", b->keep, n_expert);
}

static const char *quality_note =
    "quality measured on the bundled 16-expert model, not on this one (KLD and PPL ratio against its "
    "F16 model; ~: a preset of a pruned file, the two measurements combined, not measured together)";

static void print_text(const pk_model *m, const char *path, uint64_t mem, int all, const fit_build *b, int n,
                       const fit_build *self) {
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    char a[32], c[32], d[32];
    gib(a, sizeof a, mem);
    gib(c, sizeof c, self->sz.need_bytes);
    printf("fit             %s in %s: held whole it needs %s (weights, context, 64 MiB margin)\n",
           self->fits ? "fits" : "does not fit", a, c);
    if (self->fits && !all) return;
    int n_fit = 0;
    for (int i = 0; i < n; i++) n_fit += b[i].fits && (b[i].preset || b[i].keep);
    if (!n_fit) {
        printf("builds          none fits in %s: not the smallest preset, not with a quarter of the experts\n", a);
        return;
    }
    printf("builds          %d that fit in %s, best first; the %s\n", n_fit, a, quality_note);
    const int show = all ? n_fit : n_fit < 10 ? n_fit : 10;
    for (int i = 0, k = 0; i < n && k < show; i++) {
        if (!b[i].fits || (!b[i].preset && !b[i].keep)) continue;
        k++;
        char name[64], q[64], cmd[3][4096];
        build_name(&b[i], mi.n_expert, name, sizeof name);
        gib(a, sizeof a, b[i].sz.file_bytes);
        gib(c, sizeof c, b[i].sz.bytes_per_token);
        gib(d, sizeof d, b[i].sz.need_bytes);
        if (!b[i].quality) snprintf(q, sizeof q, "quality not measured");
        else snprintf(q, sizeof q, "KLD %s%.4f, PPL x%s%.3f", b[i].quality == 2 ? "~" : "", b[i].kld,
                      b[i].quality == 2 ? "~" : "", b[i].ppl_ratio);
        printf("  %-22s file %s, %s/token, needs %s; %s\n", name, a, c, d, q);
        const int nc = build_commands(path, &b[i], cmd);
        for (int j = 0; j < nc; j++) printf("      %s\n", cmd[j]);
    }
    if (show < n_fit) printf("  ... and %d more (--fit lists them all, --json too)\n", n_fit - show);
    printf("                CALIB.txt: calibration text (for pocket prune's saliency and pocket imatrix)\n");
    for (int i = 0; i < pk_model_n_tensors(m); i++) {
        const char *name, *type;
        int64_t ne[4];
        uint64_t nb;
        pk_model_tensor(m, i, &name, &type, ne, &nb);
        if (ne[1] > 1 && strcasecmp(type, "F32") && strcasecmp(type, "F16") && strcasecmp(type, "BF16")) {
            printf("                note: this file is already quantized (%s %s): the figures are for builds "
                   "made from an F16 file; made from this one they lose more\n", name, type);
            break;
        }
    }
}

static json_t *size_json(const pk_build_size *s) {
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "file_bytes", (json_int_t)s->file_bytes,
                     "bytes_per_token", (json_int_t)s->bytes_per_token, "resident_bytes",
                     (json_int_t)s->resident_bytes, "expert_bytes", (json_int_t)s->expert_bytes, "context_bytes",
                     (json_int_t)s->context_bytes, "need_bytes", (json_int_t)s->need_bytes);
}

static void print_json(const pk_model *m, const char *path, uint64_t mem, const fit_build *b, int n,
                       const fit_build *self, const char *plan_error) {
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    json_t *o = json_object(), *arr = json_array();
    json_t *me = size_json(&self->sz);
    json_object_set_new(me, "fits", json_boolean(self->fits));
    if (plan_error) json_object_set_new(me, "plan_error", json_string(plan_error));
    /* what the loaded file's own plan and ledger say (pk_model_get_plan, pk_model_info) */
    pk_model_plan pl;
    pk_model_get_plan(m, &pl);
    json_object_set_new(me, "loaded", json_pack("{s:I, s:I, s:I, s:I, s:i}", "bytes_per_token",
                                                (json_int_t)mi.bytes_per_token, "resident_bytes",
                                                (json_int_t)pl.resident_bytes, "expert_bytes",
                                                (json_int_t)pl.expert_bytes, "context_bytes",
                                                (json_int_t)pl.context_bytes, "n_ctx", pl.n_ctx));
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "mem", json_integer((json_int_t)mem));
    json_object_set_new(o, "model", me);
    json_object_set_new(o, "n_expert", json_integer(mi.n_expert));
    json_object_set_new(o, "quality_note", json_string(quality_note));
    for (int i = 0; i < n; i++) {
        if (!b[i].preset && !b[i].keep) continue;
        json_t *x = size_json(&b[i].sz);
        char cmd[3][4096];
        json_t *cmds = json_array();
        const int nc = build_commands(path, &b[i], cmd);
        for (int j = 0; j < nc; j++) json_array_append_new(cmds, json_string(cmd[j]));
        json_object_set_new(x, "preset", b[i].preset ? json_string(b[i].preset) : json_null());
        json_object_set_new(x, "keep", b[i].keep ? json_integer(b[i].keep) : json_null());
        json_object_set_new(x, "imatrix", json_boolean(b[i].sz.imatrix));
        json_object_set_new(x, "fits", json_boolean(b[i].fits));
        json_object_set_new(x, "quality", json_string(b[i].quality == 1   ? "measured"
                                                      : b[i].quality == 2 ? "estimated"
                                                                          : "not measured"));
        json_object_set_new(x, "kld", b[i].quality ? json_real(b[i].kld) : json_null());
        json_object_set_new(x, "ppl_ratio", b[i].quality ? json_real(b[i].ppl_ratio) : json_null());
        json_object_set_new(x, "commands", cmds);
        json_array_append_new(arr, x);
    }
    json_object_set_new(o, "builds", arr);
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!s) die("out of memory");
    puts(s);
    free(s);
    json_decref(o);
}

void info_fit(const pk_model *m, const char *path, uint64_t mem, int all, int json, const char *plan_error) {
    fit_build *b, self;
    memset(&self, 0, sizeof self);
    const int n = make_builds(m, mem, &b, &self);
    if (json) print_json(m, path, mem, b, n, &self, plan_error);
    else print_text(m, path, mem, all, b, n, &self);
    free(b);
}
