/* torch.nn.utils.clip_grad_norm_ (nn.h), in PyTorch 1.13's order: a norm per
 * gradient, the norm of their stack, max_norm / (total + 1e-6) clamped to 1,
 * and every gradient multiplied by it. The float32 2-norm is PyTorch's CPU
 * kernel's (ac_norm2_f32). */
#include <math.h>
#include <string.h>

#include "extend.h"
#include "nn.h"

static float norm_inf(const float *x, int64_t n) { /* g.abs().max(): nan wins, as torch.max */
    float m = n ? fabsf(x[0]) : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) return a;
        if (a > m) m = a;
    }
    return m;
}

typedef struct { Tensor **grads; float *norms, coef; bool inf; } Clip;

static void norms_task(void *ctx, int64_t begin, int64_t end, int chunk) {
    Clip *c = ctx;
    for (int64_t k = begin; k < end; k++) {
        const float *g = ac_data_float(c->grads[k]);
        int64_t n = torch_numel(c->grads[k]);
        c->norms[k] = c->inf ? norm_inf(g, n) : ac_norm2_f32(g, n);
    }
}

static void scale_task(void *ctx, int64_t begin, int64_t end, int chunk) {
    Clip *c = ctx;
    for (int64_t k = begin; k < end; k++) {
        float *g = ac_data_float(c->grads[k]);
        for (int64_t i = 0, n = torch_numel(c->grads[k]); i < n; i++) g[i] *= c->coef; /* g.detach().mul_(clip_coef_clamped) */
        ac_bump_version(c->grads[k]);
    }
}

Tensor *nn_clip_grad_norm_(nn_TensorList parameters, double max_norm, double norm_type) {
    bool inf = isinf(norm_type) && norm_type > 0;
    if (!inf && norm_type != 2.0)
        ac_raise(AC_VALUE_ERROR, "clip_grad_norm_: norm_type %g is not supported here (2.0 or inf)", norm_type);
    ac_mark m = ac_arena_mark();
    Tensor **grads = ac_arena_alloc(sizeof(Tensor *) * (size_t)(parameters.n ? parameters.n : 1));
    int n = 0;
    for (int k = 0; k < parameters.n; k++) { /* grads = [p.grad for p in parameters if p.grad is not None] */
        Tensor *g = parameters.tensors[k]->grad;
        if (!g) continue;
        if (g->dtype != AC_FLOAT32 || !torch_is_contiguous(g))
            ac_raise(AC_RUNTIME_ERROR, "clip_grad_norm_: the gradient of %s is not a contiguous float32 tensor",
                     parameters.names ? parameters.names[k] : "a parameter");
        if (inf && torch_numel(g) == 0) /* g.abs().max() of an empty tensor, before anything is changed */
            ac_raise(AC_RUNTIME_ERROR, "max(): Expected reduction dim to be specified for input.numel() == 0. "
                     "Specify the reduction dim with the 'dim' argument.");
        grads[n++] = g;
    }
    if (n == 0) {                                                                /* return torch.tensor(0.) */
        ac_arena_release(m);
        return torch_scalar_tensor(0.0);
    }
    Clip c = {grads, ac_arena_alloc(sizeof(float) * (size_t)n), 0, inf};
    ac_parallel_for(n, 1, norms_task, &c);                                       /* [torch.norm(g.detach(), norm_type) ...] */
    float total;
    if (inf) {                                                                   /* norms[0] if len(norms) == 1 else */
        total = n == 1 ? c.norms[0] : norm_inf(c.norms, n);                      /* torch.max(torch.stack(norms)) */
    } else {
        total = ac_norm2_f32(c.norms, n);                                               /* torch.norm(torch.stack(norms), norm_type) */
    }
    float coef = (1.0f / (total + 1e-6f)) * (float)max_norm; /* max_norm / (total_norm + 1e-6): Tensor.__rdiv__ is reciprocal() * other */
    c.coef = coef > 1.0f ? 1.0f : coef;                                          /* torch.clamp(clip_coef, max=1.0): nan stays nan */
    ac_parallel_for(n, 1, scale_task, &c);
    ac_arena_release(m);
    return torch_scalar_tensor(total);                                           /* return total_norm */
}
