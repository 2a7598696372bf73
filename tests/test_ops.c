/* Forward values of the ops (known results; PyTorch's semantics where they
 * are subtle: all -inf rows, broadcasting, negative dims, Python slices). */
#include <math.h>

#include "tests.h"

#define T(...) torch_tensor((const float[]){__VA_ARGS__}, SHAPE((int64_t)(sizeof((float[]){__VA_ARGS__}) / sizeof(float))))

START_TEST(test_broadcasting) {
    Tensor *a = torch_reshape(torch_arange_float(0, 6, 1), SHAPE(2, 3));
    assert_repr(torch_add(a, T(10.0f, 20.0f, 30.0f)), "tensor([[10., 21., 32.],\n        [13., 24., 35.]])");
    assert_repr(torch_mul(a, torch_tensor((const float[]){2.0f, -1.0f}, SHAPE(2, 1))),
                "tensor([[ 0.,  2.,  4.],\n        [-3., -4., -5.]])");
    Tensor *b = torch_add(torch_ones(SHAPE(2, 1, 3)), torch_ones(SHAPE(4, 1)));
    assert_repr(torch_tensor((const float[]){0}, SHAPE(1)), "tensor([0.])");
    ck_assert_str_eq(torch_size_str(b), "torch.Size([2, 4, 3])");
    assert_repr(torch_div_scalar(T(1.0f, 2.0f), 4.0), "tensor([0.2500, 0.5000])");
    assert_repr(torch_sub_scalar(T(1.0f, 2.0f), 4.0), "tensor([-3., -2.])");
    assert_repr(torch_pow(T(2.0f, 3.0f), 2.0), "tensor([4., 9.])");
    assert_repr(torch_pow(T(4.0f, 9.0f), 0.5), "tensor([2., 3.])");
}
END_TEST

START_TEST(test_softmax_edge_cases) {
    Tensor *x = torch_tensor((const float[]){-INFINITY, -INFINITY, 1.0f, 2.0f}, SHAPE(2, 2));
    assert_repr(torch_softmax(x, -1), "tensor([[   nan,    nan],\n        [0.2689, 0.7311]])"); /* as torch.softmax */
    assert_repr(torch_softmax(T(1000.0f, 1000.0f, -INFINITY), 0), "tensor([0.5000, 0.5000, 0.0000])");
    assert_repr(torch_log_softmax(T(0.0f, 0.0f), 0), "tensor([-0.6931, -0.6931])");
    /* columns (dim 0) and rows (dim -1) differ */
    Tensor *m = torch_tensor((const float[]){1, 2, 3, 4}, SHAPE(2, 2));
    assert_repr(torch_softmax(m, 0), "tensor([[0.1192, 0.1192],\n        [0.8808, 0.8808]])");
    assert_repr(torch_softmax(m, 1), "tensor([[0.2689, 0.7311],\n        [0.2689, 0.7311]])");
}
END_TEST

START_TEST(test_reductions) {
    Tensor *x = torch_reshape(torch_arange_float(0, 24, 1), SHAPE(2, 3, 4));
    assert_repr(torch_sum(x), "tensor(276.)");
    assert_repr(torch_sum_dim(x, SHAPE(-1), false), "tensor([[ 6., 22., 38.],\n        [54., 70., 86.]])");
    assert_repr(torch_sum_dim(x, SHAPE(0, 2), true), "tensor([[[ 60.],\n         [ 92.],\n         [124.]]])");
    assert_repr(torch_mean_dim(x, SHAPE(1), false),
                "tensor([[ 4.,  5.,  6.,  7.],\n        [16., 17., 18., 19.]])");
    assert_repr(torch_mean(x), "tensor(11.5000)");
    /* a long sum stays accurate (the cascade): 2^20 ones */
    ck_assert(torch_item(torch_sum(torch_ones(SHAPE(1 << 20)))) == 1048576.0);
    ck_assert(fabs(torch_item(torch_mean(torch_full(SHAPE(3000000), 0.1))) - 0.1) < 1e-7);
    assert_repr(torch_argmax(torch_tensor((const float[]){1, 5, 5, 0, -1, 2}, SHAPE(2, 3)), -1, false), "tensor([1, 2])");
}
END_TEST

START_TEST(test_masks_and_triangles) {
    Tensor *s = torch_ones(SHAPE(3, 3));
    assert_repr(torch_triu(s, 1), "tensor([[0., 1., 1.],\n        [0., 0., 1.],\n        [0., 0., 0.]])");
    assert_repr(torch_tril(s, -1), "tensor([[0., 0., 0.],\n        [1., 0., 0.],\n        [1., 1., 0.]])");
    assert_repr(torch_triu(torch_ones(SHAPE(2, 3)), 0), "tensor([[1., 1., 1.],\n        [0., 1., 1.]])");
    Tensor *m = torch_to_bool(torch_triu(s, 1));
    assert_repr(m, "tensor([[False,  True,  True],\n        [False, False,  True],\n        [False, False, False]])");
    /* a (3, 3) mask broadcast over a batch */
    Tensor *f = torch_masked_fill(torch_zeros(SHAPE(2, 3, 3)), m, -INFINITY);
    assert_repr(torch_select(f, 0, 1), "tensor([[0., -inf, -inf],\n        [0., 0., -inf],\n        [0., 0., 0.]])");
}
END_TEST

