/* text/vocab.c - a tokenizer's vocabulary from a GGUF file's tokenizer.ggml.*
 * keys: the token texts and their hash table, the BPE merges, the special
 * ids and flags, the pre-tokenizer's regexes (by tokenizer.ggml.pre), the
 * byte tables. Every array read from the file is checked against the
 * vocabulary's size; a missing or malformed key is an error naming it.
 * text/tokenizer.c turns text into ids with what this builds.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/unicode.h"

int pk_tok_grow(void **buf, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return 1;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / sz) return 0;
        nc *= 2;
    }
    void *nb = realloc(*buf, nc * sz);
    if (!nb) return 0;
    *buf = nb; *cap = nc;
    return 1;
}


static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
    return h;
}
#define FNV0 0xcbf29ce484222325ULL

/* ===================================================================== */
/* Hash tables: token text -> id, merge pair -> rank                      */
/* ===================================================================== */

static int htab_init(htab *h, uint64_t n) {
    uint64_t cap = 16;
    while (cap < n * 2) cap *= 2;
    h->slot = pk_calloc(cap, sizeof *h->slot);
    h->mask = cap - 1;
    return h->slot != NULL;
}

int32_t pk_tok_find(const pk_tokenizer *t, const char *s, size_t n) {
    uint64_t i = fnv(FNV0, s, n) & t->tok_map.mask;
    for (;;) {
        uint32_t v = t->tok_map.slot[i];
        if (!v) return -1;
        int32_t id = (int32_t)v - 1;
        if (t->tok_len[id] == n && memcmp(tok_text(t, id), s, n) == 0) return id;
        i = (i + 1) & t->tok_map.mask;
    }
}

/* Insert id unless its text is already present (the first id wins). */
static void token_insert(pk_tokenizer *t, int32_t id) {
    const char *s = tok_text(t, id);
    size_t n = t->tok_len[id];
    uint64_t i = fnv(FNV0, s, n) & t->tok_map.mask;
    for (;;) {
        uint32_t v = t->tok_map.slot[i];
        if (!v) { t->tok_map.slot[i] = (uint32_t)id + 1; return; }
        int32_t o = (int32_t)v - 1;
        if (t->tok_len[o] == n && memcmp(tok_text(t, o), s, n) == 0) return;
        i = (i + 1) & t->tok_map.mask;
    }
}

static uint64_t pair_hash(const char *a, size_t na, const char *b, size_t nb) {
    uint64_t h = fnv(FNV0, a, na);
    h = fnv(h, "", 1);
    return fnv(h, b, nb);
}

int pk_tok_merge_find(const pk_tokenizer *t, const char *a, size_t na, const char *b, size_t nb) {
    if (!t->merge_map.slot) return -1;
    uint64_t i = pair_hash(a, na, b, nb) & t->merge_map.mask;
    for (;;) {
        uint32_t v = t->merge_map.slot[i];
        if (!v) return -1;
        int r = (int)v - 1;
        const char *m = t->mpool + t->m_off[r];
        if (t->m_len1[r] == na && t->m_len2[r] == nb &&
            memcmp(m, a, na) == 0 && memcmp(m + na, b, nb) == 0)
            return r;
        i = (i + 1) & t->merge_map.mask;
    }
}

static void merge_insert(pk_tokenizer *t, int r) {
    const char *m = t->mpool + t->m_off[r];
    size_t na = t->m_len1[r], nb = t->m_len2[r];
    uint64_t i = pair_hash(m, na, m + na, nb) & t->merge_map.mask;
    for (;;) {
        uint32_t v = t->merge_map.slot[i];
        if (!v) { t->merge_map.slot[i] = (uint32_t)r + 1; return; }
        int o = (int)v - 1;
        const char *mo = t->mpool + t->m_off[o];
        if (t->m_len1[o] == na && t->m_len2[o] == nb && memcmp(mo, m, na + nb) == 0)
            return;   /* duplicate merge: the lower rank wins */
        i = (i + 1) & t->merge_map.mask;
    }
}

/* ===================================================================== */
/* GPT-2 byte-level mapping                                               */
/* ===================================================================== */

/* Bytes GPT-2 keeps as their own (printable Latin-1) code point. */
static int byte_is_printable(int c) {
    return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
}

/* The code point GPT-2 uses for byte b: printable bytes stand for themselves,
 * the other 68 map to U+0100.. in byte order. */
