/* ToyLM and its character data (see toy_lm.h). */
#include <stdlib.h>
#include <string.h>

#include "toy_lm.h"

static Tensor *toylm_fwd(nn_Module *m, Tensor *x) { return nn_ToyLM_forward((nn_ToyLM *)m, x); }

nn_ToyLM *nn_ToyLM_new(int64_t vocab_size, int64_t context_length, int64_t d_model, int64_t num_heads) {
    nn_ToyLM *m = nn_module_new(sizeof *m, "ToyLM", toylm_fwd);
    m->vocab_size = vocab_size;
    m->context_length = context_length;
    m->tok_emb = (nn_Embedding *)nn_register_module(&m->module, "tok_emb", &nn_Embedding_new(vocab_size, d_model)->module);
    m->pos_emb = (nn_Embedding *)nn_register_module(&m->module, "pos_emb", &nn_Embedding_new(context_length, d_model)->module);
    m->attn = (nn_MultiHeadAttention *)nn_register_module(
        &m->module, "attn", &nn_MultiHeadAttention_new(d_model, d_model, context_length, num_heads)->module);
    m->attn->queries_first = true; /* toy_lm.py's forward: queries, keys, values */
    m->head = (nn_Linear *)nn_register_module(&m->module, "head", &nn_Linear_new(d_model, vocab_size, true)->module);
    return m;
}

Tensor *nn_ToyLM_forward(nn_ToyLM *self, Tensor *idx) {
    ac_check_defined(idx, "ToyLM");
    if (idx->ndim != 2) ac_error("ToyLM: expected token ids of shape (b, t), got %s", ac_shape_str(idx));
    int64_t t = idx->shape[1];                                        /* t = idx.shape[1] */
    if (t > self->context_length)
        ac_error("ToyLM: the input has %lld tokens, but context_length is %lld", (long long)t,
                 (long long)self->context_length);
    Tensor *x = torch_add(nn_Embedding_forward(self->tok_emb, idx),   /* x = self.tok_emb(idx) */
                          nn_Embedding_forward(self->pos_emb, torch_arange(t))); /* + self.pos_emb(torch.arange(t)) */
    x = torch_add(x, nn_MultiHeadAttention_forward(self->attn, x));   /* x = x + self.attn(x) */
    return nn_Linear_forward(self->head, x);                          /* return self.head(x) */
}

void nn_ToyLM_get_batch(const CharText *ct, int64_t batch, int64_t context, Tensor **x, Tensor **y) {
    if (ct->n - context <= 0)
        ac_error("get_batch: the text has %lld characters; training with context %lld needs at least %lld",
                 (long long)ct->n, (long long)context, (long long)context + 1);
    Tensor *ix = torch_randint(0, ct->n - context, SHAPE(batch));     /* ix = torch.randint(len(data) - context, (batch,)) */
    *x = torch_empty(SHAPE(batch, context), AC_INT64);
    *y = torch_empty(SHAPE(batch, context), AC_INT64);
    const int64_t *d = ct->data->data, *i = ix->data;
    for (int64_t b = 0; b < batch; b++) {
        memcpy((int64_t *)(*x)->data + b * context, d + i[b], sizeof(int64_t) * (size_t)context);     /* data[i:i + context] */
        memcpy((int64_t *)(*y)->data + b * context, d + i[b] + 1, sizeof(int64_t) * (size_t)context); /* data[i + 1:i + context + 1] */
    }
}
