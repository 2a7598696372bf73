/* Weights held as bfloat16 for generation (AC_BFLOAT16, tensor/kernels/gemm_bf16.c,
 * nn_LLMModel_hold_bf16, `llm generate` on BF16 files):
 * - the dtype as PyTorch 1.13 has it: .to(torch.bfloat16)'s rounding, its printout, random_'s draws;
 * - the product against a bfloat16 weight: within float rounding of the float32 product of the
 *   widened weight, and the same bits on every instruction set, for any number of rows (a prompt's
 *   or one token's) and any thread count;
 * - linear and embedding read it (exact math: as model.to(torch.float32) would), and refuse a
 *   gradient through it;
 * - a whole model held so generates what the float32 one generates, and `llm generate` gives the
 *   same ids with the weights held as BF16, widened (--float32) or in exact math. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/internal.h"
#include "llm.h"
#include "tests.h"

static Tensor *to_bf16(Tensor *t) {
    Tensor *h = torch_empty(t->ndim, t->shape, AC_BFLOAT16);
    return torch_copy_(h, t);
}

static Tensor *widened(Tensor *h) {
    Tensor *f = torch_empty(h->ndim, h->shape, AC_FLOAT32);
    return torch_copy_(f, h);
}

START_TEST(test_dtype_as_pytorch) {
    /* torch.tensor([0.1, 0.2, 3.0, -1.5]).to(torch.bfloat16) */
    assert_repr(to_bf16(torch_tensor((float[]){0.1f, 0.2f, 3.0f, -1.5f}, SHAPE(4))),
                "tensor([ 0.1001,  0.2002,  3.0000, -1.5000], dtype=torch.bfloat16)");
    assert_repr(to_bf16(torch_tensor((float[]){1.0f, 2.5f, 1e-3f, 300.0f}, SHAPE(2, 2))),
                "tensor([[1.0000e+00, 2.5000e+00],\n        [9.9945e-04, 3.0000e+02]], dtype=torch.bfloat16)");
    /* ties to even: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6, 1 + 2^-7 stays */
    Tensor *r = widened(to_bf16(torch_tensor((float[]){1.00390625f, 1.01171875f, 1.0078125f}, SHAPE(3))));
    const float *rd = r->data;
    ck_assert(rd[0] == 1.0f && rd[1] == 1.015625f && rd[2] == 1.0078125f);
    /* torch.manual_seed(0); torch.empty(6, dtype=torch.bfloat16).random_() */
    torch_manual_seed(0);
    assert_repr(torch_random_(torch_empty(SHAPE(6), AC_BFLOAT16)),
                "tensor([149., 179.,  47.,  62.,  69., 112.], dtype=torch.bfloat16)");
    ck_assert_str_eq(torch_dtype_str(AC_BFLOAT16), "torch.bfloat16");
    EXPECT_ERROR("expected a tensor of dtype Float (float32), but got BFloat16",
                 torch_add(to_bf16(torch_ones(SHAPE(2))), torch_ones(SHAPE(2))));
}
END_TEST

/* random A (M x K) and a bfloat16 W (N x K); C from each path */
static void fill(float *x, int64_t n, unsigned *s) {
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 1103515245u + 12345u;
        x[i] = (float)((int)(*s >> 9) % 2001 - 1000) / 997.0f;
    }
}

