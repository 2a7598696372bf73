/* The ops that pick elements: max and min (of all, or along a dim with their
 * indices), amax and amin (over dims), topk. A NaN counts as larger than any
 * number, as in PyTorch, so a NaN is what max returns.
 *     max/min along a dim, topk:  the gradient goes to the picked index
 *     max/min of all, amax/amin:  the gradient is shared evenly among the ties */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* a beats b: larger (or smaller), NaN beating every number */
static inline bool beats(float a, float b, bool largest) {
    if (isnan(b)) return false;
    if (isnan(a)) return true;
    return largest ? a > b : a < b;
}

/* a viewed as [outer, size, inner] around dim */
static void split3(const Tensor *a, int64_t dim, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = *inner = 1;
    *size = a->ndim ? a->shape[dim] : 1;
    for (int d = 0; d < a->ndim; d++) {
        if (d < dim) *outer *= a->shape[d];
        if (d > dim) *inner *= a->shape[d];
    }
}

/* ---- along one dim, with indices: max(dim), min(dim), topk ---------------------------------- */

/* The picked indices (int64, the output's shape, contiguous) and the dim they index. */
typedef struct { Tensor *indices; int64_t dim; } PickSaved;

/* dx = zeros with g scattered to the picked indices along dim */
static void pick_backward(Node *n, Tensor *g) {
    const PickSaved *sv = n->ctx;
    Tensor *a = n->inputs[0];
    Tensor *z = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
    int64_t outer, size, inner;
    split3(a, sv->dim, &outer, &size, &inner);
    int64_t rows = outer * inner, k = rows ? torch_numel(sv->indices) / rows : 0;
    const int64_t *ix = sv->indices->data;
    const float *gd = ac_cdata(g);
    float *zd = z->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t at = (o * k + j) * inner + i;
                zd[(o * size + ix[at]) * inner + i] += gd[at];
            }
    ac_accum(a, z);
}

/* shape of a with dim's size set to k (keepdim) or dim dropped */
static int picked_shape(const Tensor *a, int64_t dim, int64_t k, bool keepdim, int64_t *shape) {
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (d == dim && !keepdim) continue;
        shape[nd++] = d == dim ? k : a->shape[d];
    }
    return nd;
}

static torch_return_types max_min_dim(Tensor *a, int64_t dim, bool keepdim, bool largest) {
    const char *op = largest ? "max" : "min";
    ac_check_float(a, op);
    int64_t d = ac_wrap_dim(dim, a->ndim, op), outer, size, inner;
    split3(a, d, &outer, &size, &inner);
    if (size == 0)
        ac_raise(AC_INDEX_ERROR, "%s: %s(): Expected reduction dim %lld to have non-zero size.", op, op, (long long)d);
    int64_t shape[AC_MAX_DIMS];
    int nd = a->ndim ? picked_shape(a, d, 1, keepdim, shape) : 0;
    Tensor *values = ac_new(AC_FLOAT32, nd, shape), *indices = ac_new(AC_INT64, nd, shape);
    const float *x = ac_cdata(a);
    float *v = values->data;
    int64_t *ix = indices->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *p = x + o * size * inner + i;
            int64_t best = 0;
            for (int64_t j = 1; j < size; j++)
                if (beats(p[j * inner], p[best * inner], largest)) best = j; /* the first of equals */
            v[o * inner + i] = p[best * inner];
            ix[o * inner + i] = best;
        }
    Node *n = AC_NODE(largest ? "MaxBackward0" : "MinBackward0", pick_backward, values, a);
    if (n) *AC_CTX(n, PickSaved) = (PickSaved){indices, d};
    return (torch_return_types){values, indices};
}

torch_return_types torch_max_dim(Tensor *a, int64_t dim, bool keepdim) { return max_min_dim(a, dim, keepdim, true); }
torch_return_types torch_min_dim(Tensor *a, int64_t dim, bool keepdim) { return max_min_dim(a, dim, keepdim, false); }

