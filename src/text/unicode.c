/* text/unicode.c - UTF-8 decoding/encoding and code point properties (class,
 * whitespace, lowercase, NFD base) looked up in the generated text/unicode_data.c. */
#include "text/unicode.h"

extern const uint32_t pk_uc_class_ranges[];
extern const size_t pk_uc_class_ranges_n;
extern const uint32_t pk_uc_lower[][2];
extern const size_t pk_uc_lower_n;
extern const uint32_t pk_uc_nfd[][2];
extern const size_t pk_uc_nfd_n;

int pk_utf8_len(uint8_t lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 1;
}

int pk_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    int len = pk_utf8_len(c);
    if (len == 1) {
        *cp = c < 0x80 ? c : 0xFFFD;
        return 1;
    }
    if ((size_t)len > n) goto bad;
    uint32_t v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min_for_len[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < min_for_len[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto bad;
    *cp = v;
    return len;
bad:
    *cp = 0xFFFD;
    return 1;
}

int pk_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

int pk_unicode_class(uint32_t cp) {
    if (cp > 0x10FFFF) return PK_UC_UNASSIGNED;
    /* last range whose first code point is <= cp */
    size_t lo = 0, hi = pk_uc_class_ranges_n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((pk_uc_class_ranges[mid] >> 3) <= cp) lo = mid;
        else hi = mid;
    }
    return (int)(pk_uc_class_ranges[lo] & 7);
}

int pk_unicode_is_space(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return 1;
    }
    return cp >= 0x2000 && cp <= 0x200A;
}

/* Binary search in a sorted {key, value} table; def when absent. */
static uint32_t pair_lookup(const uint32_t (*tab)[2], size_t n, uint32_t key, uint32_t def) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tab[mid][0] < key) lo = mid + 1;
        else hi = mid;
    }
    return (lo < n && tab[lo][0] == key) ? tab[lo][1] : def;
}

uint32_t pk_unicode_tolower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    return pair_lookup(pk_uc_lower, pk_uc_lower_n, cp, cp);
}

uint32_t pk_unicode_nfd_base(uint32_t cp) {
    if (cp < 0xC0) return cp;
    return pair_lookup(pk_uc_nfd, pk_uc_nfd_n, cp, cp);
}
