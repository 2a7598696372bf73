/* Qwen3 and Llama 3 (3.2), as the book's bonus chapters build them (ch05/11_qwen3 and
 * ch05/07_gpt_to_llama; pkg/llms_from_scratch/qwen3.py, llama3.py and their kv_cache/ variants):
 * the same classes, attribute names (state_dict keys trf_blocks.0.att.W_query.weight,
 * trf_blocks.0.ff.fc1.weight, final_norm.scale, ...), registration order and so the same random
 * draws: torch.manual_seed(S); Qwen3Model(cfg) gives the same weights here.
 *
 *     Python                                         C
 *     cfg = {"vocab_size": ..., "emb_dim": ...}      nn_LLMConfig cfg = {...}  (or llm_config_load(config.json))
 *     model = Qwen3Model(cfg)                        nn_LLMModel *model = nn_Qwen3Model_new(cfg)
 *     model = Llama3Model(cfg)                       nn_LLMModel *model = nn_Llama3Model_new(cfg)
 *     logits = model(in_idx)                         nn_LLMModel_forward(model, in_idx)
 *     model(idx, cache=cache)  (kv_cache/)           lm_forward_cached(&model->lm, idx, cache)  (last position's logits)
 *     generate(model, idx, n, ctx, temperature,      llm_generate(model, idx, n, ctx, temperature, top_k, eos_id,
 *              top_k, eos_id)                                     kv_cache, on_token, on_token_ctx)
 *     calc_loss_batch(x, y, model)                   llm_calc_loss_batch(x, y, model)
 *
 * Hugging Face's layout (config.json + model.safetensors, or shards with
 * model.safetensors.index.json; F32, BF16 or F16) both ways: llm_from_pretrained / llm_save_pretrained
 * (nn/models/hf_llm.c), the mapping of the book's load_weights_into_qwen / load_weights_into_llama.
 * All math is float32: BF16 and F16 weights are widened when read, as model.to(torch.float32), or for
 * generation BF16 matrices are held as they are (nn_LLMModel_hold_bf16) and widened as each is used. */
#ifndef ATTENTION_LLM_H
#define ATTENTION_LLM_H

#include "blocks.h"
#include "data.h"
#include "lm.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const nn_LMArch *arch;        /* architectures: &nn_Qwen3Model_arch, &nn_Llama3Model_arch (NULL: Qwen3's) */
    int64_t vocab_size;           /* vocab_size */
    int64_t context_length;       /* max_position_embeddings */
    int64_t emb_dim;              /* hidden_size */
    int64_t n_heads;              /* num_attention_heads */
    int64_t n_layers;             /* num_hidden_layers */
    int64_t hidden_dim;           /* intermediate_size */
    int64_t head_dim;             /* head_dim; 0: emb_dim / n_heads */
    bool qk_norm;                 /* Qwen3: always */
    int64_t n_kv_groups;          /* num_key_value_heads */
    double rope_base;             /* rope_theta */
    double rms_norm_eps;          /* rms_norm_eps (the book: Qwen3 1e-6, Llama 1e-5) */
    bool has_rope_freq;           /* rope_scaling given (rope_type "llama3") */
    nn_RopeFreqConfig rope_freq;
    bool tie_word_embeddings;     /* out_head shares tok_emb's weight when loaded so */
    int64_t eos_token_id;         /* -1: none; config.json's first when it lists several */
    int n_eos;                    /* config.json's eos_token_id, a number or a list (Llama 3.2 Instruct's three) */
    int64_t eos_token_ids[8];
    char torch_dtype[16];         /* "bfloat16", ... (the files'; math is float32) */
} nn_LLMConfig;

/* TransformerBlock(cfg): att, ff, norm1, norm2 */
typedef struct {
    nn_Module module;
    nn_GroupedQueryAttention *att;
    nn_SwiGLUFeedForward *ff;
    nn_RMSNorm *norm1, *norm2;
} nn_LLMTransformerBlock;

typedef struct {
    union { nn_LM lm; nn_Module module; }; /* the decoder every model is (lm.h); model->module is its module */
    nn_LLMConfig cfg;
    nn_Embedding *tok_emb;
    nn_ModuleList *trf_blocks;
    nn_RMSNorm *final_norm;
    nn_Linear *out_head;  /* tied: its weight is tok_emb's (one parameter, as PyTorch's named_parameters) */
    Tensor *cos, *sin;    /* register_buffer(..., persistent=False): long-lived, not in the state_dict */
    bool tied;
} nn_LLMModel;

