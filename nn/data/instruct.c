/* The book's chapter 7 data path: the instruction data, its prompt, splits, dataset,
 * collate function and DataLoader (instruct.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instruct.h"
#include "loader_impl.h"

static const char *const KEYS[] = {"instruction", "input", "output"};

/* ---- the data ------------------------------------------------------------------------------- */

static bool check_entry(const JsonValue *e, size_t i, char *err, size_t errlen) {
    if (e->type != JSON_OBJECT) {
        snprintf(err, errlen, "entry %zu: is %s, not a dict with 'instruction', 'input' and 'output'", i,
                 json_value_type_name(e));
        return false;
    }
    for (size_t k = 0; k < sizeof KEYS / sizeof *KEYS; k++) {
        const JsonValue *v = json_get(e, KEYS[k]);
        if (!v) {
            snprintf(err, errlen, "entry %zu: key '%s' is missing", i, KEYS[k]);
            return false;
        }
        if (v->type != JSON_STRING) {
            snprintf(err, errlen, "entry %zu: '%s' is %s, not str", i, KEYS[k], json_value_type_name(v));
            return false;
        }
    }
    return true;
}

bool instruct_check(const JsonValue *data, char *err, size_t errlen) {
    if (!data || data->type != JSON_ARRAY) {
        snprintf(err, errlen, "the instruction data is %s, not a list of entries", data ? json_value_type_name(data) : "nothing");
        return false;
    }
    for (size_t i = 0; i < data->n; i++)
        if (!check_entry(data->items[i], i, err, errlen)) return false;
    return true;
}

