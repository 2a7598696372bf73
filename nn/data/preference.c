/* The book's DPO notebook's data path: the preference data, pprint of an entry, PreferenceDataset,
 * custom_collate_fn and its DataLoader (preference.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chartext.h"
#include "loader_impl.h"
#include "preference.h"

/* ---- the data ------------------------------------------------------------------------------- */

bool preference_check(const JsonValue *data, char *err, size_t errlen) {
    if (!instruct_check(data, err, errlen)) return false;
    static const char *const keys[] = {"chosen", "rejected"};
    for (size_t i = 0; i < data->n; i++)
        for (int k = 0; k < 2; k++) {
            const JsonValue *v = json_get(data->items[i], keys[k]);
            if (!v) {
                snprintf(err, errlen, "entry %zu: key '%s' is missing (a preference entry has 'chosen' and 'rejected')", i,
                         keys[k]);
                return false;
            }
            if (v->type != JSON_STRING) {
                snprintf(err, errlen, "entry %zu: '%s' is %s, not str", i, keys[k], json_value_type_name(v));
                return false;
            }
        }
    return true;
}

JsonValue *preference_load(const char *path, char *err, size_t errlen) {
    JsonValue *data = json_load(path, err, errlen);
    if (!data) return NULL;
    char why[512];
    if (!preference_check(data, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        json_free(data);
        return NULL;
    }
    return data;
}

int64_t preference_count_equal(const JsonValue *data, int64_t *first) {
    int64_t n = 0;
    if (first) *first = -1;
    for (size_t i = 0; i < data->n; i++) {
        const JsonValue *c = json_get(data->items[i], "chosen"), *r = json_get(data->items[i], "rejected");
        if (c->len == r->len && !memcmp(c->str, r->str, c->len)) {
            if (first && *first < 0) *first = (int64_t)i;
            n++;
        }
    }
    return n;
}

/* ---- pprint.pp ------------------------------------------------------------------------------ */

typedef struct { char *s; size_t len, cap, chars; } Buf; /* chars: code points, as Python's len */

static void buf_add(Buf *b, const char *s, size_t n, size_t chars) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = ac_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n, b->chars += chars;
    b->s[b->len] = 0;
}

/* str.isprintable() is false for these (C0/C1 controls, Zs but space, Zl, Zp, the usual Cf) */
static bool py_unprintable(uint32_t c) {
    return c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad || c == 0x1680 || (c >= 0x2000 && c <= 0x200f) ||
           (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x2064) || c == 0x3000 || c == 0xfeff;
}

static bool py_space(uint32_t c) { /* re's \s on str */
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

static bool py_linebreak(uint32_t c) { /* str.splitlines' line ends */
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
           c == 0x2029;
}

/* repr(s) of s[0..n) */
static Buf py_repr(const char *s, size_t n) {
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    Buf b = {0};
    buf_add(&b, &q, 1, 1);
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int k = chartext_utf8_next(s + i, n - i, &c);
        if (k <= 0) k = 1, c = 0xfffd;
        char e[16];
        if (c == (uint32_t)q || c == '\\') e[0] = '\\', e[1] = (char)c, buf_add(&b, e, 2, 2);
        else if (c == '\n') buf_add(&b, "\\n", 2, 2);
        else if (c == '\r') buf_add(&b, "\\r", 2, 2);
        else if (c == '\t') buf_add(&b, "\\t", 2, 2);
        else if (py_unprintable(c)) {
            int m = c < 0x100 ? snprintf(e, sizeof e, "\\x%02x", c) : snprintf(e, sizeof e, "\\u%04x", c);
            buf_add(&b, e, (size_t)m, (size_t)m);
        } else buf_add(&b, s + i, (size_t)k, 1);
        i += (size_t)k;
    }
    buf_add(&b, &q, 1, 1);
    return b;
}

/* repr of a value that is not a str (one line) */
static void value_repr(Buf *b, const JsonValue *v) {
    char num[40];
    switch (v->type) {
    case JSON_NULL: buf_add(b, "None", 4, 4); break;
    case JSON_BOOL: buf_add(b, v->boolean ? "True" : "False", v->boolean ? 4 : 5, v->boolean ? 4 : 5); break;
    case JSON_NUMBER: {
        const char *t = v->is_int ? v->str : ac_pyfloat(v->number, num);
        buf_add(b, t, strlen(t), strlen(t));
        break;
    }
    case JSON_STRING: {
        Buf r = py_repr(v->str, v->len);
        buf_add(b, r.s, r.len, r.chars);
        free(r.s);
        break;
    }
    case JSON_ARRAY:
        buf_add(b, "[", 1, 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) buf_add(b, ", ", 2, 2);
            value_repr(b, v->items[i]);
        }
        buf_add(b, "]", 1, 1);
        break;
    case JSON_OBJECT:
        buf_add(b, "{", 1, 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) buf_add(b, ", ", 2, 2);
            Buf k = py_repr(v->members[i].key, v->members[i].key_len);
            buf_add(b, k.s, k.len, k.chars), buf_add(b, ": ", 2, 2);
            free(k.s);
            value_repr(b, v->members[i].value);
        }
        buf_add(b, "}", 1, 1);
        break;
    }
}