static uint32_t byte_to_cp(int b) {
    if (byte_is_printable(b)) return (uint32_t)b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++) n += !byte_is_printable(c);
    return 256 + n;
}

/* Fill the tokenizer's byte <-> code point tables. */
static void byte_map_init(pk_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char tmp[4];
        t->bchar[b].n = (uint8_t)pk_utf8_encode(byte_to_cp(b), tmp);
        memcpy(t->bchar[b].s, tmp, 2);
    }
    for (int cp = 0; cp < 256 + 68; cp++) t->cp_byte[cp] = -1;
    for (int b = 0; b < 256; b++) t->cp_byte[byte_to_cp(b)] = (int16_t)b;
}

/* ===================================================================== */
/* Pre-tokenizers (tokenizer.ggml.pre)                                    */
/* ===================================================================== */

/* The regexes are applied in sequence: each one splits every piece left by
 * the previous ones into its matches and the unmatched gaps between them.
 * They are the expressions llama.cpp runs (which adapt the Hugging Face
 * originals for std::regex); PCRE2 gives them the same meaning here. */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* a letter that is not a-z / not A-Z (llama.cpp's stand-in for Lu / Ll) */
#define RE_UPPERISH "((?=[\\p{L}])([^a-z]))"
#define RE_LOWERISH "((?=[\\p{L}])([^A-Z]))"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPERISH "*" RE_LOWERISH "+" RE_CONTRACTIONS "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPERISH "+" RE_LOWERISH "*" RE_CONTRACTIONS "?" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPERISH "*" RE_LOWERISH "+" \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPERISH "+" RE_LOWERISH "*" \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* cased letters of many scripts (deepseek-llm's letter class) */
#define RE_DEEPSEEK_LETTERS "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}" \
    "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}" \
    "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}" \
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}" \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}" \
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}" \
    "\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}" \
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}" \
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}" \
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}" \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}" \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}" \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}" \
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}" \
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}" \
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"

/* PRE_SPM_TEXT: BPE over SentencePiece-style text (spaces as U+2581, raw
 * UTF-8, <0xXX> byte fallback, newline runs whole) with BOS always added,
 * whatever tokenizer.ggml.add_bos_token says (as llama.cpp does for Gemma-4). */
enum { PRE_IGNORE_MERGES = 1, PRE_ADD_BOS = 2, PRE_NO_BOS = 4, PRE_SPM_TEXT = 8 };

typedef struct pre_def {
    const char *names;              /* '|'-separated tokenizer.ggml.pre values */
    unsigned flags;                 /* PRE_* */
    const char *re[MAX_REGEX];      /* NULL-terminated */
} pre_def;

static const pre_def k_pre[] = {
    { "default", 0, { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" } },
    { "gpt-2|phi-2|mpt|olmo|jais|trillion|granite-docling|exaone4|mellum|gigachat|a.x-4.0|"
      "jina-es|jina-de|jina-v2-es|jina-v2-de|jina-v1-en|jina-v2-code|roberta-bpe|modern-bert",
      0, { RE_GPT2 } },
    { "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2",
      PRE_IGNORE_MERGES | PRE_ADD_BOS, { RE_LLAMA3 } },
    { "dbrx|smaug-bpe", 0, { RE_LLAMA3 } },
    { "chatglm-bpe|glm4", PRE_NO_BOS, { RE_LLAMA3 } },
    { "deepseek-llm", 0, { "[\r\n]", RE_DEEPSEEK_LETTERS,
        "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
        "\\s+$", RE_CJK, "\\p{N}+" } },
    { "deepseek-coder", 0, { "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}" } },
    { "deepseek-v3|hunyuan-dense", 0, { "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
        "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+" } },
    { "falcon", 0, { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]" } },
    { "starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2", 0,
        { "\\p{N}", RE_GPT2 } },
    { "qwen2|qwen3|deepseek-r1-qwen|megrez|stablelm2|hunyuan|kormo|f2llmv2|solar-open", 0,
        { RE_QWEN2 } },
    { "qwen35", 0, { RE_QWEN35 } },
    { "gpt-4o|llama4|kanana2|minimax-m2", 0, { RE_GPT4O } },
    { "tekken", PRE_IGNORE_MERGES | PRE_ADD_BOS, { RE_TEKKEN } },
    { "seed-coder", 0, { RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}"
        "| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
    { "gemma4|granite-embed-multi-311m", PRE_SPM_TEXT, { "[^\\n]+|[\\n]+" } },
    { "poro-chat|bloom|gpt3-finnish", 0,
        { " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+" } },
};

/* The definition whose names include name, or NULL. */
static const pre_def *pre_lookup(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        const char *p = k_pre[i].names;
        while (*p) {
            const char *e = strchr(p, '|');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == n && memcmp(p, name, n) == 0) return &k_pre[i];
            p += len + (e != NULL);
        }
    }
    return NULL;
}

/* Compile def's regexes into t (JIT when available). */
static int pre_compile(pk_tokenizer *t, const pre_def *def, const char *file, pk_error *err) {
    const uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    for (int i = 0; i < MAX_REGEX && def->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        t->re[i] = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return pk_errorf(err, PK_ERR_UNSUPPORTED,
                             "%s: tokenizer.ggml.pre regex %d does not compile at %zu: %s",
                             file, i, (size_t)eo, (const char *)msg);
        }
        pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE);   /* optional speed-up */
        t->n_re = i + 1;
    }
    return PK_OK;
}