JsonValue *instruct_load(const char *path, char *err, size_t errlen) {
    JsonValue *data = json_load(path, err, errlen);
    if (!data) return NULL;
    char why[512];
    if (!instruct_check(data, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        json_free(data);
        return NULL;
    }
    return data;
}

/* ---- format_input --------------------------------------------------------------------------- */

static const JsonValue *field(const JsonValue *entry, const char *key) {
    const JsonValue *v = json_get(entry, key);
    if (!v || v->type != JSON_STRING)
        ac_raise(AC_TYPE_ERROR, "instruct: the entry has no str '%s' (instruct_check says why)", key);
    return v;
}

const char *instruct_field(const JsonValue *entry, const char *key) { return field(entry, key)->str; }

/* The parts one after another, malloc'd and NUL-terminated; by length, as a string may hold a
 * NUL (a "\u0000"). */
static char *concat(const char *const *parts, const size_t *lens, int n, size_t *len) {
    size_t total = 0;
    for (int k = 0; k < n; k++) total += lens[k];
    char *s = ac_malloc(total + 1), *w = s;
    for (int k = 0; k < n; k++) {
        if (lens[k]) memcpy(w, parts[k], lens[k]);
        w += lens[k];
    }
    *w = 0;
    if (len) *len = total;
    return s;
}

#define PROMPT "Below is an instruction that describes a task. Write a response that appropriately completes the " \
               "request.\n\n### Instruction:\n"
#define INPUT "\n\n### Input:\n"
#define RESPONSE "\n\n### Response:\n"

char *format_input_len(const JsonValue *entry, size_t *len) { // def format_input(entry): (C: and its length)
    const JsonValue *instruction = field(entry, "instruction"), *input = field(entry, "input");
    const char *parts[] = {PROMPT, instruction->str, INPUT, input->str};
    size_t lens[] = {strlen(PROMPT), instruction->len, input->len ? strlen(INPUT) : 0, input->len};
    return concat(parts, lens, 4, len);
}

char *format_input(const JsonValue *entry) { return format_input_len(entry, NULL); }

/* format_input(e) + "\n\n### Response:\n" + e["output"] */
static char *entry_text(const JsonValue *entry, size_t *len) {
    size_t plen;
    char *prompt = format_input_len(entry, &plen);
    const JsonValue *output = field(entry, "output");
    const char *parts[] = {prompt, RESPONSE, output->str};
    size_t lens[] = {plen, strlen(RESPONSE), output->len};
    char *text = concat(parts, lens, 3, len);
    free(prompt);
    return text;
}

/* ---- the splits ----------------------------------------------------------------------------- */

static InstructList slice(const JsonValue *data, int64_t from, int64_t to, int64_t subset) {
    if (subset > 0 && to - from > subset) to = from + subset;
    return (InstructList){data->items + from, to - from};
}

InstructSplits instruct_split(const JsonValue *data, int64_t subset) {
    if (!data || data->type != JSON_ARRAY) ac_raise(AC_TYPE_ERROR, "instruct_split: the data is not a list");
    int64_t n = (int64_t)data->n;
    /* int(len(data) * 0.85) and int(len(data) * 0.1): the products in double, truncated */
    int64_t train = (int64_t)((double)n * 0.85), test = (int64_t)((double)n * 0.1);
    return (InstructSplits){slice(data, 0, train, subset), slice(data, train, train + test, subset),
                            slice(data, train + test, n, subset)};
}

JsonValue *instruct_list_json(InstructList list) {
    JsonValue *out = json_new_array();
    for (int64_t i = 0; i < list.n; i++) json_append(out, json_copy(list.entries[i]));
    return out;
}

/* ---- InstructionDataset --------------------------------------------------------------------- */

void InstructionDataset_free(InstructionDataset *ds) {
    if (!ds) return;
    for (int64_t i = 0; ds->ids && i < ds->n; i++) free(ds->ids[i]);
    free(ds->ids);
    free(ds->lens);
    free(ds);
}

/* Entry i's ids into ds (ds->ids[i], ds->lens[i]); false with a message. */
static bool encode_entry(InstructionDataset *ds, int64_t i, const JsonValue *e, Tokenizer *tok, char *err,
                         size_t errlen) {
    char why[512];
    if (!check_entry(e, (size_t)i, err, errlen)) return false;
    size_t len;
    char *text = entry_text(e, &len);
    ac_mark m = ac_arena_mark();
    Tensor *ids = tokenizer_encode(tok, text, len, TOKENIZER_ALLOW_SPECIAL, why, sizeof why);
    free(text);
    bool ok = ids != NULL;
    if (!ok) snprintf(err, errlen, "entry %lld: %s", (long long)i, why);
    int64_t n = ok ? ids->shape[0] : 0;
    ds->ids[i] = ok ? ac_try_malloc(sizeof(int64_t) * (size_t)(n ? n : 1)) : NULL;
    if (ok && !ds->ids[i]) {
        ok = false;
        snprintf(err, errlen, "entry %lld: not enough memory for %lld ids", (long long)i, (long long)n);
    }
    if (ok) {
        memcpy(ds->ids[i], ids->data, sizeof(int64_t) * (size_t)n);
        ds->lens[i] = n;
    }
    ac_arena_release(m);
    return ok;
}

InstructionDataset *InstructionDataset_new(InstructList data, Tokenizer *tokenizer, char *err, size_t errlen) {
    InstructionDataset *ds = ac_try_malloc(sizeof *ds);
    size_t n = (size_t)(data.n > 0 ? data.n : 1);
    if (ds) *ds = (InstructionDataset){data.n, calloc(n, sizeof(int64_t *)), calloc(n, sizeof(int64_t))};
    if (!ds || !ds->ids || !ds->lens) {
        InstructionDataset_free(ds);
        snprintf(err, errlen, "InstructionDataset: not enough memory for %lld entries", (long long)data.n);
        return NULL;
    }
    for (int64_t i = 0; i < data.n; i++)
        if (!encode_entry(ds, i, data.entries[i], tokenizer, err, errlen)) {
            InstructionDataset_free(ds);
            return NULL;
        }
    return ds;
}

int64_t InstructionDataset_len(const InstructionDataset *ds) { return ds->n; }

const int64_t *InstructionDataset_getitem(const InstructionDataset *ds, int64_t i, int64_t *len) {
    if (i < 0 || i >= ds->n)
        ac_raise(AC_INDEX_ERROR, "InstructionDataset: list index out of range (index %lld, %lld entries)", (long long)i,
                 (long long)ds->n);
    *len = ds->lens[i];
    return ds->ids[i];
}

/* ---- custom_collate_fn ---------------------------------------------------------------------- */

/* len(x[:L]) of a sequence of length T, as Python slices */
static int64_t sliced(int64_t T, int64_t L) {
    if (L < 0) L = T + L > 0 ? T + L : 0;
    return L < T ? L : T;
}

void custom_collate_fn(const int64_t *const *items, const int64_t *lens, int64_t n, // def custom_collate_fn(batch,
                       int64_t pad_token_id, int64_t ignore_index,                  //     pad_token_id=50256, ignore_index=-100,
                       int64_t allowed_max_length,                                  //     allowed_max_length=None):
                       Tensor **inputs, Tensor **targets) {                         /* (C: the two tensors it returns) */
    if (n < 1) ac_raise(AC_VALUE_ERROR, "custom_collate_fn: max() arg is an empty sequence");
    int64_t longest = 0; /* batch_max_length = max(len(item) + 1 for item in batch) */
    for (int64_t r = 0; r < n; r++)
        if (lens[r] + 1 > longest) longest = lens[r] + 1;
    int64_t full = longest - 1, T = sliced(full, allowed_max_length); /* padded[:-1], then [:allowed_max_length] */
    *inputs = torch_empty(SHAPE(n, T), AC_INT64);
    *targets = torch_empty(SHAPE(n, T), AC_INT64);
    int64_t *x = (*inputs)->data, *y = (*targets)->data;
    for (int64_t r = 0; r < n; r++) {
        bool seen_pad = false; /* targets[indices[1:]] = ignore_index (C: every pad after the first) */
        for (int64_t t = 0; t < full; t++) {
            /* padded = item + [pad] * (batch_max_length - len(item)); inputs = padded[:-1], targets = padded[1:] */
            int64_t in = t < lens[r] ? items[r][t] : pad_token_id;
            int64_t tg = t + 1 < lens[r] ? items[r][t + 1] : pad_token_id;
            if (tg == pad_token_id) {
                if (seen_pad) tg = ignore_index;
                seen_pad = true;
            }
            if (t < T) x[r * T + t] = in, y[r * T + t] = tg;
        }
    }
}

/* ---- the DataLoader ------------------------------------------------------------------------- */

InstructDataLoader InstructDataLoader_new(const InstructionDataset *dataset, int64_t batch_size, bool shuffle,
                                          bool drop_last, CollateArgs collate) {
    dataloader_check_batch_size(batch_size);
    return (InstructDataLoader){dataset, batch_size, shuffle, drop_last, collate, NULL, NULL};
}

int64_t InstructDataLoader_len(const InstructDataLoader *l) {
    return dataloader_batches(l->dataset->n, l->batch_size, l->drop_last);
}

InstructDataLoaderIter InstructDataLoader_iter(const InstructDataLoader *l) {
    return (InstructDataLoaderIter){l, dataloader_draw_int64(), 0, NULL, false, false}; /* the base seed */
}

bool InstructDataLoaderIter_next(InstructDataLoaderIter *it, Tensor **inputs, Tensor **targets) {
    const InstructDataLoader *l = it->loader;
    const InstructionDataset *ds = l->dataset;
    if (it->done) return false;
    if (!it->started) { /* the sampler starts at the first batch */
        it->started = true;
        it->order = dataloader_sampler_order(ds->n, l->shuffle);
    }
    int64_t first = it->next * l->batch_size, rows = dataloader_batch_rows(ds->n, l->batch_size, it->next, l->drop_last);
    if (rows == 0) {
        InstructDataLoaderIter_free(it);
        return false;
    }
    /* the batch's items, in the sampler's order: pointers into the dataset, in the arena */
    const int64_t **items = ac_arena_alloc(sizeof *items * (size_t)rows);
    int64_t *lens = ac_arena_alloc(sizeof *lens * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        items[r] = ds->ids[it->order[first + r]];
        lens[r] = ds->lens[it->order[first + r]];
    }
    if (l->collate_fn)
        l->collate_fn(items, lens, rows, l->collate_ctx, inputs, targets);
    else
        custom_collate_fn(items, lens, rows, l->collate.pad_token_id, l->collate.ignore_index,
                          l->collate.allowed_max_length, inputs, targets);
    it->next++;
    return true;
}

void InstructDataLoaderIter_free(InstructDataLoaderIter *it) {
    free(it->order);
    it->order = NULL;
    it->done = true;
}
