/* text/tokenizer.c - text <-> token ids from a GGUF vocabulary (tokenizer.ggml.*),
 * following llama.cpp's behaviour so that its tokenizer test vectors pass.
 *
 * Four models:
 *   - "gpt2":  byte-level BPE. Text is split into words by the pre-tokenizer
 *              regexes named by tokenizer.ggml.pre (PCRE2, UTF + UCP), each
 *              word's bytes are mapped to GPT-2's printable code points and
 *              merged by rank (tokenizer.ggml.merges) with a priority queue.
 *   - "gemma4": the same BPE over SentencePiece-style text (pre-tokenizer
 *              "gemma4"): invalid UTF-8 becomes U+FFFD and spaces U+2581, the
 *              text is split only at newlines, a run of newlines that is a
 *              token is taken whole, the other words merge from their raw
 *              UTF-8 characters (no GPT-2 byte map) and pieces the vocabulary
 *              lacks fall back to <0xXX> byte tokens. BOS is always added.
 *   - "llama": SentencePiece BPE. Spaces become U+2581 (with a leading one
 *              when add_space_prefix), pairs merge by score, unknown pieces
 *              fall back to <0xXX> byte tokens.
 *   - "bert":  WordPiece. BERT normalization (lowercase, strip accents,
 *              split punctuation / CJK) then greedy longest match.
 * Before any of them, special tokens are cut out of the text: user-defined
 * tokens always, control/unknown tokens only when parse_special.
 *
 * The vocabulary is loaded by text/vocab.c. After pk_tokenizer_load everything
 * is read-only; each call allocates its own scratch space, so concurrent calls
 * on one tokenizer are safe.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/unicode.h"

static void ivec_push(ivec *a, int32_t x) {
    if (a->oom) return;
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        int32_t *nv = realloc(a->v, nc * sizeof *nv);
        if (!nv) { a->oom = 1; return; }
        a->v = nv; a->cap = nc;
    }
    a->v[a->n++] = x;
}

/* ===================================================================== */
/* Per-call scratch space                                                 */
/* ===================================================================== */

typedef struct span { size_t off, len; } span;
typedef struct sym { size_t off; uint32_t n; int prev, next; } sym;
typedef struct bigram { double key; int left, right; uint32_t size; } bigram;
typedef struct frag { int32_t id; size_t off, len; } frag;   /* id < 0: raw text */

typedef struct scratch {
    span *wa, *wb; size_t wacap, wbcap;   /* word spans (ping-pong) */
    char *buf; size_t bufcap;             /* encoded / escaped text */
    char *nbuf; size_t nbufcap;           /* a normalised fragment (spm_text BPE) */
    sym *sy; size_t sycap;
    bigram *heap; size_t hn, hcap;
    pcre2_match_data *md;
    int oom;
} scratch;

static void scratch_free(scratch *s) {
    free(s->wa); free(s->wb); free(s->buf); free(s->nbuf); free(s->sy); free(s->heap);
    if (s->md) pcre2_match_data_free(s->md);
}

static int push_span(scratch *s, span **v, size_t *cap, size_t *n, size_t off, size_t len) {
    if (!pk_tok_grow((void **)v, cap, *n + 1, sizeof **v)) { s->oom = 1; return 0; }
    (*v)[(*n)++] = (span){ off, len };
    return 1;
}

/* ---- binary heap of bigrams: smallest key first, then leftmost ---- */

