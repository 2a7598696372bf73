/* SGD, Adam, AdamW. Each update line below is the torch.optim (1.13) line it
 * mirrors; scalars are cast to float32 where PyTorch casts them, and every
 * elementwise kernel rounds in the same order (a + alpha*b, self + v*t1*t2,
 * self + v*t1/t2), so parameters match torch bit for bit or nearly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h" /* ac_parallel_for */
#include "optim.h"

/* Everything is checked before anything is allocated, and the optimizer and
 * its arrays are one allocation: an error leaves nothing behind. */
static optim_Optimizer *make(optim_kind kind, nn_TensorList params, double lr, double weight_decay) {
    const char *op = kind == OPTIM_SGD ? "SGD" : kind == OPTIM_ADAM ? "Adam" : "AdamW";
    char b[32];
    if (!(lr >= 0.0)) ac_raise(AC_VALUE_ERROR, "%s: Invalid learning rate: %s", op, ac_pyfloat(lr, b));
    if (!(weight_decay >= 0.0)) ac_raise(AC_VALUE_ERROR, "%s: Invalid weight_decay value: %s", op, ac_pyfloat(weight_decay, b));
    if (params.n <= 0) ac_raise(AC_VALUE_ERROR, "%s: optimizer got an empty parameter list", op);
    for (int i = 0; i < params.n; i++) {
        Tensor *p = params.tensors[i];
        const char *name = params.names && params.names[i] ? params.names[i] : "?";
        if (!p) ac_raise(AC_TYPE_ERROR, "%s: parameter %d (%s) is NULL", op, i, name);
        if (p->grad_fn) ac_raise(AC_VALUE_ERROR, "%s: can't optimize a non-leaf Tensor (parameter %d, %s)", op, i, name);
        /* one that does not require grad is kept, as PyTorch keeps it: it never gets a gradient, and
         * step skips it (the book passes model.parameters() with most of them frozen) */
    }
    size_t n = (size_t)params.n;
    size_t head = (sizeof(optim_Optimizer) + sizeof(double) - 1) / sizeof(double) * sizeof(double);
    char *mem = ac_calloc(1, head + ac_size_mul(n, sizeof(double) + 5 * sizeof(Tensor *)));
    optim_Optimizer *o = (optim_Optimizer *)mem;
    o->step = (double *)(mem + head);
    Tensor **slots = (Tensor **)(o->step + n);
    o->params = slots, o->exp_avg = slots + n, o->exp_avg_sq = slots + 2 * n;
    o->max_exp_avg_sq = slots + 3 * n, o->momentum_buffer = slots + 4 * n;
    o->kind = kind;
    o->n_params = params.n;
    for (int i = 0; i < params.n; i++) o->params[i] = params.tensors[i];
    o->lr = lr;
    o->weight_decay = weight_decay;
    return o;
}

optim_Optimizer *optim_SGD(nn_TensorList params, double lr, double momentum, double dampening, double weight_decay,
                           bool nesterov) {
    char b[32];
    if (!(momentum >= 0.0)) ac_raise(AC_VALUE_ERROR, "SGD: Invalid momentum value: %s", ac_pyfloat(momentum, b));
    if (nesterov && (momentum <= 0 || dampening != 0))
        ac_raise(AC_VALUE_ERROR, "SGD: Nesterov momentum requires a momentum and zero dampening");
    optim_Optimizer *o = make(OPTIM_SGD, params, lr, weight_decay);
    o->momentum = momentum;
    o->dampening = dampening;
    o->nesterov = nesterov;
    return o;
}

static optim_Optimizer *adam(optim_kind kind, nn_TensorList params, double lr, double beta1, double beta2,
                             double eps, double weight_decay, bool amsgrad) {
    const char *name = kind == OPTIM_ADAM ? "Adam" : "AdamW";
    char b[32];
    if (!(eps >= 0.0)) ac_raise(AC_VALUE_ERROR, "%s: Invalid epsilon value: %s", name, ac_pyfloat(eps, b));
    if (!(beta1 >= 0.0 && beta1 < 1.0)) ac_raise(AC_VALUE_ERROR, "%s: Invalid beta parameter at index 0: %s", name, ac_pyfloat(beta1, b));
    if (!(beta2 >= 0.0 && beta2 < 1.0)) ac_raise(AC_VALUE_ERROR, "%s: Invalid beta parameter at index 1: %s", name, ac_pyfloat(beta2, b));
    optim_Optimizer *o = make(kind, params, lr, weight_decay);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->amsgrad = amsgrad;
    return o;
}

