/* The fast matmul kernel (the default; ac_set_exact(true) selects gemm.c's).
 * C[M,N] (+)= A[M,K] @ B[K,N], any strides for A and B.
 *
 * BLIS's design: B is packed a KC x NC slice at a time into NR-wide column
 * panels, A an MC x KC block at a time into MR-tall row panels, and a
 * register-blocked micro-kernel keeps an MR x NR block of C in vector
 * registers for the whole KC loop, each step a fused multiply-add. Small
 * products (the per-head 32x32x16 of a toy model) skip A's packing: the
 * micro-kernel reads A through its strides; a head-sized block (at most 128
 * rows of C, KC <= 128) whose B rows are contiguous and cover whole panels
 * reads B in place too (ldb), overlapping the first touch of a head's k or v
 * with the arithmetic instead of a copy before it.
 *
 * Every output element is still summed over k in order (KC blocks in order,
 * k in order inside each), only with one rounding per multiply-add instead of
 * two, and the same whatever the thread count: an element's sum never depends
 * on which rows or columns a thread was given.
 *
 * Kernels: AVX-512 (8 x 32), AVX2+FMA (6 x 16), picked at run time on x86-64;
 * elsewhere a portable one (4 x 16) written with fmaf, which compilers turn
 * into NEON's fmla on ARM. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

#define KC 256 /* a KC x NR panel of B (32 KB at NR = 32) stays in L1 while A's panels stream past */
#define MC_PANELS 16
#define NC AC_GEMM_NC
#define MAX_MR 8
#define MAX_NR 32

typedef void (*ukernel)(int64_t k, const float *a, int64_t rsa, int64_t csa, const float *b, int64_t ldb, float *c, int64_t ldc,
                        bool acc);

/* ---- the portable micro-kernel: 4 x 16 ------------------------------------------------------------------ */
static void kernel_c(int64_t K, const float *a, int64_t rsa, int64_t csa, const float *b, int64_t ldb, float *c, int64_t ldc,
                     bool acc) {
    float t[4][16];
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 16; j++) t[r][j] = acc ? c[r * ldc + j] : 0.0f;
    for (int64_t k = 0; k < K; k++, a += csa, b += ldb)
        for (int r = 0; r < 4; r++) {
            float s = a[r * rsa];
            for (int j = 0; j < 16; j++) t[r][j] = fmaf(s, b[j], t[r][j]);
        }
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 16; j++) c[r * ldc + j] = t[r][j];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AC_X86 1

/* AVX-512: 8 rows x 2 zmm; 16 accumulators, 2 loads of B and 8 broadcasts of
 * A per step. The accumulators are named variables, not arrays: an array
 * went through the stack on every call (zeroed with rep stos, loaded, stored
 * back, loaded again), which cost a K = 32 head product a third of its time. */
#define ROW_LOAD(r) \
    __m512 c##r##0 = acc ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps(); \
    __m512 c##r##1 = acc ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
#define ROW_FMA(r)                                   \
    {                                                \
        __m512 x = _mm512_set1_ps(a[r * rsa]);       \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);   \
        c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);   \
    }
#define ROW_STORE(r) _mm512_storeu_ps(c + r * ldc, c##r##0), _mm512_storeu_ps(c + r * ldc + 16, c##r##1);
__attribute__((target("avx512f"))) static void kernel_avx512(int64_t K, const float *a, int64_t rsa, int64_t csa,
                                                             const float *b, int64_t ldb, float *c, int64_t ldc, bool acc) {
    ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5) ROW_LOAD(6) ROW_LOAD(7)
    for (int64_t k = 0; k < K; k++, a += csa, b += ldb) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5) ROW_FMA(6) ROW_FMA(7)
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5) ROW_STORE(6) ROW_STORE(7)
}
#undef ROW_LOAD
#undef ROW_FMA
#undef ROW_STORE

