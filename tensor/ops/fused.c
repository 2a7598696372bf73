/* The book's GELU and LayerNorm (nn/models/gpt/gpt.c) and RMSNorm (nn/blocks/rmsnorm.c) as one op each,
 * forward and backward.
 *
 * The book writes both op by op, and PyTorch runs them so: its graph has no node for
 * either (the GELU ends in MulBackward0, the LayerNorm in AddBackward0), and each op
 * makes a tensor autograd keeps. Here each is one pass over its elements (the
 * LayerNorm: over its rows) that computes every element with the same float
 * operations in the same order as the ops one by one, so that the results, and
 * chapter 5's printed lines, do not move by a bit:
 *   - forward: each op's expression in its own rounding (the build has
 *     -ffp-contract=off, and every intermediate is a float, as the ops' tensors
 *     are), the same per-element tanh (libm's tanhf in exact math, kernels/
 *     fast_tanh.c in fast math, over the same runs of elements), the same sums
 *     for the mean (ac_cascade_sum) and the variance (in double, as ops/reduce.c);
 *   - backward: each op's own backward formula, in the order the engine runs the
 *     op-by-op nodes, and x's gradient terms added in the order those nodes would
 *     have sent them (send_terms below), after what x's gradient held before.
 * The grad_fn names are this library's own (BookGeluBackward0, BookRMSNormBackward0,
 * BookLayerNormBackward0): PyTorch has no such nodes. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- x's gradient, term by term ---------------------------------------------------------------
 * Op by op, x gets its gradient from several nodes (the GELU's from three, the LayerNorm's from
 * three), and the engine adds each to what x's gradient holds so far as it arrives: the first
 * taken as it is, then (sum + t). A fused backward gives the same bits only if it adds its terms
 * t1, t2, t3 in that order to the same sum. What x holds when the fused node runs decides how:
 *   ADD_ALL  x's sum so far is a buffer nothing else reads (ac_accum_target): ((s + t1) + t2) + t3
 *            in it, one pass;
 *   FIRST    x has no gradient yet: (t1 + t2) + t3, one pass, handed on;
 *   else     (a sum another node also reads, a leaf, autograd.grad's capture): t1 handed on alone,
 *            which leaves x a sum of its own to add (t2, t3) to in one more pass (ADD_23), or,
 *            where it does not (a leaf's .grad), t2 and t3 handed on one after the other.
 * Float addition is commutative, so s + t and t + s (whichever the engine writes) are the same. */
typedef enum { ADD_ALL, FIRST, ONLY1, ADD_23, ONLY2, ONLY3 } Terms;

/* The term loops of one op: dst (contiguous, x's size) written in `mode`. */
typedef void (*terms_pass)(void *ctx, Terms mode, float *dst);

/* Does x have a gradient node that no gradient has reached yet in this backward? */
static bool no_gradient_yet(const Node *n, int k) { return n->needs[k] && n->next[k] && !n->next[k]->bgrad; }

static void send_terms(Node *n, int k, Tensor *x, Tensor *g, terms_pass pass, void *ctx, const float *reads[],
                       int n_reads) {
    int64_t len = torch_numel(x);
    Tensor *sum = ac_accum_target(x);
    for (int i = 0; sum && i < n_reads; i++)
        if (ac_overlap(sum->data, len, reads[i], len)) sum = NULL; /* never: the sum is x's alone */
    if (sum) {
        pass(ctx, ADD_ALL, sum->data);
        return;
    }
    if (no_gradient_yet(n, k)) { /* the incoming gradient's buffer when it is n's to overwrite */
        Tensor *d = ac_grad_out(n, g);
        pass(ctx, FIRST, d->data);
        ac_accum_new(x, d);
        return;
    }
    Tensor *d = ac_new_like(x);
    pass(ctx, ONLY1, d->data);
    ac_accum_new(x, d);
    if ((sum = ac_accum_target(x))) {
        pass(ctx, ADD_23, sum->data);
        return;
    }
    d = ac_new_like(x);
    pass(ctx, ONLY2, d->data);
    ac_accum_new(x, d);
    d = ac_new_like(x);
    pass(ctx, ONLY3, d->data);
    ac_accum_new(x, d);
}

