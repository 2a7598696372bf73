/* The GPT of "Build a Large Language Model (From Scratch)", chapters 4 and 5, as
 * ../shared/pytorch/gpt.py writes it: the same classes, attribute names (so the
 * state_dict keys match: trf_blocks.0.att.W_query.weight, final_norm.scale, ...),
 * forward op by op, and the same random draws in the same order.
 *
 *     Python                                        C
 *     GPT_CONFIG_124M = {"vocab_size": 50257, ...}  nn_GPTConfig cfg = GPT_CONFIG_124M;
 *     model = GPTModel(cfg)                         nn_GPTModel *model = nn_GPTModel_new(cfg);
 *     logits = model(in_idx)                        Tensor *logits = nn_GPTModel_forward(model, in_idx);
 *     model.trf_blocks[0].att                       nn_GPTModel_block(model, 0)->att
 *     generate_text_simple(model, idx, 6, 1024)     gpt_generate_text_simple(model, idx, 6, 1024)
 *     generate(model, idx, 15, 256, 1.4, 25, None)  gpt_generate(model, idx, 15, 256, 1.4, 25, -1)
 *     calc_loss_batch(x, y, model)                  gpt_calc_loss_batch(x, y, model)
 *     calc_loss_loader(loader, model, 5)            gpt_calc_loss_loader(loader, model, 5)
 */
#ifndef ATTENTION_GPT_H
#define ATTENTION_GPT_H

#include "blocks.h"
#include "data.h"
#include "lm.h"
#include "nn.h"
#include "optim.h"
#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The book's config dict, key for key. */
typedef struct {
    int64_t vocab_size, context_length, emb_dim, n_heads, n_layers;
    double drop_rate;
    bool qkv_bias;
} nn_GPTConfig;

/* GPT_CONFIG_124M: 163,009,536 parameters (the output head not tied to tok_emb) */
#define GPT_CONFIG_124M ((nn_GPTConfig){.vocab_size = 50257, .context_length = 1024, .emb_dim = 768, \
                                        .n_heads = 12, .n_layers = 12, .drop_rate = 0.1, .qkv_bias = false})

/* Checks what the constructors would refuse or overflow on (sizes >= 1, emb_dim % n_heads,
 * 0 <= drop_rate <= 1, the parameter count within int64 and memory sizes); false and the
 * reason in err, the config's own words ("emb_dim (770) must be divisible by n_heads (12)"). */
bool nn_GPTConfig_check(nn_GPTConfig cfg, char *err, size_t errlen);
int64_t nn_GPTConfig_num_parameters(nn_GPTConfig cfg);

/* LayerNorm's and GELU's forward run the book's lines as one op each (ac_book_layer_norm,
 * ac_book_gelu in extend.h), whose results and gradients are the same bits as the lines op by op;
 * false (tests): op by op. true by default. */
extern bool nn_gpt_fused;

/* class LayerNorm(nn.Module): scale * ((x - mean) / sqrt(var + eps)) + shift, op by op, eps 1e-5
 * (var biased), parameters "scale" (ones) and "shift" (zeros) */
typedef struct { nn_Module module; double eps; Tensor *scale, *shift; } nn_GPTLayerNorm;
nn_GPTLayerNorm *nn_GPTLayerNorm_new(int64_t emb_dim);
Tensor *nn_GPTLayerNorm_forward(nn_GPTLayerNorm *self, Tensor *x);

/* class GELU(nn.Module): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), op by op */
typedef struct { nn_Module module; } nn_GPTGELU;
nn_GPTGELU *nn_GPTGELU_new(void);
Tensor *nn_GPTGELU_forward(nn_GPTGELU *self, Tensor *x);

/* class FeedForward(nn.Module): layers = Sequential(Linear(e, 4e), GELU(), Linear(4e, e)) */
typedef struct { nn_Module module; nn_Sequential *layers; } nn_FeedForward;
nn_FeedForward *nn_FeedForward_new(nn_GPTConfig cfg);
Tensor *nn_FeedForward_forward(nn_FeedForward *self, Tensor *x);

/* class TransformerBlock(nn.Module): att, ff, norm1, norm2, drop_shortcut;
 * x = x + drop_shortcut(att(norm1(x))); x = x + drop_shortcut(ff(norm2(x))) */
typedef struct {
    nn_Module module;
    nn_MultiHeadAttention *att;
    nn_FeedForward *ff;
    nn_GPTLayerNorm *norm1, *norm2;
    nn_Dropout *drop_shortcut;
} nn_TransformerBlock;
nn_TransformerBlock *nn_TransformerBlock_new(nn_GPTConfig cfg);
Tensor *nn_TransformerBlock_forward(nn_TransformerBlock *self, Tensor *x);

