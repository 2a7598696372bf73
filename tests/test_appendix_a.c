/* The book's appendix A (Introduction to PyTorch): ./build/appendix_a against
 * tests/data/appendix_a_expected.txt (tests/tools/gen_appendix_a_expected.py, PyTorch 1.13) byte for
 * byte, its --html page; and the calls it needed, each against PyTorch's values (the Python that
 * gave them beside each, run with ATEN_CPU_CAPABILITY=default /usr/bin/python3):
 * F.binary_cross_entropy (and _with_logits), torch.autograd.grad, integer matmul and sum,
 * set_printoptions(sci_mode=False), t.dtype, and a DataLoader over tensors of one's own. */
#include <math.h>
#include <stdlib.h>

#include "data.h"
#include "tests.h"
#include "xml_check.h"

/* the float a C99 hex literal names (the values are PyTorch's float32 results, printed by .hex()) */
static void assert_bits(float got, double want, const char *what) {
    ck_assert_msg(got == (float)want, "%s: got %a, PyTorch %a", what, (double)got, want);
}

START_TEST(test_appendix_a_output) {
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, "%s/appendix_a", build_dir());
    ck_assert_int_eq(run_command(cmd, &out), 0);
    char *want = read_text(data_path("appendix_a_expected.txt"));
    if (strcmp(out, want) != 0) { /* the first line that differs */
        const char *a = out, *b = want;
        int line = 1;
        while (*a && *a == *b) line += *a == '\n', a++, b++;
        ck_abort_msg("appendix_a differs from appendix_a_expected.txt at line %d: \"%.60s\" vs \"%.60s\"", line, a, b);
    }
    free(out);
    free(want);
}
END_TEST

START_TEST(test_appendix_a_html) {
    char *dir = temp_dir(), page[600], cmd[1400], *out;
    snprintf(page, sizeof page, "%s/appendix_a.html", dir);
    snprintf(cmd, sizeof cmd, "%s/appendix_a --html %s", build_dir(), page);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    char *want = read_text(data_path("appendix_a_expected.txt"));
    ck_assert_msg(strcmp(out, want) == 0, "--html changes what appendix_a prints");
    char *html = read_text(page), err[256];
    ck_assert_msg(xml_check(html, strlen(html), err, sizeof err), "the page is not well-formed: %s", err);
    const char *must[] = {"A.2 Understanding tensors", "A.5 Implementing multilayer neural networks",
                          "A.8 The accuracy of the model", "loss = F.binary_cross_entropy(a, y)",
                          "torch_binary_cross_entropy(a, y)", "Total number of trainable model parameters: 2213",
                          "def forward(self, x):", "Epoch: 003/003 | Batch 002/002 | Train/Val Loss: 0.00"};
    for (size_t i = 0; i < sizeof must / sizeof *must; i++)
        ck_assert_msg(strstr(html, must[i]) != NULL, "the page lacks \"%s\"", must[i]);
    assert_page_rows(html, "appendix A's page");
    snprintf(cmd, sizeof cmd, "%s/appendix_a --bogus 2>/dev/null", build_dir());
    ck_assert_int_eq(run_command(cmd, NULL), 2);
    free(out), free(want), free(html);
    remove_dir(dir);
}
END_TEST

