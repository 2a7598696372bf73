/* tanh over an array, for fast math: 8 at a time with AVX2, the same bits as
 * glibc's tanhf up to 2.40 (Debian's), which is fdlibm's.
 *
 * Why the same bits and not just a good approximation: the book's chapter 5
 * prints its first losses with 16 digits, a mean over the batches of float
 * losses. A tanh within 1.4 ulp of libm's moved the GELU of a few elements by
 * an ulp and the first line off the book's; libm's scalar tanhf was a
 * twentieth of the GPT's step. So this is fdlibm's algorithm itself, every
 * float operation in its order (the build has -ffp-contract=off, and this
 * file asks for no FMA), its branches as blends:
 *
 *   tanh(x) = 1 - 2 / (expm1(2|x|) + 2)   for 1 <= |x| < 22
 *           = -t / (t + 2), t = expm1(-2|x|)   for |x| < 1
 *           = 1 for |x| >= 22, x for |x| < 2^-55, with x's sign;
 *   expm1(v): v = k ln2 + r (ln2 in two parts, c the rounding of r), the
 *   rational form of expm1(r) with Q1..Q5, and the result put together as
 *   fdlibm does for k = 0, k = -1 and k from -3 to 63 (all that 2|x| < 44
 *   and -2 < -2|x| < 0 can give).
 * A test compares it with libm: every float bit for bit where libm is
 * fdlibm's, within an ulp elsewhere. */
#include <math.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define F(x) _mm256_set1_ps(x)
#define I(x) _mm256_set1_epi32(x)

/* expm1 of 8 values, each in (-2, 0) or [2, 44) or with |v| < 2^-25 */
__attribute__((target("avx2"))) static __m256 expm1_part(__m256 v) {
    const __m256 ln2_hi = F(6.9313812256e-01f), ln2_lo = F(9.0580006145e-06f), invln2 = F(1.4426950216e+00f);
    const __m256 q1 = F(-3.3333335072e-02f), q2 = F(1.5873016091e-03f), q3 = F(-7.9365076090e-05f),
                 q4 = F(4.0082177293e-06f), q5 = F(-2.0109921195e-07f);
    __m256i hx = _mm256_and_si256(_mm256_castps_si256(v), I(0x7fffffff));
    __m256 neg = _mm256_castsi256_ps(_mm256_srai_epi32(_mm256_castps_si256(v), 31)); /* all ones where v < 0 */
    /* k: 0 for |v| <= ln2 / 2, +-1 up to 1.5 ln2, else (int)(v / ln2 +- 0.5) */
    __m256i reduce = _mm256_cmpgt_epi32(hx, I(0x3eb17218)), near = _mm256_cmpgt_epi32(I(0x3F851592), hx);
    __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(invln2, v), _mm256_blendv_ps(F(0.5f), F(-0.5f), neg)));
    k = _mm256_blendv_epi8(k, _mm256_blendv_epi8(I(1), I(-1), _mm256_castps_si256(neg)), near);
    k = _mm256_and_si256(k, reduce);
    /* hi = v - k ln2_hi, lo = k ln2_lo: fdlibm's own values for k = 0 and +-1 too (exact products) */
    __m256 t = _mm256_cvtepi32_ps(k);
    __m256 hi = _mm256_sub_ps(v, _mm256_mul_ps(t, ln2_hi)), lo = _mm256_mul_ps(t, ln2_lo);
    __m256 x = _mm256_sub_ps(hi, lo), c = _mm256_sub_ps(_mm256_sub_ps(hi, x), lo);
    __m256 hfx = _mm256_mul_ps(F(0.5f), x), hxs = _mm256_mul_ps(x, hfx);
    __m256 r1 = _mm256_add_ps(q4, _mm256_mul_ps(hxs, q5));
    r1 = _mm256_add_ps(q3, _mm256_mul_ps(hxs, r1));
    r1 = _mm256_add_ps(q2, _mm256_mul_ps(hxs, r1));
    r1 = _mm256_add_ps(q1, _mm256_mul_ps(hxs, r1));
    r1 = _mm256_add_ps(F(1.0f), _mm256_mul_ps(hxs, r1));
    t = _mm256_sub_ps(F(3.0f), _mm256_mul_ps(r1, hfx));
    __m256 e = _mm256_mul_ps(hxs, _mm256_div_ps(_mm256_sub_ps(r1, t), _mm256_sub_ps(F(6.0f), _mm256_mul_ps(x, t))));
    __m256 k0 = _mm256_sub_ps(x, _mm256_sub_ps(_mm256_mul_ps(x, e), hxs)); /* k = 0 */
    e = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(x, _mm256_sub_ps(e, c)), c), hxs);
    __m256 km1 = _mm256_sub_ps(_mm256_mul_ps(F(0.5f), _mm256_sub_ps(x, e)), F(0.5f)); /* k = -1 */
    __m256 kp1 = _mm256_blendv_ps(_mm256_add_ps(F(1.0f), _mm256_mul_ps(F(2.0f), _mm256_sub_ps(x, e))), /* k = 1 */
                                  _mm256_mul_ps(F(-2.0f), _mm256_sub_ps(e, _mm256_add_ps(x, F(0.5f)))),
                                  _mm256_cmp_ps(x, F(-0.25f), _CMP_LT_OQ));
    __m256i kexp = _mm256_slli_epi32(k, 23);
    /* k <= -2 or k > 56: (1 - (e - x)) 2^k - 1 */
    __m256 y_far = _mm256_sub_ps(
        _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(_mm256_sub_ps(F(1.0f), _mm256_sub_ps(e, x))), kexp)),
        F(1.0f));
    /* 2 <= k < 23: ((1 - 2^-k) - (e - x)) 2^k */
    __m256 one_minus = _mm256_castsi256_ps(_mm256_sub_epi32(I(0x3f800000), _mm256_srlv_epi32(I(0x1000000), k)));
    __m256 y_mid = _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_castps_si256(_mm256_sub_ps(one_minus, _mm256_sub_ps(e, x))), kexp));
    /* 23 <= k <= 56: ((x - (e + 2^-k)) + 1) 2^k */
    __m256 two_mk = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(I(0x7f), k), 23));
    __m256 y_high = _mm256_castsi256_ps(_mm256_add_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_sub_ps(x, _mm256_add_ps(e, two_mk)), F(1.0f))), kexp));
    __m256 y = _mm256_blendv_ps(y_mid, y_high, _mm256_castsi256_ps(_mm256_cmpgt_epi32(k, I(22))));
    __m256i is_far = _mm256_or_si256(_mm256_cmpgt_epi32(I(-1), k), _mm256_cmpgt_epi32(k, I(56)));
    y = _mm256_blendv_ps(y, y_far, _mm256_castsi256_ps(is_far));
    y = _mm256_blendv_ps(y, kp1, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, I(1))));
    y = _mm256_blendv_ps(y, km1, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, I(-1))));
    y = _mm256_blendv_ps(y, k0, _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, I(0))));
    return _mm256_blendv_ps(y, v, _mm256_castsi256_ps(_mm256_cmpgt_epi32(I(0x33000000), hx))); /* |v| < 2^-25: v */
}

