/* GPT-2's two tokenizer files, read and written:
 *   encoder.json  {"!": 0, "\"": 1, ..., "\u0120gazed": 50255, "<|endoftext|>": 50256}
 *                 a token's bytes spelled with bytes_to_unicode's 256 characters -> its id
 *   vocab.bpe     "#version: 0.2", then one merge a line, "Ġ t", highest priority first
 * Every check names the file, and the line and column or the token: a bad
 * file is refused whole, never half-loaded. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "tokenizer_impl.h"

/* ---- reading a whole file ------------------------------------------------------------------- */
static char *read_all(const char *path, size_t *len, char *err, size_t errlen) {
    char why[1024];
    char *buf = ac_read_file(path, len, why, sizeof why);
    if (!buf) snprintf(err, errlen, "tokenizer: %s", why);
    return buf;
}

/* ---- messages ---------------------------------------------------------------------------------- */
static void line_col(const char *s, size_t at, size_t *line, size_t *col) {
    *line = 1, *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (s[i] == '\n') ++*line, *col = 1;
        else if (((unsigned char)s[i] & 0xC0) != 0x80) ++*col;
    }
}

/* Up to 40 bytes of s as text for a message (cut at a character, control bytes as \xHH). */
static const char *shown(char out[200], const char *s, size_t n) {
    size_t k = 0, i = 0;
    for (; i < n && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7F) k += (size_t)snprintf(out + k, 8, "\\x%02X", c);
        else out[k++] = (char)c;
    }
    while (k > 0 && i < n && ((unsigned char)out[k - 1] & 0xC0) == 0x80) k--; /* a cut character */
    if (k > 0 && i < n && (unsigned char)out[k - 1] >= 0xC0) k--;
    if (i < n) memcpy(out + k, "...", 3), k += 3;
    out[k] = 0;
    return out;
}

/* ---- encoder.json ----------------------------------------------------------------------------------
 * A JSON object of strings to non-negative integers, nothing else. */
typedef struct {
    const char *s, *name;
    size_t n, i;
    char *err;
    size_t errlen;
} json;

static bool fail_at(json *p, size_t at, const char *fmt, ...) {
    size_t line, col;
    line_col(p->s, at, &line, &col);
    int k = snprintf(p->err, p->errlen, "tokenizer: %s:%zu:%zu: ", p->name, line, col);
    if (k > 0 && (size_t)k < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return false;
}

static void skip_ws(json *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string at p->i (its '"'), its characters mapped to the bytes they spell, into *out. */
static bool json_token(json *p, char **out, size_t *len, size_t *cap) {
    size_t start = p->i++;
    *len = 0;
    for (;;) {
        if (p->i >= p->n) return fail_at(p, start, "the string is not closed");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') { p->i++; return true; }
        if (c < 0x20) return fail_at(p, p->i, "a control character (0x%02X) inside a string", c);
        size_t at = p->i;
        uint32_t cp;
        if (c == '\\') {
            if (p->i + 1 >= p->n) return fail_at(p, at, "the string is not closed");
            char e = p->s[p->i + 1];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                cp = (uint32_t)"\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
                p->i += 2;
            } else if (e == 'u') {
                int v = p->i + 6 <= p->n ? hex4(p->s + p->i + 2) : -1;
                if (v < 0) return fail_at(p, at, "a \\u escape needs 4 hex digits");
                p->i += 6;
                cp = (uint32_t)v;
                if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
                    int lo = p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u' ? hex4(p->s + p->i + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return fail_at(p, at, "a high surrogate \\u%04X without its low half", (unsigned)cp);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p->i += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fail_at(p, at, "a lone low surrogate \\u%04X", (unsigned)cp);
                }
            } else {
                return fail_at(p, at, "an unknown escape \\%c", e >= 0x20 && e < 0x7F ? e : '?');
            }
        } else {
            int k;
            cp = tok_utf8_at((const unsigned char *)p->s, p->i, &k); /* the file's UTF-8 was checked first */
            p->i += (size_t)k;
        }
        int b = tok_char_byte(cp);
        if (b < 0)
            return fail_at(p, at, "U+%04X is not one of the 256 characters GPT-2's files spell bytes with", (unsigned)cp);
        if (*len == *cap) {
            size_t ncap = *cap ? 2 * *cap : 64;
            char *q = ac_try_realloc(*out, ncap);
            if (!q) return fail_at(p, at, "not enough memory");
            *out = q, *cap = ncap;
        }
        (*out)[(*len)++] = (char)b;
    }
}

typedef struct { int64_t boff; int32_t len, id; size_t at; } json_entry;

