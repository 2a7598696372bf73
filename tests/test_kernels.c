/* The matmul kernels: the fast one (FMA, blocked) agrees with the exact one
 * (reference BLAS's order) within float rounding, on every edge of its
 * blocking, for every layout; it is deterministic. */
#include <math.h>
#include <stdlib.h>
#include <stdatomic.h>

#include "internal.h" /* ac_gemm_strided */
#include "tests.h"

/* |fast - exact| <= 4 * 2^-24 * K * sum_k |a_ik b_kj| per element: each sum
 * has K roundings at most, in either kernel. */
static void compare(int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool acc) {
    ac_mark m = ac_arena_mark();
    torch_manual_seed((uint64_t)(M * 131 + N * 17 + K));
    Tensor *A = torch_randn(SHAPE(ta ? K : M, ta ? M : K)), *B = torch_randn(SHAPE(tb ? N : K, tb ? K : N));
    Tensor *C0 = torch_randn(SHAPE(M, N));
    const float *a = A->data, *b = B->data;
    int64_t rsa = ta ? 1 : K, csa = ta ? M : 1, rsb = tb ? 1 : N, csb = tb ? K : 1;
    float *ce = ac_arena_alloc(sizeof(float) * (size_t)(M * N + 1)), *cf = ac_arena_alloc(sizeof(float) * (size_t)(M * N + 1));
    memcpy(ce, C0->data, sizeof(float) * (size_t)(M * N));
    memcpy(cf, C0->data, sizeof(float) * (size_t)(M * N));
    ac_set_exact(true);
    ac_gemm_strided(M, N, K, a, rsa, csa, b, rsb, csb, ce, N, acc);
    ac_set_exact(false);
    ac_gemm_strided(M, N, K, a, rsa, csa, b, rsb, csb, cf, N, acc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double mag = acc ? fabs(((float *)C0->data)[i * N + j]) : 0;
            for (int64_t k = 0; k < K; k++) mag += fabs((double)a[i * rsa + k * csa] * b[k * rsb + j * csb]);
            double tol = 4.0 * ldexp(1.0, -24) * (double)(K + 1) * mag + 1e-30;
            ck_assert_msg(fabs((double)cf[i * N + j] - ce[i * N + j]) <= tol,
                          "%lldx%lldx%lld%s%s%s C[%lld,%lld]: fast %.9g, exact %.9g", (long long)M, (long long)N,
                          (long long)K, ta ? " A^T" : "", tb ? " B^T" : "", acc ? " +=" : "", (long long)i, (long long)j,
                          cf[i * N + j], ce[i * N + j]);
        }
    /* deterministic: the same call gives the same bits */
    float *again = ac_arena_alloc(sizeof(float) * (size_t)(M * N + 1));
    memcpy(again, C0->data, sizeof(float) * (size_t)(M * N));
    ac_gemm_strided(M, N, K, a, rsa, csa, b, rsb, csb, again, N, acc);
    ck_assert(memcmp(again, cf, sizeof(float) * (size_t)(M * N)) == 0);
    ac_arena_release(m);
}

/* Every fast path sums each element as one chain of fused multiply-adds, k in order, from C (+=) or
 * from 0: the bits do not depend on the tiling, the packing, the micro-kernel variant or the rows a
 * thread is given. Checked bit for bit against that chain written with fmaf. */
