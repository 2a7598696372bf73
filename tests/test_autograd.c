/* The engine's semantics, as PyTorch's: accumulation, reuse, detach, no-grad,
 * freed graphs, explicit output gradients, deep graphs, grad_fn names. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

#define T(...) torch_tensor((const float[]){__VA_ARGS__}, SHAPE((int64_t)(sizeof((float[]){__VA_ARGS__}) / sizeof(float))))

START_TEST(test_accumulate_until_zeroed) {
    Tensor *x = torch_requires_grad_(T(1.0f, 2.0f, 3.0f), true);
    ck_assert_ptr_null(x->grad);
    torch_backward(torch_sum(torch_mul_scalar(x, 2.0)), NULL);
    assert_repr(x->grad, "tensor([2., 2., 2.])");
    torch_backward(torch_sum(torch_mul_scalar(x, 3.0)), NULL); /* adds up, as in PyTorch */
    assert_repr(x->grad, "tensor([5., 5., 5.])");
    torch_zero_grad_(x);
    assert_repr(x->grad, "tensor([0., 0., 0.])");
    torch_backward(torch_sum(x), NULL);
    assert_repr(x->grad, "tensor([1., 1., 1.])");
}
END_TEST

START_TEST(test_tensor_used_twice) {
    /* a non-leaf used twice must receive both contributions (micrograd #2) */
    Tensor *x = torch_requires_grad_(T(1.0f, -2.0f), true);
    Tensor *y = torch_mul_scalar(x, 3.0);     /* y = 3x */
    Tensor *z = torch_add(torch_mul(y, y), y); /* z = y^2 + y */
    torch_backward(torch_sum(z), NULL);       /* dz/dx = (2y + 1) * 3 */
    assert_repr(x->grad, "tensor([ 21., -33.])");
    ck_assert_ptr_null(y->grad); /* non-leaf gradients are not kept */
}
END_TEST

START_TEST(test_explicit_gradient_and_leaf_backward) {
    Tensor *x = torch_requires_grad_(T(1.0f, 2.0f), true);
    Tensor *y = torch_mul(x, x);
    torch_backward(y, T(1.0f, 0.5f));
    assert_repr(x->grad, "tensor([2., 2.])");
    Tensor *s = torch_requires_grad_(torch_scalar_tensor(4.0), true);
    torch_backward(s, NULL); /* backward on a leaf sets its grad to 1 */
    assert_repr(s->grad, "tensor(1.)");
}
END_TEST

START_TEST(test_detach_and_no_grad) {
    Tensor *x = torch_requires_grad_(T(1.0f, 2.0f), true);
    Tensor *d = torch_detach(x);
    ck_assert(!d->requires_grad);
    ck_assert_ptr_null(d->grad_fn);
    ck_assert_ptr_eq(ac_data_float(d), ac_data_float(x)); /* shares storage */
    bool prev = torch_set_grad_enabled(false);
    Tensor *y = torch_mul_scalar(x, 2.0);
    torch_set_grad_enabled(prev);
    ck_assert(!y->requires_grad);
    ck_assert_ptr_null(y->grad_fn);
    /* mixing a detached value in: only x's path gets a gradient */
    Tensor *z = torch_mul(x, torch_detach(torch_mul_scalar(x, 5.0)));
    torch_backward(torch_sum(z), NULL);
    assert_repr(x->grad, "tensor([ 5., 10.])");
}
END_TEST

START_TEST(test_second_backward_is_an_error) {
    Tensor *x = torch_requires_grad_(T(1.0f, 2.0f), true);
    Tensor *y = torch_sum(torch_mul(x, x));
    torch_backward(y, NULL);
    EXPECT_ERROR("Trying to backward through the graph a second time", torch_backward(y, NULL));
    /* retain_graph keeps it */
    Tensor *y2 = torch_sum(torch_mul(x, x));
    torch_zero_grad_(x);
    torch_backward_ex(y2, NULL, true);
    torch_backward(y2, NULL);
    assert_repr(x->grad, "tensor([4., 8.])");
    /* the failed backward above did not leave grad mode off */
    ck_assert(torch_is_grad_enabled());
}
END_TEST

