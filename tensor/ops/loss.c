/* nll_loss and cross_entropy (log_softmax fused with nll_loss) over (N, C)
 * inputs and int64 targets, mean over the targets that are not ignore_index.
 *     in the forward:  loss = -(1/W) sum_r logp[r, t_r],   W = rows not ignored
 *     so (nll_loss):       d logp[r, j] = g_r * (j == t_r),            g_r = -dloss / W
 *     and (cross_entropy): dx[r, j] = g_r * (j == t_r) - exp(logp[r, j]) * g_r
 *                          (log_softmax's backward with a one-hot incoming gradient)
 * Ignored rows get no gradient. The forward adds the rows with ATen's 8-level
 * cascade (nll_loss_out_frame). */
#include <math.h>
#include <string.h>

#include "internal.h"

static Tensor *checked_target(Tensor *x, Tensor *target, int64_t ignore_index, const char *op) {
    ac_check_float(x, op);
    ac_check_defined(target, op);
    if (x->ndim != 2) ac_error("%s: expected input of shape (N, C), got %s", op, ac_shape_str(x));
    if (target->dtype != AC_INT64)
        ac_error("%s: expected scalar type Long but found %s for the target", op, ac_dtype_name(target->dtype));
    if (target->ndim != 1 || target->shape[0] != x->shape[0])
        ac_raise(AC_VALUE_ERROR, "%s: Expected input batch_size (%lld) to match target batch_size (%lld).", op,
                 (long long)x->shape[0], (long long)(target->ndim ? target->shape[0] : 0));
    Tensor *tgt = ac_materialize(target);
    const int64_t *t = tgt->data;
    for (int64_t r = 0; r < x->shape[0]; r++)
        if (t[r] != ignore_index && (t[r] < 0 || t[r] >= x->shape[1]))
            ac_raise(AC_INDEX_ERROR, "%s: Target %lld is out of bounds. (%lld classes)", op, (long long)t[r], (long long)x->shape[1]);
    return tgt;
}

/* -(1/W) sum of lp[r, t_r] over the rows not ignored; *total = W. */
static float nll_mean(const float *lp, const int64_t *t, int64_t N, int64_t C, int64_t ignore_index, float *total) {
    enum { LEVELS = 8 };
    int power = 0;
    while (((int64_t)1 << power) < N) power++;
    power /= LEVELS;
    if (power < 4) power = 4;
    const int64_t mask = ((int64_t)1 << power) - 1;
    float part[LEVELS] = {0};
    int64_t ignored = 0;
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore_index) { ignored++; continue; }
        part[0] -= lp[r * C + t[r]];
        for (int j = 0; j + 1 < LEVELS; j++) {
            if ((r & (mask << (j * power))) != 0) break;
            part[j + 1] += part[j];
            part[j] = 0;
        }
    }
    float sum = 0;
    for (int j = 0; j < LEVELS; j++) sum += part[j];
    *total = (float)(N - ignored);
    return sum / *total;
}

/* The op's own copies (log_softmax's output, the checked targets) and the
 * count of targets not ignored. fused: cross_entropy, through log_softmax too.
 * used: cross_entropy's backward wrote its gradient over logp (below). */
typedef struct { Tensor *logp, *tgt; int64_t ignore; bool fused, used; float total; } LossSaved;

typedef struct { const float *lp; const int64_t *t; float *d; int64_t C, ignore; float grad; bool fused; } LossJob;

static void loss_rows_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const LossJob *j = ctx;
    int64_t C = j->C;
    float grad = j->grad;
    for (int64_t r = r0; r < r1; r++) {
        float *dr = j->d + r * C;
        if (j->t[r] != j->ignore && j->fused) {
            ac_exp_sub(j->lp + r * C, 0.0f, dr, C); /* expf(lp - 0) = expf(lp): libm's in exact math, vectorized in fast */
            for (int64_t c = 0; c < C; c++) dr[c] = (c == j->t[r] ? grad : 0.0f) - dr[c] * grad;
            continue;
        }
        memset(dr, 0, sizeof(float) * (size_t)C);
        if (j->t[r] != j->ignore) dr[j->t[r]] = grad;
    }
}

static void loss_backward(Node *n, Tensor *gt) {
    LossSaved *sv = n->ctx;
    Tensor *x = n->inputs[0], *logp = sv->logp, *tgt = sv->tgt;
    int64_t N = x->shape[0], C = x->shape[1], ignore = sv->ignore;
    bool fused = sv->fused;
    if (sv->used) /* a sweep an error ended ran this node, and a second runs it again */
        ac_error("backward: Trying to backward through the graph a second time (or directly access saved tensors "
                 "after they have already been freed). Specify retain_graph=True if you need to backward through "
                 "the graph a second time. (node NllLossBackward0)");
    float grad = -(ac_cdata(gt)[0] / sv->total);
    const float *lp = logp ? logp->data : NULL;
    const int64_t *t = tgt->data;
    /* cross_entropy's logp is its own, read by nothing but this node: where the graph is not kept, its
     * gradient goes over it, element by element (each read before it is written), instead of into a
     * new (N, C) buffer: the logits' size less at the step's peak */
    bool reuse = fused && !ac_backward_retains_graph();
    Tensor *gx = reuse ? logp : ac_new(AC_FLOAT32, 2, x->shape);
    LossJob j = {lp, t, gx->data, C, ignore, grad, fused};
    ac_parallel_for(N, AC_GRAIN / (C + 1) + 1, loss_rows_task, &j); /* rows are independent */
    if (reuse) {
        sv->used = true;
        ac_accum_new(x, gx);
    } else {
        ac_accum(x, gx);
    }
}

