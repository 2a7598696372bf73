/* index_select, embedding lookup and a[idx]: gather rows by int64 indices. The
 * backward adds each gradient row into its source row, so a repeated index
 * receives the sum of its contributions. */
#include <string.h>

#include "internal.h"

/* A contiguous int64 copy of idx, every index checked (negative ones wrapped when allowed). */
static Tensor *checked_indices(Tensor *idx, int64_t limit, bool wrap_negative, const char *op) {
    ac_check_defined(idx, op);
    if (idx->dtype != AC_INT64 && idx->dtype != AC_INT32)
        ac_error("%s: Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                 "Int; but got torch.%sTensor instead (while checking arguments for %s)", op, ac_dtype_name(idx->dtype), op);
    Tensor *c = idx->dtype == AC_INT64 ? ac_materialize(idx) : ac_new(AC_INT64, idx->ndim, idx->shape);
    if (idx->dtype == AC_INT32) torch_copy_(c, idx); /* an int32 index works as in PyTorch */
    int64_t *p = c->data;
    for (int64_t i = 0, n = torch_numel(idx); i < n; i++) {
        if (wrap_negative && p[i] < 0 && p[i] >= -limit) p[i] += limit;
        if (p[i] < 0 || p[i] >= limit) {
            if (wrap_negative)
                ac_raise(AC_INDEX_ERROR, "%s: index %lld is out of bounds for dimension 0 with size %lld", op, (long long)p[i],
                         (long long)limit);
            ac_raise(AC_INDEX_ERROR, "%s: index out of range in self (index %lld, valid range [0, %lld))", op, (long long)p[i],
                     (long long)limit);
        }
    }
    return c;
}

/* Gather: out[o, j, i] = a[o, idx[j], i] for a viewed as [outer, size, inner]. */
static void gather(const float *a, int64_t outer, int64_t size, int64_t inner, const int64_t *idx,
                   int64_t n, float *out) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            memcpy(out + (o * n + j) * inner, a + (o * size + idx[j]) * inner, sizeof(float) * (size_t)inner);
}

/* Rows that share an index add up in index order; threads split the columns
 * (inner), so every element still sums its contributions in that order. */
typedef struct {
    const int64_t *ip;
    const float *gd;
    float *zd;                  /* rows [r0, r1) of the gradient (all of them, or a block of a leaf's) */
    int64_t outer, size, inner, pad, cnt, r0, r1;
} Scatter;

static void scatter_task(void *ctx, int64_t c0, int64_t c1, int chunk) {
    const Scatter *s = ctx;
    int64_t rows = s->r1 - s->r0;
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t j = 0; j < s->cnt; j++) {
            if (s->ip[j] == s->pad || s->ip[j] < s->r0 || s->ip[j] >= s->r1) continue; /* padding_idx gets no gradient */
            float *dst = s->zd + (o * rows + s->ip[j] - s->r0) * s->inner;
            const float *src = s->gd + (o * s->cnt + j) * s->inner;
            for (int64_t i = c0; i < c1; i++) dst[i] += src[i];
        }
}

/* The indices (the op's own checked copy: nobody can change them in place) and
 * the input seen as [outer, size, inner]; pad: the index that gets no gradient, or -1. */
typedef struct { Tensor *idx; int64_t outer, size, inner, pad; } IndexSaved;

static void scatter(Scatter *s) {
    int64_t work = s->outer * s->cnt; /* rows added per column */
    ac_parallel_for(s->inner, work >= AC_GRAIN ? 8 : AC_GRAIN / (work + 1) + 8, scatter_task, s);
}

