/* Chapter 6: the GPT as a classifier. Its loss and accuracy read the last token's logits, the one
 * position that has seen the whole text (../shared/pytorch/finetune.py, the book's code). */
#include <math.h>
#include <string.h>

#include "gpt.h"

Tensor *gpt_last_token_logits(nn_GPTModel *model, Tensor *input_batch) { // (C: the book's model(x)[:, -1, :], named)
    Tensor *logits = nn_GPTModel_forward(model, input_batch);
    return torch_select(logits, 1, logits->shape[1] - 1);                          // model(x)[:, -1, :]
}

Tensor *gpt_calc_loss_batch_cls(Tensor *input_batch, Tensor *target_batch, nn_GPTModel *model) { // def calc_loss_batch(x, y, model):
    return torch_cross_entropy(gpt_last_token_logits(model, input_batch), target_batch, -100); //     return F.cross_entropy(model(x)[:, -1, :], y)
}

static int64_t batches_to_read(const TensorDataLoader *loader, int64_t num_batches) {
    int64_t len = TensorDataLoader_len(loader);                                    // len(data_loader) if num_batches is None
    return num_batches < 0 ? len : num_batches < len ? num_batches : len;         //   else min(num_batches, len(data_loader))
}

double gpt_calc_accuracy_loader(TensorDataLoader *loader, nn_GPTModel *model, int64_t num_batches) { // def calc_accuracy_loader(data_loader, model, num_batches=None):
    nn_eval(&model->module);                                                       //     model.eval()
    int64_t correct = 0, n = 0;                                                    //     correct, n = 0, 0
    num_batches = batches_to_read(loader, num_batches);
    TensorDataLoaderIter it = TensorDataLoader_iter(loader);                       //     for i, (x, y) in enumerate(data_loader):
    Tensor *x, *y;
    ac_progress("accuracy, batch", 0, num_batches);                               // (C: a live line, on a terminal)
    for (int64_t i = 0; i < num_batches && TensorDataLoaderIter_next(&it, &x, &y); i++) { //         if i >= num_batches: break
        ac_mark mk = ac_arena_mark();
        bool prev = torch_no_grad_enter();                                         //         with torch.no_grad():
        Tensor *logits = gpt_last_token_logits(model, x);                          //             logits = model(x)[:, -1, :]
        torch_no_grad_exit(prev);
        Tensor *predicted = torch_argmax(logits, -1, false);                       //         predicted = torch.argmax(logits, dim=-1)
        n += predicted->shape[0];                                                  //         n += predicted.shape[0]
        const int64_t *p = predicted->data, *t = (const int64_t *)y->data + y->offset;
        for (int64_t k = 0; k < predicted->shape[0]; k++) correct += p[k] == t[k * y->stride[0]]; // correct += (predicted == y).sum().item()
        ac_arena_release(mk);
        ac_progress("accuracy, batch", i + 1, num_batches);
    }
    TensorDataLoaderIter_free(&it);
    return n ? (double)correct / (double)n : NAN;                                  //     return correct / n
}

double gpt_calc_loss_loader_cls(TensorDataLoader *loader, nn_GPTModel *model, int64_t num_batches) { // def calc_loss_loader(loader, model, num_batches=None):
    if (TensorDataLoader_len(loader) == 0) return NAN;                            //     if len(loader) == 0: return float("nan")
    num_batches = batches_to_read(loader, num_batches);
    double total = 0.0;                                                            //     total = 0.0
    TensorDataLoaderIter it = TensorDataLoader_iter(loader);                       //     for i, (x, y) in enumerate(loader):
    Tensor *x, *y;
    ac_progress("loss, batch", 0, num_batches);                                   // (C: a live line, on a terminal)
    for (int64_t i = 0; i < num_batches && TensorDataLoaderIter_next(&it, &x, &y); i++) {
        ac_mark mk = ac_arena_mark();
        total += torch_item(gpt_calc_loss_batch_cls(x, y, model));                 //         total += calc_loss_batch(x, y, model).item()
        ac_arena_release(mk);
        ac_progress("loss, batch", i + 1, num_batches);
    }
    TensorDataLoaderIter_free(&it);
    return total / (double)num_batches;                                            //     return total / num_batches
}

int gpt_classify_review(const char *text, nn_GPTModel *model, Tokenizer *tokenizer, int64_t max_length,
                        int64_t pad_token_id, char *err, size_t errlen) {   // def classify_review(text, model, tokenizer, max_length, pad_token_id=50256):
    nn_eval(&model->module);                                                       //     model.eval()
    ac_mark mk = ac_arena_mark();
    Tensor *ids = tokenizer_encode(tokenizer, text, strlen(text), TOKENIZER_ALLOW_SPECIAL, err, errlen); // ids = tokenizer.encode(text)
    if (!ids) {
        ac_arena_release(mk);
        return -1;
    }
    int64_t supported = model->pos_emb->weight->shape[0];                         //     supported = model.pos_emb.weight.shape[0]
    int64_t keep = ids->shape[0];                                                  //     ids = ids[:min(max_length, supported)]
    if (keep > max_length) keep = max_length;
    if (keep > supported) keep = supported;
    Tensor *in = torch_full_dtype(SHAPE(1, max_length), (double)pad_token_id, AC_INT64); // ids += [pad_token_id] * (max_length - len(ids))
    memcpy(in->data, ids->data, sizeof(int64_t) * (size_t)keep);
    bool prev = torch_no_grad_enter();                                             //     with torch.no_grad():
    Tensor *logits = gpt_last_token_logits(model, in);                             //         logits = model(...)[:, -1, :]
    torch_no_grad_exit(prev);
    int label = (int)((const int64_t *)torch_argmax(logits, -1, false)->data)[0];  //     torch.argmax(logits, dim=-1).item()
    ac_arena_release(mk);
    return label;                                                                  //     return "spam" if ... == 1 else "not spam"
}
