/* The generator against golden streams (tests/data/rng_golden.txt, made by the
 * spec's rng_reference.py, which is bit-exact with PyTorch 1.13): every value
 * must be identical, bit for bit (tolerance 0). */
#include <stdlib.h>

#include "tests.h"

static void assert_exact(Tensor *t, const char *name) {
    Golden g = golden("rng_golden.txt", name);
    ck_assert_int_eq(g.n, torch_numel(t));
    Tensor *c = torch_contiguous(t);
    for (int i = 0; i < g.n; i++) {
        /* %.9g round-trips float32: the golden value, rounded to float, is the exact value */
        double v = c->dtype == AC_INT64 ? (double)ac_data_long(c)[i] : (double)ac_data_float(c)[i];
        double want = c->dtype == AC_INT64 ? g.v[i] : (double)(float)g.v[i];
        ck_assert_msg(v == want, "%s[%d]: got %.9g, want %.9g", name, i, v, want);
    }
}

START_TEST(test_rand_randn_sizes) {
    const uint64_t seeds[] = {0, 1, 42, 123, 2024, 987654321, 4294967301ULL, 4294967295ULL};
    const int few[] = {1, 5, 15, 16, 17, 31, 32, 33, 100};
    char name[64];
    for (int s = 0; s < 8; s++) {
        bool all = seeds[s] == 0 || seeds[s] == 123;
        int count = all ? 41 : 9;
        for (int k = 0; k < count; k++) {
            int64_t n = all ? (k < 40 ? k + 1 : 100) : few[k];
            torch_manual_seed(seeds[s]);
            snprintf(name, sizeof name, "rand.%llu.%lld", (unsigned long long)seeds[s], (long long)n);
            assert_exact(torch_rand(SHAPE(n)), name);
            torch_manual_seed(seeds[s]);
            snprintf(name, sizeof name, "randn.%llu.%lld", (unsigned long long)seeds[s], (long long)n);
            assert_exact(torch_randn(SHAPE(n)), name);
        }
    }
}
END_TEST

