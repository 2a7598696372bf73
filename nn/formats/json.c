/* JSON read as Python's json.load reads it and written as json.dump writes it (json.h).
 * The reader follows the rules of Python 3.11's scanner (its grammar, the order of its
 * checks and the positions its messages name), written here from those rules. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "extend.h"
#include "json.h"

/* ---- a growing byte buffer that remembers running out of memory ----------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} Buf;

static bool buf_reserve(Buf *b, size_t more) {
    if (b->oom) return false;
    if (b->n + more + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more + 1) {
        if (cap > SIZE_MAX / 2) { b->oom = true; return false; }
        cap *= 2;
    }
    char *s = ac_try_realloc(b->s, cap);
    if (!s) { b->oom = true; return false; }
    b->s = s;
    b->cap = cap;
    return true;
}

static void buf_put(Buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_byte(Buf *b, char c) { buf_put(b, &c, 1); }

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* The bytes a valid sequence starting with lead byte c has (0: c cannot start one), and the
 * range its second byte must be in (Unicode's table 3-7: no overlongs, no surrogates, <= U+10FFFF). */
static int utf8_seq(unsigned char c, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return 2;
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;
    if (c < 0xF0) return 3;
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;
    return c < 0xF5 ? 4 : 0;
}

/* Python's bytes.decode("utf-8") check: false with its UnicodeDecodeError text for the first
 * bad sequence (the maximal valid part of it is what the message's range covers). */
static bool utf8_check(const unsigned char *s, size_t len, char *msg, size_t msglen, size_t *at) {
    for (size_t i = 0; i < len;) {
        unsigned char lo, hi;
        int n = utf8_seq(s[i], &lo, &hi);
        const char *why = NULL;
        size_t k = 1;
        if (n == 0) why = "invalid start byte";
        for (; !why && k < (size_t)n; k++) {
            if (i + k >= len) why = "unexpected end of data";
            else if (s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xBF)) why = "invalid continuation byte";
            if (why) break;
        }
        if (why) {
            if (k <= 1)
                snprintf(msg, msglen, "'utf-8' codec can't decode byte 0x%02x in position %zu: %s", s[i], i, why);
            else
                snprintf(msg, msglen, "'utf-8' codec can't decode bytes in position %zu-%zu: %s", i, i + k - 1, why);
            *at = i;
            return false;
        }
        i += (size_t)n;
    }
    return true;
}

/* One code point of UTF-8 that may hold surrogates (WTF-8: how lone "\udXXX" are kept);
 * returns its length, 0 if invalid. */
static int wtf8_next(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned char lo, hi;
    int n = utf8_seq(s[0], &lo, &hi);
    if (s[0] == 0xED) hi = 0xBF; /* surrogates allowed */
    if (n == 0 || (size_t)n > len) return 0;
    if (n == 1) { *cp = s[0]; return 1; }
    if (s[1] < lo || s[1] > hi) return 0;
    uint32_t c = s[0] & (0x7F >> n);
    for (int k = 1; k < n; k++) {
        if (k > 1 && (s[k] < 0x80 || s[k] > 0xBF)) return 0;
        c = c << 6 | (s[k] & 0x3F);
    }
    *cp = c;
    return n;
}

static void put_utf8(Buf *b, uint32_t c) { /* the one encoder (extend.h), which writes a lone surrogate's 3 bytes too */
    char o[4];
    buf_put(b, o, (size_t)ac_utf8_put(c, o));
}

/* ---- values --------------------------------------------------------------------------------- */

static JsonValue *new_value(JsonType t) {
    JsonValue *v = ac_try_malloc(sizeof *v);
    if (v) *v = (JsonValue){.type = t};
    return v;
}

void json_free(JsonValue *v) {
    if (!v) return;
    for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) json_free(v->items[i]);
    for (size_t i = 0; v->type == JSON_OBJECT && i < v->n; i++) {
        free(v->members[i].key);
        json_free(v->members[i].value);
    }
    free(v->items);
    free(v->members);
    free(v->str);
    free(v);
}