static void scatter_add_backward(Node *n, Tensor *g) {
    const IndexSaved *sv = n->ctx;
    Tensor *a = n->inputs[0];
    Scatter s = {sv->idx->data, ac_cdata(g), NULL, sv->outer, sv->size, sv->inner, sv->pad, torch_numel(sv->idx), 0, sv->size};
    bool add = false;
    float *into = sv->outer == 1 && torch_numel(a) >= ac_pieces_from ? ac_leaf_grad(a, &add) : NULL; /* a big leaf: a block of rows at a time */
    if (into) {
        /* A big leaf (the GPT's 50257-row embedding): its first gradient made
         * in place, or a block of rows at a time made and added to it (rows
         * no index reaches get + 0, as the whole zero tensor would give them),
         * instead of a whole zero tensor beside it. */
        if (!add) {
            ac_zero_floats(into, torch_numel(a)); /* GPT-2's 154 MB: all threads, not one while the rest wait */
            s.zd = into;
            scatter(&s);
            return;
        }
        int64_t block = ac_piece_floats / s.inner > 0 ? ac_piece_floats / s.inner : 1;
        float *tmp = ac_new(AC_FLOAT32, 1, (int64_t[]){block * s.inner})->data;
        for (int64_t r0 = 0; r0 < sv->size; r0 += block) {
            s.r0 = r0;
            s.r1 = sv->size - r0 < block ? sv->size : r0 + block;
            s.zd = tmp;
            memset(tmp, 0, sizeof(float) * (size_t)((s.r1 - r0) * s.inner));
            scatter(&s);
            ac_add_into(into + r0 * s.inner, tmp, (s.r1 - r0) * s.inner);
        }
        return;
    }
    Tensor *z = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
    s.zd = z->data;
    scatter(&s);
    ac_accum(a, z);
}

Tensor *torch_index_select(Tensor *a, int64_t dim, Tensor *index) {
    ac_check_float(a, "index_select");
    int64_t d = ac_wrap_dim(dim, a->ndim, "index_select");
    if (index) ac_check_live(index, "index_select");
    if (index && index->ndim > 1) ac_raise(AC_INDEX_ERROR, "index_select: index_select(): Index is supposed to be a vector (got %dD)", index->ndim);
    int64_t size = a->ndim ? a->shape[d] : 1;
    if (a->ndim == 0 && index && torch_numel(index) != 1) /* a scalar's result holds one element */
        ac_error("index_select: index_select(): Index to scalar can have only 1 value, got %lld value(s)",
                 (long long)torch_numel(index));
    Tensor *idx = checked_indices(index, size, false, "index_select");
    int64_t cnt = torch_numel(idx), outer = 1, inner = 1, shape[AC_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) {
        if (i < d) outer *= a->shape[i];
        if (i > d) inner *= a->shape[i];
        shape[i] = i == d ? cnt : a->shape[i];
    }
    Tensor *out = ac_new(AC_FLOAT32, a->ndim, shape);
    gather(ac_cdata(a), outer, size, inner, idx->data, cnt, out->data);
    Node *n = AC_NODE("IndexSelectBackward0", scatter_add_backward, out, a);
    if (n) *AC_CTX(n, IndexSaved) = (IndexSaved){idx, outer, size, inner, -1};
    return out;
}

Tensor *torch_embedding(Tensor *weight, Tensor *indices, int64_t padding_idx) {
    ac_check_defined(weight, "embedding");
    if (weight->dtype != AC_BFLOAT16) ac_check_float(weight, "embedding");
    if (weight->ndim != 2) ac_error("embedding: 'weight' must be 2-D (got %s)", ac_shape_str(weight));
    if (padding_idx < -1 || padding_idx >= weight->shape[0]) /* -1: none (C has no None) */
        ac_error("embedding: Padding_idx must be within num_embeddings (padding_idx=%lld, num_embeddings=%lld)",
                 (long long)padding_idx, (long long)weight->shape[0]);
    Tensor *idx = checked_indices(indices, weight->shape[0], false, "embedding");
    if (idx->ndim + 1 > AC_MAX_DIMS) ac_error("embedding: indices have too many dimensions");
    int64_t cnt = torch_numel(idx), dim = weight->shape[1], shape[AC_MAX_DIMS];
    for (int i = 0; i < idx->ndim; i++) shape[i] = idx->shape[i];
    shape[idx->ndim] = dim;
    Tensor *out = ac_new(AC_FLOAT32, idx->ndim + 1, shape);
    if (weight->dtype == AC_BFLOAT16) { /* a weight held for generation: its rows widened, exactly */
        if (torch_is_grad_enabled() && weight->requires_grad)
            ac_error("embedding: the weight %s is held as bfloat16, for generation: no gradient flows through it "
                     "(run under torch.no_grad(), or hold the weights as float32 to train)", ac_shape_str(weight));
        if (!torch_is_contiguous(weight)) ac_error("embedding: a bfloat16 weight must be contiguous, got %s", ac_shape_str(weight));
        const uint16_t *wd = (const uint16_t *)weight->data + weight->offset;
        const int64_t *ip = idx->data;
        float *o = out->data;
        for (int64_t j = 0; j < cnt; j++)
            for (int64_t k = 0; k < dim; k++) o[j * dim + k] = ac_bf16_to_f32(wd[ip[j] * dim + k]);
        return out;
    }
    gather(ac_cdata(weight), 1, weight->shape[0], dim, idx->data, cnt, out->data);
    Node *n = AC_NODE("EmbeddingBackward0", scatter_add_backward, out, weight);
    if (n) *AC_CTX(n, IndexSaved) = (IndexSaved){idx, 1, weight->shape[0], dim, padding_idx};
    return out;
}

