/* Finite-difference gradient checks for every op's backward.
 *
 * The loss is L = sum(w * f(x)) with fixed random weights w in [-1, 1) (never a
 * plain sum: softmax's sum has zero gradient, so it would pass whatever the
 * backward did). L is summed in double outside the library, and the backward
 * is seeded with w. The numeric derivative is the 5-point stencil
 *     dL/dx ~ (8 (L(x+h) - L(x-h)) - (L(x+2h) - L(x-2h))) / 12h,   h = 2^-6,
 * on inputs that are multiples of 2^-10, so every x +- k h is exact in float32.
 *
 * Tolerance, as tight as float32 allows: the stencil's truncation error is
 * h^4/30 |f^(5)| ~ 1e-9 |f^(5)| (negligible for these smooth ops), so the error
 * is float32 rounding of f's outputs. With each output within ~16 ulps
 * (relative 2^-20) the noise in L is eps_L = 2^-20 sum|w f|, and in the stencil
 * about 1.5 eps_L / h. A gradient passes when
 *     |numeric - analytic| <= 2 * 1.5 eps_L / h + 1e-4 |analytic|
 * (the second term covers the float32 rounding of the analytic gradient).
 * test_checker_catches_a_wrong_backward shows the check fails when it should. */
#include <math.h>
#include <stdlib.h>

#include "gpt.h"
#include "internal.h"
#include "tests.h"

static nn_GPTLayerNorm *book_ln;

#define H (1.0 / 64.0)

typedef Tensor *(*Fn)(Tensor **x);

static double loss(Fn f, Tensor **x, const float *w, double *abs_sum) {
    ac_mark m = ac_arena_mark();
    bool prev = torch_set_grad_enabled(false);
    Tensor *out = torch_contiguous(f(x));
    torch_set_grad_enabled(prev);
    const float *o = ac_data_float(out);
    double s = 0, a = 0;
    for (int64_t i = 0, n = torch_numel(out); i < n; i++) {
        s += (double)w[i] * o[i];
        a += fabs((double)w[i] * o[i]);
    }
    ac_arena_release(m);
    if (abs_sum) *abs_sum = a;
    return s;
}

/* Returns the worst (error / tolerance) ratio over all inputs; <= 1 passes. */
static double gradcheck_ratio(const char *name, Fn f, int n, Tensor **x, bool report) {
    for (int i = 0; i < n; i++) x[i]->grad = NULL;
    Tensor *out = f(x);
    ck_assert_msg(out->requires_grad, "%s: the output does not require grad", name);
    torch_manual_seed(99);
    Tensor *w = torch_sub_scalar(torch_mul_scalar(torch_rand(out->ndim, out->shape), 2.0), 1.0);
    torch_backward(out, w);
    const float *wd = ac_data_float(w);
    double abs_sum;
    loss(f, x, wd, &abs_sum);
    double noise = 2.0 * 1.5 * ldexp(abs_sum, -20) / H, worst = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_msg(x[i]->grad != NULL, "%s: input %d got no gradient", name, i);
        float *xd = ac_data_float(x[i]);
        const float *g = ac_data_float(x[i]->grad);
        for (int64_t j = 0, len = torch_numel(x[i]); j < len; j++) {
            float x0 = xd[j];
            double l[4];
            const double steps[4] = {H, -H, 2 * H, -2 * H};
            for (int k = 0; k < 4; k++) {
                xd[j] = (float)(x0 + steps[k]);
                l[k] = loss(f, x, wd, NULL);
            }
            xd[j] = x0;
            double num = (8.0 * (l[0] - l[1]) - (l[2] - l[3])) / (12.0 * H);
            double tol = noise + 1e-4 * fabs(g[j]);
            double r = fabs(num - g[j]) / tol;
            if (r > worst) worst = r;
            if (report && r > 1.0)
                fprintf(stderr, "%s: input %d element %lld: numeric %.8g, analytic %.8g (tolerance %.3g)\n", name, i,
                        (long long)j, num, (double)g[j], tol);
        }
    }
    return worst;
}

static void gradcheck(const char *name, Fn f, int n, Tensor **x) {
    double r = gradcheck_ratio(name, f, n, x, true);
    ck_assert_msg(r <= 1.0, "%s: gradient check failed (worst error %.2f x the tolerance)", name, r);
}