START_TEST(test_deep_graph) {
    /* 100,000 nodes deep: the topological order is built without recursion */
    Tensor *x = torch_requires_grad_(T(1.0f), true);
    Tensor *y = x;
    for (int i = 0; i < 100000; i++) y = torch_add_scalar(y, 0.0);
    torch_backward(torch_sum(y), NULL);
    assert_repr(x->grad, "tensor([1.])");
}
END_TEST

START_TEST(test_views_share_storage) {
    Tensor *m = torch_reshape(torch_arange_float(0, 12, 1), SHAPE(3, 4));
    float *base = ac_data_float(m);
    ck_assert_ptr_eq(torch_transpose(m, 0, 1)->data, base);
    ck_assert_ptr_eq(torch_T(m)->data, base);
    ck_assert_ptr_eq(torch_view(m, SHAPE(2, 6))->data, base);
    ck_assert_ptr_eq(torch_select(m, 0, 1)->data, base);
    ck_assert_ptr_eq(torch_slice(m, 1, 1, 3)->data, base);
    ck_assert(!torch_is_contiguous(torch_T(m)));
    /* no elements: contiguous whatever the strides, as PyTorch's is_contiguous() (the fuzzer's
     * [4, 0] leaf gradient, strides (1, 1), was refused by ac_data_float) */
    ck_assert(torch_is_contiguous(torch_zeros(SHAPE(4, 0))));
    ck_assert(torch_is_contiguous(torch_T(torch_zeros(SHAPE(3, 0, 2)))));
    ac_data_float(torch_zeros(SHAPE(4, 0)));
    ck_assert(torch_contiguous(torch_T(m))->data != base);
    ck_assert_ptr_eq(torch_contiguous(m), m); /* already contiguous: itself */
    /* a write through the base shows in the views */
    base[5] = 100.0f;
    ck_assert(ac_get(torch_T(m), SHAPE(1, 1)) == 100.0);
    ck_assert(ac_get(torch_select(m, 0, 1), SHAPE(1)) == 100.0);
    /* view of a non-contiguous tensor where strides allow, reshape copies where they don't */
    Tensor *tt = torch_transpose(torch_reshape(torch_arange_float(0, 24, 1), SHAPE(2, 3, 4)), 0, 1); /* (3, 2, 4) */
    ck_assert_ptr_eq(torch_view(tt, SHAPE(3, 2, 2, 2))->data, tt->data); /* splitting a dim: still a view */
    EXPECT_ERROR("view size is not compatible", torch_view(tt, SHAPE(3, 8)));
    assert_repr(torch_select(torch_reshape(tt, SHAPE(3, 8)), 0, 1),
                "tensor([ 4.,  5.,  6.,  7., 16., 17., 18., 19.])");
    EXPECT_ERROR("view size is not compatible", torch_view(torch_T(m), SHAPE(12)));
    Tensor *r = torch_reshape(torch_T(m), SHAPE(12));
    ck_assert(r->data != base);
    assert_repr(torch_slice(r, 0, 0, 4), "tensor([0., 4., 8., 1.])");
}
END_TEST

