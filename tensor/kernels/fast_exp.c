/* exp over a row, for fast math's softmax: y[i] = exp(x[i] - m).
 *
 * Exact math calls libm's expf per element, as PyTorch's default CPU kernel
 * does, to keep its bits. Fast math evaluates 16 (AVX-512) or 8 (AVX2)
 * at once: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r is exact),
 * exp(r) by Cephes' degree-6 polynomial, times 2^n. The error is within 2 ulp
 * of the true value (a test sweeps the range against libm). Inputs below
 * -87.33 (where exp leaves float's normal range; softmax's masked -inf
 * included) give 0 instead of a denormal: an absolute error under 1.2e-38.
 * A row is computed the same way whichever thread has it. */
#include <math.h>
#include <string.h>
#include <stdatomic.h>

#include "internal.h"

#define EXP_LO -87.33654f /* exp(EXP_LO) = FLT_MIN */
#define EXP_HI 88.37626f  /* exp(EXP_HI) ~ FLT_MAX / 2: 2^n stays a normal power of two */

static void exp_sub_libm(const float *x, float m, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i] - m);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* Cephes expf's coefficients for exp(r) = 1 + r + r^2 P(r) */
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f

__attribute__((target("avx512f"))) static void exp_sub_avx512(const float *x, float m, float *y, int64_t n) {
    const __m512 vm = _mm512_set1_ps(m), lo = _mm512_set1_ps(EXP_LO), hi = _mm512_set1_ps(EXP_HI);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
        __mmask16 under = _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        __m512 c = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2_HI), c);
        r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LN2_LO), r);
        __m512 p = _mm512_set1_ps(P0);
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P1));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
        __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
        e = _mm512_scalef_ps(e, k);
        e = _mm512_mask_mov_ps(e, under, _mm512_setzero_ps());
        e = _mm512_mask_mov_ps(e, nan, v);
        _mm512_storeu_ps(y + i, e);
    }
    exp_sub_libm(x + i, m, y + i, n - i);
}

__attribute__((target("avx2,fma"))) static void exp_sub_avx2(const float *x, float m, float *y, int64_t n) {
    const __m256 vm = _mm256_set1_ps(m), lo = _mm256_set1_ps(EXP_LO), hi = _mm256_set1_ps(EXP_HI);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        __m256 under = _mm256_cmp_ps(v, lo, _CMP_LT_OQ), nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        __m256 c = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        __m256 k = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(LN2_HI), c);
        r = _mm256_fnmadd_ps(k, _mm256_set1_ps(LN2_LO), r);
        __m256 p = _mm256_set1_ps(P0);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P1));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P2));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P3));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P4));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P5));
        __m256 e = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
        /* 2^k from its exponent bits: k in [-126, 127] after the clamp */
        __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
        e = _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
        e = _mm256_andnot_ps(under, e);
        e = _mm256_blendv_ps(e, v, nan);
        _mm256_storeu_ps(y + i, e);
    }
    exp_sub_libm(x + i, m, y + i, n - i);
}

/* A whole softmax row in fast math, four passes over it in L1: the max, y =
 * exp(x - max), the sum of y in 16 running lanes, then y *= 1 / sum. A NaN
 * anywhere in the row gives a NaN exp, so a NaN sum and a row of NaN, as in
 * ATen, whatever the max made of it. */
__attribute__((target("avx512f"))) static void softmax_row_avx512(const float *x, float *y, int64_t n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
    float m = _mm512_reduce_max_ps(vmax);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    exp_sub_avx512(x, m, y, n);
    __m512 acc = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(y + i));
    float s = _mm512_reduce_add_ps(acc);
    for (; i < n; i++) s += y[i];
    const __m512 r = _mm512_set1_ps(1 / s);
    for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), r));
    for (; i < n; i++) y[i] *= 1 / s;
}

typedef void (*exp_fn)(const float *, float, float *, int64_t);
static exp_fn pick(void) {
    if (ac_cpu_isa() == AC_ISA_AVX512) return exp_sub_avx512;
    if (ac_cpu_isa() == AC_ISA_AVX2) return exp_sub_avx2;
    return exp_sub_libm;
}
static _Atomic(exp_fn) chosen_fn; /* the same answer in every thread: relaxed is enough */
static exp_fn chosen_path(void) {
    exp_fn f = atomic_load_explicit(&chosen_fn, memory_order_relaxed);
    if (!f) atomic_store_explicit(&chosen_fn, f = pick(), memory_order_relaxed);
    return f;
}

/* The row function where the exp path picked for this CPU is AVX-512's. */
bool ac_softmax_row_fast(const float *x, float *y, int64_t n) {
    if (chosen_path() != exp_sub_avx512) return false;
    softmax_row_avx512(x, y, n);
    return true;
}

void ac_exp_sub(const float *x, float m, float *y, int64_t n) {
    if (ac_get_exact()) {
        exp_sub_libm(x, m, y, n);
        return;
    }
    chosen_path()(x, m, y, n);
}

/* Tests: one path by name ("avx512", "avx2+fma", "libm"), if this CPU has it. */
bool ac_exp_sub_with(const char *path, const float *x, float m, float *y, int64_t n) {
    __builtin_cpu_init();
    exp_fn f = NULL;
    if (strcmp(path, "avx512") == 0 && __builtin_cpu_supports("avx512f")) f = exp_sub_avx512;
    if (strcmp(path, "avx2+fma") == 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f = exp_sub_avx2;
    if (strcmp(path, "libm") == 0) f = exp_sub_libm;
    if (f) f(x, m, y, n);
    return f != NULL;
}
#else
bool ac_softmax_row_fast(const float *x, float *y, int64_t n) { return false; }
void ac_exp_sub(const float *x, float m, float *y, int64_t n) { exp_sub_libm(x, m, y, n); }
bool ac_exp_sub_with(const char *path, const float *x, float m, float *y, int64_t n) {
    if (strcmp(path, "libm") != 0) return false;
    exp_sub_libm(x, m, y, n);
    return true;
}
#endif