/* ===================================================================== */
/* Loading                                                                */
/* ===================================================================== */

/* A string-array key, or NULL (with err set) if present with another type. */
static const gguf_kv *find_str_array(const gguf_file *f, const char *key, int *bad,
                                     pk_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    *bad = 0;
    if (kv && (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING)) {
        *bad = 1;
        pk_errorf(err, PK_ERR_FORMAT, "%s: %s has type %s, expected an array of strings",
                  f->path, key, gguf_vtype_name(kv->type == GGUF_ARRAY ? kv->arr_type : kv->type));
        return NULL;
    }
    return kv;
}

/* A numeric array key with at least n elements, or NULL if absent. */
static int find_num_array(const gguf_file *f, const char *key, uint64_t n,
                          const gguf_kv **out, pk_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    *out = NULL;
    if (!kv) return PK_OK;
    if (kv->type != GGUF_ARRAY || kv->arr_type == GGUF_STRING)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s is not a numeric array", f->path, key);
    if (kv->arr_n < n)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s has %llu entries, expected %llu",
                         f->path, key, (unsigned long long)kv->arr_n, (unsigned long long)n);
    *out = kv;
    return PK_OK;
}

/* Tokens, scores and types. */
static int load_vocab(pk_tokenizer *t, const gguf_file *f, pk_error *err) {
    int bad;
    const gguf_kv *toks = find_str_array(f, "tokenizer.ggml.tokens", &bad, err);
    if (bad) return PK_ERR_FORMAT;
    if (!toks)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: missing tokenizer.ggml.tokens", f->path);
    if (toks->arr_n == 0 || toks->arr_n > INT32_MAX / 2)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries",
                         f->path, (unsigned long long)toks->arr_n);
    uint64_t n = toks->arr_n;
    const gguf_kv *scores, *types;
    int rc = find_num_array(f, "tokenizer.ggml.scores", n, &scores, err);
    if (rc) return rc;
    rc = find_num_array(f, "tokenizer.ggml.token_type", n, &types, err);
    if (rc) return rc;

    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (toks->arr_str[i].len > INT32_MAX)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%llu] is %llu bytes long",
                             f->path, (unsigned long long)i, (unsigned long long)toks->arr_str[i].len);
        total += toks->arr_str[i].len + 1;
    }
    t->n_vocab = (int)n;
    t->pool = malloc(total);
    t->tok_off = pk_calloc(n, sizeof *t->tok_off);
    t->tok_len = pk_calloc(n, sizeof *t->tok_len);
    t->score = pk_calloc(n, sizeof *t->score);
    t->attr = pk_calloc(n, sizeof *t->attr);
    if (!t->pool || !t->tok_off || !t->tok_len || !t->score || !t->attr || !htab_init(&t->tok_map, n))
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for %llu tokens", f->path,
                         (unsigned long long)n);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_str *s = &toks->arr_str[i];
        memcpy(t->pool + off, s->ptr, s->len);
        t->pool[off + s->len] = 0;
        t->tok_off[i] = off;
        t->tok_len[i] = (uint32_t)s->len;
        off += s->len + 1;
        if ((int)s->len > t->max_token_len) t->max_token_len = (int)s->len;
        t->score[i] = scores ? (float)gguf_arr_float(scores, i) : 0.0f;
        int ty = types ? (int)gguf_arr_int(types, i) : 1;
        static const uint16_t k_type_attr[7] = {
            0, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_CONTROL, ATTR_USER, ATTR_UNUSED, ATTR_BYTE };
        t->attr[i] = (ty >= 0 && ty <= 6) ? k_type_attr[ty] : 0;
        if (s->len > 0) token_insert(t, (int32_t)i);   /* empty tokens never match */
    }
    return PK_OK;
}

