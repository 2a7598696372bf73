/* The book's chapter 4 bonus attention variants (nn/blocks/variants.h) against tests/tools/variants_ref.py, the
 * book's classes in PyTorch 1.13 (tests/data/variants_golden.txt, made by tests/tools/gen_variants_golden.py):
 * - the forward, the gradient of x and of every parameter under a weighted loss, and the cached path (a
 *   prefill, then one token at a time), bit for bit in exact math (FNV-1a of the float32 bits);
 * - the cached forward's rows equal the uncached forward's (the same bits: MLA up-projects the same latent
 *   rows, and a masked score adds exp(-inf) = 0, so each row's sums are the same);
 * - finite-difference checks of each module's backward (tests/test_grad.c's method; it fails a wrong one);
 * - bad shapes and caches refused before any work, with the cache kind's own words.
 * Not compared: one head with qkv_bias. There PyTorch's _reshape_to_heads is a view (.contiguous() of a
 * size-1 transpose is a no-op), so the gradient reaching W_UK and W_UV keeps the transposed layout of
 * keys.transpose(-2, -1)'s backward, and addmm's bias gradient sums each column's contiguous run (an inner
 * reduction); the C's linear sums the rows in order: the bias gradients differ by ulps (seed 4 of the
 * generator showed it; the weights' gradients and the forward are the same bits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"
#include "variants.h"

static uint32_t fnv_floats(Tensor *t) {
    t = torch_contiguous(t);
    uint32_t h = 0x811C9DC5u;
    const unsigned char *b = (const unsigned char *)ac_data_float(t);
    for (size_t i = 0, n = (size_t)torch_numel(t) * sizeof(float); i < n; i++) h = (h ^ b[i]) * 0x01000193u;
    return h;
}

/* torch.rand(*shape) * 2 - 1 */
static Tensor *rand_pm1(int ndim, const int64_t *shape) {
    return torch_sub_scalar(torch_mul_scalar(torch_rand(ndim, shape), 2.0), 1.0);
}

/* ---- against PyTorch ------------------------------------------------------------------------------- */

static void expect_hash(char **line, char **save, const char *key, const char *name, Tensor *t, const char *what) {
    char k[32], n[64];
    unsigned long want;
    ck_assert_msg(*line, "%s: the golden ends before %s %s", what, key, name);
    int got = name[0] ? sscanf(*line, "%31s %63s %lu", k, n, &want) : sscanf(*line, "%31s %lu", k, &want);
    ck_assert_msg(got == (name[0] ? 3 : 2) && !strcmp(k, key) && (!name[0] || !strcmp(n, name)),
                  "%s: expected '%s %s', the golden has '%s'", what, key, name, *line);
    ck_assert_msg(fnv_floats(t) == (uint32_t)want, "%s: %s %s differs from PyTorch's", what, key, name);
    *line = strtok_r(NULL, "\n", save);
}

/* the prefill, then one token at a time, through a fresh cache; the outputs concatenated */
static Tensor *mla_cached(nn_MultiHeadLatentAttention *m, Tensor *x0, int64_t prefill) {
    int64_t t = x0->shape[1];
    nn_LatentKVCache *c = nn_LatentKVCache_new(m->latent_dim, t);
    Tensor *outs[64];
    int n = 0;
    outs[n++] = nn_MultiHeadLatentAttention_forward(m, torch_slice(x0, 1, 0, prefill), 0, &c->base);
    for (int64_t i = prefill; i < t; i++)
        outs[n++] = nn_MultiHeadLatentAttention_forward(m, torch_slice(x0, 1, i, i + 1), i, &c->base);
    Tensor *out = torch_cat(n, outs, 1);
    nn_LayerCache_free(&c->base);
    return out;
}

