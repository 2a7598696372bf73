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
    ac_accum_pass(n, n->inputs[0], permuted(g, sv->inv));
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
    if (torch_is_contiguous(g)) { /* only re-viewed */
        ac_accum_pass(n, a, ac_view_of(g, a->ndim, a->shape, st, g->offset));
    } else {
        Tensor *gc = ac_materialize(g);
        ac_accum_new(a, ac_view_of(gc, a->ndim, a->shape, st, gc->offset));
    }
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
    if (a->ndim == 0) ac_raise(AC_INDEX_ERROR, "select: select() cannot be applied to a 0-dim tensor.");
    int64_t d = ac_wrap_dim(dim, a->ndim, "select"), size = a->shape[d];
    if (index < -size || index >= size)
        ac_raise(AC_INDEX_ERROR, "select: select(): index %lld out of range for tensor of size %s at dimension %lld",
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

/* ---- expand, permute, flatten ------------------------------------------------------------------ */

/* expand: a stride of 0 repeats an element; the gradient sums back over the repeats. */
static void expand_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], ac_sum_to(g, n->inputs[0])); }

Tensor *torch_expand(Tensor *a, int n, const int64_t *sizes) {
    ac_check_defined(a, "expand");
    if (n > AC_MAX_DIMS) ac_error("expand: at most %d dimensions, got %d", AC_MAX_DIMS, n);
    if (n < a->ndim)
        ac_error("expand: expand(torch.%sTensor{%s}, size=%s): the number of sizes provided (%d) must be greater or "
                 "equal to the number of dimensions in the tensor (%d)", ac_dtype_name(a->dtype), ac_shape_str(a),
                 ac_dims_str(n, sizes), n, a->ndim);
    int64_t shape[AC_MAX_DIMS], stride[AC_MAX_DIMS];
    for (int d = n - 1; d >= 0; d--) {
        int ad = d - (n - a->ndim);
        int64_t size = sizes[d];
        if (ad < 0) { /* a new leading dim */
            if (size < 0)
                ac_error("expand: The expanded size of the tensor (%lld) isn't allowed in a leading, non-existing "
                         "dimension %d", (long long)size, d);
            shape[d] = size, stride[d] = 0;
        } else if (size == -1 || size == a->shape[ad]) {
            shape[d] = a->shape[ad], stride[d] = a->stride[ad];
        } else if (a->shape[ad] == 1 && size >= 0) {
            shape[d] = size, stride[d] = 0;
        } else {
            ac_error("expand: The expanded size of the tensor (%lld) must match the existing size (%lld) at "
                     "non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s", (long long)size,
                     (long long)a->shape[ad], d, ac_dims_str(n, sizes), ac_shape_str(a));
        }
    }
    ac_shape_numel(n, shape);
    return view_node("ExpandBackward0", expand_backward, ac_view_of(a, n, shape, stride, a->offset), a);
}

Tensor *torch_permute(Tensor *a, int n, const int64_t *dims) {
    ac_check_defined(a, "permute");
    if (n != a->ndim)
        ac_error("permute: permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                 "of the desired ordering of dimensions i.e. input.dim() = %d is not equal to len(dims) = %d",
                 a->ndim, n);
    int perm[AC_MAX_DIMS];
    bool seen[AC_MAX_DIMS] = {false};
    for (int d = 0; d < n; d++) {
        int64_t w = ac_wrap_dim(dims[d], a->ndim, "permute");
        if (seen[w]) ac_error("permute: permute(): duplicate dims are not allowed.");
        seen[w] = true;
        perm[d] = (int)w;
    }
    if (n == 0) return view_node("PermuteBackward0", reshape_backward, ac_view_of(a, 0, NULL, NULL, a->offset), a);
    return permute_op(a, perm, "PermuteBackward0");
}

/* flatten(start_dim, end_dim): a reshape merging those dims (the tensor itself when nothing merges). */
Tensor *torch_flatten(Tensor *a, int64_t start_dim, int64_t end_dim) {
    ac_check_defined(a, "flatten");
    int64_t s = ac_wrap_dim(start_dim, a->ndim, "flatten"), e = ac_wrap_dim(end_dim, a->ndim, "flatten");
    if (s > e) ac_error("flatten: flatten() has invalid args: start_dim cannot come after end_dim");
    if (a->ndim == 0) return torch_reshape(a, SHAPE(1));
    if (s == e) return a;
    int64_t shape[AC_MAX_DIMS], merged = 1;
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (d < s || d > e) shape[nd++] = a->shape[d];
        else {
            merged *= a->shape[d];
            if (d == e) shape[nd++] = merged;
        }
    }
    return torch_reshape(a, nd, shape);
}

