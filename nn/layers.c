/* Linear, Embedding, Dropout, LayerNorm, GELU: PyTorch's layers with PyTorch's
 * initialisers, drawing from the generator in the same order, and their extra_repr()s. */
#include <math.h>
#include <stdlib.h>

#include "nn.h"

/* ---- Linear ----------------------------------------------------------------------------- */

static Tensor *linear_fwd(nn_Module *m, Tensor *x) { return nn_Linear_forward((nn_Linear *)m, x); }

/* 'in_features={}, out_features={}, bias={}'.format(self.in_features, self.out_features, self.bias is not None) */
static char *linear_repr(nn_Module *m) {
    nn_Linear *l = (nn_Linear *)m;
    return nn_repr_printf("in_features=%lld, out_features=%lld, bias=%s", (long long)l->in_features,
                          (long long)l->out_features, l->bias ? "True" : "False");
}

nn_Linear *nn_Linear_new(int64_t in_features, int64_t out_features, bool bias) {
    if (in_features < 0 || out_features < 0) /* PyTorch's error: the weight's shape (out, in) */
        ac_error("Linear: Trying to create tensor with negative dimension %lld: [%lld, %lld]",
                 (long long)(out_features < 0 ? out_features : in_features), (long long)out_features,
                 (long long)in_features);
    nn_Linear *l = nn_module_new(sizeof *l, "Linear", linear_fwd);
    l->in_features = in_features;
    l->out_features = out_features;
    l->module.extra_repr = linear_repr;
    if (nn_skip_init()) { /* weights a loader writes next: no draws, no pages touched */
        l->weight = nn_register_parameter_empty(&l->module, "weight", SHAPE(out_features, in_features));
        if (bias) { /* small: zeros of its own (no draw), for the loader to write */
            ac_mark mk = ac_arena_mark();
            l->bias = nn_register_parameter(&l->module, "bias", torch_zeros(SHAPE(out_features)));
            ac_arena_release(mk);
        }
        return l;
    }
    ac_mark mk = ac_arena_mark();
    /* reset_parameters(): kaiming_uniform_(weight, a=sqrt(5)), then the bias */
    double a = sqrt(5.0), gain = sqrt(2.0 / (1 + a * a)), fan_in = (double)in_features;
    double wbound = fan_in > 0 ? sqrt(3.0) * (gain / sqrt(fan_in)) : 0.0;
    Tensor *w = torch_uniform_(torch_empty(SHAPE(out_features, in_features), AC_FLOAT32), -wbound, wbound);
    l->weight = nn_register_parameter(&l->module, "weight", w);
    if (bias) {
        double bbound = fan_in > 0 ? 1.0 / sqrt(fan_in) : 0.0;
        Tensor *b = torch_uniform_(torch_empty(SHAPE(out_features), AC_FLOAT32), -bbound, bbound);
        l->bias = nn_register_parameter(&l->module, "bias", b);
    }
    ac_arena_release(mk);
    return l;
}

Tensor *nn_Linear_forward(nn_Linear *self, Tensor *x) { return torch_linear(x, self->weight, self->bias); }

/* ---- Embedding -------------------------------------------------------------------------- */

static Tensor *embedding_fwd(nn_Module *m, Tensor *x) { return nn_Embedding_forward((nn_Embedding *)m, x); }

/* '{num_embeddings}, {embedding_dim}', then ', padding_idx={padding_idx}' when there is one */
static char *embedding_repr(nn_Module *m) {
    nn_Embedding *e = (nn_Embedding *)m;
    if (e->padding_idx < 0) return nn_repr_printf("%lld, %lld", (long long)e->num_embeddings, (long long)e->embedding_dim);
    return nn_repr_printf("%lld, %lld, padding_idx=%lld", (long long)e->num_embeddings, (long long)e->embedding_dim,
                          (long long)e->padding_idx);
}