/* Room for one more item or member; false when out of memory. */
static bool grow(JsonValue *v) {
    if (v->n < v->cap) return true;
    size_t cap = v->cap ? v->cap * 2 : 4;
    if (v->type == JSON_ARRAY) {
        JsonValue **p = cap <= SIZE_MAX / sizeof *p ? ac_try_realloc(v->items, cap * sizeof *p) : NULL;
        if (!p) return false;
        v->items = p;
    } else {
        JsonMember *p = cap <= SIZE_MAX / sizeof *p ? ac_try_realloc(v->members, cap * sizeof *p) : NULL;
        if (!p) return false;
        v->members = p;
    }
    v->cap = cap;
    return true;
}

/* ---- the reader ----------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *s;
    size_t len;
    bool failed;
    bool positioned;  /* the message takes ": line L column C (char P)" */
    size_t at;        /* the byte the message is about */
    char msg[256];
} Parser;

static void fail_at(Parser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = true;
    p->positioned = true;
    p->at = at;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->msg, sizeof p->msg, fmt, ap);
    va_end(ap);
}

static void fail_oom(Parser *p) {
    if (p->failed) return;
    fail_at(p, 0, "not enough memory to read the JSON (%zu bytes)", p->len);
    p->positioned = false;
}

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const Parser *p, size_t i) {
    while (i < p->len && is_ws(p->s[i])) i++;
    return i;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at i (i + 4 <= len): the value, or -1. */
static long hex4(const Parser *p, size_t i) {
    long v = 0;
    for (size_t k = 0; k < 4; k++) {
        int h = hexval(p->s[i + k]);
        if (h < 0) return -1;
        v = v << 4 | h;
    }
    return v;
}

/* The escape at s[i] == '\\' inside the string begun at `begin`: its character into out;
 * returns where the string goes on, or 0 after an error. As Python's scanner: "\uXXXX" needs a
 * character after its four digits, a high surrogate takes a following "\uXXXX" that is a low
 * one (a malformed one is an error), anything else leaves it alone. */
static size_t parse_escape(Parser *p, size_t i, size_t begin, Buf *out) {
    size_t next = i + 1;
    if (next == p->len) { fail_at(p, begin, "Unterminated string starting at"); return 0; }
    unsigned char c = p->s[next];
    if (c != 'u') {
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *k = c ? strchr(from, c) : NULL;
        if (!k) { fail_at(p, i, "Invalid \\escape"); return 0; }
        buf_byte(out, to[k - from]);
        return next + 1;
    }
    size_t u = next, end = u + 5; /* past the four digits */
    if (end >= p->len) { fail_at(p, u, "Invalid \\uXXXX escape"); return 0; }
    long cp = hex4(p, u + 1);
    if (cp < 0) { fail_at(p, u, "Invalid \\uXXXX escape"); return 0; }
    if (cp >= 0xD800 && cp <= 0xDBFF && end + 6 < p->len && p->s[end] == '\\' && p->s[end + 1] == 'u') {
        long lo = hex4(p, end + 2);
        if (lo < 0) { fail_at(p, end + 1, "Invalid \\uXXXX escape"); return 0; }
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            put_utf8(out, 0x10000 + (((uint32_t)cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00));
            return end + 6;
        }
    }
    put_utf8(out, (uint32_t)cp); /* a lone surrogate too: WTF-8, as Python's str keeps it */
    return end;
}

/* The string whose opening quote is at begin; *next: past its closing quote. */
static bool parse_string(Parser *p, size_t begin, size_t *next, char **str, size_t *len) {
    Buf out = {0};
    buf_reserve(&out, 0);
    size_t i = begin + 1;
    for (;;) {
        size_t j = i;
        while (j < p->len && p->s[j] != '"' && p->s[j] != '\\') {
            if (p->s[j] <= 0x1F) { fail_at(p, j, "Invalid control character at"); goto bail; }
            j++;
        }
        if (j >= p->len) { fail_at(p, begin, "Unterminated string starting at"); goto bail; }
        buf_put(&out, (const char *)p->s + i, j - i);
        if (p->s[j] == '"') { i = j + 1; break; }
        i = parse_escape(p, j, begin, &out);
        if (!i) goto bail;
    }
    if (out.oom) { fail_oom(p); goto bail; }
    *next = i;
    *str = out.s;
    *len = out.n;
    return true;
bail:
    free(out.s);
    return false;
}

static bool is_digit(const Parser *p, size_t i) { return i < p->len && p->s[i] >= '0' && p->s[i] <= '9'; }

static bool starts(const Parser *p, size_t i, const char *word) {
    size_t n = strlen(word);
    return p->len - i >= n && memcmp(p->s + i, word, n) == 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? at i; NULL (no error set) when there is none. */
static JsonValue *parse_number(Parser *p, size_t i, size_t *next) {
    size_t j = i;
    if (j < p->len && p->s[j] == '-') j++;
    if (!is_digit(p, j)) return NULL;
    if (p->s[j] == '0') j++;
    else while (is_digit(p, j)) j++;
    bool is_float = false;
    if (j + 1 < p->len && p->s[j] == '.' && is_digit(p, j + 1)) {
        is_float = true;
        for (j += 2; is_digit(p, j);) j++;
    }
    if (j + 1 < p->len && (p->s[j] == 'e' || p->s[j] == 'E')) {
        size_t e = j + 1;
        if (p->s[e] == '-' || p->s[e] == '+') e++;
        if (is_digit(p, e)) {
            is_float = true;
            for (j = e; is_digit(p, j);) j++;
        }
    }
    size_t n = j - i, digits = n - (p->s[i] == '-');
    if (!is_float && digits > 4300) {
        fail_at(p, i, "Exceeds the limit (4300 digits) for integer string conversion: value has %zu digits; "
                      "use sys.set_int_max_str_digits() to increase the limit", digits);
        p->positioned = false; /* a ValueError, not a JSONDecodeError: Python names no place */
        return NULL;
    }
    JsonValue *v = new_value(JSON_NUMBER);
    char *text = ac_try_malloc(n + 1);
    if (!v || !text) { free(v); free(text); fail_oom(p); return NULL; }
    memcpy(text, p->s + i, n);
    text[n] = 0;
    v->number = strtod(text, NULL);
    v->is_int = !is_float;
    if (is_float) {
        free(text);
    } else {
        if (strcmp(text, "-0") == 0) memmove(text, text + 1, 2); /* int("-0") prints 0 */
        v->str = text;
        v->len = strlen(text);
    }
    *next = j;
    return v;
}

static JsonValue *parse_value(Parser *p, size_t i, size_t *next, int depth);

static JsonValue *parse_array(Parser *p, size_t i, size_t *next, int depth) {
    JsonValue *v = new_value(JSON_ARRAY);
    if (!v) { fail_oom(p); return NULL; }
    i = skip_ws(p, i + 1);
    if (i < p->len && p->s[i] == ']') { *next = i + 1; return v; }
    for (;;) {
        JsonValue *item = parse_value(p, i, &i, depth);
        if (!item) goto bail;
        if (!grow(v)) { json_free(item); fail_oom(p); goto bail; }
        v->items[v->n++] = item;
        i = skip_ws(p, i);
        if (i < p->len && p->s[i] == ']') break;
        if (i >= p->len || p->s[i] != ',') { fail_at(p, i, "Expecting ',' delimiter"); goto bail; }
        i = skip_ws(p, i + 1);
    }
    *next = i + 1;
    return v;
bail:
    json_free(v);
    return NULL;
}

static int cmp_key(const JsonMember *a, const JsonMember *b) {
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);
    return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

typedef struct { const JsonMember *m; size_t at; } Slot;

static int cmp_slot(const void *x, const void *y) {
    const Slot *a = x, *b = y;
    int c = cmp_key(a->m, b->m);
    return c ? c : (a->at > b->at) - (a->at < b->at);
}

/* A key given more than once keeps its first place and its last value, as a dict built
 * pair by pair: sorted by key (O(n log n), whatever a hostile file holds), then compacted. */
static bool dedupe_members(JsonValue *v) {
    if (v->n < 2) return true;
    Slot *s = ac_try_malloc(v->n * sizeof *s);
    if (!s) return false;
    for (size_t i = 0; i < v->n; i++) s[i] = (Slot){&v->members[i], i};
    qsort(s, v->n, sizeof *s, cmp_slot);
    bool any = false;
    for (size_t g = 0, e; g < v->n; g = e) {
        for (e = g + 1; e < v->n && cmp_key(s[g].m, s[e].m) == 0;) e++;
        if (e - g == 1) continue;
        any = true;
        JsonMember *keep = &v->members[s[g].at];
        for (size_t k = g + 1; k < e; k++) {
            JsonMember *dup = &v->members[s[k].at];
            json_free(keep->value);
            keep->value = dup->value;
            free(dup->key);
            dup->key = NULL;
            dup->value = NULL;
        }
    }
    free(s);
    if (!any) return true;
    size_t w = 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->members[i].key) v->members[w++] = v->members[i];
    v->n = w;
    return true;
}

static JsonValue *parse_object(Parser *p, size_t i, size_t *next, int depth) {
    JsonValue *v = new_value(JSON_OBJECT);
    if (!v) { fail_oom(p); return NULL; }
    i = skip_ws(p, i + 1);
    if (i < p->len && p->s[i] == '}') { *next = i + 1; return v; }
    for (;;) {
        if (i >= p->len || p->s[i] != '"') { fail_at(p, i, "Expecting property name enclosed in double quotes"); goto bail; }
        char *key;
        size_t key_len;
        if (!parse_string(p, i, &i, &key, &key_len)) goto bail;
        i = skip_ws(p, i);
        if (i >= p->len || p->s[i] != ':') { free(key); fail_at(p, i, "Expecting ':' delimiter"); goto bail; }
        JsonValue *value = parse_value(p, skip_ws(p, i + 1), &i, depth);
        if (!value || !grow(v)) { free(key); json_free(value); fail_oom(p); goto bail; }
        v->members[v->n++] = (JsonMember){key, key_len, value};
        i = skip_ws(p, i);
        if (i < p->len && p->s[i] == '}') break;
        if (i >= p->len || p->s[i] != ',') { fail_at(p, i, "Expecting ',' delimiter"); goto bail; }
        i = skip_ws(p, i + 1);
    }
    if (!dedupe_members(v)) { fail_oom(p); goto bail; }
    *next = i + 1;
    return v;
bail:
    json_free(v);
    return NULL;
}

static JsonValue *constant(Parser *p, JsonType t, bool b, double d) {
    JsonValue *v = new_value(t);
    if (!v) { fail_oom(p); return NULL; }
    v->boolean = b;
    v->number = d;
    return v;
}

/* The value at i (no whitespace before it); NULL after an error ("Expecting value" where
 * nothing starts one). */
static JsonValue *parse_value(Parser *p, size_t i, size_t *next, int depth) {
    if (i >= p->len) { fail_at(p, i, "Expecting value"); return NULL; }
    if ((p->s[i] == '[' || p->s[i] == '{') && depth >= JSON_MAX_DEPTH) {
        fail_at(p, i, "JSON nested deeper than %d levels", JSON_MAX_DEPTH);
        return NULL;
    }
    static const struct { const char *word; JsonType t; bool b; double d; } words[] = {
        {"null", JSON_NULL, false, 0}, {"true", JSON_BOOL, true, 0}, {"false", JSON_BOOL, false, 0},
        {"NaN", JSON_NUMBER, false, NAN}, {"Infinity", JSON_NUMBER, false, INFINITY},
        {"-Infinity", JSON_NUMBER, false, -INFINITY}};
    switch (p->s[i]) {
    case '"': {
        JsonValue *v = new_value(JSON_STRING);
        if (!v) { fail_oom(p); return NULL; }
        if (!parse_string(p, i, next, &v->str, &v->len)) { free(v); return NULL; }
        return v;
    }
    case '[': return parse_array(p, i, next, depth + 1);
    case '{': return parse_object(p, i, next, depth + 1);
    default: break;
    }
    for (size_t k = 0; k < sizeof words / sizeof *words; k++)
        if (starts(p, i, words[k].word)) {
            *next = i + strlen(words[k].word);
            return constant(p, words[k].t, words[k].b, words[k].d);
        }
    JsonValue *v = parse_number(p, i, next);
    if (!v) fail_at(p, i, "Expecting value");
    return v;
}

/* Python's place of byte `at`: the character index, line and column of the text as Python
 * holds it (a file read in text mode has CR LF and lone CR as one "\n"). */
static void python_place(const unsigned char *s, size_t at, bool universal, size_t *pos, size_t *line, size_t *col) {
    size_t chars = 0, lines = 1, last_nl = 0;
    bool any_nl = false;
    for (size_t i = 0; i < at; i++) {
        if ((s[i] & 0xC0) == 0x80) continue;
        if (universal && s[i] == '\r' && i + 1 < at && s[i + 1] == '\n') continue;
        if (s[i] == '\n' || (universal && s[i] == '\r')) lines++, last_nl = chars, any_nl = true;
        chars++;
    }
    *pos = chars;
    *line = lines;
    *col = any_nl ? chars - last_nl : chars + 1;
}

static JsonValue *load(const char *text, size_t len, bool universal, const char *name, char *err, size_t errlen) {
    Parser p = {(const unsigned char *)text, len, false, false, 0, {0}};
    char prefix[300] = "";
    if (name) snprintf(prefix, sizeof prefix, "%s: ", name);
    size_t at;
    if (!utf8_check(p.s, len, p.msg, sizeof p.msg, &at)) {
        size_t pos, line, col;
        python_place(p.s, at, universal, &pos, &line, &col);
        snprintf(err, errlen, "%s%s (line %zu column %zu)", prefix, p.msg, line, col);
        return NULL;
    }
    JsonValue *v = NULL;
    size_t end = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) fail_at(&p, 0, "Unexpected UTF-8 BOM (decode using utf-8-sig)");
    else v = parse_value(&p, skip_ws(&p, 0), &end, 0);
    if (v && skip_ws(&p, end) != len) fail_at(&p, skip_ws(&p, end), "Extra data");
    if (!p.failed) return v;
    json_free(v);
    if (!p.positioned) {
        snprintf(err, errlen, "%s%s", prefix, p.msg);
    } else {
        size_t pos, line, col;
        python_place(p.s, p.at, universal, &pos, &line, &col);
        snprintf(err, errlen, "%s%s: line %zu column %zu (char %zu)", prefix, p.msg, line, col, pos);
    }
    return NULL;
}