static Tensor *loss(Tensor *x, Tensor *target, int64_t ignore_index, bool fused) {
    const char *op = fused ? "cross_entropy" : "nll_loss";
    Tensor *tgt = checked_target(x, target, ignore_index, op);
    Tensor *logp = x;
    if (fused) {
        bool prev = torch_no_grad_enter();
        logp = torch_log_softmax(x, 1);
        torch_no_grad_exit(prev);
    }
    float total;
    Tensor *out = ac_new(AC_FLOAT32, 0, NULL);
    ((float *)out->data)[0] = nll_mean(ac_cdata(logp), tgt->data, x->shape[0], x->shape[1], ignore_index, &total);
    Node *n = AC_NODE("NllLossBackward0", loss_backward, out, x);
    if (n) {
        *AC_CTX(n, LossSaved) = (LossSaved){fused ? logp : NULL, tgt, ignore_index, fused, false, total};
        n->uses_saved = true;
    }
    return out;
}

Tensor *torch_cross_entropy(Tensor *logits, Tensor *target, int64_t ignore_index) {
    return loss(logits, target, ignore_index, true);
}

Tensor *torch_nll_loss(Tensor *log_probs, Tensor *target, int64_t ignore_index) {
    return loss(log_probs, target, ignore_index, false);
}

/* ---- mse_loss ---------------------------------------------------------------------------
 *     in the forward:  loss = mean((x - y)^2)   over the broadcast shape, n elements
 *     so:              dx = g * 2 (x - y) / n, summed to x's shape;  dy = -(that), summed to y's */
typedef struct { ac_saved x, y; int64_t n; } MseSaved;

static void mse_backward(Node *nd, Tensor *g) {
    const MseSaved *sv = nd->ctx;
    Tensor *x = ac_unpack(nd, sv->x), *y = ac_unpack(nd, sv->y);
    float scale = 2.0f * ac_cdata(g)[0] / (float)sv->n; /* ATen: norm = 2 / numel, times grad */
    bool prev = torch_no_grad_enter();
    Tensor *d = torch_mul_scalar(torch_sub(x, y), (double)scale);
    torch_no_grad_exit(prev);
    if (ac_needs_grad(nd->inputs[0])) ac_accum(nd->inputs[0], ac_sum_to(d, nd->inputs[0]));
    if (ac_needs_grad(nd->inputs[1])) ac_accum(nd->inputs[1], ac_sum_to(torch_neg(d), nd->inputs[1]));
}

Tensor *torch_mse_loss(Tensor *input, Tensor *target) {
    ac_check_float(input, "mse_loss");
    ac_check_float(target, "mse_loss");
    bool prev = torch_no_grad_enter();
    Tensor *d = torch_sub(input, target);
    Tensor *out = torch_mean(torch_mul(d, d)); /* (x - y)^2, then mean in torch.mean's order */
    torch_no_grad_exit(prev);
    Node *n = AC_NODE("MseLossBackward0", mse_backward, out, input, target);
    if (n) {
        MseSaved *sv = AC_CTX(n, MseSaved);
        sv->x = ac_save(n, input);
        sv->y = ac_save(n, target);
        sv->n = torch_numel(d);
    }
    return out;
}

/* ---- binary_cross_entropy ------------------------------------------------------------------
 * ATen's CPU kernels (Loss.cpp), in float32, then the mean in torch.mean's order:
 *     in the forward:  l_i = (y_i - 1) max(log1p(-x_i), -100) - y_i max(log(x_i), -100),  loss = mean(l)
 *     so:              dx_i = g (x_i - y_i) / max((1 - x_i) x_i, 1e-12) / n
 *                      dy_i = (log(1 - x_i) - log(x_i)) g / n   (binary_cross_entropy_target_backward's order) */
typedef struct { ac_saved x, y; } BceSaved;

static void check_bce(Tensor *x, Tensor *y, const char *op, bool logits) {
    ac_check_float(x, op);
    ac_check_float(y, op);
    if (x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) != 0) {
        if (logits)
            ac_raise(AC_VALUE_ERROR, "%s: Target size (%s) must be the same as input size (%s)", op, torch_size_str(y),
                     torch_size_str(x));
        ac_raise(AC_VALUE_ERROR, "%s: Using a target size (%s) that is different to the input size (%s) is deprecated. "
                 "Please ensure they have the same size.", op, torch_size_str(y), torch_size_str(x));
    }
}