static void same_chain(int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool acc) {
    ac_mark m = ac_arena_mark();
    torch_manual_seed((uint64_t)(M * 7 + N * 3 + K));
    Tensor *A = torch_randn(SHAPE(ta ? K : M, ta ? M : K)), *B = torch_randn(SHAPE(tb ? N : K, tb ? K : N));
    Tensor *C0 = torch_randn(SHAPE(M, N));
    const float *a = A->data, *b = B->data, *c0 = C0->data;
    int64_t rsa = ta ? 1 : K, csa = ta ? M : 1, rsb = tb ? 1 : N, csb = tb ? K : 1;
    float *c = ac_arena_alloc(sizeof(float) * (size_t)(M * N));
    memcpy(c, c0, sizeof(float) * (size_t)(M * N));
    ac_gemm_strided(M, N, K, a, rsa, csa, b, rsb, csb, c, N, acc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = acc ? c0[i * N + j] : 0.0f;
            for (int64_t k = 0; k < K; k++) s = fmaf(a[i * rsa + k * csa], b[k * rsb + j * csb], s);
            ck_assert_msg(memcmp(&s, &c[i * N + j], sizeof s) == 0, "%s %lldx%lldx%lld%s%s%s C[%lld,%lld]: %.9g, the chain %.9g",
                          ac_gemm_fast_kernel_name(), (long long)M, (long long)N, (long long)K, ta ? " A^T" : "",
                          tb ? " B^T" : "", acc ? " +=" : "", (long long)i, (long long)j, c[i * N + j], s);
        }
    ac_arena_release(m);
}

START_TEST(test_fast_kernel_one_chain) {
    static const char *kernels[] = {"avx512", "avx2+fma", "portable"};
    bool was = ac_get_exact();
    ac_set_exact(false);
    for (int kn = 0; kn < 3; kn++) {
        if (!ac_gemm_use_kernel(kernels[kn])) continue;
        for (int t = 0; t < 8; t++) { /* every layout, with and without +=, packed and in place */
            bool ta = t & 1, tb = t & 2, acc = t & 4;
            same_chain(50, 70, 300, ta, tb, acc);   /* A packed: K past KC, whole and partial panels */
            same_chain(97, 130, 513, ta, tb, acc);  /* K's tail past 8-step groups, edge rows and columns */
            same_chain(13, 33, 260, ta, tb, acc);   /* two panels of rows and one row over */
            same_chain(40, 64, 100, ta, tb, acc);   /* A read in place (K within KC), B's rows in place */
            same_chain(3, 100, 70, ta, tb, acc);    /* fewer rows than a panel: a token's rows */
            same_chain(5, 7, 9, ta, tb, acc);       /* tiny: the plain loops */
        }
        /* split among 3 threads, by columns (wide C: a partial last unit, past NC) and by rows (tall C) */
        int threads = torch_get_num_threads();
        torch_set_num_threads(3);
        atomic_store(&ac_pool_test_free_cores, 8);
        for (int t = 0; t < 8; t++) { /* every layout once, the three shapes in turn (valgrind runs this too) */
            bool ta = t & 1, tb = t & 2, acc = t & 4;
            if (t % 3 == 0) same_chain(20, 1100, 300, ta, tb, acc); /* by columns */
            if (t % 3 == 1) same_chain(2, 1000, 100, ta, tb, acc);  /* by columns: a token's rows */
            if (t % 3 == 2) same_chain(700, 40, 100, ta, tb, acc);  /* by rows */
        }
        atomic_store(&ac_pool_test_free_cores, -1);
        torch_set_num_threads(threads);
    }
    for (int kn = 0; kn < 3 && !ac_gemm_use_kernel(kernels[kn]); kn++) continue; /* back to the CPU's own pick */
    ac_set_exact(was);
}
END_TEST

/* Each kernel this CPU has (the portable one everywhere). */
START_TEST(test_fast_kernel_against_exact) {
    static const char *kernels[] = {"avx512", "avx2+fma", "portable"};
    static const int64_t sizes[] = {1, 2, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 65};
    int n = (int)(sizeof sizes / sizeof *sizes), tried = 0;
    for (int kn = 0; kn < 3; kn++) {
        if (!ac_gemm_use_kernel(kernels[kn])) continue;
        tried++;
        for (int i = 0; i < n; i += 1)
            for (int j = 0; j < n; j += 2)
                for (int k = 0; k < n; k += 3) compare(sizes[i], sizes[j], sizes[k], (i + j) % 2, (j + k) % 2, k % 2);
        /* past the blocking: K over KC (256), M over MC, N over NC (2048), packed A */
        compare(300, 70, 600, false, false, false);
        compare(97, 130, 513, true, false, true);
        compare(20, 2100, 70, false, true, false);
        compare(129, 129, 129, true, true, false);
        /* B's rows read in place (contiguous, whole panels, a head-sized block), with edge rows */
        compare(40, 64, 100, false, false, false);
        compare(128, 32, 128, true, false, true);
        compare(33, 96, 7, false, false, false);
        ck_assert_str_eq(ac_gemm_fast_kernel_name(), kernels[kn]);
    }
    ck_assert_int_ge(tried, 1);
}
END_TEST