/* pprint's _pprint_str at level 2 (no parentheses): the str's lines, each one longer than the width
 * cut into runs of \S*\s*, the pieces repr'd one a line */
static void pprint_str(FILE *f, const char *s, size_t n, size_t indent, size_t allowance) {
    const long width = 80;
    long max_width1 = width - (long)indent, max_width = max_width1;
    Buf chunks[512];
    int nch = 0;
    size_t pos = 0;
    while (pos < n && nch < 500) { /* for each line of splitlines(True) */
        size_t end = pos;
        while (end < n) {
            uint32_t c;
            int k = chartext_utf8_next(s + end, n - end, &c);
            if (k <= 0) k = 1, c = 0;
            end += (size_t)k;
            if (py_linebreak(c)) {
                if (c == '\r' && end < n && s[end] == '\n') end++;
                break;
            }
        }
        bool last_line = end >= n;
        if (last_line) max_width1 -= (long)allowance;
        Buf rep = py_repr(s + pos, end - pos);
        if ((long)rep.chars <= max_width1) {
            chunks[nch++] = rep;
        } else {
            free(rep.s);
            long max_width2 = max_width;
            size_t cur = pos, p = pos; /* the current piece is s[cur..p) */
            while (p < end && nch < 500) {
                size_t q = p; /* one part: \S*\s* */
                uint32_t c;
                int k;
                while (q < end && (k = chartext_utf8_next(s + q, end - q, &c)) > 0 && !py_space(c)) q += (size_t)k;
                while (q < end && (k = chartext_utf8_next(s + q, end - q, &c)) > 0 && py_space(c)) q += (size_t)k;
                if (q == p) q = end; /* (not reached: a part is never empty before the end) */
                if (q >= end && last_line) max_width2 -= (long)allowance;
                Buf cand = py_repr(s + cur, q - cur);
                if ((long)cand.chars > max_width2) {
                    if (p > cur) chunks[nch++] = py_repr(s + cur, p - cur);
                    cur = p;
                }
                free(cand.s);
                p = q;
            }
            if (end > cur && nch < 500) chunks[nch++] = py_repr(s + cur, end - cur);
        }
        pos = end;
    }
    if (nch <= 1) {
        Buf r = py_repr(s, n);
        fwrite(r.s, 1, r.len, f);
        free(r.s);
    } else {
        for (int i = 0; i < nch; i++) {
            if (i) fprintf(f, "\n%*s", (int)indent, "");
            fwrite(chunks[i].s, 1, chunks[i].len, f);
        }
    }
    for (int i = 0; i < nch; i++) free(chunks[i].s);
}

void pprint_pp(const JsonValue *entry, FILE *f) {
    Buf whole = {0};
    value_repr(&whole, entry);
    if (entry->type != JSON_OBJECT || whole.chars <= 80 || !entry->n) { /* it fits: repr */
        fwrite(whole.s, 1, whole.len, f);
        fputc('\n', f);
        free(whole.s);
        return;
    }
    free(whole.s);
    fputc('{', f);
    for (size_t i = 0; i < entry->n; i++) { /* _format_dict_items, indent 1 */
        bool last = i + 1 == entry->n;
        Buf k = py_repr(entry->members[i].key, entry->members[i].key_len);
        fwrite(k.s, 1, k.len, f);
        fputs(": ", f);
        size_t indent = 1 + k.chars + 2, allowance = 1; /* the last item's: the dict's "}"; the others': the "," */
        free(k.s);
        const JsonValue *v = entry->members[i].value;
        Buf r = {0};
        value_repr(&r, v);
        if (v->type == JSON_STRING && (long)r.chars > 80 - (long)indent - (long)allowance)
            pprint_str(f, v->str, v->len, indent, allowance);
        else
            fwrite(r.s, 1, r.len, f);
        free(r.s);
        if (!last) fputs(",\n ", f);
    }
    fputs("}\n", f);
}

/* ---- PreferenceDataset ---------------------------------------------------------------------- */