/* AVX-512 for narrow products (N <= 16: a head's P @ V at head_dim 16):
 * 8 rows x 1 zmm, so no half-empty tile goes through the edge path. */
#define ROW_LOAD(r) __m512 c##r = acc ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
#define ROW_FMA(r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(a[r * rsa]), b0, c##r);
#define ROW_STORE(r) _mm512_storeu_ps(c + r * ldc, c##r);
__attribute__((target("avx512f"))) static void kernel_avx512_16(int64_t K, const float *a, int64_t rsa, int64_t csa,
                                                                const float *b, int64_t ldb, float *c, int64_t ldc, bool acc) {
    ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5) ROW_LOAD(6) ROW_LOAD(7)
    for (int64_t k = 0; k < K; k++, a += csa, b += ldb) {
        __m512 b0 = _mm512_loadu_ps(b);
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5) ROW_FMA(6) ROW_FMA(7)
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5) ROW_STORE(6) ROW_STORE(7)
}
#undef ROW_LOAD
#undef ROW_FMA
#undef ROW_STORE

/* AVX2 + FMA: 6 rows x 2 ymm; 12 accumulators of the 16 registers (named, as above). */
#define ROW_LOAD(r) \
    __m256 c##r##0 = acc ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps(); \
    __m256 c##r##1 = acc ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
#define ROW_FMA(r)                                   \
    {                                                \
        __m256 x = _mm256_broadcast_ss(a + r * rsa); \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);   \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);   \
    }
#define ROW_STORE(r) _mm256_storeu_ps(c + r * ldc, c##r##0), _mm256_storeu_ps(c + r * ldc + 8, c##r##1);
__attribute__((target("avx2,fma"))) static void kernel_avx2(int64_t K, const float *a, int64_t rsa, int64_t csa,
                                                            const float *b, int64_t ldb, float *c, int64_t ldc, bool acc) {
    ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5)
    for (int64_t k = 0; k < K; k++, a += csa, b += ldb) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}
#undef ROW_FMA

/* The same sums for the common case, A and B both packed (A's panel MR = 6 wide, B's NR = 16): the
 * strides are constants and the loop goes 4 steps a turn, so each step is its 12 FMAs, 2 loads and
 * 6 broadcasts at fixed offsets with no address arithmetic (the strided kernel above spends 4 more
 * instructions a step on it): 80-85 against 65-75 GFLOP/s on an L1-resident block here (Zen 3,
 * FMA peak 88 at one thread). Each element's chain is the strided kernel's, step for step. */
#define ROW_FMA(r, s)                                    \
    {                                                    \
        __m256 x = _mm256_broadcast_ss(a + (s) * 6 + r); \
        c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);       \
        c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);       \
    }
#define STEP(s)                                                                              \
    {                                                                                        \
        __m256 b0 = _mm256_loadu_ps(b + (s) * 16), b1 = _mm256_loadu_ps(b + (s) * 16 + 8); \
        ROW_FMA(0, s) ROW_FMA(1, s) ROW_FMA(2, s) ROW_FMA(3, s) ROW_FMA(4, s) ROW_FMA(5, s) \
    }
__attribute__((target("avx2,fma"))) static void kernel_avx2_packed(int64_t K, const float *a, const float *b, float *c,
                                                                   int64_t ldc, bool acc) {
    ROW_LOAD(0) ROW_LOAD(1) ROW_LOAD(2) ROW_LOAD(3) ROW_LOAD(4) ROW_LOAD(5)
    /* unrolled by the compiler: written out 4 steps a turn, gcc hoisted the next step's loads and
     * spilled 2 accumulators to the stack each turn (6% of a product's speed) */
#if defined(__clang__)
#pragma clang loop unroll_count(4)
#elif defined(__GNUC__)
#pragma GCC unroll 4
#endif
    for (int64_t k = 0; k < K; k++, a += 6, b += 16) STEP(0)
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}
#undef STEP
#undef ROW_LOAD
#undef ROW_FMA
#undef ROW_STORE
#endif

