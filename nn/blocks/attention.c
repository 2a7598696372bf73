/* The article's attention classes, line for line:
 * SelfAttention, MultiHeadAttentionWrapper, CausalAttention, CrossAttention,
 * and the batched MultiHeadAttention of toy_lm.py. */
#include <math.h>
#include <stdlib.h>

#include "blocks.h"
#include "nn.h"

/* W_query, W_key, W_value = nn.Parameter(torch.rand(...)), in that order. */
static void qkv_params(nn_Module *m, int64_t d_in, int64_t d_out_kq, int64_t d_out_v, // (C: the weights that SelfAttention
                       Tensor **q, Tensor **k, Tensor **v) {                       //  and CrossAttention make alike)
    ac_mark mk = ac_arena_mark();
    *q = nn_register_parameter(m, "W_query", torch_rand(SHAPE(d_in, d_out_kq))); // self.W_query = nn.Parameter(torch.rand(d_in, d_out_kq))
    *k = nn_register_parameter(m, "W_key", torch_rand(SHAPE(d_in, d_out_kq)));   // self.W_key = nn.Parameter(torch.rand(d_in, d_out_kq))
    *v = nn_register_parameter(m, "W_value", torch_rand(SHAPE(d_in, d_out_v)));  // self.W_value = nn.Parameter(torch.rand(d_in, d_out_v))
    ac_arena_release(mk);
}

static void check_input(const Tensor *x, int64_t d_in, const char *who) {
    ac_check_defined(x, who);
    if (x->ndim < 1 || x->shape[x->ndim - 1] != d_in)
        ac_error("%s: expected an input whose last dimension is d_in=%lld, got shape %s", who, (long long)d_in,
                 ac_shape_str(x));
}

/* register_buffer("mask", torch.triu(torch.ones(T, T), diagonal=1)), built in
 * place: no (T, T) temporaries (64 MiB each at T = 4096). */
static Tensor *causal_buffer(nn_Module *m, int64_t T) {
    Tensor *mask = nn_adopt_buffer(m, "mask", ac_persist_zeros(AC_FLOAT32, SHAPE(T, T)));
    float *p = mask->data;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = i + 1; j < T; j++) p[i * T + j] = 1.0f;
    return mask;
}

/* ---- SelfAttention ------------------------------------------------------------------------ */

static Tensor *sa_fwd(nn_Module *m, Tensor *x) { return nn_SelfAttention_forward((nn_SelfAttention *)m, x); }

nn_SelfAttention *nn_SelfAttention_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v) { // def __init__(self, d_in, d_out_kq, d_out_v):
    nn_SelfAttention *s = nn_module_new(sizeof *s, "SelfAttention", sa_fwd);         //     super().__init__()
    s->d_out_kq = d_out_kq;                                      //     self.d_out_kq = d_out_kq
    qkv_params(&s->module, d_in, d_out_kq, d_out_v, &s->W_query, &s->W_key, &s->W_value); // (C: W_query, W_key, W_value: see qkv_params)
    return s;
}

Tensor *nn_SelfAttention_forward(nn_SelfAttention *self, Tensor *x) { // def forward(self, x):
    check_input(x, self->W_query->shape[0], "SelfAttention");
    Tensor *keys = torch_matmul(x, self->W_key);                 //     keys = x @ self.W_key
    Tensor *queries = torch_matmul(x, self->W_query);            //     queries = x @ self.W_query
    Tensor *values = torch_matmul(x, self->W_value);             //     values = x @ self.W_value
    Tensor *attn_scores = torch_matmul(queries, torch_T(keys));  //     attn_scores = queries @ keys.T
    Tensor *attn_weights = torch_softmax(                        //     attn_weights = torch.softmax(
        torch_div_scalar(attn_scores, pow((double)self->d_out_kq, 0.5)), -1); //         attn_scores / self.d_out_kq**0.5, dim=-1)
    self->last_attn_weights = attn_weights;
    return torch_matmul(attn_weights, values);                   //     return attn_weights @ values
}

/* ---- MultiHeadAttentionWrapper ----------------------------------------------------------- */

static Tensor *mhw_fwd(nn_Module *m, Tensor *x) {
    return nn_MultiHeadAttentionWrapper_forward((nn_MultiHeadAttentionWrapper *)m, x);
}

static nn_MultiHeadAttentionWrapper *wrapper(int num_heads) {
    if (num_heads < 1) ac_error("MultiHeadAttentionWrapper: num_heads must be >= 1, got %d", num_heads);
    nn_MultiHeadAttentionWrapper *w = nn_module_new(sizeof *w, "MultiHeadAttentionWrapper", mhw_fwd);
    w->heads = nn_ModuleList_new();
    nn_register_module(&w->module, "heads", &w->heads->module);
    return w;
}

