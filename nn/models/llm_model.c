/* Qwen3Model and Llama3Model: the book's classes (qwen3.py, llama3.py), their kv_cache/ forward,
 * chapter 5's generate and losses for them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "llm.h"

/* ---- TransformerBlock ------------------------------------------------------------------------------ */

static nn_LLMTransformerBlock *block_new(const nn_LLMConfig *cfg) {              // class TransformerBlock(nn.Module):
    nn_LLMTransformerBlock *b = nn_module_new(sizeof *b, "TransformerBlock", NULL); // def __init__(self, cfg):
    nn_Module *m = &b->module;
    b->att = (nn_GroupedQueryAttention *)nn_register_module(m, "att", &nn_GroupedQueryAttention_new( //     self.att = GroupedQueryAttention(
        cfg->emb_dim, cfg->n_heads, cfg->n_kv_groups, cfg->head_dim,             //         d_in=emb_dim, num_heads=n_heads, num_kv_groups=n_kv_groups, head_dim=head_dim,
        cfg->qk_norm, cfg->rms_norm_eps, cfg->llama)->module);                   //         qk_norm=qk_norm)
    b->ff = (nn_SwiGLUFeedForward *)nn_register_module(m, "ff", &nn_SwiGLUFeedForward_new(cfg->emb_dim, cfg->hidden_dim)->module); //     self.ff = FeedForward(cfg)
    nn_RMSNorm *(*norm)(int64_t, double) = cfg->llama ? nn_TorchRMSNorm_new : nn_RMSNorm_new; //     (Llama: nn.RMSNorm(emb_dim, eps=1e-5))
    b->norm1 = (nn_RMSNorm *)nn_register_module(m, "norm1", &norm(cfg->emb_dim, cfg->rms_norm_eps)->module); //     self.norm1 = RMSNorm(emb_dim, eps=1e-6)
    b->norm2 = (nn_RMSNorm *)nn_register_module(m, "norm2", &norm(cfg->emb_dim, cfg->rms_norm_eps)->module); //     self.norm2 = RMSNorm(emb_dim, eps=1e-6)
    return b;
}

static Tensor *block_forward(nn_LLMTransformerBlock *self, Tensor *x, Tensor *mask, Tensor *cos, Tensor *sin, // def forward(self, x, mask, cos, sin,
                             int64_t start_pos, Tensor *cache_k, Tensor *cache_v) { //         start_pos=0, cache=None):
    nn_Module *m = &self->module;
    Tensor *shortcut = x;                                                         //     shortcut = x
    x = nn_call(m, "norm1", x);                                                   //     x = self.norm1(x)
    x = nn_GroupedQueryAttention_forward(self->att, x, mask, cos, sin, start_pos, cache_k, cache_v); //     x, next_cache = self.att(x, mask, cos, sin, start_pos, cache)
    x = torch_add(x, shortcut);                                                   //     x = x + shortcut
    shortcut = x;                                                                 //     shortcut = x
    x = nn_call(m, "norm2", x);                                                   //     x = self.norm2(x)
    x = nn_call(m, "ff", x);                                                      //     x = self.ff(x)
    return torch_add(x, shortcut);                                                //     x = x + shortcut
}

/* ---- the model ------------------------------------------------------------------------------------- */

static Tensor *model_fwd(nn_Module *m, Tensor *x) { return nn_LLMModel_forward((nn_LLMModel *)m, x); }

