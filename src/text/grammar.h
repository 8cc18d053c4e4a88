/* text/grammar.h - GBNF grammars (as llama.cpp's `grammar` field takes them)
 * compiled to byte-level pushdown matchers, and the set of vocabulary tokens
 * a grammar allows next.
 *
 * Three pieces:
 *   - the vocabulary trie (pk_vtrie): every token's bytes (as detokenized) in
 *     byte order, as a trie, built once per model (model/model.c keeps it);
 *   - the grammar (pk_grammar, text/grammar.c): parsed, checked (undefined
 *     rules, left recursion, rules that can never end, limits) and compiled
 *     to rules over bytes;
 *   - the matcher (text/grammar_match.c): states are interned sets of parse
 *     stacks (hash-consed linked nodes), advanced byte by byte with a
 *     memoised transition table; the tokens a state allows are the union,
 *     over its stacks, of what a walk of the trie from the stack's top
 *     frames accepts (cached per truncated stack), plus the tokens whose
 *     fate depends on the rest of the stack, checked one by one.
 * The public side (pk_grammar_new, pk_json_schema_to_grammar, the
 * sampler's grammar) is in include/pocket.h; docs/grammars.md says what is
 * supported. A grammar is used by one thread at a time: matching fills its
 * caches.
 */
#ifndef PK_GRAMMAR_H
#define PK_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "pocket.h"
#include "text/tokenizer.h"

/* ---- the vocabulary trie ---------------------------------------------- */
typedef struct pk_vtrie pk_vtrie;

/* Build the trie of t's tokens as pk_token_to_piece renders them (control
 * tokens that render as nothing are left out: a grammar over bytes never
 * allows them; end-of-generation tokens are recorded apart). */
int pk_vtrie_build(const pk_tokenizer *t, pk_vtrie **out, pk_error *err);
/* The same from any vocabulary of nv tokens: piece(ctx, id, buf, cap) gives
 * a token's bytes as pk_token_to_piece does, is_eog(ctx, id) whether it
 * ends generation (the benchmark makes vocabularies this way). */
int pk_vtrie_build_fn(int nv, int (*piece)(const void *ctx, int32_t id, char *buf, int cap),
                      int (*is_eog)(const void *ctx, int32_t id), const void *ctx, pk_vtrie **out, pk_error *err);
void pk_vtrie_free(pk_vtrie *v);
int pk_vtrie_n_vocab(const pk_vtrie *v);
/* Tokens with bytes, and trie nodes (for the benchmark's report). */
void pk_vtrie_stats(const pk_vtrie *v, int *n_tokens, int *n_nodes);

/* ---- the grammar ------------------------------------------------------ */

/* Parse and compile len bytes of GBNF with start rule root (NULL: "root")
 * for vocabulary v (NULL: the grammar can only match strings). Errors:
 * PK_ERR_ARG with "grammar: line L, column C: what" for bad syntax,
 * "grammar: rule 'x' ..." for undefined, left-recursive or never-ending
 * rules and exceeded limits; PK_ERR_NOMEM. */
int pk_grammar_compile(const char *gbnf, size_t len, const char *root, const pk_vtrie *v,
                       pk_grammar **out, pk_error *err);

/* ---- matching (states are ids into g's tables; 0 is dead) ------------- */
uint32_t pk_grammar_start(pk_grammar *g);
/* The state after n more bytes (0: they are not allowed, or a limit was
 * hit: pk_grammar_overflow says). */
uint32_t pk_grammar_advance(pk_grammar *g, uint32_t st, const char *s, size_t n);
/* The state after token id (0: not allowed; end-of-generation tokens and
 * tokens without bytes are never allowed here). */
uint32_t pk_grammar_advance_token(pk_grammar *g, uint32_t st, int32_t id);
/* Whether the grammar may end in st (its root is complete). */
int pk_grammar_can_end(pk_grammar *g, uint32_t st);
/* Whether st allows nothing but the end. */
int pk_grammar_must_end(pk_grammar *g, uint32_t st);
/* The fewest bytes that complete the grammar from st (0: complete). */
uint32_t pk_grammar_distance(pk_grammar *g, uint32_t st);
/* The allowed tokens of st as bits by token id ([n_vocab / 64 rounded up]
 * words; end-of-generation tokens not included), owned by g and valid until
 * the next call on g; NULL without a vocabulary or when a limit was hit. */
const uint64_t *pk_grammar_mask(pk_grammar *g, uint32_t st);
/* A token on a shortest way from st to the end (each of its bytes one byte
 * closer): the longest found by following the first such byte down the
 * vocabulary's trie, or -1. */
int32_t pk_grammar_closing_token(pk_grammar *g, uint32_t st);
/* The tokens of the walk from st along closing tokens to the end (0:
 * complete; UINT32_MAX - 1: no such walk): a count of tokens that surely
 * completes the grammar, at most its distance in bytes. */
uint32_t pk_grammar_closing_tokens(pk_grammar *g, uint32_t st);
/* The message of the limit hit while matching, or NULL. */
const char *pk_grammar_overflow(const pk_grammar *g);
/* The vocabulary a grammar was compiled for (NULL: none). */
const pk_vtrie *pk_grammar_vtrie(const pk_grammar *g);
/* Whether id ends generation (in the trie's vocabulary); the list of them. */
int pk_vtrie_is_eog(const pk_vtrie *v, int32_t id);
const int32_t *pk_vtrie_eog_ids(const pk_vtrie *v, int *n);

/* ---- JSON schema (text/json_schema.c) ---------------------------------- */
/* The GBNF of len bytes of JSON schema (docs/grammars.md: what is
 * supported; flags: PK_SCHEMA_LENIENT); *out is malloc'ed. name NULL: a
 * whole grammar (start rule root); else rules all named name-..., the
 * value's rule name (pk_json_schema_to_rules). PK_ERR_ARG naming the keyword and where it
 * is ("/properties/age") for what is not supported or not valid. */
/* Internal flag beside PK_SCHEMA_LENIENT: strings never write '<' as it
 * is (\u003c instead), for JSON inside text that ends at a marker. */
#define PK_SCHEMA_NO_LT 0x100
/* Internal flag: values written as Gemma-4's tool calls write them (keys
 * bare, or between <|"|> markers when they cannot be; strings between
 * <|"|> markers; numbers, true / false / null as JSON; no white space;
 * object keys in the template's order, dictsort's). An unbounded string's
 * text is the rule PK_SCHEMA_GEMMA4_TEXT "-0", which the caller writes (any
 * text without <|"|>: text/toolcall_grammar.c); a bounded one has no '<'. */
#define PK_SCHEMA_GEMMA4 0x200
#define PK_SCHEMA_GEMMA4_TEXT "gemma-text"
int pk_json_schema_gbnf(const char *schema, size_t len, int flags, const char *name, char **out, pk_error *err);

#endif
