/* optim: SGD, Adam and AdamW with PyTorch 1.13's defaults and its exact update
 * formulas (the single-tensor code paths of torch.optim, operation for
 * operation, so the float32 roundings match).
 *
 *     Python                                        C
 *     opt = torch.optim.Adam(model.parameters(),    optim_Optimizer *opt = optim_Adam(nn_named_parameters(m),
 *                            lr=1e-3)                   1e-3, 0.9, 0.999, 1e-8, 0.0, false);
 *     opt.zero_grad(); loss.backward(); opt.step()   optim_zero_grad(opt); torch_backward(loss, NULL); optim_step(opt);
 *     for g in opt.param_groups: g["lr"] = lr        opt->lr = lr;   (read at each step; the state is kept)
 *
 * The optimizer keeps its own (malloc'd) list of the parameters and its state;
 * optim_free releases them, not the parameters. */
#ifndef ATTENTION_OPTIM_H
#define ATTENTION_OPTIM_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW } optim_kind;

typedef struct {
    optim_kind kind;
    int n_params;
    Tensor **params;
    double lr, weight_decay;
    double momentum, dampening; bool nesterov;  /* SGD */
    double beta1, beta2, eps; bool amsgrad;     /* Adam, AdamW */
    /* state, per parameter (NULL until the first step that updates it) */
    double *step;                /* Adam's state['step'] */
    Tensor **exp_avg, **exp_avg_sq, **max_exp_avg_sq, **momentum_buffer;
} optim_Optimizer;

/* torch.optim.SGD(params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False) */
optim_Optimizer *optim_SGD(nn_TensorList params, double lr, double momentum, double dampening,
                           double weight_decay, bool nesterov);
/* torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False) */
optim_Optimizer *optim_Adam(nn_TensorList params, double lr, double beta1, double beta2, double eps,
                            double weight_decay, bool amsgrad);
/* torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False) */
optim_Optimizer *optim_AdamW(nn_TensorList params, double lr, double beta1, double beta2, double eps,
                             double weight_decay, bool amsgrad);
void optim_step(optim_Optimizer *opt);
void optim_zero_grad(optim_Optimizer *opt);  /* 1.13 default: set_to_none=False */
void optim_free(optim_Optimizer *opt);

/* The state as named tensors (the live state tensors, and "state.3.step" as a
 * 0-d tensor in the arena), and its restore: every name, shape and dtype is
 * checked first; on a mismatch it returns false with a message and changes
 * nothing. apply=false only checks. */
nn_TensorList optim_state_dict(optim_Optimizer *opt);
bool optim_load_state_dict(optim_Optimizer *opt, nn_TensorList state, bool apply, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
