/* The book's GPT (nn/models/gpt/gpt.h, ./build/gpt): the ops it added (var/std, comparisons), the
 * classes' names, sizes and refusals, and the program against what ../shared/pytorch/gpt.py
 * prints for small configs (tests/data/gpt_golden.txt, made by tests/tools/gen_gpt_golden.py):
 *   --exact: every printed line the same, except the two initial losses, whose 17 digits
 *            agree to 1e-6 relative (float32 batch losses a few ulps apart add up there);
 *            every --log loss within 1e-5;
 *   default (fast) math: the Ep lines' losses within 2e-3 (1e-4 on each step's loss, through
 *            the three printed decimals), the texts the same, --log within 1e-4. */
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpt.h"
#include "internal.h"
#include "tests.h"

/* ---- the ops ------------------------------------------------------------------------------------- */

START_TEST(test_var_std_values) {
    Tensor *x = torch_tensor((float[]){1, 2, 3, 4, 6, 8}, SHAPE(2, 3));
    ck_assert_float_eq_tol(torch_item(torch_var(x, true)), 6.8f, 1e-6);        /* torch.var(x): 34 / 5 */
    ck_assert_float_eq_tol(torch_item(torch_var(x, false)), 34.0f / 6.0f, 1e-6); /* unbiased=False */
    ck_assert_float_eq_tol(torch_item(torch_std(x, true)), sqrtf(6.8f), 1e-6);
    Tensor *v = torch_var_dim(x, 1, (int64_t[]){-1}, false, true);              /* x.var(dim=-1, keepdim=True, unbiased=False) */
    ck_assert_int_eq(v->ndim, 2);
    ck_assert_int_eq(v->shape[1], 1);
    ck_assert_float_eq_tol(((float *)torch_contiguous(v)->data)[0], 2.0f / 3.0f, 1e-7);
    ck_assert_float_eq_tol(((float *)torch_contiguous(v)->data)[1], 8.0f / 3.0f, 1e-6);
    Tensor *s = torch_std_dim(x, 1, (int64_t[]){0}, true, false);               /* x.std(dim=0) */
    ck_assert_int_eq(s->ndim, 1);
    ck_assert_float_eq_tol(((float *)torch_contiguous(s)->data)[2], sqrtf(12.5f), 1e-6);
    ck_assert(isnan(torch_item(torch_var(torch_tensor((float[]){3}, SHAPE(1)), true)))); /* n - 1 = 0: nan, as torch */
    ck_assert_float_eq(torch_item(torch_var(torch_tensor((float[]){3}, SHAPE(1)), false)), 0.0f);
    /* in double: a large offset does not swallow a small spread (a float sum of squares would) */
    Tensor *big = torch_tensor((float[]){10000.5f, 10001.5f, 10002.5f, 10003.5f}, SHAPE(4));
    ck_assert_float_eq(torch_item(torch_var(big, false)), 1.25f);
    ck_assert_str_eq(torch_grad_fn_name(torch_var(torch_requires_grad_(torch_ones(SHAPE(3)), true), true)), "VarBackward0");
    ck_assert_str_eq(torch_grad_fn_name(torch_std(torch_requires_grad_(torch_ones(SHAPE(3)), true), true)), "StdBackward0");
}
END_TEST

static void assert_bools(Tensor *t, const char *want) {
    ck_assert_int_eq(t->dtype, AC_BOOL);
    ck_assert_int_eq(torch_numel(t), (int64_t)strlen(want));
    Tensor *c = torch_contiguous(t);
    for (int64_t i = 0; i < torch_numel(t); i++)
        ck_assert_msg(((bool *)c->data)[i] == (want[i] == '1'), "element %lld: want %c", (long long)i, want[i]);
}

START_TEST(test_comparisons) {
    Tensor *a = torch_tensor((float[]){0.1f, 1, 2, NAN}, SHAPE(4)), *b = torch_tensor((float[]){1, 1, 1, 1}, SHAPE(4));
    assert_bools(torch_lt(a, b), "1000");
    assert_bools(torch_le(a, b), "1100");
    assert_bools(torch_gt(a, b), "0010");
    assert_bools(torch_ge(a, b), "0110");
    assert_bools(torch_eq(a, b), "0100");
    assert_bools(torch_ne(a, b), "1011"); /* nan != anything */
    /* a float tensor against a Python number: the number as float32 (torch: tensor([0.1]) > 0.1 is False) */
    assert_bools(torch_gt_scalar(a, 0.1), "0110");
    assert_bools(torch_eq_scalar(a, 0.1), "1000");
    /* int64 against a whole number exactly, against a fraction in float */
    Tensor *big = torch_tensor_long((int64_t[]){16777217, 3}, SHAPE(2));
    assert_bools(torch_gt_scalar(big, 16777216), "10");
    assert_bools(torch_lt_scalar(big, 3.5), "01");
    /* broadcast: the book's logits < top_logits[:, -1] */
    Tensor *logits = torch_tensor((float[]){3, 1, 4, 1, 5}, SHAPE(1, 5));
    Tensor *top = torch_topk(logits, 2, -1, true, true).values;
    assert_bools(torch_lt(logits, torch_select(top, 1, -1)), "11010");
    EXPECT_ERROR("must match the size", torch_lt(torch_ones(SHAPE(2, 3)), torch_ones(SHAPE(4))));
    ck_assert(!torch_ones(SHAPE(2))->requires_grad || true);
}
END_TEST

/* ---- the classes ------------------------------------------------------------------------------- */