static void check_cfg(const nn_LLMConfig *c) {
    const char *name = c->llama ? "Llama3Model" : "Qwen3Model";
    if (c->vocab_size < 1 || c->context_length < 1 || c->emb_dim < 1 || c->n_heads < 1 || c->n_layers < 0 ||
        c->hidden_dim < 1 || c->n_kv_groups < 1 || c->head_dim < 0)
        ac_error("%s: every size must be positive (vocab_size %lld, context_length %lld, emb_dim %lld, n_heads %lld, "
                 "n_layers %lld, hidden_dim %lld, n_kv_groups %lld, head_dim %lld)", name, (long long)c->vocab_size,
                 (long long)c->context_length, (long long)c->emb_dim, (long long)c->n_heads, (long long)c->n_layers,
                 (long long)c->hidden_dim, (long long)c->n_kv_groups, (long long)c->head_dim);
    int64_t hd = c->head_dim ? c->head_dim : c->emb_dim / c->n_heads;
    if (hd % 2 != 0 || hd < 2) ac_error("%s: head_dim must be even for RoPE, got %lld", name, (long long)hd);
}

nn_LLMModel *nn_LLMModel_new(nn_LLMConfig cfg) {                                  // class Qwen3Model(nn.Module): def __init__(self, cfg):
    check_cfg(&cfg);
    nn_LLMModel *model = nn_module_new(sizeof *model, cfg.llama ? "Llama3Model" : "Qwen3Model", model_fwd);
    nn_Module *m = &model->module;
    model->cfg = cfg;
    model->tok_emb = (nn_Embedding *)nn_register_module(m, "tok_emb", &nn_Embedding_new(cfg.vocab_size, cfg.emb_dim)->module); //     self.tok_emb = nn.Embedding(vocab_size, emb_dim)
    model->trf_blocks = (nn_ModuleList *)nn_register_module(m, "trf_blocks", &nn_ModuleList_new()->module); //     self.trf_blocks = nn.ModuleList(
    for (int64_t i = 0; i < cfg.n_layers; i++)                                    //         [TransformerBlock(cfg) for _ in range(n_layers)])
        nn_ModuleList_append(model->trf_blocks, &block_new(&cfg)->module);
    model->final_norm = (nn_RMSNorm *)nn_register_module(m, "final_norm", cfg.llama //     self.final_norm = RMSNorm(emb_dim)
        ? &nn_TorchRMSNorm_new(cfg.emb_dim, cfg.rms_norm_eps)->module : &nn_RMSNorm_new(cfg.emb_dim, cfg.rms_norm_eps)->module);
    model->out_head = (nn_Linear *)nn_register_module(m, "out_head", &nn_Linear_new(cfg.emb_dim, cfg.vocab_size, false)->module); //     self.out_head = nn.Linear(emb_dim, vocab_size, bias=False)
    int64_t head_dim = cfg.head_dim ? cfg.head_dim : cfg.emb_dim / cfg.n_heads;   //     head_dim = cfg["head_dim"] or emb_dim // n_heads
    nn_compute_rope_params(head_dim, cfg.rope_base, cfg.context_length,           //     cos, sin = compute_rope_params(head_dim, rope_base, context_length,
                           cfg.has_rope_freq ? &cfg.rope_freq : NULL, &model->cos, &model->sin); //         freq_config=rope_freq)
    return model;                                                                 //     self.register_buffer("cos", cos, persistent=False) ...
}

nn_LLMModel *nn_Qwen3Model_new(nn_LLMConfig cfg) { cfg.llama = false; return nn_LLMModel_new(cfg); }
nn_LLMModel *nn_Llama3Model_new(nn_LLMConfig cfg) { cfg.llama = true; return nn_LLMModel_new(cfg); }

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

Tensor *nn_LLMModel_forward(nn_LLMModel *self, Tensor *in_idx) {                  // def forward(self, in_idx):
    const char *op = self->cfg.llama ? "Llama3Model" : "Qwen3Model";
    check_ids(self, in_idx, op);
    int64_t num_tokens = in_idx->shape[1];                                        //     num_tokens = x.shape[1]
    if (num_tokens > self->cfg.context_length)
        ac_error("%s: %lld tokens exceed context_length %lld (the rope tables' rows)", op, (long long)num_tokens,
                 (long long)self->cfg.context_length);
    nn_Module *m = &self->module;
    Tensor *x = nn_call(m, "tok_emb", in_idx);                                    //     x = self.tok_emb(in_idx)
    Tensor *mask = causal_mask(0, num_tokens);                                    //     mask = torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)
    for (int i = 0; i < self->cfg.n_layers; i++)                                  //     for block in self.trf_blocks:
        x = block_forward(nn_LLMModel_block(self, i), x, mask, self->cos, self->sin, 0, NULL, NULL); //         x = block(x, mask, self.cos, self.sin)
    x = nn_call(m, "final_norm", x);                                              //     x = self.final_norm(x)
    return torch_linear(x, self->out_head->weight, NULL);                         //     return self.out_head(x)
}