JsonValue *json_loads(const char *text, size_t len, char *err, size_t errlen) {
    return load(text, len, false, NULL, err, errlen);
}

JsonValue *json_load(const char *path, char *err, size_t errlen) {
    size_t len;
    char *text = ac_read_file(path, &len, err, errlen);
    if (!text) return NULL;
    JsonValue *v = load(text, len, true, path, err, errlen);
    free(text);
    return v;
}

/* ---- the writer ----------------------------------------------------------------------------- */

typedef struct {
    Buf b;
    int indent;
    bool bad;        /* a string that is not UTF-8, or too deep */
    char msg[128];
} Writer;

static void put_u(Buf *b, uint32_t u) { /* u < 0x10000: a code unit */
    char e[16];
    snprintf(e, sizeof e, "\\u%04x", (unsigned)(u & 0xffff));
    buf_put(b, e, 6);
}

/* ensure_ascii's string: '"' and '\\' escaped, \n \r \t \b \f, anything else outside
 * ' '..'~' as \uXXXX (astral characters as their surrogate pair). */
static void write_string(Writer *w, const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    buf_byte(&w->b, '"');
    for (size_t i = 0; i < len;) {
        uint32_t c;
        int n = wtf8_next(s + i, len - i, &c);
        if (n == 0) {
            if (!w->bad) snprintf(w->msg, sizeof w->msg, "json_dumps: a string is not UTF-8 (byte 0x%02x at offset %zu)", s[i], i);
            w->bad = true;
            return;
        }
        i += (size_t)n;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (esc) buf_puts(&w->b, esc);
        else if (c >= ' ' && c <= '~') buf_byte(&w->b, (char)c);
        else if (c < 0x10000) put_u(&w->b, c);
        else put_u(&w->b, 0xD800 + ((c - 0x10000) >> 10)), put_u(&w->b, 0xDC00 + ((c - 0x10000) & 0x3FF));
    }
    buf_byte(&w->b, '"');
}