START_TEST(test_gpt_sizes_and_names) {
    ck_assert_int_eq(nn_GPTConfig_num_parameters(GPT_CONFIG_124M), 163009536); /* the book's 163,009,536 */
    nn_GPTConfig c = GPT_CONFIG_124M;
    c.qkv_bias = true;
    ck_assert_int_eq(nn_GPTConfig_num_parameters(c), 163009536 + 3 * 768 * 12);
    nn_GPTConfig small = {.vocab_size = 50, .context_length = 8, .emb_dim = 12, .n_heads = 3, .n_layers = 2,
                          .drop_rate = 0.1, .qkv_bias = true};
    torch_manual_seed(123);
    nn_GPTModel *m = nn_GPTModel_new(small);
    ck_assert_int_eq(nn_num_parameters(&m->module), nn_GPTConfig_num_parameters(small));
    /* PyTorch's state_dict keys, in its order (own parameters, own buffers, then children) */
    static const char *const want[] = {"tok_emb.weight", "pos_emb.weight", "trf_blocks.0.att.mask",
        "trf_blocks.0.att.W_query.weight", "trf_blocks.0.att.W_query.bias", "trf_blocks.0.att.W_key.weight",
        "trf_blocks.0.att.W_key.bias", "trf_blocks.0.att.W_value.weight", "trf_blocks.0.att.W_value.bias",
        "trf_blocks.0.att.out_proj.weight", "trf_blocks.0.att.out_proj.bias", "trf_blocks.0.ff.layers.0.weight",
        "trf_blocks.0.ff.layers.0.bias", "trf_blocks.0.ff.layers.2.weight", "trf_blocks.0.ff.layers.2.bias",
        "trf_blocks.0.norm1.scale", "trf_blocks.0.norm1.shift", "trf_blocks.0.norm2.scale", "trf_blocks.0.norm2.shift"};
    nn_TensorList sd = nn_state_dict(&m->module);
    ck_assert_int_eq(sd.n, 2 + 2 * 17 + 2 + 1);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) ck_assert_str_eq(sd.names[i], want[i]);
    ck_assert_str_eq(sd.names[sd.n - 3], "final_norm.scale");
    ck_assert_str_eq(sd.names[sd.n - 1], "out_head.weight");
    ck_assert_ptr_eq(nn_GPTModel_block(m, 1)->att->W_query->bias, sd.tensors[2 + 17 + 2]);
    ck_assert_str_eq(nn_GPTModel_block(m, 0)->ff->layers->module.children[1].m->type, "GELU");
    /* forward: (b, t) ids -> (b, t, vocab) logits; refusals name what is wrong */
    Tensor *x = torch_tensor_long((int64_t[]){1, 2, 3, 4, 5, 6}, SHAPE(2, 3));
    Tensor *logits = nn_GPTModel_forward(m, x);
    ck_assert_int_eq(logits->ndim, 3);
    ck_assert_int_eq(logits->shape[2], 50);
    EXPECT_ERROR("the input has 9 tokens, but context_length is 8", nn_GPTModel_forward(m, torch_zeros_dtype(SHAPE(1, 9), AC_INT64)));
    EXPECT_ERROR("index out of range", nn_GPTModel_forward(m, torch_tensor_long((int64_t[]){50}, SHAPE(1, 1))));
    EXPECT_ERROR("dtype int64", nn_GPTModel_forward(m, torch_zeros(SHAPE(1, 2))));
    nn_free(&m->module);
    small.emb_dim = 10;
    EXPECT_ERROR("emb_dim (10) must be divisible by n_heads (3)", nn_GPTModel_new(small));
    small.emb_dim = 12, small.n_layers = 0;
    EXPECT_ERROR("n_layers must be at least 1", nn_GPTModel_new(small));
    small.n_layers = 1, small.emb_dim = (int64_t)3 << 40;
    EXPECT_ERROR("too large", nn_GPTModel_new(small));
}
END_TEST

/* The KV cache's logits are the full forward's last row: a prompt of 4, then one token at a time
 * (the one-row products take the GEMV path, the full ones the tiled kernel: the same fused chain
 * over k, so the products agree bit for bit, also at odd sizes). */
START_TEST(test_kv_cache_same_bits) {
    nn_GPTConfig c = {.vocab_size = 97, .context_length = 12, .emb_dim = 24, .n_heads = 3, .n_layers = 2,
                      .drop_rate = 0.1, .qkv_bias = true};
    torch_manual_seed(11);
    nn_GPTModel *m = nn_GPTModel_new(c);
    nn_eval(&m->module);
    Tensor *ids = torch_randint(0, 97, SHAPE(1, 12));
    for (int exact = 0; exact < 2; exact++) {
        ac_set_exact(exact);
        bool prev = torch_no_grad_enter();
        nn_KVCache *kv = nn_KVCache_new(&m->lm, c.context_length);
        for (int64_t t = 4; t <= 12; t++) {
            Tensor *full = torch_select(torch_select(nn_GPTModel_forward(m, torch_slice(ids, 1, 0, t)), 1, t - 1), 0, 0);
            Tensor *cached = lm_forward_cached(&m->lm, torch_slice(ids, 1, kv->len, t), kv);
            /* exact: the same bits. Fast math sums a softmax row in vector lanes, so a row of 7 and
             * the same row padded with a masked (-inf) 8th key group their sums differently: the
             * cached keys of earlier tokens may then be an ulp off in the second block (measured:
             * 1.2e-7 once, at token 8) */
            if (exact)
                ck_assert_msg(torch_equal(full, torch_select(cached, 0, 0)), "exact math: token %lld's logits differ",
                              (long long)t);
            else
                ck_assert_msg(torch_allclose(torch_select(cached, 0, 0), full, 1e-5, 1e-6, false),
                              "fast math: token %lld's logits differ past 1e-5", (long long)t);
        }
        EXPECT_ERROR("exceed context_length 12", lm_forward_cached(&m->lm, torch_slice(ids, 1, 0, 1), kv));
        nn_KVCache_free(kv);
        torch_no_grad_exit(prev);
    }
    ac_set_exact(false);
    /* a view as the prompt (idx[:, 3:7], starting past its storage's first element) is read where it starts */
    Tensor *a = gpt_generate(m, torch_slice(ids, 1, 3, 7), 3, 12, 0.0, 0, -1);
    Tensor *b = gpt_generate(m, torch_contiguous(torch_clone(torch_slice(ids, 1, 3, 7))), 3, 12, 0.0, 0, -1);
    ck_assert(torch_equal(a, b));
    ck_assert(torch_equal(torch_slice(a, 1, 0, 4), torch_slice(ids, 1, 3, 7)));
    /* odd sizes: K = 13 (a tail past the 8-step transposes), N = 19; 1 to 5 rows against 12 */
    torch_manual_seed(3);
    Tensor *A = torch_randn(SHAPE(12, 13)), *W = torch_randn(SHAPE(19, 13));
    Tensor *all = torch_matmul(A, torch_t(W));
    for (int64_t r = 1; r <= 5; r++)
        ck_assert_msg(torch_equal(torch_matmul(torch_slice(A, 0, 0, r), torch_t(W)), torch_slice(all, 0, 0, r)),
                      "%lld rows: the one-row path and the tiled kernel differ", (long long)r);
    EXPECT_ERROR("for generating only", lm_forward_cached(&m->lm, torch_slice(ids, 1, 0, 1), NULL));
    nn_free(&m->module);
}
END_TEST

/* ---- the book's LayerNorm and GELU as one op each (tensor/ops/fused.c) against their lines op by op ----
 * nn_gpt_fused true runs ac_book_layer_norm / ac_book_gelu, false the module's lines one by one: the
 * output and every gradient must be the same bits (memcmp), in exact and fast math, at 1 and 2
 * threads, whatever else sends x a gradient and in which state (which decides how the fused backward
 * adds its terms to x's sum: see send_terms in fused.c). */

static nn_GPTLayerNorm *fz_ln;

/* Uniform in [-mag, mag), a leaf that requires grad when `grad`. */
static Tensor *fz_input(uint64_t seed, double mag, bool grad, int nd, const int64_t *shape) {
    torch_manual_seed(seed);
    Tensor *t = torch_sub_scalar(torch_mul_scalar(torch_rand(nd, shape), 2.0 * mag), mag);
    return grad ? torch_requires_grad_(t, true) : t;
}

