/* What Qwen3Model and Llama3Model share (qwen3.py and llama3.py write the same forward): the
 * model's modules around the blocks, its forward with and without the KV cache, weights held as
 * bfloat16, and the book's names for generate and the losses over lm.c's. Each model's own file
 * (qwen3.c, llama3.c) gives its block and its row of the table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "llm.h"
#include "llm_impl.h"

/* ---- TransformerBlock ------------------------------------------------------------------------------ */

static Tensor *block_forward(nn_LLMTransformerBlock *self, Tensor *x, Tensor *mask, Tensor *cos, Tensor *sin, // def forward(self, x, mask, cos, sin,
                             int64_t start_pos, nn_LayerCache *cache) {          //         start_pos=0, cache=None):
    nn_Module *m = &self->module;
    Tensor *shortcut = x;                                                         //     shortcut = x
    x = nn_call(m, "norm1", x);                                                   //     x = self.norm1(x)
    x = nn_GroupedQueryAttention_forward(self->att, x, mask, cos, sin, start_pos, cache); //     x, next_cache = self.att(x, mask, cos, sin, start_pos, cache)
    x = torch_add(x, shortcut);                                                   //     x = x + shortcut
    shortcut = x;                                                                 //     shortcut = x
    x = nn_call(m, "norm2", x);                                                   //     x = self.norm2(x)
    x = nn_call(m, "ff", x);                                                      //     x = self.ff(x)
    return torch_add(x, shortcut);                                                //     x = x + shortcut
}

/* ---- the model ------------------------------------------------------------------------------------- */

static Tensor *model_fwd(nn_Module *m, Tensor *x) { return nn_LLMModel_forward((nn_LLMModel *)m, x); }

static void check_cfg(const nn_LLMConfig *c, const char *name) {
    if (c->vocab_size < 1 || c->context_length < 1 || c->emb_dim < 1 || c->n_heads < 1 || c->n_layers < 0 ||
        c->hidden_dim < 1 || c->n_kv_groups < 1 || c->head_dim < 0)
        ac_error("%s: every size must be positive (vocab_size %lld, context_length %lld, emb_dim %lld, n_heads %lld, "
                 "n_layers %lld, hidden_dim %lld, n_kv_groups %lld, head_dim %lld)", name, (long long)c->vocab_size,
                 (long long)c->context_length, (long long)c->emb_dim, (long long)c->n_heads, (long long)c->n_layers,
                 (long long)c->hidden_dim, (long long)c->n_kv_groups, (long long)c->head_dim);
    int64_t hd = c->head_dim ? c->head_dim : c->emb_dim / c->n_heads;
    if (hd % 2 != 0 || hd < 2) ac_error("%s: head_dim must be even for RoPE, got %lld", name, (long long)hd);
}

nn_LLMModel *llm_model_build(nn_LLMConfig cfg, const nn_LMArch *arch, llm_block_new_fn block_new, // def __init__(self, cfg):
                             llm_norm_new_fn norm_new) {
    check_cfg(&cfg, arch->name);
    cfg.arch = arch;
    nn_LLMModel *model = nn_module_new(sizeof *model, arch->name, model_fwd);
    nn_Module *m = &model->module;
    model->lm.arch = arch;
    model->lm.vocab_size = cfg.vocab_size, model->lm.context_length = cfg.context_length, model->lm.n_layers = cfg.n_layers;
    model->cfg = cfg;
    model->tok_emb = (nn_Embedding *)nn_register_module(m, "tok_emb", &nn_Embedding_new(cfg.vocab_size, cfg.emb_dim)->module); //     self.tok_emb = nn.Embedding(vocab_size, emb_dim)
    model->trf_blocks = (nn_ModuleList *)nn_register_module(m, "trf_blocks", &nn_ModuleList_new()->module); //     self.trf_blocks = nn.ModuleList(
    for (int64_t i = 0; i < cfg.n_layers; i++)                                    //         [TransformerBlock(cfg) for _ in range(n_layers)])
        nn_ModuleList_append(model->trf_blocks, &block_new(&cfg)->module);
    model->final_norm = (nn_RMSNorm *)nn_register_module(m, "final_norm", &norm_new(cfg.emb_dim, cfg.rms_norm_eps)->module); //     self.final_norm = RMSNorm(emb_dim)
    model->out_head = (nn_Linear *)nn_register_module(m, "out_head", &nn_Linear_new(cfg.emb_dim, cfg.vocab_size, false)->module); //     self.out_head = nn.Linear(emb_dim, vocab_size, bias=False)
    int64_t head_dim = cfg.head_dim ? cfg.head_dim : cfg.emb_dim / cfg.n_heads;   //     head_dim = cfg["head_dim"] or emb_dim // n_heads
    nn_compute_rope_params(head_dim, cfg.rope_base, cfg.context_length,           //     cos, sin = compute_rope_params(head_dim, rope_base, context_length,
                           cfg.has_rope_freq ? &cfg.rope_freq : NULL, &model->cos, &model->sin); //         freq_config=rope_freq)
    return model;                                                                 //     self.register_buffer("cos", cos, persistent=False) ...
}

