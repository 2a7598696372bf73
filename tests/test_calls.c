/* The calls a PyTorch user expects (issue 10), each against PyTorch's values
 * (tests/data/ops_golden.txt, from tests/tools/gen_golden.py): the ops of the
 * book's next chapters, in-place writes through autograd with version checks,
 * retain_grad, creation with a dtype, the generator's state, no_grad scopes.
 *
 * Each golden case: out, then the gradients for loss = (out * w).sum() with
 * w = rand(out.shape) after manual_seed(7). Tolerances as stated for the
 * project: forward within 1e-5 relative (plus 1e-6 absolute for values near
 * 0), gradients within 1e-4 relative (plus 1e-6 absolute). */
#include <math.h>

#include "tests.h"

#define GOLD "ops_golden.txt"

/* torch.manual_seed(seed); torch.rand(shape) * 4 + (-2), requiring grad */
static Tensor *inp(uint64_t seed, int nd, const int64_t *shape) {
    torch_manual_seed(seed);
    return torch_requires_grad_(torch_add_scalar(torch_mul_scalar(torch_rand(nd, shape), 4.0), -2.0), true);
}
#define IN(seed, ...) inp(seed, SHAPE(__VA_ARGS__))

static void check_case(const char *name, Tensor *out, int n, Tensor **xs) {
    char key[96];
    snprintf(key, sizeof key, "%s.out", name);
    assert_tensor_golden(out, GOLD, key, 1e-6, 1e-5);
    torch_manual_seed(7);
    Tensor *w = torch_rand(out->ndim, out->shape);
    torch_backward(out, w);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s.grad%d", name, i);
        Tensor *g = xs[i]->grad ? xs[i]->grad : torch_zeros_like(xs[i]);
        assert_tensor_golden(g, GOLD, key, 1e-6, 1e-4);
    }
}
#define CASE(name, out_expr, ...)                                         \
    do {                                                                  \
        Tensor *xs_[] = {__VA_ARGS__};                                    \
        Tensor **x = xs_;                                                 \
        (void)x;                                                          \
        check_case(name, (out_expr), (int)(sizeof xs_ / sizeof *xs_), xs_); \
    } while (0)

static void assert_long_golden(Tensor *t, const char *name) {
    Golden g = golden(GOLD, name);
    ck_assert_int_eq(g.n, torch_numel(t));
    const int64_t *p = ac_data_long(torch_contiguous(t));
    for (int i = 0; i < g.n; i++) ck_assert_msg(p[i] == (int64_t)g.v[i], "%s[%d]: %lld, want %g", name, i, (long long)p[i], g.v[i]);
}

START_TEST(test_activations) {
    CASE("sigmoid", torch_sigmoid(x[0]), IN(1, 3, 4));
    ck_assert_str_eq(torch_grad_fn_name(torch_sigmoid(IN(1, 2))), "SigmoidBackward0");
    CASE("silu", torch_silu(x[0]), IN(1, 3, 4));
    CASE("softplus", torch_softplus(x[0], 1, 20), IN(1, 3, 4));
    CASE("softplus_b2t1", torch_softplus(x[0], 2, 1), IN(1, 3, 4));
    CASE("abs", torch_abs(x[0]), IN(2, 3, 4));
    CASE("clamp", torch_clamp(x[0], -0.5, 0.7), IN(3, 3, 4));
    CASE("clamp_min", torch_clamp(x[0], 0.1, NAN), IN(3, 3, 4));
    CASE("clamp_max", torch_clamp(x[0], NAN, -0.3), IN(3, 3, 4));
    ck_assert_str_eq(torch_grad_fn_name(torch_clamp(IN(1, 2), 0, NAN)), "ClampBackward1");
    Tensor *cond = torch_tensor_bool((const bool[]){true, false, true}, SHAPE(3, 1));
    CASE("where", torch_where(cond, x[0], torch_mul_scalar(x[1], 2)), IN(4, 3, 4), IN(5, 4));
    /* the edges PyTorch defines: abs'(0) = 0, clamp' = 1 on both bounds, NaN propagates */
    Tensor *e = torch_requires_grad_(torch_tensor((const float[]){0.0f, 0.2f, 0.5f, 0.7f}, SHAPE(4)), true);
    torch_backward(torch_sum(torch_add(torch_abs(e), torch_clamp(e, 0.2, 0.5))), NULL);
    const float *g = ac_data_float(e->grad);
    ck_assert(g[0] == 0.0f && g[1] == 2.0f && g[2] == 2.0f && g[3] == 1.0f);
    ck_assert(isnan(torch_item(torch_clamp(torch_scalar_tensor(NAN), 0, 1))));
}
END_TEST