static void assert_same_bits(Tensor *fused, Tensor *ops, const char *what, const char *where) {
    ck_assert_msg((fused == NULL) == (ops == NULL), "%s, %s: a gradient on one side only", where, what);
    if (!fused) return;
    int64_t n = torch_numel(ops);
    ck_assert_msg(torch_numel(fused) == n, "%s, %s: %lld elements, op by op %lld", where, what,
                  (long long)torch_numel(fused), (long long)n);
    const float *a = ac_data_float(torch_contiguous(fused)), *b = ac_data_float(torch_contiguous(ops));
    if (memcmp(a, b, sizeof(float) * (size_t)n) == 0) return;
    int64_t i = 0;
    while (i < n && memcmp(a + i, b + i, sizeof(float)) == 0) i++;
    ck_abort_msg("%s, %s: element %lld is %a fused, %a op by op", where, what, (long long)i, (double)a[i], (double)b[i]);
}

/* What one run leaves: the module's output and the gradients (copies). */
typedef struct { Tensor *out, *gx, *gscale, *gshift; } FzRun;

static Tensor *grad_copy(Tensor *t) { return t->grad ? torch_clone(t->grad) : NULL; }

/* The module (LayerNorm fz_ln, or GELU) on x0 (or on a non-leaf made from it), then the loss
 * sum((out [+ x | + 2 x]) * w), backward; `kind` decides what x's gradient holds when the
 * module's backward runs:
 *   0  x0 itself, a leaf (its .grad), twice over without zeroing (the second adds to the first);
 *   1  x = x0 * 1: x's first gradient (handed on as it is);
 *   2  out + x: x has the add's gradient first, which the add also sends on (not writable);
 *   3  out + 2 x: x has the product's new gradient first (added to in place). */
static FzRun fz_run(bool fused, bool ln, int kind, Tensor *x0, Tensor *w) {
    nn_gpt_fused = fused;
    x0->grad = NULL;
    if (ln) fz_ln->scale->grad = fz_ln->shift->grad = NULL;
    FzRun r = {0};
    for (int rep = 0; rep < (kind == 0 ? 2 : 1); rep++) {
        Tensor *x = kind == 0 ? x0 : torch_mul_scalar(x0, 1.0);
        Tensor *y = ln ? nn_GPTLayerNorm_forward(fz_ln, x) : nn_GPTGELU_forward(NULL, x);
        const char *want = !fused ? (ln ? "AddBackward0" : "MulBackward0")
                                  : (ln ? "BookLayerNormBackward0" : "BookGeluBackward0");
        if (y->requires_grad) ck_assert_str_eq(torch_grad_fn_name(y), want);
        r.out = y;
        if (kind == 2) y = torch_add(y, x);
        if (kind == 3) y = torch_add(y, torch_mul_scalar(x, 2.0));
        if (y->requires_grad) torch_backward(torch_sum(torch_mul(y, w)), NULL);
    }
    nn_gpt_fused = true;
    r.gx = grad_copy(x0);
    if (ln) r.gscale = grad_copy(fz_ln->scale), r.gshift = grad_copy(fz_ln->shift);
    return r;
}

static void fz_compare(FzRun f, FzRun o, const char *where) {
    assert_same_bits(f.out, o.out, "the output", where);
    assert_same_bits(f.gx, o.gx, "x's gradient", where);
    assert_same_bits(f.gscale, o.gscale, "scale's gradient", where);
    assert_same_bits(f.gshift, o.gshift, "shift's gradient", where);
}

START_TEST(test_fused_same_bits) {
    static const struct { int nd; int64_t shape[3]; } shapes[] = {
        {3, {2, 5, 16}}, {3, {3, 7, 13}}, {2, {4, 1}}, {1, {16}}, {3, {4, 64, 768}}, {3, {5, 67, 771}}};
    const double mags[] = {1.0, 20.0}; /* 20: tanh saturated (|m| past 9) */
    bool was_exact = ac_get_exact();
    int was_threads = torch_get_num_threads();
    atomic_store(&ac_pool_test_free_cores, 8); /* 2 threads, however busy the machine */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int m = 0; m < 2; m++)
            for (int ln = 0; ln < 2; ln++)
                for (int exact = 0; exact < 2; exact++) {
                    int nd = shapes[s].nd;
                    const int64_t *shape = shapes[s].shape;
                    int64_t D = shape[nd - 1];
                    ac_set_exact(exact);
                    ac_mark mark = ac_arena_mark();
                    if (ln) {
                        fz_ln = nn_GPTLayerNorm_new(D); /* scale and shift not 1 and 0: their gradients count */
                        float *sc = ac_data_float(fz_ln->scale), *sh = ac_data_float(fz_ln->shift);
                        for (int64_t j = 0; j < D; j++)
                            sc[j] = 0.5f + (float)j / (float)D, sh[j] = (float)(j % 5) * 0.25f - 0.5f;
                    }
                    Tensor *w = fz_input(7 + s, 1.0, false, nd, shape); /* the loss's weights: not a plain sum */
                    /* kinds 0-3 as fz_run says; LayerNorm also 4: x frozen, scale and shift not, and
                     * 5: scale and shift frozen (LoRA's), x not (both on kind 1's graph) */
                    for (int kind = 0; kind < (ln ? 6 : 4); kind++) {
                        Tensor *x0 = fz_input(100 * s + 10 * m + kind, mags[m], kind != 4, nd, shape);
                        if (ln) {
                            torch_requires_grad_(fz_ln->scale, kind != 5);
                            torch_requires_grad_(fz_ln->shift, kind != 5);
                        }
                        int k = kind > 3 ? 1 : kind;
                        FzRun at1 = {0};
                        for (int threads = 1; threads <= 2; threads++) {
                            torch_set_num_threads(threads);
                            char where[160];
                            snprintf(where, sizeof where, "%s on %s, |x| < %g, %s math, %d thread%s, kind %d",
                                     ln ? "LayerNorm" : "GELU", ac_shape_str(x0), mags[m], exact ? "exact" : "fast",
                                     threads, threads > 1 ? "s" : "", kind);
                            FzRun f = fz_run(true, ln, k, x0, w), o = fz_run(false, ln, k, x0, w);
                            fz_compare(f, o, where);
                            if (threads == 1) at1 = f;
                            else fz_compare(f, at1, where); /* and the same at 2 threads as at 1 */
                        }
                    }
                    if (ln) nn_free(&fz_ln->module);
                    ac_arena_release(mark);
                }
    atomic_store(&ac_pool_test_free_cores, -1);
    torch_set_num_threads(was_threads);
    ac_set_exact(was_exact);
}
END_TEST

