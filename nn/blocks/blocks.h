/* The blocks of today's open-weight models, as the book's bonus chapters write them
 * (ch05/07_gpt_to_llama, ch05/11_qwen3: pkg/llms_from_scratch/qwen3.py and llama3.py):
 *
 *     Python                                                   C
 *     RMSNorm(emb_dim, eps=1e-6)            (the book's)       nn_RMSNorm_new(emb_dim, 1e-6)         .scale
 *     nn.RMSNorm(emb_dim, eps=1e-5)         (Llama's)          nn_TorchRMSNorm_new(emb_dim, 1e-5)    .weight
 *     cos, sin = compute_rope_params(head_dim, theta_base,     nn_compute_rope_params(head_dim, theta_base,
 *                    context_length, freq_config)                  context_length, &freq_config or NULL, &cos, &sin)
 *     apply_rope(x, cos, sin, offset)                          nn_apply_rope(x, cos, sin, offset)
 *     FeedForward(cfg): fc3(silu(fc1(x)) * fc2(x))             nn_SwiGLUFeedForward_new(emb_dim, hidden_dim)
 *     GroupedQueryAttention(d_in, num_heads, num_kv_groups,    nn_GroupedQueryAttention_new(d_in, num_heads,
 *                           head_dim, qk_norm)                     num_kv_groups, head_dim, qk_norm, eps, llama_order)
 *     att(x, mask, cos, sin, start_pos, cache)                 nn_GroupedQueryAttention_forward(att, x, mask, cos, sin,
 *                                                                  start_pos, cache)  (a dense nn_LayerCache or NULL)
 *     MultiHeadAttention(x, use_cache=True)  (ch04/03_kv-cache) nn_MultiHeadAttention_forward_cached(att, x, start_pos, cache)
 *
 * Each forward is the book's, op by op, so exact math gives PyTorch 1.13's bits and autograd its
 * backward (the modules are built from the ops of tensor/, each with its backward and gradient
 * check; tests/test_llm.c checks these modules against finite differences). The RMSNorms compute
 * in float32 (all math here is float32). */
#ifndef ATTENTION_BLOCKS_H
#define ATTENTION_BLOCKS_H

#include "layer_cache.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The book's RMSNorm (qwen3_compatible, no shift): x * rsqrt(mean(x^2, -1) + eps) * scale; its
 * repr is "RMSNorm()". nn_TorchRMSNorm is nn.RMSNorm (Llama): the same math, the parameter named
 * weight (scale points at it), repr "RMSNorm((64,), eps=1e-05, elementwise_affine=True)". */
typedef struct { nn_Module module; int64_t emb_dim; double eps; bool torch_style; Tensor *scale; } nn_RMSNorm;
nn_RMSNorm *nn_RMSNorm_new(int64_t emb_dim, double eps);
nn_RMSNorm *nn_TorchRMSNorm_new(int64_t normalized_shape, double eps);
Tensor *nn_RMSNorm_forward(nn_RMSNorm *self, Tensor *x);
/* true (the default): the forward as one op (ac_book_rms_norm, the same bits); false: op by op (tests) */
extern bool nn_rmsnorm_fused;

/* Llama 3's RoPE frequency scaling (config.json's rope_scaling, rope_type "llama3") */
typedef struct { double factor, low_freq_factor, high_freq_factor, original_context_length; } nn_RopeFreqConfig;
/* cos and sin, (context_length, head_dim) float32, long-lived (ac_free them), PyTorch's bits */
void nn_compute_rope_params(int64_t head_dim, double theta_base, int64_t context_length,
                            const nn_RopeFreqConfig *freq_config, Tensor **cos, Tensor **sin);
/* x: (b, heads, t, head_dim); rows offset..offset+t-1 of cos and sin */
Tensor *nn_apply_rope(Tensor *x, Tensor *cos, Tensor *sin, int64_t offset);

/* FeedForward of Qwen3 and Llama 3: fc1 (gate), fc2 (up), fc3 (down), no biases; repr "FeedForward(" */
typedef struct { nn_Module module; nn_Linear *fc1, *fc2, *fc3; } nn_SwiGLUFeedForward;
nn_SwiGLUFeedForward *nn_SwiGLUFeedForward_new(int64_t emb_dim, int64_t hidden_dim);
Tensor *nn_SwiGLUFeedForward_forward(nn_SwiGLUFeedForward *self, Tensor *x);

/* GroupedQueryAttention: num_heads query heads share num_kv_groups key/value heads; head_dim
 * (0: d_in / num_heads) need not be d_in / num_heads; qk_norm adds Qwen3's q_norm and k_norm
 * (the book's RMSNorm over head_dim, eps). llama_order registers W_key, W_value, W_query (Llama
 * 3's class, and so its draws), else W_query, W_key, W_value (Qwen3's); out_proj last. */
typedef struct {
    nn_Module module;
    int64_t num_heads, num_kv_groups, group_size, head_dim, d_out;
    nn_Linear *W_query, *W_key, *W_value, *out_proj;
    nn_RMSNorm *q_norm, *k_norm; /* NULL without qk_norm */
} nn_GroupedQueryAttention;
nn_GroupedQueryAttention *nn_GroupedQueryAttention_new(int64_t d_in, int64_t num_heads, int64_t num_kv_groups,
                                                       int64_t head_dim, bool qk_norm, double eps, bool llama_order);
/* x (b, t, d_in); mask bool, broadcastable to (b, heads, t, T), true where masked; start_pos: the
 * position of x's first token. cache NULL: the plain forward (T = t). Else the kv_cache/ variant:
 * the layer's dense cache (nn_DenseKVCache, b = 1), whose first start_pos rows hold the keys and
 * values before; the new ones are written after them and T = start_pos + t. */
Tensor *nn_GroupedQueryAttention_forward(nn_GroupedQueryAttention *self, Tensor *x, Tensor *mask, Tensor *cos,
                                         Tensor *sin, int64_t start_pos, nn_LayerCache *cache);
/* the dense cache this attention fills: (1, num_kv_groups, capacity, head_dim) keys and values */
nn_LayerCache *nn_GroupedQueryAttention_new_cache(nn_GroupedQueryAttention *self, int64_t capacity);

/* MultiHeadAttention (nn.h) with the book's ch04/03_kv-cache: t new tokens at positions start_pos..,
 * their keys and values joining cache (a dense nn_LayerCache, b = 1), the queries attending over
 * every position so far; cache NULL is nn_MultiHeadAttention_forward. The same lines as the plain
 * forward, so the cached path and the training path are one module's. */
Tensor *nn_MultiHeadAttention_forward_cached(nn_MultiHeadAttention *self, Tensor *x, int64_t start_pos,
                                             nn_LayerCache *cache);
nn_LayerCache *nn_MultiHeadAttention_new_cache(nn_MultiHeadAttention *self, int64_t capacity);

#ifdef __cplusplus
}
#endif

#endif