/* Fast math's vector exp (softmax's): within 2 ulp of the true exp over the
 * whole float range it is given (x - max <= 0, and above), 0 below FLT_MIN's
 * exponent, NaN for NaN, 0 for -inf; the tail past the vector width too. */
static double ulps(float got, double want) {
    float w = (float)want;
    if (got == w) return 0;
    double ulp = nextafterf(fabsf(w), INFINITY) - fabsf(w);
    return fabs((double)got - want) / ulp;
}

START_TEST(test_fast_exp) {
    enum { N = 4099 };
    static const char *paths[] = {"avx512", "avx2+fma", "libm"};
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    int tried = 0;
    for (int p = 0; p < 3; p++) {
        if (!ac_exp_sub_with(paths[p], x, 0.0f, y, 0)) continue;
        tried++;
        double worst = 0;
        for (int round = 0; round < 100; round++) { /* 409,900 points from -90 to 88.3 */
            for (int i = 0; i < N; i++) x[i] = -90.0f + 178.3f * (float)(round * N + i) / (float)(100 * N);
            ac_exp_sub_with(paths[p], x, 0.0f, y, N);
            for (int i = 0; i < N; i++) {
                double want = exp((double)x[i]);
                if (want < 1.1754943508222875e-38) { /* below FLT_MIN: 0, or libm's denormal in the tail */
                    ck_assert_msg(y[i] == 0.0f || fabs(y[i] - want) < 1.2e-38, "%s: exp(%.9g) = %g", paths[p], x[i], y[i]);
                    continue;
                }
                double u = ulps(y[i], want);
                if (u > worst) worst = u;
                ck_assert_msg(u <= 2.0, "%s: exp(%.9g): %.9g is %.2f ulp from %.9g", paths[p], x[i], y[i], u, want);
            }
        }
        float special[17] = {-INFINITY, NAN, 0.0f, -0.0f, -87.0f, -88.0f, -104.0f, 1.0f, -1.0f, 0.5f, -0.5f, 10.0f,
                             -10.0f, -INFINITY, NAN, 88.0f, -50.0f};
        float out[17];
        ac_exp_sub_with(paths[p], special, 0.0f, out, 17);
        ck_assert(out[0] == 0.0f && isnan(out[1]) && out[2] == 1.0f && out[3] == 1.0f && out[13] == 0.0f && isnan(out[14]));
        ac_exp_sub_with(paths[p], special, 1.0f, out, 17); /* the max is subtracted first */
        ck_assert(fabs(out[2] - exp(-1.0)) < 1e-7);
        fprintf(stderr, "exp (%s): worst %.2f ulp over 409,900 points\n", paths[p], worst);
    }
    ck_assert_int_ge(tried, 1);
    free(x), free(y);
}
END_TEST

/* Fast math's vector tanh (GELU's, fast_tanh.c): where libm's tanhf is fdlibm's (glibc through
 * 2.36 at least; every one of the 2^32 floats was compared once by hand) the same bits, else within 2
 * ulp of libm's. Points: a stride through all bit patterns (both signs, denormals, infinities, NaNs)
 * and runs of consecutive floats across each of the algorithm's branch points, the tails past the
 * 8-wide steps through libm. */
