/* masked_fill, tril and triu: keep some elements, replace the others. The
 * backward passes the gradient where an element was kept and zero where it
 * was replaced (passing it through masked slots sends training to NaN). */
#include <math.h>
#include <string.h>

#include "internal.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- masked_fill(a, mask, value) ------------------------------------------------------ */

/* The mask seen through a's shape (broadcast strides, 0 where it repeats):
 * nothing is expanded to a's size, and rows of the last dim are split among threads. */
typedef struct {
    const bool *m;
    int nd;
    int64_t shape[AC_MAX_DIMS], ms[AC_MAX_DIMS];
    float value;
    const float *x;
    float *out;
} Masked;

static Masked *mask_view(Tensor *a, Tensor *mask) {
    Masked *v = ac_arena_alloc(sizeof *v);
    memset(v, 0, sizeof *v);
    ac_broadcast_check("masked_fill", mask, a, &v->nd, v->shape); /* the mask is expanded to a's shape */
    bool ok = v->nd == a->ndim;
    for (int d = 0; ok && d < v->nd; d++) ok = v->shape[d] == a->shape[d];
    if (!ok)
        ac_error("masked_fill: The size of tensor a (%s) must match the size of tensor b (the mask, "
                 "%s) at non-singleton dimension; the mask must broadcast to the input's shape",
                 ac_shape_str(a), ac_shape_str(mask));
    Tensor *mc = ac_materialize(mask); /* the mask's own size, contiguous */
    ac_broadcast_strides(mc, v->nd, v->shape, v->ms);
    v->m = mc->data;
    return v;
}

/* o[j] = m[j] ? value : x[j]. On x86-64 (SSE2 is always there) 16 at a time:
 * the mask bytes widened to 32-bit lanes of 0 or ~0, then and/andnot/or;
 * compilers leave the ?: on a bool load as scalar code. */
static void select_row(const bool *m, const float *x, float value, float *o, int64_t n) { /* o may be x */
    int64_t j = 0;
#if defined(__SSE2__)
    const __m128 v = _mm_set1_ps(value);
    const __m128i zero = _mm_setzero_si128();
    for (; j + 16 <= n; j += 16) {
        __m128i b = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(m + j)), zero); /* 0xFF: keep x */
        __m128i lo = _mm_unpacklo_epi8(b, b), hi = _mm_unpackhi_epi8(b, b);
        __m128 k[4] = {_mm_castsi128_ps(_mm_unpacklo_epi16(lo, lo)), _mm_castsi128_ps(_mm_unpackhi_epi16(lo, lo)),
                       _mm_castsi128_ps(_mm_unpacklo_epi16(hi, hi)), _mm_castsi128_ps(_mm_unpackhi_epi16(hi, hi))};
        for (int q = 0; q < 4; q++) {
            __m128 xv = _mm_loadu_ps(x + j + 4 * q);
            _mm_storeu_ps(o + j + 4 * q, _mm_or_ps(_mm_and_ps(k[q], xv), _mm_andnot_ps(k[q], v)));
        }
    }
#endif
    for (; j < n; j++) o[j] = m[j] ? value : x[j];
}

/* out = where(mask, value, x) on rows [r0, r1) of the last dim. */
static void fill_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const Masked *v = ctx;
    int nd = v->nd;
    int64_t cols = nd ? v->shape[nd - 1] : 1, mcol = nd ? v->ms[nd - 1] : 0;
    const float value = v->value; /* a local: the stores below cannot change it */
    int64_t idx[AC_MAX_DIMS] = {0}, off = 0, rest = r0;
    for (int d = nd - 2; d >= 0; d--) { /* the odometer at row r0, then one step a row */
        idx[d] = rest % v->shape[d];
        rest /= v->shape[d];
        off += idx[d] * v->ms[d];
    }
    for (int64_t r = r0; r < r1; r++, ac_advance(nd - 1, v->shape, v->ms, idx, &off)) {
        const bool *m = v->m + off;
        const float *x = v->x + r * cols;
        float *o = v->out + r * cols; /* may be x: a backward writing into its gradient */
        if (mcol == 1) /* the mask's row is contiguous: a select the compiler vectorizes */
            select_row(m, x, value, o, cols);
        else
            for (int64_t j = 0; j < cols; j++) o[j] = m[j * mcol] ? value : x[j];
    }
}