optim_Optimizer *optim_Adam(nn_TensorList params, double lr, double beta1, double beta2, double eps,
                            double weight_decay, bool amsgrad) {
    return adam(OPTIM_ADAM, params, lr, beta1, beta2, eps, weight_decay, amsgrad);
}

optim_Optimizer *optim_AdamW(nn_TensorList params, double lr, double beta1, double beta2, double eps,
                             double weight_decay, bool amsgrad) {
    return adam(OPTIM_ADAMW, params, lr, beta1, beta2, eps, weight_decay, amsgrad);
}

static Tensor *state_zeros(const Tensor *p) { return ac_persist_zeros(AC_FLOAT32, p->ndim, p->shape); }

static void sgd_update(optim_Optimizer *o, int i, float *p, const float *g, int64_t n) {
    float wd = (float)o->weight_decay, mom = (float)o->momentum, damp = (float)(1.0 - o->dampening);
    float neg_lr = (float)(-o->lr);
    ac_mark m = ac_arena_mark();
    float *d_p = ac_arena_alloc(sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k++)                          /* d_p = d_p.add(param, alpha=weight_decay) */
        d_p[k] = o->weight_decay != 0 ? p[k] * wd + g[k] : g[k];
    if (o->momentum != 0) {
        float *buf;
        if (!o->momentum_buffer[i]) {                        /* buf = torch.clone(d_p).detach() */
            o->momentum_buffer[i] = state_zeros(o->params[i]);
            buf = o->momentum_buffer[i]->data;
            memcpy(buf, d_p, sizeof(float) * (size_t)n);
        } else {                                             /* buf.mul_(momentum).add_(d_p, alpha=1 - dampening) */
            buf = o->momentum_buffer[i]->data;
            for (int64_t k = 0; k < n; k++) buf[k] = d_p[k] * damp + buf[k] * mom;
        }
        for (int64_t k = 0; k < n; k++)                      /* nesterov: d_p = d_p.add(buf, alpha=momentum) */
            d_p[k] = o->nesterov ? buf[k] * mom + d_p[k] : buf[k];
    }
    for (int64_t k = 0; k < n; k++) p[k] = d_p[k] * neg_lr + p[k]; /* param.add_(d_p, alpha=-lr) */
    ac_arena_release(m);
}

typedef struct {
    float *p;
    const float *g;
    float *m, *v, *vmax;
    float wd, b1, b2, a1, a2, neg_step_size, bc2_sqrt, eps;
    float decay; /* AdamW's param.mul_(1 - lr * weight_decay); 1 for Adam (exact: p * 1 is p) */
    bool decay_grad;
} AdamJob;

static void adam_task(void *ctx, int64_t k0, int64_t k1, int chunk) {
    const AdamJob *j = ctx;
    float *restrict p = j->p, *restrict m = j->m, *restrict v = j->v, *restrict vmax = j->vmax;
    const float *restrict g = j->g;
    if (!vmax && !j->decay_grad) { /* the usual case, in a loop the compiler vectorizes (sqrt and / are exact in vectors too) */
        const float a1 = j->a1, b1 = j->b1, a2 = j->a2, b2 = j->b2, bc2 = j->bc2_sqrt, eps = j->eps, step = j->neg_step_size;
        const float f = j->decay;
        for (int64_t k = k0; k < k1; k++) {
            float gk = g[k], pk = p[k] * f; /* AdamW's decay first, in the same pass */
            m[k] = gk * a1 + m[k] * b1;
            v[k] = v[k] * b2 + a2 * gk * gk;
            p[k] = pk + step * m[k] / (sqrtf(v[k]) / bc2 + eps);
        }
        return;
    }
    for (int64_t k = k0; k < k1; k++) {
        p[k] = p[k] * j->decay;
        float gk = j->decay_grad ? p[k] * j->wd + g[k] : g[k]; /* grad = grad.add(param, alpha=weight_decay) */
        m[k] = gk * j->a1 + m[k] * j->b1;                    /* exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1) */
        v[k] = v[k] * j->b2 + j->a2 * gk * gk;               /* exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2) */
        float vk = v[k];
        if (vmax) vk = vmax[k] = vmax[k] > vk ? vmax[k] : vk; /* torch.maximum(max_exp_avg_sqs[i], exp_avg_sq) */
        float denom = sqrtf(vk) / j->bc2_sqrt + j->eps;      /* denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps) */
        p[k] = p[k] + j->neg_step_size * m[k] / denom;       /* param.addcdiv_(exp_avg, denom, value=-step_size) */
    }
}

