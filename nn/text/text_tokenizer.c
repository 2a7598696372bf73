/* The one interface of text_tokenizer.h: loading either kind, encode (added
 * tokens first, then the normalizer, the pre-tokenizer and BPE on the text
 * between them, as Hugging Face's AddedVocabulary does), decode, lookups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "extend.h"
#include "text_tokenizer_impl.h"
#include "unicode_nfc.h"

TextTokenizer *text_tokenizer_alloc(void) {
    TextTokenizer *t = ac_try_malloc(sizeof *t);
    if (t) memset(t, 0, sizeof *t);
    return t;
}

void text_tokenizer_free(TextTokenizer *t) {
    if (!t) return;
    tokenizer_free(t->bpe);
    for (int32_t i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added), free(t->added_of_id), free(t->prefix), free(t->suffix);
    free(t);
}

/* After the added tokens are sorted (by first byte, longest first): the buckets and id -> token. */
bool text_tokenizer_set_added(TextTokenizer *t, char *err, size_t errlen) {
    t->added_of_id = ac_try_malloc(sizeof(int32_t) * (size_t)t->n_vocab);
    if (!t->added_of_id) {
        snprintf(err, errlen, "tokenizer: not enough memory");
        return false;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) t->added_of_id[i] = -1;
    for (int32_t i = 0; i < t->n_added; i++) t->added_of_id[t->added[i].id] = i;
    int32_t k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_added && (unsigned char)t->added[k].content[0] < b) k++;
        t->first_added[b] = k;
    }
    return true;
}

