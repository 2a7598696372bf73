/* GPTDatasetV1, a TensorDataset, and DataLoaders that draw as PyTorch 1.13's does (data.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "loader_impl.h"

GPTDatasetV1 *GPTDatasetV1_from_ids(const int64_t *ids, int64_t n_ids, int64_t max_length, int64_t stride, char *err,
                                    size_t errlen) {
    if (max_length < 1 || stride < 1) {
        snprintf(err, errlen, "GPTDatasetV1: max_length and stride must be at least 1, got max_length=%lld, stride=%lld",
                 (long long)max_length, (long long)stride);
        return NULL;
    }
    GPTDatasetV1 *ds = ac_try_malloc(sizeof *ds);
    int64_t *copy = ds ? ac_try_malloc(sizeof(int64_t) * (size_t)(n_ids ? n_ids : 1)) : NULL;
    if (!copy) {
        free(ds);
        snprintf(err, errlen, "GPTDatasetV1: not enough memory for %lld ids", (long long)n_ids);
        return NULL;
    }
    if (n_ids) memcpy(copy, ids, sizeof(int64_t) * (size_t)n_ids);
    /* for i in range(0, len(ids) - max_length, stride) */
    int64_t span = n_ids - max_length;
    *ds = (GPTDatasetV1){max_length, stride, span > 0 ? (span - 1) / stride + 1 : 0, n_ids, copy};
    return ds;
}

GPTDatasetV1 *GPTDatasetV1_new(const char *txt, size_t len, Tokenizer *tokenizer, int64_t max_length, int64_t stride,
                               char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    Tensor *ids = tokenizer_encode(tokenizer, txt, len, TOKENIZER_ALLOW_SPECIAL, err, errlen);
    GPTDatasetV1 *ds = ids ? GPTDatasetV1_from_ids(ids->data, ids->shape[0], max_length, stride, err, errlen) : NULL;
    ac_arena_release(m);
    return ds;
}

int64_t GPTDatasetV1_len(const GPTDatasetV1 *ds) { return ds->n; }

void GPTDatasetV1_getitem(const GPTDatasetV1 *ds, int64_t i, Tensor **input, Tensor **target) {
    if (i < 0 || i >= ds->n)
        ac_raise(AC_INDEX_ERROR, "GPTDatasetV1: list index out of range (index %lld, %lld windows)",
                          (long long)i, (long long)ds->n);
    int64_t T = ds->max_length, at = i * ds->stride;
    *input = torch_empty(SHAPE(T), AC_INT64);
    *target = torch_empty(SHAPE(T), AC_INT64);
    memcpy((*input)->data, ds->ids + at, sizeof(int64_t) * (size_t)T);
    memcpy((*target)->data, ds->ids + at + 1, sizeof(int64_t) * (size_t)T);
}

void GPTDatasetV1_free(GPTDatasetV1 *ds) {
    if (!ds) return;
    free(ds->ids);
    free(ds);
}

/* ---- what both loaders share: the batch size's check, their length, a batch's rows, the draws ---- */

void dataloader_check_batch_size(int64_t batch_size) {
    if (batch_size < 1)
        ac_raise(AC_VALUE_ERROR, "DataLoader: batch_size should be a positive integer value, but got batch_size=%lld",
                 (long long)batch_size);
}

/* len(loader): n samples in batches of b, the last one dropped when short and drop_last */
int64_t dataloader_batches(int64_t n, int64_t b, bool drop_last) { return drop_last ? n / b : (n + b - 1) / b; }

/* The rows of batch number next: 0 when the sampler is exhausted (or only a short last batch is
 * left and drop_last). */
int64_t dataloader_batch_rows(int64_t n, int64_t b, int64_t next, bool drop_last) {
    int64_t first = next * b, rows = n - first < b ? n - first : b;
    return rows <= 0 || (drop_last && rows < b) ? 0 : rows;
}

DataLoader DataLoader_new(const GPTDatasetV1 *dataset, int64_t batch_size, bool shuffle, bool drop_last) {
    dataloader_check_batch_size(batch_size);
    return (DataLoader){dataset, batch_size, shuffle, drop_last};
}

int64_t DataLoader_len(const DataLoader *l) { return dataloader_batches(l->dataset->n, l->batch_size, l->drop_last); }

/* torch.empty((), dtype=torch.int64).random_().item() */
int64_t dataloader_draw_int64(void) {
    ac_mark m = ac_arena_mark();
    Tensor *t = torch_random_(torch_empty(0, NULL, AC_INT64));
    int64_t v = ((int64_t *)t->data)[t->offset];
    ac_arena_release(m);
    return v;
}

DataLoaderIter DataLoader_iter(const DataLoader *l) {
    /* _BaseDataLoaderIter.__init__: self._base_seed = torch.empty((), dtype=torch.int64).random_().item() */
    return (DataLoaderIter){l, dataloader_draw_int64(), 0, NULL, false, false};
}

/* The sampler's order of n samples (malloc'd), drawn when the first batch is asked for. */
int64_t *dataloader_sampler_order(int64_t n, bool shuffle) {
    int64_t *order = ac_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (shuffle) {
        /* RandomSampler.__iter__: seed = int(torch.empty((), dtype=torch.int64).random_().item());
         * generator = torch.Generator(); generator.manual_seed(seed); torch.randperm(n, generator=generator) */
        torch_Generator g;
        torch_generator_manual_seed(&g, (uint64_t)dataloader_draw_int64());
        ac_mark m = ac_arena_mark();
        Tensor *perm = torch_randperm_gen(n, &g);
        memcpy(order, perm->data, sizeof(int64_t) * (size_t)n);
        ac_arena_release(m);
    } else {
        for (int64_t i = 0; i < n; i++) order[i] = i; /* SequentialSampler */
    }
    return order;
}

