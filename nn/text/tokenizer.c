/* GPT-2's BPE: the pre-tokenizer, the merges, the word cache, encode and
 * decode (tokenizer.h says what each does; ../shared/pytorch/gpt2_tokenizer.py
 * is the reference this follows step by step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chartext.h"
#include "tokenizer_impl.h"
#include "unicode.h"

/* ---- GPT-2's spelling of bytes ------------------------------------------------------
 * bytes_to_unicode(): the 188 printable bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF)
 * spell themselves, the other 68, in increasing order, U+0100, U+0101, ... */
static bool printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

uint32_t tok_byte_char(int b) {
    if (printable(b)) return (uint32_t)b;
    if (b <= 0x20) return 0x100u + (uint32_t)b;          /* 0x00-0x20: U+0100-U+0120 */
    if (b <= 0xA0) return 0x121u + (uint32_t)(b - 0x7F); /* 0x7F-0xA0: U+0121-U+0142 */
    return 0x143u;                                       /* 0xAD */
}

int tok_char_byte(uint32_t cp) {
    if (cp < 0x100) return printable((int)cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(cp - 0x121) + 0x7F;
    return cp == 0x143 ? 0xAD : -1;
}

int tok_gpt2_byte_order(int i) { /* the i-th token of GPT-2's encoder.json */
    if (i < 94) return 0x21 + i;
    if (i < 106) return 0xA1 + (i - 94);
    if (i < 188) return 0xAE + (i - 106);
    return tok_char_byte(0x100u + (uint32_t)(i - 188));
}

/* ---- Unicode classes ---------------------------------------------------------------- */
static const unsigned char ascii_class[128] = {
    ['\t'] = UC_SPACE, ['\n'] = UC_SPACE, ['\v'] = UC_SPACE, ['\f'] = UC_SPACE, ['\r'] = UC_SPACE, [' '] = UC_SPACE,
    ['0'] = UC_NUMBER, ['1'] = UC_NUMBER, ['2'] = UC_NUMBER, ['3'] = UC_NUMBER, ['4'] = UC_NUMBER,
    ['5'] = UC_NUMBER, ['6'] = UC_NUMBER, ['7'] = UC_NUMBER, ['8'] = UC_NUMBER, ['9'] = UC_NUMBER,
#define L(c) [c] = UC_LETTER
    L('A'), L('B'), L('C'), L('D'), L('E'), L('F'), L('G'), L('H'), L('I'), L('J'), L('K'), L('L'), L('M'),
    L('N'), L('O'), L('P'), L('Q'), L('R'), L('S'), L('T'), L('U'), L('V'), L('W'), L('X'), L('Y'), L('Z'),
    L('a'), L('b'), L('c'), L('d'), L('e'), L('f'), L('g'), L('h'), L('i'), L('j'), L('k'), L('l'), L('m'),
    L('n'), L('o'), L('p'), L('q'), L('r'), L('s'), L('t'), L('u'), L('v'), L('w'), L('x'), L('y'), L('z'),
#undef L
};

int unicode_class(uint32_t cp) {
    if (cp < 128) return ascii_class[cp];
    int lo = 0, hi = unicode_n_ranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_ranges[mid].lo) hi = mid - 1;
        else if (cp > unicode_ranges[mid].hi) lo = mid + 1;
        else return unicode_ranges[mid].cls;
    }
    return UC_OTHER;
}

const char *tokenizer_unicode_version(void) { return unicode_version; }

/* ---- UTF-8 ----------------------------------------------------------------------------
 * Validation is chartext_utf8_next's. Decoding with U+FFFD needs the
 * well-formed sequences (Unicode table 3-7) byte by byte: the second byte's
 * range depends on the first (no overlong forms, surrogates or code points past
 * U+10FFFF). *need: continuation bytes, [*lo, *hi]: the second byte's range. */
