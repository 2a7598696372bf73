/* A text as characters (chartext_*): decoding UTF-8 into a vocabulary of
 * code points, as toy_lm.py does with Python strings:
 *     chars = sorted(set(text)); stoi = {c: i}; data = [stoi[c] for c in text] */
#ifndef ATTENTION_CHARTEXT_H
#define ATTENTION_CHARTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t vocab_size;
    uint32_t *chars;   /* chars[i] is the code point of token i */
    int64_t n;         /* characters in the text */
    Tensor *data;      /* (n,) int64, long-lived */
} CharText;

/* Decode `bytes` (not NUL-terminated); false and a message in err on invalid UTF-8. */
bool chartext_init(CharText *ct, const char *bytes, size_t len, char *err, size_t errlen);
void chartext_free(CharText *ct);
int64_t chartext_encode_char(const CharText *ct, uint32_t codepoint); /* -1 if not in the vocabulary */
int chartext_decode(const CharText *ct, int64_t token, char out[5]);  /* UTF-8 bytes of a token */
/* One UTF-8 sequence at s (len bytes left) into *cp; returns its length, 0 if invalid. */
int chartext_utf8_next(const char *s, size_t len, uint32_t *cp);
/* Code point cp (<= U+10FFFF) as UTF-8 into out (up to 4 bytes, no NUL); returns its length. */
int chartext_utf8_put(uint32_t cp, char *out);

#ifdef __cplusplus
}
#endif

#endif