START_TEST(test_extremes) {
    CASE("max_dim", torch_max_dim(x[0], 1, false).values, IN(6, 3, 4));
    CASE("min_dim_keep", torch_min_dim(x[0], 0, true).values, IN(6, 3, 4));
    CASE("max_all", torch_max(x[0]), IN(6, 3, 4));
    CASE("min_all", torch_min(x[0]), IN(6, 3, 4));
    CASE("amax", torch_amax(x[0], SHAPE(0, 2), false), IN(7, 2, 3, 4));
    CASE("amin_keep", torch_amin(x[0], SHAPE(-1), true), IN(7, 2, 3, 4));
    const float tv[] = {1, 3, 3, 2, 2, 0};
#define TIES torch_requires_grad_(torch_tensor(tv, SHAPE(2, 3)), true)
    CASE("ties_max_all", torch_max(x[0]), TIES);   /* ties share the gradient */
    CASE("ties_amax", torch_amax(x[0], SHAPE(1), false), TIES);
    CASE("ties_max_dim", torch_max_dim(x[0], 1, false).values, TIES); /* the first index takes it */
    Tensor *x6 = IN(6, 3, 4);
    assert_long_golden(torch_max_dim(x6, 1, false).indices, "max_dim.indices");
    assert_long_golden(torch_topk(x6, 2, 1, true, true).indices, "topk.indices");
    assert_long_golden(torch_topk(x6, 3, 0, false, true).indices, "topk_small.indices");
    CASE("topk", torch_topk(x[0], 2, 1, true, true).values, IN(6, 3, 4));
    CASE("topk_small", torch_topk(x[0], 3, 0, false, true).values, IN(6, 3, 4));
    torch_return_types r = torch_max_dim(IN(6, 3, 4), 1, false);
    ck_assert_str_eq(torch_grad_fn_name(r.values), "MaxBackward0");
    ck_assert(r.indices->dtype == AC_INT64 && !r.indices->requires_grad);
    ck_assert(isnan(torch_item(torch_max(torch_tensor((const float[]){1, NAN, 3}, SHAPE(3))))));
    /* a 0-d input: its element and index 0, for k = 0 as for k = 1 (PyTorch 1.13) */
    torch_return_types z = torch_topk(torch_requires_grad_(torch_scalar_tensor(1.5), true), 0, 0, true, true);
    ck_assert(z.values->ndim == 0 && torch_item(z.values) == 1.5 && torch_item(z.indices) == 0);
    torch_backward(z.values, NULL);
    ck_assert_int_eq(torch_item(torch_max_dim(torch_tensor((const float[]){1, NAN, 3}, SHAPE(3)), 0, false).indices), 1);
}
END_TEST

START_TEST(test_shape_calls) {
    CASE("repeat", torch_repeat(x[0], SHAPE(2, 1, 2)), IN(8, 2, 3));
    CASE("expand", torch_expand(x[0], SHAPE(2, 3, 4)), IN(9, 3, 1));
    CASE("permute", torch_mul_scalar(torch_permute(x[0], SHAPE(2, 0, 1)), 1), IN(10, 2, 3, 4));
    CASE("flatten", torch_mul_scalar(torch_flatten(x[0], 1, 2), 1), IN(10, 2, 3, 4));
    CASE("flatten_t", torch_mul_scalar(torch_flatten(torch_transpose(x[0], 0, 2), 0, -1), 1), IN(10, 2, 3, 4));
    int n;
    Tensor *a = IN(11, 4, 3);
    Tensor **c = torch_chunk(a, 2, 0, &n);
    ck_assert_int_eq(n, 2);
    ck_assert(c[0]->data == a->data); /* views */
    ck_assert_str_eq(torch_grad_fn_name(c[1]), "SplitBackward0");
    check_case("chunk", torch_cat(TENSORS(torch_exp(c[0]), torch_exp(c[1])), 1), 1, &a);
    Tensor *b = IN(11, 2, 5);
    Tensor **s = torch_split(b, 3, 1, &n);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(s[1]->shape[1], 2);
    check_case("split", torch_cat(TENSORS(s[0], torch_mul_scalar(s[1], 2)), 1), 1, &b);
    Tensor *d = IN(11, 2, 4);
    Tensor **w = torch_split_with_sizes(d, SHAPE(1, 3), 1, &n);
    ck_assert_str_eq(torch_grad_fn_name(w[0]), "SplitWithSizesBackward0");
    check_case("split_sizes", torch_cat(TENSORS(torch_exp(w[0]), torch_exp(w[1])), 1), 1, &d);
    ck_assert_int_eq(torch_chunk(torch_zeros(SHAPE(5)), 3, 0, &n)[2]->shape[0], 1); /* 2, 2, 1 */
    ck_assert_int_eq(n, 3);
    torch_chunk(torch_zeros(SHAPE(2)), 5, 0, &n); /* fewer pieces when they run out, as PyTorch */
    ck_assert_int_eq(n, 2);
    Tensor *gi = torch_tensor_long((const int64_t[]){3, 0, 1, 1, 0, 2}, SHAPE(3, 2));
    CASE("gather", torch_gather(x[0], 1, gi), IN(12, 3, 4));
    Tensor *si = torch_tensor_long((const int64_t[]){0, 2, 2, 1, 2, 2, 0, 1}, SHAPE(2, 4));
    CASE("scatter_add", torch_scatter_add(x[0], 0, si, x[1]), IN(13, 3, 4), IN(14, 2, 4));
    ck_assert_str_eq(torch_grad_fn_name(torch_expand(IN(1, 1), SHAPE(3))), "ExpandBackward0");
    ck_assert(torch_expand(IN(1, 3, 1), SHAPE(-1, 4))->stride[1] == 0); /* a view: nothing copied */
}
END_TEST

