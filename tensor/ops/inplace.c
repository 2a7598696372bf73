/* In-place writes: fill_, zero_, copy_, masked_fill_, index_put_ (x[idx] = v),
 * and x[i] = v / x[i, :] = t as a write into a view (torch_select then copy_
 * or fill_).
 *
 * Each write bumps the storage's version counter (t._version, shared by its
 * views), so a backward that needs the old values raises PyTorch's "modified
 * by an inplace operation" error instead of computing a wrong gradient.
 *
 * Autograd, as PyTorch's rebase_history: the write becomes a node on the
 * tensor that owns the storage (the base). Its inputs are the base's old
 * history and the source; its backward passes the gradient through where the
 * old values survive and hands the overwritten region's gradient to the
 * source. The base's grad_fn is that node (FillBackward2, CopyBackwards, ...,
 * or CopySlices when a view was written); the written view gets
 * AsStridedBackward0, a window onto the base's new history.
 *     in the forward:  base' = base with region R replaced by f(src)
 *     so:              d base = g with R's replaced elements zeroed,  d src = (g restricted to R) through f */
#include <string.h>

#include "internal.h"

typedef enum { IP_FILL, IP_ZERO, IP_COPY, IP_MASKED_FILL, IP_INDEX_PUT } IpKind;
static const char *const ip_names[] = {"FillBackward2", "ZeroBackward0", "CopyBackwards", "MaskedFillBackward0",
                                       "IndexPutBackward0"};

/* The written region, as a view of the base (contiguous, offset 0). */
typedef struct {
    int nd;
    int64_t shape[AC_MAX_DIMS], stride[AC_MAX_DIMS], offset;
} Region;

typedef struct {
    IpKind kind;
    Region r;
    Tensor *mask;    /* masked_fill_: the mask expanded to the region's shape (contiguous bool) */
    Tensor *idx;     /* index_put_: the checked, wrapped indices (int64, contiguous) */
    bool accumulate; /* index_put_(..., accumulate=True): the old values survive */
} InplaceSaved;

/* Refuse what PyTorch refuses: an in-place write into a leaf that requires
 * grad (or a view of one) while grad mode is on. */
void ac_check_inplace(Tensor *t, const char *op) {
    ac_check_defined(t, op);
    if (!torch_is_grad_enabled()) return;
    TensorImpl *ti = ac_impl(t);
    if (t->requires_grad && !t->grad_fn)
        ac_error("%s: a leaf Variable that requires grad is being used in an in-place operation.", op);
    if (ti->base && t->requires_grad && ti->base->pub.requires_grad && !ti->base->pub.grad_fn)
        ac_error("%s: a view of a leaf Variable that requires grad is being used in an in-place operation.", op);
}

/* A float tensor that is no view, its elements in order from its storage's
 * start: an in-place op can write its result straight into it. */
static bool whole_float(const Tensor *t) {
    return t->dtype == AC_FLOAT32 && !ac_impl(t)->base && t->offset == 0 && torch_is_contiguous(t);
}

/* src broadcasts to dst's very shape (it may not add dims or grow dst's). */
static bool fits_into(const Tensor *src, const Tensor *dst) {
    bool ok = src->ndim <= dst->ndim;
    for (int d = 0; ok && d < src->ndim; d++) {
        int64_t s = src->shape[src->ndim - 1 - d], t = dst->shape[dst->ndim - 1 - d];
        ok = s == t || s == 1;
    }
    return ok;
}