nn_LLMModel *nn_LLMModel_new(nn_LLMConfig cfg) {
    const nn_LMArch *arch = cfg.arch ? cfg.arch : &nn_Qwen3Model_arch;
    if (arch == &nn_Qwen3Model_arch) return nn_Qwen3Model_new(cfg);
    if (arch == &nn_Llama3Model_arch) return nn_Llama3Model_new(cfg);
    ac_error("nn_LLMModel_new: %s is not built from nn_LLMConfig", arch->name);
}

void llm_free(nn_LM *lm) { nn_LLMModel_free((nn_LLMModel *)lm); }

nn_LayerCache *llm_layer_cache(nn_LM *lm, int64_t layer, int64_t capacity) {
    return nn_GroupedQueryAttention_new_cache(nn_LLMModel_block((nn_LLMModel *)lm, (int)layer)->att, capacity);
}

void nn_LLMModel_free(nn_LLMModel *model) {
    if (!model) return;
    ac_free(model->cos);
    ac_free(model->sin);
    nn_free(&model->module);
}

nn_LLMTransformerBlock *nn_LLMModel_block(nn_LLMModel *model, int i) {
    return (nn_LLMTransformerBlock *)nn_ModuleList_get(model->trf_blocks, i);
}

void nn_LLMModel_tie_weights(nn_LLMModel *model) {                                // model.out_head.weight = model.tok_emb.weight
    if (model->tied) return;
    nn_Module *oh = &model->out_head->module;
    /* out_head keeps no parameter of its own: the weight is tok_emb's, listed once (named_parameters) */
    for (int i = 0; i < oh->n_params; i++) {
        ac_free(oh->params[i].t);
        free(oh->params[i].name);
    }
    oh->n_params = 0;
    model->out_head->weight = model->tok_emb->weight;
    model->tied = true;
}

/* ---- weights held as bfloat16, for generation ------------------------------------------------------ */

/* each Linear's and Embedding's "weight" replaced by storage of dtype d, its values converted or (a
 * loader's) not initialised: the module's own entry and the struct's field (a tied head has neither
 * entry nor weight of its own: done by the caller) */
static void replace_weights(nn_Module *m, ac_dtype d, bool keep_values) {
    bool linear = strcmp(m->type, "Linear") == 0, emb = strcmp(m->type, "Embedding") == 0;
    for (int i = 0; (linear || emb) && i < m->n_params; i++) {
        Tensor *t = m->params[i].t;
        if (strcmp(m->params[i].name, "weight") != 0 || (keep_values && t->dtype == d)) continue;
        if (keep_values && !torch_is_contiguous(t))
            ac_error("hold_bf16: %s's weight %s has no values of its own yet (a model built under nn_set_skip_init)",
                     m->type, ac_shape_str(t));
        Tensor *h = ac_persist_empty(d, t->ndim, t->shape);
        if (keep_values) { /* float32 to bfloat16, rounded as .to(torch.bfloat16) */
            const float *s = (const float *)t->data + t->offset; /* a parameter: persistent, contiguous */
            uint16_t *o = h->data;
            for (int64_t k = 0, n = torch_numel(t); k < n; k++) o[k] = ac_f32_to_bf16(s[k]);
        }
        h->is_param = true;
        if (d == AC_FLOAT32) torch_requires_grad_(h, t->requires_grad); /* bfloat16: for generation, no gradient */
        ac_free(t);
        m->params[i].t = h;
        if (linear) ((nn_Linear *)m)->weight = h;
        else ((nn_Embedding *)m)->weight = h;
    }
    for (int i = 0; i < m->n_children; i++) replace_weights(m->children[i].m, d, keep_values);
}

void nn_LLMModel_hold_bf16(nn_LLMModel *model) {
    replace_weights(&model->module, AC_BFLOAT16, true);
    if (model->tied) model->out_head->weight = model->tok_emb->weight;
}

void nn_LLMModel_fresh_weights(nn_LLMModel *model, ac_dtype dtype) {
    if (dtype != AC_FLOAT32 && dtype != AC_BFLOAT16)
        ac_error("nn_LLMModel_fresh_weights: torch.float32 or torch.bfloat16, got %s", torch_dtype_str(dtype));
    replace_weights(&model->module, dtype, false);
    if (model->tied) model->out_head->weight = model->tok_emb->weight;
}

bool nn_LLMModel_holds_bf16(const nn_LLMModel *model) { return model->tok_emb->weight->dtype == AC_BFLOAT16; }

static Tensor *causal_mask(int64_t pos_start, int64_t pos_end) { /* triu(ones(T, T), 1)[pos_start:pos_end, :T][None, None] */
    int64_t t = pos_end - pos_start;
    Tensor *mask = torch_empty(SHAPE(1, 1, t, pos_end), AC_BOOL);
    bool *md = mask->data;
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < pos_end; j++) md[i * pos_end + j] = j > pos_start + i;
    return mask;
}

