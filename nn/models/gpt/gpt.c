/* The book's GPT (chapter 4) and the loss and sampling helpers of chapter 5, line by
 * line after ../shared/pytorch/gpt.py; each constructor registers (and so draws) in
 * the order the book's __init__ does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "gpt.h"

static const char *dtype_str(const Tensor *t) {
    switch (t->dtype) {
    case AC_FLOAT32: return "float32";
    case AC_INT64: return "int64";
    case AC_BOOL: return "bool";
    case AC_FLOAT64: return "float64";
    case AC_INT32: return "int32";
    case AC_BFLOAT16: return "bfloat16";
    }
    return "?";
}

/* ---- the config ---------------------------------------------------------------------------- */

static bool mul_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static bool add_ok(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

/* parameters: tok_emb V e + pos_emb C e + L (4 e^2 [+ 3 e] + e [out_proj bias] + 8 e^2 + 5 e [ff] + 4 e [norms])
 * + 2 e + V e; -1 when it overflows int64 */
int64_t nn_GPTConfig_num_parameters(nn_GPTConfig c) {
    int64_t e = c.emb_dim, ve, ce, e2, blk, t, total;
    if (!mul_ok(c.vocab_size, e, &ve) || !mul_ok(c.context_length, e, &ce) || !mul_ok(e, e, &e2)) return -1;
    if (!mul_ok(e2, 12, &blk) || !mul_ok(e, c.qkv_bias ? 13 : 10, &t) || !add_ok(blk, t, &blk)) return -1;
    if (!mul_ok(blk, c.n_layers, &blk)) return -1;
    if (!add_ok(ve, ve, &total) || !add_ok(total, ce, &total) || !add_ok(total, blk, &total) ||
        !add_ok(total, 2 * e, &total))
        return -1;
    return total;
}

bool nn_GPTConfig_check(nn_GPTConfig c, char *err, size_t errlen) {
    const struct { const char *name; int64_t v; } sizes[] = {{"vocab_size", c.vocab_size},
        {"context_length", c.context_length}, {"emb_dim", c.emb_dim}, {"n_heads", c.n_heads}, {"n_layers", c.n_layers}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i].v < 1) {
            snprintf(err, errlen, "%s must be at least 1, got %lld", sizes[i].name, (long long)sizes[i].v);
            return false;
        }
    if (c.emb_dim % c.n_heads != 0) {
        snprintf(err, errlen, "emb_dim (%lld) must be divisible by n_heads (%lld): d_out must be divisible by num_heads",
                 (long long)c.emb_dim, (long long)c.n_heads);
        return false;
    }
    if (!(c.drop_rate >= 0.0 && c.drop_rate <= 1.0)) {
        snprintf(err, errlen, "drop_rate must be between 0 and 1, got %g", c.drop_rate);
        return false;
    }
    /* the largest tensors: the parameters, the (b, t, 4 e) activations, the (t, t) mask, the logits */
    int64_t n = nn_GPTConfig_num_parameters(c), cc, e4;
    if (n < 0 || !mul_ok(c.context_length, c.context_length, &cc) || !mul_ok(c.emb_dim, 4, &e4) ||
        n > PTRDIFF_MAX / 16 || cc > PTRDIFF_MAX / 4) {
        snprintf(err, errlen, "the model is too large for this machine (vocab_size %lld, context_length %lld, emb_dim %lld, "
                 "n_layers %lld)", (long long)c.vocab_size, (long long)c.context_length, (long long)c.emb_dim,
                 (long long)c.n_layers);
        return false;
    }
    return true;
}

/* ---- LayerNorm, GELU, FeedForward -------------------------------------------------------------- */

/* LayerNorm's and GELU's lines run as one op each (tensor/ops/fused.c: each element and gradient
 * the same bits as the lines one by one, fewer tensors kept); false: the lines one by one. */
bool nn_gpt_fused = true;

static Tensor *ln_fwd(nn_Module *m, Tensor *x) { return nn_GPTLayerNorm_forward((nn_GPTLayerNorm *)m, x); }