static void write_number(Writer *w, const JsonValue *v) {
    char buf[32];
    if (v->is_int && v->str) buf_put(&w->b, v->str, v->len);
    else if (isnan(v->number)) buf_puts(&w->b, "NaN");
    else if (isinf(v->number)) buf_puts(&w->b, v->number > 0 ? "Infinity" : "-Infinity");
    else buf_puts(&w->b, ac_pyfloat(v->number, buf)); /* float.__repr__ */
}

/* Before an item at `level`: a newline and the indent, or nothing (indent=None). */
static void newline(Writer *w, int level) {
    if (w->indent < 0) return;
    buf_byte(&w->b, '\n');
    for (long k = 0; k < (long)level * w->indent && !w->b.oom; k++) buf_byte(&w->b, ' ');
}

static void write_value(Writer *w, const JsonValue *v, int level) {
    if (w->bad || w->b.oom) return;
    if (level > JSON_MAX_DEPTH) {
        snprintf(w->msg, sizeof w->msg, "json_dumps: nested deeper than %d levels", JSON_MAX_DEPTH);
        w->bad = true;
        return;
    }
    const char *sep = w->indent < 0 ? ", " : ",";
    switch (v->type) {
    case JSON_NULL: buf_puts(&w->b, "null"); return;
    case JSON_BOOL: buf_puts(&w->b, v->boolean ? "true" : "false"); return;
    case JSON_NUMBER: write_number(w, v); return;
    case JSON_STRING: write_string(w, v->str, v->len); return;
    case JSON_ARRAY:
    case JSON_OBJECT: break;
    }
    bool arr = v->type == JSON_ARRAY;
    buf_byte(&w->b, arr ? '[' : '{');
    for (size_t i = 0; i < v->n; i++) {
        if (i) buf_puts(&w->b, sep);
        newline(w, level + 1);
        if (!arr) {
            write_string(w, v->members[i].key, v->members[i].key_len);
            buf_puts(&w->b, ": ");
        }
        write_value(w, arr ? v->items[i] : v->members[i].value, level + 1);
    }
    if (v->n) newline(w, level);
    buf_byte(&w->b, arr ? ']' : '}');
}

