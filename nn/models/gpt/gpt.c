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
    return nn_TransformerBlock_forward_cached(self, x, 0, NULL);
}

Tensor *nn_TransformerBlock_forward_cached(nn_TransformerBlock *self, Tensor *x, int64_t start_pos, // (C: the ch04/03_kv-cache
                                           nn_LayerCache *cache) {                                  //  block: use_cache)
    x = torch_add(x, nn_Dropout_forward(self->drop_shortcut,                      //     x = x + self.drop_shortcut(
        nn_MultiHeadAttention_forward_cached(self->att, nn_GPTLayerNorm_forward(self->norm1, x), start_pos, cache))); //         self.att(self.norm1(x)))
    return torch_add(x, nn_Dropout_forward(self->drop_shortcut,                   //     return x + self.drop_shortcut(
        nn_FeedForward_forward(self->ff, nn_GPTLayerNorm_forward(self->norm2, x)))); //         self.ff(self.norm2(x)))
}

/* ---- GPTModel ------------------------------------------------------------------------------------ */

static Tensor *gpt_fwd(nn_Module *m, Tensor *x) { return nn_GPTModel_forward((nn_GPTModel *)m, x); }

nn_GPTModel *nn_GPTModel_new(nn_GPTConfig cfg) {                                 // def __init__(self, cfg):
    char err[256];
    if (!nn_GPTConfig_check(cfg, err, sizeof err)) ac_error("GPTModel: %s", err);
    nn_GPTModel *m = nn_module_new(sizeof *m, "GPTModel", gpt_fwd);
    m->lm.arch = &nn_GPTModel_arch;
    m->lm.vocab_size = cfg.vocab_size, m->lm.context_length = cfg.context_length, m->lm.n_layers = cfg.n_layers;
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

Tensor *nn_GPTModel_forward(nn_GPTModel *self, Tensor *in_idx) { return lm_forward(&self->lm, in_idx); }

/* GPTModel.forward, and the ch04/03_kv-cache model's: with a cache, the new tokens sit at positions
 * cache->len.. (pos_emb of those), each block's attention adds their keys and values to its layer's
 * cache; last_only: only the last position goes through final_norm and out_head (C: generation needs
 * no more, and the head is the model's largest product) */
static Tensor *gpt_forward(nn_LM *lm, Tensor *in_idx, nn_KVCache *cache, bool last_only) { // def forward(self, in_idx):
    nn_GPTModel *self = (nn_GPTModel *)lm;
    ac_check_defined(in_idx, "GPTModel");
    if (in_idx->ndim != 2 || in_idx->dtype != AC_INT64)
        ac_error("GPTModel: expected token ids of shape (batch, seq_len) and dtype int64, got %s %s",
                 dtype_str(in_idx), ac_shape_str(in_idx));
    int64_t seq_len = in_idx->shape[1], p0 = cache ? cache->len : 0;              //     _, seq_len = in_idx.shape
    if (!cache && seq_len > self->cfg.context_length)
        ac_error("GPTModel: the input has %lld tokens, but context_length is %lld", (long long)seq_len,
                 (long long)self->cfg.context_length);
    Tensor *pos = torch_empty(SHAPE(seq_len), AC_INT64);                          /* torch.arange(p0, p0 + seq_len) */
    for (int64_t i = 0; i < seq_len; i++) ((int64_t *)pos->data)[i] = p0 + i;
    Tensor *x = torch_add(nn_Embedding_forward(self->tok_emb, in_idx),            //     x = self.tok_emb(in_idx) +
                          nn_Embedding_forward(self->pos_emb, pos));              //         self.pos_emb(torch.arange(seq_len))
    x = nn_Dropout_forward(self->drop_emb, x);                                    //     x = self.drop_emb(x)
    if (cache) {                                                                  //     (kv_cache: for i, blk in enumerate(self.trf_blocks):
        for (int64_t i = 0; i < self->cfg.n_layers; i++)                          //         x = blk(x, use_cache=True))
            x = nn_TransformerBlock_forward_cached(nn_GPTModel_block(self, (int)i), x, p0, cache->layers[i]);
        cache->len = p0 + seq_len;                                                //     self.current_pos += seq_len
    } else {
        x = run_blocks(self->trf_blocks, x);                                      //     x = self.trf_blocks(x)
    }
    if (last_only) x = torch_slice(x, 1, seq_len - 1, seq_len);
    return nn_call(&self->module, "out_head", nn_GPTLayerNorm_forward(self->final_norm, x)); //     return self.out_head(self.final_norm(x))
}

static nn_LayerCache *gpt_layer_cache(nn_LM *lm, int64_t layer, int64_t capacity) {
    return nn_MultiHeadAttention_new_cache(nn_GPTModel_block((nn_GPTModel *)lm, (int)layer)->att, capacity);
}

static void gpt_free(nn_LM *lm) { nn_free(&lm->module); }

const nn_LMArch nn_GPTModel_arch = {.name = "GPTModel", .forward = gpt_forward, .new_layer_cache = gpt_layer_cache,
                                    .free = gpt_free};

/* ---- generating ---------------------------------------------------------------------------------- */

Tensor *gpt_generate_ex(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, // def generate(model, idx, max_new_tokens,
                        int64_t context_size, double temperature, int64_t top_k,  //              context_size, temperature=0.0, top_k=None,
                        int64_t eos_id, bool kv_cache,                            //              eos_id=None):
                        gpt_token_fn on_token, void *ctx) { /* (C: kv_cache, and on_token for each new token: streaming) */
    return lm_generate(&model->lm, idx, max_new_tokens, context_size,
                       (lm_GenerateOptions){.temperature = temperature, .top_k = top_k, .eos_ids = &eos_id,
                                            .n_eos = eos_id >= 0, .kv_cache = kv_cache, .on_token = on_token, .ctx = ctx});
}

Tensor *gpt_generate_stream(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                            double temperature, int64_t top_k, int64_t eos_id, gpt_token_fn on_token, void *ctx) {
    return gpt_generate_ex(model, idx, max_new_tokens, context_size, temperature, top_k, eos_id, true, on_token, ctx);
}

Tensor *gpt_generate(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                     double temperature, int64_t top_k, int64_t eos_id) {
    return gpt_generate_stream(model, idx, max_new_tokens, context_size, temperature, top_k, eos_id, NULL, NULL);
}

Tensor *gpt_generate_text_simple(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size) {
    return gpt_generate(model, idx, max_new_tokens, context_size, 0.0, 0, -1);
}

/* ---- losses (chapter 5's, written once over the decoder: lm.c) ------------------------------------------ */

Tensor *gpt_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_GPTModel *model) {
    return lm_calc_loss_batch(input_batch, target_batch, &model->lm);
}

double gpt_calc_loss_loader(DataLoader *loader, nn_GPTModel *model, int64_t num_batches) {
    return lm_calc_loss_loader(loader, &model->lm, num_batches);
}

void gpt_evaluate_model(nn_GPTModel *model, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                        double *train_loss, double *val_loss) {
    lm_evaluate_model(&model->lm, train_loader, val_loader, eval_iter, train_loss, val_loss);
}