nn_GPTLayerNorm *nn_GPTLayerNorm_new(int64_t emb_dim) {                          // def __init__(self, emb_dim):
    nn_GPTLayerNorm *l = nn_module_new(sizeof *l, "LayerNorm", ln_fwd);
    l->eps = 1e-5;                                                                //     self.eps = 1e-5
    l->scale = nn_register_parameter(&l->module, "scale", torch_ones(SHAPE(emb_dim)));  //     self.scale = nn.Parameter(torch.ones(emb_dim))
    l->shift = nn_register_parameter(&l->module, "shift", torch_zeros(SHAPE(emb_dim))); //     self.shift = nn.Parameter(torch.zeros(emb_dim))
    return l;
}

Tensor *nn_GPTLayerNorm_forward(nn_GPTLayerNorm *self, Tensor *x) {              // def forward(self, x):
    if (nn_gpt_fused && ac_book_layer_norm_fits(x, self->scale, self->shift))     // (C: the four lines below as one op,
        return ac_book_layer_norm(x, self->scale, self->shift, self->eps);        // the same bits: tensor/ops/fused.c)
    Tensor *mean = torch_mean_dim(x, 1, (int64_t[]){-1}, true);                   //     mean = x.mean(dim=-1, keepdim=True)
    Tensor *var = torch_var_dim(x, 1, (int64_t[]){-1}, false, true);              //     var = x.var(dim=-1, keepdim=True, unbiased=False)
    Tensor *dev = torch_sub(x, mean); /* (C: one op a statement, in Python's order: backward's order follows it) */
    Tensor *norm_x = torch_div(dev, torch_sqrt(torch_add_scalar(var, self->eps))); //     norm_x = (x - mean) / torch.sqrt(var + self.eps)
    return torch_add(torch_mul(self->scale, norm_x), self->shift);                //     return self.scale * norm_x + self.shift
}

static Tensor *gelu_fwd(nn_Module *m, Tensor *x) { return nn_GPTGELU_forward((nn_GPTGELU *)m, x); }

nn_GPTGELU *nn_GPTGELU_new(void) { return nn_module_new(sizeof(nn_GPTGELU), "GELU", gelu_fwd); }

Tensor *nn_GPTGELU_forward(nn_GPTGELU *self, Tensor *x) {                        // def forward(self, x):
    if (nn_gpt_fused && ac_book_gelu_fits(x)) return ac_book_gelu(x);             // (C: the lines below as one op, the same bits)
    (void)self;                                                                   //     return 0.5 * x * (1 + torch.tanh(
    Tensor *half = torch_mul_scalar(x, 0.5); /* (C: the ops made in Python's order, which backward's follows) */
    Tensor *c = torch_sqrt(torch_scalar_tensor(2.0 / M_PI));                      //         torch.sqrt(torch.tensor(2.0 / torch.pi)) *
    Tensor *cube = torch_mul_scalar_(torch_pow(x, 3), 0.044715);                  //         (x + 0.044715 * torch.pow(x, 3))))
    Tensor *inner = torch_add(x, cube); /* (C: the product written over the power, which no backward reads: 6 MB a block less) */
    return torch_mul(half, torch_add_scalar(torch_tanh(torch_mul(c, inner)), 1.0));
}

static Tensor *ff_fwd(nn_Module *m, Tensor *x) { return nn_FeedForward_forward((nn_FeedForward *)m, x); }

nn_FeedForward *nn_FeedForward_new(nn_GPTConfig cfg) {                           // def __init__(self, cfg):
    nn_FeedForward *f = nn_module_new(sizeof *f, "FeedForward", ff_fwd);
    int64_t e = cfg.emb_dim;                                                      //     e = cfg["emb_dim"]
    f->layers = (nn_Sequential *)nn_register_module(&f->module, "layers",         //     self.layers = nn.Sequential(
        &nn_Sequential_new(MODULES(&nn_Linear_new(e, 4 * e, true)->module,       //         nn.Linear(e, 4 * e),
                                   &nn_GPTGELU_new()->module,                     //         GELU(),
                                   &nn_Linear_new(4 * e, e, true)->module))->module); //         nn.Linear(4 * e, e))
    return f;
}

Tensor *nn_FeedForward_forward(nn_FeedForward *self, Tensor *x) { return nn_Sequential_forward(self->layers, x); }

/* ---- TransformerBlock ---------------------------------------------------------------------------- */

static Tensor *block_fwd(nn_Module *m, Tensor *x) { return nn_TransformerBlock_forward((nn_TransformerBlock *)m, x); }