nn_MultiHeadAttentionWrapper *nn_MultiHeadAttentionWrapper_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v,
                                                               int num_heads) { // def __init__(self, d_in, d_out_kq, d_out_v, num_heads):
    nn_MultiHeadAttentionWrapper *w = wrapper(num_heads);        //     super().__init__(); self.heads = nn.ModuleList(
    for (int h = 0; h < num_heads; h++)                          //         [SelfAttention(d_in, d_out_kq, d_out_v)
        nn_ModuleList_append(w->heads, &nn_SelfAttention_new(d_in, d_out_kq, d_out_v)->module); //          for _ in range(num_heads)])
    return w;
}

nn_MultiHeadAttentionWrapper *nn_MultiHeadAttentionWrapper_new_causal(int64_t d_in, int64_t d_out_kq,
                                                                      int64_t d_out_v, int64_t context_length,
                                                                      double dropout, int num_heads) {
    nn_MultiHeadAttentionWrapper *w = wrapper(num_heads);
    for (int h = 0; h < num_heads; h++)
        nn_ModuleList_append(w->heads,
                             &nn_CausalAttention_new(d_in, d_out_kq, d_out_v, context_length, dropout)->module);
    return w;
}

Tensor *nn_MultiHeadAttentionWrapper_forward(nn_MultiHeadAttentionWrapper *self, Tensor *x) { // def forward(self, x):
    int n = nn_ModuleList_len(self->heads);
    Tensor **outs = ac_arena_alloc(sizeof(Tensor *) * (size_t)n);
    for (int h = 0; h < n; h++) outs[h] = nn_forward(nn_ModuleList_get(self->heads, h), x); //     [head(x) for head in self.heads]
    return torch_cat(n, outs, -1);                               //     return torch.cat(..., dim=-1)
}

/* ---- CausalAttention ------------------------------------------------------------------------ */

static Tensor *causal_fwd(nn_Module *m, Tensor *x) { return nn_CausalAttention_forward((nn_CausalAttention *)m, x); }

nn_CausalAttention *nn_CausalAttention_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v, int64_t context_length,
                                           double dropout) {
    if (context_length < 1) ac_error("CausalAttention: context_length must be >= 1, got %lld", (long long)context_length);
    nn_CausalAttention *c = nn_module_new(sizeof *c, "CausalAttention", causal_fwd);
    c->d_out_kq = d_out_kq;
    c->context_length = context_length;
    qkv_params(&c->module, d_in, d_out_kq, d_out_v, &c->W_query, &c->W_key, &c->W_value);
    c->dropout = nn_Dropout_new(dropout);
    nn_register_module(&c->module, "dropout", &c->dropout->module);
    c->mask = causal_buffer(&c->module, context_length);
    return c;
}

/* mask.bool()[:t, :t], with a clear error for inputs longer than the context. */
static Tensor *causal_mask(Tensor *mask, int64_t t, int64_t context_length, const char *who) {
    if (t > context_length)
        ac_error("%s: the input has %lld tokens, but the causal mask was built for context_length=%lld",
                 who, (long long)t, (long long)context_length);
    return torch_to_bool(torch_slice(torch_slice(mask, 0, 0, t), 1, 0, t)); /* only the [:t, :t] that is used */
}

Tensor *nn_CausalAttention_forward(nn_CausalAttention *self, Tensor *x) {
    check_input(x, self->W_query->shape[0], "CausalAttention");
    if (x->ndim != 2 && x->ndim != 3)
        ac_error("CausalAttention: expected input of shape (t, d_in) or (b, t, d_in), got %s", ac_shape_str(x));
    int64_t t = x->shape[x->ndim - 2];
    Tensor *keys = torch_matmul(x, self->W_key);
    Tensor *queries = torch_matmul(x, self->W_query);
    Tensor *values = torch_matmul(x, self->W_value);
    Tensor *attn_scores = torch_matmul(queries, torch_transpose(keys, -2, -1));
    attn_scores = torch_masked_fill(attn_scores, causal_mask(self->mask, t, self->context_length, "CausalAttention"),
                                    -INFINITY);
    Tensor *attn_weights = torch_softmax(torch_div_scalar(attn_scores, pow((double)self->d_out_kq, 0.5)), -1);
    attn_weights = nn_Dropout_forward(self->dropout, attn_weights);
    self->last_attn_weights = attn_weights;
    return torch_matmul(attn_weights, values);
}

/* ---- CrossAttention ------------------------------------------------------------------------- */

nn_CrossAttention *nn_CrossAttention_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v) { // def __init__(self, d_in, d_out_kq, d_out_v):
    nn_CrossAttention *c = nn_module_new(sizeof *c, "CrossAttention", NULL);          //     super().__init__()
    c->d_out_kq = d_out_kq;                                      //     self.d_out_kq = d_out_kq
    qkv_params(&c->module, d_in, d_out_kq, d_out_v, &c->W_query, &c->W_key, &c->W_value); // (C: W_query, W_key, W_value: see qkv_params)
    return c;
}

