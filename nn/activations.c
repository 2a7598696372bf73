/* nn.ReLU, nn.Tanh, nn.Sigmoid, nn.SiLU, nn.Softmax(dim), nn.Flatten(start_dim, end_dim):
 * modules around one op each (tensor/ops/elementwise.c, softmax.c, view.c hold the ops, their
 * backwards beside them), so that they can stand in an nn_Sequential, with PyTorch's reprs. */
#include "nn.h"

static Tensor *relu_fwd(nn_Module *m, Tensor *x) { return torch_relu(x); }
static Tensor *tanh_fwd(nn_Module *m, Tensor *x) { return torch_tanh(x); }
static Tensor *sigmoid_fwd(nn_Module *m, Tensor *x) { return torch_sigmoid(x); }
static Tensor *silu_fwd(nn_Module *m, Tensor *x) { return torch_silu(x); }
static Tensor *softmax_fwd(nn_Module *m, Tensor *x) { return nn_Softmax_forward((nn_Softmax *)m, x); }
static Tensor *flatten_fwd(nn_Module *m, Tensor *x) { return nn_Flatten_forward((nn_Flatten *)m, x); }

nn_ReLU *nn_ReLU_new(void) { return nn_module_new(sizeof(nn_ReLU), "ReLU", relu_fwd); }
nn_Tanh *nn_Tanh_new(void) { return nn_module_new(sizeof(nn_Tanh), "Tanh", tanh_fwd); }
nn_Sigmoid *nn_Sigmoid_new(void) { return nn_module_new(sizeof(nn_Sigmoid), "Sigmoid", sigmoid_fwd); }
nn_SiLU *nn_SiLU_new(void) { return nn_module_new(sizeof(nn_SiLU), "SiLU", silu_fwd); }

Tensor *nn_ReLU_forward(nn_ReLU *self, Tensor *x) { return torch_relu(x); }
Tensor *nn_Tanh_forward(nn_Tanh *self, Tensor *x) { return torch_tanh(x); }
Tensor *nn_Sigmoid_forward(nn_Sigmoid *self, Tensor *x) { return torch_sigmoid(x); }
Tensor *nn_SiLU_forward(nn_SiLU *self, Tensor *x) { return torch_silu(x); }

/* def extra_repr(self): return 'dim={dim}'.format(dim=self.dim) */
static char *softmax_repr(nn_Module *m) { return nn_repr_printf("dim=%lld", (long long)((nn_Softmax *)m)->dim); }

nn_Softmax *nn_Softmax_new(int64_t dim) {
    nn_Softmax *s = nn_module_new(sizeof *s, "Softmax", softmax_fwd);
    s->dim = dim;
    s->module.extra_repr = softmax_repr;
    return s;
}

Tensor *nn_Softmax_forward(nn_Softmax *self, Tensor *x) { return torch_softmax(x, self->dim); }

/* def extra_repr(self): return 'start_dim={}, end_dim={}'.format(self.start_dim, self.end_dim) */
static char *flatten_repr(nn_Module *m) {
    nn_Flatten *f = (nn_Flatten *)m;
    return nn_repr_printf("start_dim=%lld, end_dim=%lld", (long long)f->start_dim, (long long)f->end_dim);
}

nn_Flatten *nn_Flatten_new(int64_t start_dim, int64_t end_dim) {
    nn_Flatten *f = nn_module_new(sizeof *f, "Flatten", flatten_fwd);
    f->start_dim = start_dim;
    f->end_dim = end_dim;
    f->module.extra_repr = flatten_repr;
    return f;
}

Tensor *nn_Flatten_forward(nn_Flatten *self, Tensor *x) { return torch_flatten(x, self->start_dim, self->end_dim); }
