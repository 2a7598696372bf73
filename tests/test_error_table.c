/* The error table: for each misuse, the C call, PyTorch 1.13's message and
 * kind for the same misuse (tests/data/error_table.txt, written by
 * tests/tools/gen_errors.py from PyTorch itself), and ours. Ours must read
 * "op: " + PyTorch's first line word for word (any detail of ours comes after
 * its sentence has ended) and carry the same kind (RuntimeError, IndexError,
 * ValueError).
 *
 * Errors with no PyTorch counterpart are tested where they live: the limits
 * of this library (at most 8 dims), the file formats (test_hostile.c,
 * test_error_paths.c), dtypes PyTorch would accept and convert (ours say
 * "expected a tensor of dtype Float"; PyTorch names an internal kernel,
 * '"softmax_lastdim_kernel_impl" not implemented for 'Long''), the module
 * asserts PyTorch raises as AssertionError (num_heads, padding_idx),
 * dropout_p > 0 in the fused attention (PyTorch 2.x's call). */
#include <math.h>
#include <stdlib.h>

#include "tests.h"

#define O(...) torch_ones(SHAPE(__VA_ARGS__))
#define L(...) torch_tensor_long((const int64_t[]){__VA_ARGS__}, SHAPE(AC_NARGS_I64(__VA_ARGS__)))
#define RG(t) torch_requires_grad_((t), true)

static Tensor *twice(void) {
    Tensor *y = torch_sum(torch_mul(RG(O(2)), RG(O(2))));
    torch_backward(y, NULL);
    torch_backward(y, NULL);
    return y;
}
static Tensor *fill_leaf_view(void) { return torch_fill_(torch_select(RG(O(2, 2)), 0, 0), 1); }
static Tensor *chunk_0d(void) { int n; return torch_chunk(torch_scalar_tensor(1), 2, 0, &n)[0]; }
static Tensor *chunk_zero(void) { int n; return torch_chunk(O(4), 0, 0, &n)[0]; }
static Tensor *split_zero(void) { int n; return torch_split(O(4), 0, 0, &n)[0]; }
static Tensor *split_sum(void) { int n; return torch_split_with_sizes(O(4), SHAPE(1, 2), 0, &n)[0]; }

typedef struct {
    const char *name, *op;
    Tensor *(*call)(void);
} Case;

