/* masked_fill, tril and triu: keep some elements, replace the others. The
 * backward passes the gradient where an element was kept and zero where it
 * was replaced (passing it through masked slots sends training to NaN). */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- masked_fill(a, mask, value) ------------------------------------------------------ */

/* The mask seen through a's shape (broadcast strides, 0 where it repeats):
 * nothing is expanded to a's size, and rows of the last dim are split among threads. */
typedef struct {
    const bool *m;
    int nd;
    int64_t shape[AC_MAX_DIMS], ms[AC_MAX_DIMS];
    float value;
    const float *x;
    float *out;
} Masked;

static Masked *mask_view(Tensor *a, Tensor *mask) {
    Masked *v = ac_arena_alloc(sizeof *v);
    memset(v, 0, sizeof *v);
    bool ok = ac_broadcast_shape(a, mask, &v->nd, v->shape) && v->nd == a->ndim;
    for (int d = 0; ok && d < v->nd; d++) ok = v->shape[d] == a->shape[d];
    if (!ok)
        ac_error("masked_fill: The size of tensor a (%s) must match the size of tensor b (the mask, "
                 "%s) at non-singleton dimension; the mask must broadcast to the input's shape",
                 ac_shape_str(a), ac_shape_str(mask));
    Tensor *mc = ac_materialize(mask); /* the mask's own size, contiguous */
    ac_broadcast_strides(mc, v->nd, v->shape, v->ms);
    v->m = mc->data;
    return v;
}

/* out = where(mask, value, x) on rows [r0, r1) of the last dim. */
static void fill_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const Masked *v = ctx;
    int nd = v->nd;
    int64_t cols = nd ? v->shape[nd - 1] : 1, mcol = nd ? v->ms[nd - 1] : 0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t off = 0, rest = r;
        for (int d = nd - 2; d >= 0; d--) {
            off += (rest % v->shape[d]) * v->ms[d];
            rest /= v->shape[d];
        }
        const bool *m = v->m + off;
        const float *x = v->x + r * cols;
        float *o = v->out + r * cols;
        for (int64_t j = 0; j < cols; j++) o[j] = m[j * mcol] ? v->value : x[j];
    }
}

static Tensor *apply_mask(Masked *v, Tensor *src, float value) {
    Tensor *out = ac_new_like(src);
    Masked job = *v;
    job.x = ac_cdata(src), job.out = out->data, job.value = value;
    int64_t cols = v->nd ? v->shape[v->nd - 1] : 1, rows = cols ? torch_numel(src) / cols : 0;
    ac_parallel_for(rows, cols >= 16384 ? 1 : 16384 / (cols + 1) + 1, fill_task, &job);
    return out;
}

static void masked_fill_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], apply_mask(n->ctx, g, 0.0f)); }

Tensor *torch_masked_fill(Tensor *a, Tensor *mask, double value) {
    ac_check_float(a, "masked_fill");
    ac_check_defined(mask, "masked_fill");
    if (mask->dtype != AC_BOOL)
        ac_error("masked_fill: masked_fill_ only supports boolean masks, but got mask with dtype %s "
                 "(use torch_to_bool(mask))", ac_dtype_name(mask->dtype));
    Masked *v = mask_view(a, mask);
    Tensor *out = apply_mask(v, a, (float)value);
    Node *n = AC_NODE("MaskedFillBackward0", masked_fill_backward, out, a);
    if (n) n->ctx = v;
    return out;
}

/* tril / triu keep a per-element map of what they replaced */
static Tensor *keep_where(Tensor *src, const bool *replace, float value) {
    Tensor *out = ac_new_like(src);
    const float *x = ac_cdata(src);
    float *o = out->data;
    for (int64_t k = 0, n = torch_numel(src); k < n; k++) o[k] = replace[k] ? value : x[k];
    return out;
}

static void mask_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], keep_where(g, n->ctx, 0.0f)); }

/* ---- tril / triu ------------------------------------------------------------------------ */

static bool *triangle(const Tensor *a, int64_t diagonal, bool lower) {
    int64_t rows = a->shape[a->ndim - 2], cols = a->shape[a->ndim - 1], n = torch_numel(a);
    bool *replace = ac_arena_alloc((size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) {
        int64_t j = k % cols, i = (k / cols) % rows;
        replace[k] = lower ? (j - i > diagonal) : (j - i < diagonal);
    }
    return replace;
}

static Tensor *tri(Tensor *a, int64_t diagonal, bool lower) {
    const char *op = lower ? "tril" : "triu";
    ac_check_float(a, op);
    if (a->ndim < 2) ac_error("%s: input tensor must have at least 2 dimensions (got %d)", op, a->ndim);
    bool *replace = triangle(a, diagonal, lower);
    Tensor *out = keep_where(a, replace, 0.0f);
    Node *n = AC_NODE(lower ? "TrilBackward0" : "TriuBackward0", mask_backward, out, a);
    if (n) n->ctx = replace;
    return out;
}

Tensor *torch_tril(Tensor *a, int64_t diagonal) { return tri(a, diagonal, true); }
Tensor *torch_triu(Tensor *a, int64_t diagonal) { return tri(a, diagonal, false); }
