/* The toy next-token model of ../shared/pytorch/toy_lm.py, and what training
 * it needs: a character vocabulary, random batches, one Adam step.
 *
 * class ToyLM(nn.Module):
 *     tok_emb = nn.Embedding(vocab_size, d_model); pos_emb = nn.Embedding(context_length, d_model)
 *     attn = MultiHeadAttention(d_model, d_model, context_length, num_heads); head = nn.Linear(d_model, vocab_size)
 *     forward(idx): x = tok_emb(idx) + pos_emb(torch.arange(t)); x = x + attn(x); return head(x) */
#ifndef ATTENTION_TOY_LM_H
#define ATTENTION_TOY_LM_H

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

/* A text as characters (Unicode code points, decoded from UTF-8):
 * chars = sorted(set(text)); stoi = {c: i}; data = [stoi[c] for c in text]. */
typedef struct {
    int64_t vocab_size;
    uint32_t *chars;   /* chars[i] is the code point of token i */
    int64_t n;         /* characters in the text */
    Tensor *data;      /* (n,) int64, long-lived */
} CharText;

/* Decode `bytes` (not NUL-terminated); false and a message in err on invalid UTF-8. */
bool chartext_init(CharText *ct, const char *bytes, size_t len, char *err, size_t errlen);
void chartext_free(CharText *ct);
int64_t chartext_encode_char(const CharText *ct, uint32_t codepoint); /* -1 if not in the vocabulary */
int chartext_decode(const CharText *ct, int64_t token, char out[5]);  /* UTF-8 bytes of a token */
/* One UTF-8 sequence at s (len bytes left) into *cp; returns its length, 0 if invalid. */
int chartext_utf8_next(const char *s, size_t len, uint32_t *cp);
/* Code point cp (<= U+10FFFF) as UTF-8 into out (up to 4 bytes, no NUL); returns its length. */
int chartext_utf8_put(uint32_t cp, char *out);

/* ix = torch.randint(len(data) - context, (batch,))
 * x = torch.stack([data[i:i + context] for i in ix]); y = the same shifted by one */
void toylm_get_batch(const CharText *ct, int64_t batch, int64_t context, Tensor **x, Tensor **y);

/* Checkpoints (safetensors, nn/checkpoint.c): the state_dict under PyTorch's
 * names, Adam's state as "optim.state.<i>.<name>", the default generator as
 * "rng_state", and in the metadata "format", "step", "context dim heads
 * vocab_size", "vocab" (readable) and "vocab_codepoints" (exact). A save goes
 * to PATH.tmp, is synced to disk and renamed over PATH. A load requires every
 * one of those keys, checks sizes, vocabulary, shapes and the generator's
 * state, and only then changes model, optimizer and generator; else false
 * and the reason in err, nothing changed. */
bool toylm_save_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, int64_t step,
                           char *err, size_t errlen);
bool toylm_load_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, int64_t *step,
                           char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
