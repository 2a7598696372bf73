/* The toy next-token model of ../shared/pytorch/toy_lm.py, and what training
 * it needs: random batches (a text as characters: chartext.h), checkpoints.
 * Everything here is nn_ToyLM_*.
 *
 * class ToyLM(nn.Module):
 *     tok_emb = nn.Embedding(vocab_size, d_model); pos_emb = nn.Embedding(context_length, d_model)
 *     attn = MultiHeadAttention(d_model, d_model, context_length, num_heads); head = nn.Linear(d_model, vocab_size)
 *     forward(idx): x = tok_emb(idx) + pos_emb(torch.arange(t)); x = x + attn(x); return head(x) */
#ifndef ATTENTION_TOY_LM_H
#define ATTENTION_TOY_LM_H

#include "chartext.h"
#include "nn.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    nn_Module module;
    int64_t vocab_size, context_length;
    nn_Embedding *tok_emb, *pos_emb;
    nn_MultiHeadAttention *attn;
    nn_Linear *head;
} nn_ToyLM;

nn_ToyLM *nn_ToyLM_new(int64_t vocab_size, int64_t context_length, int64_t d_model, int64_t num_heads);
Tensor *nn_ToyLM_forward(nn_ToyLM *self, Tensor *idx);  /* idx (b, t) int64 -> logits (b, t, vocab) */

/* ix = torch.randint(len(data) - context, (batch,))
 * x = torch.stack([data[i:i + context] for i in ix]); y = the same shifted by one */
void nn_ToyLM_get_batch(const CharText *ct, int64_t batch, int64_t context, Tensor **x, Tensor **y);

/* Checkpoints (safetensors, nn/toy_lm_checkpoint.c): the state_dict under PyTorch's
 * names, Adam's state as "optim.state.<i>.<name>", the default generator as
 * "rng_state", and in the metadata "format", "step", "context dim heads
 * vocab_size", "vocab" (readable) and "vocab_codepoints" (exact). A save goes
 * to PATH.tmp, is synced to disk and renamed over PATH. A load requires every
 * one of those keys, checks sizes, vocabulary, shapes and the generator's
 * state, and only then changes model, optimizer and generator; else false
 * and the reason in err, nothing changed. */
bool nn_ToyLM_save_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, int64_t step,
                           char *err, size_t errlen);
bool nn_ToyLM_load_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, int64_t *step,
                           char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