static void adam_update(optim_Optimizer *o, int i, float *p, const float *g, int64_t n) {
    if (!o->exp_avg[i]) {
        o->exp_avg[i] = state_zeros(o->params[i]);
        o->exp_avg_sq[i] = state_zeros(o->params[i]);
        if (o->amsgrad) o->max_exp_avg_sq[i] = state_zeros(o->params[i]);
    }
    float *m = o->exp_avg[i]->data, *v = o->exp_avg_sq[i]->data;
    float *vmax = o->amsgrad ? o->max_exp_avg_sq[i]->data : NULL;
    o->step[i] = (double)((float)o->step[i] + 1.0f);          /* step_t += 1 (a float32 tensor) */
    double step = o->step[i];
    float wd = (float)o->weight_decay, b1 = (float)o->beta1, b2 = (float)o->beta2;
    float a1 = (float)(1.0 - o->beta1), a2 = (float)(1.0 - o->beta2);
    double bias_correction1 = 1.0 - pow(o->beta1, step);    /* bias_correction1 = 1 - beta1 ** step */
    double bias_correction2 = 1.0 - pow(o->beta2, step);    /* bias_correction2 = 1 - beta2 ** step */
    float neg_step_size = (float)-(o->lr / bias_correction1); /* step_size = lr / bias_correction1 */
    float bc2_sqrt = (float)sqrt(bias_correction2);         /* bias_correction2_sqrt = math.sqrt(...) */
    AdamJob j = {p, g, m, v, vmax, wd, b1, b2, a1, a2, neg_step_size, bc2_sqrt, (float)o->eps,
                 o->kind == OPTIM_ADAMW ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f, /* param.mul_(...), in adam_task */
                 o->kind == OPTIM_ADAM && o->weight_decay != 0};
    ac_parallel_for(n, 16384, adam_task, &j); /* elements are independent: split among threads */
}

void optim_step(optim_Optimizer *o) {
    bool prev = torch_no_grad_enter();
    for (int i = 0; i < o->n_params; i++) {
        Tensor *p = o->params[i];
        if (!p->grad) continue; /* as torch: parameters without a gradient are skipped */
        int64_t n = torch_numel(p);
        if (o->kind == OPTIM_SGD) sgd_update(o, i, ac_data_float(p), ac_data_float(p->grad), n);
        else adam_update(o, i, ac_data_float(p), ac_data_float(p->grad), n);
        ac_bump_version(p); /* p.add_(...) in PyTorch: a graph that saved p cannot be used again */
    }
    torch_no_grad_exit(prev);
}

void optim_zero_grad(optim_Optimizer *o) {
    for (int i = 0; i < o->n_params; i++) torch_zero_grad_(o->params[i]);
}

void optim_free(optim_Optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_params; i++) {
        ac_free(o->exp_avg[i]);
        ac_free(o->exp_avg_sq[i]);
        ac_free(o->max_exp_avg_sq[i]);
        ac_free(o->momentum_buffer[i]);
    }
    free(o); /* and its arrays, in the same block */
}

/* ---- state save / restore ------------------------------------------------------------------- */

static const char *const slot_names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"};

static Tensor **slot(optim_Optimizer *o, int s) {
    return s == 0 ? o->exp_avg : s == 1 ? o->exp_avg_sq : s == 2 ? o->max_exp_avg_sq : o->momentum_buffer;
}

nn_TensorList optim_state_dict(optim_Optimizer *o) {
    int cap = o->n_params * 5, n = 0;
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)(cap ? cap : 1));
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)(cap ? cap : 1));
    for (int i = 0; i < o->n_params; i++) {
        char buf[64];
        if (o->kind != OPTIM_SGD && o->exp_avg[i]) {
            snprintf(buf, sizeof buf, "state.%d.step", i);
            names[n] = strcpy(ac_arena_alloc(strlen(buf) + 1), buf);
            ts[n++] = torch_scalar_tensor(o->step[i]);
        }
        for (int s = 0; s < 4; s++) {
            Tensor *t = slot(o, s)[i];
            if (!t) continue;
            snprintf(buf, sizeof buf, "state.%d.%s", i, slot_names[s]);
            names[n] = strcpy(ac_arena_alloc(strlen(buf) + 1), buf);
            ts[n++] = t;
        }
    }
    return (nn_TensorList){n, names, ts};
}