static bool utf8_lead(unsigned char b, int *need, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) *need = 1;
    else if (b >= 0xE0 && b <= 0xEF) *need = 2, *lo = b == 0xE0 ? 0xA0 : 0x80, *hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) *need = 3, *lo = b == 0xF0 ? 0x90 : 0x80, *hi = b == 0xF4 ? 0x8F : 0xBF;
    else return false;
    return true;
}

size_t tok_utf8_check(const char *s, size_t n) { /* chartext_utf8_next, with ASCII inline */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = (unsigned char)s[i] < 0x80 ? 1 : chartext_utf8_next(s + i, n - i, &cp);
        if (k == 0) return i;
        i += (size_t)k;
    }
    return n;
}

uint32_t tok_utf8_at(const unsigned char *s, size_t i, int *len) {
    unsigned char b = s[i];
    if (b < 0x80) { *len = 1; return b; }
    if (b < 0xE0) { *len = 2; return (uint32_t)(b & 0x1F) << 6 | (s[i + 1] & 0x3F); }
    if (b < 0xF0) { *len = 3; return (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F); }
    *len = 4;
    return (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 |
           (s[i + 3] & 0x3F);
}

static inline int class_at(const unsigned char *s, size_t i, int *len) {
    if (s[i] < 0x80) { *len = 1; return ascii_class[s[i]]; }
    return unicode_class(tok_utf8_at(s, i, len));
}

/* ---- the pre-tokenizer: GPT-2's pattern, alternative by alternative --------------- */
size_t tokenizer_next_word(const char *str, size_t n, size_t i) {
    const unsigned char *s = (const unsigned char *)str;
    int len;
    if (s[i] == '\'' && i + 1 < n) { /* 's|'t|'re|'ve|'m|'ll|'d (ASCII, case-sensitive) */
        unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    size_t start = s[i] == ' ' && i + 1 < n ? i + 1 : i; /* the optional leading space */
    int cls = class_at(s, start, &len);
    if (cls != UC_SPACE) { /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ */
        size_t end = start + (size_t)len;
        while (end < n && class_at(s, end, &len) == cls) end += (size_t)len;
        return end;
    }
    size_t end = i, last = i; /* \s+(?!\S) | \s+ */
    int count = 0;
    while (end < n && class_at(s, end, &len) == UC_SPACE) last = end, end += (size_t)len, count++;
    if (end < n && count > 1) end = last; /* the last space goes to the word that follows */
    return end;
}

/* ---- the pre-tokenizer of Llama 3 and Qwen3 (tokenizer.json's Split regex) -------------
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *     |\s*[\r\n]+|\s+(?!\S)|\s+
 * (Qwen3's has \p{N} for \p{N}{1,3}: max_digits 1). The alternatives in order,
 * each with the backtracking a regex engine would do. (?i) is Unicode's simple
 * case folding, as Rust's regex and Oniguruma do it: 's' also matches U+017F
 * (long s); no other letter of these has a third case. */
static inline bool fold_is(const unsigned char *s, size_t n, size_t i, char lower, size_t *next) {
    if (i >= n) return false;
    if (s[i] == (unsigned char)lower || s[i] == (unsigned char)(lower - 32)) { *next = i + 1; return true; }
    if (lower == 's' && i + 1 < n && s[i] == 0xC5 && s[i + 1] == 0xBF) { *next = i + 2; return true; }
    return false;
}

size_t tok_next_word_split(const char *str, size_t n, size_t i, int max_digits) {
    const unsigned char *s = (const unsigned char *)str;
    int len, len1;
    if (s[i] == '\'') {
        size_t j, k;
        if (fold_is(s, n, i + 1, 's', &j) || fold_is(s, n, i + 1, 't', &j) || fold_is(s, n, i + 1, 'm', &j) ||
            fold_is(s, n, i + 1, 'd', &j))
            return j;
        if ((fold_is(s, n, i + 1, 'r', &j) && fold_is(s, n, j, 'e', &k)) ||
            (fold_is(s, n, i + 1, 'v', &j) && fold_is(s, n, j, 'e', &k)) ||
            (fold_is(s, n, i + 1, 'l', &j) && fold_is(s, n, j, 'l', &k)))
            return k;
    }
    int cls = class_at(s, i, &len);
    size_t end = i + (size_t)len;
    if (cls == UC_LETTER || (cls != UC_NUMBER && s[i] != '\r' && s[i] != '\n' && end < n &&
                             class_at(s, end, &len1) == UC_LETTER)) { /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        while (end < n && class_at(s, end, &len) == UC_LETTER) end += (size_t)len;
        return end;
    }
    if (cls == UC_NUMBER) { /* \p{N}{1,max_digits} */
        for (int k = 1; k < max_digits && end < n && class_at(s, end, &len) == UC_NUMBER; k++) end += (size_t)len;
        return end;
    }
    size_t start = i;
    if (s[i] == ' ' && end < n && class_at(s, end, &len) == UC_OTHER) start = end; /* the optional space */
    if (class_at(s, start, &len) == UC_OTHER) { /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        end = start + (size_t)len;
        while (end < n && class_at(s, end, &len) == UC_OTHER) end += (size_t)len;
        while (end < n && (s[end] == '\r' || s[end] == '\n')) end++;
        return end;
    }
    /* whitespace from here: \s*[\r\n]+ ends after the run's last CR or LF; else
     * \s+(?!\S) leaves the run's last character to what follows (unless the run
     * ends the text or is one character long: then \s+ takes it all) */
    size_t last = i, crlf = 0;
    int count = 0;
    end = i;
    while (end < n && class_at(s, end, &len) == UC_SPACE) {
        if (s[end] == '\r' || s[end] == '\n') crlf = end + 1;
        last = end, end += (size_t)len, count++;
    }
    if (crlf) return crlf;
    if (end < n && count > 1) return last;
    return end;
}

/* ---- lookups ---------------------------------------------------------------------------- */
uint64_t tok_hash(const char *s, size_t n) { /* FNV-1a, 64 bits */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

static inline uint32_t pair_slot(uint64_t key, uint32_t mask) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
}

Tokenizer *tok_alloc(void) {
    Tokenizer *t = ac_try_malloc(sizeof *t);
    if (t) {
        memset(t, 0, sizeof *t);
        t->eot = -1;
    }
    return t;
}

int32_t tok_find(const Tokenizer *t, const char *s, size_t n) {
    if (!t->by_bytes) return -1;
    for (uint32_t h = (uint32_t)tok_hash(s, n) & t->by_bytes_mask;; h = (h + 1) & t->by_bytes_mask) {
        int32_t id = t->by_bytes[h];
        if (id < 0) return -1;
        if ((size_t)(t->off[id + 1] - t->off[id]) == n && memcmp(t->bytes + t->off[id], s, n) == 0) return id;
    }
}

bool tok_set_vocab(Tokenizer *t, int32_t n, char *bytes, int64_t *off, char *err, size_t errlen) {
    t->n_vocab = n, t->bytes = bytes, t->off = off;
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n) cap *= 2;
    if (!(t->by_bytes = ac_try_malloc(sizeof(int32_t) * cap))) {
        snprintf(err, errlen, "not enough memory for a vocabulary of %d tokens", (int)n);
        return false;
    }
    memset(t->by_bytes, 0xFF, sizeof(int32_t) * cap);
    t->by_bytes_mask = cap - 1;
    for (int32_t id = 0; id < n; id++) {
        const char *s = bytes + off[id];
        size_t len = (size_t)(off[id + 1] - off[id]);
        int32_t other = tok_find(t, s, len);
        if (other >= 0) {
            snprintf(err, errlen, "ids %d and %d are the same token", (int)other, (int)id);
            return false;
        }
        uint32_t h = (uint32_t)tok_hash(s, len) & t->by_bytes_mask;
        while (t->by_bytes[h] >= 0) h = (h + 1) & t->by_bytes_mask;
        t->by_bytes[h] = id;
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if ((t->byte_id[b] = tok_find(t, &c, 1)) < 0) {
            snprintf(err, errlen, "byte 0x%02X (spelled U+%04X) has no token: every byte needs one", b,
                     (unsigned)tok_byte_char(b));
            return false;
        }
    }
    t->eot = tok_find(t, TOK_EOT_TEXT, TOK_EOT_LEN);
    return true;
}

int32_t tok_pair_rank(const Tokenizer *t, int32_t left, int32_t right) {
    if (!t->pair_key) return -1;
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (uint32_t h = pair_slot(key, t->pair_mask);; h = (h + 1) & t->pair_mask) {
        if (t->pair_key[h] == key) return t->pair_rank[h];
        if (t->pair_key[h] == 0) return -1;
    }
}

static void pair_insert(uint64_t *keys, int32_t *ranks, uint32_t mask, uint64_t key, int32_t rank) {
    uint32_t h = pair_slot(key, mask);
    while (keys[h]) h = (h + 1) & mask;
    keys[h] = key, ranks[h] = rank;
}

tok_merge_status tok_add_merge(Tokenizer *t, int32_t left, int32_t right, int32_t *other_rank) {
    size_t ll = (size_t)(t->off[left + 1] - t->off[left]), lr = (size_t)(t->off[right + 1] - t->off[right]);
    char small[256], *cat = ll + lr <= sizeof small ? small : ac_try_malloc(ll + lr);
    if (!cat) return TOK_MERGE_NOMEM;
    memcpy(cat, t->bytes + t->off[left], ll);
    memcpy(cat + ll, t->bytes + t->off[right], lr);
    int32_t id = tok_find(t, cat, ll + lr);
    if (cat != small) free(cat);
    if (id < 0) return TOK_MERGE_NO_RESULT;
    int32_t r = tok_pair_rank(t, left, right);
    if (r >= 0) {
        *other_rank = r;
        return TOK_MERGE_DUPLICATE;
    }
    if (t->n_merges == t->merges_cap) {
        int32_t cap = t->merges_cap ? 2 * t->merges_cap : 1024;
        int32_t *a = ac_try_realloc(t->merge_left, sizeof(int32_t) * (size_t)cap);
        if (a) t->merge_left = a;
        int32_t *b = a ? ac_try_realloc(t->merge_right, sizeof(int32_t) * (size_t)cap) : NULL;
        if (b) t->merge_right = b;
        int32_t *c = b ? ac_try_realloc(t->merge_id, sizeof(int32_t) * (size_t)cap) : NULL;
        if (!c) return TOK_MERGE_NOMEM;
        t->merge_id = c, t->merges_cap = cap;
    }
    if (!t->pair_key || 2u * ((uint32_t)t->n_merges + 1) > t->pair_mask + 1) { /* keep the table half empty */
        uint32_t cap = t->pair_key ? 2 * (t->pair_mask + 1) : 4096;
        uint64_t *keys = ac_try_malloc(sizeof(uint64_t) * cap);
        int32_t *ranks = keys ? ac_try_malloc(sizeof(int32_t) * cap) : NULL;
        if (!ranks) {
            free(keys);
            return TOK_MERGE_NOMEM;
        }
        memset(keys, 0, sizeof(uint64_t) * cap);
        for (int32_t k = 0; k < t->n_merges; k++)
            pair_insert(keys, ranks, cap - 1, ((uint64_t)(uint32_t)t->merge_left[k] << 32 | (uint32_t)t->merge_right[k]) + 1, k);
        free(t->pair_key);
        free(t->pair_rank);
        t->pair_key = keys, t->pair_rank = ranks, t->pair_mask = cap - 1;
    }
    int32_t k = t->n_merges++;
    t->merge_left[k] = left, t->merge_right[k] = right, t->merge_id[k] = id;
    pair_insert(t->pair_key, t->pair_rank, t->pair_mask, ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1, k);
    return TOK_MERGE_OK;
}

/* ---- BPE of one word -----------------------------------------------------------------
 * The reference merges, round after round, every occurrence of the pair of
 * lowest rank. Here the pairs wait in a heap ordered by (rank, position), the
 * symbols in a linked list: a round pops every entry of the lowest rank, left to
 * right, merging those still true (an entry is stale once a neighbour changed),
 * and only then pushes the pairs the merges made, whose ranks may be lower. So
 * the result is the reference's, in O(n log n) for a word of n bytes. */
typedef struct { uint32_t rank, pos; } heap_entry;
typedef struct {
    int32_t *sym, *nxt, *prv, *touched; /* sym -1: a position merged into its left neighbour */
    heap_entry *heap;
    size_t cap, hn;
} bpe_scratch;

static bool scratch_reserve(bpe_scratch *s, size_t n) {
    if (n <= s->cap) return true;
    size_t cap = n < 64 ? 64 : n;
    void *p[2] = {ac_try_malloc(sizeof(int32_t) * cap * 4), ac_try_malloc(sizeof(heap_entry) * cap * 3)};
    if (!p[0] || !p[1]) {
        free(p[0]);
        free(p[1]);
        return false;
    }
    free(s->sym);
    free(s->heap);
    s->sym = p[0], s->nxt = s->sym + cap, s->prv = s->nxt + cap, s->touched = s->prv + cap;
    s->heap = p[1], s->cap = cap;
    return true;
}

static inline bool heap_less(heap_entry a, heap_entry b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(bpe_scratch *s, uint32_t rank, uint32_t pos) {
    size_t i = s->hn++;
    heap_entry e = {rank, pos};
    while (i > 0 && heap_less(e, s->heap[(i - 1) / 2])) s->heap[i] = s->heap[(i - 1) / 2], i = (i - 1) / 2;
    s->heap[i] = e;
}

static heap_entry heap_pop(bpe_scratch *s) {
    heap_entry top = s->heap[0], last = s->heap[--s->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->hn) break;
        if (c + 1 < s->hn && heap_less(s->heap[c + 1], s->heap[c])) c++;
        if (!heap_less(s->heap[c], last)) break;
        s->heap[i] = s->heap[c], i = c;
    }
    if (s->hn) s->heap[i] = last;
    return top;
}

static void push_pair(const Tokenizer *t, bpe_scratch *s, int32_t p) {
    int32_t r = tok_pair_rank(t, s->sym[p], s->sym[s->nxt[p]]);
    if (r >= 0) heap_push(s, (uint32_t)r, (uint32_t)p);
}

/* The ids of word w (m >= 1 bytes) into out (room for m); returns how many. */
static size_t bpe_word(const Tokenizer *t, bpe_scratch *s, const unsigned char *w, size_t m, int32_t *out) {
    for (size_t i = 0; i < m; i++) {
        s->sym[i] = t->byte_id[w[i]];
        s->nxt[i] = i + 1 < m ? (int32_t)(i + 1) : -1;
        s->prv[i] = (int32_t)i - 1;
    }
    s->hn = 0;
    for (size_t i = 0; i + 1 < m; i++) push_pair(t, s, (int32_t)i);
    while (s->hn) {
        uint32_t r = s->heap[0].rank;
        size_t nt = 0;
        while (s->hn && s->heap[0].rank == r) {
            int32_t p = (int32_t)heap_pop(s).pos, q = s->nxt[p];
            if (s->sym[p] != t->merge_left[r] || q < 0 || s->sym[q] != t->merge_right[r]) continue; /* stale */
            s->sym[p] = t->merge_id[r];
            s->sym[q] = -1;
            s->nxt[p] = s->nxt[q];
            if (s->nxt[q] >= 0) s->prv[s->nxt[q]] = p;
            s->touched[nt++] = p;
        }
        for (size_t k = 0; k < nt; k++) {
            int32_t p = s->touched[k];
            if (s->prv[p] >= 0) push_pair(t, s, s->prv[p]);
            if (s->nxt[p] >= 0) push_pair(t, s, p);
        }
    }
    size_t n = 0;
    for (int32_t p = 0; p >= 0; p = s->nxt[p]) out[n++] = s->sym[p];
    return n;
}

/* ---- the word cache ----------------------------------------------------------------------
 * Words of up to CACHE_WORD bytes, up to CACHE_WORDS of them (a table of at
 * most 3 MiB, the words and their ids in pools that grow); when full it is emptied and
 * fills again (a text's frequent words come back at once). A word that cannot
 * be cached (no memory) is encoded again next time: the same ids. */
#define CACHE_WORD 64
#define CACHE_WORDS (1u << 16)

static const tok_cached *cache_find(const Tokenizer *t, const char *w, size_t m, uint64_t h) {
    if (!t->cache) return NULL;
    for (uint32_t i = (uint32_t)h & t->cache_mask;; i = (i + 1) & t->cache_mask) {
        const tok_cached *c = &t->cache[i];
        if (c->n == 0) return NULL;
        if (c->hash == h && c->blen == m && memcmp(t->cache_bytes + c->boff, w, m) == 0) return c;
    }
}

static void cache_clear(Tokenizer *t) {
    memset(t->cache, 0, sizeof(tok_cached) * (t->cache_mask + 1));
    t->cache_used = 0, t->cache_bytes_used = 0, t->cache_ids_used = 0;
}

static bool pool_reserve(void **pool, size_t *cap, size_t used, size_t more, size_t elem) {
    if (used + more <= *cap) return true;
    size_t n = *cap ? 2 * *cap : 4096;
    while (n < used + more) n *= 2;
    void *p = ac_try_realloc(*pool, n * elem);
    if (!p) return false;
    *pool = p, *cap = n;
    return true;
}

/* The table starts at 1024 slots and doubles (kept at most half full) up to 2 * CACHE_WORDS. */
static bool cache_room(Tokenizer *t) {
    if (t->cache && 2 * (t->cache_used + 1) <= t->cache_mask + 1) return true;
    if (t->cache && t->cache_mask + 1 >= 2 * CACHE_WORDS) {
        cache_clear(t);
        return true;
    }
    uint32_t slots = t->cache ? 2 * (t->cache_mask + 1) : 1024;
    tok_cached *c = ac_try_malloc(sizeof *c * slots);
    if (!c) return false;
    memset(c, 0, sizeof *c * slots);
    for (uint32_t i = 0; t->cache && i <= t->cache_mask; i++)
        if (t->cache[i].n) {
            uint32_t j = (uint32_t)t->cache[i].hash & (slots - 1);
            while (c[j].n) j = (j + 1) & (slots - 1);
            c[j] = t->cache[i];
        }
    free(t->cache);
    t->cache = c, t->cache_mask = slots - 1;
    return true;
}

static void cache_put(Tokenizer *t, const char *w, size_t m, uint64_t h, const int32_t *ids, size_t n) {
    if (!cache_room(t) ||
        !pool_reserve((void **)&t->cache_bytes, &t->cache_bytes_cap, t->cache_bytes_used, m, 1) ||
        !pool_reserve((void **)&t->cache_ids, &t->cache_ids_cap, t->cache_ids_used, n, sizeof(int32_t)))
        return;
    uint32_t i = (uint32_t)h & t->cache_mask;
    while (t->cache[i].n) i = (i + 1) & t->cache_mask;
    t->cache[i] = (tok_cached){h, (uint32_t)t->cache_bytes_used, (uint32_t)m, (uint32_t)t->cache_ids_used, (uint32_t)n};
    memcpy(t->cache_bytes + t->cache_bytes_used, w, m);
    memcpy(t->cache_ids + t->cache_ids_used, ids, sizeof(int32_t) * n);
    t->cache_bytes_used += m, t->cache_ids_used += n, t->cache_used++;
}

/* ---- encode --------------------------------------------------------------------------------- */
struct tok_out {
    int32_t *ids;
    size_t n, cap;
    bpe_scratch s;
};
typedef tok_out encoder_out;

bool tok_out_reserve(tok_out *o, size_t more) {
    if (o->n + more <= o->cap) return true;
    size_t cap = o->cap ? o->cap : 1024;
    while (cap < o->n + more) cap *= 2;
    int32_t *p = ac_try_realloc(o->ids, sizeof(int32_t) * cap);
    if (!p) return false;
    o->ids = p, o->cap = cap;
    return true;
}

static bool encode_piece(Tokenizer *t, const char *s, size_t n, encoder_out *o) {
    for (size_t i = 0, end; i < n; i = end) {
        end = t->max_digits ? tok_next_word_split(s, n, i, t->max_digits) : tokenizer_next_word(s, n, i);
        const char *w = s + i;
        size_t m = end - i;
        if (!tok_out_reserve(o, m)) return false;
        if (m == 1) {
            o->ids[o->n++] = t->byte_id[(unsigned char)w[0]];
            continue;
        }
        if (t->ignore_merges) { /* a word that is a token is that token, whatever the merges say */
            int32_t id = tok_find(t, w, m);
            if (id >= 0) {
                o->ids[o->n++] = id;
                continue;
            }
        }
        uint64_t h = 0;
        if (m <= CACHE_WORD) {
            h = tok_hash(w, m);
            const tok_cached *c = cache_find(t, w, m, h);
            if (c) {
                memcpy(o->ids + o->n, t->cache_ids + c->ioff, sizeof(int32_t) * c->n);
                o->n += c->n;
                continue;
            }
        }
        if (!scratch_reserve(&o->s, m)) return false;
        size_t k = bpe_word(t, &o->s, (const unsigned char *)w, m, o->ids + o->n);
        if (m <= CACHE_WORD) cache_put(t, w, m, h, o->ids + o->n, k);
        o->n += k;
    }
    return true;
}

bool tok_encode_words(Tokenizer *t, const char *s, size_t n, tok_out *o) { return encode_piece(t, s, n, o); }

tok_out *tok_out_new(void) {
    tok_out *o = ac_try_malloc(sizeof *o);
    if (o) memset(o, 0, sizeof *o);
    return o;
}

void tok_out_free(tok_out *o) {
    if (!o) return;
    free(o->ids), free(o->s.sym), free(o->s.heap), free(o);
}

int32_t *tok_out_ids(tok_out *o, size_t *n) {
    *n = o->n;
    return o->ids;
}

bool tok_out_push(tok_out *o, int32_t id) {
    if (!tok_out_reserve(o, 1)) return false;
    o->ids[o->n++] = id;
    return true;
}

const char *tok_find_eot(const char *s, size_t n) {
    for (const char *p = s, *end = s + n; (size_t)(end - p) >= TOK_EOT_LEN; p++) {
        p = memchr(p, '<', (size_t)(end - p) - (TOK_EOT_LEN - 1));
        if (!p) return NULL;
        if (memcmp(p, TOK_EOT_TEXT, TOK_EOT_LEN) == 0) return p;
    }
    return NULL;
}

Tensor *tokenizer_encode(Tokenizer *t, const char *text, size_t len, tokenizer_special special, char *err,
                         size_t errlen) {
    size_t bad = tok_utf8_check(text, len);
    if (bad < len) {
        snprintf(err, errlen, "encode: the text is not UTF-8: byte %zu is 0x%02X", bad, (unsigned char)text[bad]);
        return NULL;
    }
    if (t->eot < 0) special = TOKENIZER_SPECIAL_AS_TEXT; /* a vocabulary without the special token */
    encoder_out o = {0};
    bool ok = true;
    for (size_t pos = 0; ok && pos <= len;) {
        const char *eot = special == TOKENIZER_SPECIAL_AS_TEXT ? NULL : tok_find_eot(text + pos, len - pos);
        if (eot && special == TOKENIZER_DISALLOW_SPECIAL) {
            snprintf(err, errlen,
                     "encode: Encountered text corresponding to disallowed special token '<|endoftext|>' (at byte %zu)",
                     (size_t)(eot - text));
            free(o.ids), free(o.s.sym), free(o.s.heap);
            return NULL;
        }
        size_t end = eot ? (size_t)(eot - text) : len;
        ok = encode_piece(t, text + pos, end - pos, &o);
        if (!eot) break;
        ok = ok && tok_out_reserve(&o, 1);
        if (ok) o.ids[o.n++] = t->eot;
        pos = end + TOK_EOT_LEN;
    }
    free(o.s.sym);
    free(o.s.heap);
    if (!ok) {
        free(o.ids);
        snprintf(err, errlen, "encode: not enough memory for the ids of %zu bytes of text", len);
        return NULL;
    }
    Tensor *ids = torch_empty(SHAPE((int64_t)o.n), AC_INT64);
    int64_t *d = ids->data;
    for (size_t i = 0; i < o.n; i++) d[i] = o.ids[i];
    free(o.ids);
    return ids;
}

/* ---- decode ---------------------------------------------------------------------------------- */
char *tokenizer_decode(const Tokenizer *t, const int64_t *ids, int64_t n, size_t *len, char *err, size_t errlen) {
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            snprintf(err, errlen, "decode: id %lld (position %lld) is out of range: the vocabulary has %d tokens",
                     (long long)ids[i], (long long)i, (int)t->n_vocab);
            return NULL;
        }
        total += (size_t)(t->off[ids[i] + 1] - t->off[ids[i]]);
    }
    unsigned char *raw = ac_arena_alloc(total + 1);
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t m = (size_t)(t->off[ids[i] + 1] - t->off[ids[i]]);
        memcpy(raw + k, t->bytes + t->off[ids[i]], m);
        k += m;
    }
    return tok_utf8_replace(raw, total, len);
}