START_TEST(test_binary_cross_entropy) {
    /* xa = torch.tensor([0.25, 0.5, 0.875, 0.125], requires_grad=True)
     * ya = torch.tensor([1.0, 0.0, 1.0, 0.5], requires_grad=True)
     * l = F.binary_cross_entropy(xa, ya); l.backward() */
    Tensor *x = torch_requires_grad_(torch_tensor((float[]){0.25f, 0.5f, 0.875f, 0.125f}, SHAPE(4)), true);
    Tensor *y = torch_requires_grad_(torch_tensor((float[]){1.0f, 0.0f, 1.0f, 0.5f}, SHAPE(4)), true);
    Tensor *l = torch_binary_cross_entropy(x, y);
    ck_assert_str_eq(torch_grad_fn_name(l), "BinaryCrossEntropyBackward0");
    assert_bits(torch_item(l), 0.8298648595809937, "loss");
    torch_backward(l, NULL);
    const double gx[] = {-0x1.0p+0, 0x1.0p-1, -0x1.24924ap-2, -0x1.b6db6ep-1};
    const double gy[] = {0x1.193ea8p-2, 0.0, -0x1.f2272cp-2, 0x1.f2272cp-2};
    for (int i = 0; i < 4; i++) {
        assert_bits(ac_data_float(x->grad)[i], gx[i], "x.grad");
        assert_bits(ac_data_float(y->grad)[i], gy[i], "y.grad");
    }
    /* the logs clamped at -100: F.binary_cross_entropy(torch.tensor([0.0, 1.0, 0.5]), torch.tensor([1.0, 0.0, 0.5])) */
    Tensor *e = torch_binary_cross_entropy(torch_tensor((float[]){0, 1, 0.5f}, SHAPE(3)),
                                           torch_tensor((float[]){1, 0, 0.5f}, SHAPE(3)));
    assert_bits(torch_item(e), 66.89771270751953, "clamped loss");
    /* xl = torch.tensor([0.75, -2.5, 30.0, -40.0], requires_grad=True)
     * yl = torch.tensor([1.0, 0.0, 0.25, 1.0], requires_grad=True)
     * l = F.binary_cross_entropy_with_logits(xl, yl); l.backward() */
    Tensor *xl = torch_requires_grad_(torch_tensor((float[]){0.75f, -2.5f, 30.0f, -40.0f}, SHAPE(4)), true);
    Tensor *yl = torch_requires_grad_(torch_tensor((float[]){1.0f, 0.0f, 0.25f, 1.0f}, SHAPE(4)), true);
    Tensor *ll = torch_binary_cross_entropy_with_logits(xl, yl);
    ck_assert_str_eq(torch_grad_fn_name(ll), "BinaryCrossEntropyWithLogitsBackward0");
    assert_bits(torch_item(ll), 0x1.f7b9ep+3, "with_logits loss");
    torch_backward(ll, NULL);
    const double glx[] = {-0x1.48856p-4, 0x1.36b71p-6, 0x1.8p-3, -0x1.0p-2};
    const double gly[] = {-0x1.8p-3, 0x1.4p-1, -0x1.ep+2, 0x1.4p+3};
    for (int i = 0; i < 4; i++) {
        assert_bits(ac_data_float(xl->grad)[i], glx[i], "xl.grad");
        assert_bits(ac_data_float(yl->grad)[i], gly[i], "yl.grad");
    }
    /* PyTorch's errors */
    EXPECT_ERROR("all elements of input should be between 0 and 1",
                 torch_binary_cross_entropy(torch_tensor((float[]){1.5f}, SHAPE(1)), torch_ones(SHAPE(1))));
    EXPECT_ERROR("Using a target size (torch.Size([1])) that is different to the input size (torch.Size([2]))",
                 torch_binary_cross_entropy(torch_full(SHAPE(2), 0.5), torch_ones(SHAPE(1))));
    ck_assert_int_eq(test_kind, AC_VALUE_ERROR);
    EXPECT_ERROR("Target size (torch.Size([1])) must be the same as input size (torch.Size([2]))",
                 torch_binary_cross_entropy_with_logits(torch_full(SHAPE(2), 0.5), torch_ones(SHAPE(1))));
}
END_TEST

START_TEST(test_autograd_grad) {
    /* w = torch.tensor([2.2], requires_grad=True); b = torch.tensor([0.0], requires_grad=True)
     * z = torch.tensor([1.1]) * w + b; loss = F.binary_cross_entropy(torch.sigmoid(z), torch.tensor([1.0]))
     * gw, gb = grad(loss, (w, b), retain_graph=True); gz, = grad(loss, z, retain_graph=True) */
    Tensor *w = torch_requires_grad_(torch_tensor((float[]){2.2f}, SHAPE(1)), true);
    Tensor *b = torch_requires_grad_(torch_zeros(SHAPE(1)), true);
    Tensor *z = torch_add(torch_mul(torch_tensor((float[]){1.1f}, SHAPE(1)), w), b);
    Tensor *loss = torch_binary_cross_entropy(torch_sigmoid(z), torch_ones(SHAPE(1)));
    Tensor **g = torch_autograd_grad(loss, TENSORS(w, b), NULL, true);
    assert_bits(torch_item(g[0]), -0x1.6fedb2p-4, "d loss / d w");
    assert_bits(torch_item(g[1]), -0x1.4e7afep-4, "d loss / d b");
    ck_assert_ptr_null(w->grad); /* grad() writes no .grad */
    ck_assert_ptr_null(b->grad);
    Tensor **gz = torch_autograd_grad(loss, TENSORS(z), NULL, true); /* a non-leaf */
    assert_bits(torch_item(gz[0]), -0x1.4e7afep-4, "d loss / d z");
    ck_assert_ptr_null(w->grad);
    torch_backward(loss, NULL); /* the graph was retained: backward still runs, and writes .grad */
    assert_bits(torch_item(w->grad), -0x1.6fedb2p-4, "w.grad");
    EXPECT_ERROR("Trying to backward through the graph a second time", torch_autograd_grad(loss, TENSORS(w), NULL, false));
    /* an input the output does not use; one that does not require grad */
    Tensor *u = torch_requires_grad_(torch_ones(SHAPE(2)), true), *v = torch_requires_grad_(torch_ones(SHAPE(2)), true);
    EXPECT_ERROR("One of the differentiated Tensors appears to not have been used in the graph",
                 torch_autograd_grad(torch_sum(torch_mul_scalar(u, 3)), TENSORS(v), NULL, false));
    EXPECT_ERROR("One of the differentiated Tensors does not require grad",
                 torch_autograd_grad(torch_sum(torch_mul_scalar(u, 3)), TENSORS(torch_ones(SHAPE(2))), NULL, false));
    /* with grad_outputs, and u used twice: grad(u * u, u, torch.tensor([1., 2.])) = 2u * g */
    Tensor **gu = torch_autograd_grad(torch_mul(u, u), TENSORS(u), torch_tensor((float[]){1, 2}, SHAPE(2)), false);
    assert_repr(gu[0], "tensor([2., 4.])");
    /* grad mode is back after an error inside the sweep */
    ck_assert(torch_is_grad_enabled());
}
END_TEST

