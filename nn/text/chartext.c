/* A text as characters: UTF-8 decoding, the vocabulary, encode and decode
 * (see chartext.h). The project's one UTF-8 decoder and encoder. */
#include <stdlib.h>
#include <string.h>

#include "chartext.h"
#include "extend.h"

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int chartext_utf8_next(const char *s, size_t len, uint32_t *cp) { return ac_utf8_next(s, len, cp); }

bool chartext_init(CharText *ct, const char *bytes, size_t len, char *err, size_t errlen) {
    memset(ct, 0, sizeof *ct);
    uint32_t *cps = ac_calloc(len, sizeof(uint32_t));
    int64_t n = 0;
    for (size_t i = 0; i < len;) {
        int k = chartext_utf8_next(bytes + i, len - i, &cps[n]);
        if (k == 0) {
            snprintf(err, errlen, "invalid UTF-8 at byte %zu", i);
            free(cps);
            return false;
        }
        i += (size_t)k;
        n++;
    }
    uint32_t *sorted = ac_calloc((size_t)n, sizeof(uint32_t));
    memcpy(sorted, cps, sizeof(uint32_t) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(uint32_t), cmp_u32);
    int64_t v = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) sorted[v++] = sorted[i];
    ct->vocab_size = v;
    ct->chars = sorted;
    ct->n = n;
    ac_mark m = ac_arena_mark();
    Tensor *d = torch_empty(SHAPE(n), AC_INT64);
    int64_t *dp = d->data;
    for (int64_t i = 0; i < n; i++) dp[i] = chartext_encode_char(ct, cps[i]);
    ct->data = ac_persist(d);
    ac_arena_release(m);
    free(cps);
    return true;
}

void chartext_free(CharText *ct) {
    free(ct->chars);
    if (ct->data) ac_free(ct->data);
    memset(ct, 0, sizeof *ct);
}

int64_t chartext_encode_char(const CharText *ct, uint32_t cp) {
    int64_t lo = 0, hi = ct->vocab_size;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (ct->chars[mid] < cp) lo = mid + 1; else hi = mid;
    }
    return lo < ct->vocab_size && ct->chars[lo] == cp ? lo : -1;
}

int chartext_utf8_put(uint32_t c, char *out) { return ac_utf8_put(c, out); }

int chartext_decode(const CharText *ct, int64_t token, char out[5]) {
    int n = chartext_utf8_put((token >= 0 && token < ct->vocab_size) ? ct->chars[token] : 0xFFFD, out);
    out[n] = 0;
    return n;
}

