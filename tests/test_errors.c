/* Bad input gets a clear error naming the op and the values, in PyTorch's
 * words where it has them; never a crash, never garbage. */
#include <math.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"

#define T(...) torch_tensor((const float[]){__VA_ARGS__}, SHAPE((int64_t)(sizeof((float[]){__VA_ARGS__}) / sizeof(float))))

START_TEST(test_shape_errors) {
    EXPECT_ERROR("matmul: mat1 and mat2 shapes cannot be multiplied (6x3 and 2x4)",
                 torch_matmul(torch_ones(SHAPE(6, 3)), torch_ones(SHAPE(2, 4))));
    EXPECT_ERROR("mat1 and mat2 shapes cannot be multiplied (1x3 and 2x4)",
                 torch_matmul(torch_ones(SHAPE(3)), torch_ones(SHAPE(2, 4))));
    EXPECT_ERROR("size mismatch, got 6, 6x3,2", torch_matmul(torch_ones(SHAPE(6, 3)), torch_ones(SHAPE(2))));
    EXPECT_ERROR("mat1 and mat2 shapes cannot be multiplied (10x3 and 4x2)",
                 torch_matmul(torch_ones(SHAPE(2, 5, 3)), torch_ones(SHAPE(4, 2))));
    EXPECT_ERROR("both arguments to matmul need to be at least 1D, but they are 0D and 2D",
                 torch_matmul(torch_scalar_tensor(1), torch_ones(SHAPE(2, 2))));
    EXPECT_ERROR("The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0",
                 torch_matmul(torch_ones(SHAPE(2, 3, 4)), torch_ones(SHAPE(3, 4, 5))));
    EXPECT_ERROR("dot: inconsistent tensor size, expected tensor [3] and src [4]",
                 torch_dot(torch_ones(SHAPE(3)), torch_ones(SHAPE(4))));
    EXPECT_ERROR("dot: 1D tensors expected, but got 2D and 1D tensors", torch_dot(torch_ones(SHAPE(1, 3)), torch_ones(SHAPE(3))));
    EXPECT_ERROR("add: The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1",
                 torch_add(torch_ones(SHAPE(2, 3)), torch_ones(SHAPE(2))));
    EXPECT_ERROR("view: shape '[5]' is invalid for input of size 6", torch_view(torch_ones(SHAPE(2, 3)), SHAPE(5)));
    EXPECT_ERROR("only one dimension can be inferred", torch_view(torch_ones(SHAPE(2, 3)), SHAPE(-1, -1)));
    EXPECT_ERROR("reshape: shape '[4, -1]' is invalid for input of size 6", torch_reshape(torch_ones(SHAPE(2, 3)), SHAPE(4, -1)));
    EXPECT_ERROR("cat: Sizes of tensors must match except in dimension 0. Expected size 3 but got size 2 for tensor number 1",
                 torch_cat(TENSORS(torch_ones(SHAPE(1, 3)), torch_ones(SHAPE(1, 2))), 0));
    EXPECT_ERROR("stack expects each tensor to be equal size", torch_stack(TENSORS(torch_ones(SHAPE(2)), torch_ones(SHAPE(3))), 0));
    Tensor *t8 = torch_ones(SHAPE(1, 1, 1, 1, 1, 1, 1, 2));
    EXPECT_ERROR("stack: the result would have 9 dimensions; attention.c has at most 8", torch_stack(TENSORS(t8, t8), 0));
    EXPECT_ERROR("unsqueeze: tensors have at most 8 dimensions", torch_unsqueeze(t8, 0));
    EXPECT_ERROR("zeros: tensors have at most 8 dimensions, got 9", torch_zeros(SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1)));
    EXPECT_ERROR("tril: Dimension out of range (expected to be in range of [-1, 0], but got -2)", torch_tril(torch_ones(SHAPE(3)), 0));
    EXPECT_ERROR("linear: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)",
                 torch_linear(torch_ones(SHAPE(4, 3)), torch_ones(SHAPE(2, 5)), NULL));
    EXPECT_ERROR("layer_norm: Given normalized_shape=[4], expected input with shape [*, 4]",
                 torch_layer_norm(torch_ones(SHAPE(2, 3)), SHAPE(4), NULL, NULL, 1e-5));
    EXPECT_ERROR("masked_fill: The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0", torch_masked_fill(torch_ones(SHAPE(2, 3)),
                 torch_to_bool(torch_ones(SHAPE(3, 3))), 0.0));
}
END_TEST

