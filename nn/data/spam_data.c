/* Chapter 6's data pipeline as pandas 1.5 / numpy / PyTorch 1.13 run it (spam_data.h says what and how). */
#include "spam_data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chartext.h"

static bool fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = ac_try_malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* ---- frames ---------------------------------------------------------------- */

void SpamFrame_free(SpamFrame *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n; i++) free(f->texts[i]);
    free(f->texts);
    free(f->labels);
    free(f->index);
    memset(f, 0, sizeof *f);
}

/* room for n rows; the arrays are n long and zeroed (so a partly filled frame frees) */
static bool frame_alloc(SpamFrame *f, int64_t n) {
    memset(f, 0, sizeof *f);
    size_t k = n > 0 ? (size_t)n : 1;
    f->labels = ac_try_malloc(k * sizeof *f->labels);
    f->index = ac_try_malloc(k * sizeof *f->index);
    f->texts = ac_try_malloc(k * sizeof *f->texts);
    if (!f->labels || !f->index || !f->texts) {
        SpamFrame_free(f);
        return false;
    }
    memset(f->texts, 0, k * sizeof *f->texts);
    return true;
}

/* the row at pos of src becomes row i of dst (n counts the rows filled, for SpamFrame_free) */
static bool frame_copy_row(SpamFrame *dst, int64_t i, const SpamFrame *src, int64_t pos) {
    dst->texts[i] = dup_bytes(src->texts[pos], strlen(src->texts[pos]));
    if (!dst->texts[i]) return false;
    dst->labels[i] = src->labels[pos];
    dst->index[i] = src->index[pos];
    dst->n = i + 1;
    return true;
}

static bool frame_push(SpamFrame *f, int64_t *cap, int64_t label, char *text) {
    if (f->n == *cap) {
        int64_t c = *cap ? 2 * *cap : 64;
        int64_t *l = ac_try_realloc(f->labels, (size_t)c * sizeof *l);
        if (l) f->labels = l;
        int64_t *x = ac_try_realloc(f->index, (size_t)c * sizeof *x);
        if (x) f->index = x;
        char **t = ac_try_realloc(f->texts, (size_t)c * sizeof *t);
        if (t) f->texts = t;
        if (!l || !x || !t) return false;
        *cap = c;
    }
    f->labels[f->n] = label;
    f->index[f->n] = f->n;
    f->texts[f->n++] = text;
    return true;
}

/* ---- pandas' C parser (QUOTE_MINIMAL, doublequote, no escape char) ------------ */

enum { START_RECORD, START_FIELD, IN_FIELD, IN_QUOTED, QUOTE_IN_QUOTED, EAT_CRNL, EAT_CRNL_NOP };

typedef struct Parser Parser;
/* called at each record's end with its (exactly 2) fields; false stops the parse (err set) */
typedef bool (*record_fn)(Parser *ps, const char *f0, size_t n0, const char *f1, size_t n1);

struct Parser {
    const char *path;
    char delim;
    char *buf; /* the field being read */
    size_t len, cap;
    char *fields[2];
    size_t flen[2];
    int64_t nf;         /* fields of this record so far */
    int64_t file_lines; /* lines ended so far, as pandas counts them */
    record_fn on_record;
    SpamFrame *frame;
    int64_t frame_cap;
    bool header_seen;
    char *err;
    size_t errlen;
};

static bool push_char(Parser *ps, char c) {
    if (ps->len + 1 >= ps->cap) {
        size_t c2 = ps->cap ? 2 * ps->cap : 256;
        char *b = ac_try_realloc(ps->buf, c2);
        if (!b) return fail(ps->err, ps->errlen, "%s: not enough memory", ps->path);
        ps->buf = b, ps->cap = c2;
    }
    ps->buf[ps->len++] = c;
    return true;
}

static bool end_field(Parser *ps) {
    if (ps->nf < 2) {
        ps->fields[ps->nf] = dup_bytes(ps->buf ? ps->buf : "", ps->len);
        if (!ps->fields[ps->nf]) return fail(ps->err, ps->errlen, "%s: not enough memory", ps->path);
        ps->flen[ps->nf] = ps->len;
    }
    ps->nf++;
    ps->len = 0;
    return true;
}