char *json_dumps(const JsonValue *v, int indent, size_t *len, char *err, size_t errlen) {
    Writer w = {{0}, indent, false, {0}};
    buf_reserve(&w.b, 0);
    write_value(&w, v, 0);
    if (w.bad || w.b.oom) {
        if (w.bad) snprintf(err, errlen, "%s", w.msg);
        else snprintf(err, errlen, "json_dumps: not enough memory (%zu bytes)", w.b.cap);
        free(w.b.s);
        return NULL;
    }
    if (len) *len = w.b.n;
    return w.b.s;
}

bool json_dump(const JsonValue *v, const char *path, int indent, char *err, size_t errlen) {
    size_t n;
    char *text = json_dumps(v, indent, &n, err, errlen);
    if (!text) return false;
    bool ok = false;
    char *tmp = NULL;
    if (!ac_output_path_check(path, false, err, errlen)) goto done; /* never renamed over a device or a FIFO */
    size_t plen = strlen(path);
    tmp = ac_try_malloc(plen + 5);
    if (!tmp) { snprintf(err, errlen, "not enough memory"); goto done; }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) { snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno)); goto done; }
    ok = fwrite(text, 1, n, f) == n;
    ok = fflush(f) == 0 && ok;
#if defined(__unix__) || defined(__APPLE__)
    ok = (fsync(fileno(f)) == 0 || errno == EINVAL) && ok; /* on disk before the rename makes it the file */