/* class GPTModel(nn.Module): tok_emb, pos_emb, drop_emb, trf_blocks (Sequential of n_layers
 * TransformerBlock), final_norm, out_head (Linear(emb_dim, vocab_size, bias=False));
 * forward(in_idx (b, t) int64) -> logits (b, t, vocab_size) */
typedef struct {
    union { nn_LM lm; nn_Module module; }; /* the decoder every model is (lm.h); model->module is its module */
    nn_GPTConfig cfg;
    nn_Embedding *tok_emb, *pos_emb;
    nn_Dropout *drop_emb;
    nn_Sequential *trf_blocks;
    nn_GPTLayerNorm *final_norm;
    nn_Linear *out_head;
} nn_GPTModel;
nn_GPTModel *nn_GPTModel_new(nn_GPTConfig cfg); /* ac_error on a config nn_GPTConfig_check refuses */
extern const nn_LMArch nn_GPTModel_arch; /* its row of the table of models (lm.h) */
Tensor *nn_GPTModel_forward(nn_GPTModel *self, Tensor *in_idx);
nn_TransformerBlock *nn_GPTModel_block(nn_GPTModel *self, int i); /* model.trf_blocks[i] */

/* ---- chapters 4 and 5: generating, losses ------------------------------------------------ */

/* generate_text_simple: greedy, max_new_tokens times: logits = model(idx[:, -context_size:])[:, -1, :],
 * idx = cat(idx, argmax); under no_grad. idx (b, t) int64; returns (b, t + max_new_tokens). */
Tensor *gpt_generate_text_simple(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size);

/* generate: chapter 5's sampler: top_k (0 or less: None) keeps the k largest logits
 * (where(logits < top_logits[:, -1], -inf, logits)), temperature > 0 samples
 * multinomial(softmax(logits / temperature)), else argmax; stops before eos_id (< 0: None).
 * A callback, when given, sees each new token as it is made (streaming); it returns false to stop. */
typedef lm_token_fn gpt_token_fn; /* bool (*)(int64_t token, void *ctx) */
Tensor *gpt_generate(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                     double temperature, int64_t top_k, int64_t eos_id);
Tensor *gpt_generate_stream(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                            double temperature, int64_t top_k, int64_t eos_id, gpt_token_fn on_token, void *ctx);

/* The KV cache (the book's ch04/03_kv-cache): the decoder's one cache (lm.h), each block's keys and
 * values of the tokens seen so far in a dense nn_LayerCache filled by the block's MultiHeadAttention,
 * so that a new token costs one row of work, not the whole window:
 *     nn_KVCache *cache = nn_KVCache_new(&model->lm, capacity);
 *     Tensor *logits = lm_forward_cached(&model->lm, new_ids, cache);   (the last token's, (1, vocab))
 * For one sequence, in eval mode under no_grad. The same numbers as the full forward's last row (each
 * sum is over the same terms in the same order). Past context_length it is an error: the caller
 * starts again from the last context_length tokens (gpt_generate does, as the book's window slides).
 * gpt_generate_ex: generate's loop with the cache (kv_cache) or the book's recompute-everything loop. */
Tensor *gpt_generate_ex(nn_GPTModel *model, Tensor *idx, int64_t max_new_tokens, int64_t context_size,
                        double temperature, int64_t top_k, int64_t eos_id, bool kv_cache, gpt_token_fn on_token, void *ctx);

/* TransformerBlock.forward with the cache: t new tokens at positions start_pos.. (cache NULL: the plain forward) */
Tensor *nn_TransformerBlock_forward_cached(nn_TransformerBlock *self, Tensor *x, int64_t start_pos, nn_LayerCache *cache);

/* cross_entropy(model(x).flatten(0, 1), y.flatten()) */
Tensor *gpt_calc_loss_batch(Tensor *input_batch, Tensor *target_batch, nn_GPTModel *model);
/* the mean of the first num_batches (< 0: all) batch losses, summed as doubles; nan for an empty loader */
double gpt_calc_loss_loader(DataLoader *loader, nn_GPTModel *model, int64_t num_batches);
/* model.eval(); both losses under no_grad; model.train() */
void gpt_evaluate_model(nn_GPTModel *model, DataLoader *train_loader, DataLoader *val_loader, int64_t eval_iter,
                        double *train_loss, double *val_loss);

