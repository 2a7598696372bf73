/* softmax and log_softmax along any dim, numerically stable (x - max), in the
 * order ATen's CPU kernels compute them. A row that is all -inf gives NaN, as
 * in torch.softmax. */
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal.h"

static float nan_max(const float *x, int64_t n, int64_t stride) {
    float m = -INFINITY;
    if (stride == 1) { /* eight running maxima, no early exit (max is exact in any order) */
        float lane[8];
        int nan[8] = {0};
        for (int l = 0; l < 8; l++) lane[l] = -INFINITY;
        int64_t i = 0;
#if defined(__SSE2__)
        /* gcc does not vectorize the plain loop below (the NaN flags): SSE2, which every x86-64 has.
         * maxps(v, lane) is v > lane ? v : lane, the plain loop's expression; unord marks a NaN */
        __m128 lo = _mm_set1_ps(-INFINITY), hi = lo, bad = _mm_setzero_ps();
        for (; i + 8 <= n; i += 8) {
            __m128 a = _mm_loadu_ps(x + i), b = _mm_loadu_ps(x + i + 4);
            bad = _mm_or_ps(bad, _mm_or_ps(_mm_cmpunord_ps(a, a), _mm_cmpunord_ps(b, b)));
            lo = _mm_max_ps(a, lo);
            hi = _mm_max_ps(b, hi);
        }
        if (_mm_movemask_ps(bad)) return NAN;
        _mm_storeu_ps(lane, lo);
        _mm_storeu_ps(lane + 4, hi);
#endif
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) {
                float v = x[i + l];
                nan[l] |= v != v;
                lane[l] = v > lane[l] ? v : lane[l];
            }
        for (int l = 0; i + l < n; l++) {
            float v = x[i + l];
            nan[l] |= v != v;
            lane[l] = v > lane[l] ? v : lane[l];
        }
        for (int l = 0; l < 8; l++) {
            if (nan[l]) return NAN;
            m = lane[l] > m ? lane[l] : m;
        }
        return m;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = x[i * stride];
        if (isnan(v)) return v;
        if (v > m) m = v;
    }
    return m;
}

/* View a contiguous tensor as [outer, size, inner] around dim. */
static void split(const Tensor *t, int64_t dim, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (d < dim) *outer *= t->shape[d];
        if (d > dim) *inner *= t->shape[d];
    }
    *size = t->ndim ? t->shape[dim] : 1;
}

/* Rows [o0, o1) of the [outer, size, inner] view; tmp: `size` floats of scratch. */
static void softmax_rows(const float *x, float *y, int64_t o0, int64_t o1, int64_t size, int64_t inner, bool log,
                         bool exact, float *tmp) {
    if (o0 < o1 && inner == 1 && !log && !exact && size >= 16 && ac_softmax_row_fast(x + o0 * size, y + o0 * size, size)) {
        for (int64_t o = o0 + 1; o < o1; o++) ac_softmax_row_fast(x + o * size, y + o * size, size);
        return;
    }
    for (int64_t o = o0; o < o1; o++) {
        for (int64_t in = 0; in < inner; in++) {
            const float *xr = x + o * size * inner + in;
            float *yr = y + o * size * inner + in;
            float m = nan_max(xr, size, inner);
            if (inner == 1) { /* last dim: ATen's _vec_(log_)softmax_lastdim */
                ac_exp_sub(xr, m, tmp, size); /* expf(xr[i] - m), vectorized in fast math */
                float s = ac_lane8_sum(tmp, size);
                if (log) {
                    float ls = logf(s);
                    for (int64_t i = 0; i < size; i++) yr[i] = xr[i] - m - ls;
                } else {
                    float r = 1 / s;
                    for (int64_t i = 0; i < size; i++) yr[i] = tmp[i] * r;
                }
            } else {
                float s = 0;
                for (int64_t i = 0; i < size; i++) {
                    float e = expf(xr[i * inner] - m);
                    if (!log) yr[i * inner] = e;
                    s += e;
                }
                float ls = logf(s);
                for (int64_t i = 0; i < size; i++)
                    yr[i * inner] = log ? xr[i * inner] - m - ls : yr[i * inner] / s;
            }
        }
    }
}

/* Rows are independent: they are split among threads (each row whole, in the same order). */
typedef struct {
    const float *x, *y, *g;
    float *out, *tmp;
    int64_t size, inner;
    bool log, exact;
} Rows;

static void forward_task(void *ctx, int64_t o0, int64_t o1, int chunk) {
    const Rows *r = ctx;
    softmax_rows(r->x, r->out, o0, o1, r->size, r->inner, r->log, r->exact, r->tmp + chunk * (r->size ? r->size : 1));
}

/* sum of g[i] * y[i] as ATen's vec::map2_reduce_all with 8-wide vectors: lane l adds the
 * (rounded) products l, l + 8, ...; then the lanes in order (the first n below 8) */
static float lane8_dot(const float *g, const float *y, int64_t n) {
    if (n < 8) {
        float s = 0;
        for (int64_t i = 0; i < n; i++) s += g[i] * y[i];
        return s;
    }
    float lane[8];
    for (int l = 0; l < 8; l++) lane[l] = g[l] * y[l];
    int64_t d = 8;
    for (; d + 8 <= n; d += 8)
        for (int l = 0; l < 8; l++) lane[l] += g[d + l] * y[d + l];
    for (int l = 0; d + l < n; l++) lane[l] += g[d + l] * y[d + l];
    float s = lane[0];
    for (int l = 1; l < 8; l++) s += lane[l];
    return s;
}