/* An input: values in [lo, hi), multiples of 2^-10, requiring grad. */
static Tensor *input(uint64_t seed, double lo, double hi, int nd, const int64_t *shape) {
    torch_manual_seed(seed);
    Tensor *t = torch_rand(nd, shape);
    float *p = ac_data_float(t);
    for (int64_t i = 0, n = torch_numel(t); i < n; i++) p[i] = (float)(round((lo + (hi - lo) * p[i]) * 1024.0) / 1024.0);
    return torch_requires_grad_(t, true);
}
#define IN(seed, ...) input(seed, -1.0, 1.0, SHAPE(__VA_ARGS__))
#define POS(seed, ...) input(seed, 0.5, 2.0, SHAPE(__VA_ARGS__))
/* away from 0 on both sides: relu's kink and division */
static Tensor *away(uint64_t seed, int nd, const int64_t *shape) {
    Tensor *t = input(seed, 0.25, 1.0, nd, shape);
    float *p = ac_data_float(t);
    for (int64_t i = 0; i < torch_numel(t); i++) p[i] = (i % 3 == 1) ? -p[i] : p[i];
    return t;
}
#define AWAY(seed, ...) away(seed, SHAPE(__VA_ARGS__))

#define CHECK(name, ...)                                             \
    do {                                                             \
        Tensor *xs_[] = {__VA_ARGS__};                               \
        gradcheck(#name, name##_fn, sizeof xs_ / sizeof *xs_, xs_);  \
    } while (0)
#define FN(name, expr) static Tensor *name##_fn(Tensor **x) { return (expr); }

/* ---- matmul in every form -------------------------------------------------------------------- */
FN(dot, torch_dot(x[0], x[1]))
FN(vv, torch_matmul(x[0], x[1]))
FN(vm, torch_matmul(x[0], x[1]))
FN(mv, torch_matmul(x[0], x[1]))
FN(mm, torch_matmul(x[0], x[1]))
FN(mm_t, torch_matmul(x[0], torch_T(x[1])))
FN(bm, torch_matmul(x[0], x[1]))
FN(bmm, torch_matmul(x[0], x[1]))
FN(b4, torch_matmul(x[0], torch_transpose(x[1], 2, 3)))
FN(bcast, torch_matmul(x[0], x[1]))
FN(v3, torch_matmul(x[0], x[1]))
FN(m3v, torch_matmul(x[0], x[1]))

START_TEST(test_grad_matmul) {
    CHECK(dot, IN(1, 5), IN(2, 5));
    CHECK(vv, IN(1, 4), IN(2, 4));
    CHECK(vm, IN(1, 3), IN(2, 3, 4));
    CHECK(mv, IN(1, 4, 3), IN(2, 3));
    CHECK(mm, IN(1, 6, 3), IN(2, 3, 4));
    CHECK(mm_t, IN(1, 6, 3), IN(2, 6, 3));
    CHECK(bm, IN(1, 2, 5, 3), IN(2, 3, 4));       /* 3-D @ 2-D: folded */
    CHECK(bmm, IN(1, 2, 5, 3), IN(2, 2, 3, 4));   /* batched */
    CHECK(b4, IN(1, 2, 2, 4, 3), IN(2, 2, 2, 4, 3)); /* (b, h, t, dh) @ (b, h, dh, t) */
    CHECK(bcast, IN(1, 2, 1, 3, 4), IN(2, 3, 4, 2)); /* broadcast batch dims */
    CHECK(v3, IN(1, 3), IN(2, 2, 3, 4));
    CHECK(m3v, IN(1, 2, 4, 3), IN(2, 3));
}
END_TEST

/* ---- elementwise ------------------------------------------------------------------------------ */
FN(add, torch_add(x[0], x[1]))
FN(sub, torch_sub(x[0], x[1]))
FN(mul, torch_mul(x[0], x[1]))
FN(div, torch_div(x[0], x[1]))
FN(adds, torch_add_scalar(x[0], 0.75))
FN(subs, torch_sub_scalar(x[0], 0.75))
FN(muls, torch_mul_scalar(x[0], -1.5))
FN(divs, torch_div_scalar(x[0], 1.41421356))
FN(neg, torch_neg(x[0]))
FN(exp_, torch_exp(x[0]))
FN(log_, torch_log(x[0]))
FN(sqrt_, torch_sqrt(x[0]))
FN(rsqrt_, torch_rsqrt(x[0]))
FN(pow2, torch_pow(x[0], 2.0))
FN(pow3, torch_pow(x[0], 3.0))
FN(powh, torch_pow(x[0], 0.5))
FN(powm1, torch_pow(x[0], -1.0))
FN(pow15, torch_pow(x[0], 1.5))
FN(relu, torch_relu(x[0]))
FN(tanh_, torch_tanh(x[0]))
FN(gelu, torch_gelu(x[0]))
FN(twice, torch_mul(x[0], x[0])) /* one tensor used twice */
FN(sin_, torch_sin(x[0]))
FN(cos_, torch_cos(x[0]))
FN(mse, torch_mse_loss(x[0], x[1]))
FN(mse_bcast, torch_mse_loss(x[0], x[1])) /* target broadcast over rows */
/* in place on a non-leaf: z = 2 a; z.add_(b); z.mul_(b); z.sub_(0.5); z.div_(c); z.mul_(3) */
static Tensor *inplace_chain_fn(Tensor **x) {
    Tensor *z = torch_mul_scalar(x[0], 2.0);
    torch_add_(z, x[1]);
    torch_mul_(z, x[1]);
    torch_sub_scalar_(z, 0.5);
    torch_div_(z, x[2]);
    return torch_mul_scalar_(z, 3.0);
}

START_TEST(test_grad_elementwise) {
    CHECK(add, IN(1, 2, 3), IN(2, 3));
    CHECK(add, IN(1, 2, 1, 3), IN(2, 4, 1));
    CHECK(sub, IN(1, 4, 1), IN(2, 2, 4, 3));
    CHECK(mul, IN(1, 2, 3), IN(2, 2, 1));
    CHECK(div, IN(1, 3, 4), AWAY(2, 4));
    CHECK(div, IN(1, 2, 3), AWAY(2, 2, 1));
    CHECK(adds, IN(1, 5));
    CHECK(subs, IN(1, 5));
    CHECK(muls, IN(1, 2, 3));
    CHECK(divs, IN(1, 2, 3));
    CHECK(neg, IN(1, 4));
    CHECK(exp_, IN(1, 2, 3));
    CHECK(log_, POS(1, 6));
    CHECK(sqrt_, POS(1, 6));
    CHECK(rsqrt_, POS(1, 6));
    CHECK(pow2, IN(1, 6));
    CHECK(pow3, IN(1, 6));
    CHECK(powh, POS(1, 6));
    CHECK(powm1, POS(1, 6));
    CHECK(pow15, POS(1, 6));
    CHECK(relu, AWAY(1, 9));
    CHECK(tanh_, IN(1, 6));
    CHECK(gelu, IN(1, 8));
    CHECK(twice, IN(1, 5));
    CHECK(sin_, IN(1, 7));
    CHECK(cos_, IN(1, 7));
    CHECK(mse, IN(1, 3, 4), IN(2, 3, 4));
    CHECK(mse_bcast, IN(1, 3, 4), IN(2, 4));
    CHECK(inplace_chain, IN(1, 2, 3), IN(2, 3), AWAY(3, 3));
}
END_TEST

/* ---- reductions, softmax, masks ------------------------------------------------------------------ */
FN(sum_all, torch_sum(x[0]))
FN(sum_last, torch_sum_dim(x[0], SHAPE(-1), false))
FN(sum_first_keep, torch_sum_dim(x[0], SHAPE(0), true))
FN(sum_mid, torch_sum_dim(x[0], SHAPE(1), false))
FN(sum_two, torch_sum_dim(x[0], SHAPE(0, 2), true))
FN(mean_all, torch_mean(x[0]))
FN(mean_dim, torch_mean_dim(x[0], SHAPE(-1), true))
FN(mean_two, torch_mean_dim(x[0], SHAPE(1, 2), false))
FN(softmax0, torch_softmax(x[0], 0))
FN(softmax1, torch_softmax(x[0], 1))
FN(softmax_last, torch_softmax(x[0], -1))
FN(softmax_wide, torch_softmax(x[0], -1)) /* rows longer than 8: the 8-lane sum */
FN(logsoftmax0, torch_log_softmax(x[0], 0))
FN(logsoftmax_last, torch_log_softmax(x[0], -1))
static Tensor *causal_mask(int64_t t) { return torch_to_bool(torch_triu(torch_ones(SHAPE(t, t)), 1)); }
FN(masked_fill, torch_masked_fill(x[0], causal_mask(4), 3.0))
FN(masked_softmax, torch_softmax(torch_div_scalar(torch_masked_fill(x[0], causal_mask(4), -INFINITY), 1.41421356), -1))
FN(masked_bcast, torch_masked_fill(x[0], causal_mask(3), -2.0)) /* (2, 3, 3) with a (3, 3) mask */
FN(tril0, torch_tril(x[0], 0))
FN(tril_m1, torch_tril(x[0], -1))
FN(triu1, torch_triu(x[0], 1))
FN(triu0, torch_triu(x[0], 0))

START_TEST(test_grad_reduce_softmax_mask) {
    CHECK(sum_all, IN(1, 2, 3));
    CHECK(sum_last, IN(1, 2, 3, 4));
    CHECK(sum_first_keep, IN(1, 2, 3, 4));
    CHECK(sum_mid, IN(1, 2, 3, 4));
    CHECK(sum_two, IN(1, 2, 3, 4));
    CHECK(mean_all, IN(1, 3, 4));
    CHECK(mean_dim, IN(1, 3, 4));
    CHECK(mean_two, IN(1, 2, 3, 4));
    CHECK(softmax0, IN(1, 4, 3));
    CHECK(softmax1, IN(1, 2, 4, 3));
    CHECK(softmax_last, IN(1, 3, 5));
    CHECK(softmax_wide, IN(1, 2, 19));
    CHECK(logsoftmax0, IN(1, 4, 3));
    CHECK(logsoftmax_last, IN(1, 3, 11));
    CHECK(masked_fill, IN(1, 4, 4));
    CHECK(masked_softmax, IN(1, 4, 4));
    CHECK(masked_bcast, IN(1, 2, 3, 3));
    CHECK(tril0, IN(1, 4, 5));
    CHECK(tril_m1, IN(1, 2, 4, 4));
    CHECK(triu1, IN(1, 5, 4));
    CHECK(triu0, IN(1, 4, 4));
}
END_TEST

/* ---- shape ops -------------------------------------------------------------------------------------- */
FN(cat0, torch_cat(TENSORS(x[0], x[1], x[2]), 0))
FN(cat1, torch_cat(TENSORS(x[0], x[1], x[2]), 1))
FN(catm1, torch_cat(TENSORS(x[0], x[1]), -1))
FN(stack1, torch_stack(TENSORS(x[0], x[1]), 1))
FN(transpose, torch_mul(torch_transpose(x[0], 0, 2), x[1])) /* the view then a use of it */
FN(T_, torch_matmul(torch_T(x[0]), x[1]))
FN(t_, torch_t(x[0]))
FN(view, torch_view(x[0], SHAPE(3, -1)))
FN(reshape_copy, torch_reshape(torch_transpose(x[0], 0, 1), SHAPE(-1)))
FN(contig, torch_contiguous(torch_transpose(x[0], 0, 1)))
FN(unsqueeze, torch_mul(torch_unsqueeze(x[0], 1), x[1]))
FN(select_, torch_select(x[0], 1, -1))
FN(select_row, torch_select(x[0], 0, 2))
FN(slice_, torch_slice(x[0], 1, 1, 3))
FN(slice_neg, torch_slice(x[0], 0, -2, 100))
FN(view_chain, torch_view(torch_contiguous(torch_transpose(torch_view(x[0], SHAPE(2, 3, 2, 2)), 1, 2)), SHAPE(2, 3, 4)))
static Tensor *idx_tensor(void) { return torch_tensor_long((const int64_t[]){2, 0, 2, 3, 2}, SHAPE(5)); }
FN(index_select0, torch_index_select(x[0], 0, idx_tensor()))
static Tensor *idx_neg2d(void) { return torch_tensor_long((const int64_t[]){-1, 0, 3, -1, 1, 3}, SHAPE(3, 2)); }
FN(index, torch_index(x[0], idx_neg2d())) /* x[idx]: repeats and negative indices */
FN(index_select1, torch_index_select(x[0], 1, idx_tensor()))
static Tensor *ids2d(void) { return torch_tensor_long((const int64_t[]){1, 4, 1, 0, 4, 4}, SHAPE(2, 3)); }
FN(embedding, torch_embedding(x[0], ids2d(), -1))
FN(embedding_pad, torch_embedding(x[0], ids2d(), 4))

START_TEST(test_grad_shape_ops) {
    CHECK(cat0, IN(1, 2, 3), IN(2, 1, 3), IN(3, 3, 3));
    CHECK(cat1, IN(1, 2, 2, 2), IN(2, 2, 1, 2), IN(3, 2, 3, 2));
    CHECK(catm1, IN(1, 2, 3), IN(2, 2, 1));
    CHECK(stack1, IN(1, 2, 3), IN(2, 2, 3));
    CHECK(transpose, IN(1, 2, 3, 4), IN(2, 4, 3, 2));
    CHECK(T_, IN(1, 3, 2), IN(2, 3, 4));
    CHECK(t_, IN(1, 3, 2));
    CHECK(view, IN(1, 2, 6));
    CHECK(reshape_copy, IN(1, 3, 4));
    CHECK(contig, IN(1, 3, 4));
    CHECK(unsqueeze, IN(1, 3, 4), IN(2, 3, 2, 4));
    CHECK(select_, IN(1, 3, 4));
    CHECK(select_row, IN(1, 4, 3));
    CHECK(slice_, IN(1, 3, 4));
    CHECK(slice_neg, IN(1, 4, 3));
    CHECK(view_chain, IN(1, 2, 12));
    CHECK(index_select0, IN(1, 4, 3));
    CHECK(index_select1, IN(1, 2, 4));
    CHECK(index, IN(1, 4, 3));
    CHECK(embedding, IN(1, 5, 3));
    /* padding_idx: PyTorch defines that row's gradient as zero (the output still reads it),
     * so the check is: row 4 gets 0, the other rows what the unpadded lookup gives them. */
    Tensor *w1 = IN(1, 5, 3), *w2 = IN(1, 5, 3);
    torch_backward(torch_sum(torch_mul(embedding_fn(&w1), IN(7, 2, 3, 3))), NULL);
    torch_backward(torch_sum(torch_mul(embedding_pad_fn(&w2), IN(7, 2, 3, 3))), NULL);
    const float *g1 = ac_data_float(w1->grad), *g2 = ac_data_float(w2->grad);
    for (int i = 0; i < 15; i++) ck_assert_msg(g2[i] == (i / 3 == 4 ? 0.0f : g1[i]), "padding_idx gradient [%d]", i);
}
END_TEST

/* ---- the nn ops -------------------------------------------------------------------------------------- */
FN(linear2d, torch_linear(x[0], x[1], x[2]))
FN(linear3d, torch_linear(x[0], x[1], x[2]))
FN(linear_nobias, torch_linear(x[0], x[1], NULL))
FN(layer_norm, torch_layer_norm(x[0], SHAPE(5), x[1], x[2], 1e-5))
FN(layer_norm2, torch_layer_norm(x[0], SHAPE(2, 3), NULL, NULL, 1e-5))
static Tensor *dropout_fn(Tensor **x) {
    torch_manual_seed(5); /* the same mask at every evaluation */
    return torch_dropout(x[0], 0.4, true);
}
static Tensor *targets(void) { return torch_tensor_long((const int64_t[]){1, 0, 4, -100, 2}, SHAPE(5)); }
FN(cross_entropy, torch_cross_entropy(x[0], targets(), -100))
FN(nll_loss, torch_nll_loss(torch_log_softmax(x[0], -1), targets(), -100))
FN(nll_loss_raw, torch_nll_loss(x[0], targets(), -100))

START_TEST(test_grad_nn_ops) {
    CHECK(linear2d, IN(1, 4, 3), IN(2, 5, 3), IN(3, 5));
    CHECK(linear3d, IN(1, 2, 3, 3), IN(2, 5, 3), IN(3, 5));
    CHECK(linear_nobias, IN(1, 2, 4, 3), IN(2, 2, 3));
    CHECK(layer_norm, IN(1, 3, 5), POS(2, 5), IN(3, 5));
    CHECK(layer_norm2, IN(1, 2, 2, 3));
    CHECK(dropout, IN(1, 4, 5));
    CHECK(cross_entropy, IN(1, 5, 6));
    CHECK(nll_loss, IN(1, 5, 6));
    CHECK(nll_loss_raw, IN(1, 5, 6));
}
END_TEST

/* A whole attention block, end to end, through all its parameters. */
FN(attention, torch_matmul(torch_softmax(torch_div_scalar(torch_masked_fill(
                  torch_matmul(torch_matmul(x[0], x[1]), torch_T(torch_matmul(x[0], x[2]))), causal_mask(4), -INFINITY),
                  1.41421356), -1), torch_matmul(x[0], x[3])))

/* the fused attention: causal and not, a float mask, lengths across its 64-row tiles, and T = 1 */
FN(sdpa_causal, torch_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, true, NAN))
FN(sdpa_full, torch_scaled_dot_product_attention(x[0], x[1], x[2], NULL, 0.0, false, 0.7))
static Tensor *sdpa_float_mask;
FN(sdpa_mask, torch_scaled_dot_product_attention(x[0], x[1], x[2], sdpa_float_mask, 0.0, false, NAN))

