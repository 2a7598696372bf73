/* Elementwise ops: add, sub, mul, div (broadcasting, and with a scalar), and
 * the unary maths. Each forward is one loop per op (a switch outside the loop,
 * never a function pointer per element); each backward sits right below. */
#include <math.h>

#include "internal.h"

typedef enum { ADD, SUB, MUL, DIV } BinOp;
static const char *const bin_names[] = {"AddBackward0", "SubBackward0", "MulBackward0", "DivBackward0"};
static const char *const bin_ops[] = {"add", "sub", "mul", "div"};

/* One loop per op, a switch outside it; X and Y are the operands' j-th
 * elements. Contiguous operands, and b one number, get loops of their own,
 * which compilers vectorize. */
#define BIN_SWITCH(X, Y)                                                        \
    switch (op) {                                                               \
    case ADD: for (int64_t j = 0; j < n; j++) po[j] = (X) + (Y); break;         \
    case SUB: for (int64_t j = 0; j < n; j++) po[j] = (X) - (Y); break;         \
    case MUL: for (int64_t j = 0; j < n; j++) po[j] = (X) * (Y); break;         \
    case DIV: for (int64_t j = 0; j < n; j++) po[j] = (X) / (Y); break;         \
    }

static void bin_row(BinOp op, const float *pa, int64_t sa, const float *pb, int64_t sb, float *po, int64_t n) {
    if (sa == 1 && sb == 1) {
        BIN_SWITCH(pa[j], pb[j]);
    } else if (sa == 1 && sb == 0) {
        const float y = pb[0];
        BIN_SWITCH(pa[j], y);
    } else {
        BIN_SWITCH(pa[j * sa], pb[j * sb]);
    }
}

/* Large loops are split among threads: each element is computed the same way. */
typedef struct {
    BinOp op;
    const float *a, *b;
    float *o;
    int nd;
    int64_t inner, isa, isb;
    const int64_t *shape, *sa, *sb;
} BinJob;

static void bin_flat_task(void *ctx, int64_t i0, int64_t i1, int chunk) { /* same sizes, or b a scalar (isb 0) */
    const BinJob *j = ctx;
    bin_row(j->op, j->a + i0, 1, j->b + i0 * j->isb, j->isb, j->o + i0, i1 - i0);
}

static void bin_rows_task(void *ctx, int64_t r0, int64_t r1, int chunk) { /* broadcasting: rows of the last dim */
    const BinJob *j = ctx;
    int64_t ia[AC_MAX_DIMS] = {0}, ib[AC_MAX_DIMS] = {0}, oa = 0, ob = 0, rest = r0;
    for (int d = j->nd - 2; d >= 0; d--) { /* the odometer at row r0 */
        ia[d] = ib[d] = rest % j->shape[d];
        rest /= j->shape[d];
        oa += ia[d] * j->sa[d];
        ob += ib[d] * j->sb[d];
    }
    for (int64_t r = r0; r < r1; r++) {
        bin_row(j->op, j->a + oa, j->isa, j->b + ob, j->isb, j->o + r * j->inner, j->inner);
        ac_advance(j->nd - 1, j->shape, j->sa, ia, &oa);
        ac_advance(j->nd - 1, j->shape, j->sb, ib, &ob);
    }
}