/* Plain loops for tiny products: the micro-kernels' very sums (k in order,
 * one fused rounding each), without tiles or packing. */
#define TINY_LOOP(FMA)                                                                           \
    for (int64_t i = i0; i < i1; i++) {                                                          \
        const float *a = A + i * rsa;                                                            \
        float *c = C + i * ldc;                                                                  \
        int64_t j = 0;                                                                           \
        for (; j + 2 <= N; j += 2) { /* two sums at once: one FMA's latency hides the other's */ \
            const float *b = B + j * csb;                                                        \
            float c0 = acc ? c[j] : 0.0f, c1 = acc ? c[j + 1] : 0.0f;                            \
            for (int64_t k = 0; k < K; k++) {                                                    \
                c0 = FMA(a[k * csa], b[k * rsb], c0);                                            \
                c1 = FMA(a[k * csa], b[k * rsb + csb], c1);                                      \
            }                                                                                    \
            c[j] = c0, c[j + 1] = c1;                                                            \
        }                                                                                        \
        for (; j < N; j++) {                                                                     \
            float c0 = acc ? c[j] : 0.0f;                                                        \
            for (int64_t k = 0; k < K; k++) c0 = FMA(a[k * csa], B[k * rsb + j * csb], c0);     \
            c[j] = c0;                                                                           \
        }                                                                                        \
    }
typedef void (*tiny_fn)(int64_t i0, int64_t i1, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                        const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc, bool acc);
static void tiny_c(int64_t i0, int64_t i1, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                   const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc, bool acc) {
    TINY_LOOP(fmaf)
}
#ifdef AC_X86
__attribute__((target("fma"))) static void tiny_fma(int64_t i0, int64_t i1, int64_t N, int64_t K, const float *A,
                                                    int64_t rsa, int64_t csa, const float *B, int64_t rsb, int64_t csb,
                                                    float *C, int64_t ldc, bool acc) {
    TINY_LOOP(__builtin_fmaf) /* one vfmadd231ss, not a call into libm */
}
#endif

/* packed: the micro-kernel for A and B both in packed panels (rsa 1, csa mr, ldb nr), or NULL */
typedef void (*packed_fn)(int64_t k, const float *a, const float *b, float *c, int64_t ldc, bool acc);
typedef struct { ukernel k; int mr, nr; const char *name; tiny_fn tiny; packed_fn packed; } Kernel;

static Kernel pick(void) {
#ifdef AC_X86
    if (ac_cpu_isa() == AC_ISA_AVX512) return (Kernel){kernel_avx512, 8, 32, "avx512", tiny_fma, NULL};
    if (ac_cpu_isa() == AC_ISA_AVX2) return (Kernel){kernel_avx2, 6, 16, "avx2+fma", tiny_fma, kernel_avx2_packed};
#endif
    return (Kernel){kernel_c, 4, 16, "portable", tiny_c, NULL};
}

/* The kernel for this CPU, picked once (pthread_once: threads asking first
 * wait for one answer); tests may swap it (ac_gemm_use_kernel), so it is
 * read through an atomic pointer to one of two stored copies. */
static Kernel kernels[2];
static _Atomic(const Kernel *) chosen;
static pthread_once_t picked = PTHREAD_ONCE_INIT;
static void pick_once(void) {
    kernels[0] = pick();
    atomic_store(&chosen, &kernels[0]);
}
static Kernel kernel(void) {
    pthread_once(&picked, pick_once);
    return *atomic_load_explicit(&chosen, memory_order_acquire);
}

