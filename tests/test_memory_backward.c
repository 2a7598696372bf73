/* Memory during backward(): the big gradients in flight come from reused
 * buffers and go back when the node they reach has run (grad_buffers.c); big
 * leaves get their gradient in pieces. Every gradient has the same bits as
 * with everything in the arena. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "tests.h"

#define SIDE 256 /* a 256 x 256 tensor: 256 KB, past the size that goes to the buffers */

static void assert_same_bits(const Tensor *a, const Tensor *b, const char *what) {
    ck_assert_int_eq(torch_numel(a), torch_numel(b));
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < torch_numel(a); i++)
        ck_assert_msg(memcmp(&x[i], &y[i], sizeof(float)) == 0, "%s, element %lld: %.9g, with the arena %.9g", what,
                      (long long)i, x[i], y[i]);
}

/* A graph with what moves gradients around: a tensor used twice, views handed
 * on (chunks, a transpose), an in-place write, dropout, softmax (which writes
 * into the gradient it owns), a retained intermediate; the loss is not a sum. */
static Tensor *tangled(Tensor *x, Tensor **kept) {
    Tensor *y = torch_tanh(torch_mul_scalar(x, 0.5));
    Tensor *z = torch_add(torch_mul(y, y), y);
    int nh;
    Tensor **halves = torch_chunk(z, 2, 0, &nh);
    Tensor *t = torch_matmul(halves[0], torch_transpose(halves[1], 0, 1)); /* (128, 128) */
    torch_mul_scalar_(t, 0.25);
    torch_masked_fill_(t, torch_gt_scalar(t, 3.0), -INFINITY);
    Tensor *s = torch_softmax(t, -1);
    Tensor *d = torch_dropout(s, 0.25, true);
    *kept = z;
    torch_retain_grad(z);
    return torch_add(torch_sum(torch_mul(d, d)), torch_sum(torch_mul(torch_exp(torch_mul_scalar(z, 0.1)), y)));
}

START_TEST(test_backward_gradients_as_with_the_arena) {
    Tensor *grads[2], *retained[2];
    size_t peak[2];
    for (int pass = 0; pass < 2; pass++) {
        ac_gbuf_enabled = pass == 0;
        torch_manual_seed(7);
        Tensor *x = torch_requires_grad_(torch_randn(SHAPE(SIDE, SIDE)), true);
        Tensor *z;
        Tensor *loss = tangled(x, &z);
        torch_backward(loss, NULL);
        grads[pass] = x->grad;
        retained[pass] = z->grad;
        peak[pass] = ac_gbuf_peak_bytes();
    }
    ac_gbuf_enabled = true;
    assert_same_bits(grads[0], grads[1], "x.grad");
    assert_same_bits(retained[0], retained[1], "z.grad (retained)");
    ck_assert(peak[0] > 0);  /* the buffers were used */
    ck_assert(peak[1] == 0); /* and not at all with them off */
}
END_TEST

START_TEST(test_backward_holds_a_few_gradients_not_all) {
    /* 60 ops in a chain: each gradient is dead once the node below has run */
    Tensor *x = torch_requires_grad_(torch_randn(SHAPE(SIDE, SIDE)), true);
    Tensor *y = x;
    for (int i = 0; i < 30; i++) y = torch_tanh(torch_mul_scalar(y, 1.01));
    Tensor *loss = torch_sum(torch_mul(y, y));
    size_t before = ac_arena_bytes_in_use(), one = sizeof(float) * SIDE * SIDE;
    torch_backward(loss, NULL);
    size_t grown = ac_arena_bytes_in_use() - before;
    ck_assert_msg(grown < one, "the arena grew by %zu bytes during backward", grown);
    ck_assert_msg(ac_gbuf_peak_bytes() <= 4 * one, "%zu bytes of gradients at once, for tensors of %zu",
                  ac_gbuf_peak_bytes(), one);
    size_t reserved = ac_gbuf_bytes_reserved();
    for (int again = 0; again < 3; again++) { /* the same graph again: the same buffers */
        Tensor *w = x;
        for (int i = 0; i < 30; i++) w = torch_tanh(torch_mul_scalar(w, 1.01));
        torch_backward(torch_sum(torch_mul(w, w)), NULL);
        ck_assert_int_eq(ac_gbuf_bytes_reserved(), reserved);
    }
}
END_TEST