nn_TransformerBlock *nn_TransformerBlock_new(nn_GPTConfig cfg) {                 // def __init__(self, cfg):
    nn_TransformerBlock *b = nn_module_new(sizeof *b, "TransformerBlock", block_fwd);
    b->att = (nn_MultiHeadAttention *)nn_register_module(&b->module, "att",       //     self.att = MultiHeadAttention(
        &nn_MultiHeadAttention_new_ex(cfg.emb_dim, cfg.emb_dim, cfg.context_length, //       d_in, d_out, context_length,
                                      cfg.drop_rate, cfg.n_heads, cfg.qkv_bias)->module); //       dropout, num_heads, qkv_bias)
    b->ff = (nn_FeedForward *)nn_register_module(&b->module, "ff", &nn_FeedForward_new(cfg)->module); //     self.ff = FeedForward(cfg)
    b->norm1 = (nn_GPTLayerNorm *)nn_register_module(&b->module, "norm1", &nn_GPTLayerNorm_new(cfg.emb_dim)->module);
    b->norm2 = (nn_GPTLayerNorm *)nn_register_module(&b->module, "norm2", &nn_GPTLayerNorm_new(cfg.emb_dim)->module);
    b->drop_shortcut = (nn_Dropout *)nn_register_module(&b->module, "drop_shortcut", &nn_Dropout_new(cfg.drop_rate)->module);
    return b;
}

Tensor *nn_TransformerBlock_forward(nn_TransformerBlock *self, Tensor *x) {      // def forward(self, x):
    x = torch_add(x, nn_Dropout_forward(self->drop_shortcut,                      //     x = x + self.drop_shortcut(
        nn_MultiHeadAttention_forward(self->att, nn_GPTLayerNorm_forward(self->norm1, x)))); //         self.att(self.norm1(x)))
    return torch_add(x, nn_Dropout_forward(self->drop_shortcut,                   //     return x + self.drop_shortcut(
        nn_FeedForward_forward(self->ff, nn_GPTLayerNorm_forward(self->norm2, x)))); //         self.ff(self.norm2(x)))
}

/* ---- GPTModel ------------------------------------------------------------------------------------ */

static Tensor *gpt_fwd(nn_Module *m, Tensor *x) { return nn_GPTModel_forward((nn_GPTModel *)m, x); }

nn_GPTModel *nn_GPTModel_new(nn_GPTConfig cfg) {                                 // def __init__(self, cfg):
    char err[256];
    if (!nn_GPTConfig_check(cfg, err, sizeof err)) ac_error("GPTModel: %s", err);
    nn_GPTModel *m = nn_module_new(sizeof *m, "GPTModel", gpt_fwd);
    m->cfg = cfg;
    m->tok_emb = (nn_Embedding *)nn_register_module(&m->module, "tok_emb",        //     self.tok_emb = nn.Embedding(vocab_size, emb_dim)
        &nn_Embedding_new(cfg.vocab_size, cfg.emb_dim)->module);
    m->pos_emb = (nn_Embedding *)nn_register_module(&m->module, "pos_emb",        //     self.pos_emb = nn.Embedding(context_length, emb_dim)
        &nn_Embedding_new(cfg.context_length, cfg.emb_dim)->module);
    m->drop_emb = (nn_Dropout *)nn_register_module(&m->module, "drop_emb", &nn_Dropout_new(cfg.drop_rate)->module);
    nn_Sequential *blocks = nn_Sequential_new(0, NULL);                           //     self.trf_blocks = nn.Sequential(
    for (int64_t i = 0; i < cfg.n_layers; i++) {                                  //         *[TransformerBlock(cfg) for _ in range(n_layers)])
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        nn_register_module(&blocks->module, name, &nn_TransformerBlock_new(cfg)->module);
    }
    m->trf_blocks = (nn_Sequential *)nn_register_module(&m->module, "trf_blocks", &blocks->module);
    m->final_norm = (nn_GPTLayerNorm *)nn_register_module(&m->module, "final_norm", &nn_GPTLayerNorm_new(cfg.emb_dim)->module);
    m->out_head = (nn_Linear *)nn_register_module(&m->module, "out_head",         //     self.out_head = nn.Linear(emb_dim, vocab_size, bias=False)
        &nn_Linear_new(cfg.emb_dim, cfg.vocab_size, false)->module);
    return m;
}