void PreferenceDataset_free(PreferenceDataset *ds) {
    if (!ds) return;
    for (int64_t i = 0; i < ds->n; i++) {
        if (ds->prompt) free(ds->prompt[i]);
        if (ds->chosen) free(ds->chosen[i]);
        if (ds->rejected) free(ds->rejected[i]);
    }
    free(ds->prompt), free(ds->chosen), free(ds->rejected);
    free(ds->prompt_lens), free(ds->chosen_lens), free(ds->rejected_lens);
    free(ds);
}

/* text's ids into *ids (malloc'd), their count into *n; false with a message */
static bool encode(Tokenizer *tok, const char *text, size_t len, int64_t i, int64_t **ids, int64_t *n, char *err,
                   size_t errlen) {
    char why[512];
    ac_mark m = ac_arena_mark();
    Tensor *t = tokenizer_encode(tok, text, len, TOKENIZER_ALLOW_SPECIAL, why, sizeof why);
    if (!t) {
        snprintf(err, errlen, "entry %lld: %s", (long long)i, why);
        ac_arena_release(m);
        return false;
    }
    *n = t->shape[0];
    *ids = ac_malloc(sizeof(int64_t) * (size_t)(*n ? *n : 1));
    memcpy(*ids, t->data, sizeof(int64_t) * (size_t)*n);
    ac_arena_release(m);
    return true;
}

/* f"{prompt}\n\n### Response:\n{response}" */
static char *full_text(const char *prompt, size_t plen, const JsonValue *response, size_t *len) {
    static const char tag[] = "\n\n### Response:\n";
    size_t tl = sizeof tag - 1;
    *len = plen + tl + response->len;
    char *s = ac_malloc(*len + 1);
    memcpy(s, prompt, plen), memcpy(s + plen, tag, tl), memcpy(s + plen + tl, response->str, response->len);
    s[*len] = 0;
    return s;
}

PreferenceDataset *PreferenceDataset_new(InstructList data, Tokenizer *tokenizer, // class PreferenceDataset(Dataset): def __init__(self, data, tokenizer):
                                         char *err, size_t errlen) {             /* (C: NULL with a message in err) */
    PreferenceDataset *ds = ac_malloc(sizeof *ds);
    size_t n = (size_t)(data.n > 0 ? data.n : 1);
    *ds = (PreferenceDataset){data.n, ac_calloc(n, sizeof(int64_t *)), ac_calloc(n, sizeof(int64_t *)),
                              ac_calloc(n, sizeof(int64_t *)), ac_calloc(n, sizeof(int64_t)),
                              ac_calloc(n, sizeof(int64_t)), ac_calloc(n, sizeof(int64_t))};
    for (int64_t i = 0; i < data.n; i++) {                                        // for entry in data:
        const JsonValue *e = data.entries[i];
        const JsonValue *c = json_get(e, "chosen"), *r = json_get(e, "rejected");
        if (e->type != JSON_OBJECT || !c || !r || c->type != JSON_STRING || r->type != JSON_STRING) {
            snprintf(err, errlen, "entry %lld: not a checked preference entry (preference_check says why)", (long long)i);
            PreferenceDataset_free(ds);
            return NULL;
        }
        size_t plen, clen, rlen;
        char *prompt = format_input_len(e, &plen);                                      // prompt = format_input(entry)
        char *ct = full_text(prompt, plen, c, &clen), *rt = full_text(prompt, plen, r, &rlen); // chosen_full_text = f"{prompt}\n\n### Response:\n{chosen_response}"
        bool ok = encode(tokenizer, prompt, plen, i, &ds->prompt[i], &ds->prompt_lens[i], err, errlen) && // prompt_tokens = tokenizer.encode(prompt)
                  encode(tokenizer, ct, clen, i, &ds->chosen[i], &ds->chosen_lens[i], err, errlen) &&      // chosen_full_tokens = tokenizer.encode(chosen_full_text)
                  encode(tokenizer, rt, rlen, i, &ds->rejected[i], &ds->rejected_lens[i], err, errlen);    // rejected_full_tokens = tokenizer.encode(rejected_full_text)
        free(prompt), free(ct), free(rt);
        if (!ok) {
            PreferenceDataset_free(ds);
            return NULL;
        }
    }
    return ds;
}

int64_t PreferenceDataset_len(const PreferenceDataset *ds) { return ds->n; }

/* ---- custom_collate_fn ---------------------------------------------------------------------- */