/* ---- in-place writes ---------------------------------------------------------------------------- */

static Tensor *setitem(Tensor *a) {
    Tensor *x = torch_mul_scalar(a, 2);
    torch_fill_(torch_select(x, 0, 1), 5.0); /* x[1] = 5.0 */
    ck_assert_str_eq(torch_grad_fn_name(x), "CopySlices");
    return torch_mul(x, x);
}

static Tensor *into_zeros(Tensor *v) {
    Tensor *z = torch_zeros(SHAPE(3, 4));
    torch_copy_(torch_select(z, 0, 1), torch_mul_scalar(v, 3)); /* z[1] = v * 3 */
    ck_assert(z->requires_grad);
    return torch_exp(z);
}

static Tensor *mfill(Tensor *a) {
    Tensor *x = torch_mul_scalar(a, 1);
    torch_masked_fill_(x, torch_tensor_bool((const bool[]){true, false, false, true}, SHAPE(1, 4)), 0.5);
    ck_assert_str_eq(torch_grad_fn_name(x), "MaskedFillBackward0");
    return torch_tanh(x);
}

static Tensor *iput(Tensor *a, Tensor *v, bool acc) {
    Tensor *x = torch_mul_scalar(a, 1);
    torch_index_put_(x, torch_tensor_long((const int64_t[]){2, 0, 2}, SHAPE(3)), v, acc);
    ck_assert_str_eq(torch_grad_fn_name(x), "IndexPutBackward0");
    return torch_exp(x);
}

static Tensor *slice_copy(Tensor *a, Tensor *b) {
    Tensor *x = torch_mul_scalar(a, 1);
    torch_copy_(torch_slice(x, 1, 1, 3), b); /* x[:, 1:3] = b */
    return torch_exp(x);
}

static Tensor *view_fill(Tensor *a) {
    Tensor *x = torch_mul_scalar(a, 1);
    Tensor *v = torch_select(x, 0, 1);
    torch_fill_(v, 2.0);
    ck_assert_str_eq(torch_grad_fn_name(v), "AsStridedBackward0");
    return torch_cat(TENSORS(torch_mul(v, v), torch_reshape(torch_mul(x, x), SHAPE(-1))), 0);
}

static Tensor *copy_bcast(Tensor *a, Tensor *b) {
    Tensor *x = torch_mul_scalar(a, 1);
    torch_copy_(x, b);
    ck_assert_str_eq(torch_grad_fn_name(x), "CopyBackwards");
    return torch_mul(x, a);
}

static Tensor *zero(Tensor *a) {
    Tensor *x = torch_mul_scalar(a, 3);
    torch_zero_(x);
    ck_assert_str_eq(torch_grad_fn_name(x), "ZeroBackward0");
    return torch_add(x, a);
}

START_TEST(test_inplace_autograd) {
    CASE("inplace_setitem", setitem(x[0]), IN(20, 3, 4));
    CASE("inplace_into_zeros", into_zeros(x[0]), IN(21, 4));
    CASE("inplace_masked_fill", mfill(x[0]), IN(22, 3, 4));
    CASE("inplace_index_put", iput(x[0], x[1], false), IN(23, 3, 4), IN(24, 3, 4));
    CASE("inplace_index_put_acc", iput(x[0], x[1], true), IN(23, 3, 4), IN(24, 3, 4));
    CASE("inplace_slice_copy", slice_copy(x[0], x[1]), IN(25, 3, 4), IN(26, 3, 2));
    CASE("inplace_view_fill", view_fill(x[0]), IN(27, 3, 4));
    CASE("inplace_copy_bcast", copy_bcast(x[0], x[1]), IN(28, 3, 4), IN(29, 4));
    CASE("inplace_zero", zero(x[0]), IN(30, 3, 4));
}
END_TEST

START_TEST(test_inplace_values_and_versions) {
    Tensor *x = torch_zeros(SHAPE(2, 3));
    ck_assert_int_eq(torch_version(x), 0);
    torch_fill_(x, 1.5);
    Tensor *row = torch_select(x, 0, 1);
    torch_copy_(row, torch_tensor((const float[]){7, 8, 9}, SHAPE(3)));
    ck_assert_int_eq(torch_version(x), 2); /* a view shares the counter */
    ck_assert_int_eq(torch_version(row), 2);
    torch_masked_fill_(x, torch_tensor_bool((const bool[]){false, true, false}, SHAPE(3)), -1.0);
    torch_index_put_(x, torch_tensor_long((const int64_t[]){-2}, SHAPE(1)), torch_full(SHAPE(1), 4.0), true);
    assert_repr(x, "tensor([[ 5.5000,  3.0000,  5.5000],\n        [ 7.0000, -1.0000,  9.0000]])");
    ck_assert_int_eq(torch_version(x), 4);
    Tensor *l = torch_zeros_dtype(SHAPE(3), AC_INT64);
    torch_index_put_(l, torch_tensor_long((const int64_t[]){0, 0}, SHAPE(2)), torch_full_dtype(SHAPE(1), 2, AC_INT64), true);
    ck_assert_int_eq(ac_data_long(l)[0], 4); /* a repeated index accumulates */
    torch_fill_(torch_transpose(x, 0, 1), 0.25); /* any strides */
    ck_assert(torch_item(torch_sum(x)) == 1.5);
    torch_zero_(x);
    ck_assert(torch_item(torch_sum(x)) == 0.0);
    /* copy_ from an overlapping view of itself */
    Tensor *y = torch_arange_float(0, 4, 1);
    torch_copy_(torch_slice(y, 0, 1, 4), torch_slice(y, 0, 0, 3));
    assert_repr(y, "tensor([0., 0., 1., 2.])");
}
END_TEST

