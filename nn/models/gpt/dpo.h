/* The book's DPO notebook's loss (ch07/04_preference-tuning-with-dpo, as tests/tools/dpo.py runs it
 * on PyTorch 1.13): Direct Preference Optimization of a GPTModel against a frozen reference.
 *
 *     Python (the notebook)                              C
 *     compute_logprobs(logits, labels, selection_mask)   gpt_compute_logprobs(logits, labels, mask) (mask NULL: None)
 *     compute_dpo_loss(mc, mr, rc, rr, beta)             gpt_DPOLoss l = gpt_compute_dpo_loss(mc, mr, rc, rr, beta);
 *         -> loss, chosen_rewards, rejected_rewards      l.loss, l.chosen_rewards, l.rejected_rewards
 *     compute_dpo_loss_batch(batch, policy_model,        gpt_compute_dpo_loss_batch(&batch, policy, reference, beta)
 *                            reference_model, beta)
 *     compute_dpo_loss_loader(loader, policy_model,      gpt_DPOTotals t = gpt_compute_dpo_loss_loader(&loader,
 *         reference_model, beta, num_batches)                    policy, reference, beta, num_batches); (-1: None)
 *     evaluate_dpo_loss_loader(policy_model,             gpt_DPOEval r = gpt_evaluate_dpo_loss_loader(policy,
 *         reference_model, train_loader, val_loader,             reference, &train_loader, &val_loader, beta, eval_iter);
 *         beta, eval_iter) -> res["train_loss"], ...     r.train_loss, r.train_chosen_reward, ...
 *     reference_model = GPTModel(cfg);                   nn_GPTModel *reference = gpt_reference_model(policy);
 *     reference_model.load_state_dict(...); .eval()      (nn_free(&reference->module))
 *
 * The reference model is a frozen copy: its parameters require no grad (so they never get a
 * gradient buffer, and AdamW never sees them), it is in eval mode, and compute_dpo_loss_batch runs
 * it under no_grad first, inside an arena mark of its own: its logits and log_softmax are gone
 * before the policy's forward starts, so it costs a forward and its weights, nothing more.
 * Tensors live in the arena; the loader functions release what each batch made. */
#ifndef ATTENTION_DPO_H
#define ATTENTION_DPO_H

#include "gpt.h"
#include "preference.h"

#ifdef __cplusplus
extern "C" {
#endif

/* logits (b, t, v) float, labels (b, t) int64, selection_mask (b, t) bool or NULL -> (b,): the mean
 * log-probability of labels[:, 1:] under logits[:, :-1] over the tokens the mask keeps */
Tensor *gpt_compute_logprobs(Tensor *logits, Tensor *labels, Tensor *selection_mask);

typedef struct { Tensor *loss, *chosen_rewards, *rejected_rewards; } gpt_DPOLoss; /* 0-d each; the rewards detached */
gpt_DPOLoss gpt_compute_dpo_loss(Tensor *model_chosen_logprobs, Tensor *model_rejected_logprobs,
                                 Tensor *reference_chosen_logprobs, Tensor *reference_rejected_logprobs, double beta);
gpt_DPOLoss gpt_compute_dpo_loss_batch(const PreferenceBatch *batch, nn_GPTModel *policy_model,
                                       nn_GPTModel *reference_model, double beta);

typedef struct { double loss, chosen_rewards, rejected_rewards; } gpt_DPOTotals; /* the means over the batches */
gpt_DPOTotals gpt_compute_dpo_loss_loader(PreferenceDataLoader *data_loader, nn_GPTModel *policy_model,
                                          nn_GPTModel *reference_model, double beta, int64_t num_batches);

typedef struct {
    double train_loss, train_chosen_reward, train_rejected_reward, val_loss, val_chosen_reward, val_rejected_reward;
} gpt_DPOEval;
gpt_DPOEval gpt_evaluate_dpo_loss_loader(nn_GPTModel *policy_model, nn_GPTModel *reference_model,
                                         PreferenceDataLoader *train_loader, PreferenceDataLoader *val_loader, double beta,
                                         int64_t eval_iter);

/* A frozen copy of model (its config, its weights; no grad; eval mode). The default generator's
 * state is left as it was. */
nn_GPTModel *gpt_reference_model(nn_GPTModel *model);

#ifdef __cplusplus
}
#endif

#endif