/* C(name, call): the call; the E list below names the op its message starts with */
#define C(name, expr) static Tensor *name##_call(void) { return (expr); }
C(matmul_2d, torch_matmul(O(6, 3), O(2, 4)))
C(matmul_1d_2d, torch_matmul(O(3), O(2, 4)))
C(matmul_mv, torch_matmul(O(6, 3), O(2)))
C(matmul_0d, torch_matmul(torch_scalar_tensor(1), O(2, 2)))
C(matmul_batch, torch_matmul(O(2, 3, 4), O(3, 4, 5)))
C(dot_size, torch_dot(O(3), O(4)))
C(dot_dims, torch_dot(O(1, 3), O(3)))
C(add_broadcast, torch_add(O(2, 3), O(2)))
C(mul_broadcast, torch_mul(O(2, 4), O(3, 1, 3)))
C(view_size, torch_view(O(2, 3), SHAPE(5)))
C(view_infer_two, torch_view(O(2, 3), SHAPE(-1, -1)))
C(view_negative, torch_view(O(2, 3), SHAPE(-2, 3)))
C(view_stride, torch_view(torch_t(O(2, 3)), SHAPE(6)))
C(reshape_size, torch_reshape(O(2, 3), SHAPE(4, -1)))
C(cat_sizes, torch_cat(TENSORS(O(1, 3), O(1, 2)), 0))
C(cat_dims, torch_cat(TENSORS(O(1, 3), O(3)), 0))
C(cat_empty, torch_cat(0, NULL, 0))
C(cat_0d, torch_cat(TENSORS(torch_scalar_tensor(1), torch_scalar_tensor(2)), 0))
C(stack_sizes, torch_stack(TENSORS(O(2), O(3)), 0))
C(tril_1d, torch_tril(O(3), 0))
C(softmax_dim, torch_softmax(O(2, 3), 2))
C(transpose_dim, torch_transpose(O(2, 3), -3, 0))
C(sum_repeat_dim, torch_sum_dim(O(2, 3), SHAPE(1, -1), false))
C(select_index, torch_select(O(6, 3), 0, 6))
C(select_0d, torch_select(torch_scalar_tensor(1), 0, 0))
C(t_3d, torch_t(O(2, 3, 4)))
C(unsqueeze_dim, torch_unsqueeze(O(2, 3), 3))
C(embedding_index, torch_embedding(O(5, 2), L(0, 5), -1))
C(index_select_index, torch_index_select(O(5, 2), 0, L(-1)))
C(index_select_dims, torch_index_select(O(5, 2), 0, torch_tensor_long((const int64_t[]){0}, SHAPE(1, 1))))
C(index_bounds, torch_index(O(3, 2), L(3)))
C(index_0d, torch_index(torch_scalar_tensor(1), L(0)))
C(linear_shapes, torch_linear(O(4, 3), O(2, 5), NULL))
C(layer_norm_shape, torch_layer_norm(O(2, 3), SHAPE(4), NULL, NULL, 1e-5))
C(masked_fill_shape, torch_masked_fill(O(2, 3), torch_to_bool(O(3, 3)), 0))
C(cross_entropy_target, torch_cross_entropy(O(2, 3), L(0, 3), -100))
C(cross_entropy_batch, torch_cross_entropy(O(2, 3), L(0, 1, 2), -100))
C(nll_loss_target, torch_nll_loss(O(2, 3), L(0, -2), -100))
C(argmax_empty, torch_argmax(torch_empty(SHAPE(0, 3), AC_FLOAT32), 0, false))
C(dropout_p, torch_dropout(O(2), 1.5, true))
C(backward_no_grad, (torch_backward(torch_sum(O(2)), NULL), NULL))
C(backward_nonscalar, (torch_backward(torch_mul_scalar(RG(O(2)), 2), NULL), NULL))
C(backward_shape, (torch_backward(torch_mul_scalar(RG(O(2)), 2), O(3)), NULL))
C(backward_twice, twice())
C(requires_grad_long, torch_requires_grad_(L(1, 2), true))
C(requires_grad_nonleaf, torch_requires_grad_(torch_mul_scalar(RG(O(2)), 2), false))
C(retain_grad_no_grad, (torch_retain_grad(O(2)), NULL))
C(item_many, (torch_item(O(2)), NULL))
C(zeros_negative, torch_zeros(SHAPE(2, -1)))
C(randint_range, torch_randint(5, 5, SHAPE(2)))
C(randperm_negative, torch_randperm(-1))
C(uniform_range, torch_uniform_(torch_empty(SHAPE(2), AC_FLOAT32), 1, 0))
C(normal_std, torch_normal_(torch_empty(SHAPE(2), AC_FLOAT32), 0, -1))
C(bernoulli_p, torch_bernoulli_(torch_zeros(SHAPE(2)), 2))
C(multinomial_dims, torch_multinomial(O(2, 2, 2), 1, false))
C(multinomial_too_many, torch_multinomial(O(3), 4, false))
C(multinomial_negative, torch_multinomial(torch_tensor((const float[]){1, -1}, SHAPE(2)), 1, false))
C(multinomial_zero_sum, torch_multinomial(torch_zeros(SHAPE(2)), 1, false))
C(leaf_inplace, torch_fill_(RG(O(2)), 1))
C(view_of_leaf_inplace, fill_leaf_view())
C(copy_broadcast, torch_copy_(O(2), O(3)))
C(index_put_bounds, torch_index_put_(O(3, 2), L(3), O(2), false))
C(index_put_shape, torch_index_put_(O(3, 4), L(1), O(3, 4), false))
C(index_put_dtype, torch_index_put_(O(3, 4), L(1), L(1, 2, 3, 4), false))
C(where_dtype, torch_where(O(2), O(2), O(2)))
C(where_broadcast, torch_where(torch_to_bool(O(2)), O(3), O(3)))
C(clamp_none, torch_clamp(O(2), NAN, NAN))
C(max_dim_empty, torch_max_dim(torch_empty(SHAPE(2, 0), AC_FLOAT32), 1, false).values)
C(max_all_empty, torch_max(torch_empty(SHAPE(0), AC_FLOAT32)))
C(amax_empty, torch_amax(torch_empty(SHAPE(2, 0), AC_FLOAT32), SHAPE(1), false))
C(amax_repeat, torch_amax(O(2, 3), SHAPE(1, 1), false))
C(topk_k, torch_topk(O(3), 4, -1, true, true).values)
C(repeat_fewer, torch_repeat(O(2, 3), SHAPE(2)))
C(repeat_negative, torch_repeat(O(2), SHAPE(-1)))
C(expand_size, torch_expand(O(3), SHAPE(2, 4)))
C(expand_fewer, torch_expand(O(3, 4), SHAPE(4)))
C(expand_leading_negative, torch_expand(O(3), SHAPE(-1, 3)))
C(permute_len, torch_permute(O(2, 3), SHAPE(0)))
C(permute_repeat, torch_permute(O(2, 3), SHAPE(0, 0)))
C(flatten_order, torch_flatten(O(2, 3, 4), 2, 1))
C(chunk_zero, chunk_zero())
C(chunk_0d, chunk_0d())
C(split_zero, split_zero())
C(split_sizes_sum, split_sum())
C(gather_dims, torch_gather(O(3, 4), 1, L(0, 1)))
C(gather_bounds, torch_gather(O(3, 4), 1, torch_tensor_long((const int64_t[]){4}, SHAPE(1, 1))))
C(gather_dtype, torch_gather(O(3, 4), 1, torch_tensor((const float[]){1}, SHAPE(1, 1))))
C(gather_size, torch_gather(O(3, 4), 1, torch_zeros_dtype(SHAPE(4, 1), AC_INT64)))
C(scatter_add_bounds, torch_scatter_add(O(3, 4), 0, torch_tensor_long((const int64_t[]){3}, SHAPE(1, 1)), O(1, 1)))
static Tensor *param(void) { return RG(O(2)); }
static nn_TensorList one(Tensor *t) {
    static const char *names[1] = {"p"};
    static Tensor *ts[1];
    ts[0] = t;
    return (nn_TensorList){1, names, ts};
}
static Tensor *opt(optim_Optimizer *o) { optim_free(o); return NULL; }
static nn_ModuleList *list; /* made here, freed after the table: the error jumps out before any free */
static Tensor *module_list(void) {
    list = nn_ModuleList_new();
    nn_ModuleList_append(list, &nn_GELU_new()->module);
    nn_ModuleList_get(list, 5);
    return NULL;
}
C(optim_lr, opt(optim_Adam(one(param()), -1.0, 0.9, 0.999, 1e-8, 0, false)))
C(optim_weight_decay, opt(optim_AdamW(one(param()), 1e-3, 0.9, 0.999, 1e-8, -1.0, false)))
C(optim_empty, opt(optim_SGD((nn_TensorList){0, NULL, NULL}, 0.1, 0, 0, 0, false)))
C(optim_nonleaf, opt(optim_SGD(one(torch_mul_scalar(param(), 2)), 0.1, 0, 0, 0, false)))
C(sgd_momentum, opt(optim_SGD(one(param()), 0.1, -1.0, 0, 0, false)))
C(sgd_nesterov, opt(optim_SGD(one(param()), 0.1, 0, 0, 0, true)))
C(adam_eps, opt(optim_Adam(one(param()), 1e-3, 0.9, 0.999, -1.0, 0, false)))
C(adam_beta1, opt(optim_Adam(one(param()), 1e-3, 1.0, 0.999, 1e-8, 0, false)))
C(adam_beta2, opt(optim_Adam(one(param()), 1e-3, 0.9, -0.5, 1e-8, 0, false)))
C(linear_negative, (nn_free(&nn_Linear_new(-1, 2, true)->module), NULL))
C(dropout_module_p, (nn_free(&nn_Dropout_new(1.5)->module), NULL))
C(modulelist_index, module_list())
C(embedding_indices_dtype, torch_embedding(O(5, 2), O(2), -1))
C(getitem_bounds, (ac_get(O(3, 2), 2, (const int64_t[]){5, 0}), NULL))
C(arange_negative, torch_arange(-1))
C(scatter_add_size, torch_scatter_add(O(3, 4), 0, torch_tensor_long((const int64_t[]){0, 1, 2, 0, 1}, SHAPE(1, 5)), O(1, 4)))
C(gather_negative, torch_gather(O(3, 4), 0, torch_tensor_long((const int64_t[]){-1}, SHAPE(1, 1))))
C(copy_bigger_source, torch_copy_(torch_zeros(SHAPE(3)), O(2, 3)))
C(index_put_index_dtype, torch_index_put_(O(3, 4), torch_tensor((const float[]){0.5f}, SHAPE(1)), O(4), false))
static Tensor *split_negative(void) { int n; return torch_split_with_sizes(O(4), SHAPE(1, -1, 4), 0, &n)[0]; }
C(split_sizes_negative, split_negative())
C(arange_step, torch_arange_float(0, 1, 0))
#undef C