/* ---- the KV cache ------------------------------------------------------------------------------------ */

llm_KVCache *llm_KVCache_new(nn_LLMModel *model) { return llm_KVCache_new_capacity(model, model->cfg.context_length); }

llm_KVCache *llm_KVCache_new_capacity(nn_LLMModel *model, int64_t capacity) {
    nn_LLMConfig c = model->cfg;
    if (capacity < 1 || capacity > c.context_length)
        ac_error("KVCache: capacity %lld must be from 1 to context_length %lld", (long long)capacity, (long long)c.context_length);
    int64_t hd = c.head_dim ? c.head_dim : c.emb_dim / c.n_heads;
    llm_KVCache *kv = ac_malloc(sizeof *kv);
    *kv = (llm_KVCache){.n_layers = c.n_layers, .capacity = capacity, .len = 0};
    kv->keys = ac_malloc(sizeof(Tensor *) * (size_t)(c.n_layers ? c.n_layers : 1));
    kv->values = ac_malloc(sizeof(Tensor *) * (size_t)(c.n_layers ? c.n_layers : 1));
    for (int64_t i = 0; i < c.n_layers; i++) {
        kv->keys[i] = ac_persist_zeros(AC_FLOAT32, SHAPE(1, c.n_kv_groups, capacity, hd));
        kv->values[i] = ac_persist_zeros(AC_FLOAT32, SHAPE(1, c.n_kv_groups, capacity, hd));
    }
    return kv;
}

void llm_KVCache_reset(llm_KVCache *cache) { cache->len = 0; }

void llm_KVCache_free(llm_KVCache *cache) {
    if (!cache) return;
    for (int64_t i = 0; i < cache->n_layers; i++) ac_free(cache->keys[i]), ac_free(cache->values[i]);
    free(cache->keys);
    free(cache->values);
    free(cache);
}

Tensor *nn_LLMModel_forward_cached(nn_LLMModel *self, Tensor *new_ids, llm_KVCache *cache) { // def forward(self, in_idx, cache):
    const char *op = "LLM (KV cache)";
    check_ids(self, new_ids, op);
    if (new_ids->shape[0] != 1) ac_error("%s: one sequence at a time, got %s", op, ac_shape_str(new_ids));
    if (torch_is_grad_enabled() || self->module.training)
        ac_error("%s: for generating only: model.eval() and no_grad (training needs the full forward)", op);
    if (cache->n_layers != self->cfg.n_layers || cache->capacity > self->cfg.context_length)
        ac_error("%s: the cache was made for another model", op);
    int64_t num_tokens = new_ids->shape[1], pos_start = cache->len, pos_end = pos_start + num_tokens; // pos_start = self.current_pos
    if (pos_end > cache->capacity)
        ac_error("%s: %lld cached and %lld new tokens exceed context_length %lld", op, (long long)pos_start,
                 (long long)num_tokens, (long long)cache->capacity);
    nn_Module *m = &self->module;
    Tensor *x = nn_call(m, "tok_emb", new_ids);                                   //     x = self.tok_emb(in_idx)
    Tensor *mask = causal_mask(pos_start, pos_end);                               //     mask = torch.triu(...)[pos_start:pos_end, :pos_end]
    for (int i = 0; i < self->cfg.n_layers; i++)                                  //     for i, block in enumerate(self.trf_blocks):
        x = block_forward(nn_LLMModel_block(self, i), x, mask, self->cos, self->sin, pos_start, cache->keys[i], cache->values[i]); //         x = block(x, mask, self.cos, self.sin, start_pos=pos_start, cache=cache[i])
    cache->len = pos_end;                                                         //     self.current_pos = pos_end
    Tensor *last = torch_slice(x, 1, num_tokens - 1, num_tokens);                 /* (C: only the last position's logits) */
    return torch_select(torch_linear(nn_call(m, "final_norm", last), self->out_head->weight, NULL), 1, 0);
}

