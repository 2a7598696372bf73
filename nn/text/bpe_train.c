/* Learning BPE merges from a text, as minbpe's RegexTokenizer.train does (the
 * book's chapter 2 bonus), into a Tokenizer that encodes and saves like GPT-2's:
 *
 *     text_chunks = re.findall(GPT2_SPLIT_PATTERN, text)      words of the text (tokenizer_next_word)
 *     ids = [list(ch.encode("utf-8")) for ch in text_chunks]   each word's bytes
 *     for i in range(num_merges):
 *         stats = {}; for chunk_ids in ids: get_stats(chunk_ids, stats)    pair counts
 *         pair = max(stats, key=stats.get)                     most frequent; ties: seen first
 *         idx = 256 + i
 *         ids = [merge(chunk_ids, pair, idx) for chunk_ids in ids]
 *
 * The words are kept once each, with their count, in the order they first
 * occur: pairs counted over them in that order are first met where the text
 * first has them, so "seen first" is the same as over the whole text.
 * One departure: a pair whose bytes are already a token (made by another pair
 * earlier) merges into that token instead of a second one with the same bytes,
 * which GPT-2's encoder.json could not hold. Each merge costs one pass over the
 * distinct words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* A distinct word: its symbols at sym[start .. start + len), its bytes at text[at .. at + bytes). */
typedef struct { int64_t start, count, at; uint64_t hash; int32_t len, bytes; } word;

typedef struct {
    int32_t *sym;  /* every distinct word's symbols, one after another */
    word *w;       /* in the order they first occur */
    int64_t n, cap, nsym, symcap;
    uint32_t *slot; /* open addressing over the words' bytes: index + 1, 0 empty */
    uint32_t mask;
} word_set;

typedef struct { uint64_t key; int64_t count; uint32_t first, gen; } pair_count;

static bool grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *q = ac_try_realloc(*p, (size_t)n * elem);
    if (!q) return false;
    *p = q, *cap = n;
    return true;
}

/* Adds one occurrence of the word at text[at .. at + m) (byte ids from byte_id). */
static bool add_word(word_set *ws, const char *text, size_t at, size_t m, const int32_t *byte_id) {
    const char *w = text + at;
    uint64_t h = tok_hash(w, m);
    uint32_t i = (uint32_t)h & ws->mask;
    for (; ws->slot[i]; i = (i + 1) & ws->mask) {
        word *k = &ws->w[ws->slot[i] - 1];
        if (k->hash == h && k->bytes == (int32_t)m && memcmp(text + k->at, w, m) == 0) {
            k->count++;
            return true;
        }
    }
    if (!grow((void **)&ws->w, &ws->cap, ws->n + 1, sizeof(word)) ||
        !grow((void **)&ws->sym, &ws->symcap, ws->nsym + (int64_t)m, sizeof(int32_t)))
        return false;
    ws->w[ws->n] = (word){ws->nsym, 1, (int64_t)at, h, (int32_t)m, (int32_t)m};
    for (size_t j = 0; j < m; j++) ws->sym[ws->nsym++] = byte_id[(unsigned char)w[j]];
    ws->slot[i] = (uint32_t)++ws->n;
    if (2 * (uint64_t)ws->n > ws->mask) { /* rehash into twice the slots */
        uint32_t mask = 2 * ws->mask + 1;
        uint32_t *slot = ac_try_malloc(sizeof(uint32_t) * ((size_t)mask + 1));
        if (!slot) return false;
        memset(slot, 0, sizeof(uint32_t) * ((size_t)mask + 1));
        for (int64_t q = 0; q < ws->n; q++) {
            uint32_t s = (uint32_t)ws->w[q].hash & mask;
            while (slot[s]) s = (s + 1) & mask;
            slot[s] = (uint32_t)q + 1;
        }
        free(ws->slot);
        ws->slot = slot, ws->mask = mask;
    }
    return true;
}

static void word_set_free(word_set *ws) {
    free(ws->sym), free(ws->w), free(ws->slot);
}

