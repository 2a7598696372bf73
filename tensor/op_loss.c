/* cross_entropy over (N, C) logits and int64 targets: log_softmax fused with
 * nll_loss, mean over the targets that are not ignore_index.
 *     in the forward:  loss = -(1/W) sum_r logp[r, t_r],   logp = log_softmax(x)
 *     so:              dx[r, j] = g_r * (j == t_r) - exp(logp[r, j]) * g_r,
 *                      with g_r = -dloss / W  (0 for ignored rows)
 * The forward sums the rows with ATen's 8-level cascade (nll_loss_out_frame). */
#include <math.h>

#include "internal.h"

static void ce_backward(Node *n, Tensor *gt) {
    Tensor *x = n->inputs[0], *logp = n->saved[0], *tgt = n->saved[1];
    int64_t N = x->shape[0], C = x->shape[1], ignore = n->i[0];
    float total = (float)n->f[0], g0 = ac_cdata(gt)[0];
    float grad = -(g0 / total);
    const float *lp = logp->data;
    const int64_t *t = tgt->data;
    Tensor *gx = ac_new_zeros(AC_FLOAT32, 2, x->shape);
    float *d = gx->data;
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore) continue;
        for (int64_t j = 0; j < C; j++) d[r * C + j] = (j == t[r] ? grad : 0.0f) - expf(lp[r * C + j]) * grad;
    }
    ac_accum(x, gx);
}

Tensor *torch_cross_entropy(Tensor *x, Tensor *target, int64_t ignore_index) {
    ac_check_float(x, "cross_entropy");
    ac_check_defined(target, "cross_entropy");
    if (x->ndim != 2) ac_error("cross_entropy: expected input of shape (N, C), got %s", ac_shape_str(x));
    if (target->dtype != AC_INT64)
        ac_error("cross_entropy: expected scalar type Long but found %s for the target", ac_dtype_name(target->dtype));
    if (target->ndim != 1 || target->shape[0] != x->shape[0])
        ac_error("cross_entropy: Expected input batch_size (%lld) to match target batch_size (%lld).",
                 (long long)x->shape[0], (long long)(target->ndim ? target->shape[0] : 0));
    int64_t N = x->shape[0], C = x->shape[1];
    Tensor *tgt = ac_materialize(target);
    const int64_t *t = tgt->data;
    for (int64_t r = 0; r < N; r++)
        if (t[r] != ignore_index && (t[r] < 0 || t[r] >= C))
            ac_error("cross_entropy: Target %lld is out of bounds (classes: %lld).", (long long)t[r], (long long)C);
    bool prev = torch_no_grad_enter();
    Tensor *logp = torch_log_softmax(x, 1);
    torch_no_grad_exit(prev);
    const float *lp = logp->data;
    /* nll_loss's cascade: 8 levels of partial sums */
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
    float total = (float)(N - ignored), sum = 0;
    for (int j = 0; j < LEVELS; j++) sum += part[j];
    Tensor *out = ac_new(AC_FLOAT32, 0, NULL);
    ((float *)out->data)[0] = sum / total;
    Node *n = AC_NODE("NllLossBackward0", ce_backward, out, x);
    if (n) {
        n->saved[0] = logp;
        n->saved[1] = tgt;
        n->i[0] = ignore_index;
        n->f[0] = total;
        n->uses_saved = true;
    }
    return out;
}