START_TEST(test_vs_pytorch) {
    char *text = read_text(data_path("variants_golden.txt")), *save = NULL;
    int cases = 0, checked = 0;
    char *line = strtok_r(text, "\n", &save);
    while (line) {
        int seed, bias;
        long long b, t, d_in, d_out, heads, latent, prefill;
        ck_assert_msg(sscanf(line, "case mla %d %lld %lld %lld %lld %lld %lld %d %lld", &seed, &b, &t, &d_in, &d_out,
                             &heads, &latent, &bias, &prefill) == 9,
                      "variants_golden.txt: expected a case, got '%s'", line);
        char what[128];
        snprintf(what, sizeof what, "MultiHeadLatentAttention (seed %d, b %lld, t %lld, heads %lld, latent %lld)", seed, b,
                 t, heads, latent);
        line = strtok_r(NULL, "\n", &save);
        ac_mark mk = ac_arena_mark();
        torch_manual_seed((uint64_t)seed);
        nn_MultiHeadLatentAttention *m = nn_MultiHeadLatentAttention_new(d_in, d_out, 0.0, heads, bias, latent);
        Tensor *x = torch_requires_grad_(rand_pm1(SHAPE(b, t, d_in)), true);
        Tensor *out = nn_MultiHeadLatentAttention_forward(m, x, 0, NULL);
        Tensor *w = rand_pm1(out->ndim, out->shape);
        torch_backward(torch_sum(torch_mul(out, w)), NULL);
        expect_hash(&line, &save, "out", "", out, what);
        expect_hash(&line, &save, "grad", "x", x->grad, what);
        nn_TensorList ps = nn_named_parameters(&m->module);
        for (int i = 0; i < ps.n; i++) expect_hash(&line, &save, "grad", ps.names[i], ps.tensors[i]->grad, what);
        bool prev = torch_set_grad_enabled(false);
        Tensor *x0 = torch_slice(torch_detach(x), 0, 0, 1);
        Tensor *cached = mla_cached(m, x0, prefill);
        expect_hash(&line, &save, "cached", "", cached, what);
        /* the cached rows are the uncached forward's, bit for bit */
        Tensor *plain = torch_contiguous(nn_MultiHeadLatentAttention_forward(m, x0, 0, NULL));
        cached = torch_contiguous(cached);
        ck_assert_msg(!memcmp(ac_data_float(plain), ac_data_float(cached), sizeof(float) * (size_t)torch_numel(plain)),
                      "%s: the cached rows differ from the uncached forward's", what);
        torch_set_grad_enabled(prev);
        checked += 4 + ps.n;
        nn_free(&m->module);
        ac_arena_release(mk);
        cases++;
    }
    free(text);
    ck_assert_int_ge(cases, 5);
    ck_assert_int_ge(checked, 45);
}
END_TEST

/* the default math: the cached rows within float tolerance of the uncached (the vector kernels may sum a
 * row of T keys in another grouping than a row of t) */
START_TEST(test_mla_cached_default_math) {
    ac_set_exact(false);
    torch_manual_seed(11);
    nn_MultiHeadLatentAttention *m = nn_MultiHeadLatentAttention_new(40, 48, 0.0, 6, false, 0);
    ck_assert_int_eq(m->latent_dim, 16); /* max(16, 48 // 8) */
    bool prev = torch_set_grad_enabled(false);
    Tensor *x0 = rand_pm1(SHAPE(1, 21, 40));
    Tensor *plain = torch_contiguous(nn_MultiHeadLatentAttention_forward(m, x0, 0, NULL));
    Tensor *cached = torch_contiguous(mla_cached(m, x0, 5));
    const float *p = ac_data_float(plain), *c = ac_data_float(cached);
    for (int64_t i = 0; i < torch_numel(plain); i++)
        ck_assert_msg(fabsf(p[i] - c[i]) <= 1e-6f + 1e-5f * fabsf(p[i]), "element %lld: cached %.9g, uncached %.9g",
                      (long long)i, (double)c[i], (double)p[i]);
    torch_set_grad_enabled(prev);
    nn_free(&m->module);
    ac_set_exact(true);
}
END_TEST

/* ---- finite differences (tests/test_grad.c's method: L = sum(w * f), the 5-point stencil, h = 2^-6
 * on values that are multiples of 2^-10) --------------------------------------------------------------- */

#define H (1.0 / 64.0)
typedef Tensor *(*Fn)(void);
static Tensor *grad_inputs[6];
static int n_grad_inputs;