/* One loop per mode over [j0, j1), the terms T1, T2, T3 of element j (statements TERMS set them). */
#define TERM_LOOPS(TERMS)                                                                          \
    switch (mode) {                                                                                \
    case ADD_ALL: for (int64_t j = j0; j < j1; j++) { TERMS; float s1 = dst[j] + T1, s2 = s1 + T2; dst[j] = s2 + T3; } break; \
    case FIRST: for (int64_t j = j0; j < j1; j++) { TERMS; float s1 = T1 + T2; dst[j] = s1 + T3; } break;           \
    case ONLY1: for (int64_t j = j0; j < j1; j++) { TERMS; (void)T2, (void)T3; dst[j] = T1; } break;              \
    case ADD_23: for (int64_t j = j0; j < j1; j++) { TERMS; (void)T1; float s2 = dst[j] + T2; dst[j] = s2 + T3; } break; \
    case ONLY2: for (int64_t j = j0; j < j1; j++) { TERMS; (void)T1, (void)T3; dst[j] = T2; } break;              \
    case ONLY3: for (int64_t j = j0; j < j1; j++) { TERMS; (void)T1, (void)T2; dst[j] = T3; } break;              \
    }

/* ---- GELU ---------------------------------------------------------------------------------------
 * The book's (chapter 4), in nn_GPTGELU_forward:
 *     return 0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))
 * op by op: p = pow(x, 3) (x*x*x), cube = p * 0.044715, inner = x + cube, m = c * inner with
 * c = sqrt(float(2/pi)), t = tanh(m), a = t + 1, h = x * 0.5, out = h * a. Its backward, node by
 * node in the engine's order (MulBackward0 of h * a, AddBackward0, TanhBackward0, MulBackward0 of
 * c * inner, AddBackward0 of x + cube, MulBackward0 of * 0.044715, PowBackward0, MulBackward0 of
 * 0.5 * x):
 *     g_h = g * a,  g_a = g * h,  g_m = g_a * (1 - t * t),  g_inner = g_m * c,
 *     x gets  t1 = g_inner,  t2 = (g_inner * 0.044715) * (3 * (x * x)),  t3 = g_h * 0.5  in this order.
 * The node keeps x and t (PyTorch's ops keep x, t, h and a). */

#define GELU_BLOCK 512 /* elements a task takes at a time through the tanh (a multiple of 8: see below) */

typedef struct { float c, k; } GeluConst;

static GeluConst gelu_const(void) {
    /* torch.sqrt(torch.tensor(2.0 / torch.pi)): a float32 tensor, then sqrtf; 0.044715 as a Python
     * number times a float tensor: rounded to float first */
    return (GeluConst){sqrtf((float)(2.0 / M_PI)), (float)0.044715};
}

typedef struct { const float *x; float *out, *t; GeluConst k; bool exact; } GeluFwd;

/* Elements [i0, i1): each op's expression in its own rounding. The tanh goes over the run in
 * blocks of GELU_BLOCK from i0, so that ac_tanh_fast takes the same groups of 8 (and leaves the
 * same tail to tanhf) as the op-by-op tanh does over this run; the runs are the same, since
 * ac_parallel_for cuts numel(x) elements with AC_GRAIN as the tanh op does. */
static void gelu_forward_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    const GeluFwd *f = ctx;
    const float c = f->k.c, k = f->k.k;
    float m[GELU_BLOCK], tbuf[GELU_BLOCK];
    for (int64_t b = i0; b < i1; b += GELU_BLOCK) {
        int64_t len = i1 - b < GELU_BLOCK ? i1 - b : GELU_BLOCK;
        const float *x = f->x + b;
        float *t = f->t ? f->t + b : tbuf, *out = f->out + b;
        for (int64_t j = 0; j < len; j++) {
            float x2 = x[j] * x[j], p = x2 * x[j]; /* torch.pow(x, 3) */
            float cube = p * k;                    /* 0.044715 * ... */
            float inner = x[j] + cube;             /* x + ... */
            m[j] = c * inner;                      /* torch.sqrt(...) * (...) */
        }
        if (f->exact || !ac_tanh_fast(m, t, len)) /* torch.tanh(...) */
            for (int64_t j = 0; j < len; j++) t[j] = tanhf(m[j]);
        for (int64_t j = 0; j < len; j++) {
            float h = x[j] * 0.5f, a = t[j] + 1.0f; /* 0.5 * x, 1 + torch.tanh(...) */
            out[j] = h * a;
        }
    }
}