START_TEST(test_backward_after_an_error_mid_sweep) {
    /* the second backward stops at a freed node: the next one starts clean */
    Tensor *x = torch_requires_grad_(torch_randn(SHAPE(SIDE, SIDE)), true);
    Tensor *y = torch_exp(torch_mul_scalar(x, 0.1));
    Tensor *a = torch_sum(torch_mul(y, y)), *b = torch_sum(torch_mul(y, x));
    torch_backward(a, NULL);
    EXPECT_ERROR("Trying to backward through the graph a second time", torch_backward(b, NULL));
    torch_zero_grad_(x);
    Tensor *y2 = torch_exp(torch_mul_scalar(x, 0.1));
    torch_backward(torch_sum(torch_mul(y2, y2)), NULL);
    Tensor *want = torch_mul_scalar(torch_mul(y2, y2), 0.2); /* d/dx sum(e^(0.2x)) */
    const float *g = x->grad->data, *w = want->data;
    for (int64_t i = 0; i < SIDE * SIDE; i++) ck_assert_float_eq_tol(g[i], w[i], 1e-6f * (1 + fabsf(w[i])));
}
END_TEST

/* A leaf of 4M floats and more (the GPT's head and token embedding) gets its
 * gradient in pieces: the first backward's straight into .grad, the next ones
 * a piece at a time added to it. The same bits as through a non-leaf copy of
 * the weight (W * 1), whose gradient is made whole and then reaches W. The
 * tests lower the sizes (64K floats in 8K pieces: 16 pieces, and fast under
 * valgrind). */
static void small_pieces(bool on) {
    ac_pieces_from = on ? 65536 : (int64_t)4 << 20;
    ac_piece_floats = on ? 8192 : (int64_t)1 << 20;
}

static void big_leaf_grads(bool embedding, bool leaf, Tensor **out) {
    torch_manual_seed(3);
    int64_t rows = embedding ? 4096 : 1024, cols = embedding ? 32 : 128;
    Tensor *W = torch_requires_grad_(ac_persist(torch_randn(SHAPE(rows, cols))), true);
    for (int step = 0; step < 2; step++) {
        Tensor *w = leaf ? W : torch_mul_scalar(W, 1.0);
        Tensor *y;
        if (embedding) {
            Tensor *idx = torch_tensor_long((const int64_t[]){5, 3000, 5, 4095, 0, 1234, 5, 0}, SHAPE(2, 4));
            y = torch_embedding(w, idx, -1);
        } else {
            y = torch_linear(torch_randn(SHAPE(3, cols)), w, NULL);
        }
        torch_backward(torch_sum(torch_mul(torch_tanh(y), y)), NULL);
        if (step == 0 && leaf) /* no dW the size of W beside it */
            ck_assert_msg(ac_gbuf_peak_bytes() < sizeof(float) * (size_t)(rows * cols) / 2, "%zu bytes in flight",
                          ac_gbuf_peak_bytes());
    }
    *out = ac_persist(W->grad);
    ac_free(W);
}

START_TEST(test_big_leaf_gradients_in_pieces) {
    small_pieces(true);
    for (int embedding = 0; embedding < 2; embedding++) {
        Tensor *leaf, *copy;
        big_leaf_grads(embedding, true, &leaf);
        big_leaf_grads(embedding, false, &copy);
        assert_same_bits(leaf, copy, embedding ? "embedding weight .grad" : "linear weight .grad");
        ac_free(leaf);
        ac_free(copy);
    }
    small_pieces(false);
}
END_TEST

START_TEST(test_big_leaf_gradient_that_reads_itself) {
    /* linear(W.grad, W): dW reads the .grad it adds to; pieces would change it before all of
     * it was read, so it is made whole first (as PyTorch's MmBackward then AccumulateGrad) */
    small_pieces(true);
    Tensor *grads[2];
    for (int leaf = 0; leaf < 2; leaf++) {
        torch_manual_seed(9);
        Tensor *W = torch_requires_grad_(ac_persist(torch_randn(SHAPE(512, 256))), true);
        for (int pass = 0; pass < 2; pass++) {
            Tensor *w = leaf ? W : torch_mul_scalar(W, 1.0);
            Tensor *x = pass ? W->grad : torch_randn(SHAPE(512, 256));
            torch_backward(torch_sum(torch_mul(torch_linear(x, w, NULL), torch_randn(SHAPE(512, 512)))), NULL);
        }
        grads[leaf] = ac_persist(W->grad);
        ac_free(W);
    }
    assert_same_bits(grads[1], grads[0], "linear(W.grad, W)");
    ac_free(grads[0]);
    ac_free(grads[1]);
    small_pieces(false);
}
END_TEST

START_TEST(test_big_leaf_untouched_rows_get_plus_zero) {
    /* the whole zero tensor added to .grad turns a -0 into +0 in rows no index reaches: so do the pieces */
    small_pieces(true);
    Tensor *W = torch_requires_grad_(ac_persist(torch_zeros(SHAPE(4096, 32))), true);
    torch_backward(torch_sum(torch_embedding(W, torch_tensor_long((const int64_t[]){1}, SHAPE(1)), -1)), NULL);
    float *g = W->grad->data;
    g[5 * 32] = -0.0f;
    torch_backward(torch_sum(torch_embedding(W, torch_tensor_long((const int64_t[]){1}, SHAPE(1)), -1)), NULL);
    ck_assert(!signbit(g[5 * 32]));
    ck_assert(g[32] == 2.0f && g[0] == 0.0f);
    ac_free(W);
    small_pieces(false);
}
END_TEST