START_TEST(test_inplace_errors) {
    Tensor *a = torch_requires_grad_(torch_ones(SHAPE(3, 4)), true);
    EXPECT_ERROR("fill_: a leaf Variable that requires grad is being used in an in-place operation.", torch_fill_(a, 1));
    EXPECT_ERROR("fill_: a view of a leaf Variable that requires grad is being used in an in-place operation.",
                 torch_fill_(torch_select(a, 0, 1), 1));
    bool prev = torch_set_grad_enabled(false);
    torch_fill_(a, 2.0); /* under no_grad: how optimizers write */
    torch_set_grad_enabled(prev);
    /* a saved output changed in place */
    Tensor *y = torch_exp(a);
    torch_fill_(y, 1.0);
    EXPECT_ERROR("backward: one of the variables needed for gradient computation has been modified by an inplace "
                 "operation: [torch.FloatTensor [3, 4]], which is output 0 of ExpBackward0, is at version 1; expected "
                 "version 0 instead. Hint: enable anomaly detection to find the operation that failed to compute its "
                 "gradient, with torch.autograd.set_detect_anomaly(True).",
                 torch_backward(torch_sum(y), NULL));
    /* a saved input changed in place: named by its grad_fn now */
    Tensor *x = torch_mul_scalar(a, 1);
    Tensor *z = torch_mul(x, x);
    torch_fill_(x, 2.0);
    EXPECT_ERROR("which is output 0 of FillBackward2, is at version 1; expected version 0 instead.",
                 torch_backward(torch_sum(z), NULL));
    ck_assert_int_eq(test_kind, AC_RUNTIME_ERROR);
    /* an input the backward does not read may change: exp saves its result only */
    Tensor *x2 = torch_mul_scalar(a, 1);
    Tensor *e = torch_exp(x2);
    torch_mul_scalar(x2, 2);
    torch_zero_(x2);
    torch_backward(torch_sum(e), NULL);
    ck_assert(a->grad != NULL);
    /* an optimizer's step writes its parameters in place */
    Tensor *w = nn_Parameter(torch_ones(SHAPE(3)));
    Tensor *l = torch_sum(torch_mul(w, w));
    torch_backward_ex(l, NULL, true);
    optim_Optimizer *sgd = optim_SGD((nn_TensorList){1, (const char *[]){"w"}, &w}, 0.1, 0, 0, 0, false);
    optim_step(sgd);
    EXPECT_ERROR("[torch.FloatTensor [3]] is at version 1; expected version 0 instead.", torch_backward(l, NULL));
    optim_free(sgd);
    ac_free(w);
    /* a detached tensor shares the version counter */
    Tensor *s = torch_softmax(a, 1);
    torch_zero_(torch_detach(s));
    EXPECT_ERROR("which is output 0 of SoftmaxBackward0, is at version 1", torch_backward(torch_sum(s), NULL));
}
END_TEST

START_TEST(test_retain_grad) {
    Tensor *a = IN(31, 3, 4);
    Tensor *y = torch_mul_scalar(a, 2);
    ck_assert(!torch_retains_grad(y) && !torch_is_leaf(y) && torch_is_leaf(a));
    torch_retain_grad(y);
    ck_assert(torch_retains_grad(y));
    Tensor *z = torch_sum(torch_mul(y, y));
    torch_backward_ex(z, NULL, true);
    torch_backward(z, NULL); /* accumulates, as a leaf's */
    assert_tensor_golden(y->grad, GOLD, "retain_grad.y", 1e-6, 1e-4);
    assert_tensor_golden(a->grad, GOLD, "retain_grad.a", 1e-6, 1e-4);
    EXPECT_ERROR("retain_grad: can't retain_grad on Tensor that has requires_grad=False", torch_retain_grad(torch_zeros(SHAPE(2))));
    torch_retain_grad(a); /* a leaf: nothing changes */
    ck_assert(!torch_retains_grad(a));
}
END_TEST


START_TEST(test_creation_with_dtype) {
    /* the strings are PyTorch 1.13's print() of the same calls */
    assert_repr(torch_zeros_dtype(SHAPE(2, 3), AC_BOOL), "tensor([[False, False, False],\n        [False, False, False]])");
    assert_repr(torch_full_dtype(SHAPE(2), 3, AC_INT64), "tensor([3, 3])");
    assert_repr(torch_ones_dtype(SHAPE(2), AC_FLOAT64), "tensor([1., 1.], dtype=torch.float64)");
    assert_repr(torch_empty(SHAPE(0), AC_BOOL), "tensor([], dtype=torch.bool)");
    assert_repr(torch_full(SHAPE(2), 1.5), "tensor([1.5000, 1.5000])");
    assert_repr(torch_zeros_like(torch_ones_dtype(SHAPE(2), AC_INT64)), "tensor([0, 0])");
    assert_repr(torch_full_like(torch_ones(SHAPE(2)), 7), "tensor([7., 7.])");
    assert_repr(torch_empty_like(torch_ones(SHAPE(0))), "tensor([])");
    ck_assert(torch_ones_like(torch_zeros_dtype(SHAPE(1), AC_INT32))->dtype == AC_INT32);
}
END_TEST