/* "state.<i>.<what>" -> i and what; false for anything else. */
static bool parse_state_key(const char *name, int n_params, int *i, const char **what) {
    if (strncmp(name, "state.", 6) != 0) return false;
    const char *p = name + 6;
    long v = 0;
    if (*p < '0' || *p > '9') return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v >= n_params) return false;
    }
    if (*p != '.' || !p[1]) return false;
    *i = (int)v;
    *what = p + 1;
    return true;
}

bool optim_load_state_dict(optim_Optimizer *o, nn_TensorList st, bool apply, char *err, size_t errlen) {
    /* what each parameter's state holds (bit 0: step, 1 + s: slot s); all or nothing */
    unsigned *have = ac_arena_alloc(sizeof(unsigned) * (size_t)(o->n_params ? o->n_params : 1));
    memset(have, 0, sizeof(unsigned) * (size_t)o->n_params);
    for (int k = 0; k < st.n; k++) { /* check everything first, so a bad file changes nothing */
        int i;
        const char *what;
        if (!parse_state_key(st.names[k], o->n_params, &i, &what)) {
            snprintf(err, errlen, "unexpected optimizer key \"%s\" for an optimizer of %d parameters", st.names[k],
                     o->n_params);
            return false;
        }
        Tensor *t = st.tensors[k];
        if (t->dtype != AC_FLOAT32) {
            snprintf(err, errlen, "optimizer state \"%s\" must be float32", st.names[k]);
            return false;
        }
        unsigned bit;
        if (strcmp(what, "step") == 0) {
            double v = torch_numel(t) == 1 ? torch_item(t) : -1;
            if (!(v >= 0 && isfinite(v) && v == floor(v))) { /* a whole number of steps */
                snprintf(err, errlen, "optimizer state \"%s\" must hold one whole number of steps", st.names[k]);
                return false;
            }
            bit = 1;
        } else {
            int s = 0;
            while (s < 4 && strcmp(what, slot_names[s]) != 0) s++;
            bool fits = s < 4 && (s < 3 ? o->kind != OPTIM_SGD : o->kind == OPTIM_SGD) && (s != 2 || o->amsgrad);
            if (!fits) {
                snprintf(err, errlen, "optimizer state \"%s\" does not belong to this optimizer", st.names[k]);
                return false;
            }
            const Tensor *p = o->params[i];
            if (t->ndim != p->ndim || memcmp(t->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) != 0) {
                snprintf(err, errlen, "optimizer state \"%s\" has shape %s, but parameter %d has shape %s",
                         st.names[k], ac_shape_str(t), i, ac_shape_str(p));
                return false;
            }
            bit = 2u << s;
        }
        if (have[i] & bit) {
            snprintf(err, errlen, "optimizer state \"%s\" appears twice", st.names[k]);
            return false;
        }
        have[i] |= bit;
    }
    unsigned full = o->kind == OPTIM_SGD ? (o->momentum != 0 ? 2u << 3 : 0) : 1u | 2u | 4u | (o->amsgrad ? 8u : 0);
    for (int i = 0; i < o->n_params; i++)
        if (have[i] != 0 && have[i] != full) {
            snprintf(err, errlen, "the optimizer state of parameter %d is incomplete (a state has %s)", i,
                     o->kind == OPTIM_SGD ? "momentum_buffer" : o->amsgrad ? "step, exp_avg, exp_avg_sq and max_exp_avg_sq"
                                                                             : "step, exp_avg and exp_avg_sq");
            return false;
        }
    if (!apply) return true;
    for (int k = 0; k < st.n; k++) {
        int i = 0;
        const char *what = "";
        parse_state_key(st.names[k], o->n_params, &i, &what); /* checked above */
        if (strcmp(what, "step") == 0) {
            o->step[i] = torch_item(st.tensors[k]);
            continue;
        }
        int s = 0;
        while (strcmp(what, slot_names[s]) != 0) s++;
        Tensor **sl = slot(o, s);
        if (!sl[i]) sl[i] = state_zeros(o->params[i]);
        torch_copy_(sl[i], st.tensors[k]);
    }
    return true;
}