static void drop_fields(Parser *ps) {
    for (int k = 0; k < 2; k++) free(ps->fields[k]), ps->fields[k] = NULL;
    ps->nf = 0;
}

static bool end_line(Parser *ps) {
    ps->file_lines++;
    bool ok = ps->nf == 2 ? ps->on_record(ps, ps->fields[0], ps->flen[0], ps->fields[1], ps->flen[1])
                          : fail(ps->err, ps->errlen, "%s: Expected 2 fields in line %lld, saw %lld", ps->path,
                                 (long long)ps->file_lines, (long long)ps->nf);
    drop_fields(ps);
    return ok;
}

/* pandas skips a line of nothing but spaces (and tabs, where the delimiter is not one) */
static bool whitespace_line(const Parser *ps, const char *p, size_t i, size_t n, size_t *end) {
    while (i < n && (p[i] == ' ' || (p[i] == '\t' && ps->delim != '\t'))) i++;
    *end = i;
    return i == n || p[i] == '\n' || p[i] == '\r';
}

/* One byte in state *st; *adv: whether it was consumed (some states look at it again). */
static bool step(Parser *ps, int *st, char c, bool *adv) {
    *adv = true;
    switch (*st) {
    case START_RECORD:
        if (c == '\n') ps->file_lines++;
        else if (c == '\r') ps->file_lines++, *st = EAT_CRNL_NOP;
        else *st = START_FIELD, *adv = false;
        return true;
    case START_FIELD:
    case IN_FIELD:
    case QUOTE_IN_QUOTED:
        if (c == '\n') { *st = START_RECORD; return end_field(ps) && end_line(ps); }
        if (c == '\r') { *st = EAT_CRNL; return end_field(ps); }
        if (c == ps->delim) { *st = START_FIELD; return end_field(ps); }
        if (c == '"' && *st == START_FIELD) { *st = IN_QUOTED; return true; }
        if (c == '"' && *st == QUOTE_IN_QUOTED) { *st = IN_QUOTED; return push_char(ps, '"'); }
        *st = IN_FIELD; /* after a closing quote the rest of the field is appended */
        return push_char(ps, c);
    case IN_QUOTED:
        if (c == '"') { *st = QUOTE_IN_QUOTED; return true; }
        return push_char(ps, c);
    case EAT_CRNL: /* a lone \r ends the line too; the byte after it starts the next */
        *adv = c == '\n';
        *st = START_RECORD;
        return end_line(ps);
    default: /* EAT_CRNL_NOP, after a blank line's \r: pandas swallows a \n or a delimiter there */
        *adv = c == '\n' || c == ps->delim;
        *st = START_RECORD;
        return true;
    }
}

static bool at_eof(Parser *ps, int st) {
    switch (st) {
    case IN_QUOTED:
        return fail(ps->err, ps->errlen, "%s: EOF inside string starting at row %lld", ps->path,
                    (long long)ps->file_lines);
    case START_FIELD:
    case IN_FIELD:
    case QUOTE_IN_QUOTED:
        return end_field(ps) && end_line(ps);
    case EAT_CRNL:
        return end_line(ps);
    default:
        return true;
    }
}

static bool parse(Parser *ps, const char *p, size_t n) {
    size_t i = n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0 ? 3 : 0; /* pandas drops a UTF-8 BOM */
    int st = START_RECORD;
    while (i < n) {
        size_t end;
        if (st == START_RECORD && (p[i] == ' ' || p[i] == '\t') && p[i] != ps->delim &&
            whitespace_line(ps, p, i, n, &end)) {
            i = end; /* its line end (or EOF) is read in START_RECORD: a blank line */
            continue;
        }
        bool adv;
        if (!step(ps, &st, p[i], &adv)) return false;
        i += adv;
    }
    return at_eof(ps, st);
}

/* ---- fields: what pandas would read as NaN, or not as a str ------------------- */

/* strict UTF-8, as Python's decoder: overlong forms, surrogates and code points past U+10FFFF refused */
static bool valid_utf8(const char *s, size_t n) {
    uint32_t cp;
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = (size_t)chartext_utf8_next(s + i, n - i, &cp))) return false;
    return true;
}

