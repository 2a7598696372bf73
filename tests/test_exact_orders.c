/* The ops whose summation order the random-config sweep of issue 40 (tests/tools/sweep.py) found wrong,
 * against PyTorch 1.13 bit for bit at lengths that are not a multiple of the vector width
 * (tests/data/exact_orders_golden.txt, made by tests/tools/gen_exact_orders_golden.py; tests/README.md
 * says which op each was and why). Each case draws its inputs as the generator does (torch.rand after
 * manual_seed) and compares the FNV-1a hash of every output's float32 bits. */
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "llm.h"
#include "toy_lm.h"
#include "tests.h"

static uint32_t fnv_floats(Tensor *t) {
    t = torch_contiguous(t);
    uint32_t h = 0x811C9DC5u;
    const unsigned char *b = (const unsigned char *)ac_data_float(t);
    for (size_t i = 0, n = (size_t)torch_numel(t) * sizeof(float); i < n; i++) h = (h ^ b[i]) * 0x01000193u;
    return h;
}

/* torch.rand(*shape) * scale + shift */
static Tensor *rand_scaled(int ndim, const int64_t *shape, double scale, double shift) {
    return torch_add_scalar(torch_mul_scalar(torch_rand(ndim, shape), scale), shift);
}

static Tensor *weighted_loss(Tensor *y, Tensor *w) { return torch_sum(torch_mul(y, w)); }

#define MAX_OUT 64
typedef struct { int n; const char *name[MAX_OUT]; Tensor *t[MAX_OUT]; } Outputs;

static void put(Outputs *o, const char *name, Tensor *t) {
    o->name[o->n] = name;
    o->t[o->n++] = t;
}