/* out = a op b with broadcasting, no autograd. */
static Tensor *bin_compute(BinOp op, Tensor *a, Tensor *b) {
    int nd;
    int64_t shape[AC_MAX_DIMS];
    ac_broadcast_check(bin_ops[op], a, b, &nd, shape);
    Tensor *out = ac_new(AC_FLOAT32, nd, shape);
    const float *da = ac_cdata(a), *db = ac_cdata(b);
    float *o = out->data;
    int64_t n = torch_numel(out);
    if (n == 0) return out;
    if (torch_numel(a) == n && torch_numel(b) == n) {
        BinJob j = {op, da, db, o, 0, 0, 1, 1, NULL, NULL, NULL};
        ac_parallel_for(n, AC_GRAIN, bin_flat_task, &j);
        return out;
    }
    int64_t sa[AC_MAX_DIMS], sb[AC_MAX_DIMS];
    ac_broadcast_strides(a, nd, shape, sa);
    ac_broadcast_strides(b, nd, shape, sb);
    int64_t inner = nd ? shape[nd - 1] : 1, rows = n / inner;
    BinJob j = {op, da, db, o, nd, inner, nd ? sa[nd - 1] : 0, nd ? sb[nd - 1] : 0, shape, sa, sb};
    ac_parallel_for(rows, AC_GRAIN / inner + 1, bin_rows_task, &j);
    return out;
}

/* What each backward needs: mul saves each input for the other's gradient,
 * div saves b for a's and both for b's (as PyTorch's derivatives.yaml). */
typedef struct { BinOp op; ac_saved a, b; } BinSaved;

static void bin_backward(Node *n, Tensor *g) {
    const BinSaved *sv = n->ctx;
    BinOp op = sv->op;
    Tensor *a = n->inputs[0], *b = n->inputs[1];
    switch (op) {
    case ADD:
        ac_accum(a, ac_sum_to(g, a));
        ac_accum(b, ac_sum_to(g, b));
        break;
    case SUB:
        ac_accum(a, ac_sum_to(g, a));
        if (ac_needs_grad(b)) ac_accum(b, ac_sum_to(torch_neg(g), b));
        break;
    case MUL: /* d(a*b) = g*b, g*a */
        if (ac_needs_grad(a)) ac_accum(a, ac_sum_to(bin_compute(MUL, g, ac_unpack(n, sv->b)), a));
        if (ac_needs_grad(b)) ac_accum(b, ac_sum_to(bin_compute(MUL, g, ac_unpack(n, sv->a)), b));
        break;
    case DIV: { /* d(a/b) = g/b, -g * ((a / b) / b): DivBackward0's own rounding (not -g a / (b b)) */
        Tensor *bv = ac_unpack(n, sv->b);
        if (ac_needs_grad(a)) ac_accum(a, ac_sum_to(bin_compute(DIV, g, bv), a));
        if (ac_needs_grad(b)) {
            Tensor *q = bin_compute(DIV, bin_compute(DIV, ac_unpack(n, sv->a), bv), bv);
            ac_accum(b, ac_sum_to(bin_compute(MUL, torch_neg(g), q), b));
        }
        break;
    }
    }
}

static Tensor *binary(BinOp op, Tensor *a, Tensor *b) {
    ac_check_float(a, bin_ops[op]);
    ac_check_float(b, bin_ops[op]);
    Tensor *out = bin_compute(op, a, b);
    Node *n = AC_NODE(bin_names[op], bin_backward, out, a, b);
    if (n) {
        BinSaved *sv = AC_CTX(n, BinSaved);
        sv->op = op;
        if (op == MUL || op == DIV) {
            if (ac_needs_grad(b)) sv->a = ac_save(n, a);
            if (ac_needs_grad(a) || op == DIV) sv->b = ac_save(n, b);
        }
    }
    return out;
}

Tensor *torch_add(Tensor *a, Tensor *b) { return binary(ADD, a, b); }
Tensor *torch_sub(Tensor *a, Tensor *b) { return binary(SUB, a, b); }
Tensor *torch_mul(Tensor *a, Tensor *b) { return binary(MUL, a, b); }
Tensor *torch_div(Tensor *a, Tensor *b) { return binary(DIV, a, b); }

/* ---- a tensor and a Python number: the number is cast to float32 first ---------- */

static Tensor *scalar_compute(BinOp op, Tensor *a, float s, Tensor *out) {
    BinJob j = {op, ac_cdata(a), &s, out->data, 0, 0, 1, 0, NULL, NULL, NULL};
    ac_parallel_for(torch_numel(a), AC_GRAIN, bin_flat_task, &j);
    return out;
}