/* ---- generate -------------------------------------------------------------------------------------- */

typedef struct { int64_t *ids, n, cap; } Ids;

static void ids_push(Ids *s, int64_t id) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->ids = ac_realloc(s->ids, (size_t)s->cap * sizeof *s->ids);
    }
    s->ids[s->n++] = id;
}

Tensor *llm_generate(nn_LLMModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                     double temperature, int64_t top_k, int64_t eos_id, bool kv_cache, llm_token_fn on_token, void *ctx) {
    return llm_generate_ex(model, idx, max_new_tokens, context_size, temperature, top_k, &eos_id, eos_id >= 0, kv_cache,
                           on_token, ctx);
}

Tensor *llm_generate_ex(nn_LLMModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size, // def generate(model, idx, max_new_tokens, context_size,
                        double temperature, int64_t top_k, const int64_t *eos_ids, int n_eos, //         temperature=0.0, top_k=None, eos_id=None):
                        bool kv_cache, llm_token_fn on_token, void *ctx) {
    const char *op = "generate";
    if (context_size < 1) ac_error("%s: context_size must be >= 1, got %lld", op, (long long)context_size);
    if (!(temperature >= 0.0)) ac_error("%s: temperature must be >= 0, got %g", op, temperature);
    if (top_k > model->cfg.vocab_size)
        ac_error("%s: top_k (%lld) is larger than the vocabulary (%lld): selected index k out of range", op,
                 (long long)top_k, (long long)model->cfg.vocab_size);
    check_ids(model, idx, op);
    if (idx->shape[0] != 1) ac_error("%s: one sequence at a time, got %s", op, ac_shape_str(idx));
    Ids s = {0};
    Tensor *c = torch_contiguous(idx);
    for (int64_t i = 0; i < idx->shape[1]; i++) ids_push(&s, ((const int64_t *)c->data)[c->offset + i]);
    if (context_size > model->cfg.context_length) context_size = model->cfg.context_length; /* (C: the rope tables' rows) */
    bool was_training = model->module.training;
    nn_eval(&model->module);                                                      //     model.eval()
    int64_t capacity = s.n + max_new_tokens < context_size ? s.n + max_new_tokens : context_size; /* (C: room for what it will hold) */
    llm_KVCache *kv = kv_cache ? llm_KVCache_new_capacity(model, capacity) : NULL; // cache = KVCache(n_layers); model.reset_kv_cache()
    int64_t window0 = -1;
    bool prev = torch_no_grad_enter();                                            //     with torch.no_grad():
    for (int64_t step = 0; step < max_new_tokens; step++) {                       //         for _ in range(max_new_tokens):
        ac_mark mk = ac_arena_mark();
        int64_t start = s.n > context_size ? s.n - context_size : 0;              //             idx[:, -context_size:]
        Tensor *logits;
        if (kv) {                                                                 /* (C: the prompt once, then the new token; once the window slides, again) */
            if (start != window0) llm_KVCache_reset(kv), window0 = start;
            int64_t from = start + kv->len;
            logits = nn_LLMModel_forward_cached(model, torch_tensor_long(s.ids + from, 2, (int64_t[]){1, s.n - from}), kv);
        } else {
            Tensor *cond = torch_tensor_long(s.ids + start, 2, (int64_t[]){1, s.n - start});
            logits = torch_select(nn_LLMModel_forward(model, cond), 1, -1);       //             logits = model(idx[:, -context_size:])[:, -1, :]
        }
        if (top_k > 0) {                                                          //             if top_k is not None:
            Tensor *top_logits = torch_topk(logits, top_k, -1, true, true).values; //                 top_logits, _ = torch.topk(logits, top_k)
            logits = torch_where(torch_lt(logits, torch_select(top_logits, 1, -1)), //                 logits = torch.where(logits < top_logits[:, -1],
                                 torch_scalar_tensor(-INFINITY), logits);         //                     torch.tensor(float("-inf")), logits)
        }
        Tensor *idx_next;
        if (temperature > 0.0)                                                    //             if temperature > 0.0:
            idx_next = torch_multinomial(torch_softmax(torch_div_scalar(logits, temperature), -1), 1, false); //                 idx_next = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1)
        else                                                                      //             else:
            idx_next = torch_argmax(logits, -1, true);                            //                 idx_next = torch.argmax(logits, dim=-1, keepdim=True)
        int64_t next = (int64_t)torch_item(idx_next);
        ac_arena_release(mk);
        bool eos = false;
        for (int k = 0; k < n_eos; k++) eos |= next == eos_ids[k];
        if (eos) break;                                                           //             if idx_next == eos_id: break
        ids_push(&s, next);                                                       //             idx = torch.cat((idx, idx_next), dim=1)
        if (on_token && !on_token(next, ctx)) break;
    }
    torch_no_grad_exit(prev);
    llm_KVCache_free(kv);
    if (was_training) nn_train(&model->module, true);
    Tensor *out = torch_tensor_long(s.ids, 2, (int64_t[]){1, s.n});
    free(s.ids);
    return out;
}