/* For tests: run a given kernel ("avx512", "avx2+fma", "portable") if this CPU has it. */
bool ac_gemm_use_kernel(const char *name) {
    Kernel all[3] = {{kernel_c, 4, 16, "portable", tiny_c, NULL}};
    int n = 1;
#ifdef AC_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) all[n++] = (Kernel){kernel_avx512, 8, 32, "avx512", tiny_fma, NULL};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        all[n++] = (Kernel){kernel_avx2, 6, 16, "avx2+fma", tiny_fma, kernel_avx2_packed};
#endif
    for (int i = 0; i < n; i++)
        if (strcmp(all[i].name, name) == 0) {
            pthread_once(&picked, pick_once);
            kernels[1] = all[i]; /* tests switch before any thread computes */
            atomic_store(&chosen, &kernels[1]);
            return true;
        }
    return false;
}

const char *ac_gemm_fast_kernel_name(void) { return kernel().name; }
const char *ac_gemm_kernel_name(void) { return kernel().name; }

#ifdef AC_X86
/* Eight lines contiguous along k, 8 steps of each (line r at p + r * ld; lines from `lines` on,
 * a constant 6 or 8, are not read and count as zeros): out[q] holds step q of all eight,
 * transposed in registers (unpack, shuffle, permute). */
__attribute__((target("avx2"))) static inline void transpose8(const float *p, int64_t ld, int lines, __m256 out[8]) {
    __m256 r0 = _mm256_loadu_ps(p + 0 * ld), r1 = _mm256_loadu_ps(p + 1 * ld);
    __m256 r2 = _mm256_loadu_ps(p + 2 * ld), r3 = _mm256_loadu_ps(p + 3 * ld);
    __m256 r4 = _mm256_loadu_ps(p + 4 * ld), r5 = _mm256_loadu_ps(p + 5 * ld);
    __m256 r6 = lines > 6 ? _mm256_loadu_ps(p + 6 * ld) : _mm256_setzero_ps();
    __m256 r7 = lines > 7 ? _mm256_loadu_ps(p + 7 * ld) : _mm256_setzero_ps();
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    out[0] = _mm256_permute2f128_ps(u0, u4, 0x20), out[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    out[2] = _mm256_permute2f128_ps(u2, u6, 0x20), out[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    out[4] = _mm256_permute2f128_ps(u0, u4, 0x31), out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    out[6] = _mm256_permute2f128_ps(u2, u6, 0x31), out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* `lines` lines contiguous along k (A's rows, or a transposed B's columns; a constant 8, or 6 for
 * AVX2's MR) into as many columns of a panel ld floats wide: 8 x 8 blocks transposed in registers,
 * each stored as 8 k-steps. The scalar loop does the same with a scattered store per element, a
 * cost that was a fifth of the kernel's on a 2048 x 256 x 256 product; for A's 6-row panels its
 * loads of a big A (rows far apart, each a run of KC floats) missed cache with few in flight, 17%
 * of a 2048^3 product. */
__attribute__((target("avx2"))) static inline void pack_lines(const float *A, int64_t rsa, int64_t kc, float *Ap,
                                                             int64_t ld, int lines) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 col[8];
        transpose8(A + k, rsa, lines, col);
        for (int q = 0; q < 8; q++) {
            if (lines == 8) {
                _mm256_storeu_ps(Ap + (k + q) * ld, col[q]);
            } else { /* the step's 6 floats: 4 and 2 */
                _mm_storeu_ps(Ap + (k + q) * ld, _mm256_castps256_ps128(col[q]));
                _mm_storel_pi((__m64 *)(Ap + (k + q) * ld + 4), _mm256_extractf128_ps(col[q], 1));
            }
        }
    }
    for (; k < kc; k++)
        for (int r = 0; r < lines; r++) Ap[k * ld + r] = A[r * rsa + k];
}

/* A few rows of C (fewer than the kernel's MR: generating one token) against a B whose columns are
 * contiguous along k (a weight read as W^T): each output's sum is the micro-kernel's very chain
 * (k in order, one fused multiply-add each, from zero or from C), but B is read once, 8 of its
 * lines at a time transposed in registers, with no packed copy and no rows of zeros multiplied:
 * a token's pass over the weights is then as fast as memory gives them. */
__attribute__((target("avx2,fma"))) static void gemv_rows_avx2(int64_t M, int64_t N, int64_t K, const float *A,
                                                               int64_t rsa, int64_t csa, const float *B, int64_t csb,
                                                               float *C, int64_t ldc, bool acc) {
    int64_t j = 0;
    for (; j + 8 <= N; j += 8) {
        __m256 c[MAX_MR];
        for (int64_t m = 0; m < M; m++) c[m] = acc ? _mm256_loadu_ps(C + m * ldc + j) : _mm256_setzero_ps();
        const float *w = B + j * csb;
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            __m256 col[8];
            if (j + 16 <= N) /* the next 8 lines' same place, ahead of the hardware's prefetcher (as gemm_bf16.c) */
                for (int q = 0; q < 8; q += 2) /* a 64-byte line is two steps: every other line a step */
                    __builtin_prefetch((const void *)((uintptr_t)(w + k + (8 + q + (k & 8 ? 1 : 0)) * csb)));
            transpose8(w + k, csb, 8, col);
            for (int q = 0; q < 8; q++) /* step k + q: col[q] holds B[k + q][j .. j + 7] */
                for (int64_t m = 0; m < M; m++)
                    c[m] = _mm256_fmadd_ps(_mm256_set1_ps(A[m * rsa + (k + q) * csa]), col[q], c[m]);
        }
        for (; k < K; k++) {
            __m256 col = _mm256_setr_ps(w[k], w[csb + k], w[2 * csb + k], w[3 * csb + k], w[4 * csb + k], w[5 * csb + k],
                                        w[6 * csb + k], w[7 * csb + k]);
            for (int64_t m = 0; m < M; m++) c[m] = _mm256_fmadd_ps(_mm256_set1_ps(A[m * rsa + k * csa]), col, c[m]);
        }
        for (int64_t m = 0; m < M; m++) _mm256_storeu_ps(C + m * ldc + j, c[m]);
    }
    for (; j < N; j++) /* the last columns one at a time: the same fused chain */
        for (int64_t m = 0; m < M; m++) {
            float s = acc ? C[m * ldc + j] : 0.0f;
            for (int64_t k = 0; k < K; k++) s = __builtin_fmaf(A[m * rsa + k * csa], B[j * csb + k], s);
            C[m * ldc + j] = s;
        }
}

#endif

static inline void copy_line(float *d, const float *s, int w) { /* constant sizes: inlined moves, no call */
    switch (w) {
    case 6: memcpy(d, s, 6 * sizeof(float)); break;
    case 8: memcpy(d, s, 8 * sizeof(float)); break;
    case 16: memcpy(d, s, 16 * sizeof(float)); break;
    case 32: memcpy(d, s, 32 * sizeof(float)); break;
    default: memcpy(d, s, sizeof(float) * (size_t)w);
    }
}

/* n lines of X (line i, step k at X[i * rl + k * rk]) into w-wide panels,
 * k-major (panel element [k][q] is line p + q at step k), the last one
 * zero-padded: A's row panels (lines are A's rows: rl = rsa, rk = csa) and
 * B's column panels (lines are B's columns: rl = csb, rk = rsb) alike. The
 * loops follow X's unit stride:
 *  - lines contiguous along k (A's rows; a transposed B, a weight read as
 *    W^T): 8 lines at a time transposed in registers;
 *  - steps contiguous across lines (B's rows; a transposed A, dY^T in a
 *    weight's gradient): 8 steps at a time (in L1), each panel given 8 whole
 *    steps, its lines written whole; one step into every panel in turn left
 *    lines half-written (panels kc * w * 4 bytes apart share an L1 set). */
static void pack(const float *X, int64_t rl, int64_t rk, int64_t n, int64_t kc, int w, float *P) {
    int64_t full = w % 8 == 0 || w == 6 ? n / w * w : 0; /* lines in whole panels, for the fast paths */
    if (rl == 1 && full) {
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8)
            for (int64_t i = 0; i < full; i += w)
                for (int q = 0; q < 8; q++) copy_line(P + i * kc + (k + q) * w, X + (k + q) * rk + i, w);
        for (; k < kc; k++)
            for (int64_t i = 0; i < full; i += w) copy_line(P + i * kc + k * w, X + k * rk + i, w);
        if (full == n) return;
        X += full, P += full * kc, n -= full; /* the partial panel below */
    }
    for (int64_t i = 0; i < n; i += w, P += kc * w) {
        int h = n - i < w ? (int)(n - i) : w;
#ifdef AC_X86
        if (rk == 1 && h == w && w % 8 == 0 && ac_have_avx2()) {
            for (int q = 0; q < w; q += 8) pack_lines(X + (i + q) * rl, rl, kc, P + q, w, 8);
            continue;
        }
        if (rk == 1 && h == 6 && w == 6 && ac_have_avx2()) {
            pack_lines(X + i * rl, rl, kc, P, 6, 6);
            continue;
        }
#endif
        if (rk == 1) {
            for (int q = 0; q < h; q++) {
                const float *s = X + (i + q) * rl;
                for (int64_t k = 0; k < kc; k++) P[k * w + q] = s[k];
            }
        } else {
            for (int64_t k = 0; k < kc; k++)
                for (int q = 0; q < h; q++) P[k * w + q] = X[(i + q) * rl + k * rk];
        }
        for (int64_t k = 0; h < w && k < kc; k++)
            for (int q = h; q < w; q++) P[k * w + q] = 0.0f;
    }
}

