/* The book's DPO notebook's loss on a GPTModel (dpo.h) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dpo.h"

Tensor *gpt_compute_logprobs(Tensor *logits, Tensor *labels,                     // def compute_logprobs(logits, labels,
                             Tensor *selection_mask) {                           //     selection_mask=None):
    int64_t b = labels->shape[0], t = labels->shape[1];
    if (logits->ndim != 3 || logits->shape[0] != b || logits->shape[1] != t || t < 2)
        ac_raise(AC_VALUE_ERROR, "compute_logprobs: logits %s and labels %s: want (b, t, v) and (b, t), t >= 2",
                 ac_shape_str(logits), ac_shape_str(labels));
    Tensor *lab = torch_contiguous(torch_slice(labels, 1, 1, t));               // labels = labels[:, 1:].clone()
    logits = torch_slice(logits, 1, 0, t - 1);                                   // logits = logits[:, :-1, :]
    Tensor *log_probs = torch_log_softmax(logits, -1);                           // log_probs = F.log_softmax(logits, dim=-1)
    Tensor *selected_log_probs = torch_reshape(                                  // selected_log_probs = torch.gather(
        torch_gather(log_probs, -1, torch_unsqueeze(lab, -1)), SHAPE(b, t - 1)); //     input=log_probs, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
    if (selection_mask) {                                                        // if selection_mask is not None:
        Tensor *mask = torch_empty(SHAPE(b, t - 1), AC_FLOAT32);                 //     mask = selection_mask[:, 1:].clone()
        torch_copy_(mask, torch_slice(selection_mask, 1, 1, t));                 /* (C: as float: what * and / promote the bools to) */
        selected_log_probs = torch_mul(selected_log_probs, mask);                //     selected_log_probs = selected_log_probs * mask
        return torch_div(torch_sum_dim(selected_log_probs, 1, (int64_t[]){-1}, false), //     avg_log_prob = selected_log_probs.sum(-1) / mask.sum(-1)
                         torch_sum_dim(mask, 1, (int64_t[]){-1}, false));
    }
    return torch_mean_dim(selected_log_probs, 1, (int64_t[]){-1}, false);        // return selected_log_probs.mean(-1)
}

gpt_DPOLoss gpt_compute_dpo_loss(Tensor *model_chosen_logprobs, Tensor *model_rejected_logprobs, // def compute_dpo_loss(model_chosen_logprobs, model_rejected_logprobs,
                                 Tensor *reference_chosen_logprobs, Tensor *reference_rejected_logprobs, //     reference_chosen_logprobs, reference_rejected_logprobs,
                                 double beta) {                                                  //     beta=0.1):
    Tensor *model_logratios = torch_sub(model_chosen_logprobs, model_rejected_logprobs);         // model_logratios = model_chosen_logprobs - model_rejected_logprobs
    Tensor *reference_logratios = torch_sub(reference_chosen_logprobs, reference_rejected_logprobs); // reference_logratios = ...
    Tensor *logits = torch_sub(model_logratios, reference_logratios);                          // logits = model_logratios - reference_logratios
    Tensor *losses = torch_neg(torch_logsigmoid(torch_mul_scalar(logits, beta)));              // losses = -F.logsigmoid(beta * logits)
    Tensor *chosen_rewards = torch_detach(torch_sub(model_chosen_logprobs, reference_chosen_logprobs)); // chosen_rewards = (...).detach()
    Tensor *rejected_rewards = torch_detach(torch_sub(model_rejected_logprobs, reference_rejected_logprobs));
    return (gpt_DPOLoss){torch_mean(losses), torch_mean(chosen_rewards), torch_mean(rejected_rewards)}; // return losses.mean(), ...
}

/* compute_logprobs of one model on both halves of a batch */
static void logprobs(nn_GPTModel *m, const PreferenceBatch *batch, Tensor **chosen, Tensor **rejected) {
    *chosen = gpt_compute_logprobs(nn_GPTModel_forward(m, batch->chosen), batch->chosen, batch->chosen_mask);
    *rejected = gpt_compute_logprobs(nn_GPTModel_forward(m, batch->rejected), batch->rejected, batch->rejected_mask);
}

gpt_DPOLoss gpt_compute_dpo_loss_batch(const PreferenceBatch *batch, nn_GPTModel *policy_model, // def compute_dpo_loss_batch(batch, policy_model,
                                       nn_GPTModel *reference_model, double beta) {             //     reference_model, beta):
    /* (C: the reference first, in a mark of its own: its logits are freed before the policy's are made;
     * the two results, b floats each, are kept on the stack across the release) */
    int64_t b = batch->chosen->shape[0];
    float *ref = ac_malloc(sizeof(float) * (size_t)(2 * b));
    ac_mark mk = ac_arena_mark();
    bool prev = torch_no_grad_enter();                                           // with torch.no_grad():
    Tensor *rc, *rr;
    logprobs(reference_model, batch, &rc, &rr);                                  //     ref_chosen_log_probas = compute_logprobs(reference_model(batch["chosen"]), ...)
    torch_no_grad_exit(prev);
    memcpy(ref, ac_data_float(rc), sizeof(float) * (size_t)b);
    memcpy(ref + b, ac_data_float(rr), sizeof(float) * (size_t)b);
    ac_arena_release(mk);
    Tensor *ref_chosen_log_probas = torch_tensor(ref, SHAPE(b)), *ref_rejected_log_probas = torch_tensor(ref + b, SHAPE(b));
    free(ref);
    Tensor *policy_chosen_log_probas, *policy_rejected_log_probas;
    logprobs(policy_model, batch, &policy_chosen_log_probas, &policy_rejected_log_probas); // policy_chosen_log_probas = compute_logprobs(policy_model(batch["chosen"]), ...)
    return gpt_compute_dpo_loss(policy_chosen_log_probas, policy_rejected_log_probas,      // loss, chosen_rewards, rejected_rewards = compute_dpo_loss(...)
                                ref_chosen_log_probas, ref_rejected_log_probas, beta);
}