START_TEST(test_grad_attention_block) {
    CHECK(attention, IN(1, 4, 3), IN(2, 3, 2), IN(3, 3, 2), IN(4, 3, 4));
    CHECK(sdpa_causal, IN(5, 2, 5, 3), IN(6, 2, 5, 3), IN(7, 2, 5, 4));
    CHECK(sdpa_causal, IN(5, 1, 1, 2), IN(6, 1, 1, 2), IN(7, 1, 1, 3));
    CHECK(sdpa_full, IN(8, 3, 4), IN(9, 6, 4), IN(10, 6, 2));
    CHECK(sdpa_causal, IN(11, 67, 2), IN(12, 67, 2), IN(13, 67, 2));
    sdpa_float_mask = torch_detach(IN(14, 3, 5));
    CHECK(sdpa_mask, IN(15, 2, 3, 2), IN(16, 2, 5, 2), IN(17, 2, 5, 3));
}
END_TEST

/* ---- the checker itself must be able to fail ------------------------------------------------- */
static void wrong_backward(Node *n, Tensor *g) {
    /* d(x*x)/dx is 2x; this passes x (the kind of bug a checker must catch) */
    ac_accum(n->inputs[0], torch_mul(g, n->inputs[0]));
}
static Tensor *wrong_square_fn(Tensor **x) {
    bool prev = torch_set_grad_enabled(false);
    Tensor *out = torch_mul(x[0], x[0]);
    torch_set_grad_enabled(prev);
    AC_NODE("WrongBackward", wrong_backward, out, x[0]);
    return out;
}
static void pass_through_backward(Node *n, Tensor *g) { ac_accum(n->inputs[0], g); }
static Tensor *masked_fill_leaky_fn(Tensor **x) {
    /* masked_fill whose backward passes the gradient through masked slots (llama.cpp #4203) */
    bool prev = torch_set_grad_enabled(false);
    Tensor *out = torch_masked_fill(x[0], causal_mask(4), 3.0);
    torch_set_grad_enabled(prev);
    AC_NODE("LeakyMaskedFill", pass_through_backward, out, x[0]);
    return out;
}

