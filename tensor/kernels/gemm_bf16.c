/* Products against a weight held as bfloat16: C[M,N] = A[M,K] @ W[N,K]^T, A and C float32.
 *
 * Generation reads every weight once a token, so a model whose files are BF16 is held in them
 * (half float32's bytes) and each weight is widened as it is read: a bfloat16 is the top half of
 * a float32, so widening is exact, and the products and sums are float32's, as for the widened
 * model. Only the order of the sums differs from the float32 kernels (default math only: exact
 * math widens the weight first and runs gemm.c).
 *
 * Each output is one dot product over k, in 16 lanes (lane l sums k = l, l + 16, ... in order, one
 * fused multiply-add each, a ragged end as zeros) and then one fixed tree (l + 8, then + 4, + 2,
 * + 1). AVX-512 holds the 16 lanes in one register, AVX2 in two, the portable loop in an array:
 * the bits are the same on every path, for any M (a prompt's rows or one token's) and any split of
 * the outputs between threads. Four rows of W go together (four outputs per row of A), so each
 * load of A serves four weights and the rows stream side by side. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define LANES 16
#define ROWS 4 /* rows of W per pass */
/* Each of the four rows' stream is prefetched 8 KB ahead (the next four rows' same place, at K = 1024):
 * the hardware's prefetcher alone left a token's pass at 9.8 GB/s of this Xeon's 12-14, and this
 * brings it to 12.4 (2 KB ahead: 10.8, 16 KB: 12.1). A prefetch never faults, past the end included;
 * the address is made as an integer so that no pointer leaves its array. */
#define AHEAD 8192
#define PREFETCH_ONE(p, k) __builtin_prefetch((const void *)((uintptr_t)((p) + (k)) + AHEAD))
#define PREFETCH_AHEAD(k) PREFETCH_ONE(v0, k); PREFETCH_ONE(v1, k); PREFETCH_ONE(v2, k); PREFETCH_ONE(v3, k);

static inline float tree16(const float *a) { /* the fixed tree every path ends with */
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* ---- portable --------------------------------------------------------------------------------------- */
static void rows_c(int64_t M, int64_t n0, int64_t n1, int64_t K, const float *A, int64_t lda, const uint16_t *W, float *C,
                   int64_t ldc) {
    for (int64_t j = n0; j < n1; j++)
        for (int64_t m = 0; m < M; m++) {
            const float *a = A + m * lda;
            const uint16_t *w = W + j * K;
            float acc[LANES] = {0};
            for (int64_t k = 0; k < K; k += LANES)
                for (int l = 0; l < LANES; l++) {
                    bool in = k + l < K;
                    acc[l] = fmaf(in ? a[k + l] : 0.0f, in ? ac_bf16_to_f32(w[k + l]) : 0.0f, acc[l]);
                }
            C[m * ldc + j] = tree16(acc);
        }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AC_X86 1

/* ---- AVX-512: 4 rows of W x MA rows of A (MA a constant 1 to 4), in named accumulators -------------- */
__attribute__((target("avx512f"))) static inline __m512 w16_512(const uint16_t *w) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)w)), 16));
}
__attribute__((target("avx512f"))) static inline float tree512(__m512 v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4)); /* s4[0] + s4[2], s4[1] + s4[3] */
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

