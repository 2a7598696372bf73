/* TextTokenizer's insides, shared by text_tokenizer.c (encode, decode, the
 * interface), tokenizer_json.c (reading tokenizer.json) and chat.c. Private to nn/. */
#ifndef ATTENTION_TEXT_TOKENIZER_IMPL_H
#define ATTENTION_TEXT_TOKENIZER_IMPL_H

#include "text_tokenizer.h"
#include "tokenizer_impl.h"

typedef struct {
    char *content; /* UTF-8, NUL-terminated */
    size_t len;
    int32_t id;
    bool special;
} text_added;

struct TextTokenizer {
    Tokenizer *bpe;       /* the model's BPE: ids 0..bpe->n_vocab-1 */
    bool json;            /* from tokenizer.json (else GPT-2's files) */
    bool nfc;             /* normalizer NFC */
    int32_t n_vocab;      /* the BPE's and the added tokens' */
    text_added *added;    /* sorted by content's first byte, then longest first */
    int32_t n_added;
    int32_t first_added[257]; /* added tokens starting with byte b: added[first_added[b] .. first_added[b + 1]) */
    int32_t *added_of_id; /* id -> index in added, or -1 (n_vocab entries) */
    int32_t *prefix, *suffix; /* the post-processor's ids around the text */
    int32_t n_prefix, n_suffix;
};

TextTokenizer *text_tokenizer_alloc(void);

#endif
