/* Qwen3 (the book's ch05/11_qwen3, pkg/llms_from_scratch/qwen3.py): its block in the book's
 * registration order and its row of the table of models. The forward is the decoder it shares
 * with Llama 3 (llm_model.c); config.json's "Qwen3ForCausalLM" is read by hf_llm.c. */
#include "extend.h"
#include "llm_impl.h"

static nn_LLMTransformerBlock *qwen3_block_new(const nn_LLMConfig *cfg) {         // class TransformerBlock(nn.Module):
    nn_LLMTransformerBlock *b = nn_module_new(sizeof *b, "TransformerBlock", NULL); // def __init__(self, cfg):
    nn_Module *m = &b->module;
    b->att = (nn_GroupedQueryAttention *)nn_register_module(m, "att", &nn_GroupedQueryAttention_new( //     self.att = GroupedQueryAttention(
        cfg->emb_dim, cfg->n_heads, cfg->n_kv_groups, cfg->head_dim,             //         d_in=emb_dim, num_heads=n_heads, num_kv_groups=n_kv_groups, head_dim=head_dim,
        cfg->qk_norm, cfg->rms_norm_eps, false)->module);                        //         qk_norm=qk_norm)
    b->ff = (nn_SwiGLUFeedForward *)nn_register_module(m, "ff", &nn_SwiGLUFeedForward_new(cfg->emb_dim, cfg->hidden_dim)->module); //     self.ff = FeedForward(cfg)
    b->norm1 = (nn_RMSNorm *)nn_register_module(m, "norm1", &nn_RMSNorm_new(cfg->emb_dim, cfg->rms_norm_eps)->module); //     self.norm1 = RMSNorm(emb_dim, eps=1e-6)
    b->norm2 = (nn_RMSNorm *)nn_register_module(m, "norm2", &nn_RMSNorm_new(cfg->emb_dim, cfg->rms_norm_eps)->module); //     self.norm2 = RMSNorm(emb_dim, eps=1e-6)
    return b;
}

nn_LLMModel *nn_Qwen3Model_new(nn_LLMConfig cfg) {                                // model = Qwen3Model(cfg)
    return llm_model_build(cfg, &nn_Qwen3Model_arch, qwen3_block_new, nn_RMSNorm_new); //     self.final_norm = RMSNorm(emb_dim)
}

/* load_weights_into_qwen's mapping: the hub's names and ours */
static const nn_HFName hf_names[] = {
    {"model.embed_tokens.weight", "tok_emb.weight"},
    {"model.layers.{i}.self_attn.q_proj.weight", "trf_blocks.{i}.att.W_query.weight"},
    {"model.layers.{i}.self_attn.k_proj.weight", "trf_blocks.{i}.att.W_key.weight"},
    {"model.layers.{i}.self_attn.v_proj.weight", "trf_blocks.{i}.att.W_value.weight"},
    {"model.layers.{i}.self_attn.o_proj.weight", "trf_blocks.{i}.att.out_proj.weight"},
    {"model.layers.{i}.self_attn.q_norm.weight", "trf_blocks.{i}.att.q_norm.scale"},
    {"model.layers.{i}.self_attn.k_norm.weight", "trf_blocks.{i}.att.k_norm.scale"},
    {"model.layers.{i}.input_layernorm.weight", "trf_blocks.{i}.norm1.scale"},
    {"model.layers.{i}.mlp.gate_proj.weight", "trf_blocks.{i}.ff.fc1.weight"},
    {"model.layers.{i}.mlp.up_proj.weight", "trf_blocks.{i}.ff.fc2.weight"},
    {"model.layers.{i}.mlp.down_proj.weight", "trf_blocks.{i}.ff.fc3.weight"},
    {"model.layers.{i}.post_attention_layernorm.weight", "trf_blocks.{i}.norm2.scale"},
    {"model.norm.weight", "final_norm.scale"},
    {"lm_head.weight", "out_head.weight"}, /* absent when tied */
    {NULL, NULL},
};

const nn_LMArch nn_Qwen3Model_arch = {.name = "Qwen3Model", .hf_architecture = "Qwen3ForCausalLM", .model_type = "qwen3",
                                      .forward = llm_forward, .new_layer_cache = llm_layer_cache, .free = llm_free,
                                      .hf_names = hf_names};
