/* Llama 3 (3.2; the book's ch05/07_gpt_to_llama, pkg/llms_from_scratch/llama3.py): its block in the
 * book's registration order (its attention makes W_key, W_value, then W_query; nn.RMSNorm with a
 * "weight") and its row of the table of models. The forward is the decoder it shares with Qwen3
 * (llm_model.c); config.json's "LlamaForCausalLM" is read by hf_llm.c. */
#include "extend.h"
#include "llm_impl.h"

static nn_LLMTransformerBlock *llama3_block_new(const nn_LLMConfig *cfg) {        // class TransformerBlock(nn.Module):
    nn_LLMTransformerBlock *b = nn_module_new(sizeof *b, "TransformerBlock", NULL); // def __init__(self, cfg):
    nn_Module *m = &b->module;
    b->att = (nn_GroupedQueryAttention *)nn_register_module(m, "att", &nn_GroupedQueryAttention_new( //     self.att = GroupedQueryAttention(
        cfg->emb_dim, cfg->n_heads, cfg->n_kv_groups, cfg->head_dim,             //         d_in=emb_dim, d_out=emb_dim, num_heads=n_heads, num_kv_groups=n_kv_groups,
        false, cfg->rms_norm_eps, true)->module);                                //         dtype=dtype)  (W_key, W_value, W_query, out_proj)
    b->ff = (nn_SwiGLUFeedForward *)nn_register_module(m, "ff", &nn_SwiGLUFeedForward_new(cfg->emb_dim, cfg->hidden_dim)->module); //     self.ff = FeedForward(cfg)
    b->norm1 = (nn_RMSNorm *)nn_register_module(m, "norm1", &nn_TorchRMSNorm_new(cfg->emb_dim, cfg->rms_norm_eps)->module); //     self.norm1 = nn.RMSNorm(emb_dim, eps=1e-5)
    b->norm2 = (nn_RMSNorm *)nn_register_module(m, "norm2", &nn_TorchRMSNorm_new(cfg->emb_dim, cfg->rms_norm_eps)->module); //     self.norm2 = nn.RMSNorm(emb_dim, eps=1e-5)
    return b;
}

nn_LLMModel *nn_Llama3Model_new(nn_LLMConfig cfg) {                               // model = Llama3Model(cfg)
    return llm_model_build(cfg, &nn_Llama3Model_arch, llama3_block_new, nn_TorchRMSNorm_new); //     self.final_norm = nn.RMSNorm(emb_dim, eps=1e-5)
}

/* load_weights_into_llama's mapping: the hub's names and ours */
static const nn_HFName hf_names[] = {
    {"model.embed_tokens.weight", "tok_emb.weight"},
    {"model.layers.{i}.self_attn.q_proj.weight", "trf_blocks.{i}.att.W_query.weight"},
    {"model.layers.{i}.self_attn.k_proj.weight", "trf_blocks.{i}.att.W_key.weight"},
    {"model.layers.{i}.self_attn.v_proj.weight", "trf_blocks.{i}.att.W_value.weight"},
    {"model.layers.{i}.self_attn.o_proj.weight", "trf_blocks.{i}.att.out_proj.weight"},
    {"model.layers.{i}.input_layernorm.weight", "trf_blocks.{i}.norm1.weight"},
    {"model.layers.{i}.mlp.gate_proj.weight", "trf_blocks.{i}.ff.fc1.weight"},
    {"model.layers.{i}.mlp.up_proj.weight", "trf_blocks.{i}.ff.fc2.weight"},
    {"model.layers.{i}.mlp.down_proj.weight", "trf_blocks.{i}.ff.fc3.weight"},
    {"model.layers.{i}.post_attention_layernorm.weight", "trf_blocks.{i}.norm2.weight"},
    {"model.norm.weight", "final_norm.weight"},
    {"lm_head.weight", "out_head.weight"}, /* absent when tied */
    {NULL, NULL},
};

const nn_LMArch nn_Llama3Model_arch = {.name = "Llama3Model", .hf_architecture = "LlamaForCausalLM", .model_type = "llama",
                                       .forward = llm_forward, .new_layer_cache = llm_layer_cache, .free = llm_free,
                                      .hf_names = hf_names};