char *tok_utf8_replace(const unsigned char *raw, size_t total, size_t *len) {
    /* errors="replace": each maximal part of an ill-formed sequence (a lead
     * byte and the continuation bytes that fit it) becomes one U+FFFD */
    char *out = ac_arena_alloc(ac_size_mul(total, 3) + 1), *o = out;
    for (size_t i = 0; i < total;) {
        int need;
        unsigned char lo, hi;
        if (raw[i] < 0x80) { *o++ = (char)raw[i++]; continue; }
        if (!utf8_lead(raw[i], &need, &lo, &hi)) {
            memcpy(o, "\xEF\xBF\xBD", 3), o += 3, i++;
            continue;
        }
        size_t j = i + 1;
        int got = 0;
        while (got < need && j < total && raw[j] >= (got ? 0x80 : lo) && raw[j] <= (got ? 0xBF : hi)) j++, got++;
        if (got == need) memcpy(o, raw + i, j - i), o += j - i;
        else memcpy(o, "\xEF\xBF\xBD", 3), o += 3;
        i = j;
    }
    *o = 0;
    if (len) *len = (size_t)(o - out);
    return out;
}

/* ---- accessors --------------------------------------------------------------------------------- */
int64_t tokenizer_n_vocab(const Tokenizer *t) { return t->n_vocab; }
int64_t tokenizer_n_merges(const Tokenizer *t) { return t->n_merges; }
int64_t tokenizer_eot_id(const Tokenizer *t) { return t->eot; }

const char *tokenizer_token_bytes(const Tokenizer *t, int64_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = (size_t)(t->off[id + 1] - t->off[id]);
    return t->bytes + t->off[id];
}

int64_t tokenizer_merge(const Tokenizer *t, int64_t rank, int64_t *left, int64_t *right) {
    if (rank < 0 || rank >= t->n_merges) return -1;
    *left = t->merge_left[rank], *right = t->merge_right[rank];
    return t->merge_id[rank];
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    free(t->bytes), free(t->off), free(t->by_bytes);
    free(t->merge_left), free(t->merge_right), free(t->merge_id);
    free(t->pair_key), free(t->pair_rank);
    free(t->cache), free(t->cache_bytes), free(t->cache_ids);
    free(t);
}