/* the order topk returns: the larger (smaller) first, equals by index */
typedef struct { float v; int64_t j; } Entry;
static int cmp_largest(const void *p, const void *q) {
    const Entry *a = p, *b = q;
    if (beats(a->v, b->v, true)) return -1;
    if (beats(b->v, a->v, true)) return 1;
    return (a->j > b->j) - (a->j < b->j);
}
static int cmp_smallest(const void *p, const void *q) {
    const Entry *a = p, *b = q;
    if (beats(a->v, b->v, false)) return -1;
    if (beats(b->v, a->v, false)) return 1;
    return (a->j > b->j) - (a->j < b->j);
}

/* torch.topk(a, k, dim, largest, sorted): always sorted (sorted=False lets
 * PyTorch return any order; this one is as good as any). */
torch_return_types torch_topk(Tensor *a, int64_t k, int64_t dim, bool largest, bool sorted) {
    (void)sorted;
    ac_check_float(a, "topk");
    int64_t d = ac_wrap_dim(dim, a->ndim, "topk"), outer, size, inner;
    split3(a, d, &outer, &size, &inner);
    if (k < 0 || k > size) ac_error("topk: selected index k out of range");
    int64_t shape[AC_MAX_DIMS];
    int nd = a->ndim ? picked_shape(a, d, k, true, shape) : 0;
    Tensor *values = ac_new(AC_FLOAT32, nd, shape), *indices = ac_new(AC_INT64, nd, shape);
    const float *x = ac_cdata(a);
    float *v = values->data;
    int64_t *ix = indices->data;
    ac_mark m = ac_arena_mark();
    Entry *e = ac_arena_alloc(sizeof(Entry) * (size_t)(size ? size : 1));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            if (k > 0 && k <= size / 8) {
                /* a few of many (the sampler's top 25 of 50,257 logits): one pass keeping the best k
                 * in order, not a sort of the row. An element comes in only if it beats the k-th:
                 * its index is past every kept one, so an equal value stays behind, as in the sort. */
                int64_t n = 0;
                for (int64_t j = 0; j < size; j++) {
                    float c = x[(o * size + j) * inner + i];
                    if (n == k && !beats(c, e[k - 1].v, largest)) continue;
                    int64_t p = n < k ? n++ : k - 1;
                    for (; p > 0 && beats(c, e[p - 1].v, largest); p--) e[p] = e[p - 1];
                    e[p] = (Entry){c, j};
                }
            } else {
                for (int64_t j = 0; j < size; j++) e[j] = (Entry){x[(o * size + j) * inner + i], j};
                qsort(e, (size_t)size, sizeof *e, largest ? cmp_largest : cmp_smallest);
            }
            for (int64_t j = 0; j < (a->ndim ? k : 1); j++) { /* a 0-d input gives its element, k = 0 too (PyTorch) */
                v[(o * k + j) * inner + i] = e[j].v;
                ix[(o * k + j) * inner + i] = e[j].j;
            }
        }
    ac_arena_release(m);
    Node *n = AC_NODE("TopkBackward0", pick_backward, values, a);
    if (n) *AC_CTX(n, PickSaved) = (PickSaved){indices, d};
    return (torch_return_types){values, indices};
}

/* ---- over dims, ties sharing the gradient: max(), min(), amax, amin --------------------------- */

/* reduced[d]: dim d is reduced; count: elements that tie with the result, per output */
typedef struct { bool reduced[AC_MAX_DIMS]; Tensor *result, *count; ac_saved x; } ExtremeSaved;

/* strides of the kept-dims output seen through a's shape (0 on reduced dims) */
static void out_strides(const Tensor *a, const bool *reduced, int64_t *ostr) {
    int64_t s = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        ostr[d] = reduced[d] ? 0 : s;
        if (!reduced[d]) s *= a->shape[d];
    }
}