/* Parses the object into ids 0..n-1 (every id once) and hands them to the tokenizer. */
static bool load_encoder(Tokenizer *t, json *p) {
    bool ok = false;
    char *pool = NULL, *tokbuf = NULL, *bytes = NULL;
    size_t pool_n = 0, pool_cap = 0, toklen = 0, tokcap = 0, ne = 0, ecap = 0;
    json_entry *e = NULL;
    size_t *first = NULL;
    int64_t *off = NULL;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '{') {
        fail_at(p, p->i, p->i >= p->n ? "the file is empty: expected a JSON object" : "expected a JSON object ('{')");
        goto done;
    }
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') p->i++;
    else
        for (;;) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') {
                fail_at(p, p->i, p->i >= p->n ? "the file ends inside the object" : "expected a token (a string)");
                goto done;
            }
            size_t at = p->i;
            if (!json_token(p, &tokbuf, &toklen, &tokcap)) goto done;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                fail_at(p, p->i, "expected ':' after the token");
                goto done;
            }
            p->i++;
            skip_ws(p);
            if (toklen == 0) {
                fail_at(p, at, "the token is empty");
                goto done;
            }
            size_t vat = p->i;
            int64_t id = 0;
            if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') {
                fail_at(p, vat, "expected the token's id (a non-negative integer)");
                goto done;
            }
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
                id = id * 10 + (p->s[p->i++] - '0');
                if (id > INT32_MAX - 1) {
                    fail_at(p, vat, "the id is too large (at most %d)", INT32_MAX - 1);
                    goto done;
                }
            }
            if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
                fail_at(p, vat, "the id is not an integer");
                goto done;
            }
            if ((ne == ecap && !(e = ac_try_realloc(e, sizeof *e * (ecap = ecap ? 2 * ecap : 1024)))) ||
                (pool_n + toklen > pool_cap && !(pool = ac_try_realloc(pool, pool_cap = 2 * (pool_n + toklen) + 4096)))) {
                fail_at(p, at, "not enough memory");
                goto done;
            }
            memcpy(pool + pool_n, tokbuf, toklen);
            e[ne++] = (json_entry){(int64_t)pool_n, (int32_t)toklen, (int32_t)id, at};
            pool_n += toklen;
            if (ne > INT32_MAX - 1) {
                fail_at(p, at, "too many tokens");
                goto done;
            }
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == '}') { p->i++; break; }
            fail_at(p, p->i, p->i >= p->n ? "the file ends inside the object" : "expected ',' or '}'");
            goto done;
        }
    skip_ws(p);
    if (p->i < p->n) {
        fail_at(p, p->i, "text after the object");
        goto done;
    }
    if (ne == 0) {
        fail_at(p, 0, "the object has no tokens");
        goto done;
    }
    /* ids: each of 0..n-1 exactly once */
    first = ac_try_malloc(sizeof(size_t) * ne);
    off = ac_try_malloc(sizeof(int64_t) * (ne + 1));
    bytes = ac_try_malloc(pool_n ? pool_n : 1);
    if (!first || !off || !bytes) {
        fail_at(p, 0, "not enough memory");
        goto done;
    }
    for (size_t k = 0; k < ne; k++) first[k] = SIZE_MAX;
    for (size_t k = 0; k < ne; k++) {
        if ((size_t)e[k].id >= ne) {
            fail_at(p, e[k].at, "id %d is out of range: the file has %zu tokens, so the ids are 0..%zu", (int)e[k].id, ne, ne - 1);
            goto done;
        }
        if (first[e[k].id] != SIZE_MAX) {
            size_t line, col;
            line_col(p->s, first[e[k].id], &line, &col);
            fail_at(p, e[k].at, "id %d is given twice (first at %zu:%zu)", (int)e[k].id, line, col);
            goto done;
        }
        first[e[k].id] = e[k].at;
    }
    for (size_t k = 0; k < ne; k++) off[e[k].id + 1] = e[k].len; /* lengths by id, then offsets */
    off[0] = 0;
    for (size_t id = 0; id < ne; id++) off[id + 1] += off[id];
    for (size_t k = 0; k < ne; k++) memcpy(bytes + off[e[k].id], pool + e[k].boff, (size_t)e[k].len);
    char msg[160];
    if (!tok_set_vocab(t, (int32_t)ne, bytes, off, msg, sizeof msg)) {
        bytes = NULL, off = NULL; /* the tokenizer owns them now */
        int a, b;
        if (sscanf(msg, "ids %d and %d are the same token", &a, &b) == 2)
            fail_at(p, first[b], "the token is given twice (first at id %d)", a);
        else
            snprintf(p->err, p->errlen, "tokenizer: %s: %s", p->name, msg);
        goto done;
    }
    bytes = NULL, off = NULL;
    ok = true;