nn_TransformerBlock *nn_GPTModel_block(nn_GPTModel *self, int i) {
    if (i < 0 || i >= self->trf_blocks->module.n_children)
        ac_raise(AC_INDEX_ERROR, "GPTModel: index %d is out of range for %d trf_blocks", i, self->trf_blocks->module.n_children);
    return (nn_TransformerBlock *)self->trf_blocks->module.children[i].m;
}

/* self.trf_blocks(x), block by block. (C: a block that builds no graph, frozen with an input that needs
 * no gradient, keeps nothing past its output: its intermediates are released at once, as PyTorch frees
 * what no backward saved. Chapter 6's frozen blocks then cost one block's memory, not eleven.) */
static Tensor *run_blocks(nn_Sequential *blocks, Tensor *x) {
    for (int i = 0; i < blocks->module.n_children; i++) {
        nn_TransformerBlock *b = (nn_TransformerBlock *)blocks->module.children[i].m;
        if (!torch_is_grad_enabled() || x->requires_grad || nn_num_trainable_parameters(&b->module) > 0) {
            x = nn_forward(&b->module, x);
            continue;
        }
        Tensor *out = torch_empty(x->ndim, x->shape, AC_FLOAT32);             /* made before the mark: it stays */
        ac_mark mk = ac_arena_mark();
        Tensor *y = torch_contiguous(nn_forward(&b->module, x));
        memcpy(out->data, (const float *)y->data + y->offset, sizeof(float) * (size_t)torch_numel(y));
        ac_arena_release(mk);
        b->att->last_attn_weights = NULL;                                       /* released with the rest */
        x = out;
    }
    return x;
}

Tensor *nn_GPTModel_forward(nn_GPTModel *self, Tensor *in_idx) {                 // def forward(self, in_idx):
    ac_check_defined(in_idx, "GPTModel");
    if (in_idx->ndim != 2 || in_idx->dtype != AC_INT64)
        ac_error("GPTModel: expected token ids of shape (batch, seq_len) and dtype int64, got %s %s",
                 dtype_str(in_idx), ac_shape_str(in_idx));
    int64_t seq_len = in_idx->shape[1];                                           //     _, seq_len = in_idx.shape
    if (seq_len > self->cfg.context_length)
        ac_error("GPTModel: the input has %lld tokens, but context_length is %lld", (long long)seq_len,
                 (long long)self->cfg.context_length);
    Tensor *x = torch_add(nn_Embedding_forward(self->tok_emb, in_idx),            //     x = self.tok_emb(in_idx) +
                          nn_Embedding_forward(self->pos_emb, torch_arange(seq_len))); //         self.pos_emb(torch.arange(seq_len))
    x = run_blocks(self->trf_blocks, nn_Dropout_forward(self->drop_emb, x));     //     x = self.trf_blocks(self.drop_emb(x))
    return nn_call(&self->module, "out_head", nn_GPTLayerNorm_forward(self->final_norm, x)); //     return self.out_head(self.final_norm(x))
}

/* ---- the KV cache ---------------------------------------------------------------------------------- */

gpt_KVCache *gpt_KVCache_new(nn_GPTModel *model) {
    nn_GPTConfig c = model->cfg;
    gpt_KVCache *kv = ac_malloc(sizeof *kv);
    *kv = (gpt_KVCache){.n_layers = c.n_layers, .capacity = c.context_length, .len = 0};
    kv->keys = ac_malloc(sizeof(Tensor *) * (size_t)c.n_layers);
    kv->values = ac_malloc(sizeof(Tensor *) * (size_t)c.n_layers);
    for (int64_t i = 0; i < c.n_layers; i++) {
        kv->keys[i] = ac_persist_zeros(AC_FLOAT32, SHAPE(1, c.n_heads, c.context_length, c.emb_dim / c.n_heads));
        kv->values[i] = ac_persist_zeros(AC_FLOAT32, SHAPE(1, c.n_heads, c.context_length, c.emb_dim / c.n_heads));
    }
    return kv;
}

void gpt_KVCache_reset(gpt_KVCache *cache) { cache->len = 0; }