static void extreme_backward(Node *n, Tensor *g) {
    const ExtremeSaved *sv = n->ctx;
    Tensor *a = n->inputs[0];
    Tensor *r = ac_new_like(a);
    const float *x = ac_cdata(ac_unpack(n, sv->x)), *gd = ac_cdata(g), *res = sv->result->data, *cnt = sv->count->data;
    float *o = r->data;
    int64_t ostr[AC_MAX_DIMS], idx[AC_MAX_DIMS] = {0}, off = 0;
    out_strides(a, sv->reduced, ostr);
    for (int64_t k = 0, len = torch_numel(a); k < len; k++) {
        o[k] = x[k] == res[off] ? gd[off] / cnt[off] : 0.0f;
        ac_advance(a->ndim, a->shape, ostr, idx, &off);
    }
    ac_accum(a, r);
}

static Tensor *extreme(Tensor *a, int ndims, const int64_t *dims, bool keepdim, bool largest, bool all,
                       const char *op, const char *name) {
    ac_check_float(a, op);
    bool reduced[AC_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int64_t d = ac_wrap_dim(dims[i], a->ndim, op);
        if (reduced[d]) ac_error("%s: dim %lld appears multiple times in the list of dims", op, (long long)d);
        reduced[d] = true;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (all || ndims == 0) reduced[d] = true; /* amax(dim=()) reduces every dim, as PyTorch */
        if (reduced[d] && a->shape[d] == 0) {
            if (all) ac_error("%s: %s(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                              "reduction dim with the 'dim' argument.", op, op);
            ac_raise(AC_INDEX_ERROR, "%s: %s(): Expected reduction dim %d to have non-zero size.", op, op, d);
        }
    }
    int64_t kshape[AC_MAX_DIMS], shape[AC_MAX_DIMS];
    int knd = 0, nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        kshape[knd++] = reduced[d] ? 1 : a->shape[d];
        if (!reduced[d] || keepdim) shape[nd++] = reduced[d] ? 1 : a->shape[d];
    }
    Tensor *res = ac_new(AC_FLOAT32, knd, kshape), *cnt = ac_new_zeros(AC_FLOAT32, knd, kshape);
    float *r = res->data, *c = cnt->data;
    bool *seen = ac_arena_alloc((size_t)torch_numel(res) + 1);
    memset(seen, 0, (size_t)torch_numel(res) + 1);
    const float *x = ac_cdata(a);
    int64_t ostr[AC_MAX_DIMS], idx[AC_MAX_DIMS] = {0}, off = 0, len = torch_numel(a);
    out_strides(a, reduced, ostr);
    for (int64_t k = 0; k < len; k++) {
        if (!seen[off] || beats(x[k], r[off], largest)) r[off] = x[k], seen[off] = true;
        ac_advance(a->ndim, a->shape, ostr, idx, &off);
    }
    off = 0;
    memset(idx, 0, sizeof idx);
    for (int64_t k = 0; k < len; k++) {
        if (x[k] == r[off]) c[off] += 1.0f;
        ac_advance(a->ndim, a->shape, ostr, idx, &off);
    }
    int64_t st[AC_MAX_DIMS];
    ac_contiguous_strides(nd, shape, st);
    Tensor *out = ac_view_of(res, nd, shape, st, 0);
    Node *n = AC_NODE(name, extreme_backward, out, a);
    if (n) {
        ExtremeSaved *sv = AC_CTX(n, ExtremeSaved);
        memcpy(sv->reduced, reduced, sizeof reduced);
        sv->result = res;
        sv->count = cnt;
        sv->x = ac_save(n, a);
    }
    return out;
}

Tensor *torch_max(Tensor *a) { return extreme(a, 0, NULL, false, true, true, "max", "MaxBackward1"); }
Tensor *torch_min(Tensor *a) { return extreme(a, 0, NULL, false, false, true, "min", "MinBackward1"); }
Tensor *torch_amax(Tensor *a, int ndims, const int64_t *dims, bool keepdim) {
    return extreme(a, ndims, dims, keepdim, true, false, "amax", "AmaxBackward0");
}
Tensor *torch_amin(Tensor *a, int ndims, const int64_t *dims, bool keepdim) {
    return extreme(a, ndims, dims, keepdim, false, false, "amin", "AminBackward0");
}