typedef struct { const float *g, *x, *t; GeluConst k; int64_t n; Terms mode; float *dst; } GeluBwd;

static void gelu_backward_task(void *ctx, int64_t j0, int64_t j1, int chunk) {
    const GeluBwd *b = ctx;
    const float *g = b->g, *x = b->x, *t = b->t, c = b->k.c, k = b->k.k;
    float *dst = b->dst, T1, T2, T3;
    Terms mode = b->mode;
#define GELU_TERMS                                                                             \
    float a = t[j] + 1.0f, h = x[j] * 0.5f;    /* the saved 1 + tanh and 0.5 * x, recomputed */ \
    float g_h = g[j] * a, g_a = g[j] * h;      /* MulBackward0 of h * a */                     \
    float tt = t[j] * t[j], dt = 1.0f - tt;    /* TanhBackward0: g * (1 - t * t) */            \
    float g_m = g_a * dt, g_inner = g_m * c;   /* MulBackward0 of c * inner */                 \
    float g_p = g_inner * k;                   /* MulBackward0 of 0.044715 * pow */            \
    float x2 = x[j] * x[j], d3 = 3.0f * x2;    /* PowBackward0: g * (3 * x^2) */               \
    T1 = g_inner;                              /* AddBackward0 of x + cube, to x first */      \
    T2 = g_p * d3;                             /* then PowBackward0's */                       \
    T3 = g_h * 0.5f                            /* then MulBackward0's of 0.5 * x */
    TERM_LOOPS(GELU_TERMS)
#undef GELU_TERMS
}

static void gelu_pass(void *ctx, Terms mode, float *dst) {
    GeluBwd *b = ctx;
    b->mode = mode, b->dst = dst;
    ac_parallel_for(b->n, AC_GRAIN, gelu_backward_task, b);
}

typedef struct { ac_saved x; Tensor *t; } GeluSaved;

static void gelu_backward(Node *n, Tensor *gt) {
    const GeluSaved *sv = n->ctx;
    Tensor *x = n->inputs[0];
    GeluBwd b = {ac_cdata(gt), ac_cdata(ac_unpack(n, sv->x)), sv->t->data, gelu_const(), torch_numel(x), FIRST, NULL};
    send_terms(n, 0, x, gt, gelu_pass, &b, (const float *[]){b.g, b.x, b.t}, 3);
}

bool ac_book_gelu_fits(const Tensor *x) {
    ac_check_defined(x, "book_gelu");
    return x->dtype == AC_FLOAT32;
}

Tensor *ac_book_gelu(Tensor *x) {
    ac_check_float(x, "book_gelu");
    bool grad = torch_is_grad_enabled() && x->requires_grad; /* as AC_NODE decides: else no node, nothing kept */
    Tensor *out = ac_new_like(x), *t = grad ? ac_new_like(x) : NULL;
    GeluFwd f = {ac_cdata(x), out->data, t ? t->data : NULL, gelu_const(), ac_get_exact()};
    ac_parallel_for(torch_numel(x), AC_GRAIN, gelu_forward_task, &f);
    /* PyTorch has no such node: the book's GELU is its ops one by one there */
    Node *n = AC_NODE("BookGeluBackward0", gelu_backward, out, x);
    if (n) {
        GeluSaved *sv = AC_CTX(n, GeluSaved);
        sv->x = ac_save(n, x);
        sv->t = t;
    }
    return out;
}

