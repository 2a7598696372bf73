/* sum and mean, over everything or over some dims (keepdim), with PyTorch's
 * summation orders so that results round like torch's. */
#include <math.h>
#include <string.h>

#include "internal.h"

static int ceil_log2(int64_t x) {
    int r = 0;
    while (((int64_t)1 << r) < x) r++;
    return r;
}

/* ATen's sum kernel (SumKernel.cpp, cascade_sum), one output at a time. Its building block is
 * multi_row_sum: four levels of partial sums, level 0 folded into the next every 2^power
 * elements (power = max(4, ceil(log2 n) / 4)), the levels added at the end. */
static float multi_row_sum(const float *x, int64_t n, int64_t stride) {
    const int levels = 4;
    int power = ceil_log2(n) / levels;
    if (power < 4) power = 4;
    const int64_t step = (int64_t)1 << power, mask = step - 1;
    float acc[4] = {0, 0, 0, 0};
    int64_t i = 0;
    while (i + step <= n) {
        for (int64_t j = 0; j < step; j++, i++) acc[0] += x[i * stride];
        for (int j = 1; j < levels; j++) {
            acc[j] += acc[j - 1];
            acc[j - 1] = 0;
            if ((i & (mask << (j * power))) != 0) break;
        }
    }
    for (; i < n; i++) acc[0] += x[i * stride];
    for (int j = 1; j < levels; j++) acc[0] += acc[j];
    return acc[0];
}

/* row_sum: the n elements read as (n / 4, 4), four interleaved multi_row_sums (element i goes
 * to partial i % 4), the n % 4 left over added to partial 0, then the partials in order. */
float ac_ilp4_sum(const float *x, int64_t n, int64_t stride) {
    int64_t q = n / 4;
    float p[4];
    for (int k = 0; k < 4; k++) p[k] = multi_row_sum(x + k * stride, q, 4 * stride);
    for (int64_t i = 4 * q; i < n; i++) p[0] += x[i * stride];
    return ((p[0] + p[1]) + p[2]) + p[3];
}

/* A sum over a row of n contiguous floats (a reduction over the last dim, or over everything):
 * ATen's vectorized_inner_sum with 8-wide vectors (the default and AVX2 builds') from n >= 8:
 * lane l sums elements l, l + 8, ... of the whole vectors by row_sum; the n % 8 left over are
 * added from 0 in order, then the lanes 0..7. Below 8 (or strided), the scalar row_sum. */
float ac_cascade_sum(const float *x, int64_t n, int64_t stride) {
    if (stride != 1 || n < 8) return ac_ilp4_sum(x, n, stride);
    int64_t v = n / 8;
    float lane[8];
    for (int l = 0; l < 8; l++) lane[l] = ac_ilp4_sum(x + l, v, 8);
    float s = 0;
    for (int64_t i = 8 * v; i < n; i++) s += x[i];
    for (int l = 0; l < 8; l++) s += lane[l];
    return s;
}

/* ATen's vec::reduce_all for a sum with 8-wide vectors (softmax's denominator):
 * lane l adds x[l], x[l+8], ...; then the lanes are added in order. */
float ac_lane8_sum(const float *x, int64_t n) {
    if (n < 8) {
        float s = 0;
        for (int64_t i = 0; i < n; i++) s += x[i];
        return s;
    }
    float lane[8];
    for (int l = 0; l < 8; l++) lane[l] = x[l];
    int64_t d = 8;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++) lane[l] += x[d + l];
    for (int l = 0; d + l < n; l++) lane[l] += x[d + l];
    float s = lane[0];
    for (int l = 1; l < 8; l++) s += lane[l];
    return s;
}

typedef struct {
    bool reduced[AC_MAX_DIMS];
    int64_t count;                   /* elements summed into each output */
    int keep_nd, out_nd;
    int64_t keep_shape[AC_MAX_DIMS]; /* input shape with reduced dims = 1 */
    int64_t out_shape[AC_MAX_DIMS];
} Plan;

static Plan plan(const Tensor *a, int ndims, const int64_t *dims, bool keepdim, const char *op) {
    Plan p;
    memset(&p, 0, sizeof p);
    if (ndims == 0) /* dim=() or no dims: reduce everything, as torch.sum(x, dim=[]) */
        for (int d = 0; d < a->ndim; d++) p.reduced[d] = true;
    for (int k = 0; k < ndims; k++) {
        int64_t d = ac_wrap_dim(dims[k], a->ndim, op);
        if (a->ndim == 0) continue;
        if (p.reduced[d]) ac_error("%s: dim %lld appears multiple times in the list of dims", op, (long long)d);
        p.reduced[d] = true;
    }
    p.count = 1;
    p.keep_nd = a->ndim;
    for (int d = 0; d < a->ndim; d++) {
        p.keep_shape[d] = p.reduced[d] ? 1 : a->shape[d];
        if (p.reduced[d]) p.count *= a->shape[d];
        if (!p.reduced[d] || keepdim) p.out_shape[p.out_nd++] = p.reduced[d] ? 1 : a->shape[d];
    }
    return p;
}