/* pandas 1.5's default na_values (pandas._libs.parsers.STR_NA_VALUES, "" aside) */
static const char *const NA_VALUES[] = {"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                                        "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null"};

static bool check_field(Parser *ps, const char *what, const char *s, size_t n) {
    long long line = (long long)ps->file_lines;
    if (memchr(s, 0, n)) return fail(ps->err, ps->errlen, "%s: line %lld: %s holds a NUL byte", ps->path, line, what);
    if (!valid_utf8(s, n))
        return fail(ps->err, ps->errlen, "%s: line %lld: not UTF-8 (in the %s)", ps->path, line, what);
    return true;
}

static bool check_text(Parser *ps, const char *s, size_t n) {
    long long line = (long long)ps->file_lines;
    if (!check_field(ps, "text", s, n)) return false;
    if (n == 0) return fail(ps->err, ps->errlen, "%s: line %lld: empty text (pandas reads it as NaN)", ps->path, line);
    for (size_t k = 0; k < sizeof NA_VALUES / sizeof *NA_VALUES; k++)
        if (strcmp(s, NA_VALUES[k]) == 0)
            return fail(ps->err, ps->errlen, "%s: line %lld: text \"%s\" is one of pandas' NaN markers (it reads as NaN)",
                        ps->path, line, s);
    return true;
}

/* label: index into names (2 of them), or the error */
static bool add_row(Parser *ps, const char *const names[2], const char *f0, size_t n0, char *f1, size_t n1) {
    if (!check_field(ps, "label", f0, n0) || !check_text(ps, f1, n1)) return false;
    int64_t label = strcmp(f0, names[0]) == 0 ? 0 : strcmp(f0, names[1]) == 0 ? 1 : -1;
    if (label < 0)
        return fail(ps->err, ps->errlen, "%s: line %lld: label \"%s\" is not %s or %s", ps->path,
                    (long long)ps->file_lines, f0, names[0], names[1]);
    if (!frame_push(ps->frame, &ps->frame_cap, label, f1))
        return fail(ps->err, ps->errlen, "%s: not enough memory", ps->path);
    ps->fields[1] = NULL; /* the frame holds the text now */
    return true;
}

static bool tsv_record(Parser *ps, const char *f0, size_t n0, const char *f1, size_t n1) {
    static const char *const names[2] = {"ham", "spam"};
    (void)f1;
    return add_row(ps, names, f0, n0, ps->fields[1], n1);
}

static bool csv_record(Parser *ps, const char *f0, size_t n0, const char *f1, size_t n1) {
    static const char *const names[2] = {"0", "1"};
    if (!ps->header_seen) {
        ps->header_seen = true;
        if (strcmp(f0, "Label") != 0 || strcmp(f1, "Text") != 0)
            return fail(ps->err, ps->errlen, "%s: line %lld: the header is not Label,Text", ps->path,
                        (long long)ps->file_lines);
        return true;
    }
    return add_row(ps, names, f0, n0, ps->fields[1], n1);
}

static char *read_file(const char *path, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, "%s: %s", path, strerror(errno)), NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 65536 > cap) {
            char *b = ac_try_realloc(buf, cap = 2 * cap + 65536);
            if (!b) {
                free(buf), fclose(f);
                return fail(err, errlen, "%s: not enough memory", path), NULL;
            }
            buf = b;
        }
        len += got = fread(buf + len, 1, cap - len, f);
    } while (got > 0);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return fail(err, errlen, "%s: read error", path), NULL;
    }
    *n = len;
    return buf;
}

static bool read_frame(const char *path, char delim, record_fn fn, SpamFrame *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t n;
    char *text = read_file(path, &n, err, errlen);
    if (!text) return false;
    Parser ps = {.path = path, .delim = delim, .on_record = fn, .frame = out, .err = err, .errlen = errlen};
    bool ok = parse(&ps, text, n);
    if (ok && delim == ',' && !ps.header_seen) ok = fail(err, errlen, "%s: No columns to parse from file", path);
    drop_fields(&ps);
    free(ps.buf);
    free(text);
    if (!ok) SpamFrame_free(out);
    return ok;
}

static bool has_label(const SpamFrame *f, int64_t label) {
    for (int64_t i = 0; i < f->n; i++)
        if (f->labels[i] == label) return true;
    return false;
}

