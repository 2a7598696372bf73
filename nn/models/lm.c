/* The decoder written once (lm.h): the KV cache over the layers, the forward's two entries,
 * chapter 5's generate and losses, for any model of the table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "lm.h"

const nn_LMArch *lm_arch_find(const char *name) {
    for (int i = 0; name && lm_archs[i]; i++)
        if (strcmp(lm_archs[i]->name, name) == 0 ||
            (lm_archs[i]->hf_architecture && strcmp(lm_archs[i]->hf_architecture, name) == 0))
            return lm_archs[i];
    return NULL;
}

const char *lm_name(const nn_LM *lm) { return lm->arch->name; }

void lm_free(nn_LM *lm) {
    if (lm) lm->arch->free(lm);
}

/* ---- the KV cache ---------------------------------------------------------------------------- */

nn_KVCache *nn_KVCache_new(nn_LM *lm, int64_t capacity) {
    if (capacity < 1 || capacity > lm->context_length)
        ac_error("KVCache: capacity %lld must be from 1 to context_length %lld", (long long)capacity,
                 (long long)lm->context_length);
    nn_KVCache *kv = ac_malloc(sizeof *kv);
    *kv = (nn_KVCache){.n_layers = lm->n_layers, .capacity = capacity};
    kv->layers = ac_malloc(sizeof *kv->layers * (size_t)(lm->n_layers ? lm->n_layers : 1));
    for (int64_t i = 0; i < lm->n_layers; i++) kv->layers[i] = lm->arch->new_layer_cache(lm, i, capacity);
    return kv;
}

void nn_KVCache_reset(nn_KVCache *cache) {
    for (int64_t i = 0; i < cache->n_layers; i++) nn_LayerCache_reset(cache->layers[i]);
    cache->len = 0;
}

void nn_KVCache_free(nn_KVCache *cache) {
    if (!cache) return;
    for (int64_t i = 0; i < cache->n_layers; i++) nn_LayerCache_free(cache->layers[i]);
    free(cache->layers);
    free(cache);
}

int64_t nn_KVCache_nbytes(const nn_KVCache *cache) {
    int64_t n = 0;
    for (int64_t i = 0; i < cache->n_layers; i++) n += nn_LayerCache_nbytes(cache->layers[i]);
    return n;
}

void lm_check_cache(nn_LM *lm, const nn_KVCache *cache, int64_t t, const char *op) {
    if (cache->n_layers != lm->n_layers || cache->capacity > lm->context_length)
        ac_error("%s: the cache was made for another model", op);
    if (cache->len + t > cache->capacity)
        ac_error("%s: %lld cached and %lld new tokens exceed context_length %lld", op, (long long)cache->len,
                 (long long)t, (long long)cache->capacity);
}

/* ---- the forward ----------------------------------------------------------------------------- */

Tensor *lm_forward(nn_LM *lm, Tensor *in_idx) { return lm->arch->forward(lm, in_idx, NULL, false); }

Tensor *lm_forward_cached(nn_LM *lm, Tensor *new_ids, nn_KVCache *cache) {
    char op[64];
    snprintf(op, sizeof op, "%s (KV cache)", lm_name(lm));
    ac_check_defined(new_ids, op);
    if (new_ids->ndim != 2 || new_ids->dtype != AC_INT64 || new_ids->shape[0] != 1 || new_ids->shape[1] < 1)
        ac_error("%s: expected token ids of shape (1, t), t >= 1, int64, got %s %s", op,
                 torch_dtype_str(new_ids->dtype) + 6, ac_shape_str(new_ids));
    if (torch_is_grad_enabled() || lm->module.training)
        ac_error("%s: for generating only: model.eval() and no_grad (training needs the full forward)", op);
    lm_check_cache(lm, cache, new_ids->shape[1], op);
    return torch_select(lm->arch->forward(lm, new_ids, cache, true), 1, 0);
}

/* ---- generate -------------------------------------------------------------------------------- */

/* The tokens so far, outside the arena, so that each step's forward can be released. */
typedef struct { int64_t *ids, n, cap; } Ids;

static void ids_push(Ids *s, int64_t id) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->ids = ac_realloc(s->ids, (size_t)s->cap * sizeof *s->ids);
    }
    s->ids[s->n++] = id;
}

/* logits = model(idx[:, -context_size:])[:, -1, :], (1, vocab); with the cache, while the window only
 * grows, only the tokens it has not seen; once it slides, every position changes: the cache starts
 * again on the new window */
static Tensor *next_logits(nn_LM *lm, nn_KVCache *kv, const Ids *s, int64_t context_size, int64_t *window0) { /* (C: one step's logits) */
    int64_t start = s->n > context_size ? s->n - context_size : 0;
    if (!kv) {
        Tensor *cond = torch_tensor_long(s->ids + start, 2, (int64_t[]){1, s->n - start});
        return torch_select(lm_forward(lm, cond), 1, -1);
    }
    if (start != *window0 || kv->len > s->n - start) {
        nn_KVCache_reset(kv);
        *window0 = start;
    }
    int64_t from = start + kv->len;
    return lm_forward_cached(lm, torch_tensor_long(s->ids + from, 2, (int64_t[]){1, s->n - from}), kv);
}