/* ---- LayerNorm ------------------------------------------------------------------------------------
 * The book's (chapter 4), in nn_GPTLayerNorm_forward:
 *     mean = x.mean(dim=-1, keepdim=True)
 *     var = x.var(dim=-1, keepdim=True, unbiased=False)
 *     norm_x = (x - mean) / torch.sqrt(var + self.eps)
 *     return self.scale * norm_x + self.shift
 * A row's forward: the mean as the mean op sums (ac_cascade_sum, then / n in float), the variance
 * as the var op does (in double: the mean, the squared deviations, / n, rounded once), s =
 * sqrtf(var + eps), then y = scale * ((x - mean) / s) + shift. The node keeps x, scale and three
 * floats a row: the mean, the mean VarBackward0 subtracts (self.mean(dim): the same float) and s.
 * Its backward, node by node in the engine's order (AddBackward0, MulBackward0, DivBackward0,
 * SqrtBackward0, AddBackward0, VarBackward0, SubBackward0, MeanBackward1), with g_n = g * scale:
 *     shift gets  sum over rows of g,  scale gets  sum over rows of g * norm_x  (ac_sum_rows: sum_to's
 *              sum over the leading dims, in ATen's order);
 *     a row's  g_s = sum of (-g_n) * (((x - mean) / s) / s),  g_var = g_s / (2 * s),
 *              g_mean = sum of -(g_n / s)  (each sum_to's sum over the last dim: ac_cascade_sum);
 *     x gets  t1 = g_n / s,  t2 = (g_var * float(2 / n)) * (x - mean),  t3 = g_mean / n  in this order: the
 *     engine runs SubBackward0 before VarBackward0 (the higher sequence number first) and MeanBackward1 last. */

typedef struct { const float *x, *w, *b; float *y, *st; int64_t D; float eps; } LnFwd;

static void ln_forward_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const LnFwd *f = ctx;
    const int64_t D = f->D;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = f->x + r * D;
        float *y = f->y + r * D;
        float mean = ac_cascade_sum(x, D, 1) / (float)D;      /* x.mean(dim=-1, keepdim=True) */
        double sum = 0, m2 = 0;                          /* x.var(dim=-1, keepdim=True, unbiased=False) */
        for (int64_t j = 0; j < D; j++) sum += x[j];
        sum /= (double)D;
        for (int64_t j = 0; j < D; j++) {
            double dev = x[j] - sum;
            m2 += dev * dev;
        }
        float var = (float)(m2 / (double)D);
        float ve = var + f->eps, s = sqrtf(ve); /* torch.sqrt(var + self.eps) */
        for (int64_t j = 0; j < D; j++) {
            float d = x[j] - mean, norm_x = d / s; /* (x - mean) / ... */
            float sc = f->w[j] * norm_x;           /* self.scale * norm_x + self.shift */
            y[j] = sc + f->b[j];
        }
        /* VarBackward0 subtracts self.mean(dim, keepdim=True): the mean op's, the same float as mean */
        if (f->st) f->st[3 * r] = mean, f->st[3 * r + 1] = mean, f->st[3 * r + 2] = s;
    }
}

/* scale's gradient is summed from g * norm_x: rows [r0, r1) of it into gn */
typedef struct { const float *G, *X, *st; float *gn; int64_t D; } LnParams;

static void ln_gn_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const LnParams *p = ctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *g = p->G + r * p->D, *x = p->X + r * p->D;
        const float mean = p->st[3 * r], s = p->st[3 * r + 2];
        float *gn = p->gn + r * p->D;
        for (int64_t j = 0; j < p->D; j++) { /* MulBackward0: g * norm_x */
            float d = x[j] - mean, norm_x = d / s;
            gn[j] = g[j] * norm_x;
        }
    }
}

typedef struct {
    const float *G, *X, *W, *st;
    float *rs;  /* a row's g_var * float(2 / n) and g_mean / n, made by the first pass */
    float *tmp; /* the first pass's scratch: 2 D floats a chunk */
    int chunks;
    bool have;  /* rs is made */
    int64_t rows, D;
    float c2, fD;
    Terms mode;
    float *dst;
} LnBwd;