bool DataLoaderIter_next(DataLoaderIter *it, Tensor **input, Tensor **target) {
    const DataLoader *l = it->loader;
    int64_t n = l->dataset->n;
    if (it->done) return false;
    if (!it->started) { /* the sampler starts at the first batch */
        it->started = true;
        it->order = dataloader_sampler_order(n, l->shuffle);
    }
    int64_t first = it->next * l->batch_size, rows = dataloader_batch_rows(n, l->batch_size, it->next, l->drop_last);
    if (rows == 0) {
        DataLoaderIter_free(it);
        return false;
    }
    int64_t T = l->dataset->max_length;
    *input = torch_empty(SHAPE(rows, T), AC_INT64);
    *target = torch_empty(SHAPE(rows, T), AC_INT64);
    int64_t *x = (*input)->data, *y = (*target)->data;
    for (int64_t r = 0; r < rows; r++) { /* default_collate: torch.stack of the windows */
        const int64_t *src = l->dataset->ids + it->order[first + r] * l->dataset->stride;
        memcpy(x + r * T, src, sizeof(int64_t) * (size_t)T);
        memcpy(y + r * T, src + 1, sizeof(int64_t) * (size_t)T);
    }
    it->next++;
    return true;
}

void DataLoaderIter_free(DataLoaderIter *it) {
    free(it->order);
    it->order = NULL;
    it->done = true;
}

DataLoader create_dataloader_v1(const char *txt, size_t len, Tokenizer *tokenizer, int64_t batch_size,
                                int64_t max_length, int64_t stride, bool shuffle, bool drop_last, int num_workers,
                                char *err, size_t errlen) {
    DataLoader l = {NULL, batch_size, shuffle, drop_last};
    if (num_workers != 0) {
        snprintf(err, errlen, "create_dataloader_v1: num_workers must be 0 here (the batches are made on the calling thread)");
        return l;
    }
    if (batch_size < 1) { /* check_batch_size's words, as a message rather than an error */
        snprintf(err, errlen, "DataLoader: batch_size should be a positive integer value, but got batch_size=%lld",
                 (long long)batch_size);
        return l;
    }
    l.dataset = GPTDatasetV1_new(txt, len, tokenizer, max_length, stride, err, errlen);
    return l;
}

/* ---- TensorDataset and its DataLoader ------------------------------------------------------ */

TensorDataset TensorDataset_new(Tensor *features, Tensor *labels) {
    ac_check_defined(features, "TensorDataset");
    ac_check_defined(labels, "TensorDataset");
    if (features->ndim == 0 || labels->ndim == 0 || features->shape[0] != labels->shape[0])
        ac_error("TensorDataset: Size mismatch between tensors (%s and %s)", ac_shape_str(features), ac_shape_str(labels));
    return (TensorDataset){features, labels, labels->shape[0]};
}

int64_t TensorDataset_len(const TensorDataset *ds) { return ds->n; }

void TensorDataset_getitem(const TensorDataset *ds, int64_t i, Tensor **x, Tensor **y) {
    if (i < -ds->n || i >= ds->n)
        ac_raise(AC_INDEX_ERROR, "TensorDataset: index %lld is out of bounds for dimension 0 with size %lld", (long long)i,
                 (long long)ds->n);
    *x = torch_select(ds->features, 0, i); /* self.features[index] */
    *y = torch_select(ds->labels, 0, i);   /* self.labels[index] */
}

TensorDataLoader TensorDataLoader_new(const TensorDataset *dataset, int64_t batch_size, bool shuffle, bool drop_last) {
    dataloader_check_batch_size(batch_size);
    return (TensorDataLoader){dataset, batch_size, shuffle, drop_last};
}

int64_t TensorDataLoader_len(const TensorDataLoader *l) { return dataloader_batches(l->dataset->n, l->batch_size, l->drop_last); }

TensorDataLoaderIter TensorDataLoader_iter(const TensorDataLoader *l) {
    return (TensorDataLoaderIter){l, dataloader_draw_int64(), 0, NULL, false, false}; /* the iterator's base seed */
}

/* default_collate: torch.stack of the samples' rows, in the sampler's order */
static Tensor *collate(Tensor *t, const int64_t *order, int64_t rows) {
    int64_t shape[AC_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = rows;
    Tensor *out = torch_empty(t->ndim, shape, t->dtype);
    TORCH_NO_GRAD {
        for (int64_t r = 0; r < rows; r++) torch_copy_(torch_select(out, 0, r), torch_select(t, 0, order[r]));
    }
    return out;
}

bool TensorDataLoaderIter_next(TensorDataLoaderIter *it, Tensor **x, Tensor **y) {
    const TensorDataLoader *l = it->loader;
    int64_t n = l->dataset->n;
    if (it->done) return false;
    if (!it->started) {
        it->started = true;
        it->order = dataloader_sampler_order(n, l->shuffle);
    }
    int64_t first = it->next * l->batch_size, rows = dataloader_batch_rows(n, l->batch_size, it->next, l->drop_last);
    if (rows == 0) {
        TensorDataLoaderIter_free(it);
        return false;
    }
    *x = collate(l->dataset->features, it->order + first, rows);
    *y = collate(l->dataset->labels, it->order + first, rows);
    it->next++;
    return true;
}

void TensorDataLoaderIter_free(TensorDataLoaderIter *it) {
    free(it->order);
    it->order = NULL;
    it->done = true;
}