void gpt_KVCache_free(gpt_KVCache *cache) {
    if (!cache) return;
    for (int64_t i = 0; i < cache->n_layers; i++) ac_free(cache->keys[i]), ac_free(cache->values[i]);
    free(cache->keys);
    free(cache->values);
    free(cache);
}

/* MultiHeadAttention.forward for t new tokens at positions p0..p0+t-1, over the cache's keys 0..p0+t-1 */
static Tensor *cached_attention(nn_MultiHeadAttention *a, Tensor *x, Tensor *K, Tensor *V, int64_t p0) {
    int64_t t = x->shape[1], h = a->num_heads, dh = a->head_dim, T = p0 + t;
    Tensor *keys = torch_transpose(torch_view(nn_call(&a->module, "W_key", x), SHAPE(1, t, h, dh)), 1, 2);
    Tensor *queries = torch_transpose(torch_view(nn_call(&a->module, "W_query", x), SHAPE(1, t, h, dh)), 1, 2);
    Tensor *values = torch_transpose(torch_view(nn_call(&a->module, "W_value", x), SHAPE(1, t, h, dh)), 1, 2);
    torch_copy_(torch_slice(K, 2, p0, T), keys);      /* the new keys and values join the cache */
    torch_copy_(torch_slice(V, 2, p0, T), values);
    Tensor *keys_all = torch_slice(K, 2, 0, T), *values_all = torch_slice(V, 2, 0, T);
    Tensor *attn_scores = torch_matmul(queries, torch_transpose(keys_all, 2, 3)); /* (1, h, t, T) */
    Tensor *mask = torch_to_bool(torch_slice(torch_slice(a->mask, 0, p0, T), 1, 0, T)); /* rows p0..T-1 of the mask */
    attn_scores = torch_masked_fill(attn_scores, mask, -INFINITY);
    Tensor *attn_weights = torch_softmax(torch_div_scalar(attn_scores, pow((double)dh, 0.5)), -1);
    Tensor *context = torch_reshape(torch_transpose(torch_matmul(attn_weights, values_all), 1, 2), SHAPE(1, t, a->d_out));
    return nn_call(&a->module, "out_proj", context);
}

Tensor *nn_GPTModel_forward_cached(nn_GPTModel *self, Tensor *new_ids, gpt_KVCache *cache) {
    const char *op = "GPTModel (KV cache)";
    ac_check_defined(new_ids, op);
    if (new_ids->ndim != 2 || new_ids->dtype != AC_INT64 || new_ids->shape[0] != 1 || new_ids->shape[1] < 1)
        ac_error("%s: expected token ids of shape (1, t), t >= 1, int64, got %s %s", op, dtype_str(new_ids),
                 ac_shape_str(new_ids));
    if (torch_is_grad_enabled() || self->module.training)
        ac_error("%s: for generating only: model.eval() and no_grad (training needs the full forward)", op);
    int64_t t = new_ids->shape[1], p0 = cache->len;
    if (cache->capacity != self->cfg.context_length || cache->n_layers != self->cfg.n_layers)
        ac_error("%s: the cache was made for another model", op);
    if (p0 + t > cache->capacity)
        ac_error("%s: %lld cached and %lld new tokens exceed context_length %lld", op, (long long)p0, (long long)t,
                 (long long)cache->capacity);
    Tensor *pos = torch_empty(SHAPE(t), AC_INT64);                                /* positions p0 .. p0 + t - 1 */
    for (int64_t i = 0; i < t; i++) ((int64_t *)pos->data)[i] = p0 + i;
    Tensor *x = torch_add(nn_Embedding_forward(self->tok_emb, new_ids), nn_Embedding_forward(self->pos_emb, pos));
    for (int64_t i = 0; i < self->cfg.n_layers; i++) {
        nn_TransformerBlock *b = nn_GPTModel_block(self, (int)i);
        x = torch_add(x, cached_attention(b->att, nn_GPTLayerNorm_forward(b->norm1, x), cache->keys[i], cache->values[i], p0));
        x = torch_add(x, nn_FeedForward_forward(b->ff, nn_GPTLayerNorm_forward(b->norm2, x)));
    }
    cache->len = p0 + t;
    Tensor *last = torch_slice(x, 1, t - 1, t);                                   /* only the last token's logits */
    return torch_select(nn_call(&self->module, "out_head", nn_GPTLayerNorm_forward(self->final_norm, last)), 1, 0);
}