/* BPE merges "left right" (split at the first space after the first byte). */
static int load_merges(pk_tokenizer *t, const gguf_file *f, pk_error *err) {
    int bad;
    const gguf_kv *kv = find_str_array(f, "tokenizer.ggml.merges", &bad, err);
    if (bad) return PK_ERR_FORMAT;
    if (!kv) return pk_errorf(err, PK_ERR_FORMAT, "%s: missing tokenizer.ggml.merges", f->path);
    if (kv->arr_n > INT32_MAX / 2)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: tokenizer.ggml.merges has %llu entries",
                         f->path, (unsigned long long)kv->arr_n);
    uint64_t n = kv->arr_n, total = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (kv->arr_str[i].len > INT32_MAX)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tokenizer.ggml.merges[%llu] too long",
                             f->path, (unsigned long long)i);
        total += kv->arr_str[i].len;
    }
    t->n_merges = (int)n;
    t->mpool = malloc(total);
    t->m_off = pk_calloc(n, sizeof *t->m_off);
    t->m_len1 = pk_calloc(n, sizeof *t->m_len1);
    t->m_len2 = pk_calloc(n, sizeof *t->m_len2);
    if (!t->mpool || !t->m_off || !t->m_len1 || !t->m_len2 || !htab_init(&t->merge_map, n))
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for %llu merges", f->path,
                         (unsigned long long)n);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_str *s = &kv->arr_str[i];
        const char *sp = s->len > 1 ? memchr(s->ptr + 1, ' ', s->len - 1) : NULL;
        if (!sp) continue;                     /* malformed: never matches */
        size_t l1 = (size_t)(sp - s->ptr), l2 = s->len - l1 - 1;
        memcpy(t->mpool + off, s->ptr, l1);
        memcpy(t->mpool + off + l1, sp + 1, l2);
        t->m_off[i] = off;
        t->m_len1[i] = (uint32_t)l1;
        t->m_len2[i] = (uint32_t)l2;
        off += l1 + l2;
        merge_insert(t, (int)i);
    }
    return PK_OK;
}

/* Read an optional token-id key into *id; out-of-range values are ignored. */
static int load_id(pk_tokenizer *t, const gguf_file *f, const char *key, int32_t *id,
                   pk_error *err) {
    int64_t v = -1;
    int rc = gguf_get_int(f, key, 0, &v, err);
    if (rc) return rc;
    if (gguf_find_kv(f, key) && v >= 0 && v < t->n_vocab) *id = (int32_t)v;
    return PK_OK;
}

static int load_flag(const gguf_file *f, const char *key, int *flag, pk_error *err) {
    return gguf_get_bool(f, key, 0, flag, err);
}

