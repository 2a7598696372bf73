/* layer_norm, dropout and argmax. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* layer_norm over the last n_norm dims:
 *     in the forward:  xhat = (x - mean) * rstd,   y = xhat * w + b
 *     so:              dxhat = dy * w
 *                      dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
 *                      dw = sum over rows of dy * xhat,   db = sum over rows of dy */
/* The input and weight (saved), the row length D and the op's own (mean, rstd) per row. */
typedef struct { ac_saved x, w; int64_t D; Tensor *stats; } LayerNormSaved;

static void layer_norm_backward(Node *n, Tensor *gt) {
    const LayerNormSaved *sv = n->ctx;
    Tensor *x = ac_unpack(n, sv->x), *w = ac_unpack(n, sv->w), *b = n->inputs[2];
    int64_t D = sv->D, rows = D ? torch_numel(x) / D : 0; /* a (.., 0) input: no rows, no gradient to spread */
    const float *X = ac_cdata(x), *G = ac_cdata(gt), *W = w ? ac_cdata(w) : NULL;
    const float *stats = sv->stats->data; /* mean, rstd per row */
    Tensor *gx = ac_new_like(x);
    Tensor *gw = w ? ac_new_zeros(AC_FLOAT32, w->ndim, w->shape) : NULL;
    Tensor *gb = b ? ac_new_zeros(AC_FLOAT32, b->ndim, b->shape) : NULL;
    float *dx = gx->data;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * D, *gr = G + r * D;
        float mean = stats[2 * r], rstd = stats[2 * r + 1];
        double s1 = 0, s2 = 0;
        for (int64_t i = 0; i < D; i++) {
            float xhat = (xr[i] - mean) * rstd, dxhat = gr[i] * (W ? W[i] : 1.0f);
            s1 += dxhat;
            s2 += (double)dxhat * xhat;
            if (gw) ((float *)gw->data)[i] += gr[i] * xhat;
            if (gb) ((float *)gb->data)[i] += gr[i];
        }
        float m1 = (float)(s1 / (double)D), m2 = (float)(s2 / (double)D);
        for (int64_t i = 0; i < D; i++) {
            float xhat = (xr[i] - mean) * rstd, dxhat = gr[i] * (W ? W[i] : 1.0f);
            dx[r * D + i] = rstd * (dxhat - m1 - xhat * m2);
        }
    }
    ac_accum(x, gx);
    if (gw) ac_accum(w, gw);
    if (gb) ac_accum(b, gb);
}

Tensor *torch_layer_norm(Tensor *x, int n_norm, const int64_t *nshape, Tensor *w, Tensor *b, double eps) {
    ac_check_float(x, "layer_norm");
    if (w) ac_check_live(w, "layer_norm");
    if (b) ac_check_live(b, "layer_norm");
    if (n_norm < 1 || n_norm > x->ndim)
        ac_error("layer_norm: normalized_shape %s does not fit an input of shape %s",
                 ac_dims_str(n_norm, nshape), ac_shape_str(x));
    int64_t D = 1;
    for (int i = 0; i < n_norm; i++) {
        if (x->shape[x->ndim - n_norm + i] != nshape[i])
            ac_error("layer_norm: Given normalized_shape=%s, expected input with shape [*, %s, but got "
                     "input of size%s", ac_dims_str(n_norm, nshape), ac_dims_str(n_norm, nshape) + 1,
                     ac_shape_str(x));
        D *= nshape[i];
    }
    if (w && torch_numel(w) != D) ac_error("layer_norm: weight has %lld elements, expected %lld", (long long)torch_numel(w), (long long)D);
    if (b && torch_numel(b) != D) ac_error("layer_norm: bias has %lld elements, expected %lld", (long long)torch_numel(b), (long long)D);
    int64_t rows = D ? torch_numel(x) / D : 0;
    Tensor *y = ac_new_like(x), *stats = ac_new(AC_FLOAT32, 1, (int64_t[]){2 * rows + 1});
    const float *X = ac_cdata(x), *W = w ? ac_cdata(w) : NULL, *B = b ? ac_cdata(b) : NULL;
    float *Y = y->data, *st = stats->data;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * D;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; i++) mean += xr[i];
        mean /= (double)D;
        for (int64_t i = 0; i < D; i++) var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
        var /= (double)D;
        float rstd = (float)(1.0 / sqrt(var + eps)), scale = rstd, bias = -rstd * (float)mean;
        st[2 * r] = (float)mean;
        st[2 * r + 1] = rstd;
        for (int64_t i = 0; i < D; i++)
            Y[r * D + i] = (xr[i] * scale + bias) * (W ? W[i] : 1.0f) + (B ? B[i] : 0.0f);
    }
    Node *n = AC_NODE("NativeLayerNormBackward0", layer_norm_backward, y, x, w, b);
    if (n) {
        LayerNormSaved *sv = AC_CTX(n, LayerNormSaved);
        sv->x = ac_save(n, x);
        sv->w = ac_save(n, w);
        sv->D = D;
        sv->stats = stats;
    }
    return y;
}

