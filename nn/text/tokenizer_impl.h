/* The tokenizer's insides, shared by tokenizer.c (encode, decode),
 * tokenizer_files.c (GPT-2's two files) and bpe_train.c. Private to nn/. */
#ifndef ATTENTION_TOKENIZER_IMPL_H
#define ATTENTION_TOKENIZER_IMPL_H

#include "tokenizer.h"

#define TOK_EOT_TEXT "<|endoftext|>"
#define TOK_EOT_LEN 13

/* A cached word: its bytes at cache_bytes[boff..boff+blen), its ids at cache_ids[ioff..ioff+n). */
typedef struct { uint64_t hash; uint32_t boff, blen, ioff, n; } tok_cached;

struct Tokenizer {
    int32_t n_vocab;
    char *bytes;          /* every token's bytes, one after another */
    int64_t *off;         /* token i is bytes[off[i] .. off[i + 1]) */
    int32_t *by_bytes;    /* open addressing over the tokens' bytes: an id or -1 */
    uint32_t by_bytes_mask;
    int32_t byte_id[256]; /* the token of each single byte */
    int32_t eot;          /* "<|endoftext|>", or -1 */
    int max_digits;       /* 0: GPT-2's pattern; else Llama 3's Split regex with \p{N}{1,max_digits} */
    bool ignore_merges;   /* tokenizer.json's model.ignore_merges: a word in the vocabulary is its token */
    int32_t n_merges, merges_cap;
    int32_t *merge_left, *merge_right, *merge_id; /* merge r: left + right -> id */
    uint64_t *pair_key;   /* open addressing: (left << 32 | right) + 1, 0 empty */
    int32_t *pair_rank;
    uint32_t pair_mask;
    /* the word cache (bounded: cleared when full) */
    tok_cached *cache;
    uint32_t cache_mask, cache_used;
    char *cache_bytes;
    int32_t *cache_ids;
    size_t cache_bytes_used, cache_ids_used, cache_bytes_cap, cache_ids_cap;
};

/* GPT-2's bytes_to_unicode: the character that spells byte b in the files. */
uint32_t tok_byte_char(int b);
/* The byte a character spells, or -1 if it is not one of the 256. */
int tok_char_byte(uint32_t cp);
/* GPT-2's id order of the 256 bytes: the printable ones, then the others. */
int tok_gpt2_byte_order(int i);

uint64_t tok_hash(const char *s, size_t n);
Tokenizer *tok_alloc(void);
/* Takes the vocabulary (ids 0..n-1, token i at bytes[off[i]..off[i+1]), both
 * malloc'd, owned from now on): builds the lookups; false with a message for
 * two ids of the same bytes or a byte without a token. */
bool tok_set_vocab(Tokenizer *t, int32_t n, char *bytes, int64_t *off, char *err, size_t errlen);
int32_t tok_find(const Tokenizer *t, const char *s, size_t n); /* id of these bytes, or -1 */
/* Appends merge (left, right) as the next rank. */
typedef enum { TOK_MERGE_OK, TOK_MERGE_NO_RESULT, TOK_MERGE_DUPLICATE, TOK_MERGE_NOMEM } tok_merge_status;
tok_merge_status tok_add_merge(Tokenizer *t, int32_t left, int32_t right, int32_t *other_rank);
int32_t tok_pair_rank(const Tokenizer *t, int32_t left, int32_t right); /* -1: not a merge */

/* The code point at s[i] of text known to be valid UTF-8; *len its bytes. */
uint32_t tok_utf8_at(const unsigned char *s, size_t i, int *len);
/* The first "<|endoftext|>" in s[0..n), or NULL. */
const char *tok_find_eot(const char *s, size_t n);
/* raw[0..n) as text in the arena, NUL-terminated (*len bytes, if len): each
 * maximal part of an ill-formed sequence becomes U+FFFD (errors="replace"). */
char *tok_utf8_replace(const unsigned char *raw, size_t n, size_t *len);
/* Validates UTF-8: the offset of the first bad byte, or n. */
size_t tok_utf8_check(const char *s, size_t n);

/* Llama 3's and Qwen3's pre-tokenizer (tokenizer.c says which regex): where the
 * word that starts at text[i] ends (text valid UTF-8, i < len). */
size_t tok_next_word_split(const char *text, size_t len, size_t i, int max_digits);

/* Ids as they are made: encode's words (pre-tokenizer, then BPE) appended. */
typedef struct tok_out tok_out;
tok_out *tok_out_new(void); /* NULL: no memory */
void tok_out_free(tok_out *o);
bool tok_out_reserve(tok_out *o, size_t more);
bool tok_out_push(tok_out *o, int32_t id);
int32_t *tok_out_ids(tok_out *o, size_t *n);
/* Text s[0..n) (valid UTF-8) split into words by the tokenizer's pattern, each
 * word's BPE ids appended; false when out of memory. */
bool tok_encode_words(Tokenizer *t, const char *s, size_t n, tok_out *o);

#endif