START_TEST(test_gemm_bf16_paths) {
    const int64_t shapes[][3] = {{1, 7, 37}, {3, 9, 16}, {5, 4, 5}, {9, 33, 100}, {1, 130, 1024}, {6, 5, 48}, {4, 1, 17}};
    const ac_isa isas[] = {AC_ISA_DEFAULT, AC_ISA_AVX2, AC_ISA_AVX512};
    unsigned seed = 7;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * (size_t)(M * K)), *Wf = malloc(sizeof(float) * (size_t)(N * K));
        uint16_t *W = malloc(sizeof(uint16_t) * (size_t)(N * K));
        float *C0 = malloc(sizeof(float) * (size_t)(M * N)), *C = malloc(sizeof(float) * (size_t)(M * N));
        fill(A, M * K, &seed);
        fill(Wf, N * K, &seed);
        for (int64_t i = 0; i < N * K; i++) W[i] = ac_f32_to_bf16(Wf[i]), Wf[i] = ac_bf16_to_f32(W[i]);
        ck_assert(ac_gemm_bf16_with(AC_ISA_DEFAULT, M, N, K, A, K, W, C0, N));
        /* against a double product of the widened weight: float rounding of K terms */
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double d = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) d += (double)A[m * K + k] * Wf[n * K + k], mag += fabs((double)A[m * K + k] * Wf[n * K + k]);
                ck_assert_msg(fabs(C0[m * N + n] - d) <= 1e-6 * mag + 1e-30, "%lldx%lldx%lld [%lld,%lld]: %.9g, want %.9g",
                              (long long)M, (long long)N, (long long)K, (long long)m, (long long)n, C0[m * N + n], d);
            }
        for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) { /* every path this CPU has: the same bits */
            if (!ac_gemm_bf16_with(isas[i], M, N, K, A, K, W, C, N)) continue;
            ck_assert_msg(memcmp(C, C0, sizeof(float) * (size_t)(M * N)) == 0, "isa %d differs at %lldx%lldx%lld", (int)isas[i],
                          (long long)M, (long long)N, (long long)K);
        }
        for (int64_t m = 0; m < M; m++) { /* a row alone (one token) is that row of the batch (a prompt) */
            ac_gemm_bf16(1, N, K, A + m * K, K, W, C, N);
            ck_assert(memcmp(C, C0 + m * N, sizeof(float) * (size_t)N) == 0);
        }
        for (int t = 1; t <= 3; t++) { /* any thread count */
            torch_set_num_threads(t);
            ac_gemm_bf16(M, N, K, A, K, W, C, N);
            ck_assert_msg(memcmp(C, C0, sizeof(float) * (size_t)(M * N)) == 0, "%d threads differ", t);
        }
        free(A), free(Wf), free(W), free(C0), free(C);
    }
}
END_TEST

START_TEST(test_linear_embedding) {
    torch_manual_seed(1);
    Tensor *w = torch_randn(SHAPE(70, 40)), *b = torch_randn(SHAPE(70)), *x = torch_randn(SHAPE(2, 3, 40));
    Tensor *wh = to_bf16(w), *wf = widened(wh);
    bool prev = torch_no_grad_enter();
    /* exact math: model.to(torch.float32)'s bits */
    ac_set_exact(true);
    Tensor *ye = torch_linear(x, wf, b), *yh = torch_linear(x, wh, b);
    ck_assert(torch_equal(ye, yh));
    /* default math: within float rounding of it */
    ac_set_exact(false);
    Tensor *yd = torch_linear(x, wh, b);
    ck_assert_int_eq(yd->ndim, 3);
    ck_assert(torch_allclose(yd, ye, 1e-5, 1e-5, false));
    /* embedding: the rows widened */
    Tensor *idx = torch_tensor_long((int64_t[]){3, 0, 69, 3}, SHAPE(2, 2));
    ck_assert(torch_equal(torch_embedding(wh, idx, -1), torch_embedding(wf, idx, -1)));
    torch_no_grad_exit(prev);
    /* no gradient through a weight held for generation */
    Tensor *xg = torch_randn(SHAPE(3, 40));
    xg->requires_grad = true;
    EXPECT_ERROR("is held as bfloat16, for generation: no gradient flows through it", torch_linear(xg, wh, NULL));
    wh->requires_grad = true;
    EXPECT_ERROR("linear: the weight [70, 40] is held as bfloat16", torch_linear(x, wh, NULL));
    EXPECT_ERROR("embedding: the weight [70, 40] is held as bfloat16", torch_embedding(wh, idx, -1));
    wh->requires_grad = false;
    Tensor *wt = torch_t(to_bf16(torch_randn(SHAPE(40, 70)))); /* (70, 40), not contiguous */
    EXPECT_ERROR("a bfloat16 weight must be contiguous", torch_linear(x, wt, NULL));
}
END_TEST