Tensor *nn_CrossAttention_forward(nn_CrossAttention *self, Tensor *x_1, Tensor *x_2) { // def forward(self, x_1, x_2):
    check_input(x_1, self->W_query->shape[0], "CrossAttention (x_1)");
    check_input(x_2, self->W_key->shape[0], "CrossAttention (x_2)");
    Tensor *queries_1 = torch_matmul(x_1, self->W_query);        //     queries_1 = x_1 @ self.W_query
    Tensor *keys_2 = torch_matmul(x_2, self->W_key);             //     keys_2 = x_2 @ self.W_key
    Tensor *values_2 = torch_matmul(x_2, self->W_value);         //     values_2 = x_2 @ self.W_value
    Tensor *attn_scores = torch_matmul(queries_1, torch_T(keys_2)); //     attn_scores = queries_1 @ keys_2.T
    Tensor *attn_weights = torch_softmax(                        //     attn_weights = torch.softmax(
        torch_div_scalar(attn_scores, pow((double)self->d_out_kq, 0.5)), -1); //         attn_scores / self.d_out_kq**0.5, dim=-1)
    self->last_attn_weights = attn_weights;
    return torch_matmul(attn_weights, values_2);                 //     return attn_weights @ values_2
}

/* ---- MultiHeadAttention (batched) --------------------------------------------------------- */

static Tensor *mha_fwd(nn_Module *m, Tensor *x) { return nn_MultiHeadAttention_forward((nn_MultiHeadAttention *)m, x); }

/* The book's (chapter 3) constructor; toy_lm.py's is the same with dropout 0 and no qkv bias.
 * Registration order as the book's __init__: W_query, W_key, W_value, out_proj, dropout, mask. */
nn_MultiHeadAttention *nn_MultiHeadAttention_new_ex(int64_t d_in, int64_t d_out,              // def __init__(self, d_in, d_out,
                                                    int64_t context_length, double dropout, //         context_length, dropout,
                                                    int64_t num_heads, bool qkv_bias) {     //         num_heads, qkv_bias=False):
    if (num_heads < 1) ac_error("MultiHeadAttention: num_heads must be >= 1, got %lld", (long long)num_heads);
    if (d_out % num_heads != 0) /* assert d_out % num_heads == 0, "d_out must be divisible by num_heads" */
        ac_error("MultiHeadAttention: d_out must be divisible by num_heads (d_out=%lld, num_heads=%lld)",
                 (long long)d_out, (long long)num_heads);
    if (context_length < 1) ac_error("MultiHeadAttention: context_length must be >= 1, got %lld", (long long)context_length);
    nn_MultiHeadAttention *a = nn_module_new(sizeof *a, "MultiHeadAttention", mha_fwd);
    a->d_out = d_out;                                 // self.d_out, self.num_heads, self.head_dim = (
    a->num_heads = num_heads;                         //     d_out, num_heads,
    a->head_dim = d_out / num_heads;                  //     d_out // num_heads)
    a->context_length = context_length;
    a->W_query = (nn_Linear *)nn_register_module(&a->module, "W_query",  // self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
                                                 &nn_Linear_new(d_in, d_out, qkv_bias)->module);
    a->W_key = (nn_Linear *)nn_register_module(&a->module, "W_key",      // self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
                                               &nn_Linear_new(d_in, d_out, qkv_bias)->module);
    a->W_value = (nn_Linear *)nn_register_module(&a->module, "W_value",  // self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
                                                 &nn_Linear_new(d_in, d_out, qkv_bias)->module);
    a->out_proj = (nn_Linear *)nn_register_module(&a->module, "out_proj", // self.out_proj = nn.Linear(d_out, d_out)
                                                  &nn_Linear_new(d_out, d_out, true)->module);
    a->dropout = (nn_Dropout *)nn_register_module(&a->module, "dropout", // self.dropout = nn.Dropout(dropout)
                                                  &nn_Dropout_new(dropout)->module);
    a->mask = causal_buffer(&a->module, context_length); // self.register_buffer("mask", torch.triu(torch.ones(...), diagonal=1))
    return a;
}

nn_MultiHeadAttention *nn_MultiHeadAttention_new(int64_t d_in, int64_t d_out, int64_t context_length,
                                                 int64_t num_heads) {
    return nn_MultiHeadAttention_new_ex(d_in, d_out, context_length, 0.0, num_heads, false);
}

Tensor *nn_MultiHeadAttention_forward(nn_MultiHeadAttention *self, Tensor *x) { // def forward(self, x):
    return nn_MultiHeadAttention_forward_cached(self, x, 0, NULL);
}