#endif
    ok = fclose(f) == 0 && ok;
    if (!ok) snprintf(err, errlen, "writing %s failed: %s", tmp, strerror(errno));
    else if (rename(tmp, path) != 0) ok = false, snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (!ok) remove(tmp);
done:
    free(tmp);
    free(text);
    return ok;
}

/* ---- reading and building a tree ------------------------------------------------------------ */

size_t json_len(const JsonValue *v) { return v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT) ? v->n : 0; }

JsonValue *json_at(const JsonValue *v, size_t i) {
    return v && v->type == JSON_ARRAY && i < v->n ? v->items[i] : NULL;
}

static JsonMember *find(const JsonValue *obj, const char *key, size_t key_len) {
    for (size_t i = 0; obj && obj->type == JSON_OBJECT && i < obj->n; i++)
        if (obj->members[i].key_len == key_len && memcmp(obj->members[i].key, key, key_len) == 0) return &obj->members[i];
    return NULL;
}

JsonValue *json_get(const JsonValue *obj, const char *key) {
    JsonMember *m = find(obj, key, strlen(key));
    return m ? m->value : NULL;
}

const char *json_type_name(JsonType t) {
    switch (t) {
    case JSON_NULL: return "NoneType";
    case JSON_BOOL: return "bool";
    case JSON_NUMBER: return "int";
    case JSON_STRING: return "str";
    case JSON_ARRAY: return "list";
    case JSON_OBJECT: return "dict";
    }
    return "?";
}