/* No gradient wanted (no_grad, or every input frozen): no node, nothing kept, the same bits. */
START_TEST(test_fused_no_grad) {
    nn_GPTLayerNorm *ln = nn_GPTLayerNorm_new(12);
    Tensor *x = fz_input(3, 2.0, true, SHAPE(3, 12));
    for (int frozen = 0; frozen < 2; frozen++) {
        bool prev = frozen ? torch_set_grad_enabled(true) : torch_no_grad_enter();
        Tensor *in = frozen ? torch_detach(x) : x;
        torch_requires_grad_(ln->scale, !frozen);
        torch_requires_grad_(ln->shift, !frozen);
        Tensor *y[2][2];
        for (int fused = 0; fused < 2; fused++) {
            nn_gpt_fused = fused;
            y[fused][0] = nn_GPTLayerNorm_forward(ln, in);
            y[fused][1] = nn_GPTGELU_forward(NULL, in);
        }
        nn_gpt_fused = true;
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(!y[1][i]->requires_grad && y[1][i]->grad_fn == NULL, "%s: a node with nothing to differentiate",
                          i ? "GELU" : "LayerNorm");
            assert_same_bits(y[1][i], y[0][i], "the output", frozen ? "frozen" : "no_grad");
        }
        if (frozen) torch_set_grad_enabled(prev);
        else torch_no_grad_exit(prev);
    }
    /* what the fused ops do not take, the modules run op by op */
    ck_assert(!ac_book_gelu_fits(torch_zeros_dtype(SHAPE(2), AC_FLOAT64)));
    ck_assert(!ac_book_layer_norm_fits(x, x, ln->shift) && !ac_book_layer_norm_fits(torch_ones(SHAPE(3, 4)), ln->scale, ln->shift));
    EXPECT_ERROR("book_layer_norm: expected an input [*, n] (n >= 1) and a scale and a shift of [n], three tensors, but got "
                 "[3, 4], [12] and [12]", ac_book_layer_norm(torch_ones(SHAPE(3, 4)), ln->scale, ln->shift, 1e-5));
    nn_free(&ln->module);
}
END_TEST

/* The fused backwards against finite differences: test_grad.c's test_grad_book_ops (x, scale and
 * shift, GELU into tanh's flat tails). */

/* ---- ./build/gpt against gpt.py -------------------------------------------------------------------- */

typedef struct {
    char flags[512];
    int n_out, n_log;
    char *out[128];
    double log[2048];
    char lr[2048][32]; /* appendix-d: each step's learning rate, as Python's repr wrote it */
} Run;

static int load_runs_from(Run *runs, int max, const char *file) {
    char *text = read_text(data_path(file)), *save = NULL;
    int n = -1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "run ", 4)) {
            ck_assert(++n < max);
            memset(&runs[n], 0, sizeof runs[n]);
            snprintf(runs[n].flags, sizeof runs[n].flags, "%s", line + 4);
        } else if (!strncmp(line, "out ", 4)) {
            ck_assert(runs[n].n_out < 128);
            runs[n].out[runs[n].n_out++] = strdup(line + 4);
        } else if (n < 0) {
            continue; /* records before the first run (logits) */
        } else if (!strncmp(line, "log ", 4)) {
            long step;
            double l;
            char lr[32];
            if (sscanf(line + 4, "%ld %31s %lf", &step, lr, &l) == 3) /* appendix-d's "step lr loss" */
                snprintf(runs[n].lr[runs[n].n_log], sizeof runs[n].lr[0], "%s", lr);
            else
                ck_assert(sscanf(line + 4, "%ld %lf", &step, &l) == 2);
            ck_assert(step == runs[n].n_log && runs[n].n_log < 2048);
            runs[n].log[runs[n].n_log++] = l;
        }
    }
    free(text);
    return n + 1;
}

static int load_runs(Run *runs, int max) { return load_runs_from(runs, max, "gpt_golden.txt"); }

static void free_runs(Run *runs, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < runs[i].n_out; j++) free(runs[i].out[j]);
}

/* Runs ./build/gpt with the record's flags (and extra); its stdout split into lines (malloc'd). */
static int run_gpt(const char *flags, const char *extra, char ***lines, int *n) {
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s/gpt %s --tokenizer %s %s 2>/dev/null", build_dir(), flags, shared_path("data/gpt2"),
             extra);
    int rc = run_command(cmd, &out);
    *lines = NULL, *n = 0;
    int cap = 0;
    for (char *p = out; *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (*n == cap) *lines = realloc(*lines, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 64));
        (*lines)[(*n)++] = strndup(p, len);
        p += len + (nl ? 1 : 0);
    }
    free(out);
    return rc;
}

static void free_lines(char **l, int n) {
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

/* One printed line against gpt.py's: the initial losses to rel_init, Ep lines exactly or to ep_tol */
static void compare_line(const char *got, const char *want, double rel_init, double ep_tol, const char *what) {
    if (!strncmp(want, "Training loss: ", 15) || !strncmp(want, "Validation loss: ", 17)) {
        const char *g = strchr(got, ':'), *w = strchr(want, ':');
        ck_assert_msg(g && (g - got) == (w - want) && !strncmp(got, want, (size_t)(w - want)), "%s: '%s' for '%s'", what, got, want);
        double gv = atof(g + 1), wv = atof(w + 1);
        ck_assert_msg(fabs(gv - wv) <= rel_init * fabs(wv), "%s: '%s' for '%s' (rel %.2g)", what, got, want, fabs(gv - wv) / wv);
        return;
    }
    if (ep_tol > 0 && !strncmp(want, "Ep ", 3)) {
        double gt, gvl, wt, wvl;
        char gh[64], wh[64];
        ck_assert(sscanf(want, "%63[^:]: Train loss %lf, Val loss %lf", wh, &wt, &wvl) == 3);
        ck_assert_msg(sscanf(got, "%63[^:]: Train loss %lf, Val loss %lf", gh, &gt, &gvl) == 3, "%s: '%s'", what, got);
        ck_assert_str_eq(gh, wh);
        ck_assert_msg(fabs(gt - wt) <= ep_tol && fabs(gvl - wvl) <= ep_tol, "%s: '%s' for '%s'", what, got, want);
        return;
    }
    ck_assert_msg(!strcmp(got, want), "%s: '%s'\n  for gpt.py's '%s'", what, got, want);
}

static void check_log(const char *path, const double *want, int from, int n, double tol, const char *what) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: no --log", what);
    long step;
    double l;
    int k = from;
    while (fscanf(f, "step %ld loss %lf\n", &step, &l) == 2) {
        ck_assert_msg(step == k && k < n, "%s: log step %ld, want %d", what, step, k);
        ck_assert_msg(fabs(l - want[k]) <= tol, "%s: step %ld loss %.6f, gpt.py's %.6f", what, step, l, want[k]);
        k++;
    }
    fclose(f);
    ck_assert_msg(k == n, "%s: %d log lines, gpt.py has %d", what, k - from, n - from);
}