#define E(name, op) {#name, op, name##_call}
static const Case cases[] = {
    E(matmul_2d, "matmul"), E(matmul_1d_2d, "matmul"), E(matmul_mv, "matmul"), E(matmul_0d, "matmul"),
    E(matmul_batch, "matmul"), E(dot_size, "dot"), E(dot_dims, "dot"), E(add_broadcast, "add"),
    E(mul_broadcast, "mul"), E(view_size, "view"), E(view_infer_two, "view"), E(view_negative, "view"),
    E(view_stride, "view"), E(reshape_size, "reshape"), E(cat_sizes, "cat"), E(cat_dims, "cat"),
    E(cat_empty, "cat"), E(cat_0d, "cat"), E(stack_sizes, "stack"), E(tril_1d, "tril"),
    E(softmax_dim, "softmax"), E(transpose_dim, "transpose"), E(sum_repeat_dim, "sum"),
    E(select_index, "select"), E(select_0d, "select"), E(t_3d, "t"), E(unsqueeze_dim, "unsqueeze"),
    E(embedding_index, "embedding"), E(index_select_index, "index_select"), E(index_select_dims, "index_select"),
    E(index_bounds, "index"), E(index_0d, "index"), E(linear_shapes, "linear"), E(layer_norm_shape, "layer_norm"),
    E(masked_fill_shape, "masked_fill"), E(cross_entropy_target, "cross_entropy"),
    E(cross_entropy_batch, "cross_entropy"), E(nll_loss_target, "nll_loss"), E(argmax_empty, "argmax"),
    E(dropout_p, "dropout"), E(backward_no_grad, "backward"), E(backward_nonscalar, "backward"),
    E(backward_shape, "backward"), E(backward_twice, "backward"), E(requires_grad_long, "requires_grad_"),
    E(requires_grad_nonleaf, "requires_grad_"), E(retain_grad_no_grad, "retain_grad"), E(item_many, "item"),
    E(zeros_negative, "zeros"), E(randint_range, "randint"), E(randperm_negative, "randperm"),
    E(uniform_range, "uniform_"), E(normal_std, "normal_"), E(bernoulli_p, "bernoulli_"),
    E(multinomial_dims, "multinomial"), E(multinomial_too_many, "multinomial"),
    E(multinomial_negative, "multinomial"), E(multinomial_zero_sum, "multinomial"), E(leaf_inplace, "fill_"),
    E(view_of_leaf_inplace, "fill_"), E(copy_broadcast, "copy_"), E(index_put_bounds, "index_put_"),
    E(index_put_shape, "index_put_"), E(index_put_dtype, "index_put_"), E(where_dtype, "where"),
    E(where_broadcast, "where"), E(clamp_none, "clamp"), E(max_dim_empty, "max"), E(max_all_empty, "max"),
    E(amax_empty, "amax"), E(amax_repeat, "amax"), E(topk_k, "topk"), E(repeat_fewer, "repeat"),
    E(repeat_negative, "repeat"), E(expand_size, "expand"), E(expand_fewer, "expand"),
    E(expand_leading_negative, "expand"), E(permute_len, "permute"), E(permute_repeat, "permute"),
    E(flatten_order, "flatten"), E(chunk_zero, "chunk"), E(chunk_0d, "chunk"), E(split_zero, "split"),
    E(split_sizes_sum, "split_with_sizes"), E(gather_dims, "gather"), E(gather_bounds, "gather"),
    E(gather_dtype, "gather"), E(gather_size, "gather"), E(scatter_add_bounds, "scatter_add"),
    E(optim_lr, "Adam"), E(optim_weight_decay, "AdamW"), E(optim_empty, "SGD"), E(optim_nonleaf, "SGD"),
    E(sgd_momentum, "SGD"), E(sgd_nesterov, "SGD"), E(adam_eps, "Adam"), E(adam_beta1, "Adam"), E(adam_beta2, "Adam"),
    E(linear_negative, "Linear"), E(dropout_module_p, "Dropout"), E(modulelist_index, "ModuleList"),
    E(embedding_indices_dtype, "embedding"), E(getitem_bounds, "get"), E(arange_negative, "arange"),
    E(arange_step, "arange"), E(scatter_add_size, "scatter_add"), E(gather_negative, "gather"),
    E(copy_bigger_source, "copy_"), E(index_put_index_dtype, "index_put_"), E(split_sizes_negative, "split_with_sizes"),
};