/* Sum over the plan's dims into a keepdim-shaped buffer. */
static Tensor *reduce_sum(Tensor *a, const Plan *p) {
    Tensor *out = ac_new_zeros(AC_FLOAT32, p->keep_nd, p->keep_shape);
    const float *x = ac_cdata(a);
    float *o = out->data;
    int64_t n = torch_numel(a);
    if (n == 0) return out;
    /* Reduced dims forming a suffix: each row as ATen sums an inner dimension. */
    int first = a->ndim;
    while (first > 0 && p->reduced[first - 1]) first--;
    bool suffix = true;
    for (int d = 0; d < first; d++) suffix = suffix && !p->reduced[d];
    if (suffix) {
        int64_t inner = p->count, rows = n / inner;
        for (int64_t r = 0; r < rows; r++) o[r] = ac_cascade_sum(x + r * inner, inner, 1);
        return out;
    }
    /* Reduced dims forming a prefix: a sum over the leading dims, column by column. */
    int last = 0;
    while (last < a->ndim && p->reduced[last]) last++;
    bool prefix = true;
    for (int d = last; d < a->ndim; d++) prefix = prefix && !p->reduced[d];
    if (prefix) {
        int64_t rows = p->count;
        ac_sum_rows(x, rows, n / rows, o);
        return out;
    }
    /* Otherwise add each element into its output slot, in row-major order. */
    int64_t ostr[AC_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) ostr[d] = p->reduced[d] ? 0 : out->stride[d];
    int64_t idx[AC_MAX_DIMS] = {0}, off = 0;
    for (int64_t k = 0; k < n; k++) {
        o[off] += x[k];
        ac_advance(a->ndim, a->shape, ostr, idx, &off);
    }
    return out;
}

/* Broadcast a keepdim-shaped gradient back over the reduced dims, times scale. */
static Tensor *expand_grad(Tensor *g, const Tensor *a, const Plan *p, float scale, bool divide) {
    Tensor *r = ac_new_like(a);
    const float *gd = ac_cdata(g);
    float *o = r->data;
    int64_t gstr[AC_MAX_DIMS], cs[AC_MAX_DIMS];
    ac_contiguous_strides(p->keep_nd, p->keep_shape, cs);
    for (int d = 0; d < a->ndim; d++) gstr[d] = p->reduced[d] ? 0 : cs[d];
    int64_t n = torch_numel(a), idx[AC_MAX_DIMS] = {0}, off = 0;
    for (int64_t k = 0; k < n; k++) {
        o[k] = divide ? gd[off] / scale : gd[off];
        ac_advance(a->ndim, a->shape, gstr, idx, &off);
    }
    return r;
}

typedef struct { Plan p; bool mean; } ReduceSaved;

static void reduce_backward(Node *n, Tensor *g) {
    const ReduceSaved *sv = n->ctx;
    Tensor *a = n->inputs[0];
    ac_accum(a, expand_grad(g, a, &sv->p, (float)sv->p.count, sv->mean));
}

/* The sum of an int64, int32 or bool tensor: int64, as torch.sum promotes integers (no gradient:
 * such tensors never require one). torch.sum(predictions == y_train) -> tensor(5). */
static Tensor *integer_sum(Tensor *a, int ndims, const int64_t *dims, bool keepdim, bool all) {
    Plan p = plan(a, all ? 0 : ndims, dims, all ? false : keepdim, "sum");
    Tensor *s = ac_new_zeros(AC_INT64, p.keep_nd, p.keep_shape);
    int64_t *o = s->data, ostr[AC_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) ostr[d] = p.reduced[d] ? 0 : s->stride[d];
    int64_t n = torch_numel(a), idx[AC_MAX_DIMS] = {0}, iidx[AC_MAX_DIMS] = {0}, off = 0, in = a->offset;
    for (int64_t k = 0; k < n; k++) { /* a read through its own strides, in row-major order */
        o[off] += a->dtype == AC_INT64 ? ((const int64_t *)a->data)[in] : (int64_t)ac_element_at(a, in);
        ac_advance(a->ndim, a->shape, ostr, idx, &off);
        ac_advance(a->ndim, a->shape, a->stride, iidx, &in);
    }
    int64_t ostride[AC_MAX_DIMS];
    ac_contiguous_strides(p.out_nd, p.out_shape, ostride);
    return ac_view_of(s, p.out_nd, p.out_shape, ostride, 0);
}