void preference_collate_fn(const PreferenceDataset *ds, const int64_t *rows, int64_t n, // def custom_collate_fn(batch,
                           int64_t pad_token_id, int64_t allowed_max_length,           //     pad_token_id=50256, allowed_max_length=None,
                           bool mask_prompt_tokens, PreferenceBatch *out) {            //     mask_prompt_tokens=True): (C: into out)
    if (n < 1) ac_raise(AC_VALUE_ERROR, "custom_collate_fn: an empty batch");
    int64_t max_length_common = 0;                                                // max_length_common = 0
    for (int64_t k = 0; k < n; k++) {                                             // for key in ["chosen", "rejected"]:
        int64_t i = rows[k];                                                      //     current_max = max(len(item[key])+1 for item in batch)
        if (ds->chosen_lens[i] + 1 > max_length_common) max_length_common = ds->chosen_lens[i] + 1;
        if (ds->rejected_lens[i] + 1 > max_length_common) max_length_common = ds->rejected_lens[i] + 1;
    }
    int64_t T = max_length_common < allowed_max_length ? max_length_common : allowed_max_length; // tensor_stack[:, :allowed_max_length]
    const int64_t **prompt = ac_arena_alloc(sizeof *prompt * (size_t)n);
    int64_t *plens = ac_arena_alloc(sizeof *plens * (size_t)n);
    Tensor *seq[2] = {torch_empty(SHAPE(n, T), AC_INT64), torch_empty(SHAPE(n, T), AC_INT64)};
    Tensor *mask[2] = {torch_empty(SHAPE(n, T), AC_BOOL), torch_empty(SHAPE(n, T), AC_BOOL)};
    for (int64_t k = 0; k < n; k++) {                                             // for item in batch:
        int64_t i = rows[k];
        prompt[k] = ds->prompt[i], plens[k] = ds->prompt_lens[i];                 //     batch_data["prompt"].append(torch.tensor(item["prompt"]))
        for (int key = 0; key < 2; key++) {                                       //     for key in ["chosen", "rejected"]:
            const int64_t *s = key ? ds->rejected[i] : ds->chosen[i];
            int64_t len = key ? ds->rejected_lens[i] : ds->chosen_lens[i];
            int64_t *x = (int64_t *)seq[key]->data + k * T;
            bool *m = (bool *)mask[key]->data + k * T;
            for (int64_t t = 0; t < T; t++) {
                x[t] = t < len ? s[t] : pad_token_id;                             //         padded = sequence + [pad_token_id] * (max_length_common - len(sequence))
                m[t] = t < len;                                                   //         mask[len(sequence):] = False
                if (mask_prompt_tokens && t < plens[k] + 2) m[t] = false;         //         if mask_prompt_tokens: mask[:prompt.shape[0]+2] = False
            }
        }
    }
    *out = (PreferenceBatch){n, prompt, plens, seq[0], seq[1], mask[0], mask[1]};
}

int64_t preference_response_tokens(const PreferenceDataset *ds, int64_t i, bool chosen, int64_t allowed_max_length) {
    int64_t len = chosen ? ds->chosen_lens[i] : ds->rejected_lens[i];
    if (len > allowed_max_length) len = allowed_max_length;
    int64_t r = len - (ds->prompt_lens[i] + 2);
    return r > 0 ? r : 0;
}

/* ---- the DataLoader ------------------------------------------------------------------------- */

PreferenceDataLoader PreferenceDataLoader_new(const PreferenceDataset *dataset, int64_t batch_size, bool shuffle,
                                              bool drop_last, PreferenceCollateArgs collate) {
    dataloader_check_batch_size(batch_size);
    return (PreferenceDataLoader){dataset, batch_size, shuffle, drop_last, collate};
}

int64_t PreferenceDataLoader_len(const PreferenceDataLoader *l) {
    return dataloader_batches(l->dataset->n, l->batch_size, l->drop_last);
}

PreferenceDataLoaderIter PreferenceDataLoader_iter(const PreferenceDataLoader *l) {
    return (PreferenceDataLoaderIter){l, dataloader_draw_int64(), 0, NULL, false, false}; /* the base seed */
}

bool PreferenceDataLoaderIter_next(PreferenceDataLoaderIter *it, PreferenceBatch *batch) {
    const PreferenceDataLoader *l = it->loader;
    if (it->done) return false;
    if (!it->started) { /* the sampler starts at the first batch */
        it->started = true;
        it->order = dataloader_sampler_order(l->dataset->n, l->shuffle);
    }
    int64_t rows = dataloader_batch_rows(l->dataset->n, l->batch_size, it->next, l->drop_last);
    if (rows == 0) {
        PreferenceDataLoaderIter_free(it);
        return false;
    }
    preference_collate_fn(l->dataset, it->order + it->next * l->batch_size, rows, l->collate.pad_token_id,
                          l->collate.allowed_max_length, l->collate.mask_prompt_tokens, batch);
    it->next++;
    return true;
}

void PreferenceDataLoaderIter_free(PreferenceDataLoaderIter *it) {
    free(it->order);
    it->order = NULL;
    it->done = true;
}