/* ---- chunk and split: consecutive slices ------------------------------------------------------ */

static Tensor *piece(Tensor *a, int64_t d, int64_t start, int64_t len, const char *name) {
    int64_t shape[AC_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[d] = len;
    Tensor *out = ac_view_of(a, a->ndim, shape, a->stride, a->offset + start * a->stride[d]);
    Node *n = AC_NODE(name, slice_backward, out, a);
    if (n) *AC_CTX(n, SliceSaved) = (SliceSaved){d, start, len, false};
    return out;
}

static Tensor **pieces(Tensor *a, int64_t d, int count, const int64_t *lens, const char *name) {
    Tensor **out = ac_arena_alloc(sizeof(Tensor *) * (size_t)(count ? count : 1));
    int64_t at = 0;
    for (int i = 0; i < count; i++) {
        out[i] = piece(a, d, at, lens[i], name);
        at += lens[i];
    }
    return out;
}

Tensor **torch_split(Tensor *a, int64_t split_size, int64_t dim, int *n) {
    ac_check_defined(a, "split");
    if (a->ndim == 0) ac_error("split: split expects at least a 1-dimensional tensor");
    int64_t d = ac_wrap_dim(dim, a->ndim, "split"), size = a->shape[d];
    if (split_size < 0 || (split_size == 0 && size != 0))
        ac_error("split: split_size can only be 0 if dimension size is 0, but got dimension size of %lld",
                 (long long)size);
    int64_t count = split_size ? (size + split_size - 1) / split_size : 1;
    if (count < 1) count = 1;
    if (count > 1 << 20) ac_error("split: %lld pieces are too many", (long long)count);
    int64_t *lens = ac_arena_alloc(sizeof(int64_t) * (size_t)count);
    for (int64_t i = 0; i < count; i++) lens[i] = size - i * split_size < split_size ? size - i * split_size : split_size;
    *n = (int)count;
    return pieces(a, d, (int)count, lens, "SplitBackward0");
}

Tensor **torch_chunk(Tensor *a, int64_t chunks, int64_t dim, int *n) {
    ac_check_defined(a, "chunk");
    if (a->ndim == 0) ac_error("chunk: chunk expects at least a 1-dimensional tensor");
    if (chunks <= 0) ac_error("chunk: chunk expects `chunks` to be greater than 0, got: %lld", (long long)chunks);
    int64_t d = ac_wrap_dim(dim, a->ndim, "chunk"), size = a->shape[d];
    int64_t split_size = (size + chunks - 1) / chunks;
    if (split_size == 0 && size == 0) { /* PyTorch: chunks pieces of size 0 */
        if (chunks > 1 << 20) ac_error("chunk: %lld pieces are too many", (long long)chunks);
        int64_t *lens = ac_arena_alloc(sizeof(int64_t) * (size_t)chunks);
        memset(lens, 0, sizeof(int64_t) * (size_t)chunks);
        *n = (int)chunks;
        return pieces(a, d, (int)chunks, lens, "SplitBackward0");
    }
    return torch_split(a, split_size, d, n);
}

Tensor **torch_split_with_sizes(Tensor *a, int nsizes, const int64_t *sizes, int64_t dim, int *n) {
    ac_check_defined(a, "split_with_sizes");
    if (a->ndim == 0) ac_error("split_with_sizes: split expects at least a 1-dimensional tensor");
    int64_t d = ac_wrap_dim(dim, a->ndim, "split_with_sizes"), total = 0;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0)
            ac_error("split_with_sizes: split_with_sizes expects split_sizes have only non-negative entries, but got "
                     "split_sizes=%s", ac_dims_str(nsizes, sizes));
        total += sizes[i];
    }
    if (total != a->shape[d])
        ac_error("split_with_sizes: split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size "
                 "at dimension %lld), but got split_sizes=%s", (long long)a->shape[d], (long long)d,
                 ac_dims_str(nsizes, sizes));
    *n = nsizes;
    return pieces(a, d, nsizes, sizes, "SplitWithSizesBackward0");
}