typedef struct { BinOp op; float s; } ScalarSaved;

static void scalar_backward(Node *n, Tensor *g) {
    const ScalarSaved *sv = n->ctx;
    BinOp op = sv->op;
    float s = sv->s;
    Tensor *a = n->inputs[0];
    if (op == MUL || op == DIV) ac_accum_new(a, scalar_compute(op, g, s, ac_grad_out(n, g))); /* g * s, g / s */
    else ac_accum_pass(n, a, g);
}

static Tensor *scalar_op(BinOp op, Tensor *a, double s) {
    ac_check_float(a, bin_ops[op]);
    Tensor *out = scalar_compute(op, a, (float)s, ac_new_like(a));
    Node *n = AC_NODE(bin_names[op], scalar_backward, out, a);
    if (n) *AC_CTX(n, ScalarSaved) = (ScalarSaved){op, (float)s};
    return out;
}

/* x.add_(s), x.sub_(s), x.mul_(s), x.div_(s) (op 0-3) on a float tensor that
 * is no view, elements in order: the same op written into x, and x's new
 * history the same node on its old one (a number's op needs neither old
 * value back). No second tensor of x's size. */
void ac_scalar_op_whole_(Tensor *x, int op, double s) {
    scalar_compute((BinOp)op, x, (float)s, x);
    ac_bump_version(x);
    Node *n = AC_NODE(bin_names[op], scalar_backward, x, x);
    if (n) *AC_CTX(n, ScalarSaved) = (ScalarSaved){(BinOp)op, (float)s};
}

Tensor *torch_add_scalar(Tensor *a, double s) { return scalar_op(ADD, a, s); }
Tensor *torch_sub_scalar(Tensor *a, double s) { return scalar_op(SUB, a, s); }
Tensor *torch_mul_scalar(Tensor *a, double s) { return scalar_op(MUL, a, s); }
Tensor *torch_div_scalar(Tensor *a, double s) { return scalar_op(DIV, a, s); }

/* ---- unary -------------------------------------------------------------------------- */

typedef enum { NEG, EXP, LOG, SQRT, POW, RELU, TANH, GELU, SIGMOID, SILU, SOFTPLUS, ABS, CLAMP, SIN, COS, LOGSIGMOID, RSQRT } UnOp;
static const char *const un_names[] = {"NegBackward0",     "ExpBackward0",  "LogBackward0",   "SqrtBackward0",
                                       "PowBackward0",     "ReluBackward0", "TanhBackward0",  "GeluBackward0",
                                       "SigmoidBackward0", "SiluBackward0", "SoftplusBackward0", "AbsBackward0",
                                       "ClampBackward1",   "SinBackward0",  "CosBackward0",   "LogSigmoidBackward0",
                                       "RsqrtBackward0"};
static const char *const un_ops[] = {"neg",  "exp",     "log",  "sqrt",     "pow", "relu", "tanh",
                                     "gelu", "sigmoid", "silu", "softplus", "abs", "clamp", "sin", "cos", "log_sigmoid",
                                     "rsqrt"};

#define UN_LOOP(EXPR) for (int64_t i_ = 0; i_ < n; i_++) { float x = in[i_]; o[i_] = (EXPR); }

#define SILU_BLOCK 256 /* elements SiLU takes through the exp at a time (on the stack) */

static float pow_scalar(float x, double e) {
    /* PyTorch special-cases these exponents (pow_tensor_scalar_optimized_kernel). */
    if (e == 1.0) return x; /* pow_Tensor_Scalar_out copies self */
    if (e == 2.0) return x * x;
    if (e == 3.0) return x * x * x;
    if (e == 0.5) return sqrtf(x);
    if (e == -0.5) return 1.0f / sqrtf(x);
    if (e == -1.0) return 1.0f / x;
    if (e == -2.0) return 1.0f / (x * x);
    return powf(x, (float)e);
}

