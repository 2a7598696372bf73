/* masked_fill, tril and triu: keep some elements, replace the others. The
 * backward passes the gradient where an element was kept and zero where it
 * was replaced (passing it through masked slots sends training to NaN). */
#include <math.h>

#include "internal.h"

/* ---- masked_fill(a, mask, value) ------------------------------------------------------ */

/* keep[k] = !mask at a's element k (mask broadcast to a's shape). */
static bool *masked_slots(Tensor *a, Tensor *mask) {
    int nd;
    int64_t shape[AC_MAX_DIMS], ms[AC_MAX_DIMS];
    bool ok = ac_broadcast_shape(a, mask, &nd, shape) && nd == a->ndim;
    for (int d = 0; ok && d < nd; d++) ok = shape[d] == a->shape[d];
    if (!ok)
        ac_error("masked_fill: The size of tensor a (%s) must match the size of tensor b (the mask, "
                 "%s) at non-singleton dimension; the mask must broadcast to the input's shape",
                 ac_shape_str(a), ac_shape_str(mask));
    ac_broadcast_strides(mask, nd, shape, ms);
    const bool *m = ac_materialize(mask)->data;
    int64_t n = torch_numel(a), idx[AC_MAX_DIMS] = {0}, off = 0;
    bool *masked = ac_arena_alloc((size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) {
        masked[k] = m[off];
        ac_advance(nd, shape, ms, idx, &off);
    }
    return masked;
}

static Tensor *keep_where(Tensor *src, const bool *replace, float value) {
    Tensor *out = ac_new_like(src);
    const float *x = ac_cdata(src);
    float *o = out->data;
    for (int64_t k = 0, n = torch_numel(src); k < n; k++) o[k] = replace[k] ? value : x[k];
    return out;
}

static void mask_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], keep_where(g, n->ctx, 0.0f)); }

Tensor *torch_masked_fill(Tensor *a, Tensor *mask, double value) {
    ac_check_float(a, "masked_fill");
    ac_check_defined(mask, "masked_fill");
    if (mask->dtype != AC_BOOL)
        ac_error("masked_fill: masked_fill_ only supports boolean masks, but got mask with dtype %s "
                 "(use torch_to_bool(mask))", ac_dtype_name(mask->dtype));
    bool *replace = masked_slots(a, mask);
    Tensor *out = keep_where(a, replace, (float)value);
    Node *n = AC_NODE("MaskedFillBackward0", mask_backward, out, a);
    if (n) n->ctx = replace;
    return out;
}

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
