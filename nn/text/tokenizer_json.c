/* Hugging Face's tokenizer.json, read into a TextTokenizer (text_tokenizer.h
 * lists what is read and what is refused). The file is parsed whole by json.c;
 * every refusal names the file and the key ("model.merges[12]"), never a
 * half-loaded tokenizer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "text_tokenizer_impl.h"

/* Llama 3's Split regex, and Qwen3's (the same with \p{N} for \p{N}{1,3}), as the files spell them. */
static const char LLAMA3_REGEX[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN3_REGEX[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct {
    const char *name;
    char *err;
    size_t errlen;
} ctx;

static bool fail(ctx *c, const char *key, const char *fmt, ...) {
    int k = snprintf(c->err, c->errlen, "tokenizer: %s: %s: ", c->name, key);
    if (k > 0 && (size_t)k < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Up to 40 bytes of s for a message. */
static const char *shown(char out[64], const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < 40; i++) out[k++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    while (k > 0 && k < n && ((unsigned char)out[k - 1] & 0xC0) == 0x80) k--; /* a cut character */
    if (k > 0 && k < n && (unsigned char)out[k - 1] >= 0xC0) k--;
    if (k < n) memcpy(out + k, "...", 3), k += 3;
    out[k] = 0;
    return out;
}

static const JsonValue *get(const JsonValue *o, const char *key) { return json_get(o, key); }
static bool is_null(const JsonValue *v) { return !v || v->type == JSON_NULL; }
static bool is_str(const JsonValue *v, const char *s) { return v && v->type == JSON_STRING && strcmp(v->str, s) == 0; }
static bool is_true(const JsonValue *v) { return v && v->type == JSON_BOOL && v->boolean; }
static const char *type_of(const JsonValue *v) { return v && v->type == JSON_STRING ? v->str : "(none)"; }

/* A byte-level token's characters as the bytes they spell: false if one spells none. */
static bool spelled_bytes(const char *s, size_t n, char *out, size_t *m) {
    size_t k = 0;
    if (tok_utf8_check(s, n) != n) return false;
    for (size_t i = 0; i < n;) {
        int len;
        int b = tok_char_byte(tok_utf8_at((const unsigned char *)s, i, &len));
        if (b < 0) return false;
        out[k++] = (char)b;
        i += (size_t)len;
    }
    *m = k;
    return true;
}

static bool load_vocab(TextTokenizer *t, const JsonValue *vocab, ctx *c) {
    if (!vocab || vocab->type != JSON_OBJECT) return fail(c, "model.vocab", "expected an object of tokens to ids");
    size_t n = json_len(vocab), total = 0;
    if (n == 0) return fail(c, "model.vocab", "the vocabulary is empty");
    if (n > INT32_MAX / 2) return fail(c, "model.vocab", "too many tokens (%zu)", n);
    for (size_t i = 0; i < n; i++) total += vocab->members[i].key_len;
    int32_t *where = ac_try_malloc(sizeof(int32_t) * n);
    int64_t *off = ac_try_malloc(sizeof(int64_t) * (n + 1));
    char *bytes = ac_try_malloc(total + 1);
    if (!where || !off || !bytes) {
        free(where), free(off), free(bytes);
        return fail(c, "model.vocab", "not enough memory for %zu tokens", n);
    }
    for (size_t i = 0; i < n; i++) where[i] = -1;
    for (size_t i = 0; i < n; i++) { /* ids: each of 0..n-1 once */
        const JsonMember *m = &vocab->members[i];
        char show[64];
        if (m->value->type != JSON_NUMBER || !m->value->is_int || m->value->number < 0 || m->value->number >= (double)n) {
            fail(c, "model.vocab", "token \"%s\": expected an id in 0..%zu (the vocabulary's %zu tokens), got %s",
                 shown(show, m->key, m->key_len), n - 1, n,
                 m->value->type == JSON_NUMBER && m->value->str ? m->value->str : json_value_type_name(m->value));
            goto bad;
        }
        int32_t id = (int32_t)m->value->number;
        if (where[id] >= 0) {
            fail(c, "model.vocab", "id %d is given twice (tokens \"%s\" and \"%s\")", (int)id,
                 shown(show, vocab->members[where[id]].key, vocab->members[where[id]].key_len),
                 shown((char[64]){0}, m->key, m->key_len));
            goto bad;
        }
        where[id] = (int32_t)i;
    }
    off[0] = 0;
    for (size_t id = 0; id < n; id++) {
        const JsonMember *m = &vocab->members[where[id]];
        size_t k;
        if (!spelled_bytes(m->key, m->key_len, bytes + off[id], &k)) {
            char show[64];
            fail(c, "model.vocab", "token \"%s\" (id %zu) has a character that is not one of the 256 byte-level "
                 "characters (only byte-level BPE is known)", shown(show, m->key, m->key_len), id);
            goto bad;
        }
        off[id + 1] = off[id] + (int64_t)k;
    }
    free(where);
    char msg[160];
    if (!tok_set_vocab(t->bpe, (int32_t)n, bytes, off, msg, sizeof msg)) /* it owns bytes and off now */
        return fail(c, "model.vocab", "%s", msg);
    return true;
bad:
    free(where), free(off), free(bytes);
    return false;
}

static bool merge_part(TextTokenizer *t, const char *s, size_t n, size_t r, char *buf, int32_t *id, ctx *c) {
    size_t k;
    char key[48], show[64];
    snprintf(key, sizeof key, "model.merges[%zu]", r);
    if (n == 0 || !spelled_bytes(s, n, buf, &k)) return fail(c, key, "\"%s\" is not a byte-level token", shown(show, s, n));
    if ((*id = tok_find(t->bpe, buf, k)) < 0) return fail(c, key, "\"%s\" is not in model.vocab", shown(show, s, n));
    return true;
}

static bool load_merges(TextTokenizer *t, const JsonValue *merges, ctx *c) {
    if (!merges || merges->type != JSON_ARRAY) return fail(c, "model.merges", "expected a list of merges");
    size_t maxlen = 0;
    for (size_t r = 0; r < json_len(merges); r++) {
        const JsonValue *m = json_at(merges, r);
        if (m->type == JSON_STRING && m->len > maxlen) maxlen = m->len;
        for (size_t j = 0; m->type == JSON_ARRAY && j < json_len(m); j++)
            if (json_at(m, j)->type == JSON_STRING && json_at(m, j)->len > maxlen) maxlen = json_at(m, j)->len;
    }
    char *buf = ac_try_malloc(maxlen + 1);
    if (!buf) return fail(c, "model.merges", "not enough memory");
    bool ok = false;
    for (size_t r = 0; r < json_len(merges); r++) {
        const JsonValue *m = json_at(merges, r);
        char key[48], show[64];
        snprintf(key, sizeof key, "model.merges[%zu]", r);
        const char *a, *b;
        size_t la, lb;
        if (m->type == JSON_STRING) { /* "a b" */
            const char *sp = memchr(m->str, ' ', m->len);
            if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str))) {
                fail(c, key, "expected two tokens separated by one space, got \"%s\"", shown(show, m->str, m->len));
                goto done;
            }
            a = m->str, la = (size_t)(sp - m->str), b = sp + 1, lb = m->len - la - 1;
        } else if (m->type == JSON_ARRAY && json_len(m) == 2 && json_at(m, 0)->type == JSON_STRING &&
                   json_at(m, 1)->type == JSON_STRING) { /* ["a", "b"] */
            a = json_at(m, 0)->str, la = json_at(m, 0)->len, b = json_at(m, 1)->str, lb = json_at(m, 1)->len;
        } else {
            fail(c, key, "expected \"a b\" or [\"a\", \"b\"], got a %s", json_value_type_name(m));
            goto done;
        }
        int32_t left, right, other = -1;
        if (!merge_part(t, a, la, r, buf, &left, c) || !merge_part(t, b, lb, r, buf, &right, c)) goto done;
        switch (tok_add_merge(t->bpe, left, right, &other)) {
        case TOK_MERGE_OK: break;
        case TOK_MERGE_NO_RESULT:
            fail(c, key, "\"%s\" + \"%s\" is not in model.vocab", shown(show, a, la), shown((char[64]){0}, b, lb));
            goto done;
        case TOK_MERGE_DUPLICATE: fail(c, key, "the merge is given twice (first as merges[%d])", (int)other); goto done;
        case TOK_MERGE_NOMEM: fail(c, key, "not enough memory"); goto done;
        }
    }
    ok = true;
done:
    free(buf);
    return ok;
}

static bool load_model(TextTokenizer *t, const JsonValue *model, ctx *c) {
    if (!model || model->type != JSON_OBJECT) return fail(c, "model", "expected an object");
    const JsonValue *type = get(model, "type");
    if (!is_str(type, "BPE"))
        return fail(c, "model.type", "'%s' is not a model type this program knows (BPE, byte-level)", type_of(type));
    const JsonValue *v;
    if (!is_null(v = get(model, "dropout")) && !(v->type == JSON_NUMBER && v->number == 0))
        return fail(c, "model.dropout", "BPE dropout is not supported (expected null)");
    if (is_true(get(model, "byte_fallback"))) return fail(c, "model.byte_fallback", "is not supported (expected false)");
    if (!is_null(v = get(model, "continuing_subword_prefix")) && !is_str(v, ""))
        return fail(c, "model.continuing_subword_prefix", "is not supported (expected null or \"\")");
    if (!is_null(v = get(model, "end_of_word_suffix")) && !is_str(v, ""))
        return fail(c, "model.end_of_word_suffix", "is not supported (expected null or \"\")");
    t->bpe->ignore_merges = is_true(get(model, "ignore_merges"));
    return load_vocab(t, get(model, "vocab"), c) && load_merges(t, get(model, "merges"), c);
}

static bool load_pre_tokenizer(TextTokenizer *t, const JsonValue *pre, ctx *c) {
    if (is_str(get(pre, "type"), "ByteLevel")) { /* GPT-2's: the regex inside ByteLevel */
        if (!is_true(get(pre, "use_regex")) || is_true(get(pre, "add_prefix_space")))
            return fail(c, "pre_tokenizer", "ByteLevel alone is known with use_regex true and add_prefix_space false");
        t->bpe->max_digits = 0;
        return true;
    }
    if (!is_str(get(pre, "type"), "Sequence"))
        return fail(c, "pre_tokenizer.type", "'%s' is not a pre-tokenizer this program knows (Sequence of Split and "
                    "ByteLevel, or ByteLevel)", type_of(get(pre, "type")));
    const JsonValue *seq = get(pre, "pretokenizers");
    if (!seq || seq->type != JSON_ARRAY || json_len(seq) != 2)
        return fail(c, "pre_tokenizer.pretokenizers", "expected [Split, ByteLevel]");
    const JsonValue *split = json_at(seq, 0), *bl = json_at(seq, 1);
    if (!is_str(get(split, "type"), "Split"))
        return fail(c, "pre_tokenizer.pretokenizers[0].type", "'%s' is not known here (expected Split)", type_of(get(split, "type")));
    const JsonValue *re = get(get(split, "pattern"), "Regex");
    if (!re || re->type != JSON_STRING)
        return fail(c, "pre_tokenizer.pretokenizers[0].pattern", "expected {\"Regex\": ...}");
    if (strcmp(re->str, LLAMA3_REGEX) == 0) t->bpe->max_digits = 3;
    else if (strcmp(re->str, QWEN3_REGEX) == 0) t->bpe->max_digits = 1;
    else {
        char show[64];
        return fail(c, "pre_tokenizer.pretokenizers[0].pattern.Regex",
                    "\"%s\" is not a pattern this program knows (Llama 3's or Qwen3's)", shown(show, re->str, re->len));
    }
    if (!is_str(get(split, "behavior"), "Isolated") || is_true(get(split, "invert")))
        return fail(c, "pre_tokenizer.pretokenizers[0]", "expected behavior \"Isolated\" and invert false");
    if (!is_str(get(bl, "type"), "ByteLevel") || is_true(get(bl, "use_regex")) || is_true(get(bl, "add_prefix_space")))
        return fail(c, "pre_tokenizer.pretokenizers[1]", "expected ByteLevel with use_regex and add_prefix_space false");
    return true;
}

/* TemplateProcessing's "single": special tokens before and after $A. */
static bool load_template(TextTokenizer *t, const JsonValue *pp, const char *key, ctx *c) {
    const JsonValue *single = get(pp, "single"), *specials = get(pp, "special_tokens");
    if (!single || single->type != JSON_ARRAY) return fail(c, key, "expected \"single\", a list");
    bool seen_a = false;
    for (size_t i = 0; i < json_len(single); i++) {
        const JsonValue *item = json_at(single, i), *st = get(item, "SpecialToken");
        if (get(item, "Sequence")) {
            if (seen_a || !is_str(get(get(item, "Sequence"), "id"), "A"))
                return fail(c, key, "single: only one sequence, $A, is known");
            seen_a = true;
            continue;
        }
        const JsonValue *name = get(st, "id");
        const JsonValue *ids = get(get(specials, name && name->type == JSON_STRING ? name->str : ""), "ids");
        if (!name || name->type != JSON_STRING || !ids || ids->type != JSON_ARRAY)
            return fail(c, key, "single[%zu]: expected a SpecialToken named in special_tokens", i);
        for (size_t j = 0; j < json_len(ids); j++) {
            const JsonValue *id = json_at(ids, j);
            if (id->type != JSON_NUMBER || !id->is_int || id->number < 0 || id->number >= t->n_vocab)
                return fail(c, key, "special_tokens[\"%s\"].ids: expected ids below %d", name->str, (int)t->n_vocab);
            int32_t **arr = seen_a ? &t->suffix : &t->prefix;
            int32_t *n = seen_a ? &t->n_suffix : &t->n_prefix;
            int32_t *p = ac_try_realloc(*arr, sizeof(int32_t) * (size_t)(*n + 1));
            if (!p) return fail(c, key, "not enough memory");
            *arr = p;
            p[(*n)++] = (int32_t)id->number;
        }
    }
    if (!seen_a) return fail(c, key, "single has no $A");
    return true;
}

static bool load_post_processor(TextTokenizer *t, const JsonValue *pp, const char *key, ctx *c) {
    if (is_null(pp) || is_str(get(pp, "type"), "ByteLevel")) return true; /* ByteLevel: offsets only */
    if (is_str(get(pp, "type"), "TemplateProcessing")) return load_template(t, pp, key, c);
    if (is_str(get(pp, "type"), "Sequence")) {
        const JsonValue *seq = get(pp, "processors");
        if (!seq || seq->type != JSON_ARRAY) return fail(c, key, "expected \"processors\", a list");
        for (size_t i = 0; i < json_len(seq); i++) {
            char k[64];
            snprintf(k, sizeof k, "%s.processors[%zu]", key, i);
            if (!load_post_processor(t, json_at(seq, i), k, c)) return false;
        }
        return true;
    }
    char k[80];
    snprintf(k, sizeof k, "%s.type", key);
    return fail(c, k, "'%s' is not a post-processor this program knows (ByteLevel, TemplateProcessing, Sequence)",
                type_of(get(pp, "type")));
}

static int added_order(const void *a, const void *b) { /* by first byte, then longest first */
    const text_added *x = a, *y = b;
    unsigned char fx = (unsigned char)x->content[0], fy = (unsigned char)y->content[0];
    if (fx != fy) return fx < fy ? -1 : 1;
    return x->len > y->len ? -1 : x->len < y->len ? 1 : 0;
}

bool text_tokenizer_set_added(TextTokenizer *t, char *err, size_t errlen); /* text_tokenizer.c */

static bool load_added(TextTokenizer *t, const JsonValue *added, ctx *c) {
    if (is_null(added)) added = NULL;
    else if (added->type != JSON_ARRAY) return fail(c, "added_tokens", "expected a list");
    size_t n = json_len(added);
    int32_t nv = t->bpe->n_vocab, top = nv;
    t->added = ac_try_malloc(sizeof(text_added) * (n ? n : 1));
    if (!t->added) return fail(c, "added_tokens", "not enough memory");
    for (size_t i = 0; i < n; i++) {
        const JsonValue *a = json_at(added, i), *id = get(a, "id"), *content = get(a, "content");
        char key[48];
        snprintf(key, sizeof key, "added_tokens[%zu]", i);
        if (!id || id->type != JSON_NUMBER || !id->is_int || id->number < 0 || id->number > INT32_MAX - 1)
            return fail(c, key, "expected an \"id\", a non-negative integer");
        if (!content || content->type != JSON_STRING || content->len == 0 || tok_utf8_check(content->str, content->len) != content->len)
            return fail(c, key, "expected a \"content\", a non-empty UTF-8 string");
        const char *flags[] = {"lstrip", "rstrip", "single_word"};
        for (int f = 0; f < 3; f++)
            if (is_true(get(a, flags[f]))) return fail(c, key, "%s true is not supported", flags[f]);
        if (t->nfc && is_true(get(a, "normalized")))
            return fail(c, key, "normalized true (matched after the normalizer) is not supported");
        int32_t v = (int32_t)id->number;
        if (v < nv) { /* also in the vocabulary: it must be the same token */
            size_t len;
            const char *b = tokenizer_token_bytes(t->bpe, v, &len);
            char *buf = ac_try_malloc(content->len + 1);
            size_t m = 0;
            bool same = buf && spelled_bytes(content->str, content->len, buf, &m) && m == len && memcmp(buf, b, len) == 0;
            same = same || (len == content->len && memcmp(b, content->str, len) == 0);
            free(buf);
            if (!same) return fail(c, key, "id %d is model.vocab's token of other text than \"%s\"", (int)v, content->str);
        }
        for (size_t j = 0; j < i; j++)
            if (t->added[j].id == v) return fail(c, key, "id %d is given twice (added_tokens[%zu])", (int)v, j);
        if (v >= top) top = v + 1;
        char *s = ac_try_malloc(content->len + 1);
        if (!s) return fail(c, key, "not enough memory");
        memcpy(s, content->str, content->len + 1);
        t->added[t->n_added++] = (text_added){s, content->len, v, is_true(get(a, "special"))};
    }
    /* the ids past the vocabulary: every one an added token */
    int32_t past = 0;
    for (int32_t i = 0; i < t->n_added; i++) past += t->added[i].id >= nv;
    if (past != top - nv) return fail(c, "added_tokens", "the ids past model.vocab's %d tokens have gaps (the largest is %d)", (int)nv, (int)top - 1);
    t->n_vocab = top;
    qsort(t->added, (size_t)t->n_added, sizeof *t->added, added_order);
    return text_tokenizer_set_added(t, c->err, c->errlen);
}

TextTokenizer *text_tokenizer_from_json(const char *json, size_t len, const char *name, char *err, size_t errlen) {
    char msg[512];
    JsonValue *root = json_loads(json, len, msg, sizeof msg);
    if (!root) {
        snprintf(err, errlen, "tokenizer: %s: %s", name, msg);
        return NULL;
    }
    ctx c = {name, err, errlen};
    TextTokenizer *t = text_tokenizer_alloc();
    bool ok = t != NULL;
    if (!t) snprintf(err, errlen, "tokenizer: %s: not enough memory", name);
    else if (!(t->bpe = tok_alloc())) ok = fail(&c, "model", "not enough memory");
    if (ok && root->type != JSON_OBJECT) ok = fail(&c, "(top)", "expected an object, got a %s", json_value_type_name(root));
    if (ok) {
        t->json = true;
        const JsonValue *norm = get(root, "normalizer");
        if (is_str(get(norm, "type"), "NFC")) t->nfc = true;
        else if (!is_null(norm))
            ok = fail(&c, "normalizer.type", "'%s' is not a normalizer this program knows (NFC, or null)", type_of(get(norm, "type")));
        const JsonValue *dec = get(root, "decoder");
        if (ok && !is_null(dec) && !is_str(get(dec, "type"), "ByteLevel"))
            ok = fail(&c, "decoder.type", "'%s' is not a decoder this program knows (ByteLevel)", type_of(get(dec, "type")));
        ok = ok && load_model(t, get(root, "model"), &c) && load_pre_tokenizer(t, get(root, "pre_tokenizer"), &c) &&
             load_added(t, get(root, "added_tokens"), &c) &&
             load_post_processor(t, get(root, "post_processor"), "post_processor", &c);
    }
    json_free(root);
    if (!ok) {
        text_tokenizer_free(t);
        return NULL;
    }
    return t;
}