START_TEST(test_generators_and_state) {
    /* generator=g draws g's stream and leaves the default one alone */
    torch_manual_seed(42);
    Tensor *want = torch_rand(SHAPE(5));
    torch_manual_seed(7);
    Tensor *next_default = torch_rand(SHAPE(3));
    torch_manual_seed(7);
    torch_Generator g;
    torch_generator_manual_seed(&g, 42);
    ck_assert_int_eq(torch_generator_initial_seed(&g), 42);
    Tensor *got = torch_rand_gen(SHAPE(5), &g);
    ck_assert_mem_eq(ac_data_float(got), ac_data_float(want), 5 * sizeof(float));
    ck_assert_mem_eq(ac_data_float(torch_rand(SHAPE(3))), ac_data_float(next_default), 3 * sizeof(float));
    ck_assert_int_eq(torch_initial_seed(), 7);
    /* get_state / set_state: the draws that follow repeat, the cached normal included */
    torch_manual_seed(3);
    torch_randn(SHAPE(3)); /* leaves a normal cached */
    Tensor *st = torch_get_rng_state();
    ck_assert_int_eq(torch_numel(st), 628);
    Tensor *a = torch_cat(TENSORS(torch_randn(SHAPE(7)), torch_rand(SHAPE(2)), torch_to_float(torch_randperm(5))), 0);
    torch_set_rng_state(st);
    Tensor *b = torch_cat(TENSORS(torch_randn(SHAPE(7)), torch_rand(SHAPE(2)), torch_to_float(torch_randperm(5))), 0);
    ck_assert_mem_eq(ac_data_float(a), ac_data_float(b), 14 * sizeof(float));
    Tensor *gs = torch_generator_get_state(&g);
    Tensor *x = torch_randn_gen(SHAPE(20), &g);
    torch_generator_set_state(&g, gs);
    ck_assert_mem_eq(ac_data_float(torch_randn_gen(SHAPE(20), &g)), ac_data_float(x), 20 * sizeof(float));
    /* every random op takes one */
    torch_generator_manual_seed(&g, 1);
    ck_assert_int_eq(torch_numel(torch_randint_gen(0, 5, SHAPE(4), &g)), 4);
    torch_uniform_gen_(torch_empty(SHAPE(3), AC_FLOAT32), 0, 1, &g);
    torch_normal_gen_(torch_empty(SHAPE(3), AC_FLOAT32), 0, 1, &g);
    torch_bernoulli_gen_(torch_empty(SHAPE(3), AC_FLOAT32), 0.5, &g);
    torch_exponential_gen_(torch_empty(SHAPE(3), AC_FLOAT32), 1, &g);
    torch_multinomial_gen(torch_ones(SHAPE(4)), 2, false, &g);
    torch_dropout_gen(torch_ones(SHAPE(4)), 0.5, true, &g);
    torch_randperm_gen(4, &g);
    EXPECT_ERROR("set_state: Expected an RNG state of 628 int64 values", torch_set_rng_state(torch_zeros(SHAPE(3))));
    /* the state one draw before a twist (left 1, next 624: a checkpoint once refused it) */
    torch_generator_manual_seed(&g, 5);
    for (int i = 0; i < 624; i++) ac_random32(&g);
    Tensor *edge = torch_generator_get_state(&g);
    ck_assert(ac_data_long(edge)[624] == 1 && ac_data_long(edge)[625] == 624);
    uint32_t next_draw = ac_random32(&g);
    torch_generator_set_state(&g, edge);
    ck_assert_uint_eq(ac_random32(&g), next_draw);
    /* a position that would read past the words before its twist */
    Tensor *past = torch_clone(edge);
    ac_data_long(past)[624] = 624, ac_data_long(past)[625] = 623;
    EXPECT_ERROR("set_state: the RNG state holds an invalid generator position", torch_generator_set_state(&g, past));
    Tensor *bad = torch_clone(st);
    ac_data_long(bad)[624] = 0;
    EXPECT_ERROR("set_state: the RNG state holds an invalid generator position", torch_set_rng_state(bad));
}
END_TEST

static bool mode_inside;
static int leave_early(void) {
    TORCH_NO_GRAD {
        mode_inside = torch_is_grad_enabled();
        return 1; /* a return inside the scope still restores grad mode */
    }
    return 0;
}

