/* The book's text-to-batches pipeline (chapter 2), with torch.utils.data's
 * DataLoader drawing exactly what PyTorch 1.13's draws:
 *
 *     Python (the book)                                   C
 *     ds = GPTDatasetV1(txt, tokenizer, max_length, stride)
 *                                                         GPTDatasetV1 *ds = GPTDatasetV1_new(txt, len, tokenizer,
 *                                                                 max_length, stride, err, sizeof err);
 *     len(ds), x, y = ds[i]                               GPTDatasetV1_len(ds), GPTDatasetV1_getitem(ds, i, &x, &y)
 *     loader = DataLoader(ds, batch_size=2, shuffle=True, drop_last=True)
 *                                                         DataLoader loader = DataLoader_new(ds, 2, true, true);
 *     len(loader)                                         DataLoader_len(&loader)
 *     for x, y in loader:                                 DataLoaderIter it = DataLoader_iter(&loader);
 *                                                         while (DataLoaderIter_next(&it, &x, &y)) { ... }
 *     (a loop left with break)                            DataLoaderIter_free(&it);
 *     create_dataloader_v1(txt, tokenizer, batch_size=4, max_length=256, stride=128, shuffle=True,
 *                          drop_last=True, num_workers=0) create_dataloader_v1(txt, len, tokenizer, 4, 256, 128,
 *                                                                 true, true, 0, err, sizeof err)
 *
 * GPTDatasetV1 cuts the ids into windows `for i in range(0, len(ids) -
 * max_length, stride)`: input ids[i:i + max_length], target ids[i + 1:i +
 * max_length + 1]. What PyTorch draws, and so this does, from this thread's
 * generator (the default one): each DataLoader_iter one int64 random_() (the
 * iterator's base seed); a shuffled loader, at the first batch, one more,
 * with which it seeds a generator of its own and takes randperm(len(ds))
 * from it as the order. Batches are (batch_size, max_length) int64 tensors in
 * the arena (the last one smaller when drop_last is false).
 *
 * Memory: a dataset is long-lived (GPTDatasetV1_free); a DataLoader is a plain
 * struct; an iterator holds its order until it is exhausted or freed
 * (DataLoaderIter_free, which may always be called). */
#ifndef ATTENTION_DATA_H
#define ATTENTION_DATA_H

#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t max_length, stride;
    int64_t n;      /* windows: len(dataset) */
    int64_t n_ids;  /* the text's tokens */
    int64_t *ids;   /* malloc'd */
} GPTDatasetV1;

/* NULL with a message in err: text that does not encode (not UTF-8), or
 * max_length or stride < 1. A text of max_length tokens or fewer has no
 * window: the dataset is empty (len 0), as in PyTorch. */
GPTDatasetV1 *GPTDatasetV1_new(const char *txt, size_t len, Tokenizer *tokenizer, int64_t max_length, int64_t stride,
                               char *err, size_t errlen);
/* The same over ids already made (copied). */
GPTDatasetV1 *GPTDatasetV1_from_ids(const int64_t *ids, int64_t n_ids, int64_t max_length, int64_t stride, char *err,
                                    size_t errlen);
int64_t GPTDatasetV1_len(const GPTDatasetV1 *ds);
void GPTDatasetV1_getitem(const GPTDatasetV1 *ds, int64_t i, Tensor **input, Tensor **target); /* (max_length,) each */
void GPTDatasetV1_free(GPTDatasetV1 *ds);

typedef struct {
    const GPTDatasetV1 *dataset;
    int64_t batch_size;
    bool shuffle, drop_last;
} DataLoader;

typedef struct {
    const DataLoader *loader;
    int64_t base_seed; /* drawn as PyTorch's iterator draws it (it seeds workers, which this has none of) */
    int64_t next;      /* the next batch */
    int64_t *order;    /* the sampler's order, once drawn */
    bool started, done;
} DataLoaderIter;

DataLoader DataLoader_new(const GPTDatasetV1 *dataset, int64_t batch_size, bool shuffle, bool drop_last);
int64_t DataLoader_len(const DataLoader *loader); /* batches: n / b, rounded up unless drop_last */
DataLoaderIter DataLoader_iter(const DataLoader *loader);
bool DataLoaderIter_next(DataLoaderIter *it, Tensor **input, Tensor **target); /* false after the last batch */
void DataLoaderIter_free(DataLoaderIter *it);

/* The book's create_dataloader_v1 (num_workers must be 0): the dataset it
 * makes is the loader's; free it with GPTDatasetV1_free(loader.dataset).
 * On an error the loader's dataset is NULL and err says why. */
DataLoader create_dataloader_v1(const char *txt, size_t len, Tokenizer *tokenizer, int64_t batch_size,
                                int64_t max_length, int64_t stride, bool shuffle, bool drop_last, int num_workers,
                                char *err, size_t errlen);

/* A dataset of tensors of your own: sample i is (features[i], labels[i]), as appendix A's
 * ToyDataset (and torch.utils.data.TensorDataset(X, y)); it holds the two tensors, which stay
 * yours and must outlive it. Its loader batches as default_collate does (the rows stacked, each
 * tensor keeping its dtype) and draws what PyTorch's DataLoader draws (the same two draws as
 * above: an iterator's base seed, then a shuffled loader's randperm at its first batch).
 *     train_ds = ToyDataset(X_train, y_train)     TensorDataset train_ds = TensorDataset_new(X_train, y_train);
 *     len(train_ds)                               TensorDataset_len(&train_ds)
 *     DataLoader(train_ds, batch_size=2, shuffle=True, drop_last=True)
 *                                                 TensorDataLoader_new(&train_ds, 2, true, true)
 *     for x, y in loader:                         TensorDataLoaderIter it = TensorDataLoader_iter(&loader);
 *                                                 while (TensorDataLoaderIter_next(&it, &x, &y)) { ... } */
typedef struct { Tensor *features, *labels; int64_t n; } TensorDataset;
TensorDataset TensorDataset_new(Tensor *features, Tensor *labels); /* the same first size, or PyTorch's error */
int64_t TensorDataset_len(const TensorDataset *ds);
void TensorDataset_getitem(const TensorDataset *ds, int64_t i, Tensor **x, Tensor **y); /* views */

typedef struct {
    const TensorDataset *dataset;
    int64_t batch_size;
    bool shuffle, drop_last;
} TensorDataLoader;

typedef struct {
    const TensorDataLoader *loader;
    int64_t base_seed, next;
    int64_t *order;
    bool started, done;
} TensorDataLoaderIter;

TensorDataLoader TensorDataLoader_new(const TensorDataset *dataset, int64_t batch_size, bool shuffle, bool drop_last);
int64_t TensorDataLoader_len(const TensorDataLoader *loader);
TensorDataLoaderIter TensorDataLoader_iter(const TensorDataLoader *loader);
bool TensorDataLoaderIter_next(TensorDataLoaderIter *it, Tensor **x, Tensor **y); /* false after the last batch */
void TensorDataLoaderIter_free(TensorDataLoaderIter *it);

#ifdef __cplusplus
}
#endif

#endif