/* softplus(x) = log(1 + exp(beta x)) / beta, and x itself past the threshold (e: beta, e2: threshold) */
static float softplus(float x, float beta, float threshold) {
    return x * beta > threshold ? x : log1pf(expf(x * beta)) / beta;
}

/* F.logsigmoid(x) as PyTorch's CPU kernel computes it: min(x, 0) - log1p(exp(-|x|)), which neither
 * overflows nor loses the small values log(sigmoid(x)) would (a NaN stays NaN) */
static float log_sigmoid(float x) {
    float lo = isnan(x) ? x : x < 0.0f ? x : 0.0f;
    return lo - log1pf(expf(-fabsf(x)));
}

/* clamp: a NaN bound is no bound (None); a NaN input stays NaN */
static float clampf(float x, float lo, float hi) {
    if (isnan(x)) return x;
    if (!isnan(lo) && x < lo) x = lo;
    if (!isnan(hi) && x > hi) x = hi;
    return x;
}

static void un_compute_range(UnOp op, const float *in, float *o, int64_t n, double e, double e2) {
    switch (op) {
    case NEG: UN_LOOP(-x); break;
    case EXP: UN_LOOP(expf(x)); break;
    case LOG: UN_LOOP(logf(x)); break;
    case SQRT: UN_LOOP(sqrtf(x)); break;
    case RSQRT: UN_LOOP(1.0f / sqrtf(x)); break; /* PyTorch's CPU rsqrt: 1 / sqrt in float */
    case POW: /* the common exponents in loops of their own, which vectorize */
        if (e == 2.0) {
            UN_LOOP(x * x);
        } else if (e == -0.5) {
            UN_LOOP(1.0f / sqrtf(x));
        } else {
            UN_LOOP(pow_scalar(x, e));
        }
        break;
    case RELU: UN_LOOP(x > 0.0f ? x : (isnan(x) ? x : 0.0f)); break;
    case TANH: /* fast math: libm's very bits 8 at a time (fast_tanh.c), where it has them */
        if (ac_get_exact() || !ac_tanh_fast(in, o, n)) UN_LOOP(tanhf(x));
        break;
    case GELU: UN_LOOP(x * 0.5f * (1.0f + erff(x * (float)M_SQRT1_2))); break;
    case SIGMOID: UN_LOOP(1.0f / (1.0f + expf(-x))); break;
    case SILU: /* exp(-x) a block at a time through ac_exp_sub (libm's expf in exact math, the same bits;
                * vectorized in fast math), then x / (1 + exp(-x)) */
        for (int64_t b = 0; b < n; b += SILU_BLOCK) {
            int64_t len = n - b < SILU_BLOCK ? n - b : SILU_BLOCK;
            float t[SILU_BLOCK];
            for (int64_t i = 0; i < len; i++) t[i] = -in[b + i];
            ac_exp_sub(t, 0.0f, t, len); /* expf(-x - 0) = expf(-x) */
            for (int64_t i = 0; i < len; i++) o[b + i] = in[b + i] / (1.0f + t[i]);
        }
        break;
    case SOFTPLUS: UN_LOOP(softplus(x, (float)e, (float)e2)); break;
    case ABS: UN_LOOP(fabsf(x)); break;
    case CLAMP: UN_LOOP(clampf(x, (float)e, (float)e2)); break;
    case SIN: UN_LOOP(sinf(x)); break;
    case COS: UN_LOOP(cosf(x)); break;
    case LOGSIGMOID: UN_LOOP(log_sigmoid(x)); break;
    }
}

typedef struct { UnOp op; const float *in, *g, *x, *y; float *o; double e, e2; } UnJob;

static void un_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    const UnJob *j = ctx;
    un_compute_range(j->op, j->in + i0, j->o + i0, i1 - i0, j->e, j->e2);
}

static void un_compute(UnOp op, const float *in, float *o, int64_t n, double e, double e2) {
    UnJob j = {op, in, NULL, NULL, NULL, o, e, e2};
    ac_parallel_for(n, AC_GRAIN, un_task, &j);
}

