/* GPT-2's byte-level BPE tokenizer (tiktoken's "gpt2" encoding), a BPE trainer
 * that writes the same files, and the book's text-to-batches pipeline (data.h).
 *
 *     Python (the book: tiktoken)                         C
 *     tokenizer = tiktoken.get_encoding("gpt2")           Tokenizer *tokenizer = tokenizer_load(dir, err, sizeof err);
 *     ids = tokenizer.encode(text,                        Tensor *ids = tokenizer_encode(tokenizer, text, len,
 *               allowed_special={"<|endoftext|>"})                TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
 *     text = tokenizer.decode(ids)                        char *text = tokenizer_decode(tokenizer, ids, n, &len, err, sizeof err);
 *     tokenizer.n_vocab, tokenizer.eot_token              tokenizer_n_vocab(tokenizer), tokenizer_eot_id(tokenizer)
 *     (minbpe) tok.train(text, 256 + n)                   tokenizer_train(text, len, n, err, sizeof err)
 *
 * How text becomes ids: "<|endoftext|>" is the special token (50256 in GPT-2)
 * where allowed and the pieces between are tokenized alone; a piece is split
 * into words by GPT-2's pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with Unicode's classes (\s is the White_Space property, not isspace: U+001C..
 * U+001F are not spaces); each word's UTF-8 bytes are merged by BPE: while some
 * adjacent pair is a merge, every non-overlapping occurrence (left to right) of
 * the pair of lowest rank is merged. ../shared/pytorch/gpt2_tokenizer.py is the
 * reference.
 *
 * Memory: a Tokenizer is long-lived (tokenizer_free); what encode and decode
 * return lives in the arena, as every tensor a computation makes. A tokenizer
 * keeps a cache of words it has encoded, so one is used by one thread at a time.
 * Loading and decoding never call the error handler for bad files or ids: they
 * return NULL with a message in err naming the file and line, or the id. */
#ifndef ATTENTION_TOKENIZER_H
#define ATTENTION_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct Tokenizer Tokenizer;

/* DIR/encoder.json + DIR/vocab.bpe (OpenAI's and tiktoken's names), or
 * DIR/vocab.json + DIR/merges.txt (Hugging Face's: the same content). */
Tokenizer *tokenizer_load(const char *dir, char *err, size_t errlen);
Tokenizer *tokenizer_load_files(const char *encoder_json, const char *vocab_bpe, char *err, size_t errlen);
/* The same from memory; the names are what messages call the two files. */
Tokenizer *tokenizer_load_memory(const char *encoder, size_t encoder_len, const char *merges, size_t merges_len,
                                 const char *encoder_name, const char *merges_name, char *err, size_t errlen);

/* Learns num_merges merges from text (UTF-8) with GPT-2's pre-tokenizer, as
 * minbpe's RegexTokenizer.train does: the words are never merged across, and
 * the pair merged next is the most frequent one; of pairs equally frequent,
 * the one that occurs first in the text (as it stands after the merges so
 * far). Ids 0-255 are the bytes in GPT-2's order (its encoder.json's first 256
 * tokens), merge r is id 256 + r, and "<|endoftext|>" is the last id (as
 * GPT-2's 50256 = 256 + 50000); an "<|endoftext|>" in text splits it. Stops
 * early when no pair is left. */
Tokenizer *tokenizer_train(const char *text, size_t len, int64_t num_merges, char *err, size_t errlen);
/* Writes DIR/encoder.json and DIR/vocab.bpe in GPT-2's format (DIR must exist). */
bool tokenizer_save(const Tokenizer *tok, const char *dir, char *err, size_t errlen);
void tokenizer_free(Tokenizer *tok);

int64_t tokenizer_n_vocab(const Tokenizer *tok);
int64_t tokenizer_n_merges(const Tokenizer *tok);
int64_t tokenizer_eot_id(const Tokenizer *tok);   /* "<|endoftext|>"'s id; -1 if the vocabulary has none */
/* Token id's bytes (not NUL-terminated, owned by the tokenizer); NULL if out of range. */
const char *tokenizer_token_bytes(const Tokenizer *tok, int64_t id, size_t *len);
/* Merge `rank` (0 first): *left + *right -> the returned id; -1 if out of range. */
int64_t tokenizer_merge(const Tokenizer *tok, int64_t rank, int64_t *left, int64_t *right);

typedef enum {
    TOKENIZER_ALLOW_SPECIAL,    /* allowed_special={"<|endoftext|>"} (the book): it is the special id */
    TOKENIZER_SPECIAL_AS_TEXT,  /* disallowed_special=(): it is ordinary text */
    TOKENIZER_DISALLOW_SPECIAL  /* tiktoken's default: text containing it is an error */
} tokenizer_special;

/* (n,) int64 ids in the arena; NULL with a message for text that is not UTF-8
 * (naming the byte) or a disallowed special token. */
Tensor *tokenizer_encode(Tokenizer *tok, const char *text, size_t len, tokenizer_special special, char *err,
                         size_t errlen);
/* The text of n ids, NUL-terminated, in the arena (*len bytes, if len): bytes
 * that do not form UTF-8 (ids that split a character) become U+FFFD, as
 * Python's bytes.decode("utf-8", errors="replace") in tiktoken's decode.
 * NULL with a message for an id out of range. */
char *tokenizer_decode(const Tokenizer *tok, const int64_t *ids, int64_t n, size_t *len, char *err, size_t errlen);

/* The pre-tokenizer alone: where the word that starts at text[i] ends (i < len;
 * text valid UTF-8, as encode checks first). Words never cross "<|endoftext|>"
 * because encode splits the text there first. */
size_t tokenizer_next_word(const char *text, size_t len, size_t i);

/* The Unicode version of the pre-tokenizer's tables ("15.0.0"). */
const char *tokenizer_unicode_version(void);

#ifdef __cplusplus
}
#endif

#endif
