/* Views share storage with their input, as in PyTorch: transpose, .T, .t(),
 * view, reshape (a view when it can be), unsqueeze, select (x[i]), slice
 * (x[a:b]); plus contiguous. Each backward maps the gradient back onto the
 * input's shape. */
#include <string.h>

#include "internal.h"

static void reshape_backward(Node *n, Tensor *g);

static Tensor *view_node(const char *name, ac_backward_fn fn, Tensor *out, Tensor *a) {
    AC_NODE(name, fn, out, a);
    return out;
}

/* ---- transpose / permute ---------------------------------------------------------------- */

static Tensor *permuted(Tensor *a, const int *perm) {
    int64_t shape[AC_MAX_DIMS], stride[AC_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) {
        shape[d] = a->shape[perm[d]];
        stride[d] = a->stride[perm[d]];
    }
    return ac_view_of(a, a->ndim, shape, stride, a->offset);
}

/* The gradient goes back through the inverse permutation. */
typedef struct { int inv[AC_MAX_DIMS]; } PermuteSaved;

static void permute_backward(Node *n, Tensor *g) {
    const PermuteSaved *sv = n->ctx;
    ac_accum(n->inputs[0], permuted(g, sv->inv));
}

static Tensor *permute_op(Tensor *a, const int *perm, const char *name) {
    Tensor *out = permuted(a, perm);
    Node *n = AC_NODE(name, permute_backward, out, a);
    if (n) {
        PermuteSaved *sv = AC_CTX(n, PermuteSaved);
        for (int d = 0; d < a->ndim; d++) sv->inv[perm[d]] = d;
    }
    return out;
}

Tensor *torch_transpose(Tensor *a, int64_t dim0, int64_t dim1) {
    ac_check_defined(a, "transpose");
    int d0 = (int)ac_wrap_dim(dim0, a->ndim, "transpose"), d1 = (int)ac_wrap_dim(dim1, a->ndim, "transpose");
    if (a->ndim == 0) return view_node("TransposeBackward0", reshape_backward, ac_view_of(a, 0, NULL, NULL, a->offset), a);
    int perm[AC_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) perm[d] = d;
    perm[d0] = d1;
    perm[d1] = d0;
    return permute_op(a, perm, "TransposeBackward0");
}

Tensor *torch_T(Tensor *a) {
    ac_check_defined(a, "T");
    if (a->ndim < 2) return a; /* PyTorch returns the tensor itself */
    int perm[AC_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) perm[d] = a->ndim - 1 - d;
    return permute_op(a, perm, "PermuteBackward0");
}

Tensor *torch_t(Tensor *a) {
    ac_check_defined(a, "t");
    if (a->ndim > 2) ac_error("t: t() expects a tensor with <= 2 dimensions, but self is %dD", a->ndim);
    if (a->ndim < 2) return permute_op(a, (int[]){0}, "TBackward0");
    return permute_op(a, (int[]){1, 0}, "TBackward0");
}

/* ---- view / reshape ------------------------------------------------------------------------ */