START_TEST(test_dim_and_index_errors) {
    EXPECT_ERROR("softmax: Dimension out of range (expected to be in range of [-2, 1], but got 2)",
                 torch_softmax(torch_ones(SHAPE(2, 3)), 2));
    EXPECT_ERROR("Dimension out of range (expected to be in range of [-2, 1], but got -3)",
                 torch_transpose(torch_ones(SHAPE(2, 3)), -3, 0));
    EXPECT_ERROR("sum: dim 1 appears multiple times", torch_sum_dim(torch_ones(SHAPE(2, 3)), SHAPE(1, -1), false));
    EXPECT_ERROR("select(): index 6 out of range for tensor of size [6, 3] at dimension 0",
                 torch_select(torch_ones(SHAPE(6, 3)), 0, 6));
    EXPECT_ERROR("embedding: index out of range in self (index 5, valid range [0, 5))",
                 torch_embedding(torch_ones(SHAPE(5, 2)), torch_tensor_long((const int64_t[]){0, 5}, SHAPE(2)), -1));
    EXPECT_ERROR("index_select: index out of range in self (index -1",
                 torch_index_select(torch_ones(SHAPE(5, 2)), 0, torch_tensor_long((const int64_t[]){-1}, SHAPE(1))));
    EXPECT_ERROR("index: index 3 is out of bounds for dimension 0 with size 3",
                 torch_index(torch_ones(SHAPE(3, 2)), torch_tensor_long((const int64_t[]){0, 3}, SHAPE(2))));
    EXPECT_ERROR("index: index -4 is out of bounds for dimension 0 with size 3",
                 torch_index(torch_ones(SHAPE(3, 2)), torch_tensor_long((const int64_t[]){-4}, SHAPE(1))));
    EXPECT_ERROR("nll_loss: Target 5 is out of bounds", torch_nll_loss(torch_ones(SHAPE(2, 5)),
                 torch_tensor_long((const int64_t[]){1, 5}, SHAPE(2)), -100));
    EXPECT_ERROR("cross_entropy: Target 7 is out of bounds", torch_cross_entropy(torch_ones(SHAPE(2, 5)),
                 torch_tensor_long((const int64_t[]){1, 7}, SHAPE(2)), -100));
    EXPECT_ERROR("Expected input batch_size (2) to match target batch_size (3)",
                 torch_cross_entropy(torch_ones(SHAPE(2, 5)), torch_tensor_long((const int64_t[]){1, 1, 1}, SHAPE(3)), -100));
    EXPECT_ERROR("get: index 2 is out of bounds for dimension 0 with size 2", ac_get(torch_ones(SHAPE(2)), SHAPE(2)));
    EXPECT_ERROR("item: only one element tensors can be converted to Python scalars", torch_item(torch_ones(SHAPE(2))));
    EXPECT_ERROR("randint: random_ expects 'from' to be less than 'to', but got from=3 >= to=3", torch_randint(3, 3, SHAPE(2)));
    EXPECT_ERROR("multinomial: probability tensor contains either `inf`, `nan` or element < 0",
                 torch_multinomial(T(0.5f, -0.1f), 1, false));
}
END_TEST

START_TEST(test_dtype_and_autograd_errors) {
    Tensor *ids = torch_tensor_long((const int64_t[]){1, 2}, SHAPE(2));
    EXPECT_ERROR("exp: expected a tensor of dtype Float (float32), but got Long", torch_exp(ids));
    EXPECT_ERROR("embedding: Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got torch.FloatTensor instead",
                 torch_embedding(torch_ones(SHAPE(5, 2)), T(1.0f), -1));
    EXPECT_ERROR("masked_fill_ only supports boolean masks, but got mask with dtype Float",
                 torch_masked_fill(torch_ones(SHAPE(2)), torch_ones(SHAPE(2)), 0.0));
    EXPECT_ERROR("only Tensors of floating point dtype can require gradients", torch_requires_grad_(ids, true));
    EXPECT_ERROR("grad can be implicitly created only for scalar outputs",
                 torch_backward(torch_mul_scalar(torch_requires_grad_(torch_ones(SHAPE(2)), true), 2), NULL));
    EXPECT_ERROR("element 0 of tensors does not require grad and does not have a grad_fn", torch_backward(torch_ones(SHAPE(1)), NULL));
    Tensor *x = torch_requires_grad_(torch_ones(SHAPE(2)), true);
    EXPECT_ERROR("Mismatch in shape: grad_output[0] has a shape of torch.Size([3])",
                 torch_backward(torch_mul_scalar(x, 2), torch_ones(SHAPE(3))));
    EXPECT_ERROR("you can only change requires_grad flags of leaf variables",
                 torch_requires_grad_(torch_mul_scalar(x, 2), false));
    EXPECT_ERROR("uniform_: a leaf Variable that requires grad is being used in an in-place operation.",
                 torch_uniform_(x, 0, 1));
    EXPECT_ERROR("dropout: dropout probability has to be between 0 and 1, but got 1.5", torch_dropout(x, 1.5, true));
}
END_TEST