/* the generator's case functions, one for one */
static Outputs run_case(const char *op, const int64_t *d, bool fused) {
    Outputs o = {0};
    int64_t dim[1] = {-1}, dim0[1] = {0};
    if (!strcmp(op, "sum_last")) {
        Tensor *x = rand_scaled(2, d, 4.0, -2.0);
        put(&o, "sum", torch_sum_dim(x, 1, dim, false));
        put(&o, "mean", torch_mean_dim(x, 1, dim, false));
        put(&o, "sum_all", torch_sum(x));
    } else if (!strcmp(op, "sum_dim0")) {
        put(&o, "sum0", torch_sum_dim(rand_scaled(2, d, 4.0, -2.0), 1, dim0, false));
    } else if (!strcmp(op, "var_last")) {
        Tensor *x = torch_requires_grad_(rand_scaled(2, d, 4.0, -2.0), true), *w = rand_scaled(1, d, 4.0, -2.0);
        Tensor *y = torch_var_dim(x, 1, dim, false, false);
        torch_backward(weighted_loss(y, w), NULL);
        put(&o, "var", y);
        put(&o, "grad", x->grad);
    } else if (!strcmp(op, "softmax_last") || !strcmp(op, "log_softmax_last")) {
        Tensor *x = torch_requires_grad_(rand_scaled(2, d, 8.0, -4.0), true), *w = rand_scaled(2, d, 4.0, -2.0);
        Tensor *y = op[0] == 'l' ? torch_log_softmax(x, -1) : torch_softmax(x, -1);
        torch_backward(weighted_loss(y, w), NULL);
        put(&o, "y", y);
        put(&o, "grad", x->grad);
    } else if (!strcmp(op, "div_other")) {
        Tensor *a = torch_requires_grad_(rand_scaled(2, d, 4.0, -2.0), true);
        Tensor *b = torch_requires_grad_(rand_scaled(SHAPE(d[0], 1), 1.0, 0.5), true), *w = rand_scaled(2, d, 4.0, -2.0);
        torch_backward(weighted_loss(torch_div(a, b), w), NULL);
        put(&o, "grad_a", a->grad);
        put(&o, "grad_b", b->grad);
    } else if (!strcmp(op, "linear")) {
        Tensor *x = torch_requires_grad_(rand_scaled(3, d, 4.0, -2.0), true);
        Tensor *weight = torch_requires_grad_(rand_scaled(SHAPE(d[3], d[2]), 1.0, -0.5), true);
        Tensor *bias = torch_requires_grad_(rand_scaled(SHAPE(d[3]), 1.0, -0.5), true);
        Tensor *w = rand_scaled(SHAPE(d[0], d[1], d[3]), 4.0, -2.0);
        Tensor *y = torch_linear(x, weight, bias);
        torch_backward(weighted_loss(y, w), NULL);
        put(&o, "y", y);
        put(&o, "grad_x", x->grad);
        put(&o, "grad_weight", weight->grad);
        put(&o, "grad_bias", bias->grad);
    } else if (!strcmp(op, "layer_norm")) {
        Tensor *x = torch_requires_grad_(rand_scaled(3, d, 3.0, -1.0), true);
        nn_GPTLayerNorm *ln = nn_GPTLayerNorm_new(d[2]);
        bool prev = torch_no_grad_enter();                                        /* with torch.no_grad(): */
        torch_copy_(ln->scale, rand_scaled(SHAPE(d[2]), 0.2, 0.9));
        torch_copy_(ln->shift, rand_scaled(SHAPE(d[2]), 0.2, -0.1));
        torch_no_grad_exit(prev);
        Tensor *w = rand_scaled(3, d, 4.0, -2.0);
        bool was = nn_gpt_fused;
        nn_gpt_fused = fused; /* the fused op and the book's lines one by one: the same bits */
        Tensor *y = nn_GPTLayerNorm_forward(ln, x);
        nn_gpt_fused = was;
        torch_backward(weighted_loss(y, w), NULL);
        put(&o, "y", y);
        put(&o, "grad_x", x->grad);
        put(&o, "grad_scale", torch_clone(ln->scale->grad)); /* copies in the arena: the module is freed */
        put(&o, "grad_shift", torch_clone(ln->shift->grad));
        nn_free(&ln->module);
    } else if (!strcmp(op, "cross_entropy")) {
        int64_t n = d[0], c = d[1];
        Tensor *logits = torch_requires_grad_(rand_scaled(2, d, 4.0, -2.0), true);
        Tensor *pick = torch_rand(SHAPE(n)), *keep = torch_rand(SHAPE(n));
        int64_t *t = ac_malloc(sizeof(int64_t) * (size_t)n), kept = 0;
        for (int64_t i = 0; i < n; i++) {
            float p = ac_data_float(pick)[i] * (float)c; /* (pick * c).long() */
            t[i] = ac_data_float(keep)[i] < 0.3f ? -100 : (int64_t)p;
            kept += t[i] != -100;
        }
        if (!kept) t[0] = 0;
        Tensor *loss = torch_cross_entropy(logits, torch_tensor_long(t, SHAPE(n)), -100);
        free(t);
        torch_backward(torch_mul_scalar(loss, 1.5), NULL);
        put(&o, "loss", loss);
        put(&o, "grad", logits->grad);
    } else if (!strcmp(op, "rsqrt")) {
        Tensor *x = torch_requires_grad_(rand_scaled(2, d, 4.0, 0.01), true), *w = rand_scaled(2, d, 4.0, -2.0);
        Tensor *y = torch_rsqrt(x);
        torch_backward(weighted_loss(y, w), NULL);
        put(&o, "y", y);
        put(&o, "grad", x->grad);
    } else if (!strcmp(op, "rms_norm")) {
        Tensor *x = torch_requires_grad_(rand_scaled(3, d, 3.0, -1.0), true);
        nn_RMSNorm *norm = nn_RMSNorm_new(d[2], 1e-6);
        bool prev = torch_no_grad_enter();                                        /* with torch.no_grad(): */
        torch_copy_(norm->scale, rand_scaled(SHAPE(d[2]), 0.2, 0.9));
        torch_no_grad_exit(prev);
        Tensor *w = rand_scaled(3, d, 4.0, -2.0);
        bool was = nn_rmsnorm_fused;
        nn_rmsnorm_fused = fused; /* the fused op and the book's lines one by one: the same bits */
        Tensor *y = nn_RMSNorm_forward(norm, x);
        nn_rmsnorm_fused = was;
        torch_backward(weighted_loss(y, w), NULL);
        put(&o, "y", y);
        put(&o, "grad_x", x->grad);
        put(&o, "grad_scale", torch_clone(norm->scale->grad));
        nn_free(&norm->module);
    } else if (!strcmp(op, "gpt_grads") || !strcmp(op, "toylm_grads") || !strcmp(op, "llm_grads")) {
        /* one backward of a model: the engine's order decides how a tensor's gradients are summed */
        bool gpt = op[0] == 'g', llm = op[0] == 'l';
        int64_t b = d[0], t = d[1], vocab = gpt ? d[5] : llm ? d[6] : d[4];
        nn_Module *m;
        if (llm) { /* Qwen3Model or Llama3Model, 2 layers: d = b, t, emb, heads, kv groups, head_dim, vocab, llama */
            nn_LLMConfig cfg = {.arch = d[7] ? &nn_Llama3Model_arch : &nn_Qwen3Model_arch, .vocab_size = vocab, .context_length = t, .emb_dim = d[2], .n_heads = d[3],
                                .n_layers = 2, .hidden_dim = 2 * d[2] + 1, .head_dim = d[5], .qk_norm = d[7] == 0,
                                .n_kv_groups = d[4], .rope_base = 10000.0, .rms_norm_eps = d[7] ? 1e-5 : 1e-6,
                                .eos_token_id = -1};
            m = &nn_LLMModel_new(cfg)->module;
        } else if (gpt) {
            nn_GPTConfig cfg = {.vocab_size = vocab, .context_length = t, .emb_dim = d[2], .n_heads = d[3],
                                .n_layers = d[4], .drop_rate = 0.0, .qkv_bias = true};
            m = &nn_GPTModel_new(cfg)->module;
        } else {
            m = &nn_ToyLM_new(vocab, t, d[2], d[3])->module;
        }
        Tensor *xy[2];
        for (int k = 0; k < 2; k++) { /* (torch.rand(b, t) * vocab).long() */
            Tensor *r = torch_rand(SHAPE(b, t));
            int64_t *v = ac_malloc(sizeof(int64_t) * (size_t)(b * t));
            for (int64_t i = 0; i < b * t; i++) v[i] = (int64_t)(ac_data_float(r)[i] * (float)vocab);
            xy[k] = torch_tensor_long(v, SHAPE(b, t));
            free(v);
        }
        Tensor *logits = nn_forward(m, xy[0]);
        Tensor *loss = torch_cross_entropy(torch_flatten(logits, 0, 1), torch_flatten(xy[1], 0, -1), -100);
        torch_backward(loss, NULL);
        put(&o, "loss", loss);
        nn_TensorList ps = nn_named_parameters(m);
        for (int i = 0; i < ps.n && o.n < MAX_OUT; i++) /* copies in the arena: the model is freed */
            put(&o, ps.names[i], torch_clone(ps.tensors[i]->grad));
        if (llm) nn_LLMModel_free((nn_LLMModel *)m);
        else nn_free(m);
    } else {
        ck_abort_msg("exact_orders_golden.txt: unknown op '%s'", op);
    }
    return o;
}