/* One MR x NR block of C, full or at an edge: an edge goes through a local
 * tile, and rows of A past the edge are zeros (packed panels already are; an
 * unpacked A is copied into one such panel, never read past its last row). */
static inline void run_kernel(const Kernel *kn, int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *b,
                              int64_t ldb, float *c, int64_t ldc, bool acc) {
    if (kn->packed && rsa == 1 && csa == kn->mr && ldb == kn->nr) kn->packed(kc, a, b, c, ldc, acc);
    else kn->k(kc, a, rsa, csa, b, ldb, c, ldc, acc);
}

static void block(const Kernel *kn, int64_t kc, const float *a, int64_t rsa, int64_t csa, const float *bp, int64_t ldb, float *c,
                  int64_t ldc, int h, int w, bool acc) {
    if (h == kn->mr && w == kn->nr) {
        run_kernel(kn, kc, a, rsa, csa, bp, ldb, c, ldc, acc);
        return;
    }
    float panel[KC * MAX_MR];
    if (h < kn->mr) {
        pack(a, rsa, csa, h, kc, kn->mr, panel);
        a = panel, rsa = 1, csa = kn->mr;
    }
    float tile[MAX_MR * MAX_NR];
    for (int r = 0; r < kn->mr; r++)
        for (int q = 0; q < kn->nr; q++) tile[r * kn->nr + q] = acc && r < h && q < w ? c[r * ldc + q] : 0.0f;
    run_kernel(kn, kc, a, rsa, csa, bp, ldb, tile, kn->nr, true);
    for (int r = 0; r < h; r++)
        for (int q = 0; q < w; q++) c[r * ldc + q] = tile[r * kn->nr + q];
}