static void ln_backward_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const LnBwd *b = ctx;
    const int64_t D = b->D;
    const float *W = b->W;
    Terms mode = b->mode;
    float T1, T2, T3;
    for (int64_t r = r0; r < r1; r++) {
        const float *g = b->G + r * D, *x = b->X + r * D;
        float *dst = b->dst + r * D;
        const float mean = b->st[3 * r], vmean = b->st[3 * r + 1], s = b->st[3 * r + 2];
        float cv, gm;
        if (!b->have) {
            /* DivBackward0's gradient for the root and SubBackward0's for the mean: ac_sum_to's sums
             * over the row, from 0 (a row of one is not summed: -0.0 + v is v) */
            float *qs = b->tmp + (size_t)chunk * 2 * (size_t)D, *ngds = qs + D;
            for (int64_t j = 0; j < D; j++) {
                float g_n = g[j] * W[j];                  /* MulBackward0: g * scale */
                float d = x[j] - mean, ng = -g_n;         /* DivBackward0: -g * ((a / b) / b) */
                qs[j] = ng * ((d / s) / s);
                float g_d = g_n / s;                      /* DivBackward0: g / b; SubBackward0: -g */
                ngds[j] = -g_d;
            }
            /* sum_to over the last dim: ATen's inner sum (a row of one is not summed) */
            float g_s = D == 1 ? qs[0] : ac_cascade_sum(qs, D, 1), g_mean = D == 1 ? ngds[0] : ac_cascade_sum(ngds, D, 1);
            float s2 = 2.0f * s, g_var = g_s / s2; /* SqrtBackward0: g / (2 sqrt); AddBackward0 passes it on */
            cv = g_var * b->c2;                    /* VarBackward0: g * float(2 / n) * (x - mean) */
            gm = g_mean / b->fD;                   /* MeanBackward1: g / n */
            b->rs[2 * r] = cv, b->rs[2 * r + 1] = gm;
        } else {
            cv = b->rs[2 * r], gm = b->rs[2 * r + 1];
        }
        const int64_t j0 = 0, j1 = D;
#define LN_TERMS                                                              \
    float g_n = g[j] * W[j];           /* SubBackward0 passes g / s on */       \
    T1 = g_n / s;                                                               \
    float dev = x[j] - vmean;          /* VarBackward0 */                       \
    T2 = cv * dev;                                                              \
    T3 = gm                            /* MeanBackward1 */
        TERM_LOOPS(LN_TERMS)
#undef LN_TERMS
    }
}

static void ln_pass(void *ctx, Terms mode, float *dst) {
    LnBwd *b = ctx;
    b->mode = mode, b->dst = dst;
    ac_parallel_for_max(b->rows, AC_GRAIN / (b->D + 1) + 1, b->chunks, ln_backward_task, b);
    b->have = true;
}

typedef struct { ac_saved x, w; Tensor *stats; } LnSaved;

static void ln_backward(Node *n, Tensor *gt) {
    const LnSaved *sv = n->ctx;
    Tensor *x = n->inputs[0], *w = n->inputs[1], *sh = n->inputs[2];
    int64_t D = x->shape[x->ndim - 1], rows = ac_rows(x);
    const float *G = ac_cdata(gt), *X = ac_cdata(ac_unpack(n, sv->x)), *st = sv->stats->data;
    bool need_w = ac_needs_grad(w), need_b = ac_needs_grad(sh);
    if (need_w || need_b) { /* AddBackward0 sends shift's, then MulBackward0 scale's: each summed over
                             * the rows as sum_to sums a broadcast gradient (ac_sum_rows: ATen's order);
                             * a 1-d x's is not summed at all */
        Tensor *gb = need_b ? ac_new_zeros(AC_FLOAT32, 1, &D) : NULL, *gw = NULL;
        if (gb) {
            if (x->ndim == 1) memcpy(gb->data, G, sizeof(float) * (size_t)D);
            else ac_sum_rows(G, rows, D, gb->data);
            ac_accum_new(sh, gb);
        }
        if (need_w) {
            gw = ac_new_zeros(AC_FLOAT32, 1, &D);
            Tensor *gn = ac_new(AC_FLOAT32, 2, (int64_t[]){rows, D});
            LnParams p = {G, X, st, gn->data, D};
            ac_parallel_for(rows, AC_GRAIN / (D + 1) + 1, ln_gn_task, &p);
            if (x->ndim == 1) memcpy(gw->data, gn->data, sizeof(float) * (size_t)D);
            else ac_sum_rows(gn->data, rows, D, gw->data);
            ac_accum_new(w, gw);
        }
    }
    if (ac_needs_grad(x)) {
        Tensor *rs = ac_new(AC_FLOAT32, 1, (int64_t[]){2 * rows});
        int chunks = ac_parallel_chunks(rows, AC_GRAIN / (D + 1) + 1);
        float *tmp = ac_arena_alloc(sizeof(float) * ac_size_mul(2 * (size_t)D, (size_t)chunks));
        LnBwd b = {G, X, ac_cdata(ac_unpack(n, sv->w)), st, rs->data, tmp, chunks, false, rows, D,
                   (float)(2.0 / (double)D), (float)D, FIRST, NULL};
        send_terms(n, 0, x, gt, ln_pass, &b, (const float *[]){G, X}, 2);
    }
}