TextTokenizer *text_tokenizer_from_gpt2(Tokenizer *gpt2, char *err, size_t errlen) {
    TextTokenizer *t = text_tokenizer_alloc();
    if (!t || !(t->added = ac_try_malloc(sizeof(text_added)))) {
        free(t);
        tokenizer_free(gpt2);
        snprintf(err, errlen, "tokenizer: not enough memory");
        return NULL;
    }
    t->bpe = gpt2;
    t->n_vocab = (int32_t)tokenizer_n_vocab(gpt2);
    if (gpt2->eot >= 0) { /* "<|endoftext|>", tiktoken's one special token */
        char *s = ac_try_malloc(TOK_EOT_LEN + 1);
        if (!s) {
            text_tokenizer_free(t);
            snprintf(err, errlen, "tokenizer: not enough memory");
            return NULL;
        }
        memcpy(s, TOK_EOT_TEXT, TOK_EOT_LEN + 1);
        t->added[t->n_added++] = (text_added){s, TOK_EOT_LEN, gpt2->eot, true};
    }
    if (!text_tokenizer_set_added(t, err, errlen)) {
        text_tokenizer_free(t);
        return NULL;
    }
    return t;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

TextTokenizer *text_tokenizer_load(const char *path, char *err, size_t errlen) {
    size_t n = strlen(path) + 32;
    char *json = ac_try_malloc(n);
    if (!json) {
        snprintf(err, errlen, "tokenizer: not enough memory");
        return NULL;
    }
    if (is_dir(path)) snprintf(json, n, "%s/tokenizer.json", path);
    else snprintf(json, n, "%s", path);
    TextTokenizer *t = NULL;
    FILE *f = fopen(json, "rb");
    if (f || !is_dir(path)) {
        if (f) fclose(f);
        size_t len;
        char why[1024];
        char *text = ac_read_file(json, &len, why, sizeof why);
        if (!text) snprintf(err, errlen, "tokenizer: %s", why);
        else t = text_tokenizer_from_json(text, len, json, err, errlen);
        free(text);
    } else {
        Tokenizer *g = tokenizer_load(path, err, errlen);
        if (!g && strstr(err, "has no encoder.json"))
            snprintf(err, errlen, "tokenizer: %s has no tokenizer.json (Hugging Face's), encoder.json and vocab.bpe "
                     "(GPT-2's) nor vocab.json and merges.txt", path);
        t = g ? text_tokenizer_from_gpt2(g, err, errlen) : NULL;
    }
    free(json);
    return t;
}

/* ---- encode ------------------------------------------------------------------------------------ */
/* The leftmost added token in s[0..n) (the longest there): its index, *at its offset; -1 if none. */
static int32_t next_added(const TextTokenizer *t, const char *s, size_t n, size_t *at) {
    if (t->n_added == 0) return -1;
    /* all the added tokens of these files start with '<': memchr finds the places to look */
    unsigned char first = (unsigned char)t->added[0].content[0];
    bool one_first = t->first_added[first] == 0 && t->first_added[first + 1] == t->n_added;
    for (size_t p = 0; p < n; p++) {
        if (one_first) {
            const char *q = memchr(s + p, first, n - p);
            if (!q) return -1;
            p = (size_t)(q - s);
        }
        unsigned char b = (unsigned char)s[p];
        for (int32_t k = t->first_added[b]; k < t->first_added[b + 1]; k++) {
            const text_added *a = &t->added[k];
            if (a->len <= n - p && memcmp(s + p, a->content, a->len) == 0) {
                *at = p;
                return k;
            }
        }
    }
    return -1;
}

static bool encode_text(TextTokenizer *t, const char *s, size_t n, tok_out *o) {
    if (n == 0) return true;
    if (!t->nfc) return tok_encode_words(t->bpe, s, n, o);
    size_t m = 0;
    char *norm = unicode_nfc(s, n, &m);
    if (!norm) return m != SIZE_MAX && tok_encode_words(t->bpe, s, n, o);
    bool ok = tok_encode_words(t->bpe, norm, m, o);
    free(norm);
    return ok;
}

Tensor *text_tokenizer_encode(TextTokenizer *t, const char *text, size_t len, int flags, char *err, size_t errlen) {
    size_t bad = tok_utf8_check(text, len);
    if (bad < len) {
        snprintf(err, errlen, "encode: the text is not UTF-8: byte %zu is 0x%02X", bad, (unsigned char)text[bad]);
        return NULL;
    }
    tok_out *o = tok_out_new();
    bool ok = o != NULL;
    bool add = flags & TEXT_ADD_SPECIAL_TOKENS;
    for (int32_t i = 0; ok && add && i < t->n_prefix; i++) ok = tok_out_push(o, t->prefix[i]);
    for (size_t pos = 0; ok && pos < len;) {
        size_t at = 0;
        int32_t k = flags & TEXT_SPECIAL_IN_TEXT ? next_added(t, text + pos, len - pos, &at) : -1;
        size_t end = k >= 0 ? pos + at : len;
        ok = encode_text(t, text + pos, end - pos, o);
        if (k < 0) break;
        ok = ok && tok_out_push(o, t->added[k].id);
        pos = end + t->added[k].len;
    }
    for (int32_t i = 0; ok && add && i < t->n_suffix; i++) ok = tok_out_push(o, t->suffix[i]);
    if (!ok) {
        tok_out_free(o);
        snprintf(err, errlen, "encode: not enough memory for the ids of %zu bytes of text", len);
        return NULL;
    }
    size_t n;
    const int32_t *ids = tok_out_ids(o, &n);
    Tensor *out = torch_empty(SHAPE((int64_t)n), AC_INT64);
    int64_t *d = out->data;
    for (size_t i = 0; i < n; i++) d[i] = ids[i];
    tok_out_free(o);
    return out;
}

/* ---- decode -------------------------------------------------------------------------------------
 * As Hugging Face's ByteLevel decoder: each token's characters back to bytes
 * (an added token's too, when every character spells a byte; else its UTF-8),
 * all joined, then the bytes that do not form UTF-8 replaced. */
static const char *token_bytes(const TextTokenizer *t, int64_t id, size_t *len, char *buf) {
    int32_t a = t->added_of_id[id];
    if (a < 0) return tokenizer_token_bytes(t->bpe, id, len);
    const text_added *x = &t->added[a];
    size_t k = 0;
    for (size_t i = 0; i < x->len;) {
        int l;
        int b = tok_char_byte(tok_utf8_at((const unsigned char *)x->content, i, &l));
        if (b < 0) {
            *len = x->len;
            return x->content;
        }
        buf[k++] = (char)b;
        i += (size_t)l;
    }
    *len = k;
    return buf;
}

char *text_tokenizer_decode(const TextTokenizer *t, const int64_t *ids, int64_t n, bool skip_special, size_t *len,
                            char *err, size_t errlen) {
    const int64_t *off = t->bpe->off;
    size_t total = 0, maxadded = 0;
    for (int32_t i = 0; i < t->n_added; i++) maxadded = t->added[i].len > maxadded ? t->added[i].len : maxadded;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            snprintf(err, errlen, "decode: id %lld (position %lld) is out of range: the vocabulary has %d tokens (0..%d)",
                     (long long)ids[i], (long long)i, (int)t->n_vocab, (int)t->n_vocab - 1);
            return NULL;
        }
        int32_t a = t->added_of_id[ids[i]];
        total += a >= 0 ? t->added[a].len : (size_t)(off[ids[i] + 1] - off[ids[i]]);
    }
    char *buf = ac_arena_alloc(maxadded + 1);
    char *raw = ac_arena_alloc(total + 1);
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t a = t->added_of_id[ids[i]];
        const char *b;
        size_t m;
        if (a < 0) {
            b = t->bpe->bytes + off[ids[i]], m = (size_t)(off[ids[i] + 1] - off[ids[i]]);
        } else {
            if (skip_special && t->added[a].special) continue;
            b = token_bytes(t, ids[i], &m, buf);
        }
        memcpy(raw + k, b, m);
        k += m;
    }
    return tok_utf8_replace((const unsigned char *)raw, k, len);
}

/* ---- lookups ------------------------------------------------------------------------------------ */
int64_t text_tokenizer_n_vocab(const TextTokenizer *t) { return t->n_vocab; }

int64_t text_tokenizer_token_to_id(const TextTokenizer *t, const char *token) {
    size_t n = strlen(token);
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && memcmp(t->added[i].content, token, n) == 0) return t->added[i].id;
    return tok_find(t->bpe, token, n);
}

bool text_tokenizer_is_special(const TextTokenizer *t, int64_t id) {
    return id >= 0 && id < t->n_vocab && t->added_of_id[id] >= 0 && t->added[t->added_of_id[id]].special;
}

const char *text_tokenizer_kind(const TextTokenizer *t) { return t->json ? "tokenizer.json" : "gpt2"; }
Tokenizer *text_tokenizer_bpe(TextTokenizer *t) { return t->bpe; }