Tensor *lm_generate(nn_LM *lm, Tensor *idx, int64_t max_new_tokens, // def generate(model, idx, max_new_tokens,
                    int64_t context_size, lm_GenerateOptions o) {   //              context_size, temperature=0.0, top_k=None, eos_id=None):
    const char *op = "generate";
    if (context_size < 1) ac_error("%s: context_size must be >= 1, got %lld", op, (long long)context_size);
    if (!(o.temperature >= 0.0)) ac_error("%s: temperature must be >= 0, got %g", op, o.temperature);
    if (o.top_k > lm->vocab_size)
        ac_error("%s: top_k (%lld) is larger than the vocabulary (%lld): selected index k out of range", op,
                 (long long)o.top_k, (long long)lm->vocab_size);
    ac_check_defined(idx, op);
    if (idx->ndim != 2 || idx->dtype != AC_INT64 || idx->shape[0] != 1)
        ac_error("%s: expected idx of shape (1, n) int64 (one sequence), got %s %s", op, torch_dtype_str(idx->dtype) + 6,
                 ac_shape_str(idx));
    Ids s = {0};
    Tensor *c = torch_contiguous(idx); /* a view (idx[:, 2:]) starts at its offset */
    for (int64_t i = 0; i < idx->shape[1]; i++) ids_push(&s, ((const int64_t *)c->data)[c->offset + i]);
    bool kv_cache = o.kv_cache && !lm->module.training &&
                    context_size <= lm->context_length; /* (C: the cache is for eval mode; a window past the model's context fails as the book's would) */
    int64_t capacity = s.n + max_new_tokens < context_size ? s.n + max_new_tokens : context_size; /* (C: room for what it will hold) */
    nn_KVCache *kv = kv_cache && capacity >= 1 ? nn_KVCache_new(lm, capacity) : NULL; // cache = KVCache(n_layers)
    int64_t window0 = -1;
    bool prev = torch_no_grad_enter();                                            //     with torch.no_grad():
    for (int64_t step = 0; step < max_new_tokens; step++) {                      //     for _ in range(max_new_tokens):
        ac_mark mk = ac_arena_mark();
        Tensor *logits = next_logits(lm, kv, &s, context_size, &window0);        //         logits = model(idx[:, -context_size:])[:, -1, :]
        if (o.top_k > 0) {                                                        //         if top_k is not None:
            Tensor *top_logits = torch_topk(logits, o.top_k, -1, true, true).values; //             top_logits, _ = torch.topk(logits, top_k)
            logits = torch_where(torch_lt(logits, torch_select(top_logits, 1, -1)), //             logits = torch.where(logits < top_logits[:, -1],
                                 torch_scalar_tensor(-INFINITY), logits);         //                 torch.tensor(float("-inf")), logits)
        }
        Tensor *idx_next;
        if (o.temperature > 0.0)                                                  //         if temperature > 0.0:
            idx_next = torch_multinomial(torch_softmax(torch_div_scalar(logits, o.temperature), -1), 1, false); /*             idx_next = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1) */
        else                                                                      //         else:
            idx_next = torch_argmax(logits, -1, true);                            //             idx_next = torch.argmax(logits, dim=-1, keepdim=True)
        int64_t next = (int64_t)torch_item(idx_next);
        ac_arena_release(mk);
        bool eos = false;
        for (int k = 0; k < o.n_eos; k++) eos |= next == o.eos_ids[k];
        if (eos) break;                                                           //         if idx_next == eos_id: break
        ids_push(&s, next);                                                       //         idx = torch.cat((idx, idx_next), dim=1)
        if (o.on_token && !o.on_token(next, o.ctx)) break;
    }
    torch_no_grad_exit(prev);
    nn_KVCache_free(kv);
    Tensor *out = torch_tensor_long(s.ids, 2, (int64_t[]){1, s.n});
    free(s.ids);
    return out;
}

/* ---- chapter 5's losses -------------------------------------------------------------------------- */

Tensor *lm_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_LM *lm) { // def calc_loss_batch(input_batch, target_batch, model):
    Tensor *logits = lm_forward(lm, input_batch);                                 //     logits = model(input_batch)
    return torch_cross_entropy(torch_flatten(logits, 0, 1), torch_flatten(target_batch, 0, -1), -100); //     return F.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
}

double lm_calc_loss_loader(DataLoader *loader, nn_LM *lm, int64_t num_batches) { // def calc_loss_loader(loader, model, num_batches=None):
    int64_t len = DataLoader_len(loader);
    if (len == 0) return NAN;                                                     //     if len(loader) == 0: return float("nan")
    num_batches = num_batches < 0 ? len : num_batches < len ? num_batches : len; //     num_batches = min(num_batches, len(loader))
    double total = 0.0;                                                           //     total = 0.0
    DataLoaderIter it = DataLoader_iter(loader);                                  //     for i, (x, y) in enumerate(loader):
    Tensor *x, *y;
    ac_progress("loss, batch", 0, num_batches);                                   // (C: a live line, on a terminal)
    for (int64_t i = 0; i < num_batches && DataLoaderIter_next(&it, &x, &y); i++) {
        ac_mark mk = ac_arena_mark();
        total += torch_item(lm_calc_loss_batch(x, y, lm));                        //         total += calc_loss_batch(x, y, model).item()
        ac_arena_release(mk);
        ac_progress("loss, batch", i + 1, num_batches);
    }
    DataLoaderIter_free(&it);
    return total / (double)num_batches;                                           //     return total / num_batches
}

void lm_evaluate_model(nn_LM *lm, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                       double *train_loss, double *val_loss) {                    // def evaluate_model(model, train_loader, val_loader, eval_iter):
    nn_eval(&lm->module);                                                         //     model.eval()
    bool prev = torch_no_grad_enter();                                            //     with torch.no_grad():
    *train_loss = lm_calc_loss_loader(train_loader, lm, eval_iter);              //         train_loss = calc_loss_loader(train_loader, model, eval_iter)
    *val_loss = lm_calc_loss_loader(val_loader, lm, eval_iter);                  //         val_loss = calc_loss_loader(val_loader, model, eval_iter)
    torch_no_grad_exit(prev);
    nn_train(&lm->module, true);                                                  //     model.train()
}
