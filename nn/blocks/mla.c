/* MultiHeadLatentAttention (ch04/05_mla/gpt_with_kv_mla.py) and its latent cache: the keys and values
 * are up-projected from a small latent, so generation keeps the latent (latent_dim floats a token)
 * instead of the keys and values (2 * d_out). */
#include <math.h>
#include <stdlib.h>

#include "extend.h"
#include "variants.h"

/* ---- the latent cache ------------------------------------------------------------------------------ */

static void latent_reset(nn_LayerCache *c) { ((nn_LatentKVCache *)c)->len = 0; }

static void latent_free(nn_LayerCache *c) {
    nn_LatentKVCache *l = (nn_LatentKVCache *)c;
    ac_free(l->latent);
    free(l);
}

static int64_t latent_nbytes(const nn_LayerCache *c) {
    const nn_LatentKVCache *l = (const nn_LatentKVCache *)c;
    return l->capacity * l->latent_dim * (int64_t)sizeof(float);
}

static const nn_LayerCacheKind latent_kind = {"latent", latent_reset, latent_free, latent_nbytes};

nn_LatentKVCache *nn_LatentKVCache_new(int64_t latent_dim, int64_t capacity) {
    if (latent_dim < 1 || capacity < 1)
        ac_error("LatentKVCache: latent_dim (%lld) and capacity (%lld) must be positive", (long long)latent_dim,
                 (long long)capacity);
    nn_LatentKVCache *l = ac_malloc(sizeof *l);
    *l = (nn_LatentKVCache){.base = {&latent_kind}, .latent_dim = latent_dim, .capacity = capacity};
    l->latent = ac_persist_zeros(AC_FLOAT32, SHAPE(1, capacity, latent_dim));
    return l;
}

nn_LatentKVCache *nn_LatentKVCache_of(nn_LayerCache *c, const char *op) {
    if (!c || c->kind != &latent_kind)
        ac_error("%s: expected a latent cache for this layer, got %s", op, c ? c->kind->name : "none");
    return (nn_LatentKVCache *)c;
}

/* ---- the module ------------------------------------------------------------------------------------ */

nn_MultiHeadLatentAttention *nn_MultiHeadLatentAttention_new(int64_t d_in, int64_t d_out, double dropout, // def __init__(self, d_in, d_out, dropout, num_heads,
                                                             int64_t num_heads, bool qkv_bias, int64_t latent_dim) { //          qkv_bias=False, latent_dim=None):
    if (num_heads < 1 || d_out < 1 || d_out % num_heads != 0)                     //     assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        ac_error("MultiHeadLatentAttention: d_out must be divisible by num_heads (d_out %lld, num_heads %lld)",
                 (long long)d_out, (long long)num_heads);
    if (latent_dim < 0)
        ac_error("MultiHeadLatentAttention: latent_dim must be positive (or 0 for the default), got %lld",
                 (long long)latent_dim);
    nn_MultiHeadLatentAttention *a = nn_module_new(sizeof *a, "MultiHeadLatentAttention", NULL);
    a->d_out = d_out;                                                             //     self.d_out = d_out
    a->num_heads = num_heads;                                                     //     self.num_heads = num_heads
    a->head_dim = d_out / num_heads;                                              //     self.head_dim = d_out // num_heads
    a->latent_dim = latent_dim ? latent_dim : (d_out / 8 > 16 ? d_out / 8 : 16);  //     self.latent_dim = latent_dim if latent_dim is not None else max(16, d_out // 8)
    nn_Module *m = &a->module;
    a->W_query = (nn_Linear *)nn_register_module(m, "W_query", &nn_Linear_new(d_in, d_out, qkv_bias)->module); //     self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
    a->W_DKV = (nn_Linear *)nn_register_module(m, "W_DKV", &nn_Linear_new(d_in, a->latent_dim, qkv_bias)->module); //     self.W_DKV = nn.Linear(d_in, self.latent_dim, bias=qkv_bias)
    a->W_UK = (nn_Linear *)nn_register_module(m, "W_UK", &nn_Linear_new(a->latent_dim, d_out, qkv_bias)->module); //     self.W_UK = nn.Linear(self.latent_dim, d_out, bias=qkv_bias)
    a->W_UV = (nn_Linear *)nn_register_module(m, "W_UV", &nn_Linear_new(a->latent_dim, d_out, qkv_bias)->module); //     self.W_UV = nn.Linear(self.latent_dim, d_out, bias=qkv_bias)
    a->out_proj = (nn_Linear *)nn_register_module(m, "out_proj", &nn_Linear_new(d_out, d_out, true)->module); //     self.out_proj = nn.Linear(d_out, d_out)
    a->dropout = (nn_Dropout *)nn_register_module(m, "dropout", &nn_Dropout_new(dropout)->module); //     self.dropout = nn.Dropout(dropout)
    return a;
}

/* (b, T, d_out) -> (b, num_heads, T, head_dim) */
static Tensor *reshape_to_heads(Tensor *x, int64_t num_heads, int64_t head_dim) { // def _reshape_to_heads(x, num_heads, head_dim):
    int64_t bsz = x->shape[0], num_tokens = x->shape[1];                          //     bsz, num_tokens, _ = x.shape
    return torch_contiguous(torch_transpose(torch_view(x, SHAPE(bsz, num_tokens, num_heads, head_dim)), 1, 2)); //     return x.view(...).transpose(1, 2).contiguous()
}

