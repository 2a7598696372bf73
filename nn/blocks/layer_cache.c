/* The per-layer caches of generation (layer_cache.h): the interface, and the dense kind that
 * multi-head and grouped-query attention fill. */
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "layer_cache.h"

void nn_LayerCache_reset(nn_LayerCache *c) { c->kind->reset(c); }

void nn_LayerCache_free(nn_LayerCache *c) {
    if (c) c->kind->free(c);
}

int64_t nn_LayerCache_nbytes(const nn_LayerCache *c) { return c->kind->nbytes(c); }

/* ---- dense keys and values ------------------------------------------------------------------------- */

static void dense_reset(nn_LayerCache *c) { ((nn_DenseKVCache *)c)->len = 0; }

static void dense_free(nn_LayerCache *c) {
    nn_DenseKVCache *d = (nn_DenseKVCache *)c;
    ac_free(d->keys);
    ac_free(d->values);
    free(d);
}

static int64_t dense_nbytes(const nn_LayerCache *c) {
    const nn_DenseKVCache *d = (const nn_DenseKVCache *)c;
    return 2 * d->kv_heads * d->capacity * d->head_dim * (int64_t)sizeof(float);
}

static const nn_LayerCacheKind dense_kind = {"dense", dense_reset, dense_free, dense_nbytes};

nn_DenseKVCache *nn_DenseKVCache_new(int64_t kv_heads, int64_t capacity, int64_t head_dim) {
    if (kv_heads < 1 || capacity < 1 || head_dim < 1)
        ac_error("KVCache: kv_heads (%lld), capacity (%lld) and head_dim (%lld) must be positive", (long long)kv_heads,
                 (long long)capacity, (long long)head_dim);
    nn_DenseKVCache *d = ac_malloc(sizeof *d);
    *d = (nn_DenseKVCache){.base = {&dense_kind}, .kv_heads = kv_heads, .capacity = capacity, .head_dim = head_dim};
    d->keys = ac_persist_zeros(AC_FLOAT32, SHAPE(1, kv_heads, capacity, head_dim));
    d->values = ac_persist_zeros(AC_FLOAT32, SHAPE(1, kv_heads, capacity, head_dim));
    return d;
}

nn_DenseKVCache *nn_DenseKVCache_of(nn_LayerCache *c, const char *op) {
    if (!c || c->kind != &dense_kind)
        ac_error("%s: expected a dense key/value cache for this layer, got %s", op, c ? c->kind->name : "none");
    return (nn_DenseKVCache *)c;
}

void nn_DenseKVCache_update(nn_DenseKVCache *c, int64_t start_pos, Tensor *k, Tensor *v, Tensor **keys,
                            Tensor **values) {
    const char *op = "KVCache";
    if (k->ndim != 4 || k->shape[0] != 1 || k->shape[1] != c->kv_heads || k->shape[3] != c->head_dim ||
        v->ndim != 4 || memcmp(k->shape, v->shape, 4 * sizeof *k->shape) != 0)
        ac_error("%s: keys %s and values %s do not fit a cache of (1, %lld, %lld, %lld)", op, ac_shape_str(k),
                 ac_shape_str(v), (long long)c->kv_heads, (long long)c->capacity, (long long)c->head_dim);
    int64_t t = k->shape[2], end = start_pos + t;
    if (start_pos != c->len)
        ac_error("%s: the new tokens start at position %lld, but the cache holds %lld", op, (long long)start_pos,
                 (long long)c->len);
    if (end > c->capacity)
        ac_error("%s: %lld cached and %lld new tokens exceed its capacity %lld", op, (long long)start_pos, (long long)t,
                 (long long)c->capacity);
    torch_copy_(torch_slice(c->keys, 2, start_pos, end), k); /* the new keys and values join the cache */
    torch_copy_(torch_slice(c->values, 2, start_pos, end), v);
    c->len = end;
    *keys = torch_slice(c->keys, 2, 0, end);
    *values = torch_slice(c->values, 2, 0, end);
}