START_TEST(test_module_errors) {
    EXPECT_ERROR("MultiHeadAttention: d_out must be divisible by num_heads (d_out=6, num_heads=4)",
                 nn_MultiHeadAttention_new(8, 6, 10, 4));
    torch_manual_seed(1);
    nn_CausalAttention *ca = nn_CausalAttention_new(3, 2, 2, 6, 0.0);
    EXPECT_ERROR("CausalAttention: the input has 8 tokens, but the causal mask was built for context_length=6",
                 nn_CausalAttention_forward(ca, torch_ones(SHAPE(8, 3))));
    EXPECT_ERROR("CausalAttention: expected an input whose last dimension is d_in=3, got shape [4, 5]",
                 nn_CausalAttention_forward(ca, torch_ones(SHAPE(4, 5))));
    nn_free(&ca->module);
    nn_MultiHeadAttention *mha = nn_MultiHeadAttention_new(4, 4, 5, 2);
    EXPECT_ERROR("MultiHeadAttention: the input has 6 tokens, but the causal mask was built for context_length=5",
                 nn_MultiHeadAttention_forward(mha, torch_ones(SHAPE(1, 6, 4))));
    nn_free(&mha->module);
    EXPECT_ERROR("Embedding: Padding_idx must be within num_embeddings", nn_Embedding_new_padded(4, 2, 4));
    EXPECT_ERROR("Adam: Invalid beta parameter at index 1: 1", optim_Adam((nn_TensorList){0}, 1e-3, 0.9, 1.0, 1e-8, 0, false));
}
END_TEST

/* With no handler installed the message is printed and the program aborts.
 * The child's stderr is read here, so that the suite's log shows no stray
 * "RuntimeError" line and the message itself is checked. */
static void multiply_mismatched(void) { torch_matmul(torch_ones(SHAPE(6, 3)), torch_ones(SHAPE(2, 4))); }
static void select_out_of_range(void) { torch_select(torch_ones(SHAPE(2)), 0, 5); }
static void batch_mismatch(void) {
    torch_cross_entropy(torch_ones(SHAPE(2, 3)), torch_tensor_long((const int64_t[]){0}, SHAPE(1)), -100);
}
static void null_input(void) { torch_exp(NULL); }
static void returning_handler(ac_error_kind kind, const char *msg, void *user) { (void)kind, (void)msg, (void)user; }
static void handler_returns(void) {
    ac_set_error_handler(returning_handler, NULL); /* a handler must not return: if it does, the library aborts */
    torch_softmax(torch_ones(SHAPE(2)), 5);
}

START_TEST(test_default_handler_aborts) {
    char buf[512];
    int st = child_stderr(multiply_mismatched, buf, sizeof buf);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the default handler must abort");
    ck_assert_str_eq(buf, "RuntimeError: matmul: mat1 and mat2 shapes cannot be multiplied (6x3 and 2x4)\n");
    /* the kind is printed as Python names it */
    child_stderr(select_out_of_range, buf, sizeof buf);
    ck_assert_str_eq(buf, "IndexError: select: select(): index 5 out of range for tensor of size [2] at dimension 0\n");
    child_stderr(batch_mismatch, buf, sizeof buf);
    ck_assert_str_eq(buf, "ValueError: cross_entropy: Expected input batch_size (2) to match target batch_size (1).\n");
    st = child_stderr(handler_returns, buf, sizeof buf);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    ck_assert_str_eq(buf, "IndexError: softmax: Dimension out of range (expected to be in range of [-1, 0], but got 5)\n");
    child_stderr(null_input, buf, sizeof buf);
    ck_assert_str_eq(buf, "TypeError: exp: expected a Tensor, got NULL\n");
    EXPECT_ERROR("exp: expected a Tensor, got NULL", torch_exp(NULL));
    ck_assert_int_eq(test_kind, AC_TYPE_ERROR);
    ck_assert_int_eq(ac_last_error_kind(), AC_TYPE_ERROR);
    ck_assert_str_eq(ac_error_kind_name(AC_INDEX_ERROR), "IndexError");
    char b[32];
    ck_assert_str_eq(ac_pyfloat(1.0, b), "1.0");
    ck_assert_str_eq(ac_pyfloat(0.1, b), "0.1");
    ck_assert_str_eq(ac_pyfloat(-0.5, b), "-0.5");
    ck_assert_str_eq(ac_pyfloat(1e-8, b), "1e-08");
    ck_assert_str_eq(ac_pyfloat(NAN, b), "nan");
    /* each against Python's repr() */
    ck_assert_str_eq(ac_pyfloat(100000.0, b), "100000.0");
    ck_assert_str_eq(ac_pyfloat(1e16, b), "1e+16");
    ck_assert_str_eq(ac_pyfloat(0.0001, b), "0.0001");
    ck_assert_str_eq(ac_pyfloat(0.00001, b), "1e-05");
    ck_assert_str_eq(ac_pyfloat(123456789.0, b), "123456789.0");
    ck_assert_str_eq(ac_pyfloat(0.1 + 0.2, b), "0.30000000000000004");
}
END_TEST

Suite *suite_errors(void) {
    Suite *s = suite_create("errors");
    TCase *tc = tcase("messages");
    tcase_add_test(tc, test_shape_errors);
    tcase_add_test(tc, test_dim_and_index_errors);
    tcase_add_test(tc, test_dtype_and_autograd_errors);
    tcase_add_test(tc, test_module_errors);
    tcase_add_test(tc, test_default_handler_aborts);
    suite_add_tcase(s, tc);
    return s;
}