nn_Embedding *nn_Embedding_new_padded(int64_t num, int64_t dim, int64_t padding_idx) {
    if (num < 0 || dim < 0) ac_error("Embedding: sizes must be >= 0 (got %lld, %lld)", (long long)num, (long long)dim);
    if (padding_idx != INT64_MIN) {
        if (padding_idx < -num || padding_idx >= num)
            ac_error("Embedding: Padding_idx must be within num_embeddings (got %lld for %lld embeddings)",
                     (long long)padding_idx, (long long)num);
        if (padding_idx < 0) padding_idx += num;
    } else {
        padding_idx = -1;
    }
    nn_Embedding *e = nn_module_new(sizeof *e, "Embedding", embedding_fwd);
    e->num_embeddings = num;
    e->embedding_dim = dim;
    e->padding_idx = padding_idx;
    e->module.extra_repr = embedding_repr;
    if (nn_skip_init()) {
        e->weight = nn_register_parameter_empty(&e->module, "weight", SHAPE(num, dim));
        return e;
    }
    ac_mark mk = ac_arena_mark();
    Tensor *w = torch_normal_(torch_empty(SHAPE(num, dim), AC_FLOAT32), 0.0, 1.0);
    if (padding_idx >= 0) /* drawn first, then zeroed, as reset_parameters does */
        for (int64_t j = 0; j < dim; j++) ((float *)w->data)[padding_idx * dim + j] = 0.0f;
    e->weight = nn_register_parameter(&e->module, "weight", w);
    ac_arena_release(mk);
    return e;
}

nn_Embedding *nn_Embedding_new(int64_t num, int64_t dim) { return nn_Embedding_new_padded(num, dim, INT64_MIN); }

Tensor *nn_Embedding_forward(nn_Embedding *self, Tensor *indices) {
    return torch_embedding(self->weight, indices, self->padding_idx);
}

/* ---- Dropout, LayerNorm, GELU --------------------------------------------------------- */

static Tensor *dropout_fwd(nn_Module *m, Tensor *x) { return nn_Dropout_forward((nn_Dropout *)m, x); }

/* 'p={}, inplace={}'.format(self.p, self.inplace) */
static char *dropout_repr(nn_Module *m) {
    char buf[32];
    return nn_repr_printf("p=%s, inplace=False", ac_pyfloat(((nn_Dropout *)m)->p, buf));
}

nn_Dropout *nn_Dropout_new(double p) {
    if (!(p >= 0.0 && p <= 1.0)) ac_raise(AC_VALUE_ERROR, "Dropout: dropout probability has to be between 0 and 1, but got %g", p);
    nn_Dropout *d = nn_module_new(sizeof *d, "Dropout", dropout_fwd);
    d->p = p;
    d->module.extra_repr = dropout_repr;
    return d;
}

Tensor *nn_Dropout_forward(nn_Dropout *self, Tensor *x) { return torch_dropout(x, self->p, self->module.training); }

static Tensor *layernorm_fwd(nn_Module *m, Tensor *x) { return nn_LayerNorm_forward((nn_LayerNorm *)m, x); }

/* '{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}' */
static char *layernorm_repr(nn_Module *m) {
    nn_LayerNorm *l = (nn_LayerNorm *)m;
    char buf[32];
    return nn_repr_printf("(%lld,), eps=%s, elementwise_affine=True", (long long)l->normalized_shape, ac_pyfloat(l->eps, buf));
}

nn_LayerNorm *nn_LayerNorm_new(int64_t normalized_shape) {
    nn_LayerNorm *l = nn_module_new(sizeof *l, "LayerNorm", layernorm_fwd);
    l->normalized_shape = normalized_shape;
    l->eps = 1e-5;
    l->module.extra_repr = layernorm_repr;
    ac_mark mk = ac_arena_mark();
    l->weight = nn_register_parameter(&l->module, "weight", torch_ones(SHAPE(normalized_shape)));
    l->bias = nn_register_parameter(&l->module, "bias", torch_zeros(SHAPE(normalized_shape)));
    ac_arena_release(mk);
    return l;
}

Tensor *nn_LayerNorm_forward(nn_LayerNorm *self, Tensor *x) {
    return torch_layer_norm(x, SHAPE(self->normalized_shape), self->weight, self->bias, self->eps);
}

static Tensor *gelu_fwd(nn_Module *m, Tensor *x) { return torch_gelu(x); }
static char *gelu_repr(nn_Module *m) { return nn_repr_printf("approximate='none'"); }

nn_GELU *nn_GELU_new(void) {
    nn_GELU *g = nn_module_new(sizeof *g, "GELU", gelu_fwd);
    g->module.extra_repr = gelu_repr;
    return g;
}

Tensor *nn_GELU_forward(nn_GELU *self, Tensor *x) { return torch_gelu(x); }