bool spam_read_tsv(const char *path, SpamFrame *out, char *err, size_t errlen) {
    if (!read_frame(path, '\t', tsv_record, out, err, errlen)) return false;
    const char *missing = out->n == 0 ? "no rows" : !has_label(out, 1) ? "no spam" : !has_label(out, 0) ? "no ham" : NULL;
    if (!missing) return true;
    SpamFrame_free(out);
    return fail(err, errlen, "%s: %s (chapter 6 needs both ham and spam)", path, missing);
}

bool spam_read_csv(const char *path, SpamFrame *out, char *err, size_t errlen) {
    return read_frame(path, ',', csv_record, out, err, errlen);
}

/* ---- to_csv --------------------------------------------------------------- */

static bool write_text(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n")) return fputs(s, f) >= 0; /* Python's csv quotes only these here */
    if (fputc('"', f) == EOF) return false;
    for (; *s; s++)
        if ((*s == '"' && fputc('"', f) == EOF) || fputc(*s, f) == EOF) return false;
    return fputc('"', f) != EOF;
}

bool spam_to_csv(const SpamFrame *fr, const char *path, char *err, size_t errlen) {
    size_t n = strlen(path) + 5;
    char *tmp = ac_try_malloc(n);
    if (!tmp) return fail(err, errlen, "%s: not enough memory", path);
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fail(err, errlen, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return false;
    }
    bool ok = fputs("Label,Text\n", f) >= 0;
    for (int64_t i = 0; ok && i < fr->n; i++)
        ok = fprintf(f, "%lld,", (long long)fr->labels[i]) > 0 && write_text(f, fr->texts[i]) && fputc('\n', f) != EOF;
    int e = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) ok = false, e = errno;
    if (ok && rename(tmp, path) != 0) ok = false, e = errno;
    if (!ok) {
        remove(tmp);
        fail(err, errlen, "%s: %s", path, strerror(e ? e : EIO));
    }
    free(tmp);
    return ok;
}

/* ---- value_counts ---------------------------------------------------------- */

char *spam_value_counts(const SpamFrame *f, bool mapped) {
    int64_t count[2] = {0, 0};
    int first = -1; /* the label seen first comes first on a tie */
    for (int64_t i = 0; i < f->n; i++) {
        if (first < 0) first = (int)f->labels[i];
        count[f->labels[i] != 0]++;
    }
    const char *name[2] = {mapped ? "0" : "ham", mapped ? "1" : "spam"};
    int a = first < 0 ? 0 : first, b = 1 - a;
    if (count[b] > count[a]) a = b, b = 1 - a;
    int wi = 0, wv = 0;
    for (int k = 0; k < 2; k++) {
        if (!count[k]) continue;
        int w = (int)strlen(name[k]), v = snprintf(NULL, 0, "%lld", (long long)count[k]);
        wi = w > wi ? w : wi, wv = v > wv ? v : wv;
    }
    char *s = ac_try_malloc(128);
    if (!s) return NULL;
    int at = 0;
    s[0] = 0;
    for (int r = 0; r < 2; r++) {
        int k = r ? b : a;
        if (count[k])
            at += snprintf(s + at, 128 - (size_t)at, "%s%-*s    %*lld", at ? "\n" : "", wi, name[k], wv,
                           (long long)count[k]);
    }
    return s;
}

/* ---- numpy's legacy RandomState ------------------------------------------- */

void np_RandomState_seed(np_RandomState *rs, uint32_t seed) { torch_generator_manual_seed(&rs->g, seed); }

uint32_t np_random_interval(np_RandomState *rs, uint32_t max) {
    if (max == 0) return 0; /* numpy draws nothing then */
    uint32_t mask = max;
    mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4, mask |= mask >> 8, mask |= mask >> 16;
    uint32_t v;
    while ((v = ac_random32(&rs->g) & mask) > max) {}
    return v;
}

void np_permutation(np_RandomState *rs, int64_t n, int64_t *out) {
    for (int64_t i = 0; i < n; i++) out[i] = i;
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = np_random_interval(rs, (uint32_t)i), t = out[i];
        out[i] = out[j], out[j] = t;
    }
}

/* ---- sample, balance, split ------------------------------------------------ */