/* src's element offsets seen through dst's shape (broadcast), or an error in PyTorch's words. */
static void broadcast_to(const Tensor *src, const Tensor *dst, int64_t *stride, const char *op, const char *what) {
    if (!fits_into(src, dst)) {
        for (int d = 0; d < src->ndim && d < dst->ndim; d++) {
            int64_t s = src->shape[src->ndim - 1 - d], t = dst->shape[dst->ndim - 1 - d];
            if (s != t && s != 1)
                ac_error("%s: The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton "
                         "dimension %d", op, (long long)t, (long long)s, dst->ndim - 1 - d);
        }
        int nd;
        int64_t shape[AC_MAX_DIMS];
        if (ac_broadcast_shape(src, dst, &nd, shape))
            ac_error("%s: output with shape %s doesn't match the broadcast shape %s (%s)", op, ac_shape_str(dst),
                     ac_dims_str(nd, shape), what);
        ac_error("%s: %s of shape %s cannot be broadcast to %s", op, what, ac_shape_str(src), ac_shape_str(dst));
    }
    for (int d = 0; d < dst->ndim; d++) {
        int sd = d - (dst->ndim - src->ndim);
        stride[d] = sd < 0 || src->shape[sd] == 1 ? 0 : src->stride[sd];
    }
}

/* ---- autograd -------------------------------------------------------------------------- */

/* Zero the elements of region r of g (contiguous, the base's shape) that the write replaced. */
static void zero_replaced(const InplaceSaved *sv, Tensor *g) {
    const Region *r = &sv->r;
    float *gd = g->data;
    int64_t n = ac_shape_numel(r->nd, r->shape), idx[AC_MAX_DIMS] = {0}, off = r->offset;
    if (sv->kind == IP_INDEX_PUT) { /* rows idx[j] of the region */
        int64_t inner = r->nd ? n / (r->shape[0] ? r->shape[0] : 1) : 1;
        const int64_t *ip = sv->idx->data;
        for (int64_t j = 0, cnt = torch_numel(sv->idx); j < cnt && inner; j++) {
            int64_t ridx[AC_MAX_DIMS] = {0}, roff = r->offset + ip[j] * (r->nd ? r->stride[0] : 0);
            for (int64_t k = 0; k < inner; k++) {
                gd[roff] = 0.0f;
                ac_advance(r->nd - 1, r->shape + 1, r->stride + 1, ridx, &roff);
            }
        }
        return;
    }
    const bool *m = sv->mask ? sv->mask->data : NULL;
    for (int64_t k = 0; k < n; k++) {
        if (!m || m[k]) gd[off] = 0.0f;
        ac_advance(r->nd, r->shape, r->stride, idx, &off);
    }
}

static void inplace_backward(Node *n, Tensor *g) {
    const InplaceSaved *sv = n->ctx;
    Tensor *base = n->inputs[0], *src = n->n_inputs > 1 ? n->inputs[1] : NULL;
    Tensor *gb = ac_materialize(g); /* ours to change: contiguous, the base's shape */
    if (src && ac_needs_grad(src)) {
        Tensor *region = ac_materialize(ac_view_of(gb, sv->r.nd, sv->r.shape, sv->r.stride, sv->r.offset));
        if (sv->kind == IP_INDEX_PUT) /* values[j] went to row idx[j]: its gradient comes from there */
            region = torch_index(region, sv->idx);
        ac_accum(src, ac_sum_to(region, src));
    }
    if (ac_needs_grad(base)) {
        if (!sv->accumulate) zero_replaced(sv, gb);
        ac_accum(base, gb);
    }
}

/* The written view's new grad_fn: its window of the base's gradient. */
static void as_strided_backward(Node *n, Tensor *g) {
    const Region *r = n->ctx;
    Tensor *base = n->inputs[0];
    Tensor *z = ac_new_zeros(AC_FLOAT32, base->ndim, base->shape);
    const float *gd = ac_cdata(g);
    float *zd = z->data;
    int64_t cnt = torch_numel(g), idx[AC_MAX_DIMS] = {0}, off = r->offset;
    for (int64_t k = 0; k < cnt; k++) {
        zd[off] += gd[k]; /* += : a window may see one element twice (stride 0) */
        ac_advance(r->nd, r->shape, r->stride, idx, &off);
    }
    ac_accum(base, z);
}