static Tensor *reduce(Tensor *a, int ndims, const int64_t *dims, bool keepdim, bool mean, bool all) {
    const char *op = mean ? "mean" : "sum";
    ac_check_defined(a, op);
    if (!mean && (a->dtype == AC_INT64 || a->dtype == AC_INT32 || a->dtype == AC_BOOL))
        return integer_sum(a, ndims, dims, keepdim, all);
    ac_check_float(a, op);
    Plan p = plan(a, all ? 0 : ndims, dims, all ? false : keepdim, op);
    Tensor *s = reduce_sum(a, &p);
    int64_t ostride[AC_MAX_DIMS];
    ac_contiguous_strides(p.out_nd, p.out_shape, ostride);
    Tensor *out = ac_view_of(s, p.out_nd, p.out_shape, ostride, 0); /* drops the kept 1s */
    if (mean) {
        float c = (float)p.count, *o = s->data;
        for (int64_t i = 0, k = torch_numel(s); i < k; i++) o[i] = o[i] / c;
    }
    const char *name = mean ? (all ? "MeanBackward0" : "MeanBackward1") : (all ? "SumBackward0" : "SumBackward1");
    Node *n = AC_NODE(name, reduce_backward, out, a);
    if (n) *AC_CTX(n, ReduceSaved) = (ReduceSaved){p, mean};
    return out;
}

Tensor *torch_sum(Tensor *a) { return reduce(a, 0, NULL, false, false, true); }
Tensor *torch_mean(Tensor *a) { return reduce(a, 0, NULL, false, true, true); }
Tensor *torch_sum_dim(Tensor *a, int ndims, const int64_t *dims, bool keepdim) {
    return reduce(a, ndims, dims, keepdim, false, false);
}
Tensor *torch_mean_dim(Tensor *a, int ndims, const int64_t *dims, bool keepdim) {
    return reduce(a, ndims, dims, keepdim, true, false);
}

/* ---- var and std ---------------------------------------------------------------------------
 * As ATen's CPU kernel, in double: the mean of each output's elements, then the sum of squared
 * deviations, divided by n - 1 (unbiased) or n; std is its square root; the result is rounded
 * to float once. n - correction <= 0 gives nan, as torch does. */

typedef struct { Plan p; bool unbiased, std; ac_saved x, y; Tensor *mean; } VarSaved;

static Tensor *var_backward_grad(const VarSaved *sv, Tensor *x, Tensor *y, Tensor *g) {
    /* var: g 2 (x - mean) / (n - c);  std: g (x - mean) / ((n - c) std) */
    double denom = (double)sv->p.count - (sv->unbiased ? 1.0 : 0.0);
    Tensor *r = ac_new_like(x);
    const float *xd = ac_cdata(x), *gd = ac_cdata(g), *md = sv->mean->data, *yd = sv->std ? ac_cdata(y) : NULL;
    float *o = r->data;
    int64_t gstr[AC_MAX_DIMS], cs[AC_MAX_DIMS];
    ac_contiguous_strides(sv->p.keep_nd, sv->p.keep_shape, cs);
    for (int d = 0; d < x->ndim; d++) gstr[d] = sv->p.reduced[d] ? 0 : cs[d];
    int64_t n = torch_numel(x), idx[AC_MAX_DIMS] = {0}, off = 0;
    for (int64_t k = 0; k < n; k++) {
        float dev = xd[k] - md[off];
        o[k] = sv->std ? gd[off] * dev / (float)(denom * yd[off]) : gd[off] * (float)(2.0 / denom) * dev;
        ac_advance(x->ndim, x->shape, gstr, idx, &off);
    }
    return r;
}

static void var_backward(Node *n, Tensor *g) {
    const VarSaved *sv = n->ctx;
    Tensor *x = ac_unpack(n, sv->x), *y = sv->std ? ac_unpack(n, sv->y) : NULL;
    ac_accum(n->inputs[0], var_backward_grad(sv, x, y, g));
}

/* The reduced dims are the last ones (or none is reduced): each output is a run of count elements. */
static bool trailing(const Plan *p, int ndim) {
    int d = ndim;
    while (d > 0 && p->reduced[d - 1]) d--;
    for (int i = 0; i < d; i++)
        if (p->reduced[i]) return false;
    return true;
}

typedef struct {
    const float *x;
    double *sum, *m2;
    float *mean, *out;
    int64_t count;
    double denom;
    bool std;
} VarJob;

/* outputs [i0, i1): the mean as float, the variance (or its root) from the squared deviations */
static void var_finish(const VarJob *j, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
        j->mean[i] = (float)j->sum[i];
        double v = j->denom > 0 ? j->m2[i] / j->denom : NAN; /* n <= correction: no spread to divide */
        j->out[i] = (float)(j->std ? sqrt(v) : v);
    }
}