/* A small Qwen3 (GQA, q/k norm, ragged head_dim 24 and emb 40) held both ways: the same greedy ids. */
START_TEST(test_model_held_bf16) {
    nn_LLMConfig cfg = {.vocab_size = 101, .context_length = 64, .emb_dim = 40, .n_heads = 4, .n_layers = 2,
                        .hidden_dim = 72, .head_dim = 24, .qk_norm = true, .n_kv_groups = 2, .rope_base = 10000.0,
                        .rms_norm_eps = 1e-6, .eos_token_id = -1};
    ac_set_exact(false);
    for (int tied = 0; tied < 2; tied++) {
        torch_manual_seed(3);
        nn_LLMModel *m = nn_Qwen3Model_new(cfg);
        if (tied) nn_LLMModel_tie_weights(m);
        /* the weights rounded to bfloat16 but held as float32: the reference */
        nn_TensorList ps = nn_named_parameters(&m->module);
        int64_t n_params = 0;
        for (int i = 0; i < ps.n; i++) {
            n_params += torch_numel(ps.tensors[i]);
            if (ps.tensors[i]->ndim != 2) continue;
            float *d = ps.tensors[i]->data;
            for (int64_t k = 0; k < torch_numel(ps.tensors[i]); k++) d[k] = ac_bf16_to_f32(ac_f32_to_bf16(d[k]));
        }
        Tensor *idx = torch_tensor_long((int64_t[]){5, 17, 2, 99}, SHAPE(1, 4));
        Tensor *want = llm_generate(m, idx, 20, 64, 0.0, -1, -1, true, NULL, NULL);
        ck_assert(!nn_LLMModel_holds_bf16(m));
        nn_LLMModel_hold_bf16(m);
        ck_assert(nn_LLMModel_holds_bf16(m));
        ps = nn_named_parameters(&m->module);
        int64_t n_after = 0;
        for (int i = 0; i < ps.n; i++) {
            n_after += torch_numel(ps.tensors[i]);
            ck_assert_int_eq(ps.tensors[i]->dtype, ps.tensors[i]->ndim == 2 ? AC_BFLOAT16 : AC_FLOAT32);
        }
        ck_assert_int_eq(n_after, n_params); /* the same parameters, tied or not */
        ck_assert(m->out_head->weight->dtype == AC_BFLOAT16);
        ck_assert(!tied || m->out_head->weight == m->tok_emb->weight);
        for (int cache = 0; cache < 2; cache++) {
            Tensor *got = llm_generate(m, idx, 20, 64, 0.0, -1, -1, cache, NULL, NULL);
            ck_assert_msg(torch_equal(got, want), "tied %d, kv cache %d", tied, cache);
        }
        nn_LLMModel_free(m);
    }
}
END_TEST

/* The loader's options: BF16 files held as they are, bit for bit; no draws (the generator untouched);
 * the same weights as llm_from_pretrained's. F32 files stay float32 when asked to hold BF16. */