/* After writing t: bump the version and record the write in the base's history. */
static void record(Tensor *t, InplaceSaved sv, Tensor *src) {
    ac_bump_version(t);
    TensorImpl *ti = ac_impl(t);
    Tensor *base = ti->base ? &ti->base->pub : t;
    bool src_grad = src && src->requires_grad;
    if (!torch_is_grad_enabled() || !(t->requires_grad || base->requires_grad || src_grad)) return;
    if (src && !src_grad) src = NULL;
    sv.r.nd = t->ndim;
    memcpy(sv.r.shape, t->shape, sizeof sv.r.shape);
    memcpy(sv.r.stride, t->stride, sizeof sv.r.stride);
    sv.r.offset = t->offset - base->offset;
    Tensor *ins[2] = {base, src};
    Node *n = ac_node(ti->base ? "CopySlices" : ip_names[sv.kind], inplace_backward, base, src ? 2 : 1, ins);
    if (!n) return; /* nothing on the base's side requires grad (t is a view that does, alone) */
    *AC_CTX(n, InplaceSaved) = sv;
    if (ti->base) {
        Node *v = ac_node("AsStridedBackward0", as_strided_backward, t, 1, &base);
        if (v) *AC_CTX(v, Region) = sv.r;
    }
}

/* ---- the writes ------------------------------------------------------------------------ */

/* fill_ and zero_: every element of t (any strides) set to value. */
static Tensor *fill(Tensor *t, double value, IpKind kind, const char *op) {
    ac_check_inplace(t, op);
    int64_t n = torch_numel(t), idx[AC_MAX_DIMS] = {0}, off = t->offset;
    for (int64_t k = 0; k < n; k++) {
        ac_store_element(t, off, value);
        ac_advance(t->ndim, t->shape, t->stride, idx, &off);
    }
    record(t, (InplaceSaved){.kind = kind}, NULL);
    return t;
}

Tensor *torch_fill_(Tensor *t, double value) { return fill(t, value, IP_FILL, "fill_"); }
Tensor *torch_zero_(Tensor *t) { return fill(t, 0.0, IP_ZERO, "zero_"); }

/* dst.copy_(src): src broadcast to dst's shape and converted to dst's dtype. */
Tensor *torch_copy_(Tensor *dst, Tensor *src) {
    ac_check_defined(src, "copy_");
    ac_check_inplace(dst, "copy_");
    if (src->requires_grad && torch_is_grad_enabled() && dst->dtype != AC_FLOAT32)
        ac_error("copy_: a %s destination cannot carry the gradient of a Float source", ac_dtype_name(dst->dtype));
    int64_t sst[AC_MAX_DIMS];
    broadcast_to(src, dst, sst, "copy_", "the source");
    Tensor *s = src->data == dst->data ? ac_materialize(src) : src; /* the two may overlap */
    if (s != src) broadcast_to(s, dst, sst, "copy_", "the source");
    int64_t n = torch_numel(dst), idx[AC_MAX_DIMS] = {0}, off = dst->offset, soff = s->offset;
    for (int64_t k = 0; k < n; k++) {
        if (dst->dtype == AC_FLOAT32 && s->dtype == AC_FLOAT32)
            ((float *)dst->data)[off] = ((const float *)s->data)[soff];
        else
            ac_store_element(dst, off, ac_element_at(s, soff));
        for (int d = dst->ndim - 1; d >= 0; d--) { /* the odometer over two sets of strides */
            off += dst->stride[d];
            soff += sst[d];
            if (++idx[d] < dst->shape[d]) break;
            off -= dst->stride[d] * dst->shape[d];
            soff -= sst[d] * dst->shape[d];
            idx[d] = 0;
        }
    }
    record(dst, (InplaceSaved){.kind = IP_COPY}, src);
    return dst;
}