START_TEST(test_no_grad_scope) {
    Tensor *a = torch_requires_grad_(torch_ones(SHAPE(2)), true);
    Tensor *y = NULL;
    TORCH_NO_GRAD {
        y = torch_mul_scalar(a, 2);
        TORCH_NO_GRAD { ck_assert(!torch_is_grad_enabled()); }
        ck_assert(!torch_is_grad_enabled());
    }
    ck_assert(torch_is_grad_enabled());
    ck_assert(!y->requires_grad);
    ck_assert_int_eq(leave_early(), 1);
    ck_assert(!mode_inside && torch_is_grad_enabled());
    for (int i = 0; i < 3; i++) TORCH_NO_GRAD { if (i == 1) break; }
    ck_assert(torch_is_grad_enabled());
    /* an error inside, caught by a handler that longjmps out: grad mode comes back too */
    TORCH_NO_GRAD { EXPECT_ERROR("mat1 and mat2", torch_matmul(torch_ones(SHAPE(2, 3)), torch_ones(SHAPE(2, 3)))); }
    ck_assert(torch_is_grad_enabled());
}
END_TEST

/* The rest of the new calls' edges: refusals of ours, ties, empty pieces. */
START_TEST(test_call_edges) {
    /* topk: equal values come in index order here; which of several equal
     * values PyTorch keeps at the cut may differ (its partial sort) */
    Tensor *t = torch_tensor((const float[]){2, 1, 2, 1}, SHAPE(4));
    torch_return_types small = torch_topk(t, 2, 0, false, true);
    ck_assert(ac_data_long(small.indices)[0] == 1 && ac_data_long(small.indices)[1] == 3);
    torch_return_types big = torch_topk(t, 2, 0, true, true);
    ck_assert(ac_data_long(big.indices)[0] == 0 && ac_data_long(big.indices)[1] == 2);
    /* a few of many (k <= size / 8) take one pass, not a sort: the same first k as the whole
     * sorted row, ties (values 0..19 over 400) in index order and NaN first when largest */
    torch_manual_seed(3);
    Tensor *r = torch_to_float(torch_randint(0, 20, SHAPE(3, 400)));
    ac_data_float(r)[7] = NAN, ac_data_float(r)[411] = NAN, ac_data_float(r)[419] = NAN;
    for (int dim = 0; dim < 2; dim++) {
        Tensor *in = dim == 0 ? torch_contiguous(torch_t(r)) : r; /* along dim 0: rows apart */
        for (int lg = 0; lg < 2; lg++)
            for (int64_t k = 1; k <= 50; k += 7) {
                torch_return_types few = torch_topk(in, k, dim, lg, true), all = torch_topk(in, 400, dim, lg, true);
                for (int64_t row = 0; row < 3; row++)
                    for (int64_t j = 0; j < k; j++) {
                        int64_t f = dim == 1 ? row * k + j : j * 3 + row, w = dim == 1 ? row * 400 + j : j * 3 + row;
                        ck_assert_msg(ac_data_long(few.indices)[f] == ac_data_long(all.indices)[w],
                                      "topk k=%lld dim %d largest %d row %lld: index %lld, the sort's %lld", (long long)k,
                                      dim, lg, (long long)row, (long long)ac_data_long(few.indices)[f],
                                      (long long)ac_data_long(all.indices)[w]);
                        float fv = ac_data_float(few.values)[f], wv = ac_data_float(all.values)[w];
                        ck_assert(fv == wv || (isnan(fv) && isnan(wv)));
                    }
            }
    }
    int n;
    Tensor **c = torch_chunk(torch_zeros(SHAPE(0, 2)), 3, 0, &n); /* PyTorch: 3 empty pieces */
    ck_assert(n == 3 && c[2]->shape[0] == 0);
    EXPECT_ERROR("copy_: a Long destination cannot carry the gradient of a Float source",
                 torch_copy_(torch_zeros_dtype(SHAPE(2), AC_INT64), torch_requires_grad_(torch_ones(SHAPE(2)), true)));
    EXPECT_ERROR("masked_fill_: masked_fill_ only supports boolean masks", torch_masked_fill_(torch_ones(SHAPE(2)), torch_ones(SHAPE(2)), 0));
    EXPECT_ERROR("index_put_: too many indices for tensor of dimension 0",
                 torch_index_put_(torch_scalar_tensor(1), torch_tensor_long((const int64_t[]){0}, SHAPE(1)), torch_scalar_tensor(2), false));
    ck_assert_int_eq(test_kind, AC_INDEX_ERROR);
    EXPECT_ERROR("scatter_add: Index tensor must have the same number of dimensions as src tensor",
                 torch_scatter_add(torch_ones(SHAPE(3, 4)), 0, torch_tensor_long((const int64_t[]){0}, SHAPE(1, 1)), torch_ones(SHAPE(4))));
    /* an int32 index works for embedding, as in PyTorch */
    Tensor *e = torch_embedding(torch_reshape(torch_arange_float(0, 6, 1), SHAPE(3, 2)),
                                torch_tensor_int((const int32_t[]){2}, SHAPE(1)), -1);
    assert_repr(e, "tensor([[4., 5.]])");
}
END_TEST

/* ---- the everyday calls (tests/data/everyday_golden.txt, tests/tools/gen_everyday_golden.py) ---- */
#define EVERYDAY "everyday_golden.txt"

static Tensor *golden_tensor(const char *name, int ndim, const int64_t *shape) {
    Golden g = golden(EVERYDAY, name);
    Tensor *t = torch_empty(ndim, shape, AC_FLOAT32);
    ck_assert_int_eq(torch_numel(t), g.n);
    for (int i = 0; i < g.n; i++) ((float *)t->data)[i] = (float)g.v[i];
    return t;
}