/* ---- the calls of issue 10 ------------------------------------------------------------------------ */
/* Distinct values 1/8 apart (a shuffled ladder): a step of 2h = 1/32 never
 * reorders them, so max, min and topk pick the same element at every probe. */
static Tensor *ladder(uint64_t seed, int nd, const int64_t *shape) {
    torch_manual_seed(seed);
    Tensor *t = torch_empty(nd, shape, AC_FLOAT32);
    int64_t n = torch_numel(t);
    const int64_t *perm = ac_data_long(torch_randperm(n));
    float *p = ac_data_float(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(perm[i] * 0.125 - n * 0.0625);
    return torch_requires_grad_(t, true);
}
#define LADDER(seed, ...) ladder(seed, SHAPE(__VA_ARGS__))
/* values at least 1/8 from clamp's bounds (-0.4, 0.7) */
#define CLAMP_IN() torch_requires_grad_(torch_tensor((const float[]){-0.875f, -0.625f, -0.25f, 0.125f, 0.5f, 0.875f}, SHAPE(2, 3)), true)

FN(sigmoid, torch_sigmoid(x[0]))
FN(silu, torch_silu(x[0]))
FN(softplus, torch_softplus(x[0], 1, 20))
FN(softplus_thr, torch_softplus(torch_mul_scalar(x[0], 4), 2, 1)) /* both sides of the threshold */
FN(logsigmoid, torch_logsigmoid(torch_mul_scalar(x[0], 8))) /* both signs, and the flat tail */
FN(abs_, torch_abs(x[0]))
FN(clamp, torch_clamp(x[0], -0.4, 0.7))
FN(clamp_lo, torch_clamp(x[0], -0.4, NAN))
FN(where_, torch_where(torch_tensor_bool((const bool[]){true, false, true}, SHAPE(3, 1)), x[0], torch_exp(x[1])))
FN(max_dim, torch_max_dim(x[0], 1, false).values)
FN(min_dim, torch_min_dim(x[0], 0, true).values)
FN(max_all, torch_max(x[0]))
FN(amax, torch_amax(x[0], SHAPE(0, 2), true))
FN(amin, torch_amin(x[0], SHAPE(-1), false))
FN(topk, torch_topk(x[0], 2, 1, true, true).values)
FN(topk_small, torch_topk(x[0], 2, 0, false, true).values)
FN(repeat, torch_repeat(x[0], SHAPE(2, 1, 3)))
FN(expand, torch_expand(x[0], SHAPE(2, 3, 4)))
FN(permute, torch_permute(x[0], SHAPE(1, 2, 0)))
FN(flatten, torch_flatten(torch_transpose(x[0], 0, 1), 1, 2))
FN(gather, torch_gather(x[0], 0, torch_tensor_long((const int64_t[]){2, 0, 1, 1, 0, 0}, SHAPE(2, 3))))
FN(scatter_add, torch_scatter_add(x[0], 1, torch_tensor_long((const int64_t[]){1, 1, 0, 2}, SHAPE(2, 2)), x[1]))
static Tensor *chunk_fn(Tensor **x) {
    int n;
    Tensor **c = torch_chunk(x[0], 3, 1, &n);
    return torch_cat(TENSORS(torch_exp(c[0]), torch_mul(c[1], c[1]), torch_tanh(c[2])), 1);
}
static Tensor *split_fn(Tensor **x) {
    int n;
    Tensor **c = torch_split_with_sizes(x[0], SHAPE(1, 2), 0, &n);
    return torch_cat(TENSORS(torch_exp(c[0]), torch_sigmoid(c[1])), 0);
}
/* in-place writes through autograd */
static Tensor *setitem_fn(Tensor **x) {
    Tensor *y = torch_mul_scalar(x[0], 2);
    torch_copy_(torch_select(y, 0, 1), torch_exp(x[1])); /* y[1] = exp(v) */
    return torch_mul(y, y);
}
static Tensor *masked_fill_inplace_fn(Tensor **x) {
    Tensor *y = torch_mul_scalar(x[0], 1.5); /* not exp: it saves its result, which the write would change */
    torch_masked_fill_(torch_slice(y, 1, 1, 3), torch_tensor_bool((const bool[]){true, false}, SHAPE(2)), 0.5);
    return torch_tanh(y);
}
static Tensor *index_put_fn(Tensor **x) {
    Tensor *y = torch_mul(x[0], x[0]);
    /* distinct indices: with a repeated one PyTorch (and we) still give every value the row's gradient */
    torch_index_put_(y, torch_tensor_long((const int64_t[]){2, 0}, SHAPE(2)), torch_sigmoid(torch_slice(x[1], 0, 1, 3)), false);
    torch_index_put_(y, torch_tensor_long((const int64_t[]){1}, SHAPE(1)), torch_slice(x[1], 0, 0, 1), true);
    return torch_exp(y);
}
static Tensor *view_write_fn(Tensor **x) {
    Tensor *y = torch_mul_scalar(x[0], 1);
    Tensor *v = torch_slice(y, 0, 0, 2);
    torch_copy_(v, torch_mul_scalar(x[1], 3));
    return torch_cat(TENSORS(torch_reshape(torch_exp(v), SHAPE(-1)), torch_reshape(torch_tanh(y), SHAPE(-1))), 0);
}

START_TEST(test_grad_pytorch_calls) {
    CHECK(sigmoid, IN(1, 2, 3));
    CHECK(silu, IN(1, 2, 3));
    CHECK(softplus, IN(1, 2, 3));
    CHECK(softplus_thr, AWAY(1, 2, 4));
    CHECK(logsigmoid, AWAY(1, 2, 4));
    CHECK(abs_, AWAY(1, 6));
    CHECK(clamp, CLAMP_IN());
    CHECK(clamp_lo, CLAMP_IN());
    CHECK(where_, IN(1, 3, 4), IN(2, 4));
    CHECK(max_dim, LADDER(1, 3, 4));
    CHECK(min_dim, LADDER(2, 3, 4));
    CHECK(max_all, LADDER(3, 2, 3));
    CHECK(amax, LADDER(4, 2, 3, 2));
    CHECK(amin, LADDER(5, 2, 3, 2));
    CHECK(topk, LADDER(6, 3, 4));
    CHECK(topk_small, LADDER(7, 3, 4));
    CHECK(repeat, IN(1, 2, 2));
    CHECK(expand, IN(1, 3, 1));
    CHECK(permute, IN(1, 2, 3, 4));
    CHECK(flatten, IN(1, 2, 3, 4));
    CHECK(gather, IN(1, 3, 3));
    CHECK(scatter_add, IN(1, 2, 3), IN(2, 2, 3));
    CHECK(chunk, IN(1, 2, 5));
    CHECK(split, IN(1, 3, 2));
    CHECK(setitem, IN(1, 3, 4), IN(2, 4));
    CHECK(masked_fill_inplace, IN(1, 3, 4));
    CHECK(index_put, IN(1, 3, 4), IN(2, 3, 4));
    CHECK(view_write, IN(1, 3, 4), IN(2, 2, 4));
}
END_TEST

/* ---- the book's GPT: var and std, its LayerNorm and tanh GELU op by op, where with a 0-d side ---- */
FN(var_last_biased, torch_var_dim(x[0], 1, (int64_t[]){-1}, false, true))
FN(var_first_unbiased, torch_var_dim(x[0], 1, (int64_t[]){0}, true, false))
FN(var_two_dims, torch_var_dim(x[0], 2, (int64_t[]){0, 2}, true, true))
FN(var_all, torch_var(x[0], true))
FN(std_last, torch_std_dim(x[0], 1, (int64_t[]){-1}, false, false))
FN(std_all, torch_std(x[0], true))
FN(book_layernorm, (nn_GPTLayerNorm_forward(book_ln, x[0])))
FN(book_gelu, nn_GPTGELU_forward(NULL, x[0]))
FN(where_0d, torch_where(torch_gt_scalar(x[0], 0.1), torch_scalar_tensor(-2.5), torch_mul(x[0], x[1])))

START_TEST(test_grad_book_ops) {
    CHECK(var_last_biased, IN(1, 3, 5));
    CHECK(var_first_unbiased, IN(2, 4, 3));
    CHECK(var_two_dims, IN(3, 3, 2, 4));
    CHECK(var_all, IN(4, 7));
    CHECK(std_last, IN(5, 2, 6));
    CHECK(std_all, IN(6, 3, 3));
    book_ln = nn_GPTLayerNorm_new(6);
    ((float *)book_ln->scale->data)[1] = 1.5f; /* scale and shift not 1 and 0: their gradients count */
    ((float *)book_ln->shift->data)[2] = -0.25f;
    Tensor *y = IN(7, 2, 3, 6);
    /* the fused ops (tensor/ops/fused.c) by default: x's gradient, and scale's and shift's too */
    ck_assert_str_eq(torch_grad_fn_name(nn_GPTLayerNorm_forward(book_ln, y)), "BookLayerNormBackward0");
    CHECK(book_layernorm, y, book_ln->scale, book_ln->shift);
    CHECK(book_layernorm, IN(11, 6), book_ln->scale, book_ln->shift);
    CHECK(book_gelu, input(8, -3.0, 3.0, SHAPE(4, 5)));
    CHECK(book_gelu, input(12, -6.0, 6.0, SHAPE(3, 9))); /* into tanh's flat tails */
    ck_assert_str_eq(torch_grad_fn_name(nn_GPTGELU_forward(NULL, y)), "BookGeluBackward0");
    nn_gpt_fused = false; /* and the book's lines op by op */
    CHECK(book_layernorm, y, book_ln->scale, book_ln->shift);
    CHECK(book_gelu, input(8, -3.0, 3.0, SHAPE(4, 5)));
    nn_gpt_fused = true;
    CHECK(where_0d, IN(9, 3, 4), IN(10, 3, 4));
    nn_free(&book_ln->module);
}
END_TEST

/* nn.ReLU, nn.Tanh, nn.Sigmoid, nn.SiLU, nn.Softmax(dim), nn.Flatten as modules, through nn_forward
 * (the weighted loss above: softmax's plain sum would have a zero gradient, so it is never that) */
static nn_Module *act_module;
FN(module, nn_forward(act_module, x[0]))
FN(module_then_mm, torch_matmul(nn_forward(act_module, x[0]), x[1])) /* flatten's gradient through a product */

static void check_module(nn_Module *m, Tensor *x) {
    act_module = m;
    gradcheck(m->type, module_fn, 1, (Tensor *[]){x});
    nn_free(m);
}

START_TEST(test_grad_activation_modules) {
    check_module(&nn_ReLU_new()->module, AWAY(1, 3, 4));
    check_module(&nn_Tanh_new()->module, IN(2, 3, 4));
    check_module(&nn_Sigmoid_new()->module, input(3, -3.0, 3.0, SHAPE(3, 4)));
    check_module(&nn_SiLU_new()->module, input(4, -3.0, 3.0, SHAPE(3, 4)));
    check_module(&nn_Softmax_new(1)->module, IN(5, 2, 3, 4));
    check_module(&nn_Softmax_new(-1)->module, IN(6, 3, 5));
    check_module(&nn_Flatten_new(1, -1)->module, IN(7, 2, 3, 4));
    act_module = &nn_Flatten_new(0, 1)->module;
    gradcheck("Flatten(0, 1) @ w", module_then_mm_fn, 2, (Tensor *[]){IN(8, 2, 3, 4), IN(9, 4, 2)});
    nn_free(act_module);
}
END_TEST

START_TEST(test_checker_catches_a_wrong_backward) {
    Tensor *a[] = {IN(1, 6)};
    ck_assert_msg(gradcheck_ratio("wrong_square", wrong_square_fn, 1, a, false) > 10.0, "the checker missed a wrong backward");
    Tensor *b[] = {IN(1, 4, 4)};
    ck_assert_msg(gradcheck_ratio("leaky_mask", masked_fill_leaky_fn, 1, b, false) > 10.0,
                  "the checker missed a masked_fill backward that leaks through the mask");
    /* and a softmax checked with a plain sum would have passed anything: our loss is weighted */
    Tensor *c[] = {IN(1, 3, 4)};
    ck_assert(gradcheck_ratio("softmax", softmax_last_fn, 1, c, false) <= 1.0);
}
END_TEST

Suite *suite_grad(void) {
    Suite *s = suite_create("grad");
    TCase *tc = tcase("finite-differences");
    tcase_add_test(tc, test_grad_matmul);
    tcase_add_test(tc, test_grad_elementwise);
    tcase_add_test(tc, test_grad_reduce_softmax_mask);
    tcase_add_test(tc, test_grad_shape_ops);
    tcase_add_test(tc, test_grad_nn_ops);
    tcase_add_test(tc, test_grad_attention_block);
    tcase_add_test(tc, test_grad_pytorch_calls);
    tcase_add_test(tc, test_grad_book_ops);
    tcase_add_test(tc, test_grad_activation_modules);
    tcase_add_test(tc, test_checker_catches_a_wrong_backward);
    suite_add_tcase(s, tc);
    return s;
}