static void infer_shape(const Tensor *a, int nd, const int64_t *in, int64_t *out, const char *op) {
    if (nd > AC_MAX_DIMS) ac_error("%s: at most %d dimensions, got %d", op, AC_MAX_DIMS, nd);
    int64_t numel = torch_numel(a), known = 1;
    int infer = -1;
    const char *buf = ac_dims_str(nd, in);
    for (int d = 0; d < nd; d++) {
        out[d] = in[d];
        if (in[d] == -1) {
            if (infer >= 0) ac_error("%s: only one dimension can be inferred (shape %s)", op, buf);
            infer = d;
        } else if (in[d] < 0) {
            ac_error("%s: invalid shape dimension %lld in shape %s", op, (long long)in[d], buf);
        } else {
            known *= in[d];
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            ac_error("%s: shape '%s' is invalid for input of size %lld", op, buf, (long long)numel);
        out[infer] = numel / known;
    } else if (known != numel) {
        ac_error("%s: shape '%s' is invalid for input of size %lld", op, buf, (long long)numel);
    }
}

/* ATen's computeStride: the strides a view of `a` with shape ns would have, or
 * false when some dims to merge are not contiguous with each other. */
static bool compute_stride(const Tensor *a, int nd, const int64_t *ns, int64_t *st) {
    if (torch_numel(a) == 0 || a->ndim == 0) {
        ac_contiguous_strides(nd, ns, st);
        return true;
    }
    int64_t view_d = nd - 1, chunk_base = a->stride[a->ndim - 1], tn = 1, vn = 1;
    for (int64_t td = a->ndim - 1; td >= 0; td--) {
        tn *= a->shape[td];
        if (td == 0 || (a->shape[td - 1] != 1 && a->stride[td - 1] != tn * chunk_base)) {
            while (view_d >= 0 && (vn < tn || ns[view_d] == 1)) {
                st[view_d] = vn * chunk_base;
                vn *= ns[view_d];
                view_d--;
            }
            if (vn != tn) return false;
            if (td > 0) {
                chunk_base = a->stride[td - 1];
                tn = vn = 1;
            }
        }
    }
    return view_d == -1;
}

static void reshape_backward(Node *n, Tensor *g) {
    Tensor *a = n->inputs[0];
    int64_t st[AC_MAX_DIMS];
    ac_contiguous_strides(a->ndim, a->shape, st);
    Tensor *gc = ac_materialize(g);
    ac_accum(a, ac_view_of(gc, a->ndim, a->shape, st, 0));
}

Tensor *torch_view(Tensor *a, int nd, const int64_t *shape) {
    ac_check_defined(a, "view");
    int64_t ns[AC_MAX_DIMS], st[AC_MAX_DIMS];
    infer_shape(a, nd, shape, ns, "view");
    if (!compute_stride(a, nd, ns, st))
        ac_error("view: view size is not compatible with input tensor's size and stride (at least one "
                 "dimension spans across two contiguous subspaces). Use .reshape(...) instead. "
                 "(input of size %s and stride %s, view %s)", ac_shape_str(a), ac_dims_str(a->ndim, a->stride),
                 ac_dims_str(nd, ns));
    return view_node("ViewBackward0", reshape_backward, ac_view_of(a, nd, ns, st, a->offset), a);
}

Tensor *torch_reshape(Tensor *a, int nd, const int64_t *shape) {
    ac_check_defined(a, "reshape");
    int64_t ns[AC_MAX_DIMS], st[AC_MAX_DIMS];
    infer_shape(a, nd, shape, ns, "reshape");
    if (compute_stride(a, nd, ns, st))
        return view_node("ReshapeAliasBackward0", reshape_backward, ac_view_of(a, nd, ns, st, a->offset), a);
    Tensor *c = ac_materialize(a); /* a copy, as PyTorch's clone + _unsafe_view */
    ac_contiguous_strides(nd, ns, st);
    return view_node("UnsafeViewBackward0", reshape_backward, ac_view_of(c, nd, ns, st, 0), a);
}

Tensor *torch_unsqueeze(Tensor *a, int64_t dim) {
    ac_check_defined(a, "unsqueeze");
    if (a->ndim >= AC_MAX_DIMS) ac_error("unsqueeze: tensors have at most %d dimensions", AC_MAX_DIMS);
    int64_t d = ac_wrap_dim(dim, a->ndim + 1, "unsqueeze");
    int64_t ns[AC_MAX_DIMS], st[AC_MAX_DIMS];
    for (int i = 0, k = 0; i <= a->ndim; i++) {
        if (i == d) {
            ns[i] = 1;
            st[i] = k < a->ndim ? a->stride[k] * a->shape[k] : 1;
        } else {
            ns[i] = a->shape[k];
            st[i] = a->stride[k];
            k++;
        }
    }
    return view_node("UnsqueezeBackward0", reshape_backward, ac_view_of(a, a->ndim + 1, ns, st, a->offset), a);
}

static void clone_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], g); }

