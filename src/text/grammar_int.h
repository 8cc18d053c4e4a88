/* text/grammar_int.h - the compiled grammar shared by the parser
 * (text/grammar.c) and the matcher (text/grammar_match.c); nothing outside
 * these two files includes it.
 *
 * A compiled grammar is over bytes: the GBNF's code points and character
 * classes are turned into UTF-8 byte sequences when parsed, so the matcher
 * never decodes UTF-8 and cannot produce an invalid sequence. Elements are
 * 32-bit words, kind in the top two bits:
 *   GE_END             end of an alternative
 *   GE_BYTES | set     one byte out of sets[set] (256 bits)
 *   GE_REF   | rule    a rule reference
 * Rule r's alternatives are alt[rule_alt[r] .. rule_alt[r+1]), each the
 * index in el[] of its first element; every alternative ends with GE_END.
 */
#ifndef PK_GRAMMAR_INT_H
#define PK_GRAMMAR_INT_H

#include <stdint.h>

#include "text/grammar.h"

#define GE_END   0u
#define GE_BYTES 1u
#define GE_REF   2u
#define GE_KIND(e) ((e) >> 30)
#define GE_VAL(e)  ((e) & 0x3FFFFFFFu)
#define GE_MAKE(k, v) (((uint32_t)(k) << 30) | (uint32_t)(v))

/* Limits against grammars that blow up (documented in docs/grammars.md). */
#define PK_GRAMMAR_MAX_RULES    (1u << 16)    /* rules, the generated ones included */
#define PK_GRAMMAR_MAX_ELEMENTS (1u << 20)    /* elements after repetitions are expanded */
#define PK_GRAMMAR_MAX_NESTING  64            /* parentheses inside each other */
#define PK_GRAMMAR_MAX_REPEAT   10000         /* m and n of {m,n} */
#define PK_GRAMMAR_MAX_STACKS   4096          /* parse stacks alive at once */
#define PK_GRAMMAR_MAX_NODES    (1u << 23)    /* stack nodes a grammar may intern */

typedef uint32_t gelem;

/* A stack node: the element to match next (pos) over the rest of the stack
 * (parent, a node id). Node 0 is the empty stack (the grammar is complete),
 * node 1 the unknown rest of a truncated stack (the matcher's local walks). */
typedef struct gnode {
    uint32_t pos, parent;
    uint32_t stamp;          /* expansion visit mark */
    uint32_t dist;           /* min bytes to complete, UINT32_MAX: not computed */
} gnode;
#define GN_EMPTY   0u
#define GN_UNKNOWN 1u

/* A state: a set of stacks (node ids, sorted), interned. State 0 is dead. */
typedef struct gstate {
    uint32_t off, n;         /* nodes in the pool */
    uint64_t first[4];       /* bytes any stack can take next */
    uint32_t dist;           /* min bytes to complete (UINT32_MAX unknown, 0 complete) */
    uint32_t ctok;           /* tokens of the closing walk (UINT32_MAX unknown, - 1: none) */
    int32_t mask;            /* slot in the mask cache, -1 none */
    uint8_t has_first, has_end, has_unknown;
} gstate;

/* What a stack truncated to its top frames lets through (a local walk):
 * tokens accepted whatever is below, and those that need the rest of the
 * stack to tell (ranges of indices in the vocabulary's byte order). */
typedef struct glocal {
    uint32_t *acc, n_acc;    /* [2 * n_acc] half-open ranges */
    uint32_t *unc, n_unc;
} glocal;

/* Open-addressing hash map uint64 -> uint32 (key 0 is reserved: keys are
 * stored + 1). */
typedef struct gmap {
    uint64_t *key;
    uint32_t *val;
    uint64_t cap, n;
} gmap;

struct pk_grammar {
    /* ---- compiled (text/grammar.c) ---- */
    gelem *el;               /* [n_el] */
    uint32_t n_el;
    uint32_t *alt;           /* [n_alt] first element of each alternative */
    uint32_t n_alt;
    uint32_t *rule_alt;      /* [n_rule + 1] */
    uint32_t n_rule;
    char **rule_name;        /* [n_rule] */
    uint64_t (*sets)[4];     /* [n_set] byte sets */
    uint32_t n_set;
    uint32_t *minsuf;        /* [n_el] min bytes from element i to the end of its alternative */
    uint32_t root;

    /* ---- matcher (text/grammar_match.c) ---- */
    const pk_vtrie *vt;      /* NULL: strings only */
    gnode *node;
    uint32_t n_node, cap_node;
    gmap node_map;           /* (pos, parent) -> node */
    uint32_t stamp;
    uint32_t *pool;          /* states' node lists */
    uint64_t n_pool, cap_pool;
    gstate *st;
    uint32_t n_st, cap_st;
    gmap st_map;             /* hash of node list -> state (chained through st_next) */
    uint32_t *st_next;
    gmap trans;              /* (state << 8 | byte) -> state */
    gmap local_map;          /* truncated node -> index in local[] */
    glocal *local;
    uint32_t n_local, cap_local;
    uint32_t *work, *out;    /* scratch node lists */
    uint32_t cap_work, cap_out;
    uint32_t start;          /* the initial state */
    int overflow;            /* a limit was hit: message in overflow_msg */
    char overflow_msg[160];
    /* mask cache: allowed tokens by id, a ring of slots */
    uint64_t *mask_bits;     /* [n_mask_slots * mask_words] */
    uint32_t *mask_owner;    /* state of each slot */
    uint32_t n_mask_slots, mask_words, mask_next;
    uint64_t *sbits;         /* scratch: bits by sorted index */
    uint32_t *path;          /* scratch: states along a token's bytes */
    uint32_t cap_path;
};

/* text/grammar_match.c: the hash map (MISS: UINT32_MAX when absent; put
 * returns -1 out of memory), and the matcher's tables, set up once compiled. */
uint32_t pk_gmap_get(const gmap *m, uint64_t k);
int pk_gmap_put(gmap *m, uint64_t k, uint32_t v);
void pk_gmap_free(gmap *m);
int pk_grammar_match_init(pk_grammar *g, pk_error *err);
void pk_grammar_match_free(pk_grammar *g);

#endif