START_TEST(test_cat_stack_index) {
    Tensor *a = torch_reshape(torch_arange_float(0, 4, 1), SHAPE(2, 2));
    assert_repr(torch_cat(TENSORS(a, a), 0), "tensor([[0., 1.],\n        [2., 3.],\n        [0., 1.],\n        [2., 3.]])");
    assert_repr(torch_cat(TENSORS(a, torch_ones(SHAPE(2, 1))), -1), "tensor([[0., 1., 1.],\n        [2., 3., 1.]])");
    ck_assert_str_eq(torch_size_str(torch_stack(TENSORS(a, a, a), 1)), "torch.Size([2, 3, 2])");
    Tensor *idx = torch_tensor_long((const int64_t[]){1, 1, 0}, SHAPE(3));
    assert_repr(torch_index_select(a, 1, idx), "tensor([[1., 1., 0.],\n        [3., 3., 2.]])");
    assert_repr(torch_embedding(a, torch_tensor_long((const int64_t[]){1, 0, 1, 1}, SHAPE(2, 2)), -1),
                "tensor([[[2., 3.],\n         [0., 1.]],\n\n        [[2., 3.],\n         [2., 3.]]])");
    /* Python slice semantics */
    Tensor *r = torch_arange_float(0, 6, 1);
    assert_repr(torch_slice(r, 0, -2, INT64_MAX), "tensor([4., 5.])");
    assert_repr(torch_slice(r, 0, 4, 2), "tensor([])");
    assert_repr(torch_slice(r, 0, -100, 2), "tensor([0., 1.])");
    assert_repr(torch_select(torch_reshape(r, SHAPE(2, 3)), -1, -1), "tensor([2., 5.])");
}
END_TEST

START_TEST(test_matmul_forms_values) {
    Tensor *v = T(1.0f, 2.0f);
    Tensor *m = torch_tensor((const float[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3));
    assert_repr(torch_matmul(v, m), "tensor([ 9., 12., 15.])");
    assert_repr(torch_matmul(torch_T(m), v), "tensor([ 9., 12., 15.])");
    assert_repr(torch_matmul(v, v), "tensor(5.)");
    Tensor *b = torch_stack(TENSORS(m, torch_mul_scalar(m, 2)), 0);               /* (2, 2, 3) */
    Tensor *p = torch_matmul(b, torch_T(m));                                       /* (2, 2, 2) */
    assert_repr(p, "tensor([[[ 14.,  32.],\n         [ 32.,  77.]],\n\n        [[ 28.,  64.],\n         [ 64., 154.]]])");
    Tensor *q = torch_matmul(torch_unsqueeze(b, 1), torch_unsqueeze(torch_transpose(b, 1, 2), 0)); /* (2, 2, 2, 2) */
    ck_assert_str_eq(torch_size_str(q), "torch.Size([2, 2, 2, 2])");
    ck_assert(ac_get(q, SHAPE(1, 0, 1, 1)) == 154.0);
    /* a bigger product against a plain triple loop (the blocked kernel's edges) */
    torch_manual_seed(3);
    Tensor *A = torch_randn(SHAPE(37, 29)), *B = torch_randn(SHAPE(29, 53));
    Tensor *C = torch_matmul(A, B);
    const float *a = ac_data_float(A), *bb = ac_data_float(B), *c = ac_data_float(C);
    for (int i = 0; i < 37; i++)
        for (int j = 0; j < 53; j++) {
            float s = 0;
            for (int k = 0; k < 29; k++) s += a[i * 29 + k] * bb[k * 53 + j];
            ck_assert_msg(c[i * 53 + j] == s, "C[%d,%d] %.9g vs %.9g (must be the same sum, in the same order)", i, j,
                          c[i * 53 + j], s);
        }
}
END_TEST

Suite *suite_ops(void) {
    Suite *s = suite_create("ops");
    TCase *tc = tcase("forward");
    tcase_add_test(tc, test_broadcasting);
    tcase_add_test(tc, test_softmax_edge_cases);
    tcase_add_test(tc, test_reductions);
    tcase_add_test(tc, test_masks_and_triangles);
    tcase_add_test(tc, test_cat_stack_index);
    tcase_add_test(tc, test_matmul_forms_values);
    suite_add_tcase(s, tc);
    return s;
}