START_TEST(test_exact_orders_vs_pytorch) {
    char *text = read_text(data_path("exact_orders_golden.txt")), *save = NULL;
    int cases = 0, checked = 0;
    for (char *line = strtok_r(text, "\n", &save); line;) {
        char op[32];
        int seed, used;
        int64_t d[8] = {0};
        ck_assert_msg(sscanf(line, "case %31s %d%n", op, &seed, &used) == 2, "golden: expected a case, got '%s'", line);
        int nd = 0;
        for (char *p = line + used, *end; nd < 8; p = end) {
            long long v = strtoll(p, &end, 10);
            if (end == p) break;
            d[nd++] = v;
        }
        char *outs[MAX_OUT];
        int nout = 0;
        for (line = strtok_r(NULL, "\n", &save); line && strncmp(line, "case ", 5); line = strtok_r(NULL, "\n", &save))
            outs[nout++] = line;
        bool two = !strcmp(op, "layer_norm") || !strcmp(op, "rms_norm"); /* fused, then op by op */
        for (int fused = 1; fused >= (two ? 0 : 1); fused--) {
            ac_mark m = ac_arena_mark();
            torch_manual_seed((uint64_t)seed);
            Outputs o = run_case(op, d, fused);
            ck_assert_msg(o.n == nout, "%s (seed %d): %d outputs, the golden has %d", op, seed, o.n, nout);
            for (int i = 0; i < nout; i++) {
                char name[64];
                unsigned long want;
                ck_assert_msg(sscanf(outs[i], "%63s %lu", name, &want) == 2 && !strcmp(name, o.name[i]),
                              "%s (seed %d): output %d is %s, the golden's '%s'", op, seed, i, o.name[i], outs[i]);
                ck_assert_msg(fnv_floats(o.t[i]) == (uint32_t)want, "%s %lld %lld %lld %lld (seed %d%s): %s differs from PyTorch's",
                              op, (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3], seed,
                              !two ? "" : fused ? ", fused" : ", op by op", name);
                checked++;
            }
            ac_arena_release(m);
        }
        cases++;
    }
    free(text);
    ck_assert_int_ge(cases, 237);
    ck_assert_int_ge(checked, 400);
}
END_TEST

Suite *suite_exact_orders(void) {
    Suite *s = suite_create("exact orders");
    TCase *tc = tcase_create("exact orders");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_exact_orders_vs_pytorch);
    suite_add_tcase(s, tc);
    return s;
}