/* The id of the first (lowest-id) token whose text is one of names. */
static int32_t find_any(const pk_tokenizer *t, const char *const *names) {
    int32_t best = -1;
    for (; *names; names++) {
        int32_t id = pk_tok_find(t, *names, strlen(*names));
        if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    return best;
}

/* Texts that mark end-of-turn / fill-in-the-middle tokens in common vocabs
 * (the GGUF keys often leave them out). */
static const char *const k_eot_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL };
static const char *const k_eom_names[] = { "<|eom_id|>", NULL };
static const char *const k_fim_pad_names[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL };
static const char *const k_fim_rep_names[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
static const char *const k_fim_sep_names[] = { "<|file_sep|>", NULL };
static const char *const k_eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", NULL };

/* gpt-oss's harmony vocabulary (o200k_harmony), as llama.cpp treats it: an
 * answer is several messages (<|start|>assistant<|channel|>analysis
 * <|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...),
 * so where <|return|> and <|call|> end generation, <|end|> does not; it and
 * the markers <|start|>, <|channel|>, <|message|>, <|constrain|> are written
 * out in the text (user-defined, not control), so the channels can be told
 * apart. */
static void harmony_specials(pk_tokenizer *t) {
    static const char *const shown[] = { "<|end|>", "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>" };
    int32_t ret = pk_tok_find(t, "<|return|>", 10), call = pk_tok_find(t, "<|call|>", 8);
    int32_t end = pk_tok_find(t, "<|end|>", 7);
    if (ret >= 0 && call >= 0 && (t->attr[ret] & t->attr[call] & ATTR_EOG) && end >= 0 && (t->attr[end] & ATTR_EOG))
        t->attr[end] = ATTR_USER;
    for (size_t i = 1; i < sizeof shown / sizeof shown[0]; i++) {
        int32_t id = pk_tok_find(t, shown[i], strlen(shown[i]));
        if (id >= 0) t->attr[id] = ATTR_USER;
    }
}

/* Gemma-4's answer carries its thinking and tool calls between control
 * tokens (<|channel>thought ...<channel|>, <|tool_call>...<tool_call|>, the
 * calls' strings between <|"|>): their pieces are written out so that the
 * channels and calls can be read (what llama.cpp's server does with its
 * "preserved tokens"; its converter now makes them user-defined tokens);
 * they stay control tokens for tokenizing. */
static void gemma4_specials(pk_tokenizer *t) {
    static const char *const shown[] = { "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|\"|>" };
    if (!t->spm_text) return;
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        int32_t id = pk_tok_find(t, shown[i], strlen(shown[i]));
        if (id >= 0 && (t->attr[id] & ATTR_CONTROL)) t->attr[id] |= ATTR_SHOWN;
    }
}

/* Special ids from the keys, then guessed from token texts as llama.cpp does;
 * end-of-generation marks. */
static int load_special_ids(pk_tokenizer *t, const gguf_file *f, pk_error *err) {
    static const struct { const char *key; size_t field; } keys[] = {
        { "tokenizer.ggml.bos_token_id", offsetof(pk_tokenizer, bos) },
        { "tokenizer.ggml.eos_token_id", offsetof(pk_tokenizer, eos) },
        { "tokenizer.ggml.eot_token_id", offsetof(pk_tokenizer, eot) },
        { "tokenizer.ggml.eom_token_id", offsetof(pk_tokenizer, eom) },
        { "tokenizer.ggml.unknown_token_id", offsetof(pk_tokenizer, unk) },
        { "tokenizer.ggml.seperator_token_id", offsetof(pk_tokenizer, sep) },
        { "tokenizer.ggml.padding_token_id", offsetof(pk_tokenizer, pad) },
        { "tokenizer.ggml.mask_token_id", offsetof(pk_tokenizer, mask) },
        { "tokenizer.ggml.fim_pre_token_id", offsetof(pk_tokenizer, fim_pre) },
        { "tokenizer.ggml.fim_suf_token_id", offsetof(pk_tokenizer, fim_suf) },
        { "tokenizer.ggml.fim_mid_token_id", offsetof(pk_tokenizer, fim_mid) },
        { "tokenizer.ggml.fim_pad_token_id", offsetof(pk_tokenizer, fim_pad) },
        { "tokenizer.ggml.fim_rep_token_id", offsetof(pk_tokenizer, fim_rep) },
        { "tokenizer.ggml.fim_sep_token_id", offsetof(pk_tokenizer, fim_sep) },
        { "tokenizer.ggml.prefix_token_id", offsetof(pk_tokenizer, fim_pre) },
        { "tokenizer.ggml.suffix_token_id", offsetof(pk_tokenizer, fim_suf) },
        { "tokenizer.ggml.middle_token_id", offsetof(pk_tokenizer, fim_mid) },
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int32_t *id = (int32_t *)((char *)t + keys[i].field);
        if (*id >= t->n_vocab) *id = -1;         /* default out of range */
        int rc = load_id(t, f, keys[i].key, id, err);
        if (rc) return rc;
    }

    struct { int32_t *id; const char *const *names; } guess[] = {
        { &t->eot, k_eot_names }, { &t->eom, k_eom_names }, { &t->fim_pad, k_fim_pad_names },
        { &t->fim_rep, k_fim_rep_names }, { &t->fim_sep, k_fim_sep_names },
    };
    for (size_t i = 0; i < sizeof guess / sizeof guess[0]; i++) {
        if (*guess[i].id >= 0) continue;
        *guess[i].id = find_any(t, guess[i].names);
        if (*guess[i].id >= 0) t->attr[*guess[i].id] |= ATTR_CONTROL;
    }
    for (const char *const *p = k_eog_names; *p; p++) {
        int32_t id = pk_tok_find(t, *p, strlen(*p));
        if (id >= 0) t->attr[id] |= ATTR_EOG | ATTR_CONTROL;
    }
    int32_t eog[] = { t->eos, t->eot, t->eom, t->fim_pad, t->fim_rep, t->fim_sep };
    for (size_t i = 0; i < sizeof eog / sizeof eog[0]; i++)
        if (eog[i] >= 0) t->attr[eog[i]] |= ATTR_EOG;
    harmony_specials(t);
    gemma4_specials(t);
    return PK_OK;
}