static uint64_t fnv1a(const float *v, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const unsigned char *b = (const unsigned char *)v;
    for (int64_t i = 0; i < n * 4; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

START_TEST(test_randn_150000) {
    for (int k = 0; k < 2; k++) {
        uint64_t seed = k ? 0 : 123;
        char name[64];
        torch_manual_seed(seed);
        Tensor *t = torch_randn(SHAPE(150000));
        float *v = ac_data_float(t);
        snprintf(name, sizeof name, "randn150000.%llu.head", (unsigned long long)seed);
        assert_exact(torch_slice(t, 0, 0, 8), name);
        snprintf(name, sizeof name, "randn150000.%llu.tail", (unsigned long long)seed);
        assert_exact(torch_slice(t, 0, -8, 150000), name);
        snprintf(name, sizeof name, "randn150000.%llu.fnv1a", (unsigned long long)seed);
        /* the hash is an integer above 2^53: compare its text, not a double */
        char *txt = read_text(data_path("rng_golden.txt"));
        char *p = strstr(txt, name);
        ck_assert(p != NULL);
        unsigned long long want = strtoull(p + strlen(name) + 3, NULL, 10);
        free(txt);
        ck_assert_msg(fnv1a(v, 150000) == want, "randn(150000) seed %llu: the stream differs", (unsigned long long)seed);
    }
}
END_TEST

/* The same calls, in the same order, as gen_golden.py's interleaved sequence. */
START_TEST(test_interleaved_sequence) {
    torch_manual_seed(123);
    assert_exact(torch_rand(SHAPE(3)), "seq.rand3");
    assert_exact(torch_randn(SHAPE(5)), "seq.randn5");
    assert_exact(torch_rand(SHAPE(2)), "seq.rand2");
    assert_exact(torch_randn(SHAPE(16)), "seq.randn16");
    assert_exact(torch_randn(SHAPE(1)), "seq.randn1");
    assert_exact(torch_randint(0, 10, SHAPE(8)), "seq.randint");
    assert_exact(torch_randint(-5, 5, SHAPE(6)), "seq.randint_neg");
    assert_exact(torch_randint(0, (int64_t)1 << 40, SHAPE(4)), "seq.randint_big");
    assert_exact(torch_randperm(10), "seq.randperm10");
    const int ns[] = {5, 15, 16, 20, 33};
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "seq.normal_%d", ns[i]);
        assert_exact(torch_normal_(torch_empty(SHAPE(ns[i]), AC_FLOAT32), 0.5, 2.0), name);
    }
    assert_exact(torch_uniform_(torch_empty(SHAPE(10), AC_FLOAT32), -0.7, 1.3), "seq.uniform10");
    nn_Linear *lin = nn_Linear_new(3, 4, true);
    assert_exact(lin->weight, "seq.linear_w");
    assert_exact(lin->bias, "seq.linear_b");
    nn_free(&lin->module);
    assert_exact(torch_bernoulli_(torch_empty(SHAPE(12), AC_FLOAT32), 0.3), "seq.bernoulli");
    assert_exact(torch_exponential_(torch_empty(SHAPE(5), AC_FLOAT32), 1.5), "seq.exponential");
    float w2[] = {0.1f, 0.2f, 0.3f, 0.4f, 1.0f, 0.0f, 2.0f, 3.0f};
    Tensor *m1 = torch_multinomial(torch_tensor(w2, SHAPE(2, 4)), 1, false);
    Tensor *m2 = torch_multinomial(torch_tensor(w2, SHAPE(2, 4)), 1, false);
    int64_t both[2] = {ac_data_long(m1)[0], ac_data_long(m2)[1]};
    assert_exact(torch_tensor_long(both, SHAPE(2)), "seq.multinomial");
    float w5[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    assert_exact(torch_view(torch_multinomial(torch_tensor(w5, SHAPE(1, 5)), 3, false), SHAPE(3)), "seq.multinomial3");
    assert_exact(torch_view(torch_multinomial(torch_tensor(w2, SHAPE(1, 4)), 5, true), SHAPE(5)), "seq.multinomial_repl");
    /* F.dropout(ones, 0.5): the multiplier itself */
    assert_exact(torch_dropout(torch_ones(SHAPE(8)), 0.5, true), "seq.dropout");
    assert_exact(torch_rand(SHAPE(4)), "seq.after");
}
END_TEST

START_TEST(test_seed_semantics) {
    /* only the low 32 bits matter; -1 wraps to 2^64-1; reseeding clears the normal cache */
    torch_manual_seed(5);
    float a = ac_data_float(torch_rand(SHAPE(1)))[0];
    torch_manual_seed(((uint64_t)7 << 32) | 5);
    ck_assert(ac_data_float(torch_rand(SHAPE(1)))[0] == a);
    torch_manual_seed(123);
    torch_randn(SHAPE(1)); /* leaves a cached value */
    torch_manual_seed(123);
    float first = ac_data_float(torch_randn(SHAPE(1)))[0];
    torch_manual_seed(123);
    ck_assert(ac_data_float(torch_randn(SHAPE(1)))[0] == first);
    torch_manual_seed(123);
    int64_t *p = ac_data_long(torch_randperm(6));
    const int64_t want[] = {4, 5, 0, 3, 2, 1}; /* the spec's example */
    for (int i = 0; i < 6; i++) ck_assert_int_eq(p[i], want[i]);
}
END_TEST

/* bernoulli_ on a contiguous tensor draws a run of words at a time; on a strided view one element
 * at a time. Both are the same draws in the same order: from a state part-way through, over
 * several twists (two words an element, 624 a twist), and the generator ends in the same place. */
START_TEST(test_bernoulli_runs_equal_draws) {
    torch_Generator a, b;
    torch_generator_manual_seed(&a, 77);
    torch_generator_manual_seed(&b, 77);
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(ac_random32(&a), ac_random32(&b));
    Tensor *runs = torch_bernoulli_gen_(torch_empty(SHAPE(2, 1501), AC_FLOAT32), 0.37, &a);
    Tensor *each = torch_t(torch_empty(SHAPE(1501, 2), AC_FLOAT32));
    ck_assert(!torch_is_contiguous(each));
    torch_bernoulli_gen_(each, 0.37, &b);
    const float *r = ac_data_float(runs);
    int64_t ones = 0;
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 1501; j++) {
            float e = ((float *)each->data)[j * 2 + i];
            ck_assert_msg(r[i * 1501 + j] == e, "element [%lld, %lld]: %g, one at a time %g", (long long)i, (long long)j,
                          r[i * 1501 + j], e);
            ones += e == 1.0f;
        }
    ck_assert(ones > 900 && ones < 1300); /* about 0.37 of 3002 */
    ck_assert_uint_eq(ac_random32(&a), ac_random32(&b));
}
END_TEST

START_TEST(test_embedding_init_rows) {
    /* spec: Embedding(50000, 3) with seed 123 uses the fill path over 150000 values */
    torch_manual_seed(123);
    nn_Embedding *e = nn_Embedding_new(50000, 3);
    assert_repr(torch_select(e->weight, 0, 0), "tensor([ 0.3374, -0.1778, -0.3035], grad_fn=<SelectBackward0>)");
    assert_repr(torch_select(e->weight, 0, 260), "tensor([ 0.8209, -0.6354, -0.4386], grad_fn=<SelectBackward0>)");
    nn_free(&e->module);
}
END_TEST

Suite *suite_rng(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase("streams");
    tcase_add_test(tc, test_rand_randn_sizes);
    tcase_add_test(tc, test_randn_150000);
    tcase_add_test(tc, test_interleaved_sequence);
    tcase_add_test(tc, test_seed_semantics);
    tcase_add_test(tc, test_embedding_init_rows);
    tcase_add_test(tc, test_bernoulli_runs_equal_draws);
    suite_add_tcase(s, tc);
    return s;
}
