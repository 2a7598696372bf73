/* Tensors: creation, long-lived copies, element access and the small helpers
 * every op uses (shapes, strides, contiguous copies). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

size_t ac_dtype_size(ac_dtype d) {
    switch (d) {
    case AC_FLOAT32: case AC_INT32: return 4;
    case AC_INT64: case AC_FLOAT64: return 8;
    case AC_BFLOAT16: return 2;
    default: return 1;
    }
}

const char *ac_dtype_name(ac_dtype d) {
    static const char *const names[] = {"Float", "Long", "Bool", "Double", "Int", "BFloat16"};
    return names[d];
}

void ac_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        /* past INT64_MAX only in a tensor with no elements (numel is checked), where strides mean nothing */
        int64_t d = shape[i] > 0 ? shape[i] : 1;
        s = s > INT64_MAX / d ? INT64_MAX : s * d;
    }
}

static void check_shape(int ndim, const int64_t *shape, const char *op) {
    if (ndim < 0 || ndim > AC_MAX_DIMS)
        ac_error("%s: tensors have at most %d dimensions, got %d", op, AC_MAX_DIMS, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            ac_error("%s: Trying to create tensor with negative dimension %lld: %s", op,
                     (long long)shape[i], ac_dims_str(ndim, shape));
}

/* A new tensor's header (its storage's owner: version counter of its own). */
static Tensor *header(ac_dtype dtype, int ndim, const int64_t *shape) {
    TensorImpl *ti = ac_new_header();
    ti->version = &ti->own_version;
    Tensor *t = &ti->pub;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    ac_contiguous_strides(ndim, shape, t->stride);
    return t;
}

Tensor *ac_new(ac_dtype dtype, int ndim, const int64_t *shape) {
    check_shape(ndim, shape, "tensor");
    size_t bytes = ac_elem_bytes(ac_shape_numel(ndim, shape), ac_dtype_size(dtype));
    Tensor *t = header(dtype, ndim, shape);
    t->data = ac_gbuf_wants(bytes) ? ac_gbuf_alloc(bytes) : ac_arena_alloc(bytes);
    return t;
}

Tensor *ac_new_zeros(ac_dtype dtype, int ndim, const int64_t *shape) {
    Tensor *t = ac_new(dtype, ndim, shape);
    memset(t->data, 0, (size_t)torch_numel(t) * ac_dtype_size(dtype));
    return t;
}

Tensor *ac_new_like(const Tensor *t) { return ac_new(AC_FLOAT32, t->ndim, t->shape); }

/* t's strides describe a dense block (no gaps, no overlap) in some order of the dims */
static bool dense(const Tensor *t) {
    int order[AC_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return false;
        if (t->shape[d] == 1) continue;
        int i = n++;
        for (; i > 0 && t->stride[order[i - 1]] > t->stride[d]; i--) order[i] = order[i - 1];
        order[i] = d; /* by increasing stride */
    }
    int64_t expect = 1;
    for (int i = 0; i < n; i++) {
        if (t->stride[order[i]] != expect) return false;
        expect *= t->shape[order[i]];
    }
    return true;
}

Tensor *ac_new_dense_like(const Tensor *t) {
    Tensor *out = ac_new_like(t);
    if (dense(t))
        for (int d = 0; d < t->ndim; d++) out->stride[d] = t->stride[d];
    return out;
}

/* A view shares its base's storage and version counter. */
Tensor *ac_view_of(Tensor *base, int ndim, const int64_t *shape, const int64_t *stride,
                   int64_t offset) {
    TensorImpl *ti = ac_new_header();
    TensorImpl *b = ac_impl(base);
    ti->base = b->base ? b->base : b;
    ti->version = b->version;
    Tensor *t = &ti->pub;
    t->dtype = base->dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    t->offset = offset;
    t->data = base->data;
    return t;
}

void ac_bump_version(Tensor *t) { ++*ac_impl(t)->version; }
int64_t torch_version(const Tensor *t) {
    ac_check_defined(t, "_version");
    return (int64_t)*ac_impl(t)->version;
}

int64_t torch_numel(const Tensor *t) { return ac_shape_numel(t->ndim, t->shape); }

int64_t ac_wrap_dim(int64_t dim, int ndim, const char *op) {
    int64_t n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dims -1 and 0 */
    if (dim < -n || dim >= n)
        ac_raise(AC_INDEX_ERROR, "%s: Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                 op, (long long)-n, (long long)n - 1, (long long)dim);
    return dim < 0 ? dim + n : dim;
}

int64_t torch_size(const Tensor *t, int64_t dim) {
    ac_check_defined(t, "size");
    return t->shape[ac_wrap_dim(dim, t->ndim, "size")];
}

bool torch_is_contiguous(const Tensor *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0) return true; /* no elements: contiguous whatever the strides, as PyTorch says */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

/* Every op's check of its tensor inputs: not NULL (Python: "must be Tensor, not
 * NoneType"), and not freed by a release (internal.h, ac_check_live). */
void ac_check_defined(const Tensor *t, const char *op) {
    if (!t) ac_raise(AC_TYPE_ERROR, "%s: expected a Tensor, got NULL", op);
    ac_check_live(t, op);
}

void ac_check_float(const Tensor *t, const char *op) {
    ac_check_defined(t, op);
    if (t->dtype != AC_FLOAT32)
        ac_error("%s: expected a tensor of dtype Float (float32), but got %s", op,
                 ac_dtype_name(t->dtype));
}

static char *arena_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = ac_arena_alloc(n);
    memcpy(p, s, n);
    return p;
}

char *ac_dims_str(int n, const int64_t *dims) {
    char buf[256];
    int k = snprintf(buf, sizeof buf, "[");
    for (int i = 0; i < n; i++)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%lld", i ? ", " : "", (long long)dims[i]);
    snprintf(buf + k, sizeof buf - (size_t)k, "]");
    return arena_strdup(buf);
}

char *ac_shape_str(const Tensor *t) { return ac_dims_str(t->ndim, t->shape); }

char *ac_shape_x(const Tensor *t) {
    char buf[256];
    int k = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim; i++)
        k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%lld", i ? "x" : "", (long long)t->shape[i]);
    return arena_strdup(buf);
}