/* a[idx]: indexing the first dim with an int64 tensor of any shape (negative
 * indices count from the end); the result has shape idx.shape + a.shape[1:]. */
Tensor *torch_index(Tensor *a, Tensor *index) {
    ac_check_float(a, "index");
    if (a->ndim == 0) ac_raise(AC_INDEX_ERROR, "index: too many indices for tensor of dimension 0");
    Tensor *idx = checked_indices(index, a->shape[0], true, "index");
    if (idx->ndim + a->ndim - 1 > AC_MAX_DIMS) ac_error("index: the result would have too many dimensions");
    int64_t inner = 1, shape[AC_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < idx->ndim; i++) shape[nd++] = idx->shape[i];
    for (int i = 1; i < a->ndim; i++) {
        shape[nd++] = a->shape[i];
        inner *= a->shape[i];
    }
    Tensor *out = ac_new(AC_FLOAT32, nd, shape);
    gather(ac_cdata(a), 1, a->shape[0], inner, idx->data, torch_numel(idx), out->data);
    Node *n = AC_NODE("IndexBackward0", scatter_add_backward, out, a);
    if (n) *AC_CTX(n, IndexSaved) = (IndexSaved){idx, 1, a->shape[0], inner, -1};
    return out;
}

/* ---- gather and scatter_add along a dim ---------------------------------------------------------
 * gather:       out[i][j][k] = a[index[i][j][k]][j][k]          (dim 0; likewise for the others)
 * scatter_add:  out = a, then out[index[i][j][k]][j][k] += src[i][j][k]
 * Each is the other's backward: d a (gather) = scatter_add of g at index;
 * d src (scatter_add) = gather of g at index, d a = g. index has a's number of
 * dims and sizes no larger than a's (than src's too, for scatter_add) outside dim. */

typedef struct { Tensor *idx; int64_t dim; } GatherSaved;

/* index checked (int64, dims, sizes, bounds) and made contiguous */
static Tensor *dim_indices(const Tensor *a, int64_t d, Tensor *index, const Tensor *src, const char *op) {
    ac_check_defined(index, op);
    if (index->dtype != AC_INT64) ac_error("%s: %s(): Expected dtype int64 for index", op, op);
    int nd = a->ndim ? a->ndim : 1;
    if ((index->ndim ? index->ndim : 1) != nd)
        ac_error("%s: Index tensor must have the same number of dimensions as %s tensor", op,
                 src ? "self" : "input");
    if (src && (src->ndim ? src->ndim : 1) != nd)
        ac_error("%s: Index tensor must have the same number of dimensions as src tensor", op);
    for (int k = 0; k < index->ndim && a->ndim; k++) {
        bool self_ok = k == d || index->shape[k] <= a->shape[k], src_ok = !src || index->shape[k] <= src->shape[k];
        if (src && (!self_ok || !src_ok))
            ac_error("%s: Expected index %s to be smaller than self %s apart from dimension %lld and to be smaller "
                     "size than src %s", op, ac_shape_str(index), ac_shape_str(a), (long long)d, ac_shape_str(src));
        if (!self_ok)
            ac_error("%s: Size does not match at dimension %d expected index %s to be smaller than self %s apart "
                     "from dimension %lld", op, k, ac_shape_str(index), ac_shape_str(a), (long long)d);
    }
    Tensor *idx = ac_materialize(index);
    int64_t size = a->ndim ? a->shape[d] : 1, *p = idx->data;
    for (int64_t i = 0, n = torch_numel(idx); i < n; i++) /* no negative indices here, as in PyTorch */
        if (p[i] < 0 || p[i] >= size)
            ac_error("%s: index %lld is out of bounds for dimension %lld with size %lld", op, (long long)p[i],
                     (long long)d, (long long)size);
    return idx;
}

/* For every element e of idx (multi-index ix): a's offset with ix[dim] replaced by idx[e].
 * fn(ctx, e, a_offset). */