bool spam_sample(const SpamFrame *df, int64_t k, int64_t seed, SpamFrame *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (seed < 0 || seed > 4294967295LL) return fail(err, errlen, "Seed must be between 0 and 2**32 - 1");
    if (k < 0 || k > df->n)
        return fail(err, errlen, "Cannot take a larger sample than population when 'replace=False'");
    int64_t *perm = ac_try_malloc((size_t)(df->n ? df->n : 1) * sizeof *perm);
    if (!perm || !frame_alloc(out, k)) {
        free(perm);
        return fail(err, errlen, "sample: not enough memory");
    }
    np_RandomState rs;
    np_RandomState_seed(&rs, (uint32_t)seed);
    np_permutation(&rs, df->n, perm);
    bool ok = true;
    for (int64_t i = 0; ok && i < k; i++) ok = frame_copy_row(out, i, df, perm[i]);
    free(perm);
    if (!ok) SpamFrame_free(out);
    return ok || fail(err, errlen, "sample: not enough memory");
}

/* df[df["Label"] == label] (index kept) */
static bool select_label(const SpamFrame *df, int64_t label, SpamFrame *out) {
    if (!frame_alloc(out, df->n)) return false;
    for (int64_t i = 0; i < df->n; i++)
        if (df->labels[i] == label && !frame_copy_row(out, out->n, df, i)) return SpamFrame_free(out), false;
    return true;
}

/* pd.concat([a, b]), taking a's and b's rows (both end up empty) */
static bool concat(SpamFrame *a, SpamFrame *b, SpamFrame *out) {
    if (!frame_alloc(out, a->n + b->n)) return false;
    for (int s = 0; s < 2; s++) {
        SpamFrame *f = s ? b : a;
        for (int64_t i = 0; i < f->n; i++, out->n++) {
            out->labels[out->n] = f->labels[i], out->index[out->n] = f->index[i], out->texts[out->n] = f->texts[i];
            f->texts[i] = NULL;
        }
    }
    return true;
}

bool create_balanced_dataset(const SpamFrame *df, int64_t seed, SpamFrame *out, char *err, size_t errlen) {
    SpamFrame ham = {0}, spam = {0}, ham_subset = {0};
    memset(out, 0, sizeof *out);
    bool ok = select_label(df, 0, &ham) && select_label(df, 1, &spam);
    if (!ok) fail(err, errlen, "create_balanced_dataset: not enough memory");
    ok = ok && spam_sample(&ham, spam.n, seed, &ham_subset, err, errlen);
    if (ok && !concat(&ham_subset, &spam, out)) ok = fail(err, errlen, "create_balanced_dataset: not enough memory");
    SpamFrame_free(&ham), SpamFrame_free(&spam), SpamFrame_free(&ham_subset);
    return ok;
}

static bool slice(const SpamFrame *df, int64_t from, int64_t to, SpamFrame *out) {
    if (!frame_alloc(out, to - from)) return false;
    for (int64_t i = from; i < to; i++)
        if (!frame_copy_row(out, i - from, df, i)) return SpamFrame_free(out), false;
    return true;
}

bool random_split(const SpamFrame *df, double train_frac, double validation_frac, int64_t seed, SpamFrame *train,
                  SpamFrame *validation, SpamFrame *test, char *err, size_t errlen) {
    memset(train, 0, sizeof *train), memset(validation, 0, sizeof *validation), memset(test, 0, sizeof *test);
    if (!(train_frac >= 0 && validation_frac >= 0 && train_frac + validation_frac <= 1))
        return fail(err, errlen, "random_split: fractions %g and %g must be in [0, 1] and sum to at most 1", train_frac,
                    validation_frac);
    SpamFrame shuffled;
    if (!spam_sample(df, df->n, seed, &shuffled, err, errlen)) return false; /* df.sample(frac=1) */
    for (int64_t i = 0; i < shuffled.n; i++) shuffled.index[i] = i;      /* .reset_index(drop=True) */
    int64_t train_end = (int64_t)((double)df->n * train_frac);
    int64_t validation_end = train_end + (int64_t)((double)df->n * validation_frac);
    bool ok = slice(&shuffled, 0, train_end, train) && slice(&shuffled, train_end, validation_end, validation) &&
              slice(&shuffled, validation_end, shuffled.n, test);
    SpamFrame_free(&shuffled);
    if (ok) return true;
    SpamFrame_free(train), SpamFrame_free(validation), SpamFrame_free(test);
    return fail(err, errlen, "random_split: not enough memory");
}