__attribute__((target("avx2"))) static void tanh_avx2(const float *in, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(in + i);
        __m256i bits = _mm256_castps_si256(x), ix = _mm256_and_si256(bits, I(0x7fffffff));
        __m256 ax = _mm256_castsi256_ps(ix), sign = _mm256_castsi256_ps(_mm256_andnot_si256(I(0x7fffffff), bits));
        __m256 big = _mm256_castsi256_ps(_mm256_cmpgt_epi32(ix, I(0x3f7fffff))); /* |x| >= 1 */
        __m256 two_ax = _mm256_mul_ps(F(2.0f), ax);
        __m256 t = expm1_part(_mm256_blendv_ps(_mm256_mul_ps(F(-2.0f), ax), two_ax, big));
        __m256 d = _mm256_add_ps(t, F(2.0f));
        __m256 z = _mm256_blendv_ps(_mm256_div_ps(_mm256_xor_ps(t, F(-0.0f)), d),
                                    _mm256_sub_ps(F(1.0f), _mm256_div_ps(F(2.0f), d)), big);
        z = _mm256_blendv_ps(z, F(1.0f), _mm256_castsi256_ps(_mm256_cmpgt_epi32(ix, I(0x41afffff)))); /* |x| >= 22 */
        z = _mm256_or_ps(z, sign);
        /* |x| < 2^-55: x (1 + x); NaN: NaN */
        z = _mm256_blendv_ps(z, _mm256_mul_ps(x, _mm256_add_ps(F(1.0f), x)),
                             _mm256_castsi256_ps(_mm256_cmpgt_epi32(I(0x24000000), ix)));
        z = _mm256_blendv_ps(z, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        _mm256_storeu_ps(out + i, z);
    }
    for (; i < n; i++) out[i] = tanhf(in[i]);
}

#endif

bool ac_tanh_fast(const float *x, float *y, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (ac_have_avx2()) {
        tanh_avx2(x, y, n);
        return true;
    }
#endif
    (void)x, (void)y, (void)n;
    return false;
}
