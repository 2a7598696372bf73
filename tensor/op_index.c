/* index_select and embedding lookup: gather rows by int64 indices. The
 * backward adds each gradient row into its source row, so a repeated index
 * receives the sum of its contributions. */
#include <string.h>

#include "internal.h"

static void check_indices(Tensor *idx, int64_t limit, const char *op) {
    ac_check_defined(idx, op);
    if (idx->dtype != AC_INT64)
        ac_error("%s: Expected tensor for argument #1 'indices' to have scalar type Long; but got %s instead",
                 op, ac_dtype_name(idx->dtype));
    const int64_t *p = ac_materialize(idx)->data;
    for (int64_t i = 0, n = torch_numel(idx); i < n; i++)
        if (p[i] < 0 || p[i] >= limit)
            ac_error("%s: index out of range in self (index %lld, valid range [0, %lld))", op,
                     (long long)p[i], (long long)limit);
}

/* Gather: out[o, j, i] = a[o, idx[j], i] for a viewed as [outer, size, inner]. */
static void gather(const float *a, int64_t outer, int64_t size, int64_t inner, const int64_t *idx,
                   int64_t n, float *out) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            memcpy(out + (o * n + j) * inner, a + (o * size + idx[j]) * inner, sizeof(float) * (size_t)inner);
}

static void scatter_add_backward(Node *n, Tensor *g) {
    Tensor *a = n->inputs[0], *idx = n->saved[0];
    int64_t outer = n->i[0], size = n->i[1], inner = n->i[2], pad = n->i[3], cnt = torch_numel(idx);
    Tensor *z = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
    const int64_t *ip = idx->data;
    const float *gd = ac_cdata(g);
    float *zd = z->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < cnt; j++) {
            if (ip[j] == pad) continue; /* padding_idx gets no gradient */
            float *dst = zd + (o * size + ip[j]) * inner;
            const float *src = gd + (o * cnt + j) * inner;
            for (int64_t i = 0; i < inner; i++) dst[i] += src[i];
        }
    ac_accum(a, z);
}

Tensor *torch_index_select(Tensor *a, int64_t dim, Tensor *index) {
    ac_check_float(a, "index_select");
    int64_t d = ac_wrap_dim(dim, a->ndim, "index_select");
    if (index && index->ndim > 1) ac_error("index_select: Index is supposed to be a vector (got %dD)", index->ndim);
    int64_t size = a->ndim ? a->shape[d] : 1;
    check_indices(index, size, "index_select");
    Tensor *idx = ac_materialize(index);
    int64_t cnt = torch_numel(idx), outer = 1, inner = 1, shape[AC_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) {
        if (i < d) outer *= a->shape[i];
        if (i > d) inner *= a->shape[i];
        shape[i] = i == d ? cnt : a->shape[i];
    }
    Tensor *out = ac_new(AC_FLOAT32, a->ndim, shape);
    gather(ac_cdata(a), outer, size, inner, idx->data, cnt, out->data);
    Node *n = AC_NODE("IndexSelectBackward0", scatter_add_backward, out, a);
    if (n) {
        n->saved[0] = idx;
        n->i[0] = outer; n->i[1] = size; n->i[2] = inner; n->i[3] = -1;
    }
    return out;
}

Tensor *torch_embedding(Tensor *weight, Tensor *indices, int64_t padding_idx) {
    ac_check_float(weight, "embedding");
    if (weight->ndim != 2) ac_error("embedding: 'weight' must be 2-D (got %s)", ac_shape_str(weight));
    check_indices(indices, weight->shape[0], "embedding");
    if (indices->ndim + 1 > AC_MAX_DIMS) ac_error("embedding: indices have too many dimensions");
    Tensor *idx = ac_materialize(indices);
    int64_t cnt = torch_numel(idx), dim = weight->shape[1], shape[AC_MAX_DIMS];
    for (int i = 0; i < idx->ndim; i++) shape[i] = idx->shape[i];
    shape[idx->ndim] = dim;
    Tensor *out = ac_new(AC_FLOAT32, idx->ndim + 1, shape);
    gather(ac_cdata(weight), 1, weight->shape[0], dim, idx->data, cnt, out->data);
    Node *n = AC_NODE("EmbeddingBackward0", scatter_add_backward, out, weight);
    if (n) {
        n->saved[0] = idx;
        n->i[0] = 1; n->i[1] = weight->shape[0]; n->i[2] = dim; n->i[3] = padding_idx;
    }
    return out;
}