/* ---- generating ---------------------------------------------------------------------------------- */

/* The tokens so far, outside the arena, so that each step's forward can be released. */
typedef struct { int64_t *ids, n, cap; } Ids;

static void ids_push(Ids *s, int64_t id) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->ids = ac_realloc(s->ids, (size_t)s->cap * sizeof *s->ids);
    }
    s->ids[s->n++] = id;
}

static Ids ids_from(Tensor *idx, const char *op) {
    ac_check_defined(idx, op);
    if (idx->ndim != 2 || idx->dtype != AC_INT64 || idx->shape[0] != 1)
        ac_error("%s: expected idx of shape (1, n) int64 (one sequence), got %s %s", op, dtype_str(idx),
                 ac_shape_str(idx));
    Ids s = {0};
    Tensor *c = torch_contiguous(idx); /* a view (idx[:, 2:]) starts at its offset */
    for (int64_t i = 0; i < idx->shape[1]; i++) ids_push(&s, ((const int64_t *)c->data)[c->offset + i]);
    return s;
}

/* logits = model(idx[:, -context_size:])[:, -1, :], (1, vocab) */
static Tensor *last_logits(nn_GPTModel *model, const Ids *s, int64_t context_size) {
    int64_t start = s->n > context_size ? s->n - context_size : 0;
    Tensor *cond = torch_tensor_long(s->ids + start, 2, (int64_t[]){1, s->n - start});
    Tensor *logits = nn_GPTModel_forward(model, cond);
    return torch_select(logits, 1, -1);
}

Tensor *gpt_generate_stream(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                            double temperature, int64_t top_k, int64_t eos_id, gpt_token_fn on_token, void *ctx) {
    return gpt_generate_ex(model, idx, max_new_tokens, context_size, temperature, top_k, eos_id, true, on_token, ctx);
}

/* With the cache: while the window (the last context_size tokens) only grows, feed the tokens it has
 * not seen; once it slides, every position changes, so start the cache again on the new window. */
static Tensor *cached_logits(nn_GPTModel *model, gpt_KVCache *kv, const Ids *s, int64_t context_size, int64_t *window0) {
    int64_t start = s->n > context_size ? s->n - context_size : 0;
    if (start != *window0 || kv->len > s->n - start) {
        gpt_KVCache_reset(kv);
        *window0 = start;
    }
    int64_t from = start + kv->len;
    Tensor *ids = torch_tensor_long(s->ids + from, 2, (int64_t[]){1, s->n - from});
    return nn_GPTModel_forward_cached(model, ids, kv);
}

Tensor *gpt_generate_ex(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, // def generate(model, idx, max_new_tokens,
                        int64_t context_size, double temperature, int64_t top_k,  //              context_size, temperature=0.0, top_k=None,
                        int64_t eos_id, bool kv_cache,                            //              eos_id=None):
                        gpt_token_fn on_token, void *ctx) { /* (C: kv_cache, and on_token for each new token: streaming) */
    const char *op = "generate";
    if (context_size < 1) ac_error("%s: context_size must be >= 1, got %lld", op, (long long)context_size);
    if (!(temperature >= 0.0)) ac_error("%s: temperature must be >= 0, got %g", op, temperature);
    if (top_k > model->cfg.vocab_size)
        ac_error("%s: top_k (%lld) is larger than the vocabulary (%lld): selected index k out of range", op,
                 (long long)top_k, (long long)model->cfg.vocab_size);
    Ids s = ids_from(idx, op);
    if (kv_cache && (model->module.training || context_size > model->cfg.context_length))
        kv_cache = false; /* (C: the cache is for eval mode; a window past the model's context fails as the book's would) */
    gpt_KVCache *kv = kv_cache ? gpt_KVCache_new(model) : NULL;
    int64_t window0 = -1;
    bool prev = torch_no_grad_enter();
    for (int64_t step = 0; step < max_new_tokens; step++) {                      //     for _ in range(max_new_tokens):
        ac_mark mk = ac_arena_mark();
        Tensor *logits = kv ? cached_logits(model, kv, &s, context_size, &window0) //         logits = model(idx[:, -context_size:])[:, -1, :]
                            : last_logits(model, &s, context_size);
        if (top_k > 0) {                                                          //         if top_k is not None:
            Tensor *top_logits = torch_topk(logits, top_k, -1, true, true).values; //             top_logits, _ = torch.topk(logits, top_k)
            logits = torch_where(torch_lt(logits, torch_select(top_logits, 1, -1)), //             logits = torch.where(logits < top_logits[:, -1],
                                 torch_scalar_tensor(-INFINITY), logits);         //                 torch.tensor(float("-inf")), logits)
        }
        Tensor *idx_next;
        if (temperature > 0.0)                                                    //         if temperature > 0.0:
            idx_next = torch_multinomial(torch_softmax(torch_div_scalar(logits, temperature), -1), 1, false); /*             idx_next = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1) */
        else                                                                      //         else:
            idx_next = torch_argmax(logits, -1, true);                            //             idx_next = torch.argmax(logits, dim=-1, keepdim=True)
        int64_t next = (int64_t)torch_item(idx_next);
        ac_arena_release(mk);
        if (eos_id >= 0 && next == eos_id) break;                                 //         if idx_next == eos_id: break
        ids_push(&s, next);                                                       //         idx = torch.cat((idx, idx_next), dim=1)
        if (on_token && !on_token(next, ctx)) break;
    }
    torch_no_grad_exit(prev);
    gpt_KVCache_free(kv);
    Tensor *out = torch_tensor_long(s.ids, 2, (int64_t[]){1, s.n});
    free(s.ids);
    return out;
}