/* Copy any strided tensor into a contiguous one of the same dtype and shape. */
/* Rows [r0, r1) of the last dim, threads splitting the rows. */
typedef struct { Tensor *dst; const Tensor *src; size_t es; } CopyJob;
static void copy_rows(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const CopyJob *j = ctx;
    const Tensor *src = j->src;
    int nd = src->ndim;
    int64_t idx[AC_MAX_DIMS] = {0}, inner = src->shape[nd - 1], istr = src->stride[nd - 1], off = src->offset, rest = r0;
    for (int d = nd - 2; d >= 0; d--) { /* the odometer at row r0 */
        idx[d] = rest % src->shape[d];
        rest /= src->shape[d];
        off += idx[d] * src->stride[d];
    }
    char *out = j->dst->data;
    const char *in = src->data;
    for (int64_t r = r0; r < r1; r++) {
        /* one row, by element size (the copy does not care what the bits mean) */
#define ROW(T) do { const T *p = (const T *)in + off; T *o = (T *)out + r * inner; \
                    for (int64_t q = 0; q < inner; q++) o[q] = p[q * istr]; } while (0)
        if (j->es == 4) ROW(uint32_t);
        else if (j->es == 8) ROW(uint64_t);
        else ROW(uint8_t);
#undef ROW
        ac_advance(nd - 1, src->shape, src->stride, idx, &off); /* the next row */
    }
}

void ac_copy_strided(Tensor *dst, const Tensor *src) {
    size_t es = ac_dtype_size(src->dtype);
    int64_t n = torch_numel(src);
    if (n == 0) return;
    if (torch_is_contiguous(src)) {
        memcpy(dst->data, (const char *)src->data + (size_t)src->offset * es, (size_t)n * es);
        return;
    }
    int64_t inner = src->shape[src->ndim - 1];
    ac_parallel_for(n / inner, AC_GRAIN / inner + 1, copy_rows, &(CopyJob){dst, src, es});
}

Tensor *ac_materialize(Tensor *t) {
    Tensor *c = ac_new(t->dtype, t->ndim, t->shape);
    ac_copy_strided(c, t);
    return c;
}

const float *ac_cdata(Tensor *t) {
    if (torch_is_contiguous(t)) return (const float *)t->data + t->offset;
    return (const float *)ac_materialize(t)->data;
}

float *ac_data_float(Tensor *t) {
    ac_check_float(t, "ac_data_float");
    if (!torch_is_contiguous(t))
        ac_error("ac_data_float: the tensor is not contiguous (call torch_contiguous first)");
    return (float *)t->data + t->offset;
}

int64_t *ac_data_long(Tensor *t) {
    ac_check_defined(t, "ac_data_long");
    if (t->dtype != AC_INT64)
        ac_error("ac_data_long: expected a tensor of dtype Long (int64), but got %s",
                 ac_dtype_name(t->dtype));
    if (!torch_is_contiguous(t))
        ac_error("ac_data_long: the tensor is not contiguous (call torch_contiguous first)");
    return (int64_t *)t->data + t->offset;
}