/* rows [r0, r1) of count elements each: the two passes of the loop below, in the same order */
static void var_rows_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const VarJob *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->count;
        double sum = 0, m2 = 0;
        for (int64_t k = 0; k < j->count; k++) sum += x[k];
        sum /= (double)j->count;
        for (int64_t k = 0; k < j->count; k++) {
            double dev = x[k] - sum;
            m2 += dev * dev;
        }
        j->sum[r] = sum, j->m2[r] = m2;
    }
    var_finish(j, r0, r1);
}

static Tensor *var_std(Tensor *a, int ndims, const int64_t *dims, bool unbiased, bool keepdim, bool std, bool all) {
    const char *op = std ? "std" : "var";
    ac_check_float(a, op);
    Plan p = plan(a, all ? 0 : ndims, dims, all ? false : keepdim, op);
    const float *xd = ac_cdata(a); /* a's elements in row-major order (a copy only when a is strided) */
    int64_t nout = ac_shape_numel(p.keep_nd, p.keep_shape), n = torch_numel(a);
    Tensor *acc = ac_new_zeros(AC_FLOAT64, 1, (int64_t[]){2 * nout}); /* sums, then squared deviations */
    double *sum = acc->data, *m2 = sum + nout;
    int64_t ostr[AC_MAX_DIMS], cs[AC_MAX_DIMS];
    ac_contiguous_strides(p.keep_nd, p.keep_shape, cs);
    for (int d = 0; d < a->ndim; d++) ostr[d] = p.reduced[d] ? 0 : cs[d];
    Tensor *mean = ac_new(AC_FLOAT32, p.keep_nd, p.keep_shape);
    Tensor *s = ac_new(AC_FLOAT32, p.keep_nd, p.keep_shape);
    double denom = (double)p.count - (unbiased ? 1.0 : 0.0);
    VarJob j = {xd, sum, m2, mean->data, s->data, p.count, denom, std};
    if (trailing(&p, a->ndim)) { /* rows of the last dims (a layer norm's): the same sums, a row a task */
        ac_parallel_for(nout, AC_GRAIN / (p.count + 1) + 1, var_rows_task, &j);
    } else {
        int64_t idx[AC_MAX_DIMS] = {0}, off = 0;
        for (int64_t k = 0; k < n; k++) { /* pass 1: sums */
            sum[off] += xd[k];
            ac_advance(a->ndim, a->shape, ostr, idx, &off);
        }
        for (int64_t i = 0; i < nout; i++) sum[i] /= (double)p.count;
        memset(idx, 0, sizeof idx);
        off = 0;
        for (int64_t k = 0; k < n; k++) { /* pass 2: squared deviations from the double mean */
            double dev = xd[k] - sum[off];
            m2[off] += dev * dev;
            ac_advance(a->ndim, a->shape, ostr, idx, &off);
        }
        var_finish(&j, 0, nout);
    }
    int64_t ostride[AC_MAX_DIMS];
    ac_contiguous_strides(p.out_nd, p.out_shape, ostride);
    Tensor *out = ac_view_of(s, p.out_nd, p.out_shape, ostride, 0);
    Node *nd = AC_NODE(std ? "StdBackward0" : "VarBackward0", var_backward, out, a);
    if (nd) {
        VarSaved *sv = AC_CTX(nd, VarSaved);
        /* VarBackward0 subtracts self.mean(dim, keepdim=True): the mean op's float sum / n, not the
         * forward's double mean rounded (the two differ in the last bit) */
        Tensor *fmean = reduce_sum(a, &p);
        float c = (float)p.count, *fm = fmean->data;
        for (int64_t i = 0; i < nout; i++) fm[i] = fm[i] / c;
        *sv = (VarSaved){.p = p, .unbiased = unbiased, .std = std, .mean = fmean};
        sv->x = ac_save(nd, a);
        sv->y = std ? ac_save(nd, s) : (ac_saved){0};
    }
    return out;
}

Tensor *torch_var(Tensor *a, bool unbiased) { return var_std(a, 0, NULL, unbiased, false, false, true); }
Tensor *torch_std(Tensor *a, bool unbiased) { return var_std(a, 0, NULL, unbiased, false, true, true); }
Tensor *torch_var_dim(Tensor *a, int ndims, const int64_t *dims, bool unbiased, bool keepdim) {
    return var_std(a, ndims, dims, unbiased, keepdim, false, false);
}
Tensor *torch_std_dim(Tensor *a, int ndims, const int64_t *dims, bool unbiased, bool keepdim) {
    return var_std(a, ndims, dims, unbiased, keepdim, true, false);
}