static void check_runs(bool train, const char *mode, double log_tol, double rel_init, double ep_tol) {
    static Run runs[16];
    int n = load_runs(runs, 16);
    char *dir = temp_dir(), extra[600], log[512];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        if (train != !strncmp(runs[i].flags, "train", 5)) continue;
        snprintf(extra, sizeof extra, "%s%s%s", mode, train ? " --log " : "", train ? log : "");
        char **lines;
        int nl;
        ck_assert_msg(run_gpt(runs[i].flags, extra, &lines, &nl) == 0, "gpt %s %s failed", runs[i].flags, mode);
        ck_assert_msg(nl == runs[i].n_out, "gpt %s: %d lines, gpt.py printed %d", runs[i].flags, nl, runs[i].n_out);
        for (int j = 0; j < nl; j++) compare_line(lines[j], runs[i].out[j], rel_init, ep_tol, runs[i].flags);
        if (train) check_log(log, runs[i].log, 0, runs[i].n_log, log_tol, runs[i].flags);
        free_lines(lines, nl);
        checked++;
    }
    ck_assert_int_ge(checked, train ? 4 : 5);
    free_runs(runs, n);
    remove_dir(dir);
}

/* appendix-d against gpt.py appendix-d (tests/data/appendix_d_golden.txt): every printed line, each
 * step's learning rate exactly (the schedule is double arithmetic, as Python's), its loss to log_tol */
static void check_appendix_d(const char *mode, double log_tol, double ep_tol) {
    static Run runs[4];
    int n = load_runs_from(runs, 4, "appendix_d_golden.txt");
    char *dir = temp_dir(), extra[600], log[512];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    ck_assert_int_ge(n, 2);
    for (int i = 0; i < n; i++) {
        snprintf(extra, sizeof extra, "%s --log %s", mode, log);
        char **lines;
        int nl;
        ck_assert_msg(run_gpt(runs[i].flags, extra, &lines, &nl) == 0, "gpt %s %s failed", runs[i].flags, mode);
        ck_assert_msg(nl == runs[i].n_out, "gpt %s: %d lines, gpt.py printed %d", runs[i].flags, nl, runs[i].n_out);
        for (int j = 0; j < nl; j++) compare_line(lines[j], runs[i].out[j], 0, ep_tol, runs[i].flags);
        FILE *f = fopen(log, "r");
        ck_assert(f != NULL);
        long step;
        char lr[32];
        double l;
        int k = 0;
        while (fscanf(f, "step %ld lr %31s loss %lf\n", &step, lr, &l) == 3) {
            ck_assert_msg(step == k && k < runs[i].n_log, "%s: log step %ld, want %d", runs[i].flags, step, k);
            ck_assert_msg(!strcmp(lr, runs[i].lr[k]), "%s: step %ld lr %s, gpt.py's %s", runs[i].flags, step, lr, runs[i].lr[k]);
            ck_assert_msg(fabs(l - runs[i].log[k]) <= log_tol, "%s: step %ld loss %.6f, gpt.py's %.6f", runs[i].flags, step,
                          l, runs[i].log[k]);
            k++;
        }
        fclose(f);
        ck_assert_msg(k == runs[i].n_log, "%s: %d log lines, gpt.py has %d", runs[i].flags, k, runs[i].n_log);
        free_lines(lines, nl);
    }
    free_runs(runs, n);
    remove_dir(dir);
}

START_TEST(test_appendix_d_exact) { check_appendix_d("--exact", 1e-5, 0); }
END_TEST
START_TEST(test_appendix_d_fast) { check_appendix_d("", 1e-4, 2e-3); }
END_TEST

START_TEST(test_gpt_train_exact) { check_runs(true, "--exact", 1e-5, 1e-6, 0); }
END_TEST
START_TEST(test_gpt_train_fast) { check_runs(true, "", 1e-4, 1e-5, 2e-3); }
END_TEST
START_TEST(test_gpt_generate) {
    check_runs(false, "--exact", 0, 0, 0);
    check_runs(false, "--threads 2", 0, 0, 0);
    check_runs(false, "--exact --no-kv-cache", 0, 0, 0); /* the book's loop: the same tokens */
    check_runs(false, "--no-kv-cache", 0, 0, 0);
}
END_TEST

/* --prompt - reads the prompt from stdin (its last newline dropped), and the text streams: the same line */
START_TEST(test_gpt_prompt_from_stdin) {
    static Run runs[16];
    int n = load_runs(runs, 16), r = -1;
    for (int i = 0; i < n; i++)
        if (strstr(runs[i].flags, "--prompt \"Every effort moves you\"")) r = i;
    ck_assert_int_ge(r, 0);
    char flags[600], cmd[2048], *out;
    snprintf(flags, sizeof flags, "%s", runs[r].flags);
    char *p = strstr(flags, "--prompt \"Every effort moves you\"");
    memmove(p, p + strlen("--prompt \"Every effort moves you\""), strlen(p + strlen("--prompt \"Every effort moves you\"")) + 1);
    snprintf(cmd, sizeof cmd, "printf 'Every effort moves you\\n' | %s/gpt %s --prompt - --tokenizer %s 2>&1", build_dir(),
             flags, shared_path("data/gpt2"));
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_int_eq(runs[r].n_out, 1);
    ck_assert_msg(!strncmp(out, runs[r].out[0], strlen(runs[r].out[0])) && out[strlen(runs[r].out[0])] == '\n',
                  "'%s' for '%s'", out, runs[r].out[0]);
    free(out);
    free_runs(runs, n);
}
END_TEST

/* train --epochs 1 --save, then --load with the record's 2 epochs: the lines (and log) of one
 * uninterrupted run, split where the first run stopped. */