Tensor *gpt_generate(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                     double temperature, int64_t top_k, int64_t eos_id) {
    return gpt_generate_stream(model, idx, max_new_tokens, context_size, temperature, top_k, eos_id, NULL, NULL);
}

Tensor *gpt_generate_text_simple(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size) {
    return gpt_generate(model, idx, max_new_tokens, context_size, 0.0, 0, -1);
}

/* ---- losses -------------------------------------------------------------------------------------- */

Tensor *gpt_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_GPTModel *model) { // def calc_loss_batch(input_batch, target_batch, model):
    Tensor *logits = nn_GPTModel_forward(model, input_batch);                     //     logits = model(input_batch)
    return torch_cross_entropy(torch_flatten(logits, 0, 1), torch_flatten(target_batch, 0, -1), -100); //     return F.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
}

double gpt_calc_loss_loader(DataLoader *loader, nn_GPTModel *model, int64_t num_batches) { // def calc_loss_loader(loader, model, num_batches=None):
    int64_t len = DataLoader_len(loader);
    if (len == 0) return NAN;                                                     //     if len(loader) == 0: return float("nan")
    num_batches = num_batches < 0 ? len : num_batches < len ? num_batches : len; //     num_batches = min(num_batches, len(loader))
    double total = 0.0;                                                           //     total = 0.0
    DataLoaderIter it = DataLoader_iter(loader);                                  //     for i, (x, y) in enumerate(loader):
    Tensor *x, *y;
    ac_progress("loss, batch", 0, num_batches);                                   // (C: a live line, on a terminal)
    for (int64_t i = 0; i < num_batches && DataLoaderIter_next(&it, &x, &y); i++) {
        ac_mark mk = ac_arena_mark();
        total += torch_item(gpt_calc_loss_batch(x, y, model));                    //         total += calc_loss_batch(x, y, model).item()
        ac_arena_release(mk);
        ac_progress("loss, batch", i + 1, num_batches);
    }
    DataLoaderIter_free(&it);
    return total / (double)num_batches;                                           //     return total / num_batches
}

void gpt_evaluate_model(nn_GPTModel *model, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                        double *train_loss, double *val_loss) {               // def evaluate_model(model, train_loader, val_loader, eval_iter):
    nn_eval(&model->module);                                                      //     model.eval()
    bool prev = torch_no_grad_enter();                                            //     with torch.no_grad():
    *train_loss = gpt_calc_loss_loader(train_loader, model, eval_iter);          //         train_loss = calc_loss_loader(train_loader, model, eval_iter)
    *val_loss = gpt_calc_loss_loader(val_loader, model, eval_iter);              //         val_loss = calc_loss_loader(val_loader, model, eval_iter)
    torch_no_grad_exit(prev);
    nn_train(&model->module, true);                                               //     model.train()
}
