/* text/unicode.h - small UTF-8 and Unicode helpers for the tokenizer: decoding and
 * encoding code points, the general-category class of a code point, White_Space,
 * simple lowercase and the NFD base character (tables in text/unicode_data.c). */
#ifndef PK_UNICODE_H
#define PK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Coarse general-category classes (first letter of the category). */
enum pk_uclass {
    PK_UC_UNASSIGNED = 0, PK_UC_LETTER = 1, PK_UC_NUMBER = 2, PK_UC_PUNCT = 3,
    PK_UC_SYMBOL = 4, PK_UC_MARK = 5, PK_UC_SEPARATOR = 6, PK_UC_CONTROL = 7
};

/* Decode one code point from s[0..n) (n >= 1). Returns the bytes consumed
 * (1..4). A malformed, overlong or truncated sequence yields *cp = U+FFFD and
 * consumes exactly 1 byte. */
int pk_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Encode cp (<= 0x10FFFF) into out; returns 1..4, or 0 for an invalid cp. */
int pk_utf8_encode(uint32_t cp, char out[4]);
/* Length of the UTF-8 sequence a lead byte announces (1 for stray bytes). */
int pk_utf8_len(uint8_t lead);

int pk_unicode_class(uint32_t cp);          /* enum pk_uclass */
int pk_unicode_is_space(uint32_t cp);       /* Unicode White_Space property */
uint32_t pk_unicode_tolower(uint32_t cp);   /* cp itself if no simple mapping */
uint32_t pk_unicode_nfd_base(uint32_t cp);  /* first code point of NFD(cp) */

#endif