#define FOR_DIM_INDEX(idx, a_strides, dim, BODY)                                                    \
    do {                                                                                            \
        const int64_t *ip_ = (idx)->data;                                                           \
        int64_t ix_[AC_MAX_DIMS] = {0};                                                             \
        for (int64_t e = 0, n_ = torch_numel(idx); e < n_; e++) {                                   \
            int64_t aoff = 0;                                                                       \
            for (int k_ = 0; k_ < (idx)->ndim; k_++) aoff += (k_ == (dim) ? ip_[e] : ix_[k_]) * (a_strides)[k_]; \
            BODY;                                                                                   \
            for (int k_ = (idx)->ndim - 1; k_ >= 0; k_--) {                                         \
                if (++ix_[k_] < (idx)->shape[k_]) break;                                            \
                ix_[k_] = 0;                                                                        \
            }                                                                                       \
        }                                                                                           \
    } while (0)

static Tensor *gather_compute(Tensor *a, int64_t d, Tensor *idx) {
    Tensor *out = ac_new(AC_FLOAT32, idx->ndim, idx->shape);
    const float *x = ac_cdata(a);
    float *o = out->data;
    int64_t cs[AC_MAX_DIMS];
    ac_contiguous_strides(a->ndim, a->shape, cs);
    FOR_DIM_INDEX(idx, cs, d, o[e] = x[aoff]);
    return out;
}

/* z (contiguous, a's shape) += src scattered at idx; in index order, a fixed summation order */
static void scatter_into(Tensor *z, int64_t d, Tensor *idx, Tensor *src) {
    const float *s = ac_cdata(src);
    float *zd = z->data;
    int64_t ss[AC_MAX_DIMS];
    ac_contiguous_strides(src->ndim, src->shape, ss);
    int64_t six[AC_MAX_DIMS] = {0};
    FOR_DIM_INDEX(idx, z->stride, d, {
        int64_t soff = 0;
        for (int k = 0; k < idx->ndim; k++) soff += six[k] * ss[k];
        zd[aoff] += s[soff];
        for (int k = idx->ndim - 1; k >= 0; k--) {
            if (++six[k] < idx->shape[k]) break;
            six[k] = 0;
        }
    });
}

static void gather_backward(Node *n, Tensor *g) {
    const GatherSaved *sv = n->ctx;
    Tensor *a = n->inputs[0];
    Tensor *z = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
    scatter_into(z, sv->dim, sv->idx, g);
    ac_accum(a, z);
}

Tensor *torch_gather(Tensor *a, int64_t dim, Tensor *index) {
    ac_check_float(a, "gather");
    int64_t d = ac_wrap_dim(dim, a->ndim, "gather");
    Tensor *idx = dim_indices(a, d, index, NULL, "gather");
    Tensor *out = gather_compute(a, d, idx);
    Node *n = AC_NODE("GatherBackward0", gather_backward, out, a);
    if (n) *AC_CTX(n, GatherSaved) = (GatherSaved){idx, d};
    return out;
}

static void scatter_add_op_backward(Node *n, Tensor *g) {
    const GatherSaved *sv = n->ctx;
    Tensor *a = n->inputs[0], *src = n->inputs[1];
    if (ac_needs_grad(a)) ac_accum(a, g);
    if (ac_needs_grad(src)) { /* gather of g at idx, into src's shape (index may be smaller) */
        Tensor *part = gather_compute(g, sv->dim, sv->idx);
        Tensor *z = ac_new_zeros(AC_FLOAT32, src->ndim, src->shape);
        torch_copy_(ac_view_of(z, part->ndim, part->shape, z->stride, 0), part); /* z's leading corner (no grad here) */
        ac_accum(src, z);
    }
}

Tensor *torch_scatter_add(Tensor *a, int64_t dim, Tensor *index, Tensor *src) {
    ac_check_float(a, "scatter_add");
    ac_check_float(src, "scatter_add");
    int64_t d = ac_wrap_dim(dim, a->ndim, "scatter_add");
    Tensor *idx = dim_indices(a, d, index, src, "scatter_add");
    Tensor *out = ac_materialize(a);
    /* src read only where index reaches: its leading corner of index's shape */
    Tensor *part = ac_view_of(src, idx->ndim, idx->shape, src->stride, src->offset);
    scatter_into(out, d, idx, part);
    Node *n = AC_NODE("ScatterAddBackward0", scatter_add_op_backward, out, a, src);
    if (n) *AC_CTX(n, GatherSaved) = (GatherSaved){idx, d};
    return out;
}
