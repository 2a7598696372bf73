/* What the DataLoaders of data.c and instruct.c share (internal: not installed): the
 * batch size's check, len(loader), a batch's rows, and PyTorch 1.13's draws from the
 * default generator (data.h says which, and when). */
#ifndef ATTENTION_LOADER_IMPL_H
#define ATTENTION_LOADER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

/* batch_size < 1: PyTorch's ValueError */
void dataloader_check_batch_size(int64_t batch_size);
/* len(loader): n samples in batches of b, the last one dropped when short and drop_last */
int64_t dataloader_batches(int64_t n, int64_t b, bool drop_last);
/* The rows of batch number next: 0 when the sampler is exhausted (or only a short last batch is
 * left and drop_last). */
int64_t dataloader_batch_rows(int64_t n, int64_t b, int64_t next, bool drop_last);
/* torch.empty((), dtype=torch.int64).random_().item(): an iterator's base seed */
int64_t dataloader_draw_int64(void);
/* The sampler's order of n samples (malloc'd: the caller frees it), drawn when the first batch
 * is asked for: RandomSampler's randperm from a generator seeded by one more draw, or 0..n-1. */
int64_t *dataloader_sampler_order(int64_t n, bool shuffle);

#endif