/* dropout, as 1.13 on the CPU: noise = bernoulli_(1 - p) / (1 - p); out = x * noise,
 * whose MulBackward0 gives dx = g * noise. The noise is one of two values, so
 * the node keeps which (a byte per element) instead of the floats. */
typedef struct { Tensor *kept; float scale; } DropoutSaved;
typedef struct { const float *x; const bool *k; float *o; float scale; } DropoutJob;

static void dropout_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    const DropoutJob *j = ctx;
    for (int64_t i = i0; i < i1; i++) j->o[i] = j->x[i] * (j->k[i] ? j->scale : 0.0f);
}

static void dropout_backward(Node *n, Tensor *g) {
    const DropoutSaved *sv = n->ctx;
    Tensor *gx = ac_grad_out(n, g);
    DropoutJob j = {ac_cdata(g), sv->kept->data, gx->data, sv->scale};
    ac_parallel_for(torch_numel(gx), AC_GRAIN, dropout_task, &j);
    ac_accum_new(n->inputs[0], gx);
}

Tensor *torch_dropout_gen(Tensor *x, double p, bool training, torch_Generator *generator) {
    ac_check_float(x, "dropout");
    if (!(p >= 0.0 && p <= 1.0)) ac_raise(AC_VALUE_ERROR, "dropout: dropout probability has to be between 0 and 1, but got %g", p);
    if (!training || p == 0.0) return x;
    float keep = (float)(1.0 - p), scale = p == 1.0 ? 0.0f : 1.0f / keep; /* noise: 1.0f / keep or 0 */
    Tensor *out = ac_new_like(x), *kept = ac_new(AC_BOOL, x->ndim, x->shape);
    int64_t n = torch_numel(out);
    ac_bernoulli_mask(generator, 1.0 - p, kept->data, n); /* bernoulli_(1 - p)'s draws, kept as bytes */
    DropoutJob j = {ac_cdata(x), kept->data, out->data, scale};
    ac_parallel_for(n, AC_GRAIN, dropout_task, &j);
    Node *node = AC_NODE("MulBackward0", dropout_backward, out, x, NULL); /* x * noise: the noise needs no gradient */
    if (node) *AC_CTX(node, DropoutSaved) = (DropoutSaved){kept, scale};
    return out;
}

Tensor *torch_dropout(Tensor *x, double p, bool training) { return torch_dropout_gen(x, p, training, NULL); }

Tensor *torch_argmax(Tensor *a, int64_t dim, bool keepdim) {
    ac_check_float(a, "argmax");
    int64_t d = ac_wrap_dim(dim, a->ndim, "argmax");
    int64_t outer = 1, size = a->ndim ? a->shape[d] : 1, inner = 1, shape[AC_MAX_DIMS];
    if (size == 0) ac_raise(AC_INDEX_ERROR, "argmax: argmax(): Expected reduction dim %lld to have non-zero size.", (long long)d);
    int nd = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (i < d) outer *= a->shape[i];
        if (i > d) inner *= a->shape[i];
        if (i != d || keepdim) shape[nd++] = i == d ? 1 : a->shape[i];
    }
    Tensor *out = ac_new(AC_INT64, nd, shape);
    const float *x = ac_cdata(a);
    int64_t *o = out->data;
    for (int64_t r = 0; r < outer; r++)
        for (int64_t c = 0; c < inner; c++) {
            int64_t best = 0;
            for (int64_t i = 1; i < size; i++) {
                float v = x[(r * size + i) * inner + c], bv = x[(r * size + best) * inner + c];
                if (isnan(bv)) break;
                if (v > bv || isnan(v)) best = i;
            }
            o[r * inner + c] = best;
        }
    return out;
}