double ac_element_at(const Tensor *t, int64_t off) {
    switch (t->dtype) {
    case AC_FLOAT32: return ((const float *)t->data)[off];
    case AC_INT64: return (double)((const int64_t *)t->data)[off];
    case AC_FLOAT64: return ((const double *)t->data)[off];
    case AC_INT32: return ((const int32_t *)t->data)[off];
    case AC_BFLOAT16: return ac_bf16_to_f32(((const uint16_t *)t->data)[off]);
    default: return ((const bool *)t->data)[off];
    }
}

void ac_store_element(Tensor *t, int64_t off, double v) {
    switch (t->dtype) {
    case AC_FLOAT32: ((float *)t->data)[off] = (float)v; break;
    case AC_INT64: ((int64_t *)t->data)[off] = (int64_t)v; break;
    case AC_FLOAT64: ((double *)t->data)[off] = v; break;
    case AC_INT32: ((int32_t *)t->data)[off] = (int32_t)v; break;
    case AC_BOOL: ((bool *)t->data)[off] = v != 0; break;
    case AC_BFLOAT16: ((uint16_t *)t->data)[off] = ac_f32_to_bf16((float)v); break; /* as PyTorch: to float, then to bfloat16 */
    }
}

double torch_item(Tensor *t) {
    ac_check_defined(t, "item");
    if (torch_numel(t) != 1)
        ac_raise(AC_VALUE_ERROR, "item: only one element tensors can be converted to Python scalars (this one has %lld)",
                 (long long)torch_numel(t));
    return ac_element_at(t, t->offset);
}

double ac_get(Tensor *t, int n, const int64_t *index) {
    ac_check_defined(t, "get");
    if (n != t->ndim)
        ac_error("get: too many or too few indices for tensor of dimension %d (got %d)", t->ndim, n);
    int64_t off = t->offset;
    for (int i = 0; i < n; i++) {
        int64_t k = index[i];
        if (k < -t->shape[i] || k >= t->shape[i])
            ac_raise(AC_INDEX_ERROR, "get: index %lld is out of bounds for dimension %d with size %lld",
                     (long long)k, i, (long long)t->shape[i]);
        if (k < 0) k += t->shape[i];
        off += k * t->stride[i];
    }
    return ac_element_at(t, off);
}

/* ---- creation ---------------------------------------------------------------- */

static Tensor *from_data(const void *data, int ndim, const int64_t *shape, ac_dtype d) {
    Tensor *t = ac_new(d, ndim, shape);
    size_t bytes = (size_t)torch_numel(t) * ac_dtype_size(d);
    if (bytes) {
        if (!data) ac_error("tensor: data is NULL for a tensor of %lld elements", (long long)torch_numel(t));
        memcpy(t->data, data, bytes);
    }
    return t;
}

Tensor *torch_tensor(const float *data, int ndim, const int64_t *shape) {
    return from_data(data, ndim, shape, AC_FLOAT32);
}
Tensor *torch_tensor_long(const int64_t *data, int ndim, const int64_t *shape) {
    return from_data(data, ndim, shape, AC_INT64);
}
Tensor *torch_tensor_bool(const bool *data, int ndim, const int64_t *shape) {
    return from_data(data, ndim, shape, AC_BOOL);
}

Tensor *torch_tensor_double(const double *data, int ndim, const int64_t *shape) {
    return from_data(data, ndim, shape, AC_FLOAT64);
}
Tensor *torch_tensor_int(const int32_t *data, int ndim, const int64_t *shape) {
    return from_data(data, ndim, shape, AC_INT32);
}

Tensor *torch_scalar_tensor(double value) {
    Tensor *t = ac_new(AC_FLOAT32, 0, NULL);
    ((float *)t->data)[0] = (float)value;
    return t;
}

Tensor *torch_empty(int ndim, const int64_t *shape, ac_dtype dtype) {
    check_shape(ndim, shape, "empty");
    return ac_new_zeros(dtype, ndim, shape);
}

static Tensor *filled(const char *op, int ndim, const int64_t *shape, double value, ac_dtype dtype) {
    check_shape(ndim, shape, op);
    Tensor *t = ac_new(dtype, ndim, shape);
    int64_t n = torch_numel(t);
    if (dtype == AC_FLOAT32) {
        float *p = t->data, v = (float)value;
        for (int64_t i = 0; i < n; i++) p[i] = v;
    } else {
        for (int64_t i = 0; i < n; i++) ac_store_element(t, i, value);
    }
    return t;
}