static void bce_backward(Node *nd, Tensor *g) {
    const BceSaved *sv = nd->ctx;
    Tensor *x = ac_unpack(nd, sv->x), *y = ac_unpack(nd, sv->y);
    const float *X = ac_cdata(x), *Y = ac_cdata(y);
    float gv = ac_cdata(g)[0], n = (float)torch_numel(x);
    int64_t len = torch_numel(x);
    if (ac_needs_grad(nd->inputs[0])) {
        Tensor *gx = ac_new(AC_FLOAT32, x->ndim, x->shape);
        float *d = gx->data;
        for (int64_t i = 0; i < len; i++) {
            float den = (1.0f - X[i]) * X[i];
            d[i] = gv * (X[i] - Y[i]) / (den > 1e-12f ? den : 1e-12f) / n;
        }
        ac_accum_new(nd->inputs[0], gx);
    }
    if (ac_needs_grad(nd->inputs[1])) {
        Tensor *gy = ac_new(AC_FLOAT32, y->ndim, y->shape);
        float *d = gy->data;
        for (int64_t i = 0; i < len; i++) d[i] = (logf(1.0f - X[i]) - logf(X[i])) * gv / n;
        ac_accum_new(nd->inputs[1], gy);
    }
}

Tensor *torch_binary_cross_entropy(Tensor *input, Tensor *target) {
    check_bce(input, target, "binary_cross_entropy", false);
    const float *X = ac_cdata(input), *Y = ac_cdata(target);
    Tensor *l = ac_new(AC_FLOAT32, input->ndim, input->shape);
    float *o = l->data;
    for (int64_t i = 0, n = torch_numel(input); i < n; i++) {
        if (!(X[i] >= 0.0f && X[i] <= 1.0f)) ac_error("binary_cross_entropy: all elements of input should be between 0 and 1");
        float lg1 = log1pf(-X[i]), lg = logf(X[i]);
        o[i] = (Y[i] - 1.0f) * (lg1 > -100.0f ? lg1 : -100.0f) - Y[i] * (lg > -100.0f ? lg : -100.0f);
    }
    bool prev = torch_no_grad_enter();
    Tensor *out = torch_mean(l);
    torch_no_grad_exit(prev);
    Node *nd = AC_NODE("BinaryCrossEntropyBackward0", bce_backward, out, input, target);
    if (nd) *AC_CTX(nd, BceSaved) = (BceSaved){ac_save(nd, input), ac_save(nd, target)};
    return out;
}

/* ---- binary_cross_entropy_with_logits ------------------------------------------------------
 *     in the forward:  m_i = max(-x_i, 0),  l_i = (1 - y_i) x_i + m_i + log(exp(-m_i) + exp(-x_i - m_i)),
 *                      loss = mean(l)        (ATen's order of operations, float32)
 *     so:              dx_i = (sigmoid(x_i) - y_i) g / n,   dy_i = -x_i g / n */
static void bce_logits_backward(Node *nd, Tensor *g) {
    const BceSaved *sv = nd->ctx;
    Tensor *x = ac_unpack(nd, sv->x), *y = ac_unpack(nd, sv->y);
    const float *X = ac_cdata(x), *Y = ac_cdata(y);
    float gv = ac_cdata(g)[0], n = (float)torch_numel(x);
    int64_t len = torch_numel(x);
    if (ac_needs_grad(nd->inputs[0])) {
        Tensor *gx = ac_new(AC_FLOAT32, x->ndim, x->shape);
        float *d = gx->data;
        for (int64_t i = 0; i < len; i++) d[i] = (1.0f / (1.0f + expf(-X[i])) - Y[i]) * gv / n;
        ac_accum_new(nd->inputs[0], gx);
    }
    if (ac_needs_grad(nd->inputs[1])) {
        Tensor *gy = ac_new(AC_FLOAT32, y->ndim, y->shape);
        float *d = gy->data;
        for (int64_t i = 0; i < len; i++) d[i] = -X[i] * gv / n;
        ac_accum_new(nd->inputs[1], gy);
    }
}

Tensor *torch_binary_cross_entropy_with_logits(Tensor *input, Tensor *target) {
    check_bce(input, target, "binary_cross_entropy_with_logits", true);
    const float *X = ac_cdata(input), *Y = ac_cdata(target);
    Tensor *l = ac_new(AC_FLOAT32, input->ndim, input->shape);
    float *o = l->data;
    for (int64_t i = 0, n = torch_numel(input); i < n; i++) {
        float m = -X[i] > 0.0f ? -X[i] : 0.0f;
        o[i] = (1.0f - Y[i]) * X[i] + m + logf(expf(-m) + expf(-X[i] - m));
    }
    bool prev = torch_no_grad_enter();
    Tensor *out = torch_mean(l);
    torch_no_grad_exit(prev);
    Node *nd = AC_NODE("BinaryCrossEntropyWithLogitsBackward0", bce_logits_backward, out, input, target);
    if (nd) *AC_CTX(nd, BceSaved) = (BceSaved){ac_save(nd, input), ac_save(nd, target)};
    return out;
}