START_TEST(test_fast_tanh) {
    enum { N = 4096 };
    float probe = 0.0f, out;
    if (!ac_tanh_fast(&probe, &out, 0)) return; /* no AVX2: libm's in fast math too */
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
#if defined(__GLIBC__) && __GLIBC__ == 2 && __GLIBC_MINOR__ <= 36
    const double most = 0; /* fdlibm's */
#else
    const double most = 2;
#endif
    /* |x| = 2^-55, 2^-26 (expm1's own x), ln2/4 and 3 ln2/4 (its k = 0, -1, -2), 1, 7.8 (k = 23),
     * 19.6 (k = 57), 22 */
    static const float edges[] = {0x1p-55f, 0x1p-26f, 0.17328680f, 0.51986039f, 0.86643398f, 1.0f, 7.7981f, 19.5854f, 22.0f};
    double worst = 0;
    int64_t points = 0;
    for (int round = 0; round < 128 + 2 * 9; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t b;
            if (round < 128) { /* 524,288 patterns, 8,197 apart: the whole range, wrapping */
                b = (uint32_t)(((uint64_t)round * N + (uint64_t)i) * 8197u);
            } else { /* N floats either side of an edge, either sign */
                int e = (round - 128) / 2;
                float f = edges[e];
                memcpy(&b, &f, sizeof b);
                b = b - N / 2 + (uint32_t)i;
                if ((round - 128) % 2) b |= 0x80000000u;
            }
            memcpy(&x[i], &b, sizeof b);
        }
        ck_assert(ac_tanh_fast(x, y, N - 3)); /* the last 3 + 5 through libm */
        ck_assert(ac_tanh_fast(x + N - 3, y + N - 3, 3));
        for (int i = 0; i < N; i++, points++) {
            float want = tanhf(x[i]);
            if (isnan(want)) {
                ck_assert_msg(isnan(y[i]), "tanh(%a) = %a, want NaN", x[i], y[i]);
                continue;
            }
            double u = ulps(y[i], want);
            if (u > worst) worst = u;
            ck_assert_msg(u <= most && (y[i] != 0 || signbit(y[i]) == signbit(want)),
                          "tanh(%a) = %a, libm %a: %.2f ulp", x[i], y[i], want, u);
        }
    }
    fprintf(stderr, "tanh (avx2): worst %.2f ulp from libm over %lld points\n", worst, (long long)points);
    free(x), free(y);
}
END_TEST

/* Fast math's softmax (the AVX-512 row where the CPU has it) against exact
 * math's, row lengths around the 16-wide steps, with masked (-inf) entries, a
 * fully masked row and a NaN: within 4 ulp-sized steps of float (rel 5e-7,
 * abs 1e-9: the exp is within 2 ulp, the sum's order differs), and the same
 * NaNs. */
START_TEST(test_fast_softmax_rows) {
    bool was = ac_get_exact();
    static const int64_t lens[] = {16, 17, 31, 32, 33, 128, 130};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        int64_t n = lens[li];
        torch_manual_seed(5);
        Tensor *x = torch_mul_scalar(torch_randn(SHAPE(6, n)), 4.0);
        float *xd = ac_data_float(x);
        for (int64_t j = 0; j < n; j++) {
            if (j > n / 2) xd[1 * n + j] = -INFINITY; /* a causal row */
            xd[2 * n + j] = -INFINITY;                 /* all masked: NaN, as torch */
        }
        xd[3 * n + n - 1] = NAN; /* a NaN in the tail: the whole row NaN */
        xd[4 * n + 3] = NAN;     /* and in the vector part */
        ac_set_exact(true);
        Tensor *want = torch_softmax(x, -1);
        ac_set_exact(false);
        Tensor *got = torch_softmax(x, -1);
        const float *w = ac_data_float(want), *g = ac_data_float(got);
        for (int64_t i = 0; i < 6 * n; i++) {
            if (isnan(w[i])) {
                ck_assert_msg(isnan(g[i]), "n=%lld, element %lld: %g, want NaN", (long long)n, (long long)i, g[i]);
                continue;
            }
            ck_assert_msg(fabs(g[i] - w[i]) <= 1e-9 + 5e-7 * fabs(w[i]), "n=%lld, element %lld: %.9g, want %.9g",
                          (long long)n, (long long)i, g[i], w[i]);
        }
        for (int64_t j = 0; j < n; j++) ck_assert(isnan(g[2 * n + j]) && isnan(g[3 * n + j]) && isnan(g[4 * n + j]));
    }
    ac_set_exact(was);
}
END_TEST

