/* The article's step-by-step computations with the core alone, compared with
 * ../shared/pytorch/article_expected.txt exactly as printed; and the whole
 * ./build/article example against that file. */
#include <math.h>
#include <stdlib.h>

#include "tests.h"

/* The block of article_expected.txt that starts with `first` and spans n lines. */
static char *expected_block(const char *text, const char *first, int n) {
    const char *p = strstr(text, first);
    ck_assert_msg(p != NULL, "article_expected.txt has no \"%s\"", first);
    const char *e = p;
    for (int i = 0; i < n; i++) {
        e = strchr(e, '\n');
        ck_assert(e != NULL);
        if (i + 1 < n) e++;
    }
    char *s = ac_arena_alloc((size_t)(e - p) + 1);
    memcpy(s, p, (size_t)(e - p));
    s[e - p] = 0;
    return s;
}

/* embedded_sentence, as the article computes it (nn.Embedding's init drawn by hand). */
static Tensor *embedded_sentence(void) {
    Tensor *sentence_int = torch_tensor_long((const int64_t[]){0, 4, 5, 2, 1, 3}, SHAPE(6));
    torch_manual_seed(123);
    Tensor *weight = torch_normal_(torch_empty(SHAPE(50000, 3), AC_FLOAT32), 0.0, 1.0); /* Embedding(50000, 3) */
    return torch_detach(torch_embedding(weight, sentence_int, -1));
}

START_TEST(test_core_step_by_step) {
    char *text = read_text(shared_path("pytorch/article_expected.txt"));
    Tensor *x = embedded_sentence();
    ck_assert_str_eq(torch_repr(x), expected_block(text, "tensor([[ 0.3374, -0.1778, -0.3035]", 6));
    torch_manual_seed(123);
    Tensor *W_query = torch_requires_grad_(torch_rand(SHAPE(3, 2)), true);
    Tensor *W_key = torch_requires_grad_(torch_rand(SHAPE(3, 2)), true);
    Tensor *W_value = torch_requires_grad_(torch_rand(SHAPE(3, 4)), true);
    Tensor *query_2 = torch_matmul(torch_select(x, 0, 1), W_query);
    Tensor *keys = torch_matmul(x, W_key), *values = torch_matmul(x, W_value);
    ck_assert_str_eq(torch_repr(torch_dot(query_2, torch_select(keys, 0, 4))),
                     expected_block(text, "tensor(1.2903", 1));                          /* omega_24 */
    Tensor *omega_2 = torch_matmul(query_2, torch_T(keys));
    ck_assert_str_eq(torch_repr(omega_2), expected_block(text, "tensor([-0.6004,", 2)); /* omega_2 */
    Tensor *w2 = torch_softmax(torch_div_scalar(omega_2, 1.4142135623730951), 0);
    ck_assert_str_eq(torch_repr(w2), expected_block(text, "tensor([0.0386,", 2));       /* attention_weights_2 */
    Tensor *z2 = torch_matmul(w2, values);
    ck_assert_str_eq(torch_repr(z2), expected_block(text, "tensor([0.5313,", 1));       /* context_vector_2 */
    ck_assert_str_eq(torch_size_str(z2), "torch.Size([4])");
    /* the causal section, both masking methods */
    Tensor *scores = torch_matmul(torch_matmul(x, W_query), torch_T(keys));
    ck_assert_str_eq(torch_repr(scores), expected_block(text, "tensor([[ 0.0613, -0.3491", 7));
    Tensor *weights = torch_softmax(torch_div_scalar(scores, 1.4142135623730951), 1);
    Tensor *simple = torch_mul(weights, torch_tril(torch_ones(SHAPE(6, 6)), 0));
    Tensor *simple_norm = torch_div(simple, torch_sum_dim(simple, SHAPE(1), true));
    const char *norm_text = expected_block(text, "tensor([[1.0000, 0.0000", 7);
    ck_assert_str_eq(torch_repr(simple_norm), norm_text);
    Tensor *masked = torch_masked_fill(scores, torch_to_bool(torch_triu(torch_ones(SHAPE(6, 6)), 1)), -INFINITY);
    ck_assert_str_eq(torch_repr(masked), expected_block(text, "tensor([[ 0.0613,    -inf", 7));
    Tensor *causal = torch_softmax(torch_div_scalar(masked, 1.4142135623730951), 1);
    /* both methods print the same numbers (only the grad_fn differs) */
    const char *c_text = torch_repr(causal);
    ck_assert(strncmp(c_text, norm_text, strlen(norm_text) - strlen("grad_fn=<DivBackward0>)")) == 0);
    ck_assert(strstr(c_text, "grad_fn=<SoftmaxBackward0>)") != NULL);
    /* and agree to float32 rounding */
    const float *a = ac_data_float(causal), *b = ac_data_float(simple_norm);
    for (int i = 0; i < 36; i++) ck_assert_msg(fabsf(a[i] - b[i]) < 1e-6f, "masking methods differ at %d", i);
    free(text);
}
END_TEST

START_TEST(test_article_example_output) {
    const char *bin = getenv("AC_BUILD") ? getenv("AC_BUILD") : "build";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/article", bin);
    char *out;
    ck_assert_int_eq(run_command(cmd, &out), 0);
    char *want = read_text(shared_path("pytorch/article_expected.txt"));
    ck_assert_msg(strcmp(out, want) == 0, "./%s differs from article_expected.txt", cmd);
    free(out);
    free(want);
}
END_TEST

Suite *suite_article(void) {
    Suite *s = suite_create("article");
    TCase *tc = tcase("article");
    tcase_add_test(tc, test_core_step_by_step);
    tcase_add_test(tc, test_article_example_output);
    suite_add_tcase(s, tc);
    return s;
}