Tensor *torch_full_dtype(int ndim, const int64_t *shape, double value, ac_dtype dtype) {
    return filled("full", ndim, shape, value, dtype);
}
Tensor *torch_full(int ndim, const int64_t *shape, double value) { return filled("full", ndim, shape, value, AC_FLOAT32); }
Tensor *torch_zeros(int ndim, const int64_t *shape) { return filled("zeros", ndim, shape, 0, AC_FLOAT32); }
Tensor *torch_ones(int ndim, const int64_t *shape) { return filled("ones", ndim, shape, 1, AC_FLOAT32); }
Tensor *torch_zeros_dtype(int ndim, const int64_t *shape, ac_dtype dtype) { return filled("zeros", ndim, shape, 0, dtype); }
Tensor *torch_ones_dtype(int ndim, const int64_t *shape, ac_dtype dtype) { return filled("ones", ndim, shape, 1, dtype); }
/* t's shape (and dtype): t checked first */
Tensor *torch_zeros_like(const Tensor *t) { ac_check_defined(t, "zeros_like"); return torch_full_dtype(t->ndim, t->shape, 0, t->dtype); }
Tensor *torch_ones_like(const Tensor *t) { ac_check_defined(t, "ones_like"); return torch_full_dtype(t->ndim, t->shape, 1, t->dtype); }
Tensor *torch_full_like(const Tensor *t, double value) {
    ac_check_defined(t, "full_like");
    return torch_full_dtype(t->ndim, t->shape, value, t->dtype);
}
Tensor *torch_empty_like(const Tensor *t) { ac_check_defined(t, "empty_like"); return torch_empty(t->ndim, t->shape, t->dtype); }
Tensor *torch_zeros_like_dtype(const Tensor *t, ac_dtype d) {
    ac_check_defined(t, "zeros_like");
    return torch_full_dtype(t->ndim, t->shape, 0, d);
}
Tensor *torch_ones_like_dtype(const Tensor *t, ac_dtype d) {
    ac_check_defined(t, "ones_like");
    return torch_full_dtype(t->ndim, t->shape, 1, d);
}
Tensor *torch_full_like_dtype(const Tensor *t, double v, ac_dtype d) {
    ac_check_defined(t, "full_like");
    return torch_full_dtype(t->ndim, t->shape, v, d);
}
Tensor *torch_empty_like_dtype(const Tensor *t, ac_dtype d) { ac_check_defined(t, "empty_like"); return torch_empty(t->ndim, t->shape, d); }

/* torch.linspace(start, end, steps), float32 as ATen's CPU kernel computes it
 * (ATEN_CPU_CAPABILITY=default, one thread): step = (end - start) / (steps - 1)
 * in float; blocks of 16 go as two vectors of 8, each from its first index
 * (start + step i in the first half, end - step (steps - 1 - i) in the second)
 * up by step per lane; the last steps % 16 one by one, counting up from start
 * in the first half and down from end in the second. */
Tensor *torch_linspace(double start, double end, int64_t steps) {
    if (steps < 0) ac_error("linspace: number of steps must be non-negative");
    Tensor *t = ac_new(AC_FLOAT32, 1, (int64_t[]){steps});
    float *p = t->data, a = (float)start, b = (float)end;
    float step = steps > 1 ? (b - a) / (float)(steps - 1) : 0.0f;
    int64_t half = steps / 2, vec_end = steps - steps % 16;
    for (int64_t i = 0; i < vec_end; i += 8) {
        float base = i < half ? a + step * (float)i : b - step * (float)(steps - i - 1);
        for (int k = 0; k < 8; k++) p[i + k] = base + (float)k * step;
    }
    for (int64_t i = vec_end; i < steps; i++) p[i] = i < half ? a + step * (float)i : b - step * (float)(steps - i - 1);
    if (steps == 1) p[0] = a; /* linspace_out: one step is start */
    return t;
}

Tensor *torch_arange(int64_t end) {
    if (end < 0) ac_error("arange: upper bound and larger bound inconsistent with step sign (end=%lld)", (long long)end);
    Tensor *t = ac_new(AC_INT64, 1, (int64_t[]){end});
    int64_t *p = t->data;
    for (int64_t i = 0; i < end; i++) p[i] = i;
    return t;
}