/* Special tokens cut out of the text before tokenizing: control, user-defined
 * and unknown tokens, longest text first (ties by id). */
typedef struct { uint32_t len; int32_t id; } len_id;

static int cmp_len_id(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int build_special_list(pk_tokenizer *t, const char *file, pk_error *err) {
    int n = 0;
    for (int i = 0; i < t->n_vocab; i++)
        n += (t->attr[i] & (ATTR_CONTROL | ATTR_USER | ATTR_UNKNOWN)) && t->tok_len[i] > 0;
    len_id *tmp = pk_calloc((size_t)n, sizeof *tmp);
    t->special = pk_calloc((size_t)n, sizeof *t->special);
    if (!tmp || !t->special) {
        free(tmp);
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for %d special tokens", file, n);
    }
    n = 0;
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & (ATTR_CONTROL | ATTR_USER | ATTR_UNKNOWN)) && t->tok_len[i] > 0)
            tmp[n++] = (len_id){ t->tok_len[i], i };
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_len_id);
    for (int i = 0; i < n; i++) t->special[i] = tmp[i].id;
    t->n_special = n;
    free(tmp);
    return PK_OK;
}

/* Phi-3 vocabularies strip whitespace after their special tokens. */
static void apply_model_quirks(pk_tokenizer *t, const gguf_file *f) {
    const gguf_kv *kv = gguf_find_kv(f, "general.name");
    if (!kv || kv->type != GGUF_STRING) return;
    char name[64];
    size_t n = kv->str.len < sizeof name - 1 ? kv->str.len : sizeof name - 1;
    for (size_t i = 0; i < n; i++) name[i] = (char)tolower((unsigned char)kv->str.ptr[i]);
    name[n] = 0;
    if (!strstr(name, "phi-3") && !strstr(name, "phi3")) return;
    for (int i = 0; i < t->n_special; i++) t->attr[t->special[i]] |= ATTR_RSTRIP;
    int32_t id = pk_tok_find(t, "</s>", 4);
    if (id >= 0) t->attr[id] |= ATTR_RSTRIP;
    static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>", NULL };
    for (const char *const *p = keep; *p; p++)
        if ((id = pk_tok_find(t, *p, strlen(*p))) >= 0) t->attr[id] &= (uint16_t)~ATTR_RSTRIP;
}

/* Model type, defaults per model, pre-tokenizer. */
static int load_model(pk_tokenizer *t, const gguf_file *f, char **pre_out, pk_error *err) {
    char *model = NULL;
    int rc = gguf_get_string(f, "tokenizer.ggml.model", 1, &model, err);
    if (rc) return rc;
    rc = gguf_get_string(f, "tokenizer.ggml.pre", 0, pre_out, err);
    if (rc) { free(model); return rc; }

    t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = t->mask = -1;
    t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = -1;
    t->lowercase = t->strip_accents = 1;
    if (strcmp(model, "llama") == 0) {
        t->type = VOCAB_SPM;
        t->bos = 1; t->eos = 2; t->unk = 0;
        t->add_space_prefix = 1; t->add_bos = 1;
    } else if (strcmp(model, "bert") == 0) {
        t->type = VOCAB_WPM;
        t->bos = 101; t->unk = 100; t->sep = 102; t->pad = 0; t->mask = 103;
        t->add_bos = 1; t->add_sep = 1;
    } else if (strcmp(model, "gpt2") == 0) {
        t->type = VOCAB_BPE;
        t->bos = 11; t->eos = 11;
    } else if (strcmp(model, "gemma4") == 0) {
        t->type = VOCAB_BPE;           /* special ids only from the keys */
        free(*pre_out);                /* the model names its pre-tokenizer */
        if (!(*pre_out = strdup("gemma4")))
            rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    } else {
        rc = pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' is not supported "
                       "(gpt2, gemma4, llama, bert)", f->path, model);
    }
    free(model);
    return rc;
}