/* PyTorch's line for `name`: its kind and message (pointers into the file's text). */
static bool pytorch_line(const char *text, const char *name, char *kind, size_t kn, char *msg, size_t mn) {
    size_t nl = strlen(name);
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        if (!end) end = p + strlen(p);
        if (strncmp(p, name, nl) == 0 && p[nl] == '\t') {
            const char *k = p + nl + 1, *t = strchr(k, '\t');
            snprintf(kind, kn, "%.*s", (int)(t - k), k);
            snprintf(msg, mn, "%.*s", (int)(end - t - 1), t + 1);
            return true;
        }
        p = *end ? end + 1 : end;
    }
    return false;
}

START_TEST(test_error_table) {
    char *text = read_text(data_path("error_table.txt"));
    int rows = 0;
    for (const char *p = text; *p; p++) rows += *p == '\n';
    ck_assert_msg(rows == (int)(sizeof cases / sizeof *cases), "error_table.txt has %d cases, the C table %d", rows,
                  (int)(sizeof cases / sizeof *cases));
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        char kind[32], msg[1024], want[1200];
        ck_assert_msg(pytorch_line(text, c->name, kind, sizeof kind, msg, sizeof msg), "%s: no PyTorch line", c->name);
        snprintf(want, sizeof want, "%s: %s", c->op, msg);
        ac_mark m = ac_arena_mark();
        jmp_buf jb;
        test_jmp = &jb;
        test_msg[0] = 0;
        ac_set_error_handler(test_error_handler, NULL);
        volatile bool raised = false;
        if (setjmp(jb) == 0) c->call();
        else raised = true;
        ac_set_error_handler(NULL, NULL);
        ac_arena_release(m);
        const char *got_kind = ac_error_kind_name(test_kind);
        /* PyTorch's sentence, then optionally ours after a space or a '(' */
        size_t wl = strlen(want);
        bool text_ok = raised && strncmp(test_msg, want, wl) == 0 && (test_msg[wl] == 0 || test_msg[wl] == ' ');
        bool kind_ok = raised && strcmp(got_kind, kind) == 0;
        if (!text_ok || !kind_ok) {
            bad++;
            fprintf(stderr, "error table: %s\n  PyTorch: %s: %s\n  ours:    %s: %s\n", c->name, kind, want,
                    raised ? got_kind : "(no error)", test_msg);
        }
    }
    free(text);
    if (list) nn_free(&list->module);
    ck_assert_msg(bad == 0, "%d of the error table's cases differ from PyTorch (listed above)", bad);
}
END_TEST

Suite *suite_error_table(void) {
    Suite *s = suite_create("error table");
    TCase *tc = tcase("PyTorch's words");
    tcase_add_test(tc, test_error_table);
    suite_add_tcase(s, tc);
    return s;
}