/* One loop per op, the switch outside it, so that the simple ones vectorize. */
#define UNB_LOOP(EXPR) for (int64_t i = i0; i < i1; i++) r[i] = (EXPR)

static void un_backward_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    const UnJob *j = ctx;
    const float *restrict g = j->g, *restrict x = j->x, *restrict y = j->y;
    float *restrict r = j->o, e = (float)j->e, e2 = (float)j->e2;
    const float beta = (float)(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    switch (j->op) {
    case NEG: UNB_LOOP(-g[i]); break;
    case EXP: UNB_LOOP(g[i] * y[i]); break;           /* d e^x = e^x */
    case LOG: UNB_LOOP(g[i] / x[i]); break;           /* d log x = 1/x */
    case SQRT: UNB_LOOP(g[i] / (2.0f * y[i])); break; /* d sqrt x = 1/(2 sqrt x) */
    case RSQRT: UNB_LOOP((-0.5f * g[i]) * ((y[i] * y[i]) * y[i])); break; /* RsqrtBackward0: -0.5 * grad * result.pow(3) */
    case POW: /* PyTorch's pow_backward: grad * (exponent * self.pow(exponent - 1)), in that order; self.pow(1)
               * is a copy of self (pow_Tensor_Scalar_out), so x^2's backward reads x itself, no powf */
        if (e == 0.0f) {
            UNB_LOOP(0.0f);
        } else if (j->e == 2.0) {
            UNB_LOOP(g[i] * (e * x[i]));
        } else {
            UNB_LOOP(g[i] * (e * pow_scalar(x[i], j->e - 1.0)));
        }
        break;
    case RELU: UNB_LOOP(y[i] > 0.0f ? g[i] : 0.0f); break;
    case TANH: UNB_LOOP(g[i] * (1.0f - y[i] * y[i])); break;
    case GELU:
        for (int64_t i = i0; i < i1; i++) {
            float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
            float pdf = expf(-0.5f * x[i] * x[i]) * beta;
            r[i] = g[i] * (cdf + x[i] * pdf);
        }
        break;
    case SIGMOID: UNB_LOOP(g[i] * (1.0f - y[i]) * y[i]); break;
    case SILU: /* d x s(x) = s (1 + x (1 - s)); exp(-x) a block at a time, as the forward's */
        for (int64_t b = i0; b < i1; b += SILU_BLOCK) {
            int64_t len = i1 - b < SILU_BLOCK ? i1 - b : SILU_BLOCK;
            float t[SILU_BLOCK];
            for (int64_t k = 0; k < len; k++) t[k] = -x[b + k];
            ac_exp_sub(t, 0.0f, t, len);
            for (int64_t k = 0, i = b; k < len; k++, i++) {
                float s = 1.0f / (1.0f + t[k]);
                r[i] = g[i] * s * (1.0f + x[i] * (1.0f - s));
            }
        }
        break;
    case SOFTPLUS: /* d softplus = e^(beta x) / (e^(beta x) + 1), 1 past the threshold */
        for (int64_t i = i0; i < i1; i++) {
            float z = expf(x[i] * e);
            r[i] = x[i] * e > e2 ? g[i] : g[i] * z / (z + 1.0f);
        }
        break;
    case ABS: UNB_LOOP(x[i] > 0.0f ? g[i] : x[i] < 0.0f ? -g[i] : 0.0f * g[i]); break;
    case CLAMP: /* 1 inside [min, max], bounds included */
        UNB_LOOP((isnan(e) || x[i] >= e) && (isnan(e2) || x[i] <= e2) ? g[i] : 0.0f);
        break;
    case SIN: UNB_LOOP(g[i] * cosf(x[i])); break;  /* d sin x = cos x */
    case COS: UNB_LOOP(g[i] * -sinf(x[i])); break; /* d cos x = -sin x */
    case LOGSIGMOID: /* PyTorch's log_sigmoid_backward: b = exp(-|x|), (max_deriv - sign * b / (1 + b)) * g */
        for (int64_t i = i0; i < i1; i++) {
            float b = expf(-fabsf(x[i]));
            bool neg = x[i] < 0.0f;
            r[i] = ((neg ? 1.0f : 0.0f) - (neg ? 1.0f : -1.0f) * (b / (1.0f + b))) * g[i];
        }
        break;
    }
}