START_TEST(test_in_place_writes_without_a_copy) {
    /* x.mul_(s) and x.masked_fill_(m, v) on a whole contiguous tensor write into it: the values,
     * version, grad_fn and gradients of the out-of-place ops, and no second tensor of x's size */
    for (int inplace = 0; inplace < 2; inplace++) {
        torch_manual_seed(5);
        Tensor *a = torch_requires_grad_(torch_randn(SHAPE(4, 64, 64)), true);
        Tensor *m = torch_to_bool(torch_triu(torch_ones(SHAPE(64, 64)), 1));
        Tensor *t = torch_mul(a, a), *r; /* no backward reads its output */
        if (inplace) {
            int64_t v = torch_version(t);
            size_t before = ac_arena_bytes_in_use();
            torch_masked_fill_(torch_mul_scalar_(t, 0.5), m, -INFINITY);
            ck_assert_msg(ac_arena_bytes_in_use() - before < sizeof(float) * 4 * 64 * 64, "a copy was made");
            ck_assert_int_eq(torch_version(t), v + 2);
            ck_assert_str_eq(torch_grad_fn_name(t), "MaskedFillBackward0");
            r = t;
        } else {
            r = torch_masked_fill(torch_mul_scalar(t, 0.5), m, -INFINITY);
        }
        Tensor *s = torch_softmax(r, -1);
        torch_backward(torch_sum(torch_mul(s, torch_arange_float(0, 64, 1))), NULL);
        static Tensor *want_val, *want_grad;
        if (!inplace) {
            want_val = s, want_grad = a->grad;
        } else {
            assert_same_bits(s, want_val, "softmax of the written tensor");
            assert_same_bits(a->grad, want_grad, "a.grad");
        }
    }
    /* a saved tensor written in place is still refused at backward, in PyTorch's words */
    Tensor *b = torch_requires_grad_(torch_ones(SHAPE(2, 3)), true);
    Tensor *e = torch_exp(b);
    Tensor *l = torch_sum(e);
    torch_mul_scalar_(e, 2.0);
    EXPECT_ERROR("has been modified by an inplace operation", torch_backward(l, NULL));
}
END_TEST

START_TEST(test_dropout_keeps_a_byte_per_element) {
    /* out = x * noise, noise 0 or 1 / (1 - p): the gradient is g * noise, from a byte per element */
    torch_manual_seed(11);
    Tensor *x = torch_requires_grad_(torch_randn(SHAPE(SIDE, SIDE)), true);
    size_t before = ac_arena_bytes_in_use();
    Tensor *d = torch_dropout(x, 0.3, true);
    size_t used = ac_arena_bytes_in_use() - before, floats = sizeof(float) * SIDE * SIDE;
    ck_assert_msg(used < floats + floats / 2, "dropout kept %zu bytes for %zu of output", used, floats);
    ck_assert_str_eq(torch_grad_fn_name(d), "MulBackward0");
    Tensor *g = torch_randn(SHAPE(SIDE, SIDE));
    torch_backward(d, g);
    const float *xd = x->data, *dd = d->data, *gd = g->data, *gx = x->grad->data;
    float scale = 1.0f / 0.7f;
    int64_t dropped = 0;
    for (int64_t i = 0; i < SIDE * SIDE; i++) {
        bool kept = dd[i] != 0.0f || xd[i] == 0.0f;
        dropped += !kept;
        ck_assert(dd[i] == (kept ? xd[i] * scale : 0.0f));
        ck_assert(gx[i] == (kept ? gd[i] * scale : 0.0f));
    }
    ck_assert(dropped > SIDE * SIDE / 4 && dropped < SIDE * SIDE * 35 / 100);
}
END_TEST

Suite *suite_memory_backward(void) {
    Suite *s = suite_create("memory in backward");
    TCase *tc = tcase("gradient buffers");
    tcase_add_test(tc, test_backward_gradients_as_with_the_arena);
    tcase_add_test(tc, test_backward_holds_a_few_gradients_not_all);
    tcase_add_test(tc, test_backward_after_an_error_mid_sweep);
    tcase_add_test(tc, test_big_leaf_gradients_in_pieces);
    tcase_add_test(tc, test_big_leaf_gradient_that_reads_itself);
    tcase_add_test(tc, test_big_leaf_untouched_rows_get_plus_zero);
    tcase_add_test(tc, test_in_place_writes_without_a_copy);
    tcase_add_test(tc, test_dropout_keeps_a_byte_per_element);
    suite_add_tcase(s, tc);
    return s;
}