Tokenizer *tokenizer_train(const char *text, size_t len, int64_t num_merges, char *err, size_t errlen) {
    size_t bad = tok_utf8_check(text, len);
    if (bad < len) {
        snprintf(err, errlen, "tokenizer: train: the text is not UTF-8: byte %zu is 0x%02X", bad, (unsigned char)text[bad]);
        return NULL;
    }
    if (num_merges < 0 || num_merges > 1000000) {
        snprintf(err, errlen, "tokenizer: train: the number of merges must be in 0..1000000, got %lld", (long long)num_merges);
        return NULL;
    }
    Tokenizer *t = NULL;
    word_set ws = {0};
    int64_t vcap = 0, bcap = 0, lcap = 0;
    char *vbytes = NULL;
    int64_t *voff = NULL, nbytes = 0;
    int32_t *learned = NULL; /* (left, right) of each merge */
    pair_count *pc = NULL;
    int64_t nv = 256, nl = 0;
    int32_t byte_id[256];
    bool ok = false;

    /* the vocabulary so far: the 256 bytes in GPT-2's order */
    if (!grow((void **)&voff, &vcap, 257 + num_merges + 2, sizeof(int64_t)) || !grow((void **)&vbytes, &bcap, 256, 1))
        goto nomem;
    voff[0] = 0;
    for (int i = 0; i < 256; i++) {
        int b = tok_gpt2_byte_order(i);
        vbytes[i] = (char)b, voff[i + 1] = i + 1, byte_id[b] = i;
    }
    nbytes = 256;

    /* the distinct words, in the order they first occur */
    ws.mask = 1023;
    if (!(ws.slot = ac_try_malloc(sizeof(uint32_t) * 1024))) goto nomem;
    memset(ws.slot, 0, sizeof(uint32_t) * 1024);
    for (size_t pos = 0; pos < len;) {
        const char *eot = tok_find_eot(text + pos, len - pos);
        size_t end = eot ? (size_t)(eot - text) : len;
        for (size_t i = pos, e; i < end; i = e) {
            e = pos + tokenizer_next_word(text + pos, end - pos, i - pos);
            if (!add_word(&ws, text, i, e - i, byte_id)) goto nomem;
        }
        pos = eot ? end + TOK_EOT_LEN : len;
    }

    /* the merges */
    uint32_t pmask = 1023, gen = 0;
    for (int64_t r = 0; r < num_merges; r++) {
        int64_t distinct = 0;
        for (int64_t w = 0; w < ws.n; w++) distinct += ws.w[w].len > 1 ? ws.w[w].len - 1 : 0;
        if (distinct == 0) break; /* every word is one token */
        if ((int64_t)pmask + 1 < 2 * distinct || !pc) {
            while ((int64_t)pmask + 1 < 2 * distinct) pmask = 2 * pmask + 1;
            free(pc);
            if (!(pc = ac_try_malloc(sizeof *pc * ((size_t)pmask + 1)))) goto nomem;
            memset(pc, 0, sizeof *pc * ((size_t)pmask + 1));
            gen = 0;
        }
        gen++; /* slots of older generations are empty */
        uint32_t order = 0, best = UINT32_MAX;
        for (int64_t w = 0; w < ws.n; w++) {
            const int32_t *s = ws.sym + ws.w[w].start;
            for (int32_t j = 0; j + 1 < ws.w[w].len; j++) {
                uint64_t key = ((uint64_t)(uint32_t)s[j] << 32 | (uint32_t)s[j + 1]) + 1;
                uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & pmask;
                while (pc[h].gen == gen && pc[h].key != key) h = (h + 1) & pmask;
                if (pc[h].gen != gen) pc[h] = (pair_count){key, 0, order++, gen};
                pc[h].count += ws.w[w].count;
                if (best == UINT32_MAX || pc[h].count > pc[best].count ||
                    (pc[h].count == pc[best].count && pc[h].first < pc[best].first))
                    best = h;
            }
        }
        int32_t a = (int32_t)((pc[best].key - 1) >> 32), b = (int32_t)(uint32_t)(pc[best].key - 1);
        /* the new token's bytes, unless a token has them already */
        int64_t la = voff[a + 1] - voff[a], lb = voff[b + 1] - voff[b];
        if (!grow((void **)&vbytes, &bcap, nbytes + la + lb + TOK_EOT_LEN, 1)) goto nomem;
        memcpy(vbytes + nbytes, vbytes + voff[a], (size_t)la);
        memcpy(vbytes + nbytes + la, vbytes + voff[b], (size_t)lb);
        int32_t id = -1;
        for (int64_t v = 256; v < nv && id < 0; v++)
            if (voff[v + 1] - voff[v] == la + lb && memcmp(vbytes + voff[v], vbytes + nbytes, (size_t)(la + lb)) == 0)
                id = (int32_t)v;
        if (id < 0) {
            id = (int32_t)nv++;
            nbytes += la + lb;
            voff[id + 1] = nbytes;
        }
        if (!grow((void **)&learned, &lcap, 2 * (nl + 1), sizeof(int32_t))) goto nomem;
        learned[2 * nl] = a, learned[2 * nl + 1] = b, nl++;
        for (int64_t w = 0; w < ws.n; w++) { /* merge(ids, pair, idx), word by word */
            int32_t *s = ws.sym + ws.w[w].start, k = 0, wl = ws.w[w].len;
            for (int32_t j = 0; j < wl; j++) {
                if (j + 1 < wl && s[j] == a && s[j + 1] == b) s[k++] = id, j++;
                else s[k++] = s[j];
            }
            ws.w[w].len = k;
        }
    }

    /* "<|endoftext|>" last, then the tokenizer */
    memcpy(vbytes + nbytes, TOK_EOT_TEXT, TOK_EOT_LEN);
    nbytes += TOK_EOT_LEN;
    voff[nv + 1] = nbytes;
    nv++;
    if (!(t = tok_alloc())) goto nomem;
    if (!tok_set_vocab(t, (int32_t)nv, vbytes, voff, err, errlen)) {
        vbytes = NULL, voff = NULL;
        goto done;
    }
    vbytes = NULL, voff = NULL;
    for (int64_t k = 0; k < nl; k++) {
        int32_t other;
        if (tok_add_merge(t, learned[2 * k], learned[2 * k + 1], &other) != TOK_MERGE_OK) goto nomem;
    }
    ok = true;
    goto done;
nomem:
    snprintf(err, errlen, "tokenizer: train: not enough memory");
done:
    word_set_free(&ws);
    free(vbytes), free(voff), free(learned), free(pc);
    if (!ok) {
        tokenizer_free(t);
        t = NULL;
    }
    return t;
}