static int bigram_less(const bigram *a, const bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(scratch *s, bigram g) {
    if (!pk_tok_grow((void **)&s->heap, &s->hcap, s->hn + 1, sizeof *s->heap)) { s->oom = 1; return; }
    size_t i = s->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_less(&g, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = g;
}

static bigram heap_pop(scratch *s) {
    bigram top = s->heap[0], last = s->heap[--s->hn];
    size_t i = 0, n = s->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!bigram_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* Remove symbol r (the right neighbour of l) by merging it into l. */
static void sym_merge(sym *sy, int l, int r) {
    sy[l].n += sy[r].n;
    sy[r].n = 0;
    sy[l].next = sy[r].next;
    if (sy[r].next >= 0) sy[sy[r].next].prev = l;
}

/* ===================================================================== */
/* Special tokens: cut the text into raw fragments and special tokens     */
/* ===================================================================== */

static int push_frag(frag **v, size_t *cap, size_t *n, frag f) {
    if (!pk_tok_grow((void **)v, cap, *n + 1, sizeof **v)) return 0;
    (*v)[(*n)++] = f;
    return 1;
}

/* Split one raw fragment around every occurrence of special token id. */
static int split_fragment(const pk_tokenizer *t, const char *text, frag fr, int32_t id,
                          frag **v, size_t *cap, size_t *n) {
    const char *tok = tok_text(t, id);
    size_t tl = t->tok_len[id], base = fr.off, blen = fr.len;
    for (;;) {
        const char *m = memmem(text + base, blen, tok, tl);
        if (!m) return push_frag(v, cap, n, (frag){ -1, base, blen });
        size_t mpos = (size_t)(m - text), left = mpos - base;
        if (t->attr[id] & ATTR_LSTRIP)
            while (left > 0 && isspace((unsigned char)text[base + left - 1])) left--;
        if (left > 0 && !push_frag(v, cap, n, (frag){ -1, base, left })) return 0;
        if (!push_frag(v, cap, n, (frag){ id, 0, 0 })) return 0;
        size_t r = mpos + tl, rlen = base + blen - r;
        if (t->attr[id] & ATTR_RSTRIP)
            while (rlen > 0 && isspace((unsigned char)text[r])) { r++; rlen--; }
        if (rlen == 0) return 1;
        base = r;
        blen = rlen;
    }
}

/* Fragments of text: special tokens (longest first) and the raw text
 * between them. Returns 0 on allocation failure. */
static int partition(const pk_tokenizer *t, const char *text, size_t len, int parse_special,
                     frag **out, size_t *n_out) {
    frag *a = NULL, *b = NULL;
    size_t na = 0, nb = 0, acap = 0, bcap = 0;
    if (len > 0 && !push_frag(&a, &acap, &na, (frag){ -1, 0, len })) goto oom;
    for (int k = 0; k < t->n_special && na > 0; k++) {
        int32_t id = t->special[k];
        if (!parse_special && (t->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;
        const char *tok = tok_text(t, id);
        size_t tl = t->tok_len[id];
        int hit = 0;
        for (size_t i = 0; i < na && !hit; i++)
            hit = a[i].id < 0 && memmem(text + a[i].off, a[i].len, tok, tl) != NULL;
        if (!hit) continue;
        nb = 0;
        for (size_t i = 0; i < na; i++) {
            int ok = a[i].id >= 0 ? push_frag(&b, &bcap, &nb, a[i])
                                  : split_fragment(t, text, a[i], id, &b, &bcap, &nb);
            if (!ok) goto oom;
        }
        frag *tf = a; a = b; b = tf;
        size_t tc = acap; acap = bcap; bcap = tc;
        na = nb;
    }
    free(b);
    *out = a;
    *n_out = na;
    return 1;
oom:
    free(a);
    free(b);
    return 0;
}

/* ===================================================================== */
/* Byte-level BPE                                                         */
/* ===================================================================== */

/* Split text[0..len) into words with the pre-tokenizer regexes. The spans
 * end up in s->wa[0..*n). */
static void pre_split(const pk_tokenizer *t, scratch *s, const char *text, size_t len, size_t *n) {
    size_t na = 0;
    if (!push_span(s, &s->wa, &s->wacap, &na, 0, len)) return;
    for (int r = 0; r < t->n_re; r++) {
        size_t nb = 0;
        for (size_t i = 0; i < na; i++) {
            const span w = s->wa[i];
            PCRE2_SPTR subj = (PCRE2_SPTR)(text + w.off);
            size_t pos = 0, prev = 0;
            while (pos <= w.len) {
                int rc = pcre2_match(t->re[r], subj, w.len, pos, 0, s->md, NULL);
                if (rc < 0) break;                      /* no match (or a limit) */
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
                size_t ms = ov[0], me = ov[1];
                if (me <= ms) {                          /* empty match: step over */
                    if (ms >= w.len) break;
                    pos = ms + (size_t)pk_utf8_len((uint8_t)text[w.off + ms]);
                    continue;
                }
                if (ms > prev) push_span(s, &s->wb, &s->wbcap, &nb, w.off + prev, ms - prev);
                push_span(s, &s->wb, &s->wbcap, &nb, w.off + ms, me - ms);
                prev = pos = me;
            }
            if (prev < w.len) push_span(s, &s->wb, &s->wbcap, &nb, w.off + prev, w.len - prev);
            if (s->oom) return;
        }
        span *tmp = s->wa; s->wa = s->wb; s->wb = tmp;
        size_t tc = s->wacap; s->wacap = s->wbcap; s->wbcap = tc;
        na = nb;
    }
    *n = na;
}

static void bpe_add_bigram(const pk_tokenizer *t, scratch *s, int l, int r) {
    if (l < 0 || r < 0) return;
    const sym *a = &s->sy[l], *b = &s->sy[r];
    int rank = pk_tok_merge_find(t, s->buf + a->off, a->n, s->buf + b->off, b->n);
    if (rank >= 0) heap_push(s, (bigram){ .key = (double)rank, .left = l, .right = r, .size = a->n + b->n });
}

/* The token for an encoded piece, if it decodes to the piece's bytes: a
 * control or user-defined token with the same text would not. Over
 * SentencePiece text, any token of that text (llama.cpp's lookup there). */
static int32_t bpe_token(const pk_tokenizer *t, const char *p, size_t n) {
    int32_t id = pk_tok_find(t, p, n);
    return id >= 0 && (t->spm_text || (t->attr[id] & ATTR_NORMAL)) ? id : -1;
}

/* Emit the token of an encoded piece; unknown pieces fall back to their
 * single encoded characters, and bytes the vocabulary cannot express at all
 * (some lack 0xC0, 0xF5..0xFF, ...) to the tokens of U+FFFD, as llama.cpp
 * gives for invalid UTF-8. */
static void bpe_emit(const pk_tokenizer *t, const char *p, size_t n, ivec *out) {
    int32_t id = bpe_token(t, p, n);
    if (id >= 0) { ivec_push(out, id); return; }
    if (t->spm_text) {                 /* <0xXX> per byte; bytes without one are dropped */
        for (size_t i = 0; i < n; i++)
            if (t->byte_tok[(uint8_t)p[i]] >= 0) ivec_push(out, t->byte_tok[(uint8_t)p[i]]);
        return;
    }
    for (size_t i = 0; i < n;) {
        size_t cl = (size_t)pk_utf8_len((uint8_t)p[i]);
        if (cl > n - i) cl = n - i;
        id = bpe_token(t, p + i, cl);
        if (id >= 0) ivec_push(out, id);
        else
            for (int k = 0; k < t->n_fffd; k++) ivec_push(out, t->fffd[k]);
        i += cl;
    }
}

/* Only newlines in w[0..n)? */
static int all_newlines(const char *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (w[i] != '\n') return 0;
    return n > 0;
}

/* Tokenize one pre-tokenized word w[0..n): raw bytes, each mapped to its
 * GPT-2 code point, or (spm_text) normalised UTF-8 whose characters are the
 * starting symbols. */
static void bpe_word(const pk_tokenizer *t, scratch *s, const char *w, size_t n, ivec *out) {
    if (!pk_tok_grow((void **)&s->buf, &s->bufcap, 2 * n, 1) ||
        !pk_tok_grow((void **)&s->sy, &s->sycap, n, sizeof *s->sy)) { s->oom = 1; return; }
    size_t el = 0;
    int ns = 0;
    if (t->spm_text) {
        memcpy(s->buf, w, n);
        el = n;
        for (size_t off = 0; off < n; ns++) {
            size_t cl = (size_t)pk_utf8_len((uint8_t)w[off]);
            if (cl > n - off) cl = n - off;
            s->sy[ns] = (sym){ .off = off, .n = (uint32_t)cl, .prev = ns - 1, .next = off + cl < n ? ns + 1 : -1 };
            off += cl;
        }
    } else {
        for (size_t i = 0; i < n; i++, ns++) {
            uint8_t b = (uint8_t)w[i];
            memcpy(s->buf + el, t->bchar[b].s, t->bchar[b].n);
            s->sy[i] = (sym){ .off = el, .n = t->bchar[b].n, .prev = (int)i - 1, .next = i + 1 < n ? (int)i + 1 : -1 };
            el += t->bchar[b].n;
        }
    }
    if (t->ignore_merges || (t->spm_text && all_newlines(w, n))) {   /* the whole word, if a token */
        int32_t id = bpe_token(t, s->buf, el);
        if (id >= 0) { ivec_push(out, id); return; }
    }
    s->hn = 0;
    for (int i = 1; i < ns; i++) bpe_add_bigram(t, s, i - 1, i);
    while (s->hn > 0 && !s->oom) {
        bigram g = heap_pop(s);
        sym *l = &s->sy[g.left], *r = &s->sy[g.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size) continue;   /* stale */
        sym_merge(s->sy, g.left, g.right);
        bpe_add_bigram(t, s, s->sy[g.left].prev, g.left);
        bpe_add_bigram(t, s, g.left, s->sy[g.left].next);
    }
    for (int i = 0; i >= 0; i = s->sy[i].next)
        bpe_emit(t, s->buf + s->sy[i].off, s->sy[i].n, out);
}

/* One code point from s[0..n) as llama.cpp's decoder reads it (before its
 * tokenizers): the lead byte says the length, continuation bytes are
 * checked, overlong forms and surrogates are accepted; anything else is
 * U+FFFD for one byte (as is a value past U+10FFFF, where llama.cpp throws).
 * Returns the bytes consumed. */
static size_t utf8_decode_lenient(const uint8_t *s, size_t n, uint32_t *cp) {
    static const uint8_t lead_mask[5] = { 0, 0x7F, 0x1F, 0x0F, 0x07 };
    size_t len = s[0] < 0x80 ? 1 : s[0] < 0xC0 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : s[0] < 0xF8 ? 4 : 0;
    uint32_t v = len ? s[0] & lead_mask[len] : 0;
    for (size_t k = 1; k < len; k++) {
        if (k >= n || (s[k] & 0xC0) != 0x80) { len = 0; break; }
        v = v << 6 | (s[k] & 0x3F);
    }
    if (!len || v > 0x10FFFF) { *cp = 0xFFFD; return 1; }
    *cp = v;
    return len;
}

/* cp (<= U+10FFFF, surrogates included) as UTF-8; returns its length. */
static size_t utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* SentencePiece-style text for spm_text BPE, into s->nbuf: the code points
 * as llama.cpp decodes them, written back as UTF-8 (an invalid byte becomes
 * U+FFFD, an overlong form its shortest one), each space as U+2581. Returns
 * the length (at most 3 bytes per input byte). */
static size_t spm_normalise(scratch *s, const char *text, size_t len) {
    if (len > SIZE_MAX / 3 || !pk_tok_grow((void **)&s->nbuf, &s->nbufcap, 3 * len + 1, 1)) { s->oom = 1; return 0; }
    size_t el = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += utf8_decode_lenient((const uint8_t *)text + i, len - i, &cp);
        el += utf8_put(cp == ' ' ? 0x2581 : cp, s->nbuf + el);
    }
    return el;
}

static void bpe_fragment(const pk_tokenizer *t, scratch *s, const char *text, size_t len, ivec *out) {
    size_t nw = 0;
    if (t->spm_text) {
        len = spm_normalise(s, text, len);
        if (s->oom) return;
        text = s->nbuf;
    }
    pre_split(t, s, text, len, &nw);
    for (size_t i = 0; i < nw && !s->oom; i++) {
        span w = s->wa[i];       /* bpe_word does not touch the span arrays */
        bpe_word(t, s, text + w.off, w.len, out);
    }
}

/* What U+FFFD tokenizes to, for bytes the vocabulary cannot express. */
int pk_tok_bpe_replacement_tokens(pk_tokenizer *t, const char *file, pk_error *err) {
    scratch s = { 0 };
    ivec v = { 0 };
    bpe_word(t, &s, "\xef\xbf\xbd", 3, &v);
    int oom = s.oom || v.oom;
    for (size_t i = 0; i < v.n && i < 3; i++) t->fffd[i] = v.v[i];
    t->n_fffd = v.n < 3 ? (int)v.n : 3;
    scratch_free(&s);
    free(v.v);
    return oom ? pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", file) : PK_OK;
}

/* ===================================================================== */
/* SentencePiece BPE                                                      */
/* ===================================================================== */

static void spm_add_bigram(const pk_tokenizer *t, scratch *s, int l, int r) {
    if (l < 0 || r < 0) return;
    uint32_t n = s->sy[l].n + s->sy[r].n;
    int32_t id = pk_tok_find(t, s->buf + s->sy[l].off, n);   /* l and r are adjacent */
    if (id >= 0) heap_push(s, (bigram){ .key = -(double)t->score[id], .left = l, .right = r, .size = n });
}

static void spm_fragment(const pk_tokenizer *t, scratch *s, const char *text, size_t len,
                         int space_prefix, ivec *out) {
    /* escape: ' ' -> U+2581 (3 bytes), with an optional leading one */
    size_t cap = 3 * (len + 1);
    /* one symbol per UTF-8 character of the escaped text, which can be more
       than len + 1: a stray lead byte before a space swallows part of the
       U+2581, and its remaining bytes become symbols of their own */
    if (!pk_tok_grow((void **)&s->buf, &s->bufcap, cap, 1) ||
        !pk_tok_grow((void **)&s->sy, &s->sycap, cap, sizeof *s->sy)) { s->oom = 1; return; }
    size_t el = 0;
    if (space_prefix) { memcpy(s->buf, "\xe2\x96\x81", 3); el = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(s->buf + el, "\xe2\x96\x81", 3); el += 3; }
        else s->buf[el++] = text[i];
    }
    int ns = 0;
    for (size_t off = 0; off < el; ns++) {
        size_t cl = (size_t)pk_utf8_len((uint8_t)s->buf[off]);
        if (cl > el - off) cl = el - off;
        s->sy[ns] = (sym){ .off = off, .n = (uint32_t)cl, .prev = ns - 1, .next = off + cl < el ? ns + 1 : -1 };
        off += cl;
    }
    if (ns == 0) return;
    s->hn = 0;
    for (int i = 1; i < ns; i++) spm_add_bigram(t, s, i - 1, i);
    while (s->hn > 0 && !s->oom) {
        bigram g = heap_pop(s);
        sym *l = &s->sy[g.left], *r = &s->sy[g.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != g.size) continue;
        sym_merge(s->sy, g.left, g.right);
        spm_add_bigram(t, s, s->sy[g.left].prev, g.left);
        spm_add_bigram(t, s, g.left, s->sy[g.left].next);
    }
    for (int i = 0; i >= 0; i = s->sy[i].next) {
        const char *p = s->buf + s->sy[i].off;
        int32_t id = pk_tok_find(t, p, s->sy[i].n);
        if (id >= 0) { ivec_push(out, id); continue; }
        for (uint32_t j = 0; j < s->sy[i].n; j++) {     /* byte fallback */
            int32_t bt = t->byte_tok[(uint8_t)p[j]];
            if (bt < 0) bt = t->unk;
            if (bt >= 0) ivec_push(out, bt);
        }
    }
}

/* ===================================================================== */
/* WordPiece                                                              */
/* ===================================================================== */

static int is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* BERT normalization into s->buf; words as spans in s->wa[0..*n). Each word
 * is stored after a U+2581 (the vocabulary marks word starts with it). */
static void wpm_words(const pk_tokenizer *t, scratch *s, const char *text, size_t len, size_t *n) {
    size_t nw = 0, el = 0, start = 0;
    int in_word = 0;
    if (!pk_tok_grow((void **)&s->buf, &s->bufcap, 7 * len + 8, 1)) { s->oom = 1; return; }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += (size_t)pk_utf8_decode((const uint8_t *)text + i, len - i, &cp);
        if (t->strip_accents) cp = pk_unicode_nfd_base(cp);
        int cls = pk_unicode_class(cp);
        int single = cls == PK_UC_PUNCT || (cp < 0x7F && cls == PK_UC_SYMBOL) || is_cjk(cp);
        if (pk_unicode_is_space(cp) || single) {            /* end the current word */
            if (in_word && el > start + 3) push_span(s, &s->wa, &s->wacap, &nw, start, el - start);
            in_word = 0;
            if (!single) continue;
        }
        if (!single && (cp == 0 || cp == 0xFFFD || cls == PK_UC_CONTROL ||
                        (t->strip_accents && cls == PK_UC_MARK)))
            continue;
        if (!in_word) {
            start = el;
            memcpy(s->buf + el, "\xe2\x96\x81", 3);
            el += 3;
            in_word = 1;
        }
        el += (size_t)pk_utf8_encode(t->lowercase ? pk_unicode_tolower(cp) : cp, s->buf + el);
        if (single) {
            push_span(s, &s->wa, &s->wacap, &nw, start, el - start);
            in_word = 0;
        }
    }
    if (in_word && el > start + 3) push_span(s, &s->wa, &s->wacap, &nw, start, el - start);
    *n = nw;
}

static void wpm_fragment(const pk_tokenizer *t, scratch *s, const char *text, size_t len, ivec *out) {
    size_t nw = 0;
    wpm_words(t, s, text, len, &nw);
    for (size_t k = 0; k < nw && !s->oom; k++) {
        const char *w = s->buf + s->wa[k].off;
        size_t n = s->wa[k].len, first = out->n;
        for (size_t i = 0; i < n;) {
            size_t j = i + (size_t)t->max_token_len;
            if (j > n) j = n;
            int32_t id = -1;
            for (; j > i; j--)
                if ((id = pk_tok_find(t, w + i, j - i)) >= 0) break;
            if (id < 0) { out->n = first; break; }    /* the whole word is unknown */
            ivec_push(out, id);
            i = j;
        }
        if (out->n == first && t->unk >= 0) ivec_push(out, t->unk);
    }
}

/* ===================================================================== */
/* Tokenize                                                               */
/* ===================================================================== */

/* Tokenize every fragment with the vocabulary's algorithm. */
static void tokenize_fragments(const pk_tokenizer *t, scratch *s, const char *text,
                               const frag *fr, size_t nf, ivec *out) {
    int prev_special = 1;      /* SPM: a space prefix at the start and after specials */
    for (size_t i = 0; i < nf && !s->oom && !out->oom; i++) {
        if (fr[i].id >= 0) {
            ivec_push(out, fr[i].id);
            prev_special = 1;
            continue;
        }
        const char *p = text + fr[i].off;
        switch (t->type) {
        case VOCAB_BPE: bpe_fragment(t, s, p, fr[i].len, out); break;
        case VOCAB_SPM: spm_fragment(t, s, p, fr[i].len, t->add_space_prefix && prev_special, out); break;
        case VOCAB_WPM: wpm_fragment(t, s, p, fr[i].len, out); break;
        }
        prev_special = 0;
    }
}

int pk_tokenize(const pk_tokenizer *t, const char *text, size_t len,
                int32_t *out, int max, int add_special, int parse_special) {
    if (!t || (!text && len > 0) || max < 0 || (!out && max > 0)) return -PK_ERR_ARG;
    if (len > (size_t)INT32_MAX) return -PK_ERR_ARG;
    ivec v = { 0 };
    scratch s = { 0 };
    frag *fr = NULL;
    size_t nf = 0;
    int rc = PK_OK;
    if (t->type == VOCAB_BPE && !(s.md = pcre2_match_data_create(1, NULL))) { rc = PK_ERR_NOMEM; goto done; }
    if (!partition(t, text ? text : "", len, parse_special, &fr, &nf)) { rc = PK_ERR_NOMEM; goto done; }

    int bos = add_special && t->add_bos && t->bos >= 0;
    int eos = add_special && t->add_eos && t->eos >= 0;
    if (t->type == VOCAB_WPM) {        /* [CLS] ... [SEP] */
        bos = add_special && t->bos >= 0;
        eos = 0;
    }
    if (bos) ivec_push(&v, t->bos);
    tokenize_fragments(t, &s, text, fr, nf, &v);
    if (eos) ivec_push(&v, t->eos);
    if (t->type == VOCAB_WPM && add_special && t->add_sep && t->sep >= 0) ivec_push(&v, t->sep);
    if (s.oom || v.oom) { rc = PK_ERR_NOMEM; goto done; }
    if (v.n > (size_t)INT32_MAX) { rc = PK_ERR_ARG; goto done; }
    size_t ncopy = v.n < (size_t)max ? v.n : (size_t)max;
    if (ncopy) memcpy(out, v.v, ncopy * sizeof *out);
done:
    scratch_free(&s);
    free(fr);
    free(v.v);
    return rc ? -rc : (int)v.n;
}

/* ===================================================================== */
/* Detokenize and accessors                                               */
/* ===================================================================== */

/* Copy n bytes to buf (up to buflen); returns n. */
static int put(char *buf, int buflen, int at, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (at + (int)i < buflen) buf[at + (int)i] = p[i];
    return at + (int)n;
}

/* The byte of a "<0xXX>" token, or -1. */
static int hex_byte(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

int pk_token_to_piece(const pk_tokenizer *t, int32_t id, char *buf, int buflen,
                      int render_special) {
    if (!t || id < 0 || id >= t->n_vocab || buflen < 0 || (!buf && buflen > 0)) return -PK_ERR_ARG;
    uint16_t a = t->attr[id];
    const char *s = tok_text(t, id);
    size_t n = t->tok_len[id];
    if (a & (ATTR_CONTROL | ATTR_UNKNOWN))
        return render_special || (a & ATTR_SHOWN) ? put(buf, buflen, 0, s, n) : 0;
    if (a & ATTR_USER) return put(buf, buflen, 0, s, n);
    if (a & ATTR_BYTE) {
        int b = hex_byte(s, n);
        char c = (char)b;
        return b < 0 ? 0 : put(buf, buflen, 0, &c, 1);
    }
    if (!(a & ATTR_NORMAL)) return 0;            /* unused / undefined */
    int at = 0;
    if (t->type == VOCAB_BPE && !t->spm_text) {   /* GPT-2 code points -> bytes */
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int cl = pk_utf8_decode((const uint8_t *)s + i, n - i, &cp);
            int b = cp < 256 + 68 ? t->cp_byte[cp] : -1;
            if (b >= 0) { char c = (char)b; at = put(buf, buflen, at, &c, 1); }
            else at = put(buf, buflen, at, s + i, (size_t)cl);
            i += (size_t)cl;
        }
        return at;
    }
    for (size_t i = 0; i < n;) {                  /* SPM / WPM / gemma4: U+2581 -> space */
        if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            at = put(buf, buflen, at, " ", 1);
            i += 3;
        } else {
            at = put(buf, buflen, at, s + i, 1);
            i++;
        }
    }
    return at;
}

int pk_tokenizer_n_vocab(const pk_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t pk_tokenizer_bos(const pk_tokenizer *t) { return t ? t->bos : -1; }
int32_t pk_tokenizer_eos(const pk_tokenizer *t) { return t ? t->eos : -1; }

int pk_tokenizer_is_eog(const pk_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n_vocab && (t->attr[id] & ATTR_EOG) != 0;
}

const char *pk_tokenizer_text(const pk_tokenizer *t, int32_t id) {
    return (t && id >= 0 && id < t->n_vocab) ? tok_text(t, id) : NULL;
}
