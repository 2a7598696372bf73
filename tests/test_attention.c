/* The fused attention against the explicit one (q k^T / sqrt(d), masked_fill,
 * softmax, @ v): forward within rtol 1e-5 (atol 1e-6), gradients within rtol
 * 1e-4 (atol 1e-5), in both maths, causal and not, masks, lengths across the
 * tiles, views; its memory is O(L), never O(L^2); its errors. */
#include <math.h>
#include <stdlib.h>

#include "tests.h"

static void close_to(Tensor *got, Tensor *want, double rtol, double atol, const char *what) {
    const float *g = ac_data_float(torch_contiguous(torch_detach(got)));
    const float *w = ac_data_float(torch_contiguous(torch_detach(want)));
    for (int64_t i = 0, n = torch_numel(want); i < n; i++)
        ck_assert_msg(fabs((double)g[i] - w[i]) <= atol + rtol * fabs(w[i]), "%s[%lld]: fused %.9g, explicit %.9g", what,
                      (long long)i, g[i], w[i]);
}

/* q (B, H, L, D) as a view: made (B, L, H, D) and transposed, as MultiHeadAttention makes it */
static Tensor *heads(uint64_t seed, int64_t B, int64_t H, int64_t T, int64_t D) {
    torch_manual_seed(seed);
    return torch_requires_grad_(torch_randn(SHAPE(B, T, H, D)), true);
}

static void compare(int64_t B, int64_t H, int64_t L, int64_t S, int64_t D, bool causal, int mask_kind, bool exact) {
    ac_mark m = ac_arena_mark();
    ac_set_exact(exact);
    Tensor *q0 = heads(1, B, H, L, D), *k0 = heads(2, B, H, S, D), *v0 = heads(3, B, H, S, D + 1);
    Tensor *q = torch_transpose(q0, 1, 2), *k = torch_transpose(k0, 1, 2), *v = torch_transpose(v0, 1, 2);
    torch_manual_seed(4);
    Tensor *mask = mask_kind == 1 ? torch_to_bool(torch_tril(torch_ones(SHAPE(L, S)), S - L)) /* a bool mask */
                 : mask_kind == 2 ? torch_randn(SHAPE(H, 1, S))                                  /* a float one */
                                  : NULL;
    Tensor *w = torch_randn(SHAPE(B, H, L, D + 1));
    Tensor *fused = torch_scaled_dot_product_attention(q, k, v, mask, 0.0, causal, NAN);
    ck_assert_str_eq(torch_grad_fn_name(fused), "ScaledDotProductFlashAttentionForCpuBackward0");
    torch_backward(torch_sum(torch_mul(fused, w)), NULL);
    Tensor *gq = torch_clone(q0->grad), *gk = torch_clone(k0->grad), *gv = torch_clone(v0->grad);
    torch_zero_grad_(q0), torch_zero_grad_(k0), torch_zero_grad_(v0);
    Tensor *s = torch_div_scalar(torch_matmul(q, torch_transpose(k, 2, 3)), sqrt((double)D));
    if (causal) s = torch_masked_fill(s, torch_to_bool(torch_triu(torch_ones(SHAPE(L, S)), 1)), -INFINITY);
    if (mask_kind == 1) s = torch_masked_fill(s, torch_to_bool(torch_sub_scalar(torch_to_float(mask), 1)), -INFINITY);
    if (mask_kind == 2) s = torch_add(s, mask);
    Tensor *explicit = torch_matmul(torch_softmax(s, -1), v);
    torch_backward(torch_sum(torch_mul(explicit, w)), NULL);
    char what[96];
    snprintf(what, sizeof what, "B%lld H%lld L%lld S%lld D%lld%s mask %d %s", (long long)B, (long long)H, (long long)L,
             (long long)S, (long long)D, causal ? " causal" : "", mask_kind, exact ? "exact" : "fast");
    close_to(fused, explicit, 1e-5, 1e-6, what);
    close_to(gq, q0->grad, 1e-4, 1e-5, "dq");
    close_to(gk, k0->grad, 1e-4, 1e-5, "dk");
    close_to(gv, v0->grad, 1e-4, 1e-5, "dv");
    ac_arena_release(m);
}