/* one file a model: nn/models/qwen3.c, nn/models/llama3.c (their blocks, rows of the table, chat formats) */
nn_LLMModel *nn_Qwen3Model_new(nn_LLMConfig cfg);
nn_LLMModel *nn_Llama3Model_new(nn_LLMConfig cfg);
extern const nn_LMArch nn_Qwen3Model_arch, nn_Llama3Model_arch;
nn_LLMModel *nn_LLMModel_new(nn_LLMConfig cfg); /* by cfg.arch */
void nn_LLMModel_free(nn_LLMModel *model);      /* nn_free and the rope tables */
nn_LLMTransformerBlock *nn_LLMModel_block(nn_LLMModel *model, int i);
/* model.out_head.weight = model.tok_emb.weight (out_head's own weight freed) */
void nn_LLMModel_tie_weights(nn_LLMModel *model);
Tensor *nn_LLMModel_forward(nn_LLMModel *model, Tensor *in_idx); /* (b, t) int64 -> (b, t, vocab) */
/* Generation's weights held as bfloat16: tok_emb's and every Linear's (out_head's, tied or not), each
 * rounded to nearest even (exact for values read from BF16 files); the norms stay float32. Generation
 * reads every weight once a token, so this halves what a token reads. The math stays float32 (each
 * weight widened as it is read); default math reads them as they are, exact math widens each matrix
 * first (model.to(torch.float32)). For generating only: a gradient through them is an error. */
void nn_LLMModel_hold_bf16(nn_LLMModel *model);
/* every matrix given fresh storage of dtype (float32 or bfloat16), not initialised: for a loader that
 * reads them in next (after a model built with nn_set_skip_init, whose weights are shapes alone) */
void nn_LLMModel_fresh_weights(nn_LLMModel *model, ac_dtype dtype);
bool nn_LLMModel_holds_bf16(const nn_LLMModel *model);

/* The kv_cache/ variant: the decoder's one cache (lm.h), a dense nn_LayerCache a block, (1,
 * n_kv_groups, capacity, head_dim) keys and values; capacity <= context_length (Qwen3-0.6B's 40960
 * would take 9.4 GB: generate makes room for what it will hold):
 *     nn_KVCache *cache = nn_KVCache_new(&model->lm, capacity);
 *     lm_forward_cached(&model->lm, new_ids, cache)   (the last position's logits, (1, vocab); eval, no_grad)
 *
 * Chapter 5's generate over the kv_cache/ loop (kv_cache true: the prompt once, then one token a
 * step; false: the window again each step), lm_generate's: model.eval() for the loop, the window at
 * most context_length (the rope tables' rows). eos_id -1: none. on_token (may be NULL) sees each new
 * token; returning false stops. Returns idx with the new tokens, (1, n). */
typedef lm_token_fn llm_token_fn;
Tensor *llm_generate(nn_LLMModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                     double temperature, int64_t top_k, int64_t eos_id, bool kv_cache, llm_token_fn on_token,
                     void *ctx);
/* the same, stopping at any of n_eos ids (config.json's list: cfg.eos_token_ids, cfg.n_eos) */
Tensor *llm_generate_ex(nn_LLMModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                        double temperature, int64_t top_k, const int64_t *eos_ids, int n_eos, bool kv_cache,
                        llm_token_fn on_token, void *ctx);

/* chapter 5's losses (lm.h's, for these models) */
Tensor *llm_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_LLMModel *model);
double llm_calc_loss_loader(DataLoader *loader, nn_LLMModel *model, int64_t num_batches);
void llm_evaluate_model(nn_LLMModel *model, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                        double *train_loss, double *val_loss);

/* ---- Hugging Face's layout (nn/models/hf_llm.c) ----------------------------------------------- */

/* config.json by its architectures; false with "PATH: ..." naming the key in err */
bool llm_config_load(const char *path, nn_LLMConfig *cfg, char *err, size_t errlen);
/* DIR/config.json and DIR/model.safetensors (or the shards of DIR/model.safetensors.index.json):
 * every file, name, dtype and shape checked before a model is built; NULL with a message */
nn_LLMModel *llm_from_pretrained(const char *dir, char *err, size_t errlen);
/* The same, for generation. hold_bf16: when the files hold every matrix as BF16, keep them so
 * (nn_LLMModel_hold_bf16). skip_init: build the model without its draws (nn_set_skip_init), so that
 * loading costs the file's reading alone and memory is only what is held; the random generator is
 * then where it was (llm_from_pretrained draws, as the book's Qwen3Model(cfg) before
 * load_weights_into_qwen does, which a run that samples or shuffles after loading depends on). */
typedef struct { bool hold_bf16, skip_init; } llm_load_options;
nn_LLMModel *llm_from_pretrained_ex(const char *dir, llm_load_options o, char *err, size_t errlen);
/* the same layout back: config.json (the model's, torch_dtype dtype's) and model.safetensors,
 * dtype "F32", "BF16" or "F16"; DIR must exist */
bool llm_save_pretrained(nn_LLMModel *model, const char *dir, const char *dtype, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
