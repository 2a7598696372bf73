/* The Unicode classes GPT-2's pre-tokenizer splits on (private to nn/):
 * \p{L}, \p{N} and \s (the White_Space property), everything else "other".
 * The ranges are generated from the Unicode Character Database by
 * nn/text/gen_unicode.py into unicode_tables.c (unicode_version says which). */
#ifndef ATTENTION_UNICODE_H
#define ATTENTION_UNICODE_H

#include <stdint.h>

enum { UC_OTHER = 0, UC_LETTER = 1, UC_NUMBER = 2, UC_SPACE = 3 };

typedef struct { uint32_t lo, hi; unsigned char cls; } unicode_range;
extern const unicode_range unicode_ranges[]; /* sorted, disjoint; what is not in one is UC_OTHER */
extern const int unicode_n_ranges;
extern const char unicode_version[];

int unicode_class(uint32_t cp); /* UC_* of a code point */

#endif