START_TEST(test_everyday_calls) {
    /* sin, cos: values 1e-5, gradients 1e-4 relative */
    Tensor *x = golden_tensor("sin_x", 1, (int64_t[]){13});
    assert_tensor_golden(torch_sin(x), EVERYDAY, "sin_out", 1e-6, 1e-5);
    assert_tensor_golden(torch_cos(x), EVERYDAY, "cos_out", 1e-6, 1e-5);
    Tensor *w = torch_arange_float(1, 14, 1);
    for (int k = 0; k < 2; k++) {
        Tensor *xs = torch_requires_grad_(torch_clone(x), true);
        torch_backward(torch_sum(torch_mul(k ? torch_cos(xs) : torch_sin(xs), w)), NULL);
        assert_tensor_golden(xs->grad, EVERYDAY, k ? "cos_grad" : "sin_grad", 1e-6, 1e-4);
    }
    /* mse_loss */
    Tensor *a = torch_requires_grad_(golden_tensor("mse_a", 2, (int64_t[]){4, 5}), true);
    Tensor *b = torch_requires_grad_(golden_tensor("mse_b", 2, (int64_t[]){4, 5}), true);
    Tensor *loss = torch_mse_loss(a, b);
    ck_assert_str_eq(torch_grad_fn_name(loss), "MseLossBackward0");
    assert_tensor_golden(loss, EVERYDAY, "mse_loss", 1e-6, 1e-5);
    torch_backward(loss, NULL);
    assert_tensor_golden(a->grad, EVERYDAY, "mse_grad_a", 1e-7, 1e-4);
    assert_tensor_golden(b->grad, EVERYDAY, "mse_grad_b", 1e-7, 1e-4);
    /* linspace: PyTorch's float32 values, bit for bit */
    struct { double s, e; int64_t n; const char *name; } ls[] = {
        {0, 1, 5, "linspace_5_0.0_1.0"}, {-2.5, 7.25, 11, "linspace_11_-2.5_7.25"}, {0, 1, 1, "linspace_1_0.0_1.0"},
        {1, 0, 7, "linspace_7_1.0_0.0"}, {0.1, 0.9, 101, "linspace_101_0.1_0.9"}, {-1, 3, 1000, "linspace_1000_-1.0_3.0"},
        {0, 1, 33, "linspace_33_0.0_1.0"}};
    for (int k = 0; k < 7; k++) assert_tensor_golden(torch_linspace(ls[k].s, ls[k].e, ls[k].n), EVERYDAY, ls[k].name, 0, 0);
    ck_assert_int_eq(torch_numel(torch_linspace(0, 1, 0)), 0);
    EXPECT_ERROR("number of steps must be non-negative", torch_linspace(0, 1, -1));
    /* in place through autograd, as PyTorch: values and both gradients */
    Tensor *p = torch_requires_grad_(golden_tensor("inplace_p", 2, (int64_t[]){3, 4}), true);
    Tensor *q = torch_requires_grad_(golden_tensor("inplace_q", 1, (int64_t[]){4}), true);
    Tensor *z = torch_mul_scalar(p, 2);
    int64_t v0 = torch_version(z);
    torch_add_(z, q);
    ck_assert_str_eq(torch_grad_fn_name(z), "AddBackward0");
    ck_assert_int_gt(torch_version(z), v0);
    torch_mul_(z, q);
    ck_assert_str_eq(torch_grad_fn_name(z), "MulBackward0");
    torch_sub_scalar_(z, 1.5);
    torch_div_(z, torch_add_scalar(q, 3));
    ck_assert_str_eq(torch_grad_fn_name(z), "DivBackward0");
    torch_mul_scalar_(z, 0.5);
    assert_tensor_golden(z, EVERYDAY, "inplace_z", 1e-6, 1e-5);
    torch_backward(torch_sum(torch_mul(z, torch_reshape(torch_arange_float(1, 13, 1), SHAPE(3, 4)))), NULL);
    assert_tensor_golden(p->grad, EVERYDAY, "inplace_grad_p", 1e-6, 1e-4);
    assert_tensor_golden(q->grad, EVERYDAY, "inplace_grad_q", 1e-6, 1e-4);
    /* what PyTorch refuses */
    EXPECT_ERROR("add_: a leaf Variable that requires grad is being used in an in-place operation.", torch_add_(p, q));
    EXPECT_ERROR("output with shape [4] doesn't match the broadcast shape [3, 4]",
                 torch_add_(torch_zeros(SHAPE(4)), torch_zeros(SHAPE(3, 4))));
    /* into a view: the view's grad_fn is AsStridedBackward0 and its base's CopySlices, as PyTorch */
    Tensor *base = torch_mul_scalar(p, 1.0), *row = torch_select(base, 0, 0);
    torch_add_scalar_(row, 1.0);
    ck_assert_str_eq(torch_grad_fn_name(row), "AsStridedBackward0");
    ck_assert_str_eq(torch_grad_fn_name(base), "CopySlices");
    /* plain tensors: in place, no graph */
    Tensor *t = torch_ones(SHAPE(2, 2));
    torch_mul_(torch_add_scalar_(t, 1), torch_full(SHAPE(2), 3));
    ck_assert(((float *)t->data)[3] == 6.0f && t->grad_fn == NULL);
}
END_TEST