bool ac_book_layer_norm_fits(const Tensor *x, const Tensor *scale, const Tensor *shift) {
    ac_check_defined(x, "book_layer_norm");
    ac_check_defined(scale, "book_layer_norm");
    ac_check_defined(shift, "book_layer_norm");
    if (x->dtype != AC_FLOAT32 || scale->dtype != AC_FLOAT32 || shift->dtype != AC_FLOAT32) return false;
    if (x->ndim < 1 || scale->ndim != 1 || shift->ndim != 1) return false;
    int64_t D = x->shape[x->ndim - 1];
    /* one tensor in two roles would have its gradients summed in another order */
    return D >= 1 && scale->shape[0] == D && shift->shape[0] == D && x != scale && x != shift && scale != shift;
}

Tensor *ac_book_layer_norm(Tensor *x, Tensor *scale, Tensor *shift, double eps) {
    const char *op = "book_layer_norm";
    ac_check_float(x, op);
    ac_check_float(scale, op);
    ac_check_float(shift, op);
    if (!ac_book_layer_norm_fits(x, scale, shift))
        ac_error("%s: expected an input [*, n] (n >= 1) and a scale and a shift of [n], three tensors, but got %s, %s "
                 "and %s", op, ac_shape_str(x), ac_shape_str(scale), ac_shape_str(shift));
    int64_t D = x->shape[x->ndim - 1], rows = ac_rows(x);
    bool grad = torch_is_grad_enabled() && (x->requires_grad || scale->requires_grad || shift->requires_grad);
    Tensor *y = ac_new_like(x), *stats = grad ? ac_new(AC_FLOAT32, 1, (int64_t[]){3 * rows}) : NULL;
    LnFwd f = {ac_cdata(x), ac_cdata(scale), ac_cdata(shift), y->data, stats ? stats->data : NULL, D, (float)eps};
    ac_parallel_for(rows, AC_GRAIN / (D + 1) + 1, ln_forward_task, &f);
    /* PyTorch has no such node: the book's LayerNorm is its ops one by one there */
    Node *n = AC_NODE("BookLayerNormBackward0", ln_backward, y, x, scale, shift);
    if (n) {
        LnSaved *sv = AC_CTX(n, LnSaved);
        sv->x = ac_save(n, x);
        if (x->requires_grad) sv->w = ac_save(n, scale); /* x's gradient reads scale */
        sv->stats = stats;
    }
    return y;
}

/* ---- RMSNorm --------------------------------------------------------------------------------------
 * The book's (Qwen3, and nn.RMSNorm: the same math), in nn_RMSNorm_forward:
 *     variance = x.pow(2).mean(dim=-1, keepdim=True)
 *     norm_x = x * torch.rsqrt(variance + self.eps)   (1 / sqrtf, RsqrtBackward0)
 *     return norm_x * self.scale
 * A row's forward: p = x * x, the mean as the mean op sums p (ac_cascade_sum, then / n in float),
 * ve = mean + float(eps), r = 1 / sqrtf(ve), y = (x * r) * scale. The node keeps x, scale and two
 * floats a row: ve and r. Its backward, node by node in the engine's order (MulBackward0 of
 * norm_x * scale, MulBackward0 of x * r, RsqrtBackward0, AddBackward1, MeanBackward1,
 * PowBackward0 of x^2), with g_n = g * scale:
 *     scale gets  sum over rows of g * norm_x  (ac_sum_rows, as sum_to; a 1-d x's not summed);
 *     a row's  g_r = sum of g_n * x  (sum_to over the last dim: 0 + ac_cascade_sum, a row of one not
 *              summed),  g_ve = (-0.5 * g_r) * ((r * r) * r),  g_p = g_ve / n;
 *     x gets  t1 = g_n * r  (MulBackward0's, first),  t2 = g_p * (2 * x)  (PowBackward0's, last).
 * x gets two terms where send_terms adds three: the third is -0.0, which leaves every float as it is
 * (s + -0.0 is s, a -0.0 sum included). */