/* grad_fn names as PyTorch 1.13 gives them (../shared/spec/grad-fn-names.txt). */
START_TEST(test_grad_fn_names) {
    torch_manual_seed(1);
    Tensor *W = torch_requires_grad_(torch_rand(SHAPE(3, 4)), true);
    Tensor *M = torch_requires_grad_(torch_rand(SHAPE(4, 5)), true);
    Tensor *v = torch_requires_grad_(torch_rand(SHAPE(4)), true);
    Tensor *X = torch_requires_grad_(torch_rand(SHAPE(2, 3, 4)), true);
    Tensor *idx = torch_tensor_long((const int64_t[]){0, 2}, SHAPE(2));
    nn_Linear *lin = nn_Linear_new(4, 5, true), *lin_nb = nn_Linear_new(4, 5, false);
    nn_LayerNorm *ln = nn_LayerNorm_new(4);
    nn_Embedding *emb = nn_Embedding_new(5, 3);
    struct { Tensor *t; const char *name; } cases[] = {
        {torch_matmul(W, M), "MmBackward0"},
        {torch_matmul(v, M), "SqueezeBackward3"},
        {torch_matmul(W, v), "MvBackward0"},
        {torch_matmul(v, v), "DotBackward0"},
        {torch_dot(v, v), "DotBackward0"},
        {torch_matmul(W, torch_T(W)), "MmBackward0"},
        {torch_matmul(X, M), "UnsafeViewBackward0"},
        {torch_matmul(X, torch_transpose(X, 1, 2)), "UnsafeViewBackward0"},
        {torch_T(W), "PermuteBackward0"},
        {torch_t(W), "TBackward0"},
        {torch_transpose(W, 0, 1), "TransposeBackward0"},
        {nn_Linear_forward(lin, W), "AddmmBackward0"},
        {nn_Linear_forward(lin_nb, W), "MmBackward0"},
        {nn_Linear_forward(lin, X), "ViewBackward0"},
        {nn_Linear_forward(lin_nb, X), "UnsafeViewBackward0"},
        {torch_softmax(W, -1), "SoftmaxBackward0"},
        {torch_log_softmax(W, -1), "LogSoftmaxBackward0"},
        {torch_masked_fill(W, torch_to_bool(torch_ones(SHAPE(3, 4))), -INFINITY), "MaskedFillBackward0"},
        {torch_cat(TENSORS(W, W), 0), "CatBackward0"},
        {torch_stack(TENSORS(W, W), 0), "StackBackward0"},
        {torch_mul(W, W), "MulBackward0"},
        {torch_mul_scalar(W, 2), "MulBackward0"},
        {torch_div_scalar(W, 2), "DivBackward0"},
        {torch_div(W, W), "DivBackward0"},
        {torch_add(W, W), "AddBackward0"},
        {torch_add_scalar(W, 1), "AddBackward0"},
        {torch_sub(W, W), "SubBackward0"},
        {torch_neg(W), "NegBackward0"},
        {torch_sum(W), "SumBackward0"},
        {torch_sum_dim(W, SHAPE(-1), false), "SumBackward1"},
        {torch_mean(W), "MeanBackward0"},
        {torch_mean_dim(W, SHAPE(-1), true), "MeanBackward1"},
        {torch_tril(W, 0), "TrilBackward0"},
        {torch_triu(W, 0), "TriuBackward0"},
        {nn_Embedding_forward(emb, idx), "EmbeddingBackward0"},
        {torch_select(W, 0, 1), "SelectBackward0"},
        {torch_select(W, 1, 0), "SelectBackward0"},
        {torch_slice(W, 0, 1, 3), "SliceBackward0"},
        {torch_index_select(W, 0, idx), "IndexSelectBackward0"},
        {torch_index(W, idx), "IndexBackward0"},
        {torch_view(W, SHAPE(4, 3)), "ViewBackward0"},
        {torch_view(W, SHAPE(-1)), "ViewBackward0"},
        {torch_reshape(W, SHAPE(4, 3)), "ReshapeAliasBackward0"},
        {torch_reshape(torch_T(W), SHAPE(12)), "UnsafeViewBackward0"},
        {torch_unsqueeze(W, 0), "UnsqueezeBackward0"},
        {torch_contiguous(torch_T(W)), "CloneBackward0"},
        {torch_clone(W), "CloneBackward0"},
        {torch_cross_entropy(W, torch_tensor_long((const int64_t[]){0, 1, 3}, SHAPE(3)), -100), "NllLossBackward0"},
        {torch_nll_loss(torch_log_softmax(W, -1), torch_tensor_long((const int64_t[]){0, 1, 3}, SHAPE(3)), -100), "NllLossBackward0"},
        {torch_relu(W), "ReluBackward0"},
        {torch_tanh(W), "TanhBackward0"},
        {torch_gelu(W), "GeluBackward0"},
        {torch_exp(W), "ExpBackward0"},
        {torch_log(W), "LogBackward0"},
        {torch_sqrt(W), "SqrtBackward0"},
        {torch_pow(W, 2), "PowBackward0"},
        {nn_LayerNorm_forward(ln, W), "NativeLayerNormBackward0"},
        {torch_dropout(W, 0.5, true), "MulBackward0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_msg(torch_grad_fn_name(cases[i].t) && strcmp(torch_grad_fn_name(cases[i].t), cases[i].name) == 0,
                      "case %zu: got %s, want %s", i, torch_grad_fn_name(cases[i].t), cases[i].name);
    ck_assert_ptr_null(torch_grad_fn_name(torch_detach(W)));
    nn_free(&lin->module);
    nn_free(&lin_nb->module);
    nn_free(&ln->module);
    nn_free(&emb->module);
}
END_TEST

/* Backwards write into a gradient only when nothing else reads it. */
START_TEST(test_gradients_written_in_place) {
    /* add hands the same gradient to both divisions: neither may overwrite it */
    Tensor *x = torch_requires_grad_(T(1.0f, 2.0f), true);
    Tensor *y = torch_mul_scalar(torch_add(torch_div_scalar(x, 2.0), torch_div_scalar(x, 4.0)), 3.0);
    torch_backward(torch_sum(y), NULL);
    assert_repr(x->grad, "tensor([2.2500, 2.2500])");
    /* the caller's gradient is read, never written */
    Tensor *g = T(1.0f, 2.0f);
    Tensor *u = torch_requires_grad_(T(1.0f, 2.0f), true);
    torch_backward(torch_masked_fill(torch_div_scalar(u, 2.0), torch_to_bool(T(0.0f, 1.0f)), 0.0), g);
    assert_repr(g, "tensor([1., 2.])");
    assert_repr(u->grad, "tensor([0.5000, 0.0000])");
    /* a retained gradient is the one that arrived, whatever the backward did with it after */
    Tensor *v = torch_requires_grad_(T(1.0f, 2.0f), true);
    Tensor *t = torch_div_scalar(torch_mul_scalar(v, 3.0), 2.0);
    torch_retain_grad(t);
    torch_backward(torch_sum(torch_mul(t, T(4.0f, 8.0f))), NULL);
    assert_repr(t->grad, "tensor([4., 8.])");
    assert_repr(v->grad, "tensor([ 6., 12.])");
    /* an owned gradient handed on as a transposed view (softmax's, through transpose), then a
     * second gradient added to it: the same as through a contiguous copy */
    float got[6], want[6];
    for (int route = 0; route < 2; route++) {
        Tensor *l = torch_requires_grad_(torch_tensor((const float[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3)), true);
        Tensor *m = torch_mul_scalar(l, 1.0), *mt = torch_transpose(m, 0, 1);
        if (route) mt = torch_contiguous(mt);
        Tensor *w1 = torch_tensor((const float[]){1, 10, 100, 1000, 10000, 100000}, SHAPE(3, 2));
        Tensor *w2 = torch_tensor((const float[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3));
        Tensor *p1 = torch_sum(torch_mul(torch_softmax(mt, -1), w1)), *p2 = torch_sum(torch_mul(m, w2));
        torch_backward(torch_add(p2, p1), NULL);
        memcpy(route ? want : got, ac_data_float(l->grad), sizeof got);
    }
    for (int i = 0; i < 6; i++) ck_assert_msg(got[i] == want[i], "element %d: %g, want %g", i, got[i], want[i]);
}
END_TEST

START_TEST(test_matmul_grad_over_empty_batch) {
    /* an operand broadcast across a batch dim of size 0 gets zeros: it was left
     * unwritten (fuzz_graph's second run saw other bits there) */
    ac_mark junk = ac_arena_mark();
    torch_full(SHAPE(1 << 16), NAN); /* what the arena hands out next held NaN */
    ac_arena_release(junk);
    Tensor *e = torch_requires_grad_(torch_rand(SHAPE(0, 3, 4, 4)), true), *f = torch_requires_grad_(torch_rand(SHAPE(3, 4, 4)), true);
    torch_backward(torch_sum(torch_matmul(e, f)), NULL);
    ck_assert(torch_numel(e->grad) == 0);
    for (int i = 0; i < 48; i++) ck_assert(ac_data_float(f->grad)[i] == 0.0f);
}
END_TEST

/* matmul's gradients are laid out as their operands (a head's transposed q, k,
 * v; here q's and k's with rows adjacent, v's with columns adjacent), and dC
 * is read through its strides: the values must be those of the same products
 * made one (batch, head) matrix at a time, bit for bit, in both maths (the
 * transposed layouts are computed as transposed products). */
static Tensor *head(Tensor *t, int64_t b, int64_t h) { return torch_select(torch_select(t, 0, b), 0, h); }

static void heads_grads(bool one_by_one, Tensor **leaves, float **grads) {
    Tensor *q = torch_transpose(leaves[0], 2, 3), *k = torch_transpose(torch_transpose(leaves[1], 1, 2), 2, 3);
    Tensor *v = torch_transpose(leaves[2], 1, 2);
    torch_manual_seed(7);
    Tensor *w = torch_transpose(torch_randn(SHAPE(2, 40, 3, 16)), 1, 2);
    Tensor *loss;
    if (!one_by_one) {
        Tensor *out = torch_matmul(torch_softmax(torch_matmul(q, k), -1), v); /* (2, 3, 40, 16) */
        /* dC arrives as a transposed view */
        loss = torch_sum(torch_transpose(torch_mul(torch_transpose(out, 1, 2), torch_transpose(w, 1, 2)), 1, 2));
    } else {
        loss = torch_zeros(SHAPE(1));
        for (int64_t b = 0; b < 2; b++)
            for (int64_t h = 0; h < 3; h++) {
                Tensor *out = torch_matmul(torch_softmax(torch_matmul(head(q, b, h), head(k, b, h)), -1), head(v, b, h));
                loss = torch_add(loss, torch_sum(torch_mul(out, head(w, b, h))));
            }
    }
    torch_backward(torch_sum(loss), NULL);
    for (int i = 0; i < 3; i++) {
        int64_t n = torch_numel(leaves[i]);
        grads[i] = malloc(sizeof(float) * (size_t)n);
        memcpy(grads[i], ac_data_float(leaves[i]->grad), sizeof(float) * (size_t)n);
        torch_zero_grad_(leaves[i]);
    }
}

START_TEST(test_matmul_grads_keep_the_operands_layout) {
    bool was = ac_get_exact();
    for (int exact = 0; exact < 2; exact++) {
        ac_set_exact(exact);
        torch_manual_seed(1);
        Tensor *leaves[3];
        leaves[0] = torch_requires_grad_(torch_randn(SHAPE(2, 3, 16, 40)), true); /* q's gradient: columns apart */
        for (int i = 1; i < 3; i++) leaves[i] = torch_requires_grad_(torch_randn(SHAPE(2, 40, 3, 16)), true);
        float *strided[3], *dense[3];
        heads_grads(false, leaves, strided);
        heads_grads(true, leaves, dense);
        ck_assert(strided[0][5] != 0.0f && strided[1][7] != 0.0f && strided[2][9] != 0.0f);
        for (int i = 0; i < 3; i++) {
            ck_assert_msg(memcmp(strided[i], dense[i], sizeof(float) * 2 * 40 * 3 * 16) == 0,
                          "operand %d, exact %d: the gradients differ", i, exact);
            free(strided[i]);
            free(dense[i]);
        }
    }
    ac_set_exact(was);
}
END_TEST

/* In fast math a linear layer adds dX straight into the gradient its input's
 * other users started (a model's q, k, v): the sum must be the one exact math
 * makes, to float rounding, also when the residual path borrowed it first. */
static void shared_input_grad(bool exact, float *out) {
    ac_set_exact(exact);
    torch_manual_seed(3);
    Tensor *leaf = torch_requires_grad_(torch_randn(SHAPE(2, 24, 40)), true);
    Tensor *w[3];
    for (int i = 0; i < 3; i++) w[i] = torch_requires_grad_(torch_randn(SHAPE(40, 40)), true);
    Tensor *x = torch_mul_scalar(leaf, 0.5);
    Tensor *q = torch_linear(x, w[0], NULL), *k = torch_linear(x, w[1], NULL), *v = torch_linear(x, w[2], NULL);
    Tensor *y = torch_add(x, torch_add(torch_mul(q, k), v)); /* x + (q * k + v): the residual first */
    torch_backward(torch_sum(torch_mul(y, y)), NULL);
    memcpy(out, ac_data_float(leaf->grad), sizeof(float) * 2 * 24 * 40);
}

START_TEST(test_linear_adds_into_a_shared_gradient) {
    bool was = ac_get_exact();
    float *fast = malloc(sizeof(float) * 2 * 24 * 40), *exact = malloc(sizeof(float) * 2 * 24 * 40);
    shared_input_grad(false, fast);
    shared_input_grad(true, exact);
    for (int i = 0; i < 2 * 24 * 40; i++)
        ck_assert_msg(fabsf(fast[i] - exact[i]) <= 1e-4f * (1 + fabsf(exact[i])), "element %d: %.9g, exact %.9g", i,
                      fast[i], exact[i]);
    free(fast), free(exact);
    ac_set_exact(was);
}
END_TEST

/* pow's backward rounds as PyTorch's pow_backward, grad * (exponent * self.pow(exponent - 1)): for
 * x^3 the products (g * 3) * x^2 round differently in about a third of the elements (so the test
 * can tell the orders apart), and GELU's backward goes through it. */
START_TEST(test_pow_backward_rounds_as_pytorch) {
    enum { N = 4096 };
    torch_manual_seed(3);
    Tensor *x = torch_requires_grad_(torch_randn(SHAPE(N)), true), *g = torch_randn(SHAPE(N));
    torch_backward(torch_pow(x, 3.0), g);
    const float *xv = ac_data_float(x), *gv = ac_data_float(g), *dx = ac_data_float(x->grad);
    int other_order = 0;
    for (int i = 0; i < N; i++) {
        volatile float sq = xv[i] * xv[i], three_sq = 3.0f * sq, want = gv[i] * three_sq;
        volatile float g3 = gv[i] * 3.0f, other = g3 * sq;
        ck_assert_msg(memcmp((const void *)&want, &dx[i], sizeof want) == 0, "element %d: %a, want %a", i, dx[i], want);
        other_order += other != want;
    }
    ck_assert_int_gt(other_order, N / 10);
}
END_TEST

/* cross_entropy's backward writes the logits' gradient over its own log_softmax copy when the graph
 * is not kept: the gradient must be the one nll_loss(log_softmax(x)) gives (the same bits: one-hot g
 * less exp(logp) g, exp through the same path), a second backward must still be refused, and with
 * retain_graph=True the copy must be left for the next backward (which then adds the same again). */
START_TEST(test_cross_entropy_gradient_over_its_copy) {
    for (int exact = 0; exact < 2; exact++) {
        bool was = ac_get_exact();
        ac_set_exact(exact);
        torch_manual_seed(11);
        Tensor *x = torch_requires_grad_(torch_mul_scalar(torch_randn(SHAPE(6, 37)), 3.0), true);
        Tensor *t = torch_tensor_long((const int64_t[]){3, 0, -100, 36, 5, 3}, SHAPE(6));
        Tensor *h = torch_mul_scalar(x, 1.0); /* a non-leaf, as a model's logits */
        torch_backward(torch_mul_scalar(torch_nll_loss(torch_log_softmax(h, 1), t, -100), 0.75), NULL);
        Tensor *want = torch_clone(x->grad);
        x->grad = NULL;
        Tensor *loss = torch_mul_scalar(torch_cross_entropy(torch_mul_scalar(x, 1.0), t, -100), 0.75);
        torch_backward(loss, NULL);
        ck_assert_msg(torch_equal(x->grad, want), "%s math: cross_entropy's gradient is not nll_loss(log_softmax)'s",
                      exact ? "exact" : "fast");
        EXPECT_ERROR("Trying to backward through the graph a second time", torch_backward(loss, NULL));
        x->grad = NULL;
        loss = torch_mul_scalar(torch_cross_entropy(torch_mul_scalar(x, 1.0), t, -100), 0.75);
        torch_backward_ex(loss, NULL, true);
        ck_assert(torch_equal(x->grad, want));
        torch_backward_ex(loss, NULL, true);
        ck_assert_msg(torch_equal(x->grad, torch_add(want, want)), "retain_graph: the second backward differs");
        ac_set_exact(was);
    }
}
END_TEST

Suite *suite_autograd(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase("engine");
    tcase_add_test(tc, test_accumulate_until_zeroed);
    tcase_add_test(tc, test_tensor_used_twice);
    tcase_add_test(tc, test_explicit_gradient_and_leaf_backward);
    tcase_add_test(tc, test_detach_and_no_grad);
    tcase_add_test(tc, test_second_backward_is_an_error);
    tcase_add_test(tc, test_deep_graph);
    tcase_add_test(tc, test_views_share_storage);
    tcase_add_test(tc, test_grad_fn_names);
    tcase_add_test(tc, test_gradients_written_in_place);
    tcase_add_test(tc, test_matmul_grads_keep_the_operands_layout);
    tcase_add_test(tc, test_linear_adds_into_a_shared_gradient);
    tcase_add_test(tc, test_matmul_grad_over_empty_batch);
    tcase_add_test(tc, test_pow_backward_rounds_as_pytorch);
    tcase_add_test(tc, test_cross_entropy_gradient_over_its_copy);
    suite_add_tcase(s, tc);
    return s;
}