/* AC_CPU_CAPABILITY caps the kernels a process picks (read once, so each run here is a child): the
 * kernel named where the CPU has it, PyTorch's warning for a value it does not know (and the CPU's
 * own kernel), and exact math's run byte for byte the same under every cap. */
START_TEST(test_cpu_capability) {
    static const struct { const char *cap, *kernel; } runs[] = {
        {"default", "portable kernel"}, {"avx2", "avx2+fma kernel"}, {"avx512", "avx512 kernel"}, {"bogus", NULL}};
    char cmd[1024], *want_exact = NULL, own[64], *out = NULL;
    /* the CPU's own kernel as a child sees it: under valgrind this process sees no AVX-512, its
     * children (run natively) do */
    snprintf(cmd, sizeof cmd, "env -u AC_CPU_CAPABILITY %s/bench --threads 1 article 2>&1", build_dir());
    ck_assert_int_eq(run_command(cmd, &out), 0);
    const char *k = strstr(out, "(fast math, ");
    ck_assert_msg(k && strstr(k, " kernel)"), "bench said %s", out);
    k += strlen("(fast math, ");
    snprintf(own, sizeof own, "%.*s", (int)(strstr(k, ")") - k), k);
    free(out);
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        const char *kernel = runs[r].kernel ? runs[r].kernel : own;
        if (strcmp(runs[r].cap, "avx2") == 0 && strcmp(own, "portable kernel") == 0) kernel = own;
        if (strcmp(runs[r].cap, "avx512") == 0) kernel = own; /* asking for more gives what the CPU has */
        snprintf(cmd, sizeof cmd, "AC_CPU_CAPABILITY=%s %s/bench --threads 1 article 2>&1", runs[r].cap, build_dir());
        ck_assert_int_eq(run_command(cmd, &out), 0);
        ck_assert_msg(strstr(out, kernel), "AC_CPU_CAPABILITY=%s: want the %s, bench said %s", runs[r].cap, kernel, out);
        bool warned = strstr(out, "Warning: ignoring invalid value for AC_CPU_CAPABILITY: bogus (expected avx512, avx2 or "
                                  "default)") != NULL;
        ck_assert_msg(warned == !runs[r].kernel, "AC_CPU_CAPABILITY=%s: %s", runs[r].cap, out);
        free(out);
        snprintf(cmd, sizeof cmd, "AC_CPU_CAPABILITY=%s %s/train --exact --steps 4 --batch 4 --context 16 --dim 16 --heads 2 "
                 "--data %s 2>/dev/null", runs[r].cap, build_dir(), shared_path("data/the-verdict.txt"));
        ck_assert_int_eq(run_command(cmd, &out), 0);
        if (!want_exact) want_exact = out;
        else {
            ck_assert_str_eq(out, want_exact);
            free(out);
        }
    }
    free(want_exact);
}
END_TEST

Suite *suite_kernels(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase("kernels");
    tcase_add_test(tc, test_fast_kernel_against_exact);
    tcase_add_test(tc, test_fast_kernel_one_chain);
    tcase_add_test(tc, test_fast_exp);
    tcase_add_test(tc, test_fast_tanh);
    tcase_add_test(tc, test_fast_softmax_rows);
    tcase_add_test(tc, test_cpu_capability);
    suite_add_tcase(s, tc);
    return s;
}