static double weighted(Fn f, const float *w, double *abs_sum) {
    ac_mark m = ac_arena_mark();
    bool prev = torch_set_grad_enabled(false);
    Tensor *out = torch_contiguous(f());
    torch_set_grad_enabled(prev);
    const float *o = ac_data_float(out);
    double s = 0, a = 0;
    for (int64_t i = 0, n = torch_numel(out); i < n; i++) s += (double)w[i] * o[i], a += fabs((double)w[i] * o[i]);
    ac_arena_release(m);
    if (abs_sum) *abs_sum = a;
    return s;
}

/* the worst error / tolerance over every element of every input; <= 1 passes */
static double gradcheck_ratio(Fn f) {
    for (int i = 0; i < n_grad_inputs; i++) torch_zero_grad_(grad_inputs[i]);
    Tensor *out = f();
    torch_manual_seed(99);
    Tensor *w = rand_pm1(out->ndim, out->shape);
    torch_backward(out, w);
    const float *wd = ac_data_float(w);
    double abs_sum;
    weighted(f, wd, &abs_sum);
    double noise = 2.0 * 1.5 * ldexp(abs_sum, -20) / H, worst = 0;
    for (int i = 0; i < n_grad_inputs; i++) {
        Tensor *x = grad_inputs[i];
        ck_assert_msg(x->grad != NULL, "input %d got no gradient", i);
        float *xd = ac_data_float(x);
        const float *g = ac_data_float(x->grad);
        for (int64_t j = 0, len = torch_numel(x); j < len; j++) {
            float x0 = xd[j];
            double l[4];
            const double steps[4] = {H, -H, 2 * H, -2 * H};
            for (int k = 0; k < 4; k++) {
                xd[j] = (float)(x0 + steps[k]);
                l[k] = weighted(f, wd, NULL);
            }
            xd[j] = x0;
            double num = (8.0 * (l[0] - l[1]) - (l[2] - l[3])) / (12.0 * H);
            double r = fabs(num - g[j]) / (noise + 1e-4 * fabs(g[j]));
            if (isnan(r) || r > worst) worst = isnan(r) ? INFINITY : r; /* a NaN fails */
        }
    }
    return worst;
}

/* values on the 2^-10 grid in [lo, hi) */
static void quantize(Tensor *t, double lo, double hi, uint64_t seed) {
    torch_manual_seed(seed);
    Tensor *r = torch_rand(t->ndim, t->shape);
    float *d = ac_data_float(t);
    const float *rd = ac_data_float(r);
    for (int64_t i = 0; i < torch_numel(t); i++) d[i] = (float)(round((lo + (hi - lo) * rd[i]) * 1024.0) / 1024.0);
}

static Tensor *leaf(uint64_t seed, double lo, double hi, int nd, const int64_t *shape) {
    Tensor *t = ac_persist(torch_zeros(nd, shape));
    quantize(t, lo, hi, seed);
    torch_requires_grad_(t, true);
    return t;
}

static void quantize_params(nn_Module *m, double scale) {
    nn_TensorList p = nn_named_parameters(m);
    for (int i = 0; i < p.n; i++) quantize(p.tensors[i], -scale, scale, 100 + (uint64_t)i);
}

static nn_MultiHeadLatentAttention *g_mla;
static Tensor *mla_fn(void) { return nn_MultiHeadLatentAttention_forward(g_mla, grad_inputs[0], 0, NULL); }
/* the output detached but for a zero path: a backward that misses every path must fail the check */
static bool g_wrong;
static Tensor *mla_wrong_fn(void) {
    Tensor *y = mla_fn();
    if (!g_wrong) return y;
    /* detach the value path: the gradient misses W_UV's contribution */
    return torch_add(torch_detach(y), torch_mul_scalar(y, 0.0));
}