/* exp, sqrt, rsqrt, relu, tanh and sigmoid read their result; log, pow and gelu their input. */
typedef struct { UnOp op; double e, e2; ac_saved x, y; } UnSaved;

static bool un_saves_result(UnOp op) {
    return op == EXP || op == SQRT || op == RSQRT || op == RELU || op == TANH || op == SIGMOID;
}

static void un_backward(Node *n, Tensor *gt) {
    const UnSaved *sv = n->ctx;
    Tensor *a = n->inputs[0], *x = ac_unpack(n, sv->x), *y = ac_unpack(n, sv->y);
    Tensor *rt = ac_new_like(a);
    UnJob j = {sv->op, NULL, ac_cdata(gt), x ? ac_cdata(x) : NULL, y ? ac_cdata(y) : NULL, rt->data, sv->e, sv->e2};
    ac_parallel_for(torch_numel(a), AC_GRAIN, un_backward_task, &j);
    ac_accum(a, rt);
}

static Tensor *unary2(UnOp op, Tensor *a, double e, double e2) {
    ac_check_float(a, un_ops[op]);
    Tensor *out = ac_new_like(a);
    un_compute(op, ac_cdata(a), out->data, torch_numel(a), e, e2);
    Node *n = AC_NODE(un_names[op], un_backward, out, a);
    if (n) {
        UnSaved *sv = AC_CTX(n, UnSaved);
        sv->op = op;
        sv->e = e;
        sv->e2 = e2;
        if (un_saves_result(op)) sv->y = ac_save(n, out);
        else if (op != NEG) sv->x = ac_save(n, a);
    }
    return out;
}

static Tensor *unary(UnOp op, Tensor *a, double e) { return unary2(op, a, e, 0); }

Tensor *torch_neg(Tensor *a) { return unary(NEG, a, 0); }
Tensor *torch_exp(Tensor *a) { return unary(EXP, a, 0); }
Tensor *torch_log(Tensor *a) { return unary(LOG, a, 0); }
Tensor *torch_sqrt(Tensor *a) { return unary(SQRT, a, 0); }
Tensor *torch_rsqrt(Tensor *a) { return unary(RSQRT, a, 0); }
Tensor *torch_pow(Tensor *a, double exponent) { return unary(POW, a, exponent); }
Tensor *torch_relu(Tensor *a) { return unary(RELU, a, 0); }
Tensor *torch_tanh(Tensor *a) { return unary(TANH, a, 0); }
Tensor *torch_gelu(Tensor *a) { return unary(GELU, a, 0); }
Tensor *torch_sigmoid(Tensor *a) { return unary(SIGMOID, a, 0); }
Tensor *torch_silu(Tensor *a) { return unary(SILU, a, 0); }
Tensor *torch_softplus(Tensor *a, double beta, double threshold) { return unary2(SOFTPLUS, a, beta, threshold); }
Tensor *torch_abs(Tensor *a) { return unary(ABS, a, 0); }
Tensor *torch_sin(Tensor *a) { return unary(SIN, a, 0); }
Tensor *torch_cos(Tensor *a) { return unary(COS, a, 0); }
Tensor *torch_logsigmoid(Tensor *a) { return unary(LOGSIGMOID, a, 0); }
Tensor *torch_clamp(Tensor *a, double min, double max) {
    if (isnan(min) && isnan(max)) ac_error("clamp: torch.clamp: At least one of 'min' or 'max' must not be None");
    return unary2(CLAMP, a, min, max);
}
