/* Appendix E's LoRA: a low-rank update (alpha / rank) * (x @ A @ B) beside a frozen Linear,
 * put in place of every Linear of a model, as ../shared/pytorch/finetune.py (the book's code) does. */
#include <math.h>
#include <string.h>

#include "nn.h"

/* torch.nn.init.kaiming_uniform_(t, a): mode fan_in, leaky_relu's gain sqrt(2 / (1 + a^2));
 * fan_in is size(1) times the receptive field (a 2-D (in_dim, rank) A: its rank). */
Tensor *nn_init_kaiming_uniform_(Tensor *t, double a) {
    ac_check_defined(t, "kaiming_uniform_");
    if (t->ndim < 2) ac_error("kaiming_uniform_: Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
    double fan_in = (double)t->shape[1];
    for (int d = 2; d < t->ndim; d++) fan_in *= (double)t->shape[d];
    double gain = sqrt(2.0 / (1 + a * a)), std = fan_in > 0 ? gain / sqrt(fan_in) : 0.0;
    double bound = sqrt(3.0) * std;
    return torch_uniform_(t, -bound, bound);
}

/* ---- LoRALayer --------------------------------------------------------------------------------- */

static Tensor *lora_fwd(nn_Module *m, Tensor *x) { return nn_LoRALayer_forward((nn_LoRALayer *)m, x); }

nn_LoRALayer *nn_LoRALayer_new(int64_t in_dim, int64_t out_dim, int64_t rank, double alpha) { // def __init__(self, in_dim, out_dim, rank, alpha):
    if (rank < 1) ac_raise(AC_VALUE_ERROR, "LoRALayer: rank must be >= 1, got %lld", (long long)rank);
    if (in_dim < 1 || out_dim < 1)
        ac_raise(AC_VALUE_ERROR, "LoRALayer: in_dim and out_dim must be >= 1, got %lld and %lld", (long long)in_dim,
                 (long long)out_dim);
    nn_LoRALayer *l = nn_module_new(sizeof *l, "LoRALayer", lora_fwd);                       //     super().__init__()
    ac_mark mk = ac_arena_mark();
    Tensor *A = torch_empty(SHAPE(in_dim, rank), AC_FLOAT32);                                //     self.A = nn.Parameter(torch.empty(in_dim, rank))
    nn_init_kaiming_uniform_(A, sqrt(5.0));                                                  //     torch.nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
    l->A = nn_register_parameter(&l->module, "A", A);
    l->B = nn_register_parameter(&l->module, "B", torch_zeros(SHAPE(rank, out_dim)));        //     self.B = nn.Parameter(torch.zeros(rank, out_dim))
    ac_arena_release(mk);
    l->alpha = alpha;                                                                        //     self.alpha = alpha
    l->rank = rank;                                                                          //     self.rank = rank
    return l;
}

Tensor *nn_LoRALayer_forward(nn_LoRALayer *self, Tensor *x) {                                // def forward(self, x):
    Tensor *xAB = torch_matmul(torch_matmul(x, self->A), self->B);
    return torch_mul_scalar(xAB, self->alpha / (double)self->rank);                         //     return (self.alpha / self.rank) * (x @ self.A @ self.B)
}

/* ---- LinearWithLoRA ---------------------------------------------------------------------------- */

static Tensor *lwl_fwd(nn_Module *m, Tensor *x) { return nn_LinearWithLoRA_forward((nn_LinearWithLoRA *)m, x); }

nn_LinearWithLoRA *nn_LinearWithLoRA_new(nn_Linear *linear, int64_t rank, double alpha) {   // def __init__(self, linear, rank, alpha):
    if (!linear || linear->module.magic != NN_MODULE_MAGIC || strcmp(linear->module.type, "Linear") != 0)
        ac_raise(AC_TYPE_ERROR, "LinearWithLoRA: expected an nn.Linear to wrap");
    nn_LoRALayer *lora = nn_LoRALayer_new(linear->in_features, linear->out_features, rank, alpha); // (first: a refusal leaves nothing made, the Linear where it was)
    nn_LinearWithLoRA *w = nn_module_new(sizeof *w, "LinearWithLoRA", lwl_fwd);
    w->linear = (nn_Linear *)nn_register_module(&w->module, "linear", &linear->module);     //     self.linear = linear
    w->lora = (nn_LoRALayer *)nn_register_module(&w->module, "lora", &lora->module);        //     self.lora = LoRALayer(linear.in_features, linear.out_features, rank, alpha)
    return w;
}

Tensor *nn_LinearWithLoRA_forward(nn_LinearWithLoRA *self, Tensor *x) {                     // def forward(self, x):
    /* (C: the Linear first, in a statement of its own: C leaves the order of a call's arguments open,
     * and gcc ran the LoRA first, which numbered its nodes below the Linear's; backward then sent
     * x's gradient terms linear-first, so q, k and v summed x's six terms in another order than
     * PyTorch 1.13 and a LoRA run of 2+ layers drifted by ulps from step 2 on) */
    Tensor *linear_x = nn_Linear_forward(self->linear, x);
    return torch_add(linear_x, nn_LoRALayer_forward(self->lora, x));                        //     return self.linear(x) + self.lora(x)
}

/* Depth first, in registration order, so that each A draws where PyTorch's does. */
void nn_replace_linear_with_lora(nn_Module *model, int64_t rank, double alpha) {            // def replace_linear_with_lora(model, rank, alpha):
    if (rank < 1) ac_raise(AC_VALUE_ERROR, "replace_linear_with_lora: rank must be >= 1, got %lld", (long long)rank);
    for (int i = 0; i < model->n_children; i++) {                                            //     for name, module in model.named_children():
        nn_Module *module = model->children[i].m;
        if (strcmp(module->type, "Linear") == 0)                                             //         if isinstance(module, torch.nn.Linear):
            nn_setattr(model, model->children[i].name,                                       //             setattr(model, name, LinearWithLoRA(module, rank, alpha))
                       &nn_LinearWithLoRA_new((nn_Linear *)module, rank, alpha)->module);
        else
            nn_replace_linear_with_lora(module, rank, alpha);                                //         else: replace_linear_with_lora(module, rank, alpha)
    }
}
