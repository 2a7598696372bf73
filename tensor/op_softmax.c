/* softmax and log_softmax along any dim, numerically stable (x - max), in the
 * order ATen's CPU kernels compute them. A row that is all -inf gives NaN, as
 * in torch.softmax. */
#include <math.h>

#include "internal.h"

static float nan_max(const float *x, int64_t n, int64_t stride) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i * stride];
        if (isnan(v)) return v;
        if (v > m) m = v;
    }
    return m;
}

/* View a contiguous tensor as [outer, size, inner] around dim. */
static void split(const Tensor *t, int64_t dim, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (d < dim) *outer *= t->shape[d];
        if (d > dim) *inner *= t->shape[d];
    }
    *size = t->ndim ? t->shape[dim] : 1;
}

static void softmax_rows(const float *x, float *y, int64_t outer, int64_t size, int64_t inner, bool log) {
    float *tmp = inner == 1 ? ac_arena_alloc(sizeof(float) * (size_t)(size ? size : 1)) : NULL;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            const float *xr = x + o * size * inner + in;
            float *yr = y + o * size * inner + in;
            float m = nan_max(xr, size, inner);
            if (inner == 1) { /* last dim: ATen's _vec_(log_)softmax_lastdim */
                for (int64_t i = 0; i < size; i++) tmp[i] = expf(xr[i] - m);
                float s = ac_lane8_sum(tmp, size);
                if (log) {
                    float ls = logf(s);
                    for (int64_t i = 0; i < size; i++) yr[i] = xr[i] - m - ls;
                } else {
                    float r = 1 / s;
                    for (int64_t i = 0; i < size; i++) yr[i] = tmp[i] * r;
                }
            } else {
                float s = 0;
                for (int64_t i = 0; i < size; i++) {
                    float e = expf(xr[i * inner] - m);
                    if (!log) yr[i * inner] = e;
                    s += e;
                }
                float ls = logf(s);
                for (int64_t i = 0; i < size; i++)
                    yr[i * inner] = log ? xr[i * inner] - m - ls : yr[i * inner] / s;
            }
        }
    }
}

static void softmax_backward(Node *n, Tensor *gt) {
    Tensor *x = n->inputs[0];
    bool log = n->i[1] != 0;
    int64_t outer, size, inner;
    split(x, n->i[0], &outer, &size, &inner);
    const float *g = ac_cdata(gt), *y = ac_cdata(n->out);
    Tensor *rt = ac_new_like(x);
    float *r = rt->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * size * inner + in;
            float s = 0;
            /* softmax:     dx = y * (g - sum(g * y))
             * log_softmax: dx = g - exp(y) * sum(g) */
            for (int64_t i = 0; i < size; i++) {
                int64_t k = base + i * inner;
                s += log ? g[k] : g[k] * y[k];
            }
            for (int64_t i = 0; i < size; i++) {
                int64_t k = base + i * inner;
                r[k] = log ? g[k] - expf(y[k]) * s : y[k] * (g[k] - s);
            }
        }
    }
    ac_accum(x, rt);
}

static Tensor *softmax_impl(Tensor *a, int64_t dim, bool log) {
    const char *op = log ? "log_softmax" : "softmax";
    ac_check_float(a, op);
    dim = ac_wrap_dim(dim, a->ndim, op);
    int64_t outer, size, inner;
    split(a, dim, &outer, &size, &inner);
    Tensor *out = ac_new_like(a);
    softmax_rows(ac_cdata(a), out->data, outer, size, inner, log);
    Node *n = AC_NODE(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", softmax_backward, out, a);
    if (n) {
        n->i[0] = dim;
        n->i[1] = log;
        n->uses_saved = true;
    }
    return out;
}

Tensor *torch_softmax(Tensor *a, int64_t dim) { return softmax_impl(a, dim, false); }
Tensor *torch_log_softmax(Tensor *a, int64_t dim) { return softmax_impl(a, dim, true); }