#define FMA_ROW(m, K0)                                               \
    if (MA > m) {                                                    \
        __m512 x = _mm512_loadu_ps(a##m + (K0));                     \
        c##m##0 = _mm512_fmadd_ps(x, w0, c##m##0);                   \
        c##m##1 = _mm512_fmadd_ps(x, w1, c##m##1);                   \
        c##m##2 = _mm512_fmadd_ps(x, w2, c##m##2);                   \
        c##m##3 = _mm512_fmadd_ps(x, w3, c##m##3);                   \
    }
#define STEP512(K0)                                                                                 \
    {                                                                                               \
        __m512 w0 = w16_512(v0 + (K0)), w1 = w16_512(v1 + (K0)), w2 = w16_512(v2 + (K0)),              \
               w3 = w16_512(v3 + (K0));                                                             \
        FMA_ROW(0, K0) FMA_ROW(1, K0) FMA_ROW(2, K0) FMA_ROW(3, K0)                                 \
    }
#define ZERO_ROW(m) __m512 c##m##0 = _mm512_setzero_ps(), c##m##1 = c##m##0, c##m##2 = c##m##0, c##m##3 = c##m##0;
#define OUT_ROW(m) \
    if (MA > m) o[m][0] = tree512(c##m##0), o[m][1] = tree512(c##m##1), o[m][2] = tree512(c##m##2), o[m][3] = tree512(c##m##3);

/* o[m][r] = A row m . W row r, for MA rows of A (a0..a3) and the 4 rows of W at v0..v3 */
__attribute__((target("avx512f"), always_inline)) static inline void blk512(const int MA, int64_t K, const float *a0,
                                                                           const float *a1, const float *a2, const float *a3,
                                                                           const uint16_t *v0, const uint16_t *v1,
                                                                           const uint16_t *v2, const uint16_t *v3,
                                                                           float o[4][4]) {
    ZERO_ROW(0) ZERO_ROW(1) ZERO_ROW(2) ZERO_ROW(3)
    int64_t k = 0;
    for (; k + LANES <= K; k += LANES) {
        PREFETCH_AHEAD(k)
        STEP512(k)
    }
    if (k < K) { /* the ragged end, zero-padded copies: the same steps on zeros */
        int64_t r = K - k;
        float ta[4][LANES] = {{0}};
        uint16_t tw[4][LANES] = {{0}};
        const float *as[4] = {a0, a1, a2, a3};
        const uint16_t *vs[4] = {v0, v1, v2, v3};
        for (int m = 0; m < MA; m++) memcpy(ta[m], as[m] + k, (size_t)r * sizeof(float));
        for (int q = 0; q < 4; q++) memcpy(tw[q], vs[q] + k, (size_t)r * sizeof(uint16_t));
        a0 = ta[0], a1 = ta[1], a2 = ta[2], a3 = ta[3];
        v0 = tw[0], v1 = tw[1], v2 = tw[2], v3 = tw[3];
        STEP512(0)
    }
    OUT_ROW(0) OUT_ROW(1) OUT_ROW(2) OUT_ROW(3)
}
#undef FMA_ROW
#undef STEP512
#undef ZERO_ROW
#undef OUT_ROW

__attribute__((target("avx512f"))) static void rows_avx512(int64_t M, int64_t n0, int64_t n1, int64_t K, const float *A,
                                                           int64_t lda, const uint16_t *W, float *C, int64_t ldc) {
    float o[4][4];
    for (int64_t j = n0; j < n1; j += ROWS) {
        int nr = n1 - j < ROWS ? (int)(n1 - j) : ROWS;
        const uint16_t *v[4]; /* rows past the end read row j again; their sums are not stored */
        for (int q = 0; q < 4; q++) v[q] = W + (j + (q < nr ? q : 0)) * K;
        for (int64_t m = 0; m < M; m += 4) {
            int ma = M - m < 4 ? (int)(M - m) : 4;
            const float *a = A + m * lda;
            switch (ma) {
            case 1: blk512(1, K, a, a, a, a, v[0], v[1], v[2], v[3], o); break;
            case 2: blk512(2, K, a, a + lda, a, a, v[0], v[1], v[2], v[3], o); break;
            case 3: blk512(3, K, a, a + lda, a + 2 * lda, a, v[0], v[1], v[2], v[3], o); break;
            default: blk512(4, K, a, a + lda, a + 2 * lda, a + 3 * lda, v[0], v[1], v[2], v[3], o); break;
            }
            for (int i = 0; i < ma; i++)
                for (int q = 0; q < nr; q++) C[(m + i) * ldc + j + q] = o[i][q];
        }
    }
}

/* ---- AVX2: 4 rows of W x 1 row of A; the 16 lanes in two registers (0-7, 8-15) ------------------------- */
__attribute__((target("avx2"))) static inline __m256 w8_256(const uint16_t *w) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)w)), 16));
}
__attribute__((target("avx2"))) static inline float tree256(__m256 lo, __m256 hi) {
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

#define STEP256(K0)                                                                                              \
    {                                                                                                            \
        __m256 x0 = _mm256_loadu_ps(a + (K0)), x1 = _mm256_loadu_ps(a + (K0) + 8);                               \
        c00 = _mm256_fmadd_ps(x0, w8_256(v0 + (K0)), c00), c01 = _mm256_fmadd_ps(x1, w8_256(v0 + (K0) + 8), c01); \
        c10 = _mm256_fmadd_ps(x0, w8_256(v1 + (K0)), c10), c11 = _mm256_fmadd_ps(x1, w8_256(v1 + (K0) + 8), c11); \
        c20 = _mm256_fmadd_ps(x0, w8_256(v2 + (K0)), c20), c21 = _mm256_fmadd_ps(x1, w8_256(v2 + (K0) + 8), c21); \
        c30 = _mm256_fmadd_ps(x0, w8_256(v3 + (K0)), c30), c31 = _mm256_fmadd_ps(x1, w8_256(v3 + (K0) + 8), c31); \
    }
__attribute__((target("avx2,fma"))) static void rows_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K, const float *A,
                                                          int64_t lda, const uint16_t *W, float *C, int64_t ldc) {
    for (int64_t j = n0; j < n1; j += ROWS) {
        int nr = n1 - j < ROWS ? (int)(n1 - j) : ROWS;
        for (int64_t m = 0; m < M; m++) {
            const float *a = A + m * lda;
            const uint16_t *v0 = W + j * K, *v1 = W + (j + (nr > 1)) * K, *v2 = W + (j + (nr > 2 ? 2 : 0)) * K,
                           *v3 = W + (j + (nr > 3 ? 3 : 0)) * K;
            __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
            int64_t k = 0;
            for (; k + LANES <= K; k += LANES) {
                PREFETCH_AHEAD(k)
                STEP256(k)
            }
            if (k < K) {
                int64_t r = K - k;
                float ta[LANES] = {0};
                uint16_t tw[4][LANES] = {{0}};
                memcpy(ta, a + k, (size_t)r * sizeof(float));
                memcpy(tw[0], v0 + k, (size_t)r * 2), memcpy(tw[1], v1 + k, (size_t)r * 2);
                memcpy(tw[2], v2 + k, (size_t)r * 2), memcpy(tw[3], v3 + k, (size_t)r * 2);
                a = ta, v0 = tw[0], v1 = tw[1], v2 = tw[2], v3 = tw[3];
                STEP256(0)
            }
            float o[4] = {tree256(c00, c01), tree256(c10, c11), tree256(c20, c21), tree256(c30, c31)};
            for (int q = 0; q < nr; q++) C[m * ldc + j + q] = o[q];
        }
    }
}
#undef STEP256
#endif