static void backward_task(void *ctx, int64_t o0, int64_t o1, int chunk) {
    const Rows *r = ctx;
    const float *g = r->g, *y = r->y;
    int64_t size = r->size, inner = r->inner;
    if (inner == 1 && !r->log) { /* softmax over the last dim: rows in a row */
        for (int64_t o = o0; o < o1; o++) {
            const float *gr = g + o * size, *yr = y + o * size;
            float *out = r->out + o * size, s = 0;
            if (r->exact) {
                s = lane8_dot(gr, yr, size); /* ATen's map2_reduce_all: 8 lanes of products */
            } else { /* 16 running sums the compiler vectorizes: one add in flight no longer waits for the last */
                float lane[16] = {0};
                int64_t i = 0;
                for (; i + 16 <= size; i += 16)
                    for (int l = 0; l < 16; l++) lane[l] += gr[i + l] * yr[i + l];
                for (; i < size; i++) s += gr[i] * yr[i];
                for (int l = 0; l < 16; l++) s += lane[l];
            }
            for (int64_t i = 0; i < size; i++) out[i] = yr[i] * (gr[i] - s);
        }
        return;
    }
    if (inner == 1) { /* log_softmax over the last dim: s as ATen's reduce_all (8 lanes), then exp(y) for
                       * the row at once (ac_exp_sub(y, 0): expf(y - 0) is expf(y), libm's in exact math,
                       * vectorized in fast), written after the row of g is read whole (out may be g) */
        float *e = r->tmp + (size_t)chunk * (size_t)(size ? size : 1);
        for (int64_t o = o0; o < o1; o++) {
            const float *gr = g + o * size, *yr = y + o * size;
            float *out = r->out + o * size, s = ac_lane8_sum(gr, size);
            ac_exp_sub(yr, 0.0f, e, size);
            for (int64_t i = 0; i < size; i++) out[i] = gr[i] - e[i] * s;
        }
        return;
    }
    for (int64_t o = o0; o < o1; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * size * inner + in;
            float s = 0;
            /* softmax:     dx = y * (g - sum(g * y))
             * log_softmax: dx = g - exp(y) * sum(g) */
            for (int64_t i = 0; i < size; i++) {
                int64_t k = base + i * inner;
                s += r->log ? g[k] : g[k] * y[k];
            }
            for (int64_t i = 0; i < size; i++) {
                int64_t k = base + i * inner;
                r->out[k] = r->log ? g[k] - expf(y[k]) * s : y[k] * (g[k] - s);
            }
        }
    }
}

static int64_t grain_rows(int64_t size, int64_t inner) {
    int64_t per = size * inner;
    return per >= 16384 ? 1 : 16384 / (per + 1) + 1; /* ~16K elements a chunk at least */
}

/* The backward reads the result (softmax's y, log_softmax's log y). */
typedef struct { int64_t dim; bool log; ac_saved y; } SoftmaxSaved;

static void softmax_backward(Node *n, Tensor *gt) {
    const SoftmaxSaved *sv = n->ctx;
    Tensor *x = n->inputs[0];
    int64_t outer, size, inner;
    split(x, sv->dim, &outer, &size, &inner);
    Tensor *rt = ac_grad_out(n, gt); /* each row is read whole before it is written */
    Rows r = {NULL, ac_cdata(ac_unpack(n, sv->y)), ac_cdata(gt), rt->data, NULL, size, inner, sv->log, ac_get_exact()};
    int64_t grain = grain_rows(size, inner);
    int chunks = ac_parallel_chunks(outer, grain);
    if (sv->log && inner == 1) r.tmp = ac_arena_alloc(sizeof(float) * ac_size_mul((size_t)(size ? size : 1), (size_t)chunks));
    ac_parallel_for_max(outer, grain, chunks, backward_task, &r);
    ac_accum_new(x, rt);
}

static Tensor *softmax_impl(Tensor *a, int64_t dim, bool log) {
    const char *op = log ? "log_softmax" : "softmax";
    ac_check_float(a, op);
    dim = ac_wrap_dim(dim, a->ndim, op);
    int64_t outer, size, inner;
    split(a, dim, &outer, &size, &inner);
    Tensor *out = ac_new_like(a);
    int64_t grain = grain_rows(size, inner);
    Rows r = {ac_cdata(a), NULL, NULL, out->data, NULL, size, inner, log, ac_get_exact()};
    int chunks = ac_parallel_chunks(outer, grain);
    r.tmp = ac_arena_alloc(sizeof(float) * ac_size_mul((size_t)(size ? size : 1), (size_t)chunks));
    ac_parallel_for_max(outer, grain, chunks, forward_task, &r);
    Node *n = AC_NODE(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", softmax_backward, out, a);
    if (n) {
        SoftmaxSaved *sv = AC_CTX(n, SoftmaxSaved);
        sv->dim = dim;
        sv->log = log;
        sv->y = ac_save(n, out);
    }
    return out;
}

Tensor *torch_softmax(Tensor *a, int64_t dim) { return softmax_impl(a, dim, false); }
Tensor *torch_log_softmax(Tensor *a, int64_t dim) { return softmax_impl(a, dim, true); }
