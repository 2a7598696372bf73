/* One decoder under every model: what the book's GPTModel, Qwen3Model and Llama3Model have in
 * common, and what is written once over it (the KV cache, generate, chapter 5's losses).
 *
 * Every model struct begins with an nn_LM (which begins with the model's nn_Module), through an
 * anonymous union, so that model->module and &model->lm are the same object:
 *
 *     typedef struct { union { nn_LM lm; nn_Module module; }; nn_GPTConfig cfg; ... } nn_GPTModel;
 *
 * An nn_LM says which architecture it is (an nn_LMArch: a row of a table, data with two
 * functions), and code above the models (generate, the losses, the trainers, LoRA, DPO) takes an
 * nn_LM * whatever the model is.
 *
 *     the book (Python)                            C, for any model
 *     logits = model(in_idx)                       lm_forward(&model->lm, in_idx)
 *     model(idx, cache=cache)  (kv_cache/)         lm_forward_cached(lm, new_ids, cache)  (the last position's logits)
 *     cache = KVCache(n_layers)                    nn_KVCache *cache = nn_KVCache_new(lm, capacity)
 *     model.reset_kv_cache()                       nn_KVCache_reset(cache)
 *     generate(model, idx, max_new_tokens,         lm_generate(lm, idx, max_new_tokens, context_size,
 *              context_size, temperature, top_k,               (lm_GenerateOptions){.temperature = ..., .top_k = ...,
 *              eos_id)                                          .eos_ids = ..., .n_eos = ..., .kv_cache = true})
 *     calc_loss_batch(x, y, model)                 lm_calc_loss_batch(x, y, lm)
 *     calc_loss_loader(loader, model, n)           lm_calc_loss_loader(&loader, lm, n)
 *     evaluate_model(model, train, val, n)         lm_evaluate_model(lm, &train, &val, n, &train_loss, &val_loss)
 *
 * The book's names stay as the names a reader finds (gpt_generate, generate_text_simple's
 * gpt_generate_text_simple, gpt_calc_loss_loader, llm_generate, ...): thin wrappers over these.
 *
 * The cache: one object a layer (nn/blocks/layer_cache.h), each made by that layer's attention
 * (the arch's new_layer_cache), owned by the caller, passed to the forward. Why not inside the
 * modules, as the book's ch04/06_swa keeps it: a model's weights then stay read-only while it
 * generates (DPO's policy and frozen reference, two generations over one model), and one model can
 * hold different kinds on different layers (a sliding window on some, a recurrent state on others)
 * without the model's struct knowing; llama.cpp passes a per-layer memory object the same way. */
#ifndef ATTENTION_LM_H
#define ATTENTION_LM_H

#include "data.h"
#include "layer_cache.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nn_LM nn_LM;
typedef struct nn_KVCache nn_KVCache;

/* A Hugging Face tensor name and the book's state_dict name it loads into; "{i}" stands for a
 * layer's number in both (the mapping of the book's load_weights_into_qwen / _llama as data) */
typedef struct { const char *hf, *book; } nn_HFName;

/* An architecture: a row of the table of models (lm_arch_find). */
typedef struct {
    const char *name;            /* the book's class: "GPTModel", "Qwen3Model", "Llama3Model" */
    const char *hf_architecture; /* config.json's architectures[0]: "Qwen3ForCausalLM"; NULL: none */
    const char *model_type;      /* config.json's model_type: "qwen3"; NULL: none */
    /* logits (b, t, vocab) of in_idx (b, t) at positions cache->len.. (cache NULL: 0..t-1, the
     * training forward); last_only: only the last position's, (b, 1, vocab) */
    Tensor *(*forward)(nn_LM *lm, Tensor *in_idx, nn_KVCache *cache, bool last_only);
    /* layer i's cache for capacity positions, made by its attention */
    nn_LayerCache *(*new_layer_cache)(nn_LM *lm, int64_t layer, int64_t capacity);
    void (*free)(nn_LM *lm); /* nn_free and what the model holds besides its modules (RoPE tables) */
    /* the hub's names, in the files' order (a run of "{i}" rows is repeated layer by layer);
     * {NULL, NULL}-terminated; NULL: the model has no Hugging Face layout of ours */
    const nn_HFName *hf_names;
} nn_LMArch;

