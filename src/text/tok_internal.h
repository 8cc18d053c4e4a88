/* text/tok_internal.h - what text/vocab.c (a vocabulary from GGUF) and
 * text/tokenizer.c (text -> ids and back) share: the tokenizer's layout and
 * the lookups into it. Private to src/text/. */
#ifndef PK_TOK_INTERNAL_H
#define PK_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* ===================================================================== */
/* Types                                                                  */
/* ===================================================================== */

enum { VOCAB_SPM, VOCAB_BPE, VOCAB_WPM };

/* token attributes (bit set), as llama.cpp derives them from token_type */
enum {
    ATTR_NORMAL = 1 << 0, ATTR_UNKNOWN = 1 << 1, ATTR_CONTROL = 1 << 2,
    ATTR_USER = 1 << 3, ATTR_UNUSED = 1 << 4, ATTR_BYTE = 1 << 5,
    ATTR_LSTRIP = 1 << 6, ATTR_RSTRIP = 1 << 7, ATTR_EOG = 1 << 8,
    ATTR_SHOWN = 1 << 9,        /* a control token whose piece is its text (gemma4's channels) */
};

#define MAX_REGEX 6

/* open-addressing hash table of indices (index + 1 stored, 0 = empty) */
typedef struct htab {
    uint32_t *slot;
    uint64_t mask;
} htab;

struct pk_tokenizer {
    int type;                   /* VOCAB_* */
    int n_vocab;
    /* token texts, each NUL-terminated inside pool */
    char *pool;
    uint64_t *tok_off;
    uint32_t *tok_len;
    float *score;
    uint16_t *attr;
    htab tok_map;
    int max_token_len;

    /* BPE merges: first and second stored back to back in mpool */
    char *mpool;
    uint64_t *m_off;
    uint32_t *m_len1, *m_len2;
    int n_merges;
    htab merge_map;

    /* pre-tokenizer */
    pcre2_code *re[MAX_REGEX];
    int n_re;
    int ignore_merges;
    int spm_text;               /* BPE over SentencePiece text (gemma4), see above */

    /* special ids (-1 = none) */
    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos, add_sep, add_space_prefix;
    int lowercase, strip_accents;      /* WordPiece normalizer */

    int32_t byte_tok[256];             /* SPM byte fallback, -1 if none */
    int32_t *special;                  /* control/user/unknown ids, longest first */
    int n_special;

    /* GPT-2 byte-level map: UTF-8 of each byte's code point, and back */
    struct { char s[2]; uint8_t n; } bchar[256];
    int16_t cp_byte[256 + 68];
    int32_t fffd[3];                   /* BPE tokens of U+FFFD (replacement) */
    int n_fffd;
};

typedef struct ivec { int32_t *v; size_t n, cap; int oom; } ivec;

static inline const char *tok_text(const pk_tokenizer *t, int32_t id) {
    return t->pool + t->tok_off[id];
}

/* Grow *buf (of *cap elements of size sz) to hold at least need elements;
 * 0 when out of memory (the buffer is then unchanged). */
int pk_tok_grow(void **buf, size_t *cap, size_t need, size_t sz);
/* id of the token whose text is s[0..n), or -1 */
int32_t pk_tok_find(const pk_tokenizer *t, const char *s, size_t n);
/* rank of the BPE merge (a, b), or -1 */
int pk_tok_merge_find(const pk_tokenizer *t, const char *a, size_t na, const char *b, size_t nb);
/* The BPE tokens of U+FFFD, which invalid UTF-8 becomes (t->fffd); fails
 * naming file when the vocabulary cannot spell it. */
int pk_tok_bpe_replacement_tokens(pk_tokenizer *t, const char *file, pk_error *err);

#endif