/* Select and compile the BPE pre-tokenizer named by pre (NULL = default). */
static int load_pre(pk_tokenizer *t, const gguf_file *f, const char *pre, pk_error *err) {
    const pre_def *def = pre_lookup(pre ? pre : "default");
    if (!def)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre '%s' is not supported",
                         f->path, pre);
    t->ignore_merges = (def->flags & PRE_IGNORE_MERGES) != 0;
    t->spm_text = (def->flags & PRE_SPM_TEXT) != 0;
    if (def->flags & PRE_ADD_BOS) t->add_bos = 1;
    if (def->flags & PRE_NO_BOS) t->bos = -1;
    return pre_compile(t, def, f->path, err);
}

/* Byte-fallback table: <0xXX>, else (SentencePiece) the 1-byte token. */
static void build_byte_tokens(pk_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char hex[7];
        static const char digits[] = "0123456789ABCDEF";
        memcpy(hex, "<0x", 3);
        hex[3] = digits[b >> 4]; hex[4] = digits[b & 15]; hex[5] = '>'; hex[6] = 0;
        int32_t id = pk_tok_find(t, hex, 6);
        if (id < 0 && t->type == VOCAB_SPM) {
            char c = (char)b;
            id = pk_tok_find(t, &c, 1);
        }
        t->byte_tok[b] = id;
    }
}

int pk_tokenizer_load(const gguf_file *f, pk_tokenizer **out, pk_error *err) {
    *out = NULL;
    if (!f) return pk_errorf(err, PK_ERR_ARG, "pk_tokenizer_load: no file");
    pk_tokenizer *t = pk_calloc(1, sizeof *t);
    if (!t) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for the tokenizer", f->path);
    char *pre = NULL;
    int rc = load_model(t, f, &pre, err);
    if (!rc) rc = load_vocab(t, f, err);
    if (!rc && t->type == VOCAB_BPE) rc = load_merges(t, f, err);
    if (!rc && t->type == VOCAB_BPE) rc = load_pre(t, f, pre, err);
    if (!rc) rc = load_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err);
    if (!rc) rc = load_special_ids(t, f, err);
    if (!rc) rc = load_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err);
    if (t->spm_text) t->add_bos = 1;
    if (!rc) rc = load_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err);
    if (!rc) rc = load_flag(f, "tokenizer.ggml.add_sep_token", &t->add_sep, err);
    if (!rc) rc = load_flag(f, "tokenizer.ggml.normalizer.lowercase", &t->lowercase, err);
    if (!rc) {
        t->strip_accents = t->lowercase;
        rc = load_flag(f, "tokenizer.ggml.normalizer.strip_accents", &t->strip_accents, err);
    }
    if (!rc && t->add_bos && t->bos < 0)
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: %s but there is no valid tokenizer.ggml.bos_token_id", f->path,
                       t->spm_text ? "a gemma4 vocabulary always adds BOS" : "tokenizer.ggml.add_bos_token is set");
    if (!rc && t->add_eos && t->eos < 0)
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: tokenizer.ggml.add_eos_token is set but there is "
                       "no valid tokenizer.ggml.eos_token_id", f->path);
    if (!rc) rc = build_special_list(t, f->path, err);
    free(pre);
    if (rc) {
        pk_tokenizer_free(t);
        return rc;
    }
    apply_model_quirks(t, f);
    build_byte_tokens(t);
    byte_map_init(t);
    if (t->type == VOCAB_BPE && !t->spm_text && (rc = pk_tok_bpe_replacement_tokens(t, f->path, err))) {
        pk_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return PK_OK;
}

void pk_tokenizer_free(pk_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->pool); free(t->tok_off); free(t->tok_len); free(t->score); free(t->attr);
    free(t->tok_map.slot);
    free(t->mpool); free(t->m_off); free(t->m_len1); free(t->m_len2);
    free(t->merge_map.slot);
    free(t->special);
    free(t);
}