START_TEST(test_gpt_resume) {
    static Run runs[16];
    int n = load_runs(runs, 16), r = -1;
    for (int i = 0; i < n; i++)
        if (strstr(runs[i].flags, "--epochs 2")) r = i;
    ck_assert_int_ge(r, 0);
    char *dir = temp_dir(), extra[1024], flags[600];
    snprintf(flags, sizeof flags, "%s", runs[r].flags);
    *strstr(flags, "--epochs 2") = 0; /* the flags before it */
    snprintf(extra, sizeof extra, "%s --exact --epochs 1 --save %s/ck.safetensors --log %s/log1.txt", strstr(runs[r].flags, "--epochs 2") + 10, dir, dir);
    char **l1, **l2;
    int n1, n2;
    ck_assert_int_eq(run_gpt(flags, extra, &l1, &n1), 0);
    int k = 0;
    while (k < n1 && strcmp(l1[k], "Output text:")) k++;
    ck_assert_int_lt(k, n1);
    for (int j = 0; j < k; j++) compare_line(l1[j], runs[r].out[j], 1e-6, 0, "the first epoch");
    char log1[600], log2[600];
    snprintf(log1, sizeof log1, "%s/log1.txt", dir);
    snprintf(log2, sizeof log2, "%s/log2.txt", dir);
    FILE *f = fopen(log1, "r");
    int steps1 = 0;
    for (int c; (c = fgetc(f)) != EOF;) steps1 += c == '\n';
    fclose(f);
    check_log(log1, runs[r].log, 0, steps1, 1e-5, "the first epoch's log");
    snprintf(extra, sizeof extra, "%s --exact --load %s/ck.safetensors --log %s", strstr(runs[r].flags, "--epochs 2") + 10, dir, log2);
    char flags2[700];
    snprintf(flags2, sizeof flags2, "%s --epochs 2", flags);
    ck_assert_int_eq(run_gpt(flags2, extra, &l2, &n2), 0);
    ck_assert_int_eq(n2, runs[r].n_out - k);
    for (int j = 0; j < n2; j++) compare_line(l2[j], runs[r].out[k + j], 1e-6, 0, "resumed");
    check_log(log2, runs[r].log, steps1, runs[r].n_log, 1e-5, "the resumed log");
    /* a model flag that contradicts the checkpoint's config is refused with both named, before anything runs */
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s/gpt train --data %s --tokenizer %s --layers 1 --emb-dim 8 --heads 2 --context 12 "
             "--load %s/ck.safetensors 2>&1", build_dir(), data_path("tokenizer_corpus.txt"), shared_path("data/gpt2"), dir);
    ck_assert_int_eq(run_command(cmd, &out), 1);
    ck_assert_msg(strstr(out, "--emb-dim 8 contradicts --load") && strstr(out, "emb_dim 24"), "%s", out);
    free(out);
    /* without model flags the checkpoint's config is the model's (generate's default context, 1024, is not) */
    snprintf(cmd, sizeof cmd, "%s/gpt generate --tokenizer %s --sample-tokens 3 --load %s/ck.safetensors 2>&1", build_dir(),
             shared_path("data/gpt2"), dir);
    ck_assert_msg(run_command(cmd, &out) == 0 && !strncmp(out, "Output text: Hello, I am", 24), "%s", out);
    free(out);
    free_lines(l1, n1);
    free_lines(l2, n2);
    free_runs(runs, n);
    remove_dir(dir);
}
END_TEST

/* Ctrl-C: the run stops after the step under way and saves it; --load goes on, and the two runs'
 * lines together are the uninterrupted run's (gpt.py's), wherever the signal fell. */
START_TEST(test_gpt_interrupt_and_resume) {
    static Run runs[16];
    int n = load_runs(runs, 16), r = -1;
    for (int i = 0; i < n; i++)
        if (strstr(runs[i].flags, "--epochs 2")) r = i;
    ck_assert_int_ge(r, 0);
    char *dir = temp_dir(), cmd[4096], out1[600];
    snprintf(out1, sizeof out1, "%s/out1.txt", dir);
    snprintf(cmd, sizeof cmd, "exec %s/gpt %s --tokenizer %s --exact --save %s/ck.safetensors --log %s/log1.txt > %s 2>%s/err1.txt",
             build_dir(), runs[r].flags, shared_path("data/gpt2"), dir, dir, out1, dir);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    bool sent = false;
    for (int tries = 0; tries < 6000 && !sent; tries++) { /* up to 60 s for the run to reach step 20 */
        char *text = NULL;
        FILE *f = fopen(out1, "r");
        if (f) {
            char buf[8192];
            size_t k = fread(buf, 1, sizeof buf - 1, f);
            buf[k] = 0;
            fclose(f);
            if (strstr(buf, "(Step 000020)")) sent = kill(pid, SIGINT) == 0;
        }
        (void)text;
        if (!sent) usleep(10000);
    }
    ck_assert_msg(sent, "the run never reached step 20");
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit status %d, want 130 (128 + SIGINT)", WEXITSTATUS(st));
    char path[700];
    snprintf(path, sizeof path, "%s/err1.txt", dir);
    char *err = read_text(path);
    ck_assert_msg(strstr(err, "stopped by signal 2 after step") && strstr(err, "saved to"), "%s", err);
    free(err);
    char **l2, extra[1200];
    int n2;
    snprintf(extra, sizeof extra, "--exact --load %s/ck.safetensors --log %s/log1.txt", dir, dir); /* the log goes on */
    ck_assert_int_eq(run_gpt(runs[r].flags, extra, &l2, &n2), 0);
    char *first = read_text(out1);
    int n1 = 0;
    for (char *p = first; *p; p++) n1 += *p == '\n';
    ck_assert_int_eq(n1 + n2, runs[r].n_out);
    char *save = NULL, *line = strtok_r(first, "\n", &save);
    for (int j = 0; j < n1; j++, line = strtok_r(NULL, "\n", &save)) compare_line(line, runs[r].out[j], 1e-6, 0, "before Ctrl-C");
    for (int j = 0; j < n2; j++) compare_line(l2[j], runs[r].out[n1 + j], 1e-6, 0, "resumed after Ctrl-C");
    snprintf(path, sizeof path, "%s/log1.txt", dir);
    check_log(path, runs[r].log, 0, runs[r].n_log, 1e-5, "the log across Ctrl-C");
    free(first);
    free_lines(l2, n2);
    free_runs(runs, n);
    remove_dir(dir);
}
END_TEST

/* Bad input: one line saying what is wrong, exit 1 (2 for a flag), never a crash. */
/* Every command against every flag that only other commands take: refused (exit 2) with the names
 * of those that take it, before any work; never run with the flag dropped. The table is the
 * specification (gpt --help): T train, G generate, K tokenize, D appendix-d. */