static Tensor *apply_mask(Masked *v, Tensor *src, float value, Tensor *out) {
    Masked job = *v;
    job.x = ac_cdata(src), job.out = out->data, job.value = value;
    int64_t cols = v->nd ? v->shape[v->nd - 1] : 1, rows = cols ? torch_numel(src) / cols : 0;
    ac_parallel_for(rows, cols >= 16384 ? 1 : 16384 / (cols + 1) + 1, fill_task, &job);
    return out;
}

static void masked_fill_backward(Node *n, Tensor *g) {
    ac_accum_new(n->inputs[0], apply_mask(n->ctx, g, 0.0f, ac_grad_out(n, g)));
}

/* t.masked_fill_(mask, value) where t is a float tensor that is no view and
 * whose elements are in order (attention's scores): the same rows as
 * masked_fill's, written into t, and t's new history the same node on its old
 * one. No copy of t or of the mask at t's size. */
void ac_masked_fill_whole_(Tensor *t, Tensor *mask, double value) {
    Masked *v = mask_view(t, mask);
    apply_mask(v, t, (float)value, t);
    ac_bump_version(t);
    Node *n = AC_NODE("MaskedFillBackward0", masked_fill_backward, t, t);
    if (n) n->ctx = v;
}

Tensor *torch_masked_fill(Tensor *a, Tensor *mask, double value) {
    ac_check_float(a, "masked_fill");
    ac_check_defined(mask, "masked_fill");
    if (mask->dtype != AC_BOOL)
        ac_error("masked_fill: masked_fill_ only supports boolean masks, but got mask with dtype %s "
                 "(use torch_to_bool(mask))", ac_dtype_name(mask->dtype));
    Masked *v = mask_view(a, mask);
    Tensor *out = apply_mask(v, a, (float)value, ac_new_like(a));
    Node *n = AC_NODE("MaskedFillBackward0", masked_fill_backward, out, a);
    if (n) n->ctx = v;
    return out;
}

/* tril / triu keep a per-element map of what they replaced */
static Tensor *keep_where(Tensor *src, const bool *replace, float value) {
    Tensor *out = ac_new_like(src);
    const float *x = ac_cdata(src);
    float *o = out->data;
    for (int64_t k = 0, n = torch_numel(src); k < n; k++) o[k] = replace[k] ? value : x[k];
    return out;
}

static void mask_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], keep_where(g, n->ctx, 0.0f)); }

/* ---- tril / triu ------------------------------------------------------------------------ */