done:
    free(pool), free(tokbuf), free(e), free(first), free(off), free(bytes);
    return ok;
}

/* ---- vocab.bpe ------------------------------------------------------------------------------------- */
static bool merge_fail(char *err, size_t errlen, const char *name, size_t line, const char *fmt, ...) {
    int k = snprintf(err, errlen, "tokenizer: %s:%zu: ", name, line);
    if (k > 0 && (size_t)k < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* A field of a merge line: its characters as the bytes they spell, and the token of those. */
static int32_t merge_field(const Tokenizer *t, const char *s, size_t n, char *buf, bool *spelled) {
    size_t k = 0;
    *spelled = true;
    for (size_t i = 0; i < n;) {
        int len;
        uint32_t cp = tok_utf8_at((const unsigned char *)s, i, &len);
        int b = tok_char_byte(cp);
        if (b < 0) {
            *spelled = false;
            return -1;
        }
        buf[k++] = (char)b;
        i += (size_t)len;
    }
    return tok_find(t, buf, k);
}

static bool load_merges(Tokenizer *t, const char *s, size_t n, const char *name, const char *enc_name, char *err,
                        size_t errlen) {
    size_t line = 0;
    char *buf = ac_try_malloc(n + 1);
    if (!buf) return merge_fail(err, errlen, name, 0, "not enough memory");
    bool ok = false;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - s) : n, len = end - i;
        const char *l = s + i;
        line++;
        i = end + 1;
        if (len && l[len - 1] == '\r') len--;
        if (line == 1 && len >= 8 && memcmp(l, "#version", 8) == 0) continue; /* the header */
        if (len == 0) continue;
        const char *sp = memchr(l, ' ', len);
        char show[200], show2[200];
        if (!sp || sp == l || sp == l + len - 1 || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - l))) {
            merge_fail(err, errlen, name, line, "expected two tokens separated by one space, got \"%s\"", shown(show, l, len));
            goto done;
        }
        size_t la = (size_t)(sp - l), lb = len - la - 1;
        bool spelled;
        int32_t a = merge_field(t, l, la, buf, &spelled);
        if (a < 0) {
            merge_fail(err, errlen, name, line, spelled ? "\"%s\" is not a token of %s" : "\"%s\" has a character that spells no byte%s",
                       shown(show, l, la), spelled ? enc_name : "");
            goto done;
        }
        int32_t b = merge_field(t, sp + 1, lb, buf, &spelled);
        if (b < 0) {
            merge_fail(err, errlen, name, line, spelled ? "\"%s\" is not a token of %s" : "\"%s\" has a character that spells no byte%s",
                       shown(show, sp + 1, lb), spelled ? enc_name : "");
            goto done;
        }
        int32_t other = -1;
        switch (tok_add_merge(t, a, b, &other)) {
        case TOK_MERGE_OK: break;
        case TOK_MERGE_NO_RESULT:
            merge_fail(err, errlen, name, line, "\"%s\" + \"%s\" is not a token of %s", shown(show, l, la),
                       shown(show2, sp + 1, lb), enc_name);
            goto done;
        case TOK_MERGE_DUPLICATE:
            merge_fail(err, errlen, name, line, "the merge \"%s\" is given twice (first as merge %d)", shown(show, l, len), (int)other);
            goto done;
        case TOK_MERGE_NOMEM: merge_fail(err, errlen, name, line, "not enough memory"); goto done;
        }
    }
    ok = true;
done:
    free(buf);
    return ok;
}

/* ---- loading ----------------------------------------------------------------------------------------- */
static bool utf8_or_fail(const char *s, size_t n, const char *name, char *err, size_t errlen) {
    size_t bad = tok_utf8_check(s, n);
    if (bad == n) return true;
    size_t line, col;
    line_col(s, bad, &line, &col);
    snprintf(err, errlen, "tokenizer: %s:%zu:%zu: not UTF-8 (byte %zu is 0x%02X)", name, line, col, bad, (unsigned char)s[bad]);
    return false;
}