START_TEST(test_mla_grad) {
    torch_manual_seed(7);
    g_mla = nn_MultiHeadLatentAttention_new(6, 8, 0.0, 2, true, 3);
    quantize_params(&g_mla->module, 0.5);
    grad_inputs[0] = leaf(4, -1, 1, SHAPE(2, 4, 6));
    grad_inputs[1] = g_mla->W_query->weight;
    grad_inputs[2] = g_mla->W_DKV->weight;
    grad_inputs[3] = g_mla->W_UK->weight;
    grad_inputs[4] = g_mla->W_UV->bias;
    grad_inputs[5] = g_mla->out_proj->weight;
    n_grad_inputs = 6;
    double r = gradcheck_ratio(mla_fn);
    ck_assert_msg(r <= 1.0, "MultiHeadLatentAttention: worst error %.3g of the tolerance", r);
    g_wrong = true; /* the check can fail: a backward that misses every path */
    n_grad_inputs = 1;
    double wrong = gradcheck_ratio(mla_wrong_fn);
    g_wrong = false;
    ck_assert_msg(wrong > 10.0, "a backward that misses the output's paths passed (ratio %.3g)", wrong);
    ac_free(grad_inputs[0]);
    nn_free(&g_mla->module);
}
END_TEST

/* ---- bad input --------------------------------------------------------------------------------------- */

START_TEST(test_mla_errors) {
    EXPECT_ERROR("d_out must be divisible by num_heads (d_out 10, num_heads 4)",
                 nn_MultiHeadLatentAttention_new(8, 10, 0.0, 4, false, 0));
    EXPECT_ERROR("latent_dim must be positive", nn_MultiHeadLatentAttention_new(8, 8, 0.0, 2, false, -1));
    EXPECT_ERROR("latent_dim (0) and capacity (4) must be positive", nn_LatentKVCache_new(0, 4));
    torch_manual_seed(1);
    nn_MultiHeadLatentAttention *m = nn_MultiHeadLatentAttention_new(8, 8, 0.0, 2, false, 4);
    nn_LatentKVCache *c = nn_LatentKVCache_new(4, 3);
    nn_DenseKVCache *d = nn_DenseKVCache_new(2, 3, 4);
    Tensor *x = torch_rand(SHAPE(1, 2, 8));
    EXPECT_ERROR("expected x of shape (b, num_tokens, d_in), got [2, 8]",
                 nn_MultiHeadLatentAttention_forward(m, torch_rand(SHAPE(2, 8)), 0, NULL));
    EXPECT_ERROR("expected a latent cache for this layer, got dense", nn_MultiHeadLatentAttention_forward(m, x, 0, &d->base));
    EXPECT_ERROR("the new tokens start at position 1, but the cache holds 0",
                 nn_MultiHeadLatentAttention_forward(m, x, 1, &c->base));
    EXPECT_ERROR("the latent cache holds one sequence, got a batch of 2",
                 nn_MultiHeadLatentAttention_forward(m, torch_rand(SHAPE(2, 1, 8)), 0, &c->base));
    EXPECT_ERROR("start_pos 2 without a cache", nn_MultiHeadLatentAttention_forward(m, x, 2, NULL));
    nn_MultiHeadLatentAttention_forward(m, x, 0, &c->base);
    ck_assert_int_eq(c->len, 2);
    EXPECT_ERROR("2 cached and 2 new tokens exceed its capacity 3", nn_MultiHeadLatentAttention_forward(m, x, 2, &c->base));
    ck_assert_int_eq(c->len, 2); /* refused before any work */
    ck_assert_int_eq(nn_LayerCache_nbytes(&c->base), 3 * 4 * 4);
    ck_assert_str_eq(c->base.kind->name, "latent");
    nn_LayerCache_reset(&c->base);
    ck_assert_int_eq(c->len, 0);
    nn_LayerCache_free(&c->base);
    nn_LayerCache_free(&d->base);
    nn_free(&m->module);
}
END_TEST

Suite *suite_variants(void) {
    Suite *s = suite_create("variants");
    TCase *tc = tcase("variants");
    tcase_add_test(tc, test_vs_pytorch);
    tcase_add_test(tc, test_mla_cached_default_math);
    tcase_add_test(tc, test_mla_grad);
    tcase_add_test(tc, test_mla_errors);
    suite_add_tcase(s, tc);
    return s;
}