Tensor *torch_contiguous(Tensor *a) {
    ac_check_defined(a, "contiguous");
    if (torch_is_contiguous(a)) return a;
    return view_node("CloneBackward0", clone_backward, ac_materialize(a), a);
}

Tensor *torch_clone(Tensor *a) {
    ac_check_defined(a, "clone");
    return view_node("CloneBackward0", clone_backward, ac_materialize(a), a);
}

/* ---- select / slice ---------------------------------------------------------------------- */

/* The window: along dim, len elements from start; a select drops the dim. */
typedef struct { int64_t dim, start, len; bool is_select; } SliceSaved;

/* Scatter g into zeros of the input's shape at the window. */
static void slice_backward(Node *n, Tensor *g) {
    const SliceSaved *sv = n->ctx;
    Tensor *a = n->inputs[0];
    Tensor *z = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
    int64_t dim = sv->dim, start = sv->start, len = sv->len;
    bool is_select = sv->is_select;
    int64_t shape[AC_MAX_DIMS], stride[AC_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (d == dim && is_select) continue;
        shape[nd] = d == dim ? len : a->shape[d];
        stride[nd++] = z->stride[d];
    }
    Tensor *dst = ac_view_of(z, nd, shape, stride, start * z->stride[dim]);
    const float *gd = ac_cdata(g);
    /* copy g (contiguous) into the strided window */
    int64_t cnt = torch_numel(g), idx[AC_MAX_DIMS] = {0}, off = dst->offset;
    float *zd = z->data;
    for (int64_t k = 0; k < cnt; k++) {
        zd[off] = gd[k];
        ac_advance(nd, shape, stride, idx, &off);
    }
    ac_accum(a, z);
}

Tensor *torch_select(Tensor *a, int64_t dim, int64_t index) {
    ac_check_defined(a, "select");
    if (a->ndim == 0) ac_error("select: select() cannot be applied to a 0-dim tensor.");
    int64_t d = ac_wrap_dim(dim, a->ndim, "select"), size = a->shape[d];
    if (index < -size || index >= size)
        ac_error("select: select(): index %lld out of range for tensor of size %s at dimension %lld",
                 (long long)index, ac_shape_str(a), (long long)d);
    if (index < 0) index += size;
    int64_t shape[AC_MAX_DIMS], stride[AC_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < a->ndim; i++)
        if (i != d) {
            shape[nd] = a->shape[i];
            stride[nd++] = a->stride[i];
        }
    Tensor *out = ac_view_of(a, nd, shape, stride, a->offset + index * a->stride[d]);
    Node *n = AC_NODE("SelectBackward0", slice_backward, out, a);
    if (n) *AC_CTX(n, SliceSaved) = (SliceSaved){d, index, 1, true};
    return out;
}

Tensor *torch_slice(Tensor *a, int64_t dim, int64_t start, int64_t end) {
    ac_check_defined(a, "slice");
    if (a->ndim == 0) ac_error("slice: slice() cannot be applied to a 0-dim tensor.");
    int64_t d = ac_wrap_dim(dim, a->ndim, "slice"), size = a->shape[d];
    /* Python slice semantics: negative counts from the end, then clamp. */
    if (start < 0) start += size;
    if (end < 0) end += size;
    if (start < 0) start = 0;
    if (start > size) start = size;
    if (end > size) end = size;
    if (end < start) end = start;
    int64_t shape[AC_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[d] = end - start;
    Tensor *out = ac_view_of(a, a->ndim, shape, a->stride, a->offset + start * a->stride[d]);
    Node *n = AC_NODE("SliceBackward0", slice_backward, out, a);
    if (n) *AC_CTX(n, SliceSaved) = (SliceSaved){d, start, end - start, false};
    return out;
}
