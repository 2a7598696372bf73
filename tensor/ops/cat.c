/* cat and stack: join tensors along a dim; the backward hands each input its
 * own slice of the gradient. */
#include <string.h>

#include "internal.h"

typedef struct { int64_t dim; bool stack; } CatSaved;

static void cat_backward(Node *n, Tensor *g) {
    const CatSaved *sv = n->ctx;
    int64_t dim = sv->dim, at = 0;
    bool stack = sv->stack;
    for (int k = 0; k < n->n_inputs; k++) {
        Tensor *x = n->inputs[k];
        int64_t len = stack ? 1 : x->shape[dim];
        if (ac_needs_grad(x)) {
            int64_t shape[AC_MAX_DIMS];
            memcpy(shape, g->shape, sizeof shape);
            shape[dim] = len;
            Tensor *part = ac_materialize(ac_view_of(g, g->ndim, shape, g->stride, g->offset + at * g->stride[dim]));
            if (stack) { /* drop the stacked dim */
                int64_t st[AC_MAX_DIMS];
                ac_contiguous_strides(x->ndim, x->shape, st);
                part = ac_view_of(part, x->ndim, x->shape, st, 0);
            }
            ac_accum(x, part);
        }
        at += len;
    }
}

static Tensor *join(int n, Tensor **ts, int64_t dim, bool stack) {
    const char *op = stack ? "stack" : "cat";
    if (n <= 0) ac_error(stack ? "stack: stack expects a non-empty TensorList" : "cat: torch.cat(): expected a non-empty list of Tensors");
    for (int k = 0; k < n; k++) ac_check_float(ts[k], op);
    const Tensor *t0 = ts[0];
    int nd = t0->ndim + (stack ? 1 : 0);
    if (nd > AC_MAX_DIMS) ac_error("stack: the result would have %d dimensions; attention.c has at most %d", nd, AC_MAX_DIMS);
    if (!stack && t0->ndim == 0) ac_error("cat: zero-dimensional tensor (at position 0) cannot be concatenated");
    int64_t d = ac_wrap_dim(dim, nd, op);
    int64_t shape[AC_MAX_DIMS], total = 0;
    for (int k = 0; k < n; k++) {
        const Tensor *t = ts[k];
        if (t->ndim != t0->ndim)
            ac_error("%s: Tensors must have same number of dimensions: got %d and %d (tensor number %d in the list)",
                     op, t0->ndim, t->ndim, k);
        for (int i = 0; i < t0->ndim; i++) {
            if (stack && t->shape[i] != t0->shape[i])
                ac_error("stack: stack expects each tensor to be equal size, but got %s at entry 0 and %s "
                         "at entry %d", ac_shape_str(t0), ac_shape_str(t), k);
            if (!stack && i != d && t->shape[i] != t0->shape[i])
                ac_error("cat: Sizes of tensors must match except in dimension %lld. Expected size %lld but "
                         "got size %lld for tensor number %d in the list.", (long long)d,
                         (long long)t0->shape[i], (long long)t->shape[i], k);
        }
        total += stack ? 1 : t->shape[d];
    }
    if (stack)
        for (int i = 0, j = 0; i < nd; i++) shape[i] = i == d ? total : t0->shape[j++];
    else
        for (int i = 0; i < nd; i++) shape[i] = i == d ? total : t0->shape[i];
    Tensor *out = ac_new(AC_FLOAT32, nd, shape);
    /* copy each input as a block of [outer, len * inner] */
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= shape[i];
    for (int i = (int)d + 1; i < nd; i++) inner *= shape[i];
    float *o = out->data;
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        int64_t len = stack ? 1 : ts[k]->shape[d];
        const float *x = ac_cdata(ts[k]);
        for (int64_t r = 0; r < outer; r++)
            memcpy(o + (r * total + at) * inner, x + r * len * inner, sizeof(float) * (size_t)(len * inner));
        at += len;
    }
    Node *node = ac_node(stack ? "StackBackward0" : "CatBackward0", cat_backward, out, n, ts);
    if (node) *AC_CTX(node, CatSaved) = (CatSaved){d, stack};
    return out;
}

Tensor *torch_cat(int n, Tensor **ts, int64_t dim) { return join(n, ts, dim, false); }
Tensor *torch_stack(int n, Tensor **ts, int64_t dim) { return join(n, ts, dim, true); }

/* ---- repeat: tile a tensor ----------------------------------------------------------------------
 *     in the forward:  out[i] = a[i mod a.shape]   (sizes may add leading dims)
 *     so:              da[j] = sum of g over every tile's copy of j */
/* a's element (contiguous offset) under out's multi-index idx */
static int64_t tile_offset(const Tensor *a, int lead, int n, const int64_t *idx, const int64_t *cs) {
    int64_t off = 0;
    for (int d = lead; d < n; d++) off += (idx[d] % a->shape[d - lead]) * cs[d - lead];
    return off;
}

static void next_index(int n, const int64_t *shape, int64_t *idx) {
    for (int d = n - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) return;
        idx[d] = 0;
    }
}

static void repeat_backward(Node *n, Tensor *g) {
    Tensor *a = n->inputs[0];
    Tensor *z = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
    const float *gd = ac_cdata(g);
    float *zd = z->data;
    int64_t idx[AC_MAX_DIMS] = {0};
    for (int64_t k = 0, len = torch_numel(g); k < len; k++) { /* tiles in order: a fixed summation order */
        zd[tile_offset(a, g->ndim - a->ndim, g->ndim, idx, z->stride)] += gd[k];
        next_index(g->ndim, g->shape, idx);
    }
    ac_accum(a, z);
}

Tensor *torch_repeat(Tensor *a, int n, const int64_t *sizes) {
    ac_check_float(a, "repeat");
    if (n < a->ndim)
        ac_error("repeat: Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
    if (n > AC_MAX_DIMS) ac_error("repeat: at most %d dimensions, got %d", AC_MAX_DIMS, n);
    int64_t shape[AC_MAX_DIMS];
    bool negative = false;
    for (int d = 0; d < n; d++) {
        int ad = d - (n - a->ndim);
        int64_t in = ad >= 0 ? a->shape[ad] : 1;
        if (in && (sizes[d] > INT64_MAX / in || sizes[d] < INT64_MIN / in))
            ac_error("repeat: numel: integer multiplication overflow");
        shape[d] = sizes[d] * in; /* PyTorch checks the result's sizes */
        negative = negative || shape[d] < 0 || sizes[d] < 0;
    }
    for (int d = 0; d < n && negative; d++)
        if (shape[d] < 0 || sizes[d] < 0)
            ac_error("repeat: Trying to create tensor with negative dimension %lld: %s", (long long)shape[d],
                     ac_dims_str(n, shape));
    Tensor *out = ac_new(AC_FLOAT32, n, shape);
    const float *x = ac_cdata(a);
    float *o = out->data;
    int lead = n - a->ndim;
    int64_t cs[AC_MAX_DIMS], idx[AC_MAX_DIMS] = {0};
    ac_contiguous_strides(a->ndim, a->shape, cs);
    for (int64_t k = 0, len = torch_numel(out); k < len; k++) {
        o[k] = x[tile_offset(a, lead, n, idx, cs)];
        next_index(n, shape, idx);
    }
    AC_NODE("RepeatBackward0", repeat_backward, out, a);
    return out;
}