/* ---- chapter 5's losses ------------------------------------------------------------------------------ */

Tensor *llm_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_LLMModel *model) { // def calc_loss_batch(input_batch, target_batch, model):
    Tensor *logits = nn_LLMModel_forward(model, input_batch);                     //     logits = model(input_batch)
    return torch_cross_entropy(torch_flatten(logits, 0, 1), torch_flatten(target_batch, 0, -1), -100); //     return F.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
}

double llm_calc_loss_loader(DataLoader *loader, nn_LLMModel *model, int64_t num_batches) { // def calc_loss_loader(loader, model, num_batches=None):
    int64_t len = DataLoader_len(loader);
    if (len == 0) return NAN;                                                     //     if len(loader) == 0: return float("nan")
    num_batches = num_batches < 0 ? len : num_batches < len ? num_batches : len; //     num_batches = min(num_batches, len(loader))
    double total = 0.0;
    DataLoaderIter it = DataLoader_iter(loader);                                  //     for i, (x, y) in enumerate(loader):
    Tensor *x, *y;
    for (int64_t i = 0; i < num_batches && DataLoaderIter_next(&it, &x, &y); i++) {
        ac_mark mk = ac_arena_mark();
        total += torch_item(llm_calc_loss_batch(x, y, model));                    //         total += calc_loss_batch(x, y, model).item()
        ac_arena_release(mk);
    }
    DataLoaderIter_free(&it);
    return total / (double)num_batches;                                           //     return total / num_batches
}

void llm_evaluate_model(nn_LLMModel *model, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                        double *train_loss, double *val_loss) {                   // def evaluate_model(model, train_loader, val_loader, eval_iter):
    nn_eval(&model->module);                                                      //     model.eval()
    bool prev = torch_no_grad_enter();                                            //     with torch.no_grad():
    *train_loss = llm_calc_loss_loader(train_loader, model, eval_iter);         //         train_loss = calc_loss_loader(train_loader, model, num_batches=eval_iter)
    *val_loss = llm_calc_loss_loader(val_loader, model, eval_iter);             //         val_loss = calc_loss_loader(val_loader, model, num_batches=eval_iter)
    torch_no_grad_exit(prev);
    nn_train(&model->module, true);                                               //     model.train()
}