Tensor *torch_arange_float(double start, double end, double step) {
    if (step == 0) ac_error("arange: step must be nonzero");
    if ((end - start) / step < 0 || !isfinite(start) || !isfinite(end))
        ac_error("arange: upper bound and larger bound inconsistent with step sign "
                 "(start=%g, end=%g, step=%g)", start, end, step);
    int64_t n = (int64_t)ceil((end - start) / step);
    Tensor *t = ac_new(AC_FLOAT32, 1, (int64_t[]){n});
    float *p = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = (float)(start + (double)i * step);
    return t;
}

Tensor *torch_to_bool(Tensor *t) {
    ac_check_defined(t, "bool");
    Tensor *c = ac_materialize(t), *o = ac_new(AC_BOOL, t->ndim, t->shape);
    bool *q = o->data;
    for (int64_t i = 0, n = torch_numel(t); i < n; i++) q[i] = ac_element_at(c, i) != 0.0;
    return o;
}

Tensor *torch_to_float(Tensor *t) {
    ac_check_defined(t, "float");
    if (t->dtype == AC_FLOAT32) return t;
    Tensor *c = ac_materialize(t), *o = ac_new(AC_FLOAT32, t->ndim, t->shape);
    float *q = o->data;
    for (int64_t i = 0, n = torch_numel(t); i < n; i++) q[i] = (float)ac_element_at(c, i);
    return o;
}

/* Shares the storage and its version counter, but is not a differentiable
 * view: writing into it does not touch t's history. */
Tensor *torch_detach(Tensor *t) {
    ac_check_defined(t, "detach");
    Tensor *d = ac_view_of(t, t->ndim, t->shape, t->stride, t->offset);
    ac_impl(d)->base = NULL;
    return d;
}

/* ---- long-lived tensors ----------------------------------------------------------- */

/* A long-lived tensor: its header and data in one malloc'd block, freed by ac_free. */
static Tensor *persist_alloc(ac_dtype dtype, int ndim, const int64_t *shape, bool zero) {
    size_t bytes = ac_elem_bytes(ac_shape_numel(ndim, shape), ac_dtype_size(dtype));
    size_t head = (sizeof(TensorImpl) + 63) & ~(size_t)63;
    if (bytes > SIZE_MAX - head - 63) ac_out_of_memory(bytes, 1);
    size_t total = (head + bytes + 63) & ~(size_t)63;
    /* A block of 2 MiB or more starts on a 2 MiB boundary, its size rounded up to one (C11's
     * aligned_alloc wants a multiple; the rounding is never touched, so it costs no memory), and its
     * whole 2 MiB pages are huge pages: a weight, its gradient and Adam's moments fault in 512 times
     * fewer pieces. GPT-124M's first step took 530,000 faults and 9 s where a fault costs 10 us (a
     * VM), against 1.6 s for the next ones. */
    bool big = total >= AC_HUGE_PAGE && total <= SIZE_MAX - AC_HUGE_PAGE;
    size_t cap = big ? (total + AC_HUGE_PAGE - 1) & ~(AC_HUGE_PAGE - 1) : total;
    char *mem = ac_block_alloc(cap, big ? AC_HUGE_PAGE : 64, total);
    memset(mem, 0, zero ? total : sizeof(TensorImpl));
    TensorImpl *ti = (TensorImpl *)mem;
    ti->version = &ti->own_version;
    ti->stamp = AC_STAMP_LIVE; /* no release frees it: never logged */
    ti->made = ac_arena_generation();
    Tensor *p = &ti->pub;
    p->dtype = dtype;
    p->ndim = ndim;
    memcpy(p->shape, shape, sizeof(int64_t) * (size_t)ndim);
    ac_contiguous_strides(ndim, p->shape, p->stride);
    p->data = mem + head;
    p->persistent = true;
    return p;
}

Tensor *ac_persist(Tensor *t) {
    ac_check_defined(t, "ac_persist");
    Tensor *p = persist_alloc(t->dtype, t->ndim, t->shape, false);
    ac_copy_strided(p, t);
    return p;
}

Tensor *ac_persist_zeros(ac_dtype dtype, int ndim, const int64_t *shape) {
    check_shape(ndim, shape, "ac_persist_zeros");
    return persist_alloc(dtype, ndim, shape, true);
}

Tensor *ac_persist_empty(ac_dtype dtype, int ndim, const int64_t *shape) {
    check_shape(ndim, shape, "ac_persist_empty");
    return persist_alloc(dtype, ndim, shape, false);
}

void ac_free(Tensor *t) {
    if (!t) return;
    if (!t->persistent) ac_error("ac_free: the tensor lives in the arena (only ac_persist tensors are freed one by one)");
    Tensor *gb = ac_impl(t)->gradbuf;
    if (gb) free(gb);
    free(t);
}