typedef void (*rows_fn)(int64_t M, int64_t n0, int64_t n1, int64_t K, const float *A, int64_t lda, const uint16_t *W,
                        float *C, int64_t ldc);

static rows_fn rows_for(ac_isa isa) {
#ifdef AC_X86
    if (isa == AC_ISA_AVX512) return rows_avx512;
    if (isa == AC_ISA_AVX2) return rows_avx2;
#endif
    (void)isa;
    return rows_c;
}

typedef struct { int64_t M, N, K; const float *A; int64_t lda; const uint16_t *W; float *C; int64_t ldc; rows_fn f; } Job;

static void task(void *ctx, int64_t g0, int64_t g1, int chunk) {
    (void)chunk;
    const Job *j = ctx;
    int64_t n0 = g0 * ROWS, n1 = g1 * ROWS < j->N ? g1 * ROWS : j->N;
    j->f(j->M, n0, n1, j->K, j->A, j->lda, j->W, j->C, j->ldc);
}

void ac_gemm_bf16(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *W, float *C, int64_t ldc) {
    Job j = {M, N, K, A, lda, W, C, ldc, rows_for(ac_cpu_isa())};
    /* a chunk: groups of 4 rows worth ~64K multiply-adds, so a small layer stays on one thread */
    int64_t groups = (N + ROWS - 1) / ROWS, work = M * K * ROWS;
    ac_parallel_for(groups, work > 0 ? 65536 / work + 1 : groups, task, &j);
}

bool ac_gemm_bf16_with(ac_isa isa, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *W, float *C,
                       int64_t ldc) {
    if (isa > ac_cpu_isa()) return false;
    rows_for(isa)(M, 0, N, K, A, lda, W, C, ldc);
    return true;
}