/* The book's ch04/03_kv-cache MultiHeadAttention.forward(x, use_cache): the same lines, the new keys and
 * values joining the layer's cache and the queries attending over all of them (rows start_pos.. of the
 * mask). cache NULL: the plain forward above. */
Tensor *nn_MultiHeadAttention_forward_cached(nn_MultiHeadAttention *self, Tensor *x, int64_t start_pos, // def forward(self, x,
                                             nn_LayerCache *cache) {                                 //         use_cache=False):
    ac_check_defined(x, "MultiHeadAttention");
    if (x->ndim != 3) ac_error("MultiHeadAttention: expected input of shape (b, t, d_in), got %s", ac_shape_str(x));
    int64_t b = x->shape[0], t = x->shape[1];                /* b, num_tokens, _ = x.shape */
    int64_t h = self->num_heads, dh = self->head_dim;        /* (C: t is num_tokens, h and dh the heads and their size) */
    nn_DenseKVCache *kv = cache ? nn_DenseKVCache_of(cache, "MultiHeadAttention") : NULL;
    if (!kv && t > self->context_length)
        ac_error("MultiHeadAttention: the input has %lld tokens, but the causal mask was built for context_length=%lld",
                 (long long)t, (long long)self->context_length);
    /* (C: toy_lm.py projects the queries first: the order the ops are made in is the order backward
     * sums x's three gradients in, as PyTorch's engine runs the node made last first) */
    Tensor *queries = self->queries_first ? torch_transpose(torch_view(nn_call(&self->module, "W_query", x),
                                                                       SHAPE(b, t, h, dh)), 1, 2) : NULL;
    Tensor *keys = torch_transpose(torch_view(nn_call(&self->module, "W_key", x), // keys = self.W_key(x).view(
                                              SHAPE(b, t, h, dh)), 1, 2);         //     b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
    if (!self->queries_first)
        queries = torch_transpose(torch_view(nn_call(&self->module, "W_query", x), // queries = self.W_query(x).view(...).transpose(1, 2)
                                             SHAPE(b, t, h, dh)), 1, 2);
    Tensor *values = torch_transpose(torch_view(nn_call(&self->module, "W_value", x), // values = self.W_value(x).view(...).transpose(1, 2)
                                                SHAPE(b, t, h, dh)), 1, 2);
    if (kv) nn_DenseKVCache_update(kv, start_pos, keys, values, &keys, &values); // if use_cache: self.cache_k = torch.cat([self.cache_k, keys_new], dim=1) ...
    Tensor *heads_out;
    if (self->fused && !kv) { /* (C: train --attention fused: one op for the lines below, as F.scaled_dot_product_attention) */
        double p = self->module.training ? self->dropout->p : 0.0;
        heads_out = torch_scaled_dot_product_attention(queries, keys, values, NULL, p, true, NAN);
        self->last_attn_weights = NULL;
    } else {
        Tensor *mask = kv ? torch_to_bool(torch_slice(torch_slice(self->mask, 0, start_pos, start_pos + t), 1, 0, // (cached: rows
                                                      start_pos + t))                                        //  start_pos.. of the mask)
                          : causal_mask(self->mask, t, self->context_length, "MultiHeadAttention"); // self.mask.bool()[:num_tokens, :num_tokens]
        Tensor *attn_scores = torch_matmul(queries, torch_transpose(keys, 2, 3)); // attn_scores = queries @ keys.transpose(2, 3)
        torch_masked_fill_(attn_scores, mask, -INFINITY);                         // attn_scores.masked_fill_(..., -torch.inf)
        Tensor *attn_weights = torch_softmax(                                     // attn_weights = self.dropout(torch.softmax(
            torch_div_scalar(attn_scores, pow((double)dh, 0.5)), -1);             //     attn_scores / keys.shape[-1] ** 0.5, dim=-1))
        attn_weights = nn_Dropout_forward(self->dropout, attn_weights);
        self->last_attn_weights = kv ? NULL : attn_weights; /* (C: kept for the attention pictures; a generation's step is released) */
        heads_out = torch_matmul(attn_weights, values);                          // context = (attn_weights @ values)
    }
    Tensor *context = torch_view(torch_contiguous(torch_transpose(heads_out, 1, 2)), // .transpose(1, 2)
                                 SHAPE(b, t, h * dh));                            // .reshape(b, num_tokens, self.d_out)
    return nn_call(&self->module, "out_proj", context); // return self.out_proj(context)
}

nn_LayerCache *nn_MultiHeadAttention_new_cache(nn_MultiHeadAttention *self, int64_t capacity) {
    return &nn_DenseKVCache_new(self->num_heads, capacity, self->head_dim)->base;
}