struct nn_LM {
    nn_Module module;        /* the model is a module: its parameters, state_dict, train/eval */
    const nn_LMArch *arch;
    int64_t vocab_size, context_length, n_layers; /* what generate and the cache need of the config */
};

/* the architecture named by the book's class name or config.json's architectures name; NULL: none */
const nn_LMArch *lm_arch_find(const char *name);
/* the table's rows, for listings ("known: ..."), NULL-terminated */
extern const nn_LMArch *const lm_archs[];
/* the model's class name ("GPTModel") */
const char *lm_name(const nn_LM *lm);
void lm_free(nn_LM *lm);

/* ---- the KV cache ----------------------------------------------------------------------------- */

struct nn_KVCache {
    int64_t n_layers, capacity, len; /* len: the positions seen (the book's current_pos) */
    nn_LayerCache **layers;
};
/* room for capacity positions (1 <= capacity <= context_length), one object a layer */
nn_KVCache *nn_KVCache_new(nn_LM *lm, int64_t capacity);
void nn_KVCache_reset(nn_KVCache *cache);
void nn_KVCache_free(nn_KVCache *cache);
int64_t nn_KVCache_nbytes(const nn_KVCache *cache); /* every layer's bytes */
/* a forward's check of the cache it was given: made for this model, room for t more positions */
void lm_check_cache(nn_LM *lm, const nn_KVCache *cache, int64_t t, const char *op);

/* ---- the forward ------------------------------------------------------------------------------ */

Tensor *lm_forward(nn_LM *lm, Tensor *in_idx); /* (b, t) int64 -> (b, t, vocab) */
/* new_ids (1, t) at positions cache->len..: the last position's logits (1, vocab); eval mode and
 * no_grad (training needs the full forward) */
Tensor *lm_forward_cached(nn_LM *lm, Tensor *new_ids, nn_KVCache *cache);

/* ---- generate --------------------------------------------------------------------------------- */

typedef bool (*lm_token_fn)(int64_t token, void *ctx); /* each new token; false stops */
typedef struct {
    double temperature;     /* > 0: multinomial(softmax(logits / temperature)); 0: argmax */
    int64_t top_k;          /* > 0: keep the k largest logits; else None */
    const int64_t *eos_ids; /* stop before any of these (n_eos of them; 0: none) */
    int n_eos;
    bool kv_cache;          /* the prompt once, then one token a step (in eval mode); false: the window again each step */
    lm_token_fn on_token;   /* may be NULL */
    void *ctx;
} lm_GenerateOptions;
/* Chapter 5's generate: idx (1, n) int64; returns (1, n + new). The window is the last context_size
 * tokens (idx[:, -context_size:]); with the cache, once it slides, the cache starts again on the new
 * window, as the book's loop would compute it. The model's mode is left as it is (the book's
 * callers put it in eval mode); in training mode the cache is not used. */
Tensor *lm_generate(nn_LM *lm, Tensor *idx, int64_t max_new_tokens, int64_t context_size, lm_GenerateOptions o);

/* ---- chapter 5's losses ------------------------------------------------------------------------ */

/* cross_entropy(model(x).flatten(0, 1), y.flatten()) */
Tensor *lm_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_LM *lm);
/* the mean of the first num_batches (< 0: all) batch losses, summed as doubles; nan for an empty loader */
double lm_calc_loss_loader(DataLoader *loader, nn_LM *lm, int64_t num_batches);
/* model.eval(); both losses under no_grad; model.train() */
void lm_evaluate_model(nn_LM *lm, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                       double *train_loss, double *val_loss);

#ifdef __cplusplus
}
#endif

#endif
