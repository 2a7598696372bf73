/* NFC (unicode_nfc.h): the quick check, then, where it does not say yes,
 * UAX #15's three steps: full canonical decomposition, canonical ordering,
 * canonical composition (Hangul by arithmetic, the rest by the tables). */
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "tensor.h"
#include "tokenizer_impl.h"
#include "unicode_nfc.h"

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21, TCOUNT = 28,
       NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int range_value(const nfc_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return r[mid].v;
    }
    return 0;
}

/* Below U+0300 every character is a starter that the quick check passes. */
static inline int ccc_of(uint32_t cp) { return cp < 0x300 ? 0 : range_value(nfc_ccc, nfc_n_ccc, cp); }

static const nfc_decomp *decomp_of(uint32_t cp) {
    int lo = 0, hi = nfc_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < nfc_decomps[mid].cp) hi = mid - 1;
        else if (cp > nfc_decomps[mid].cp) lo = mid + 1;
        else return &nfc_decomps[mid];
    }
    return NULL;
}

static uint32_t compose(uint32_t a, uint32_t b) { /* 0: none */
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = nfc_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const nfc_comp *c = &nfc_comps[mid];
        if (a < c->a || (a == c->a && b < c->b)) hi = mid - 1;
        else if (a > c->a || b > c->b) lo = mid + 1;
        else return c->c;
    }
    return 0;
}

/* A safe boundary: a starter that the quick check passes never combines with
 * what precedes it, nor moves: NFC(a + b) = NFC(a) + NFC(b) when b starts with one. */
static inline bool safe_at(uint32_t cp) {
    if (cp < 0x20000) return !(nfc_unsafe[cp >> 5] >> (cp & 31) & 1);
    return ccc_of(cp) == 0 && !range_value(nfc_qc, nfc_n_qc, cp);
}

/* UAX #15's quick check from s[i] on: the offset of the first character it
 * does not pass (a No or Maybe, or a mark of a lower class than the one before),
 * or n; *safe is the last safe boundary at or before it. ASCII goes 8 bytes at
 * a time, other characters by the bitmap. */
static size_t quick_fail(const unsigned char *s, size_t n, size_t i, size_t *safe) {
    int last = 0;
    *safe = i;
    while (i < n) {
        if (s[i] < 0x80) {
            size_t j = i + 1;
            uint64_t w;
            while (j + 8 <= n && (memcpy(&w, s + j, 8), !(w & 0x8080808080808080ULL))) j += 8;
            while (j < n && s[j] < 0x80) j++;
            last = 0, *safe = j - 1, i = j;
            continue;
        }
        int k;
        uint32_t cp = tok_utf8_at(s, i, &k);
        if (safe_at(cp)) {
            last = 0, *safe = i, i += (size_t)k;
            continue;
        }
        int c = ccc_of(cp);
        if ((c && last > c) || range_value(nfc_qc, nfc_n_qc, cp)) return i;
        if (c == 0) *safe = i;
        last = c;
        i += (size_t)k;
    }
    return n;
}

static size_t put_utf8(char *o, uint32_t cp) { return (size_t)ac_utf8_put(cp, o); }

/* NFC of s[0..n) into out (room for 3n bytes: NFC grows UTF-8 at most 3x); d: room for 4n code points. */
static size_t nfc_region(const unsigned char *s, size_t n, uint32_t *d, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        int k;
        uint32_t cp = tok_utf8_at(s, i, &k);
        i += (size_t)k;
        if (cp >= SBASE && cp < SBASE + SCOUNT) {
            uint32_t si = cp - SBASE;
            d[m++] = LBASE + si / NCOUNT;
            d[m++] = VBASE + si % NCOUNT / TCOUNT;
            if (si % TCOUNT) d[m++] = TBASE + si % TCOUNT;
            continue;
        }
        const nfc_decomp *e = cp < 0xC0 ? NULL : decomp_of(cp);
        if (!e) d[m++] = cp;
        else
            for (int j = 0; j < e->n; j++) d[m++] = e->to[j];
    }
    /* canonical ordering: a stable sort of each run of non-starters by class */
    for (size_t i = 1; i < m; i++) {
        int c = ccc_of(d[i]);
        if (!c) continue;
        uint32_t x = d[i];
        size_t j = i;
        while (j > 0 && ccc_of(d[j - 1]) > c) d[j] = d[j - 1], j--;
        d[j] = x;
    }
    /* composition: each character joins the last starter unless blocked (a
     * character between them of a class >= its own, or a starter between) */
    size_t r = 0, starter = 0;
    int last = 256; /* no starter yet: nothing composes */
    for (size_t i = 0; i < m; i++) {
        uint32_t cp = d[i];
        int c = ccc_of(cp);
        if (last != 256 && (last == 0 || last < c)) {
            uint32_t x = compose(d[starter], cp);
            if (x) {
                d[starter] = x;
                continue;
            }
        }
        if (c == 0) starter = r, last = 0;
        else if (last != 256) last = c;
        d[r++] = cp;
    }
    size_t k = 0;
    for (size_t i = 0; i < r; i++) k += put_utf8(out + k, d[i]);
    return k;
}

/* The text is copied as it is up to the last safe boundary before a character
 * the quick check does not pass, normalized from there to the next safe
 * boundary after it, and so on: the work is where the text is not NFC. */
char *unicode_nfc(const char *text, size_t n, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)text;
    size_t safe, bad = quick_fail(s, n, 0, &safe);
    if (bad == n) return NULL;
    char *out = ac_try_malloc(ac_size_mul(n, 3) + 1);
    uint32_t *d = NULL;
    size_t dcap = 0, k = 0, done = 0;
    while (out && bad < n) {
        size_t end = bad; /* the region: [safe, the first safe boundary after bad) */
        int len;
        tok_utf8_at(s, end, &len);
        for (end += (size_t)len; end < n; end += (size_t)len)
            if (safe_at(tok_utf8_at(s, end, &len))) break;
        if (4 * (end - safe) > dcap) {
            free(d);
            dcap = 4 * (end - safe) + 64;
            if (!(d = ac_try_malloc(sizeof(uint32_t) * dcap))) break;
        }
        memcpy(out + k, text + done, safe - done), k += safe - done;
        k += nfc_region(s + safe, end - safe, d, out + k);
        done = end;
        bad = quick_fail(s, n, end, &safe);
    }
    if (!out || bad < n) {
        free(out), free(d);
        *out_len = SIZE_MAX;
        return NULL;
    }
    memcpy(out + k, text + done, n - done), k += n - done;
    out[k] = 0;
    free(d);
    *out_len = k;
    return out;
}
