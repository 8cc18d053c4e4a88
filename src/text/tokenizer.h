/* text/tokenizer.h - text <-> token ids, from the vocabulary stored in a GGUF file
 * (tokenizer.ggml.* keys, as llama.cpp writes them).
 *
 * Supports byte-level BPE (tokenizer.ggml.model = "gpt2") with the
 * pre-tokenizers named by tokenizer.ggml.pre (qwen2/qwen3/qwen35, llama3/
 * llama-bpe, gpt-2, deepseek-llm, deepseek-coder, falcon, mpt, starcoder,
 * refact, ...), Gemma-4's BPE over SentencePiece-style text ("gemma4"),
 * SentencePiece-style BPE ("llama") and WordPiece ("bert").
 * Special/control tokens are matched in text when parse_special is set.
 */
#ifndef PK_TOKENIZER_H
#define PK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "gguf/gguf.h"

typedef struct pk_tokenizer pk_tokenizer;

/* Build a tokenizer from f's tokenizer.ggml.* keys. The tokenizer copies what
 * it needs: f may be closed afterwards. Fails with a message naming the key
 * for a missing or malformed vocabulary, an unknown model or pre-tokenizer. */
int pk_tokenizer_load(const gguf_file *f, pk_tokenizer **out, pk_error *err);
void pk_tokenizer_free(pk_tokenizer *t);

/* Tokenize len bytes of text. add_special: add BOS/EOS as the GGUF keys say
 * (tokenizer.ggml.add_bos_token / add_eos_token, with the model's defaults).
 * parse_special: text matching a special/control token's content becomes that
 * token. Writes at most max ids; returns the total count needed (which may be
 * > max: call again with a bigger buffer), or -PK_ERR_* on error. */
int pk_tokenize(const pk_tokenizer *t, const char *text, size_t len,
                int32_t *out, int max, int add_special, int parse_special);

/* The bytes a token stands for when detokenized (byte-level decoding applied,
 * SentencePiece's U+2581 turned into a space). Control tokens give "" unless
 * render_special, except the markers an answer's channels are told apart by
 * (gemma4's <|channel>, <channel|>, <|tool_call>, <tool_call|>; harmony's are
 * user-defined tokens): their text. Writes at most buflen bytes (no NUL); returns the full
 * length, or -PK_ERR_ARG for an id out of range. */
int pk_token_to_piece(const pk_tokenizer *t, int32_t id, char *buf, int buflen,
                      int render_special);

int pk_tokenizer_n_vocab(const pk_tokenizer *t);
int32_t pk_tokenizer_bos(const pk_tokenizer *t);   /* -1 if none */
int32_t pk_tokenizer_eos(const pk_tokenizer *t);   /* -1 if none */
/* 1 if id ends generation (EOS, EOT, EOM or any token marked end-of-gen). */
int pk_tokenizer_is_eog(const pk_tokenizer *t, int32_t id);
/* The stored text of a token (for diagnostics), NULL if out of range. */
const char *pk_tokenizer_text(const pk_tokenizer *t, int32_t id);

#endif