/* ---- SpamDataset ----------------------------------------------------------- */

/* every text's ids, malloc'd (ids[i] of len[i]); false with err */
static bool encode_all(const SpamFrame *f, Tokenizer *tok, int64_t **ids, int64_t *len, char *err, size_t errlen) {
    for (int64_t i = 0; i < f->n; i++) {
        ac_mark m = ac_arena_mark();
        Tensor *t = tokenizer_encode(tok, f->texts[i], strlen(f->texts[i]), TOKENIZER_ALLOW_SPECIAL, err, errlen);
        if (t) {
            len[i] = torch_numel(t);
            ids[i] = ac_try_malloc((size_t)(len[i] ? len[i] : 1) * sizeof **ids);
            if (ids[i]) memcpy(ids[i], ac_data_long(t), (size_t)len[i] * sizeof **ids);
            else fail(err, errlen, "SpamDataset: not enough memory");
        }
        ac_arena_release(m);
        if (!t || !ids[i]) return false;
    }
    return true;
}

static SpamDataset *dataset_make(const SpamFrame *f, int64_t **ids, const int64_t *len, int64_t max_length,
                                 int64_t pad) {
    SpamDataset *ds = ac_try_malloc(sizeof *ds);
    if (!ds) return NULL;
    ds->n = f->n, ds->max_length = max_length;
    ds->input_ids = ac_persist_zeros(AC_INT64, 2, (int64_t[]){f->n, max_length});
    ds->labels = ac_persist_zeros(AC_INT64, 1, (int64_t[]){f->n});
    int64_t *x = ac_data_long(ds->input_ids), *y = ac_data_long(ds->labels);
    for (int64_t i = 0; i < f->n; i++) {
        for (int64_t j = 0; j < max_length; j++) x[i * max_length + j] = j < len[i] ? ids[i][j] : pad;
        y[i] = f->labels[i];
    }
    ds->dataset = TensorDataset_new(ds->input_ids, ds->labels);
    return ds;
}

SpamDataset *SpamDataset_from_frame(const SpamFrame *f, Tokenizer *tokenizer, int64_t max_length, int64_t pad_token_id,
                                    char *err, size_t errlen) {
    size_t k = (size_t)(f->n ? f->n : 1);
    int64_t **ids = ac_try_malloc(k * sizeof *ids), *len = ac_try_malloc(k * sizeof *len);
    SpamDataset *ds = NULL;
    if (ids) memset(ids, 0, k * sizeof *ids);
    if (!ids || !len) fail(err, errlen, "SpamDataset: not enough memory");
    else if (encode_all(f, tokenizer, ids, len, err, errlen)) {
        int64_t longest = 0; /* max_length=None: the longest text's */
        for (int64_t i = 0; i < f->n; i++) longest = len[i] > longest ? len[i] : longest;
        if (max_length < 0 && f->n == 0) fail(err, errlen, "SpamDataset: max() arg is an empty sequence");
        else if (!(ds = dataset_make(f, ids, len, max_length < 0 ? longest : max_length, pad_token_id)))
            fail(err, errlen, "SpamDataset: not enough memory");
    }
    for (size_t i = 0; ids && i < (size_t)f->n; i++) free(ids[i]);
    free(ids), free(len);
    return ds;
}

SpamDataset *SpamDataset_new(const char *csv_file, Tokenizer *tokenizer, int64_t max_length, int64_t pad_token_id,
                             char *err, size_t errlen) {
    SpamFrame f;
    if (!spam_read_csv(csv_file, &f, err, errlen)) return NULL;
    SpamDataset *ds = SpamDataset_from_frame(&f, tokenizer, max_length, pad_token_id, err, errlen);
    SpamFrame_free(&f);
    return ds;
}

void SpamDataset_free(SpamDataset *ds) {
    if (!ds) return;
    ac_free(ds->input_ids);
    ac_free(ds->labels);
    free(ds);
}