/* ---- chapter 6: the classifier (nn/models/gpt/classifier.c) -------------------------------------
 *     model(x)[:, -1, :]                          gpt_last_token_logits(model, x)
 *     calc_loss_batch(x, y, model)                gpt_calc_loss_batch_cls(x, y, model)
 *         (F.cross_entropy(model(x)[:, -1, :], y))
 *     calc_loss_loader(loader, model, 5)          gpt_calc_loss_loader_cls(&loader, model, 5)   (-1: all)
 *     calc_accuracy_loader(loader, model, 10)     gpt_calc_accuracy_loader(&loader, model, 10)  (-1: all)
 *     classify_review(text, model, tokenizer, max_length)
 *                                                 gpt_classify_review(text, model, tok, max_length, 50256, err, n)
 * The loaders are TensorDataLoaders of (ids (b, t) int64, labels (b,) int64); each pass draws as
 * PyTorch's does. calc_accuracy_loader leaves the model in eval mode, as the book's does; the loss is
 * computed with gradients unless the caller is under no_grad. classify_review returns the label
 * (1: "spam"), or -1 with a message when the text does not encode. */
Tensor *gpt_last_token_logits(nn_GPTModel *model, Tensor *input_batch);
Tensor *gpt_calc_loss_batch_cls(Tensor *input_batch, Tensor *target_batch, nn_GPTModel *model);
double gpt_calc_loss_loader_cls(TensorDataLoader *loader, nn_GPTModel *model, int64_t num_batches);
double gpt_calc_accuracy_loader(TensorDataLoader *loader, nn_GPTModel *model, int64_t num_batches);
int gpt_classify_review(const char *text, nn_GPTModel *model, Tokenizer *tokenizer, int64_t max_length,
                        int64_t pad_token_id, char *err, size_t errlen);

/* ---- checkpoints (nn/models/gpt/gpt_checkpoint.c) -----------------------------------------------
 * safetensors: the state_dict under the book's names (trf_blocks.0.att.W_query.weight, ...; the
 * att.mask buffers too, as torch's state_dict has them), then, when opt is given, AdamW's state as
 * "optim.state.<i>.<name>" and the generator as "rng_state"; in the metadata "format"
 * ("attention.c GPTModel"), "config" (vocab_size context_length emb_dim n_heads n_layers drop_rate
 * qkv_bias) and the caller's n_meta key/value pairs and extra tensors (a resumable position).
 * Saved to PATH.tmp, synced, renamed over PATH. */
bool nn_GPTModel_save(const char *path, nn_GPTModel *model, optim_Optimizer *opt, nn_TensorList extra, int n_meta,
                      const char *const *meta_kv, char *err, size_t errlen);
/* Reads PATH into f (arena) and checks it against model (and opt when given): the config in the
 * metadata when there is one (a file without "format", such as PyTorch's safetensors of a
 * state_dict, is taken on its names and shapes alone), every state_dict name and shape, the optimizer
 * state and rng_state when opt is given. Then, only when all of it fits, copies the weights (and
 * the optimizer state and the generator). False and the reason (a key's name, the two configs) in err,
 * nothing changed. */
/* The config a checkpoint of nn_GPTModel_save records, read from its header alone (no weights):
 * *has_config false for a file without one (a state_dict saved elsewhere); false with a message for
 * a file that is not safetensors, or a checkpoint of something else. */
bool nn_GPTModel_config_of(const char *path, nn_GPTConfig *cfg, bool *has_config, char *err, size_t errlen);
bool nn_GPTModel_load(const char *path, nn_GPTModel *model, optim_Optimizer *opt, safetensors_File *f, char *err,
                      size_t errlen);
/* The same checks from PATH's header alone (names, dtypes, shapes, the config; nothing copied, no
 * weight read): a program refuses a file that does not fit before its first line of output. */
bool nn_GPTModel_check_file(const char *path, nn_GPTModel *model, optim_Optimizer *opt, char *err, size_t errlen);

/* OpenAI's GPT-2 from a Hugging Face directory (config.json + model.safetensors, as
 * openai-community/gpt2 ships them; nn/models/gpt/gpt2_weights.c): the config from config.json (qkv_bias,
 * drop_rate 0), the weights by the book's load_weights_into_gpt (Conv1D [in, out] transposed, c_attn
 * split into W_query/W_key/W_value, out_head tied to wte, attn.bias buffers skipped, with or without
 * a "transformer." prefix). NULL and the reason (the key, the shapes) in err. The model is drawn
 * with the current generator first, as GPTModel(cfg) would be, then overwritten. */
nn_GPTModel *nn_GPTModel_from_gpt2(const char *dir, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