START_TEST(test_fused_equals_explicit) {
    for (int exact = 0; exact < 2; exact++) {
        compare(2, 3, 1, 1, 4, true, 0, exact);     /* T = 1 */
        compare(2, 2, 64, 64, 8, true, 0, exact);   /* one whole tile */
        compare(1, 2, 130, 130, 16, true, 0, exact); /* not a multiple of the tile */
        compare(2, 1, 70, 70, 8, false, 0, exact);
        compare(1, 2, 5, 97, 8, false, 0, exact);   /* cross-attention: L != S */
        compare(2, 2, 40, 75, 4, false, 1, exact);  /* a bool mask (the last rows see all) */
        compare(2, 2, 40, 33, 4, false, 2, exact);  /* a float mask, broadcast over batch and rows */
    }
}
END_TEST

/* O(B*H*L) extra memory: at L = 2048 the explicit path's scores alone are 16 MiB a head. */
START_TEST(test_fused_memory_is_linear) {
    torch_manual_seed(0);
    Tensor *q = torch_requires_grad_(torch_randn(SHAPE(1, 1, 2048, 32)), true), *k = torch_requires_grad_(torch_randn(SHAPE(1, 1, 2048, 32)), true),
           *v = torch_requires_grad_(torch_randn(SHAPE(1, 1, 2048, 32)), true);
    size_t before = ac_arena_bytes_in_use();
    Tensor *y = torch_scaled_dot_product_attention(q, k, v, NULL, 0, true, NAN);
    torch_backward(torch_sum(y), NULL);
    size_t used = ac_arena_bytes_in_use() - before;
    ck_assert_msg(used < (size_t)4 << 20, "forward and backward used %zu bytes (the scores would be 16 MiB)", used);
}
END_TEST

START_TEST(test_fused_errors) {
    Tensor *q = torch_randn(SHAPE(2, 4, 8)), *k = torch_randn(SHAPE(2, 5, 8)), *v = torch_randn(SHAPE(2, 5, 3));
    ck_assert_int_eq(torch_size(torch_scaled_dot_product_attention(q, k, v, NULL, 0, false, NAN), 2), 3);
    EXPECT_ERROR("dropout_p must be 0", torch_scaled_dot_product_attention(q, k, v, NULL, 0.1, false, NAN));
    EXPECT_ERROR("query's last dim (8) and key's (7) must be equal",
                 torch_scaled_dot_product_attention(q, torch_randn(SHAPE(2, 5, 7)), v, NULL, 0, false, NAN));
    EXPECT_ERROR("key has 5 positions, value 4", torch_scaled_dot_product_attention(q, k, torch_randn(SHAPE(2, 4, 3)), NULL, 0, false, NAN));
    EXPECT_ERROR("batch dims", torch_scaled_dot_product_attention(q, torch_randn(SHAPE(3, 5, 8)), v, NULL, 0, false, NAN));
    EXPECT_ERROR("same number of dims", torch_scaled_dot_product_attention(torch_randn(SHAPE(4)), k, v, NULL, 0, false, NAN));
    EXPECT_ERROR("attn_mask of shape [3, 5] does not broadcast to [2, 4, 5]",
                 torch_scaled_dot_product_attention(q, k, v, torch_zeros(SHAPE(3, 5)), 0, false, NAN));
    EXPECT_ERROR("Explicit attn_mask should not be set when is_causal=True",
                 torch_scaled_dot_product_attention(q, k, v, torch_zeros(SHAPE(4, 5)), 0, true, NAN));
    EXPECT_ERROR("Expected attn_mask dtype to be bool or float, but got Long",
                 torch_scaled_dot_product_attention(q, k, v, torch_arange(5), 0, false, NAN));
}
END_TEST

Suite *suite_attention(void) {
    Suite *s = suite_create("fused attention");
    TCase *tc = tcase("sdpa");
    tcase_add_test(tc, test_fused_equals_explicit);
    tcase_add_test(tc, test_fused_memory_is_linear);
    tcase_add_test(tc, test_fused_errors);
    suite_add_tcase(s, tc);
    return s;
}