Tensor *torch_masked_fill_(Tensor *t, Tensor *mask, double value) {
    ac_check_defined(mask, "masked_fill_");
    ac_check_inplace(t, "masked_fill_");
    if (mask->dtype != AC_BOOL)
        ac_error("masked_fill_: masked_fill_ only supports boolean masks, but got mask with dtype %s",
                 ac_dtype_name(mask->dtype) /* PyTorch's words, with its C++ type name */);
    int64_t mst[AC_MAX_DIMS];
    broadcast_to(mask, t, mst, "masked_fill_", "the mask");
    if (whole_float(t)) {
        ac_masked_fill_whole_(t, mask, value);
        return t;
    }
    Tensor *m = ac_new(AC_BOOL, t->ndim, t->shape); /* the mask at t's shape, kept for the backward */
    bool *mp = m->data;
    int64_t n = torch_numel(t), idx[AC_MAX_DIMS] = {0}, moff = mask->offset;
    for (int64_t k = 0; k < n; k++) {
        mp[k] = ((const bool *)mask->data)[moff];
        ac_advance(t->ndim, t->shape, mst, idx, &moff);
    }
    int64_t off = t->offset, tidx[AC_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        if (mp[k]) ac_store_element(t, off, value);
        ac_advance(t->ndim, t->shape, t->stride, tidx, &off);
    }
    record(t, (InplaceSaved){.kind = IP_MASKED_FILL, .mask = m}, NULL);
    return t;
}

/* t.index_put_((index,), values, accumulate): t[index] = values along dim 0
 * (index int64 of any shape, negative from the end), values broadcast to
 * index.shape + t.shape[1:]. Without accumulate a repeated index keeps the
 * last value written; with it, the values add up. */
Tensor *torch_index_put_(Tensor *t, Tensor *index, Tensor *values, bool accumulate) {
    ac_check_defined(values, "index_put_");
    ac_check_defined(index, "index_put_");
    ac_check_inplace(t, "index_put_");
    if (t->ndim == 0) ac_raise(AC_INDEX_ERROR, "index_put_: too many indices for tensor of dimension 0");
    if (index->dtype != AC_INT64)
        ac_raise(AC_INDEX_ERROR, "index_put_: tensors used as indices must be long, byte or bool tensors (got %s)",
                 ac_dtype_name(index->dtype));
    if (values->dtype != t->dtype)
        ac_error("index_put_: Index put requires the source and destination dtypes match, got %s for the "
                 "destination and %s for the source.", ac_dtype_name(t->dtype), ac_dtype_name(values->dtype));
    if (index->ndim + t->ndim - 1 > AC_MAX_DIMS) ac_error("index_put_: the indexed shape has too many dimensions");
    Tensor *idx = ac_materialize(index);
    int64_t *ip = idx->data, size = t->shape[0], cnt = torch_numel(idx);
    for (int64_t j = 0; j < cnt; j++) {
        if (ip[j] < -size || ip[j] >= size)
            ac_raise(AC_INDEX_ERROR, "index_put_: index %lld is out of bounds for dimension 0 with size %lld",
                     (long long)ip[j], (long long)size);
        if (ip[j] < 0) ip[j] += size;
    }
    /* the shape values broadcast to: index.shape + t.shape[1:] */
    Tensor like = {.ndim = idx->ndim + t->ndim - 1};
    for (int d = 0; d < idx->ndim; d++) like.shape[d] = idx->shape[d];
    for (int d = 1; d < t->ndim; d++) like.shape[idx->ndim + d - 1] = t->shape[d];
    int64_t vst[AC_MAX_DIMS];
    if (!fits_into(values, &like))
        ac_error("index_put_: shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s",
                 ac_shape_str(values), ac_dims_str(like.ndim, like.shape));
    broadcast_to(values, &like, vst, "index_put_", "the values");
    Tensor *v = ac_materialize(ac_view_of(values, like.ndim, like.shape, vst, values->offset)); /* may overlap t */
    int64_t inner = cnt ? torch_numel(v) / cnt : 0;
    for (int64_t j = 0; j < cnt; j++) {
        int64_t idx2[AC_MAX_DIMS] = {0}, off = t->offset + ip[j] * t->stride[0];
        for (int64_t k = 0; k < inner; k++) {
            double x = ac_element_at(v, j * inner + k);
            if (t->dtype == AC_FLOAT32) { /* float arithmetic, as PyTorch's */
                float *p = (float *)t->data + off;
                *p = accumulate ? *p + (float)x : (float)x;
            } else {
                ac_store_element(t, off, accumulate ? ac_element_at(t, off) + x : x);
            }
            ac_advance(t->ndim - 1, t->shape + 1, t->stride + 1, idx2, &off);
        }
    }
    record(t, (InplaceSaved){.kind = IP_INDEX_PUT, .idx = idx, .accumulate = accumulate}, values);
    return t;
}