static void check_ids(nn_LLMModel *model, Tensor *in_idx, const char *op) {
    ac_check_defined(in_idx, op);
    if (in_idx->ndim != 2 || in_idx->dtype != AC_INT64 || in_idx->shape[1] < 1)
        ac_error("%s: expected token ids of shape (b, t), t >= 1, int64, got %s", op, ac_shape_str(in_idx));
}

Tensor *nn_LLMModel_forward(nn_LLMModel *self, Tensor *in_idx) { return lm_forward(&self->lm, in_idx); }

/* Qwen3Model.forward and Llama3Model.forward (and their kv_cache/ forward: the new tokens at positions
 * cache->len.., each block's attention adding their keys and values to its layer's cache); last_only:
 * only the last position through final_norm and out_head (C: generation needs no more) */
Tensor *llm_forward(nn_LM *lm, Tensor *in_idx, nn_KVCache *cache, bool last_only) { // def forward(self, in_idx, cache=None):
    nn_LLMModel *self = (nn_LLMModel *)lm;
    const char *op = lm_name(lm);
    check_ids(self, in_idx, op);
    int64_t num_tokens = in_idx->shape[1];                                        //     num_tokens = x.shape[1]
    int64_t pos_start = cache ? cache->len : 0, pos_end = pos_start + num_tokens; //     pos_start = self.current_pos (cache) or 0
    if (!cache && num_tokens > self->cfg.context_length)
        ac_error("%s: %lld tokens exceed context_length %lld (the rope tables' rows)", op, (long long)num_tokens,
                 (long long)self->cfg.context_length);
    nn_Module *m = &self->module;
    Tensor *x = nn_call(m, "tok_emb", in_idx);                                    //     x = self.tok_emb(in_idx)
    Tensor *mask = causal_mask(pos_start, pos_end);                               //     mask = torch.triu(torch.ones(..., dtype=torch.bool), diagonal=1)[pos_start:pos_end, :pos_end]
    for (int i = 0; i < self->cfg.n_layers; i++)                                  //     for i, block in enumerate(self.trf_blocks):
        x = block_forward(nn_LLMModel_block(self, i), x, mask, self->cos, self->sin, pos_start, //         x = block(x, mask, self.cos, self.sin,
                          cache ? cache->layers[i] : NULL);                       //                   start_pos=pos_start, cache=cache[i])
    if (cache) cache->len = pos_end;                                              //     self.current_pos = pos_end
    if (last_only) x = torch_slice(x, 1, num_tokens - 1, num_tokens);
    x = nn_call(m, "final_norm", x);                                              //     x = self.final_norm(x)
    return torch_linear(x, self->out_head->weight, NULL);                         //     return self.out_head(x)
}

/* ---- generate: lm.c's, in eval mode ------------------------------------------------------------------ */

Tensor *llm_generate(nn_LLMModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                     double temperature, int64_t top_k, int64_t eos_id, bool kv_cache, llm_token_fn on_token, void *ctx) {
    return llm_generate_ex(model, idx, max_new_tokens, context_size, temperature, top_k, &eos_id, eos_id >= 0, kv_cache,
                           on_token, ctx);
}

Tensor *llm_generate_ex(nn_LLMModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                        double temperature, int64_t top_k, const int64_t *eos_ids, int n_eos,
                        bool kv_cache, llm_token_fn on_token, void *ctx) {
    const char *op = "generate";
    check_ids(model, idx, op);
    if (idx->shape[0] != 1) ac_error("%s: one sequence at a time, got %s", op, ac_shape_str(idx));
    if (context_size > model->cfg.context_length) context_size = model->cfg.context_length; /* (C: the rope tables' rows) */
    bool was_training = model->module.training;
    nn_eval(&model->module);                                                      // model.eval()
    Tensor *out = lm_generate(&model->lm, idx, max_new_tokens, context_size,
                              (lm_GenerateOptions){.temperature = temperature, .top_k = top_k, .eos_ids = eos_ids,
                                                   .n_eos = n_eos, .kv_cache = kv_cache, .on_token = on_token, .ctx = ctx});
    if (was_training) nn_train(&model->module, true);
    return out;
}

/* ---- chapter 5's losses (lm.c's) ------------------------------------------------------------------------ */

Tensor *llm_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_LLMModel *model) {
    return lm_calc_loss_batch(input_batch, target_batch, &model->lm);
}

double llm_calc_loss_loader(DataLoader *loader, nn_LLMModel *model, int64_t num_batches) {
    return lm_calc_loss_loader(loader, &model->lm, num_batches);
}

void llm_evaluate_model(nn_LLMModel *model, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                        double *train_loss, double *val_loss) {
    lm_evaluate_model(&model->lm, train_loader, val_loader, eval_iter, train_loss, val_loss);
}