START_TEST(test_gpt_flags_per_command) {
    static const struct { const char *flag, *takers; } flags[] = {
        {"--decode", "K"}, {"--special allow", "K"}, {"--context 8", "TGD"}, {"--emb-dim 8", "TGD"},
        {"--heads 2", "TGD"}, {"--layers 1", "TGD"}, {"--drop 0", "TGD"}, {"--qkv-bias", "TGD"}, {"--seed 1", "TGD"},
        {"--prompt Hi", "TGD"}, {"--sample-tokens 3", "TG"}, {"--train-ratio 0.5", "TD"}, {"--batch 2", "TD"},
        {"--lr 0.1", "TD"}, {"--weight-decay 0", "TD"}, {"--epochs 1", "TD"}, {"--eval-freq 2", "TD"},
        {"--eval-iter 2", "TD"}, {"--log L", "TD"}, {"--save S", "TD"}, {"--load F", "TGD"}, {"--plot P", "TD"},
        {"--html H", "T"}, {"--gpt2 DIR", "G"}, {"--temperature 1", "G"}, {"--top-k 5", "G"}, {"--eos-id 1", "G"},
        {"--no-kv-cache", "TGD"}, {"--warmup 0.5", "D"}, {"--initial-lr 0.1", "D"}, {"--min-lr 0", "D"},
        {"--clip 1", "D"},
    };
    static const struct { char letter; const char *name; } commands[] = {
        {'T', "train"}, {'G', "generate"}, {'K', "tokenize"}, {'D', "appendix-d"}};
    char cmd[1024], *out;
    int refused = 0;
    for (size_t c = 0; c < 4; c++)
        for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) {
            if (strchr(flags[k].takers, commands[c].letter)) continue;
            char name[32];
            sscanf(flags[k].flag, "%31s", name);
            snprintf(cmd, sizeof cmd, "%s/gpt %s %s </dev/null 2>&1", build_dir(), commands[c].name, flags[k].flag);
            int rc = run_command(cmd, &out);
            char want[128];
            snprintf(want, sizeof want, "gpt: %s goes with ", name);
            ck_assert_msg(rc == 2 && strstr(out, want) && strstr(out, commands[c].name),
                          "gpt %s %s: rc %d, want 2 and '%s...': %s", commands[c].name, flags[k].flag, rc, want, out);
            for (const char *t = flags[k].takers; *t; t++) /* it names every command that takes the flag */
                for (size_t o = 0; o < 4; o++)
                    if (commands[o].letter == *t)
                        ck_assert_msg(strstr(out, commands[o].name), "gpt %s %s: '%s' does not name %s", commands[c].name,
                                      flags[k].flag, out, commands[o].name);
            free(out);
            refused++;
        }
    ck_assert_int_ge(refused, 50);
    /* the flags that depend on another: --data without training, the sizes with --gpt2, a second input */
    static const struct { const char *args, *needle; } more[] = {
        {"generate --data x", "--data goes with train and appendix-d (or with --tokenizer train:N"},
        {"tokenize --data x", "--data goes with train and appendix-d"},
        {"generate --gpt2 DIR --emb-dim 8", "--emb-dim is not used with --gpt2"},
        {"train extra.txt", "train takes no input file"},
        {"fly", "unknown command 'fly'"},
        {"appendix-d --warmup 1", "--warmup 1 is the share"},
        {"appendix-d --min-lr 0.01", "--min-lr 0.01 is above the peak learning rate --lr 0.001"},
    };
    for (size_t k = 0; k < sizeof more / sizeof *more; k++) {
        snprintf(cmd, sizeof cmd, "%s/gpt %s </dev/null 2>&1", build_dir(), more[k].args);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == 2 && strstr(out, more[k].needle), "gpt %s: rc %d: %s", more[k].args, rc, out);
        free(out);
    }
}
END_TEST

