/* linear: y = x @ W^T + b over the last dim of x (nn.Linear's forward).
 *     in the forward:  Y[r, o] = sum_i X[r, i] W[o, i] + b[o]
 *     so:              dX = dY @ W,   dW = dY^T @ X,   db = sum_r dY[r, :]
 * The sum over i runs first and the bias is added last, as BLAS addmm does. */
#include "internal.h"

/* dX reads W, dW reads X: each saved only when the other needs its gradient. */
typedef struct { ac_saved x, w; } LinearSaved;

static void linear_backward(Node *n, Tensor *gt) {
    const LinearSaved *sv = n->ctx;
    Tensor *x = n->inputs[0], *w = n->inputs[1], *b = n->inputs[2];
    int64_t out_f = w->shape[0], in_f = w->shape[1], rows = ac_rows(x);
    const float *G = ac_cdata(gt);
    if (ac_needs_grad(x)) {
        /* in fast math, dX is added straight into x's gradient when the other
         * users of x (a model's q, k and v) have started one: no pass to add it */
        Tensor *sum = ac_get_exact() ? NULL : ac_accum_target(x);
        Tensor *gx = sum ? sum : ac_new_like(x);
        ac_gemm(rows, in_f, out_f, G, out_f, ac_cdata(ac_unpack(n, sv->w)), in_f, gx->data, in_f, sum != NULL);
        if (!sum) ac_accum_new(x, gx);
    }
    if (ac_needs_grad(w)) { /* dW = dY^T @ X: dY read transposed, no copy */
        const float *X = ac_cdata(ac_unpack(n, sv->x));
        bool add = false;
        float *into = out_f * in_f >= ac_pieces_from ? ac_leaf_grad(w, &add) : NULL;
        if (into && (ac_overlap(into, out_f * in_f, G, rows * out_f) || ac_overlap(into, out_f * in_f, X, rows * in_f)))
            into = NULL; /* the product reads the .grad it would write (linear(W.grad, W)): made whole first */
        if (into) {
            /* A big leaf weight (the GPT's 50257-row head): dW straight into
             * its .grad, or a strip of rows at a time added to it, instead of
             * a whole dW beside it. Each element's sum is the same. */
            int64_t strip = ac_piece_floats / in_f > 0 ? ac_piece_floats / in_f : 1;
            float *tmp = add ? ac_new(AC_FLOAT32, 1, (int64_t[]){strip * in_f})->data : NULL;
            for (int64_t o0 = 0; o0 < out_f; o0 += strip) {
                int64_t h = out_f - o0 < strip ? out_f - o0 : strip;
                float *dst = into + o0 * in_f;
                ac_gemm_strided(h, in_f, rows, G + o0, 1, out_f, X, in_f, 1, add ? tmp : dst, in_f, false);
                if (add) ac_add_into(dst, tmp, h * in_f);
            }
        } else {
            Tensor *gw = ac_new_like(w);
            ac_gemm_strided(out_f, in_f, rows, G, 1, out_f, X, in_f, 1, gw->data, in_f, false);
            ac_accum_new(w, gw);
        }
    }
    if (ac_needs_grad(b)) {
        Tensor *gb = ac_new_zeros(AC_FLOAT32, 1, &out_f);
        ac_sum_rows(G, rows, out_f, gb->data);
        ac_accum_new(b, gb);
    }
}

typedef struct { const float *b; float *y; int64_t out_f; } BiasJob;

static void bias_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const BiasJob *j = ctx;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t k = 0; k < j->out_f; k++) j->y[r * j->out_f + k] += j->b[k];
}

/* A weight held as bfloat16 (a model loaded for generation) has no gradient: refused where one would
 * flow. Fast math reads it as it is (gemm_bf16.c); exact math widens it first, as
 * model.to(torch.float32) would have, and goes on as for any float32 weight. */
static Tensor *bf16_weight(Tensor *x, Tensor *w, Tensor *b) {
    if (torch_is_grad_enabled() && (x->requires_grad || w->requires_grad || (b && b->requires_grad)))
        ac_error("linear: the weight %s is held as bfloat16, for generation: no gradient flows through it "
                 "(run under torch.no_grad(), or hold the weights as float32 to train)", ac_shape_str(w));
    if (!torch_is_contiguous(w)) ac_error("linear: a bfloat16 weight must be contiguous, got %s", ac_shape_str(w));
    if (!ac_get_exact()) return w;
    Tensor *wf = ac_new(AC_FLOAT32, 2, w->shape);
    const uint16_t *wd = (const uint16_t *)w->data + w->offset;
    float *o = wf->data;
    for (int64_t i = 0, n = torch_numel(w); i < n; i++) o[i] = ac_bf16_to_f32(wd[i]);
    return wf;
}

Tensor *torch_linear(Tensor *x, Tensor *w, Tensor *b) {
    ac_check_float(x, "linear");
    ac_check_defined(w, "linear");
    if (w->dtype != AC_BFLOAT16) ac_check_float(w, "linear");
    if (w->ndim != 2) ac_error("linear: weight must be 2-D (out_features, in_features), got %s", ac_shape_str(w));
    if (x->ndim < 1) ac_error("linear: input must have at least 1 dimension");
    int64_t out_f = w->shape[0], in_f = w->shape[1];
    if (x->shape[x->ndim - 1] != in_f)
        ac_error("linear: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", (long long)ac_rows(x),
                 (long long)x->shape[x->ndim - 1], (long long)in_f, (long long)out_f);
    if (b) {
        ac_check_float(b, "linear");
        if (b->ndim != 1 || b->shape[0] != out_f)
            ac_error("linear: bias must have shape [%lld], got %s", (long long)out_f, ac_shape_str(b));
    }
    if (w->dtype == AC_BFLOAT16) w = bf16_weight(x, w, b);
    int64_t rows = ac_rows(x), shape[AC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = out_f;
    Tensor *y = ac_new(AC_FLOAT32, x->ndim, shape);
    /* Y = X @ W^T: W read transposed (B(k, j) = W[j, k]), no copy */
    if (w->dtype == AC_BFLOAT16)
        ac_gemm_bf16(rows, out_f, in_f, ac_cdata(x), in_f, (const uint16_t *)w->data + w->offset, y->data, out_f);
    else
        ac_gemm_strided(rows, out_f, in_f, ac_cdata(x), in_f, 1, ac_cdata(w), 1, in_f, y->data, out_f, false);
    if (b) {
        BiasJob j = {ac_cdata(b), y->data, out_f};
        ac_parallel_for(rows, AC_GRAIN / (out_f + 1) + 1, bias_task, &j);
    }
    const char *name = x->ndim == 2 ? (b ? "AddmmBackward0" : "MmBackward0")
                     : x->ndim == 1 ? (b ? "AddBackward0" : "SqueezeBackward3")
                                    : (b ? "ViewBackward0" : "UnsafeViewBackward0");
    Node *n = AC_NODE(name, linear_backward, y, x, w, b); /* (none for a bfloat16 weight: refused above) */
    if (n) {
        LinearSaved *sv = AC_CTX(n, LinearSaved);
        if (ac_needs_grad(w)) sv->x = ac_save(n, x);
        if (ac_needs_grad(x)) sv->w = ac_save(n, w);
    }
    return y;
}