START_TEST(test_integer_matmul_and_sum) {
    /* tensor2d = torch.tensor([[1, 2, 3], [4, 5, 6]]); tensor2d @ tensor2d.T */
    Tensor *t = torch_tensor_long((int64_t[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3));
    assert_repr(torch_matmul(t, torch_T(t)), "tensor([[14, 32],\n        [32, 77]])");
    assert_repr(torch_matmul(torch_T(t), t), "tensor([[17, 22, 27],\n        [22, 29, 36],\n        [27, 36, 45]])");
    assert_repr(torch_matmul(t, torch_tensor_long((int64_t[]){1, -1, 2}, SHAPE(3))), "tensor([ 5, 11])");
    assert_repr(torch_dot(torch_select(t, 0, 0), torch_select(t, 0, 1)), "tensor(32)");
    /* torch.sum(predictions == y_train) -> tensor(5); sums of int64 and bool over dims, int64 */
    Tensor *eq = torch_eq(torch_tensor_long((int64_t[]){0, 0, 0, 1, 1}, SHAPE(5)),
                          torch_tensor_long((int64_t[]){0, 0, 0, 1, 1}, SHAPE(5)));
    assert_repr(torch_sum(eq), "tensor(5)");
    assert_repr(torch_sum_dim(t, SHAPE(0), false), "tensor([5, 7, 9])");
    assert_repr(torch_sum_dim(torch_T(t), SHAPE(1), true), "tensor([[5],\n        [7],\n        [9]])");
    Tensor *big = torch_sum(torch_tensor_long((int64_t[]){INT64_MAX - 5, 3}, SHAPE(2))); /* summed in int64, exactly */
    ck_assert(ac_data_long(torch_contiguous(big))[0] == INT64_MAX - 2);
    EXPECT_ERROR("expected a tensor of dtype Float", torch_matmul(t, torch_ones(SHAPE(3, 2))));
}
END_TEST

START_TEST(test_sci_mode_and_dtype) {
    /* torch.set_printoptions(sci_mode=False); print(torch.tensor([[0.9991, 0.0009], [0.0307, 0.9693]])) */
    Tensor *p = torch_tensor((float[]){0.9991f, 0.0009f, 0.0307f, 0.9693f}, SHAPE(2, 2));
    assert_repr(p, "tensor([[9.9910e-01, 9.0000e-04],\n        [3.0700e-02, 9.6930e-01]])");
    torch_set_printoptions_sci_mode(TORCH_SCI_MODE_FALSE);
    assert_repr(p, "tensor([[    0.9991,     0.0009],\n        [    0.0307,     0.9693]])");
    /* positional anyway: unchanged; integers in float keep "1." and the scientific width: print(torch.tensor([1.0, 20000.0])) */
    assert_repr(torch_tensor((float[]){0.5f, 0.25f}, SHAPE(2)), "tensor([0.5000, 0.2500])");
    assert_repr(torch_tensor((float[]){1.0f, 20000.0f}, SHAPE(2)), "tensor([        1.,     20000.])");
    /* sci_mode=True: print(torch.tensor([0.5, 0.25])) -> tensor([5.0000e-01, 2.5000e-01]) */
    torch_set_printoptions_sci_mode(TORCH_SCI_MODE_TRUE);
    assert_repr(torch_tensor((float[]){0.5f, 0.25f}, SHAPE(2)), "tensor([5.0000e-01, 2.5000e-01])");
    torch_set_printoptions_sci_mode(TORCH_SCI_MODE_NONE);
    assert_repr(torch_tensor((float[]){0.5f, 0.25f}, SHAPE(2)), "tensor([0.5000, 0.2500])");
    EXPECT_ERROR("sci_mode must be None, False or True", torch_set_printoptions_sci_mode((torch_sci_mode)7));
    ck_assert_str_eq(torch_dtype_str(AC_INT64), "torch.int64");
    ck_assert_str_eq(torch_dtype_str(AC_FLOAT32), "torch.float32");
    ck_assert_str_eq(torch_dtype_str(AC_BOOL), "torch.bool");
}
END_TEST

/* The indices of a batch's labels (labels are 0..n-1: each sample's own index). */
static void batch_ids(Tensor *y, char *buf, size_t n) {
    size_t k = 0;
    for (int64_t i = 0; i < torch_numel(y); i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? " " : "", (long long)ac_data_long(y)[i]);
}

START_TEST(test_tensor_dataloader) {
    /* torch.manual_seed(123); X = torch.arange(10.).view(5, 2); y = torch.arange(5)
     * loader = DataLoader(TensorDataset(X, y), batch_size=2, shuffle=True): [3 1] [0 2] [4],
     * then again with drop_last=True: [0 2] [3 1]; shuffle=False: [0 1] [2 3] [4] */
    Tensor *X = torch_view(torch_arange_float(0, 10, 1), SHAPE(5, 2)), *y = torch_arange(5);
    TensorDataset ds = TensorDataset_new(X, y);
    ck_assert_int_eq(TensorDataset_len(&ds), 5);
    Tensor *x0, *y0;
    TensorDataset_getitem(&ds, 3, &x0, &y0);
    assert_repr(x0, "tensor([6., 7.])");
    assert_repr(y0, "tensor(3)");
    torch_manual_seed(123);
    const char *want[3][3] = {{"3 1", "0 2", "4"}, {"0 2", "3 1", NULL}, {"0 1", "2 3", "4"}};
    bool shuffle[3] = {true, true, false}, drop[3] = {false, true, false};
    for (int run = 0; run < 3; run++) {
        TensorDataLoader l = TensorDataLoader_new(&ds, 2, shuffle[run], drop[run]);
        ck_assert_int_eq(TensorDataLoader_len(&l), drop[run] ? 2 : 3);
        TensorDataLoaderIter it = TensorDataLoader_iter(&l);
        Tensor *bx, *by;
        int k = 0;
        char got[64];
        while (TensorDataLoaderIter_next(&it, &bx, &by)) {
            batch_ids(by, got, sizeof got);
            ck_assert_msg(k < 3 && want[run][k] && strcmp(got, want[run][k]) == 0, "run %d batch %d: [%s]", run, k, got);
            ck_assert_int_eq(bx->dtype, AC_FLOAT32);
            ck_assert_int_eq(bx->shape[1], 2);
            ck_assert(ac_data_float(bx)[0] == 2.0f * (float)ac_data_long(by)[0]); /* the rows that go with the labels */
            k++;
        }
        ck_assert_int_eq(k, drop[run] ? 2 : 3);
    }
    TensorDataLoader l = TensorDataLoader_new(&ds, 2, true, false);
    TensorDataLoaderIter it = TensorDataLoader_iter(&l);
    TensorDataLoaderIter_free(&it); /* an iterator left before its first batch */
    EXPECT_ERROR("Size mismatch between tensors", TensorDataset_new(X, torch_arange(4)));
    EXPECT_ERROR("batch_size should be a positive integer value", TensorDataLoader_new(&ds, 0, false, false));
}
END_TEST

Suite *suite_appendix_a(void) {
    Suite *s = suite_create("appendix_a");
    TCase *tc = tcase("appendix A");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_appendix_a_output);
    tcase_add_test(tc, test_appendix_a_html);
    tcase_add_test(tc, test_binary_cross_entropy);
    tcase_add_test(tc, test_autograd_grad);
    tcase_add_test(tc, test_integer_matmul_and_sum);
    tcase_add_test(tc, test_sci_mode_and_dtype);
    tcase_add_test(tc, test_tensor_dataloader);
    suite_add_tcase(s, tc);
    return s;
}
