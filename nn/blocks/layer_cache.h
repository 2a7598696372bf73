/* Generation's memory, one object a layer, each kind defined by the attention that fills it.
 *
 * A decoder that generates keeps, for every layer, what that layer's attention needs of the tokens
 * seen so far: the keys and values (dense attention, GQA), only the last `window` of them (sliding
 * window), a latent (MLA), a fixed-size recurrent state (Gated DeltaNet). The model owns none of it:
 * a cache is made for a generation (nn_KVCache_new in nn/models/lm.h makes one object a layer, each
 * by its layer's attention), passed to the forward, and freed after. So the weights stay read-only
 * while generating (a DPO policy and its frozen reference, two generations over one model), and one
 * model can hold different kinds on different layers (Gemma 3's window on five layers of six).
 *
 *     the book (ch04/03_kv-cache)                 C
 *     self.cache_k, self.cache_v (in the module)  an nn_DenseKVCache, made by the attention kind
 *     model.reset_kv_cache()                      nn_KVCache_reset(cache)  (every layer's reset)
 *     att(x, ..., start_pos, cache)               nn_GroupedQueryAttention_forward(..., start_pos, layer)
 *
 * Every kind begins with an nn_LayerCache: its kind's table says how to reset it, free it, and how
 * many bytes it holds (what `gpt kv` reports and the memory estimators compute). */
#ifndef ATTENTION_LAYER_CACHE_H
#define ATTENTION_LAYER_CACHE_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nn_LayerCache nn_LayerCache;
typedef struct {
    const char *name;                          /* "dense", "window", "latent", "recurrent" */
    void (*reset)(nn_LayerCache *c);           /* forget every position */
    void (*free)(nn_LayerCache *c);            /* what it holds and the struct */
    int64_t (*nbytes)(const nn_LayerCache *c); /* the bytes it holds for positions (its tensors' storage) */
} nn_LayerCacheKind;
struct nn_LayerCache { const nn_LayerCacheKind *kind; };

void nn_LayerCache_reset(nn_LayerCache *c);
void nn_LayerCache_free(nn_LayerCache *c); /* NULL: nothing */
int64_t nn_LayerCache_nbytes(const nn_LayerCache *c);

/* Dense keys and values, the book's cache_k and cache_v: (1, kv_heads, capacity, head_dim) float32
 * each, long-lived; rows 0..len-1 hold the positions seen. */
typedef struct {
    nn_LayerCache base;
    int64_t kv_heads, capacity, head_dim, len;
    Tensor *keys, *values;
} nn_DenseKVCache;
nn_DenseKVCache *nn_DenseKVCache_new(int64_t kv_heads, int64_t capacity, int64_t head_dim);
/* The layer's t new keys and values (1, kv_heads, t, head_dim) join the cache at rows start_pos..;
 * *keys and *values are then the views of rows 0..start_pos+t-1 to attend over (start_pos must be
 * the cache's len; past capacity is an error naming both counts). */
void nn_DenseKVCache_update(nn_DenseKVCache *c, int64_t start_pos, Tensor *k, Tensor *v, Tensor **keys,
                            Tensor **values);
/* c as a dense cache, or an error naming what it is and the op that wanted one */
nn_DenseKVCache *nn_DenseKVCache_of(nn_LayerCache *c, const char *op);

#ifdef __cplusplus
}
#endif

#endif