START_TEST(test_gpt_refusals) {
    char *dir = temp_dir(), cmd[4096], *out, path[600];
    snprintf(path, sizeof path, "%s/short.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("Too short a text for one window.", f);
    fclose(f);
    const char *tok = shared_path("data/gpt2");
    struct { const char *flags; int rc; const char *needle; } cases[] = {
        {"train --data SHORT --layers 1 --emb-dim 8 --heads 2 --context 16", 1, "the loader yields nothing"},
        {"train --data SHORT --emb-dim 770", 1, "emb_dim (770) must be divisible by n_heads (12)"},
        {"train --data SHORT --emb-dim 999999999999 --heads 1", 1, "too large"},
        {"train --data SHORT --context 0", 2, "--context expects an integer from 1"},
        {"train --data SHORT --drop 1.5", 2, "--drop expects a number from 0 to 1"},
        {"train --data SHORT --lr", 2, "--lr needs a value"},
        {"train --data SHORT --bogus", 2, "unknown flag --bogus"},
        {"train --data /nonexistent/text.txt --layers 1 --emb-dim 8 --heads 2", 1, "cannot open /nonexistent/text.txt"},
        {"train --data SHORT --save /nonexistent/dir/x.safetensors", 1, "--save"},
        {"generate --layers 1 --emb-dim 8 --heads 2 --context 8 --top-k 60000", 1, "top_k (60000) is larger than the vocabulary"},
        {"generate --layers 1 --emb-dim 8 --heads 2 --context 8 --load /nonexistent.safetensors", 1, "--load"},
        {"generate --layers 1 --emb-dim 8 --heads 2 --context 8 --prompt ''", 1, "--prompt is empty"},
        {"fly", 2, "unknown command 'fly'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char flags[1200];
        const char *s = strstr(cases[i].flags, "SHORT");
        if (s) snprintf(flags, sizeof flags, "%.*s%s%s", (int)(s - cases[i].flags), cases[i].flags, path, s + 5);
        else snprintf(flags, sizeof flags, "%s", cases[i].flags);
        snprintf(cmd, sizeof cmd, "%s/gpt --tokenizer %s %s 2>&1", build_dir(), tok, flags);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == cases[i].rc && strstr(out, cases[i].needle), "gpt %s: rc %d, want %d and '%s' in: %s", flags,
                      rc, cases[i].rc, cases[i].needle, out);
        free(out);
    }
    remove_dir(dir);
}
END_TEST

/* ---- GPT-2's weights in Hugging Face's layout (tests/tools/gen_gpt2_golden.py draws the same) ---- */

enum { HV = 50257, HC = 32, HE = 16, HL = 2 };

/* config.json + model.safetensors of the tool's weights: torch.manual_seed(5), randn(shape) * 0.02
 * per key in order (LayerNorm weights 1 + randn * 0.1), the attn.bias buffers besides; `skip` leaves
 * a key out, `bad` gives it one column too few, `config` replaces config.json's text. */
void write_gpt2(const char *dir, bool prefix, const char *skip, const char *bad, const char *config) {
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs(config ? config : "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], "
                   "\"layer_norm_epsilon\": 1e-05, \"n_ctx\": 32, \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, "
                   "\"n_positions\": 32, \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, "
                   "\"max_length\": 50, \"note\": \"a \\\"quoted\\\" }\"}}, \"vocab_size\": 50257}", f);
    fclose(f);
    static char names[64][96];
    Tensor *ts[64];
    int n = 0;
    torch_manual_seed(5);
#define DRAW(nm, ln, ...) do {                                                                    \
        Tensor *t_ = torch_randn(SHAPE(__VA_ARGS__));                                            \
        t_ = (ln) ? torch_add_scalar(torch_mul_scalar(t_, 0.1), 1.0) : torch_mul_scalar(t_, 0.02); \
        snprintf(names[n], sizeof names[n], "%s%s", prefix ? "transformer." : "", nm);            \
        if (bad && !strcmp(nm, bad)) t_ = torch_slice(t_, t_->ndim - 1, 0, t_->shape[t_->ndim - 1] - 1); \
        if (!(skip && !strcmp(nm, skip))) ts[n++] = t_;                                           \
    } while (0)
    DRAW("wte.weight", false, HV, HE);
    DRAW("wpe.weight", false, HC, HE);
    for (int b = 0; b < HL; b++) {
        char k[12][64];
        const char *suffix[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                  "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                  "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
        for (int i = 0; i < 12; i++) snprintf(k[i], sizeof k[i], "h.%d.%s", b, suffix[i]);
        DRAW(k[0], true, HE); DRAW(k[1], false, HE); DRAW(k[2], false, HE, 3 * HE); DRAW(k[3], false, 3 * HE);
        DRAW(k[4], false, HE, HE); DRAW(k[5], false, HE); DRAW(k[6], true, HE); DRAW(k[7], false, HE);
        DRAW(k[8], false, HE, 4 * HE); DRAW(k[9], false, 4 * HE); DRAW(k[10], false, 4 * HE, HE); DRAW(k[11], false, HE);
    }
    DRAW("ln_f.weight", true, HE);
    DRAW("ln_f.bias", false, HE);
#undef DRAW
    for (int b = 0; b < HL; b++) { /* the causal-mask buffers GPT-2's files carry: skipped */
        snprintf(names[n], sizeof names[n], "%sh.%d.attn.bias", prefix ? "transformer." : "", b);
        ts[n++] = torch_tril(torch_ones(SHAPE(1, 1, HC, HC)), 0);
    }
    const char *nm[64];
    for (int i = 0; i < n; i++) nm[i] = names[i];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(safetensors_save(path, (nn_TensorList){n, nm, ts}, 0, NULL, err, sizeof err), "%s", err);
}

START_TEST(test_gpt2_weights) {
    char *dir = temp_dir(), cmd[4096], *out, err[768];
    write_gpt2(dir, true, NULL, NULL, NULL);
    /* the logits of "Hello, I am"'s last token against gpt.py's model after the book's mapping */
    nn_GPTModel *m = nn_GPTModel_from_gpt2(dir, err, sizeof err);
    ck_assert_msg(m != NULL, "%s", err);
    ck_assert(m->cfg.qkv_bias && m->cfg.drop_rate == 0 && m->cfg.context_length == HC && m->cfg.n_heads == 2);
    nn_eval(&m->module);
    Tensor *logits = nn_GPTModel_forward(m, torch_tensor_long((int64_t[]){15496, 11, 314, 716}, SHAPE(1, 4)));
    Golden g = golden("gpt2_golden.txt", "logits");
    assert_close(ac_cdata(torch_contiguous(torch_slice(torch_select(torch_select(logits, 0, 0), 0, -1), 0, 0, 64))), g.v, 64,
                 1e-6, 1e-5, "GPT-2 logits");
    nn_free(&m->module);
    /* generate --gpt2: gpt.py's lines, with and without the "transformer." prefix, with and without the cache */
    static Run runs[8];
    int n = load_runs_from(runs, 8, "gpt2_golden.txt");
    ck_assert_int_eq(n, 3);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) write_gpt2(dir, false, NULL, NULL, NULL);
        for (int i = 0; i < n; i++) {
            snprintf(cmd, sizeof cmd, "%s/gpt generate --gpt2 %s --tokenizer %s %.600s%s 2>&1", build_dir(), dir,
                     shared_path("data/gpt2"), runs[i].flags, pass && i == 2 ? " --no-kv-cache" : "");
            ck_assert_int_eq(run_command(cmd, &out), 0);
            ck_assert_msg(!strncmp(out, runs[i].out[0], strlen(runs[i].out[0])) && out[strlen(runs[i].out[0])] == '\n',
                          "'%s'\n  for gpt.py's '%s'", out, runs[i].out[0]);
            free(out);
        }
    }
    free_runs(runs, n);
    /* refusals name the key, the shapes, the config field */
    struct { const char *skip, *bad, *config, *flags, *needle; } bad[] = {
        {"ln_f.bias", NULL, NULL, "", "model.safetensors has no \"transformer.ln_f.bias\""},
        {NULL, "h.1.attn.c_attn.weight", NULL, "", "\"h.1.attn.c_attn.weight\" is float32 [16, 47]; config.json makes it float32 [16, 48]"},
        {NULL, NULL, "{\"n_head\": 2, \"n_layer\": 2, \"n_positions\": 32, \"vocab_size\": 50257}", "", "has no \"n_embd\""},
        {NULL, NULL, "{\"n_embd\": 15, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 32, \"vocab_size\": 50257}", "",
         "emb_dim (15) must be divisible by n_heads (2)"},
        {NULL, NULL, "[1, 2", "", "not a JSON object"},
        {NULL, NULL, NULL, "--context 64", "--context 64 is larger than the model's context_length (32"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_gpt2(dir, i % 2 == 0, bad[i].skip, bad[i].bad, bad[i].config);
        snprintf(cmd, sizeof cmd, "%s/gpt generate --gpt2 %s --tokenizer %s %s 2>&1", build_dir(), dir,
                 shared_path("data/gpt2"), bad[i].flags);
        ck_assert_int_eq(run_command(cmd, &out), 1);
        ck_assert_msg(strstr(out, bad[i].needle), "case %zu: '%s' not in: %s", i, bad[i].needle, out);
        free(out);
    }
    remove_dir(dir);
}
END_TEST

Suite *suite_gpt(void) {
    Suite *s = suite_create("gpt");
    TCase *tc = tcase("gpt");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_var_std_values);
    tcase_add_test(tc, test_comparisons);
    tcase_add_test(tc, test_gpt_sizes_and_names);
    tcase_add_test(tc, test_kv_cache_same_bits);
    suite_add_tcase(s, tc);
    tc = tcase("gpt_program"); /* runs of ./build/gpt against gpt.py's lines */
    tcase_set_tags(tc, "programs");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_gpt_train_exact);
    tcase_add_test(tc, test_gpt_train_fast);
    tcase_add_test(tc, test_appendix_d_exact);
    tcase_add_test(tc, test_appendix_d_fast);
    tcase_add_test(tc, test_gpt_generate);
    tcase_add_test(tc, test_gpt_resume);
    tcase_add_test(tc, test_gpt_prompt_from_stdin);
    tcase_add_test(tc, test_gpt_refusals);
    tcase_add_test(tc, test_gpt_flags_per_command);
    tcase_add_test(tc, test_gpt_interrupt_and_resume);
    tcase_add_test(tc, test_gpt2_weights);
    suite_add_tcase(s, tc);
    TCase *fz = tcase("gpt_fused"); /* the book's LayerNorm and GELU fused, against their lines op by op */
    tcase_set_timeout(fz, 600);
    tcase_add_test(fz, test_fused_same_bits);
    tcase_add_test(fz, test_fused_no_grad);
    suite_add_tcase(s, fz);
    return s;
}