static bool *triangle(const Tensor *a, int64_t diagonal, bool lower) {
    int64_t rows = a->shape[a->ndim - 2], cols = a->shape[a->ndim - 1], n = torch_numel(a);
    bool *replace = ac_arena_alloc((size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) {
        int64_t j = k % cols, i = (k / cols) % rows;
        replace[k] = lower ? (j - i > diagonal) : (j - i < diagonal);
    }
    return replace;
}

static Tensor *tri(Tensor *a, int64_t diagonal, bool lower) {
    const char *op = lower ? "tril" : "triu";
    ac_check_defined(a, op);
    if (a->ndim < 2) ac_wrap_dim(-2, a->ndim, op); /* PyTorch's error: the dim -2 it reads does not exist */
    bool *replace = triangle(a, diagonal, lower);
    if (a->dtype != AC_FLOAT32) { /* bool, int64, ...: the same triangle, no gradient */
        Tensor *src = ac_materialize(a), *out = ac_new(a->dtype, a->ndim, a->shape);
        size_t es = ac_dtype_size(a->dtype);
        for (int64_t k = 0, n = torch_numel(a); k < n; k++)
            if (replace[k]) memset((char *)out->data + (size_t)k * es, 0, es);
            else memcpy((char *)out->data + (size_t)k * es, (const char *)src->data + (size_t)k * es, es);
        return out;
    }
    Tensor *out = keep_where(a, replace, 0.0f);
    Node *n = AC_NODE(lower ? "TrilBackward0" : "TriuBackward0", mask_backward, out, a);
    if (n) n->ctx = replace;
    return out;
}

Tensor *torch_tril(Tensor *a, int64_t diagonal) { return tri(a, diagonal, true); }
Tensor *torch_triu(Tensor *a, int64_t diagonal) { return tri(a, diagonal, false); }

/* ---- where(condition, a, b) -------------------------------------------------------------
 *     in the forward:  out = condition ? a : b   (all three broadcast together)
 *     so:              da = g where condition,  db = g elsewhere (each summed back to its shape) */
typedef struct { Tensor *cond; } WhereSaved; /* the condition at the output's shape (the op's own copy) */

static Tensor *pick(Tensor *g, const Tensor *cond, bool where_true) {
    Tensor *out = ac_new_like(g);
    const float *gd = ac_cdata(g);
    const bool *c = cond->data;
    float *o = out->data;
    for (int64_t k = 0, n = torch_numel(g); k < n; k++) o[k] = c[k] == where_true ? gd[k] : 0.0f;
    return out;
}

static void where_backward(Node *n, Tensor *g) {
    const WhereSaved *sv = n->ctx;
    Tensor *a = n->inputs[0], *b = n->inputs[1];
    if (ac_needs_grad(a)) ac_accum(a, ac_sum_to(pick(g, sv->cond, true), a));
    if (ac_needs_grad(b)) ac_accum(b, ac_sum_to(pick(g, sv->cond, false), b));
}

/* t's data (contiguous; copied only if t is not) seen through shape: broadcast strides */
static const float *through(Tensor *t, int nd, const int64_t *shape, int64_t *st) {
    ac_broadcast_strides(t, nd, shape, st);
    return ac_cdata(t);
}

Tensor *torch_where(Tensor *condition, Tensor *a, Tensor *b) {
    ac_check_defined(condition, "where");
    ac_check_float(a, "where");
    ac_check_float(b, "where");
    if (condition->dtype != AC_BOOL)
        ac_error("where: where expected condition to be a boolean tensor, but got a tensor with dtype %s",
                 ac_dtype_name(condition->dtype));
    int nd, nd2;
    int64_t shape[AC_MAX_DIMS], shape2[AC_MAX_DIMS];
    ac_broadcast_check("where", condition, a, &nd, shape);
    Tensor ca = {.ndim = nd};
    memcpy(ca.shape, shape, sizeof shape);
    ac_broadcast_check("where", &ca, b, &nd2, shape2);
    Tensor *out = ac_new(AC_FLOAT32, nd2, shape2);
    int64_t sc[AC_MAX_DIMS], sa[AC_MAX_DIMS], sb[AC_MAX_DIMS];
    Tensor *cm = ac_materialize(condition); /* bool: its own contiguous copy */
    ac_broadcast_strides(cm, nd2, shape2, sc);
    const bool *c = cm->data;
    const float *pa = through(a, nd2, shape2, sa), *pb = through(b, nd2, shape2, sb);
    Tensor *cond = ac_new(AC_BOOL, nd2, shape2);
    bool *cc = cond->data;
    float *o = out->data;
    int64_t idx[AC_MAX_DIMS] = {0}, oc = 0, oa = 0, ob = 0;
    for (int64_t k = 0, n = torch_numel(out); k < n; k++) {
        cc[k] = c[oc];
        o[k] = c[oc] ? pa[oa] : pb[ob];
        for (int d = nd2 - 1; d >= 0; d--) { /* one odometer, three sets of strides */
            oc += sc[d], oa += sa[d], ob += sb[d];
            if (++idx[d] < shape2[d]) break;
            oc -= sc[d] * shape2[d], oa -= sa[d] * shape2[d], ob -= sb[d] * shape2[d];
            idx[d] = 0;
        }
    }
    Node *n = AC_NODE("WhereBackward0", where_backward, out, a, b);
    if (n) AC_CTX(n, WhereSaved)->cond = cond;
    return out;
}