Tensor *nn_MultiHeadLatentAttention_forward(nn_MultiHeadLatentAttention *self, Tensor *x, int64_t start_pos, // def forward(self, x, use_cache=False):
                                            nn_LayerCache *cache) {
    const char *op = "MultiHeadLatentAttention";
    ac_check_defined(x, op);
    if (x->ndim != 3) ac_error("%s: expected x of shape (b, num_tokens, d_in), got %s", op, ac_shape_str(x));
    nn_LatentKVCache *lc = cache ? nn_LatentKVCache_of(cache, op) : NULL;
    int64_t b = x->shape[0], num_tokens = x->shape[1];                            //     b, num_tokens, _ = x.shape
    if (lc) { /* refused before any work: the cache's count, its capacity, one sequence */
        if (b != 1) ac_error("%s: the latent cache holds one sequence, got a batch of %lld", op, (long long)b);
        if (start_pos != lc->len)
            ac_error("%s: the new tokens start at position %lld, but the cache holds %lld", op, (long long)start_pos,
                     (long long)lc->len);
        if (start_pos + num_tokens > lc->capacity)
            ac_error("%s: %lld cached and %lld new tokens exceed its capacity %lld", op, (long long)start_pos,
                     (long long)num_tokens, (long long)lc->capacity);
    } else if (start_pos != 0) {
        ac_error("%s: start_pos %lld without a cache (the plain forward starts at 0)", op, (long long)start_pos);
    }
    nn_Module *m = &self->module;
    int64_t num_heads = self->num_heads, head_dim = self->head_dim;
    Tensor *queries_all = nn_call(m, "W_query", x);                               //     queries_all = self.W_query(x)
    Tensor *latent_new = nn_call(m, "W_DKV", x);                                  //     latent_new = self.W_DKV(x)
    Tensor *latent_total = latent_new;                                            //     latent_total = latent_new
    if (lc) {                                                                     //     if use_cache:
        int64_t T = start_pos + num_tokens;                                       //         latent_total = torch.cat([self.cache_c_kv, latent_new], dim=1)
        torch_copy_(torch_slice(lc->latent, 1, start_pos, T), latent_new);        //         self.cache_c_kv = latent_total
        lc->len = T;
        latent_total = torch_slice(lc->latent, 1, 0, T);
    }
    Tensor *keys_all = nn_call(m, "W_UK", latent_total);                          //     keys_all = self.W_UK(latent_total)
    Tensor *values_all = nn_call(m, "W_UV", latent_total);                        //     values_all = self.W_UV(latent_total)
    Tensor *queries = reshape_to_heads(queries_all, num_heads, head_dim);         //     queries = self._reshape_to_heads(queries_all, num_heads, head_dim)
    Tensor *keys = reshape_to_heads(keys_all, num_heads, head_dim);               //     keys = self._reshape_to_heads(keys_all, num_heads, head_dim)
    Tensor *values = reshape_to_heads(values_all, num_heads, head_dim);           //     values = self._reshape_to_heads(values_all, num_heads, head_dim)
    Tensor *attn_scores = torch_matmul(queries, torch_transpose(keys, -2, -1));   //     attn_scores = torch.matmul(queries, keys.transpose(-2, -1))
    int64_t num_tokens_Q = queries->shape[2], num_tokens_K = keys->shape[2];      //     num_tokens_Q = queries.shape[-2]; num_tokens_K = keys.shape[-2]
    Tensor *mask_bool = torch_zeros_dtype(SHAPE(num_tokens_Q, num_tokens_K), AC_BOOL); //     q_positions = torch.arange(ptr, ptr + num_tokens_Q) (0.. without the cache)
    bool *mb = mask_bool->data;                                                   //     k_positions = torch.arange(num_tokens_K)
    for (int64_t i = 0; i < num_tokens_Q; i++)                                    //     mask_bool = q_positions.unsqueeze(-1) < k_positions.unsqueeze(0)
        for (int64_t j = 0; j < num_tokens_K; j++) mb[i * num_tokens_K + j] = start_pos + i < j;
    attn_scores = torch_masked_fill(attn_scores, mask_bool, -INFINITY);           //     attn_scores.masked_fill_(mask_bool, -torch.inf)
    Tensor *attn_weights = torch_softmax(torch_div_scalar(attn_scores, pow((double)keys->shape[3], 0.5)), -1); //     attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
    attn_weights = nn_Dropout_forward(self->dropout, attn_weights);               //     attn_weights = self.dropout(attn_weights)
    Tensor *context_vec = torch_transpose(torch_matmul(attn_weights, values), 1, 2); //     context_vec = (attn_weights @ values).transpose(1, 2)
    context_vec = torch_view(torch_contiguous(context_vec), SHAPE(b, num_tokens, self->d_out)); //     context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
    return nn_call(m, "out_proj", context_vec);                                   //     context_vec = self.out_proj(context_vec)
}