const char *json_value_type_name(const JsonValue *v) {
    return v->type == JSON_NUMBER && !v->is_int ? "float" : json_type_name(v->type);
}

static JsonValue *must(JsonValue *v) {
    if (!v) ac_error("json: not enough memory: you tried to allocate %zu bytes", sizeof *v);
    return v;
}

JsonValue *json_new_null(void) { return must(new_value(JSON_NULL)); }

JsonValue *json_new_bool(bool b) {
    JsonValue *v = must(new_value(JSON_BOOL));
    v->boolean = b;
    return v;
}

JsonValue *json_new_int(int64_t i) {
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)i);
    JsonValue *v = must(new_value(JSON_NUMBER));
    v->is_int = true;
    v->number = (double)i;
    v->str = ac_strdup(text);
    v->len = strlen(text);
    return v;
}

JsonValue *json_new_float(double d) {
    JsonValue *v = must(new_value(JSON_NUMBER));
    v->number = d;
    return v;
}

JsonValue *json_new_string(const char *s, size_t len) {
    char *copy = ac_malloc(len + 1); /* first: an error here leaks nothing */
    if (len) memcpy(copy, s, len);
    copy[len] = 0;
    JsonValue *v = new_value(JSON_STRING);
    if (!v) free(copy);
    must(v)->str = copy;
    v->len = len;
    return v;
}

JsonValue *json_new_array(void) { return must(new_value(JSON_ARRAY)); }
JsonValue *json_new_object(void) { return must(new_value(JSON_OBJECT)); }

void json_append(JsonValue *array, JsonValue *item) {
    if (!array || array->type != JSON_ARRAY) ac_raise(AC_TYPE_ERROR, "json_append: not a list");
    if (!grow(array)) ac_error("json_append: not enough memory");
    array->items[array->n++] = item;
}

void json_set(JsonValue *obj, const char *key, JsonValue *value) {
    if (!obj || obj->type != JSON_OBJECT) ac_raise(AC_TYPE_ERROR, "json_set: not a dict");
    size_t key_len = strlen(key);
    JsonMember *m = find(obj, key, key_len);
    if (m) {
        if (m->value != value) json_free(m->value);
        m->value = value;
        return;
    }
    if (!grow(obj)) ac_error("json_set: not enough memory");
    obj->members[obj->n++] = (JsonMember){ac_strdup(key), key_len, value};
}

void json_set_string(JsonValue *obj, const char *key, const char *s, size_t len) {
    json_set(obj, key, json_new_string(s, len));
}

JsonValue *json_copy(const JsonValue *v) {
    JsonValue *c = must(new_value(v->type));
    c->boolean = v->boolean;
    c->is_int = v->is_int;
    c->number = v->number;
    if (v->str) {
        c->str = ac_malloc(v->len + 1);
        memcpy(c->str, v->str, v->len + 1);
        c->len = v->len;
    }
    for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) json_append(c, json_copy(v->items[i]));
    for (size_t i = 0; v->type == JSON_OBJECT && i < v->n; i++) {
        if (!grow(c)) ac_error("json_copy: not enough memory");
        char *key = ac_malloc(v->members[i].key_len + 1);
        memcpy(key, v->members[i].key, v->members[i].key_len + 1);
        c->members[c->n++] = (JsonMember){key, v->members[i].key_len, json_copy(v->members[i].value)};
    }
    return c;
}