START_TEST(test_loader_options) {
    const char *dirs[] = {"llm/qwen_untied_bf16_sharded", "llm/llama_tied_bf16", "llm/qwen_tied_f32"};
    char err[512];
    for (int d = 0; d < 3; d++) {
        const char *dir = data_path(dirs[d]);
        torch_manual_seed(5);
        double first = torch_item(torch_rand(SHAPE(1)));
        torch_manual_seed(5);
        nn_LLMModel *ref = llm_from_pretrained(dir, err, sizeof err);
        ck_assert_msg(ref, "%s", err);
        ck_assert(torch_item(torch_rand(SHAPE(1))) != first); /* the book's way: Qwen3Model(cfg) draws, then loads */
        for (int k = 0; k < 2; k++) {
            llm_load_options o = {.hold_bf16 = k == 1, .skip_init = true};
            torch_manual_seed(5);
            nn_LLMModel *m = llm_from_pretrained_ex(dir, o, err, sizeof err);
            ck_assert_msg(m, "%s", err);
            ck_assert(torch_item(torch_rand(SHAPE(1))) == first); /* no draws */
            ck_assert(nn_LLMModel_holds_bf16(m) == (k == 1 && d < 2));
            nn_TensorList a = nn_named_parameters(&ref->module), b = nn_named_parameters(&m->module);
            ck_assert_int_eq(a.n, b.n);
            for (int i = 0; i < a.n; i++) {
                ck_assert_str_eq(a.names[i], b.names[i]);
                Tensor *t = b.tensors[i];
                ck_assert_int_eq(t->dtype, k == 1 && d < 2 && t->ndim == 2 ? AC_BFLOAT16 : AC_FLOAT32);
                ck_assert_msg(torch_equal(a.tensors[i], t->dtype == AC_FLOAT32 ? t : widened(t)), "%s %s", dirs[d], a.names[i]);
            }
            ck_assert(!m->tied || m->out_head->weight == m->tok_emb->weight);
            nn_LLMModel_free(m);
        }
        nn_LLMModel_free(ref);
    }
    /* a model built under skip_init has shapes, not values, to round */
    nn_LLMConfig cfg = {.vocab_size = 11, .context_length = 8, .emb_dim = 8, .n_heads = 2, .n_layers = 1, .hidden_dim = 8,
                        .head_dim = 4, .qk_norm = true, .n_kv_groups = 1, .rope_base = 10000.0, .rms_norm_eps = 1e-6};
    bool prev = nn_set_skip_init(true);
    nn_LLMModel *m = nn_Qwen3Model_new(cfg);
    nn_set_skip_init(prev);
    EXPECT_ERROR("hold_bf16: Embedding's weight [11, 8] has no values of its own yet", nn_LLMModel_hold_bf16(m));
    nn_LLMModel_fresh_weights(m, AC_BFLOAT16);
    ck_assert(nn_LLMModel_holds_bf16(m) && torch_is_contiguous(m->out_head->weight));
    nn_LLMModel_free(m);
}
END_TEST

/* `llm generate` on BF16 files: held as BF16 (default), widened (--float32), exact: the same ids */
START_TEST(test_llm_generate_held) {
    const char *models[] = {"llm/qwen_untied_bf16_sharded", "llm/llama_tied_bf16"};
    for (int i = 0; i < 2; i++) {
        char *want = NULL;
        const char *flags[] = {"--exact", "", "--float32", "--threads 3", "--no-kv-cache"};
        for (int f = 0; f < 5; f++) {
            char cmd[1024], *out;
            snprintf(cmd, sizeof cmd, "%s/llm generate --model %s --ids \"5 6 7 8\" --max-new-tokens 16 --print-ids "
                     "--tokenizer %s %s 2>/dev/null", build_dir(), data_path(models[i]), shared_path("data/gpt2"), flags[f]);
            ck_assert_int_eq(run_command(cmd, &out), 0);
            if (!want) want = out;
            else {
                ck_assert_msg(!strcmp(out, want), "%s %s: %s, --exact gave %s", models[i], flags[f], out, want);
                free(out);
            }
        }
        free(want);
    }
}
END_TEST

Suite *suite_bf16(void) {
    Suite *s = suite_create("bf16");
    TCase *tc = tcase("bf16");
    tcase_add_test(tc, test_dtype_as_pytorch);
    tcase_add_test(tc, test_gemm_bf16_paths);
    tcase_add_test(tc, test_linear_embedding);
    tcase_add_test(tc, test_model_held_bf16);
    tcase_add_test(tc, test_loader_options);
    tcase_add_test(tc, test_llm_generate_held);
    suite_add_tcase(s, tc);
    return s;
}