/* ---- x.add_(y), x.sub_(y), x.mul_(y), x.div_(y) ------------------------------------------
 * The out-of-place op on x's current values, written back with copy_'s
 * rebase_history (so x's version goes up and its new history is the op's
 * node, named as PyTorch names it): in the forward x' = op(x, y), so dx and dy
 * are op's own gradients. mul_ and div_ compute from a copy of x, since their
 * backward reads the old x, which the write replaces. */
typedef Tensor *(*BinFn)(Tensor *, Tensor *);

static Tensor *arith_(Tensor *x, Tensor *y, BinFn fn, const char *op, const char *node, bool reads_x) {
    ac_check_defined(x, op);
    ac_check_defined(y, op);
    ac_check_inplace(x, op);
    if (!fits_into(y, x))
        ac_error("%s: output with shape %s doesn't match the broadcast shape %s", op, ac_shape_str(x),
                 ac_shape_str(y));
    bool grad = torch_is_grad_enabled() && (x->requires_grad || y->requires_grad);
    Tensor *r = fn(reads_x && grad ? torch_clone(x) : x, y);
    torch_copy_(x, r);
    if (grad && x->grad_fn && !ac_impl(x)->base) x->grad_fn->name = node; /* a view keeps AsStridedBackward0 */
    return x;
}

Tensor *torch_add_(Tensor *x, Tensor *y) { return arith_(x, y, torch_add, "add_", "AddBackward0", false); }
Tensor *torch_sub_(Tensor *x, Tensor *y) { return arith_(x, y, torch_sub, "sub_", "SubBackward0", false); }
Tensor *torch_mul_(Tensor *x, Tensor *y) { return arith_(x, y, torch_mul, "mul_", "MulBackward0", true); }
Tensor *torch_div_(Tensor *x, Tensor *y) { return arith_(x, y, torch_div, "div_", "DivBackward0", true); }

/* kind: 0-3, add sub mul div (ac_scalar_op_whole_'s) */
static Tensor *arith_scalar_(Tensor *x, double s, Tensor *(*fn)(Tensor *, double), int kind, const char *op,
                             const char *node) {
    ac_check_defined(x, op);
    ac_check_inplace(x, op);
    if (whole_float(x)) {
        ac_scalar_op_whole_(x, kind, s);
        return x;
    }
    Tensor *r = fn(x, s); /* a number times x: its backward needs neither old value */
    torch_copy_(x, r);
    if (torch_is_grad_enabled() && x->requires_grad && x->grad_fn && !ac_impl(x)->base) x->grad_fn->name = node;
    return x;
}

Tensor *torch_add_scalar_(Tensor *x, double s) { return arith_scalar_(x, s, torch_add_scalar, 0, "add_", "AddBackward0"); }
Tensor *torch_sub_scalar_(Tensor *x, double s) { return arith_scalar_(x, s, torch_sub_scalar, 1, "sub_", "SubBackward0"); }
Tensor *torch_mul_scalar_(Tensor *x, double s) { return arith_scalar_(x, s, torch_mul_scalar, 2, "mul_", "MulBackward0"); }
Tensor *torch_div_scalar_(Tensor *x, double s) { return arith_scalar_(x, s, torch_div_scalar, 3, "div_", "DivBackward0"); }