/* The scratch (floats) that ac_gemm_fast_rows needs for an N x K B: its packed
 * B slice and one packed block of A. */
size_t ac_gemm_fast_scratch(int64_t N, int64_t K) {
    Kernel kn = kernel();
    int64_t nc = N < NC ? N : NC, kc = K < KC ? K : KC;
    return (size_t)(kc * ((nc + kn.nr - 1) / kn.nr) * kn.nr + kc * (int64_t)kn.mr * MC_PANELS);
}

/* C rows [i_begin, i_end) of the product, with the caller's scratch (threads
 * split the rows; an element's sum is the same whoever computes it). */
void ac_gemm_fast_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate, int64_t i_begin,
                       int64_t i_end, float *scratch) {
    Kernel kn = kernel();
    if (M * N * K <= AC_GEMM_TINY) { /* the article's 6x3 @ 3x2: tiles and packing would cost more than the sums */
        kn.tiny(i_begin, i_end, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
        return;
    }
#ifdef AC_X86
    if (kn.k == kernel_avx512 && N <= 16) kn.k = kernel_avx512_16, kn.nr = 16, kn.packed = NULL; /* its scratch fits in kernel_avx512's */
    if (i_end - i_begin < kn.mr && rsb == 1 && kn.k != kernel_c && ac_have_avx2()) { /* a token's rows against W^T */
        gemv_rows_avx2(i_end - i_begin, N, K, A + i_begin * rsa, rsa, csa, B, csb, C + i_begin * ldc, ldc, accumulate);
        return;
    }
#endif
    int mr = kn.mr, nr = kn.nr;
    int64_t mc_max = (int64_t)mr * MC_PANELS;
    /* No packing of A, which the micro-kernel then reads through its strides,
     * for small products, and for rows of A along k that fit one KC block (a
     * linear layer's 2048 x 256 x 256: 163 against 150 GFLOP/s here, the
     * pass over A that packing costs saved) */
    bool pack_a = K * N >= 64 * 64 && M >= 2 * mr && N > 2 * nr && !(csa == 1 && K <= KC);
    int64_t nc_max = N < NC ? N : NC, kc_max = K < KC ? K : KC;
    float *Bp = scratch, *Ap = scratch + kc_max * ((nc_max + nr - 1) / nr) * nr;
    for (int64_t j0 = 0; j0 < N; j0 += NC) {
        int64_t nc = N - j0 < NC ? N - j0 : NC;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            int64_t kc = K - k0 < KC ? K - k0 : KC;
            bool acc = accumulate || k0 > 0; /* later K blocks add to what the earlier ones left */
            /* B's rows read in place, nr columns a step, when they are contiguous and whole panels */
            bool direct = csb == 1 && nc % nr == 0 && i_end - i_begin <= 128 && kc <= 128;
            if (!direct) pack(B + k0 * rsb + j0 * csb, csb, rsb, nc, kc, nr, Bp);
            for (int64_t i0 = i_begin; i0 < i_end; i0 += mc_max) {
                int64_t mc = i_end - i0 < mc_max ? i_end - i0 : mc_max;
                const float *a0 = A + i0 * rsa + k0 * csa;
                if (pack_a) pack(a0, rsa, csa, mc, kc, mr, Ap);
                for (int64_t j = 0; j < nc; j += nr) {
                    int w = nc - j < nr ? (int)(nc - j) : nr;
                    const float *bp = direct ? B + k0 * rsb + j0 + j : Bp + (j / nr) * kc * nr;
                    int64_t ldb = direct ? rsb : nr;
                    for (int64_t i = 0; i < mc; i += mr) {
                        int h = mc - i < mr ? (int)(mc - i) : mr;
                        float *c = C + (i0 + i) * ldc + j0 + j;
                        /* the next tile of C on its way while this one is computed: its rows
                         * are ldc apart, each a miss the kernel would otherwise wait for */
                        const float *next = i + mr < mc ? c + mr * ldc                   /* below */
                                          : j + nr < nc ? C + i0 * ldc + j0 + j + nr /* the next panel's first */
                                                        : NULL;
                        for (int r = 0; next && r < mr; r++) {
                            __builtin_prefetch(next + r * ldc, 1);
                            __builtin_prefetch(next + r * ldc + nr - 1, 1);
                        }
                        if (pack_a) block(&kn, kc, Ap + (i / mr) * kc * mr, 1, mr, bp, ldb, c, ldc, h, w, acc);
                        else block(&kn, kc, a0 + i * rsa, rsa, csa, bp, ldb, c, ldc, h, w, acc);
                    }
                }
            }
        }
    }
}
