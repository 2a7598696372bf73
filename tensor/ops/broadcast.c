/* Broadcasting, as PyTorch's: shapes aligned from the last dim, a size of 1
 * stretches. The forward helpers (a result's shape, strides that read an
 * input through it) and the backward one (sum a gradient back to an input's
 * shape). */
#include "internal.h"

bool ac_broadcast_shape(const Tensor *a, const Tensor *b, int *ndim, int64_t *shape) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) return false;
        shape[i] = sa == 1 ? sb : sa;
    }
    *ndim = n;
    return true;
}

void ac_broadcast_strides(const Tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
    int64_t cs[AC_MAX_DIMS];
    ac_contiguous_strides(t->ndim, t->shape, cs);
    for (int i = 0; i < ndim; i++) {
        int it = t->ndim - ndim + i;
        stride[i] = (it < 0 || (t->shape[it] == 1 && shape[i] != 1)) ? 0 : cs[it];
    }
}

void ac_broadcast_check(const char *op, const Tensor *a, const Tensor *b, int *ndim, int64_t *shape) {
    if (ac_broadcast_shape(a, b, ndim, shape)) return;
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = n - 1; i >= 0; i--) { /* PyTorch names the last dim that disagrees */
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            ac_error("%s: The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton "
                     "dimension %d", op, (long long)sa, (long long)sb, i);
    }
}

/* Sum a broadcast gradient back to `like`'s shape: leading dims, then dims of
 * size 1 (the tinygrad #104 bug lives here). */
typedef struct { const float *g; int64_t rows, len, groups; float *o; } RowsJob;

static int ceil_log2(int64_t x) {
    int r = 0;
    while (((int64_t)1 << r) < x) r++;
    return r;
}

/* Columns [j0, j0 + w) (w <= 32) of the (rows, len) block, each summed over the rows by ATen's
 * multi_row_sum (four levels, level 0 folded on every 2^power rows), added into o. */
static void cascade_cols(const float *g, int64_t rows, int64_t len, int64_t j0, int w, float *o) {
    int power = ceil_log2(rows) / 4;
    if (power < 4) power = 4;
    const int64_t step = (int64_t)1 << power, mask = step - 1;
    float acc[4][32] = {{0}};
    int64_t i = 0;
    while (i + step <= rows) {
        for (int64_t k = 0; k < step; k++, i++)
            for (int c = 0; c < w; c++) acc[0][c] += g[i * len + j0 + c];
        for (int lv = 1; lv < 4; lv++) {
            for (int c = 0; c < w; c++) acc[lv][c] += acc[lv - 1][c], acc[lv - 1][c] = 0;
            if ((i & (mask << (lv * power))) != 0) break;
        }
    }
    for (; i < rows; i++)
        for (int c = 0; c < w; c++) acc[0][c] += g[i * len + j0 + c];
    for (int c = 0; c < w; c++) o[j0 + c] += ((acc[0][c] + acc[1][c]) + acc[2][c]) + acc[3][c];
}

/* Columns [j0, j1): those below `groups` (ATen's whole groups) by cascade_cols, the rest by row_sum. */
static void sum_rows_task(void *ctx, int64_t j0, int64_t j1, int chunk) {
    const RowsJob *r = ctx;
    for (int64_t j = j0; j < j1 && j < r->groups;) {
        int w = (int)((j1 < r->groups ? j1 : r->groups) - j);
        if (w > 32) w = 32;
        cascade_cols(r->g, r->rows, r->len, j, w, r->o);
        j += w;
    }
    for (int64_t j = j0 > r->groups ? j0 : r->groups; j < j1; j++) r->o[j] += ac_ilp4_sum(r->g + j, r->rows, r->len);
}

/* outputs [i0, i1), each the sum of its run of len elements of g, as ATen sums over the last dims */
static void run_sums_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    const RowsJob *r = ctx;
    for (int64_t i = i0; i < i1; i++) r->o[i] += ac_cascade_sum(r->g + i * r->len, r->len, 1);
}

/* o[j] += the sum over the rows of column j, as ATen's sum kernel sums a contiguous (rows, len)
 * tensor over dim 0 (a bias's gradient, sum_to over leading dims): 8-wide vectors from len >= 8
 * (vectorized_outer_sum: whole groups of 32 columns by multi_row_sum, the rest by row_sum), 4
 * columns at a time below (scalar_outer_sum); one column is a plain inner sum. */
void ac_sum_rows(const float *g, int64_t rows, int64_t len, float *o) {
    if (len == 1) {
        o[0] += ac_cascade_sum(g, rows, 1);
        return;
    }
    RowsJob r = {g, rows, len, len >= 8 ? len / 32 * 32 : len / 4 * 4, o};
    ac_parallel_for(len, AC_GRAIN / (rows + 1) + 32, sum_rows_task, &r);
}

Tensor *ac_sum_to(Tensor *g, const Tensor *like) {
    if (g->ndim == like->ndim) {
        bool same = true;
        for (int i = 0; i < g->ndim; i++) same = same && g->shape[i] == like->shape[i];
        if (same) return g;
    }
    int lead = g->ndim - like->ndim;
    Tensor *out = ac_new_zeros(AC_FLOAT32, like->ndim, like->shape);
    int64_t ostr[AC_MAX_DIMS]; /* strides of out seen through g's shape */
    for (int d = 0; d < g->ndim; d++) {
        int ld = d - lead;
        ostr[d] = (ld < 0 || like->shape[ld] == 1) ? 0 : out->stride[ld];
    }
    const float *gd = ac_cdata(g);
    float *o = out->data;
    int64_t n = torch_numel(g), idx[AC_MAX_DIMS] = {0}, off = 0;
    /* The common case, every summed dim before every kept one (a bias, a
     * position embedding): rows of g added to out, in the same order. */
    int first_kept = g->ndim;
    bool prefix = true;
    for (int d = 0; d < g->ndim; d++) {
        if (g->shape[d] == 1) continue; /* a dim of one neither sums nor keeps anything */
        bool summed = ostr[d] == 0;
        if (!summed && first_kept == g->ndim) first_kept = d;
        if (summed && first_kept < d) prefix = false;
    }
    if (prefix) {
        int64_t rows = 1;
        for (int d = 0; d < first_kept; d++) rows *= g->shape[d];
        int64_t len = rows ? n / rows : 0;
        ac_sum_rows(gd, rows, len, o);
        return out;
    }
    /* Every summed dim after every kept one (a mean over the last dim, keepdim):
     * each output the sum of one run of g, in order. */
    int last_kept = -1;
    bool suffix = true, seen_summed = false;
    for (int d = 0; d < g->ndim; d++) {
        if (g->shape[d] == 1) continue;
        if (ostr[d] == 0) seen_summed = true;
        else if (seen_summed) suffix = false;
        else last_kept = d;
    }
    if (suffix) {
        int64_t outs = 1;
        for (int d = 0; d <= last_kept; d++) outs *= g->shape[d];
        RowsJob r = {gd, outs, outs ? n / outs : 0, 0, o};
        ac_parallel_for(outs, AC_GRAIN / (r.len + 1) + 1, run_sums_task, &r);
        return out;
    }
    for (int64_t k = 0; k < n; k++) {
        o[off] += gd[k];
        ac_advance(g->ndim, g->shape, ostr, idx, &off);
    }
    return out;
}

