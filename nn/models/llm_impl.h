/* Inside nn/models: what a model file built on llm_model.c's decoder (qwen3.c, llama3.c) uses. */
#ifndef ATTENTION_LLM_IMPL_H
#define ATTENTION_LLM_IMPL_H

#include "llm.h"

typedef nn_LLMTransformerBlock *(*llm_block_new_fn)(const nn_LLMConfig *cfg);
typedef nn_RMSNorm *(*llm_norm_new_fn)(int64_t emb_dim, double eps);

/* the model's __init__ around its blocks: tok_emb, trf_blocks (block_new's), final_norm (norm_new's),
 * out_head, the rope tables; cfg.arch set to arch */
nn_LLMModel *llm_model_build(nn_LLMConfig cfg, const nn_LMArch *arch, llm_block_new_fn block_new,
                             llm_norm_new_fn norm_new);
/* the arch row's functions every such model shares */
Tensor *llm_forward(nn_LM *lm, Tensor *in_idx, nn_KVCache *cache, bool last_only);
nn_LayerCache *llm_layer_cache(nn_LM *lm, int64_t layer, int64_t capacity);
void llm_free(nn_LM *lm);

#endif
