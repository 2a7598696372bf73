/* GroupedQueryAttention of Qwen3 (head_dim free, optional q/k RMSNorm) and Llama 3 (W_key and
 * W_value made before W_query), with the kv_cache/ variant's cache. */
#include <math.h>

#include "blocks.h"
#include "extend.h"

static Tensor *linear(nn_Module *m, const char *name, Tensor *x) { return nn_call(m, name, x); }

nn_GroupedQueryAttention *nn_GroupedQueryAttention_new(int64_t d_in, int64_t num_heads, int64_t num_kv_groups, // def __init__(self, d_in, num_heads, num_kv_groups,
                                                       int64_t head_dim, bool qk_norm, double eps, bool llama_order) { //         head_dim=None, qk_norm=False):
    if (num_heads < 1 || num_kv_groups < 1 || num_heads % num_kv_groups != 0) //     assert num_heads % num_kv_groups == 0
        ac_error("GroupedQueryAttention: num_heads must be divisible by num_kv_groups (num_heads %lld, num_kv_groups %lld)",
                 (long long)num_heads, (long long)num_kv_groups);
    if (head_dim <= 0) {                                                          //     if head_dim is None:
        if (d_in % num_heads != 0)
            ac_error("GroupedQueryAttention: `d_in` must be divisible by `num_heads` if `head_dim` is not set (d_in %lld, num_heads %lld)",
                     (long long)d_in, (long long)num_heads);
        head_dim = d_in / num_heads;                                              //         head_dim = d_in // num_heads
    }
    nn_GroupedQueryAttention *a = nn_module_new(sizeof *a, "GroupedQueryAttention", NULL);
    a->num_heads = num_heads;
    a->num_kv_groups = num_kv_groups;
    a->group_size = num_heads / num_kv_groups;
    a->head_dim = head_dim;
    a->d_out = num_heads * head_dim;                                              //     self.d_out = num_heads * head_dim
    nn_Module *m = &a->module;
    if (llama_order) { /* (C: Llama 3's class makes W_key and W_value first) */
        a->W_key = (nn_Linear *)nn_register_module(m, "W_key", &nn_Linear_new(d_in, num_kv_groups * head_dim, false)->module);
        a->W_value = (nn_Linear *)nn_register_module(m, "W_value", &nn_Linear_new(d_in, num_kv_groups * head_dim, false)->module);
        a->W_query = (nn_Linear *)nn_register_module(m, "W_query", &nn_Linear_new(d_in, a->d_out, false)->module);
    } else {
        a->W_query = (nn_Linear *)nn_register_module(m, "W_query", &nn_Linear_new(d_in, a->d_out, false)->module); //     self.W_query = nn.Linear(d_in, self.d_out, bias=False)
        a->W_key = (nn_Linear *)nn_register_module(m, "W_key", &nn_Linear_new(d_in, num_kv_groups * head_dim, false)->module); //     self.W_key = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
        a->W_value = (nn_Linear *)nn_register_module(m, "W_value", &nn_Linear_new(d_in, num_kv_groups * head_dim, false)->module); //     self.W_value = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
    }
    a->out_proj = (nn_Linear *)nn_register_module(m, "out_proj", &nn_Linear_new(a->d_out, d_in, false)->module); //     self.out_proj = nn.Linear(self.d_out, d_in, bias=False)
    if (qk_norm) {                                                                //     if qk_norm:
        a->q_norm = (nn_RMSNorm *)nn_register_module(m, "q_norm", &nn_RMSNorm_new(head_dim, eps)->module); //         self.q_norm = RMSNorm(head_dim, eps=1e-6)
        a->k_norm = (nn_RMSNorm *)nn_register_module(m, "k_norm", &nn_RMSNorm_new(head_dim, eps)->module); //         self.k_norm = RMSNorm(head_dim, eps=1e-6)
    }
    return a;
}

/* keys.repeat_interleave(group_size, dim=1): (b, g, T, d) -> (b, g * group_size, T, d). PyTorch 1.13
 * makes it an index_select with indices 0, 0, ..., 1, 1, ...; so is it here, for its backward: each kv
 * head's gradient adds its group's in index order (an expand's sum took another order from 5 on) */