/* g = x.grad; x.grad = None: the old gradient keeps its values through the next backward */
START_TEST(test_grad_set_to_none) {
    Tensor *w = nn_Parameter(torch_ones(SHAPE(3)));
    torch_backward(torch_sum(torch_mul_scalar(w, 2)), NULL);
    Tensor *g = torch_grad_take(w);
    ck_assert(g && w->grad == NULL && ((float *)g->data)[0] == 2.0f);
    torch_backward(torch_sum(torch_mul_scalar(w, 5)), NULL);
    ck_assert(((float *)g->data)[0] == 2.0f);      /* untouched: it is yours now */
    ck_assert(((float *)w->grad->data)[0] == 5.0f); /* a new gradient, not 2 + 5 */
    ck_assert(torch_grad_take(torch_ones(SHAPE(1))) == NULL);
    ac_free(g);
    ac_free(w);
}
END_TEST

START_TEST(test_like_equal_allclose_tri) {
    Tensor *x = torch_randn(SHAPE(2, 3));
    Tensor *b = torch_zeros_like_dtype(x, AC_BOOL), *o = torch_ones_like_dtype(x, AC_INT64);
    ck_assert(b->dtype == AC_BOOL && b->shape[1] == 3 && ((bool *)b->data)[5] == false);
    ck_assert(o->dtype == AC_INT64 && ((int64_t *)o->data)[4] == 1);
    Tensor *f = torch_full_like_dtype(x, 2.5, AC_FLOAT64);
    ck_assert(f->dtype == AC_FLOAT64 && ((double *)f->data)[0] == 2.5);
    ck_assert(torch_empty_like_dtype(x, AC_INT64)->dtype == AC_INT64);
    /* torch.equal: shape and values (int 1 equals float 1.0, as PyTorch 1.13 says), NaN never */
    ck_assert(torch_equal(x, torch_clone(x)));
    ck_assert(torch_equal(torch_ones(SHAPE(2)), torch_ones_dtype(SHAPE(2), AC_INT64)));
    ck_assert(!torch_equal(x, torch_reshape(x, SHAPE(3, 2))));
    ck_assert(!torch_equal(torch_full(SHAPE(1), NAN), torch_full(SHAPE(1), NAN)));
    ck_assert(torch_equal(torch_T(torch_T(x)), x)); /* through strides */
    /* torch.allclose(a, b, rtol=1e-5, atol=1e-8) */
    Tensor *y = torch_add_scalar(x, 1e-7);
    ck_assert(torch_allclose(x, y, 1e-5, 1e-8, false));
    ck_assert(!torch_allclose(x, torch_add_scalar(x, 1e-3), 1e-5, 1e-8, false));
    ck_assert(torch_allclose(torch_full(SHAPE(2), NAN), torch_full(SHAPE(2), NAN), 1e-5, 1e-8, true));
    ck_assert(!torch_allclose(torch_full(SHAPE(2), NAN), torch_full(SHAPE(2), NAN), 1e-5, 1e-8, false));
    ck_assert(torch_allclose(torch_ones(SHAPE(3, 2)), torch_ones(SHAPE(2)), 0, 0, false)); /* broadcast */
    ck_assert(!torch_allclose(torch_full(SHAPE(1), INFINITY), torch_full(SHAPE(1), -INFINITY), 1, 1, false));
    EXPECT_ERROR("The size of tensor a (3) must match the size of tensor b (2)",
                 torch_allclose(torch_ones(SHAPE(3)), torch_ones(SHAPE(2)), 1e-5, 1e-8, false));
    /* tril / triu on bool and int64 (a causal mask built as a bool tensor) */
    Tensor *m = torch_triu(torch_ones_dtype(SHAPE(3, 3), AC_BOOL), 1);
    ck_assert(m->dtype == AC_BOOL);
    const bool *mb = m->data;
    ck_assert(!mb[0] && mb[1] && mb[2] && !mb[3] && !mb[4] && mb[5] && !mb[6] && !mb[8]);
    Tensor *li = torch_tril(torch_reshape(torch_arange(9), SHAPE(3, 3)), -1);
    const int64_t *lp = li->data;
    ck_assert(lp[0] == 0 && lp[3] == 3 && lp[4] == 0 && lp[6] == 6 && lp[7] == 7 && lp[8] == 0);
}
END_TEST

Suite *suite_calls(void) {
    Suite *s = suite_create("PyTorch calls");
    TCase *tc = tcase("calls");
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_extremes);
    tcase_add_test(tc, test_shape_calls);
    tcase_add_test(tc, test_inplace_autograd);
    tcase_add_test(tc, test_inplace_values_and_versions);
    tcase_add_test(tc, test_inplace_errors);
    tcase_add_test(tc, test_retain_grad);
    tcase_add_test(tc, test_creation_with_dtype);
    tcase_add_test(tc, test_generators_and_state);
    tcase_add_test(tc, test_no_grad_scope);
    tcase_add_test(tc, test_call_edges);
    tcase_add_test(tc, test_everyday_calls);
    tcase_add_test(tc, test_like_equal_allclose_tri);
    tcase_add_test(tc, test_grad_set_to_none);
    suite_add_tcase(s, tc);
    return s;
}
