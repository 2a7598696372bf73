/* The book's chapter 4 bonus attention variants (rasbt/LLMs-from-scratch ch04/05_mla ..), each a
 * module beside the article's attention classes, with its own kind of nn_LayerCache:
 *
 *     Python (ch04/05_mla/gpt_with_kv_mla.py)                 C
 *     MultiHeadLatentAttention(d_in, d_out, dropout,          nn_MultiHeadLatentAttention_new(d_in, d_out, dropout,
 *                              num_heads, qkv_bias,               num_heads, qkv_bias, latent_dim)  (0: the default)
 *                              latent_dim=None)
 *     att(x)                                                  nn_MultiHeadLatentAttention_forward(att, x, 0, NULL)
 *     att(x, use_cache=True)  (self.cache_c_kv)               nn_MultiHeadLatentAttention_forward(att, x, start_pos,
 *                                                                 &nn_LatentKVCache_new(latent_dim, capacity)->base)
 *
 * Each forward is the book's op by op, so autograd gives the backward and exact math PyTorch 1.13's
 * bits (tests/test_variants.c against tests/tools/variants_ref.py). */
#ifndef ATTENTION_VARIANTS_H
#define ATTENTION_VARIANTS_H

#include "layer_cache.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MLA's cache: the latent c_kv (1, capacity, latent_dim) float32, long-lived, rows 0..len-1 the
 * positions seen; the keys and values are up-projected from it at every step (kind "latent"). */
typedef struct {
    nn_LayerCache base;
    int64_t latent_dim, capacity, len;
    Tensor *latent;
} nn_LatentKVCache;
nn_LatentKVCache *nn_LatentKVCache_new(int64_t latent_dim, int64_t capacity);
/* c as a latent cache, or an error naming what it is and the op that wanted one */
nn_LatentKVCache *nn_LatentKVCache_of(nn_LayerCache *c, const char *op);

/* MultiHeadLatentAttention: queries per head; the keys and values up-projected (W_UK, W_UV) from a
 * latent_dim-wide down-projection of x (W_DKV). latent_dim 0: the book's max(16, d_out / 8).
 * Registration order as the book's __init__: W_query, W_DKV, W_UK, W_UV, out_proj (with a bias, as
 * the book's nn.Linear(d_out, d_out)), dropout. */
typedef struct {
    nn_Module module;
    int64_t d_out, num_heads, head_dim, latent_dim;
    nn_Linear *W_query, *W_DKV, *W_UK, *W_UV, *out_proj;
    nn_Dropout *dropout;
} nn_MultiHeadLatentAttention;
nn_MultiHeadLatentAttention *nn_MultiHeadLatentAttention_new(int64_t d_in, int64_t d_out, double dropout,
                                                             int64_t num_heads, bool qkv_bias, int64_t latent_dim);
/* x (b, num_tokens, d_in). cache NULL: the plain forward (causal over x). Else a latent cache (b 1)
 * holding start_pos positions: x's latents join it and the queries at positions start_pos.. attend
 * over all start_pos + num_tokens (the book's use_cache=True path). */
Tensor *nn_MultiHeadLatentAttention_forward(nn_MultiHeadLatentAttention *self, Tensor *x, int64_t start_pos,
                                            nn_LayerCache *cache);

#ifdef __cplusplus
}
#endif

#endif