gpt_DPOTotals gpt_compute_dpo_loss_loader(PreferenceDataLoader *data_loader, nn_GPTModel *policy_model, // def compute_dpo_loss_loader(data_loader, policy_model,
                                          nn_GPTModel *reference_model, double beta, int64_t num_batches) { //     reference_model, beta, num_batches=None):
    gpt_DPOTotals total = {0.0, 0.0, 0.0};                                       // total_loss, total_chosen_rewards, total_rejected_rewards = 0., 0., 0.
    int64_t len = PreferenceDataLoader_len(data_loader);
    if (len == 0) return (gpt_DPOTotals){NAN, NAN, NAN};                         // if len(data_loader) == 0: return float("nan")
    num_batches = num_batches < 0 ? len : num_batches < len ? num_batches : len; // num_batches = min(num_batches, len(data_loader))
    PreferenceDataLoaderIter it = PreferenceDataLoader_iter(data_loader);        // for i, batch in enumerate(data_loader):
    PreferenceBatch batch;
    for (int64_t i = 0; i < num_batches; i++) {                                  //     if i < num_batches:
        ac_mark mk = ac_arena_mark();
        if (!PreferenceDataLoaderIter_next(&it, &batch)) break;
        gpt_DPOLoss l = gpt_compute_dpo_loss_batch(&batch, policy_model, reference_model, beta);
        total.loss += torch_item(l.loss);                                        //         total_loss += loss.item()
        total.chosen_rewards += torch_item(l.chosen_rewards);                    //         total_chosen_rewards += chosen_rewards.item()
        total.rejected_rewards += torch_item(l.rejected_rewards);                //         total_rejected_rewards += rejected_rewards.item()
        ac_arena_release(mk);
    }
    PreferenceDataLoaderIter_free(&it);
    total.loss /= (double)num_batches;                                           // total_loss /= num_batches
    total.chosen_rewards /= (double)num_batches;
    total.rejected_rewards /= (double)num_batches;
    return total;
}

gpt_DPOEval gpt_evaluate_dpo_loss_loader(nn_GPTModel *policy_model, nn_GPTModel *reference_model, // def evaluate_dpo_loss_loader(policy_model, reference_model,
                                         PreferenceDataLoader *train_loader, PreferenceDataLoader *val_loader, //     train_loader, val_loader,
                                         double beta, int64_t eval_iter) {                              //     beta, eval_iter):
    nn_eval(&policy_model->module);                                              // policy_model.eval()
    bool prev = torch_no_grad_enter();                                           // with torch.no_grad():
    gpt_DPOTotals tr = gpt_compute_dpo_loss_loader(train_loader, policy_model, reference_model, beta, eval_iter);
    gpt_DPOTotals va = gpt_compute_dpo_loss_loader(val_loader, policy_model, reference_model, beta, eval_iter);
    torch_no_grad_exit(prev);
    nn_train(&policy_model->module, true);                                       // policy_model.train()
    return (gpt_DPOEval){tr.loss, tr.chosen_rewards, tr.rejected_rewards, va.loss, va.chosen_rewards, va.rejected_rewards};
}

nn_GPTModel *gpt_reference_model(nn_GPTModel *model) {
    ac_mark mk = ac_arena_mark();
    Tensor *state = torch_get_rng_state();                                       /* (C: the constructor's draws undone) */
    nn_GPTModel *ref = nn_GPTModel_new(model->cfg);                              // reference_model = GPTModel(BASE_CONFIG)
    torch_set_rng_state(state);
    nn_TensorList src = nn_named_parameters(&model->module), dst = nn_named_parameters(&ref->module);
    if (src.n != dst.n) ac_raise(AC_RUNTIME_ERROR, "reference model: %d parameters, the model %d", dst.n, src.n);
    bool prev = torch_no_grad_enter();
    for (int i = 0; i < src.n; i++) torch_copy_(dst.tensors[i], src.tensors[i]); // reference_model.load_state_dict(...)
    torch_no_grad_exit(prev);
    ac_arena_release(mk);
    nn_requires_grad_(&ref->module, false);                                      /* (C: frozen: no gradient, no buffer) */
    nn_eval(&ref->module);                                                       // reference_model.eval()
    return ref;
}