typedef struct { const float *x, *w; float *y, *st, *tmp; int64_t D; float eps; } RmsFwd;

static void rms_forward_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const RmsFwd *f = ctx;
    const int64_t D = f->D;
    float *p = f->tmp + (size_t)chunk * (size_t)D;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = f->x + r * D;
        float *y = f->y + r * D;
        for (int64_t j = 0; j < D; j++) p[j] = x[j] * x[j];  /* x.pow(2) */
        float mean = ac_cascade_sum(p, D, 1) / (float)D;      /* .mean(dim=-1, keepdim=True) */
        float ve = mean + f->eps, rs = 1.0f / sqrtf(ve);      /* torch.rsqrt(variance + self.eps) */
        for (int64_t j = 0; j < D; j++) {
            float norm_x = x[j] * rs; /* x * ... */
            y[j] = norm_x * f->w[j];  /* norm_x * self.scale */
        }
        if (f->st) f->st[2 * r] = ve, f->st[2 * r + 1] = rs;
    }
}

/* scale's gradient is summed from g * norm_x: rows [r0, r1) of it into gn */
typedef struct { const float *G, *X, *st; float *gn; int64_t D; } RmsParams;

static void rms_gn_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const RmsParams *p = ctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *g = p->G + r * p->D, *x = p->X + r * p->D;
        const float rs = p->st[2 * r + 1];
        float *gn = p->gn + r * p->D;
        for (int64_t j = 0; j < p->D; j++) { /* MulBackward0: g * norm_x */
            float norm_x = x[j] * rs;
            gn[j] = g[j] * norm_x;
        }
    }
}

typedef struct {
    const float *G, *X, *W, *st;
    float *gp;  /* a row's g_p, made by the first pass */
    float *tmp; /* the first pass's scratch: D floats a chunk */
    int chunks;
    bool have;  /* gp is made */
    int64_t rows, D;
    float fD;
    Terms mode;
    float *dst;
} RmsBwd;

static void rms_backward_task(void *ctx, int64_t r0, int64_t r1, int chunk) {
    const RmsBwd *b = ctx;
    const int64_t D = b->D;
    const float *W = b->W;
    Terms mode = b->mode;
    float T1, T2, T3;
    for (int64_t r = r0; r < r1; r++) {
        const float *g = b->G + r * D, *x = b->X + r * D;
        float *dst = b->dst + r * D;
        const float rs = b->st[2 * r + 1]; /* (ve, kept beside it, is not needed: RsqrtBackward0 reads the result) */
        float gp;
        if (!b->have) {
            float *q = b->tmp + (size_t)chunk * (size_t)D;
            for (int64_t j = 0; j < D; j++) {
                float g_n = g[j] * W[j]; /* MulBackward0: g * scale */
                q[j] = g_n * x[j];       /* MulBackward0 of x * r: r's, before sum_to */
            }
            float g_r = D == 1 ? q[0] : 0.0f + ac_cascade_sum(q, D, 1); /* sum_to: zeros, += the row's sum */
            float g_ve = (-0.5f * g_r) * ((rs * rs) * rs); /* RsqrtBackward0: -0.5 * g * r^3; AddBackward1 passes it on */
            gp = g_ve / b->fD;                            /* MeanBackward1: g / n */
            b->gp[r] = gp;
        } else {
            gp = b->gp[r];
        }
        const int64_t j0 = 0, j1 = D;
#define RMS_TERMS                                                              \
    float g_n = g[j] * W[j];                                                     \
    T1 = g_n * rs;                  /* MulBackward0 of x * r */                  \
    float d2 = 2.0f * x[j];         /* PowBackward0 of x^2: g * (2 * x) */       \
    T2 = gp * d2;                                                                \
    T3 = -0.0f                      /* no third term */
        TERM_LOOPS(RMS_TERMS)
#undef RMS_TERMS
    }
}

static void rms_pass(void *ctx, Terms mode, float *dst) {
    RmsBwd *b = ctx;
    b->mode = mode, b->dst = dst;
    ac_parallel_for_max(b->rows, AC_GRAIN / (b->D + 1) + 1, b->chunks, rms_backward_task, b);
    b->have = true;
}