static Tensor *repeat_interleave_heads(Tensor *t, int64_t group_size) {
    if (group_size == 1) return t;
    int64_t g = t->shape[1];
    Tensor *idx = torch_empty(SHAPE(g * group_size), AC_INT64);
    int64_t *ip = idx->data;
    for (int64_t i = 0; i < g * group_size; i++) ip[i] = i / group_size;
    return torch_index_select(t, 1, idx);
}

Tensor *nn_GroupedQueryAttention_forward(nn_GroupedQueryAttention *self, Tensor *x, Tensor *mask, Tensor *cos, // def forward(self, x, mask, cos, sin,
                                         Tensor *sin, int64_t start_pos, nn_LayerCache *cache) { //         start_pos=0, cache=None):
    const char *op = "GroupedQueryAttention";
    ac_check_defined(x, op);
    if (x->ndim != 3) ac_error("%s: expected x of shape (b, num_tokens, d_in), got %s", op, ac_shape_str(x));
    nn_Module *m = &self->module;
    int64_t b = x->shape[0], num_tokens = x->shape[1], h = self->num_heads, g = self->num_kv_groups, hd = self->head_dim;
    Tensor *queries = linear(m, "W_query", x);                                    //     queries = self.W_query(x)
    Tensor *keys = linear(m, "W_key", x);                                         //     keys = self.W_key(x)
    Tensor *values = linear(m, "W_value", x);                                     //     values = self.W_value(x)
    queries = torch_transpose(torch_view(queries, SHAPE(b, num_tokens, h, hd)), 1, 2); //     queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    keys = torch_transpose(torch_view(keys, SHAPE(b, num_tokens, g, hd)), 1, 2);  //     keys_new = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
    values = torch_transpose(torch_view(values, SHAPE(b, num_tokens, g, hd)), 1, 2); //     values_new = values.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
    if (self->q_norm) queries = nn_call(m, "q_norm", queries);                    //     if self.q_norm: queries = self.q_norm(queries)
    if (self->k_norm) keys = nn_call(m, "k_norm", keys);                          //     if self.k_norm: keys_new = self.k_norm(keys_new)
    queries = nn_apply_rope(queries, cos, sin, start_pos);                        //     queries = apply_rope(queries, cos, sin, offset=start_pos)
    keys = nn_apply_rope(keys, cos, sin, start_pos);                              //     keys_new = apply_rope(keys_new, cos, sin, offset=start_pos)
    if (cache) {                                                                  //     if cache is not None:
        if (b != 1) ac_error("%s: the KV cache holds one sequence, got a batch of %lld", op, (long long)b);
        nn_DenseKVCache_update(nn_DenseKVCache_of(cache, op), start_pos, keys, values, //         keys = torch.cat([prev_k, keys_new], dim=2)
                               &keys, &values);                                   //         values = torch.cat([prev_v, values_new], dim=2)
    }
    keys = repeat_interleave_heads(keys, self->group_size);                       //     keys = keys.repeat_interleave(self.group_size, dim=1)
    values = repeat_interleave_heads(values, self->group_size);                   //     values = values.repeat_interleave(self.group_size, dim=1)
    Tensor *attn_scores = torch_matmul(queries, torch_transpose(keys, 2, 3));     //     attn_scores = queries @ keys.transpose(2, 3)
    attn_scores = torch_masked_fill(attn_scores, mask, -INFINITY);                //     attn_scores = attn_scores.masked_fill(mask, -torch.inf)
    Tensor *attn_weights = torch_softmax(torch_div_scalar(attn_scores, pow((double)hd, 0.5)), -1); //     attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
    Tensor *context = torch_reshape(torch_transpose(torch_matmul(attn_weights, values), 1, 2), //     context = (attn_weights @ values).transpose(1, 2)
                                    SHAPE(b, num_tokens, self->d_out));           //                   .reshape(b, num_tokens, self.d_out)
    return linear(m, "out_proj", context);                                        //     return self.out_proj(context)
}

nn_LayerCache *nn_GroupedQueryAttention_new_cache(nn_GroupedQueryAttention *self, int64_t capacity) {
    return &nn_DenseKVCache_new(self->num_kv_groups, capacity, self->head_dim)->base;
}