Tokenizer *tokenizer_load_memory(const char *encoder, size_t encoder_len, const char *merges, size_t merges_len,
                                 const char *encoder_name, const char *merges_name, char *err, size_t errlen) {
    if (!utf8_or_fail(encoder, encoder_len, encoder_name, err, errlen) ||
        !utf8_or_fail(merges, merges_len, merges_name, err, errlen))
        return NULL;
    Tokenizer *t = tok_alloc();
    if (!t) {
        snprintf(err, errlen, "tokenizer: not enough memory");
        return NULL;
    }
    json p = {encoder, encoder_name, encoder_len, 0, err, errlen};
    if (!load_encoder(t, &p) || !load_merges(t, merges, merges_len, merges_name, encoder_name, err, errlen)) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

Tokenizer *tokenizer_load_files(const char *encoder_json, const char *vocab_bpe, char *err, size_t errlen) {
    size_t ne = 0, nm = 0;
    char *e = read_all(encoder_json, &ne, err, errlen);
    char *m = e ? read_all(vocab_bpe, &nm, err, errlen) : NULL;
    Tokenizer *t = m ? tokenizer_load_memory(e, ne, m, nm, encoder_json, vocab_bpe, err, errlen) : NULL;
    free(e);
    free(m);
    return t;
}

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

Tokenizer *tokenizer_load(const char *dir, char *err, size_t errlen) {
    size_t n = strlen(dir) + 16;
    char *a = ac_try_malloc(n), *b = ac_try_malloc(n);
    Tokenizer *t = NULL;
    if (!a || !b) {
        snprintf(err, errlen, "tokenizer: not enough memory");
    } else {
        snprintf(a, n, "%s/encoder.json", dir);
        snprintf(b, n, "%s/vocab.bpe", dir);
        if (!exists(a)) { /* Hugging Face's names */
            snprintf(a, n, "%s/vocab.json", dir);
            snprintf(b, n, "%s/merges.txt", dir);
            if (!exists(a)) {
                snprintf(err, errlen,
                         "tokenizer: %s has no encoder.json and vocab.bpe (OpenAI's and tiktoken's names) nor vocab.json "
                         "and merges.txt (Hugging Face's): GPT-2's tokenizer files are needed there",
                         dir);
                free(a), free(b);
                return NULL;
            }
        }
        t = tokenizer_load_files(a, b, err, errlen);
    }
    free(a), free(b);
    return t;
}

/* ---- saving ------------------------------------------------------------------------------------------- */
static void put_spelled(FILE *f, const char *s, size_t n, bool json_escape) {
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tok_byte_char((unsigned char)s[i]);
        if (json_escape) { /* as Python's json.dumps: ASCII, \uXXXX for the rest */
            if (cp == '"' || cp == '\\') fprintf(f, "\\%c", (char)cp);
            else if (cp < 0x80) fputc((int)cp, f);
            else fprintf(f, "\\u%04x", (unsigned)cp);
        } else if (cp < 0x80) {
            fputc((int)cp, f);
        } else {
            char u[4];
            fwrite(u, 1, (size_t)ac_utf8_put(cp, u), f);
        }
    }
}

/* PATH.tmp written whole, then renamed over PATH. */
static bool save_one(const Tokenizer *t, const char *dir, const char *file, bool merges, char *err, size_t errlen) {
    size_t n = strlen(dir) + strlen(file) + 8;
    char *path = ac_try_malloc(n), *tmp = ac_try_malloc(n);
    bool ok = false;
    if (!path || !tmp) {
        snprintf(err, errlen, "tokenizer: not enough memory");
        goto done;
    }
    snprintf(path, n, "%s/%s", dir, file);
    snprintf(tmp, n, "%s/%s.tmp", dir, file);
    char why[256];
    if (!ac_output_path_check(path, false, why, sizeof why)) {
        snprintf(err, errlen, "tokenizer: %s", why);
        goto done;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "tokenizer: cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (merges) {
        fputs("#version: 0.2\n", f);
        for (int32_t r = 0; r < t->n_merges; r++) {
            int32_t a = t->merge_left[r], b = t->merge_right[r];
            put_spelled(f, t->bytes + t->off[a], (size_t)(t->off[a + 1] - t->off[a]), false);
            fputc(' ', f);
            put_spelled(f, t->bytes + t->off[b], (size_t)(t->off[b + 1] - t->off[b]), false);
            fputc('\n', f);
        }
    } else {
        fputc('{', f);
        for (int32_t id = 0; id < t->n_vocab; id++) {
            fputs(id ? ", \"" : "\"", f);
            put_spelled(f, t->bytes + t->off[id], (size_t)(t->off[id + 1] - t->off[id]), true);
            fprintf(f, "\": %d", (int)id);
        }
        fputc('}', f);
    }
    bool bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, errlen, "tokenizer: cannot write %s: %s", tmp, strerror(errno));
        remove(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "tokenizer: cannot rename %s to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
        goto done;
    }
    ok = true;
done:
    free(path), free(tmp);
    return ok;
}

bool tokenizer_save(const Tokenizer *t, const char *dir, char *err, size_t errlen) {
    return save_one(t, dir, "encoder.json", false, err, errlen) && save_one(t, dir, "vocab.bpe", true, err, errlen);
}