typedef struct { ac_saved x, w; Tensor *stats; } RmsSaved;

static void rms_backward(Node *n, Tensor *gt) {
    const RmsSaved *sv = n->ctx;
    Tensor *x = n->inputs[0], *w = n->inputs[1];
    int64_t D = x->shape[x->ndim - 1], rows = ac_rows(x);
    const float *G = ac_cdata(gt), *X = ac_cdata(ac_unpack(n, sv->x)), *st = sv->stats->data;
    if (ac_needs_grad(w)) { /* MulBackward0 of norm_x * scale: scale's, summed over the rows as sum_to sums it */
        Tensor *gw = ac_new_zeros(AC_FLOAT32, 1, &D);
        Tensor *gn = ac_new(AC_FLOAT32, 2, (int64_t[]){rows, D});
        RmsParams p = {G, X, st, gn->data, D};
        ac_parallel_for(rows, AC_GRAIN / (D + 1) + 1, rms_gn_task, &p);
        if (x->ndim == 1) memcpy(gw->data, gn->data, sizeof(float) * (size_t)D);
        else ac_sum_rows(gn->data, rows, D, gw->data);
        ac_accum_new(w, gw);
    }
    if (ac_needs_grad(x)) {
        Tensor *gp = ac_new(AC_FLOAT32, 1, (int64_t[]){rows});
        int chunks = ac_parallel_chunks(rows, AC_GRAIN / (D + 1) + 1);
        float *tmp = ac_arena_alloc(sizeof(float) * ac_size_mul((size_t)D, (size_t)chunks));
        RmsBwd b = {G, X, ac_cdata(ac_unpack(n, sv->w)), st, gp->data, tmp, chunks, false, rows, D, (float)D, FIRST, NULL};
        send_terms(n, 0, x, gt, rms_pass, &b, (const float *[]){G, X}, 2);
    }
}

bool ac_book_rms_norm_fits(const Tensor *x, const Tensor *scale) {
    ac_check_defined(x, "book_rms_norm");
    ac_check_defined(scale, "book_rms_norm");
    if (x->dtype != AC_FLOAT32 || scale->dtype != AC_FLOAT32 || x->ndim < 1 || scale->ndim != 1) return false;
    int64_t D = x->shape[x->ndim - 1];
    return D >= 1 && scale->shape[0] == D && x != scale; /* one tensor in two roles: another order */
}

Tensor *ac_book_rms_norm(Tensor *x, Tensor *scale, double eps) {
    const char *op = "book_rms_norm";
    ac_check_float(x, op);
    ac_check_float(scale, op);
    if (!ac_book_rms_norm_fits(x, scale))
        ac_error("%s: expected an input [*, n] (n >= 1) and a scale of [n], two tensors, but got %s and %s", op,
                 ac_shape_str(x), ac_shape_str(scale));
    int64_t D = x->shape[x->ndim - 1], rows = ac_rows(x);
    bool grad = torch_is_grad_enabled() && (x->requires_grad || scale->requires_grad);
    Tensor *y = ac_new_like(x), *stats = grad ? ac_new(AC_FLOAT32, 1, (int64_t[]){2 * rows}) : NULL;
    int64_t grain = AC_GRAIN / (D + 1) + 1;
    int chunks = ac_parallel_chunks(rows, grain);
    float *tmp = ac_arena_alloc(sizeof(float) * ac_size_mul((size_t)D, (size_t)chunks));
    RmsFwd f = {ac_cdata(x), ac_cdata(scale), y->data, stats ? stats->data : NULL, tmp, D, (float)eps};
    ac_parallel_for_max(rows, grain, chunks, rms_forward_task, &f);
    /* PyTorch has no such node: the book's RMSNorm is its ops one by one there */
    Node *n = AC_NODE("BookRMSNormBackward0", rms_backward, y, x, scale);
    if (n) {
        RmsSaved *sv = AC_CTX(n, RmsSaved);
        sv->x = ac_save(n, x);
        if (x->requires_grad) sv->w = ac_save(n, scale); /* x's gradient reads scale */
        sv->stats = stats;
    }
    return y;
}
