/* The matmul kernel. C[M,N] = A[M,K] @ B[K,N], row-major.
 *
 * Every output element is summed over k in order, starting from 0, with one
 * rounding per multiply and per add: exactly what reference BLAS (the one
 * PyTorch links on Debian) does, so results match torch bit for bit. The speed
 * comes from blocking, not from reordering: a panel of B (K x 16) is packed
 * once and stays in cache while 4 rows of A stream past it, and a 4x16 block
 * of C lives in registers for the whole k loop (llm.c's and BLIS's idea).
 * On x86-64 Linux the kernel is also compiled for AVX2 and picked at load
 * time; -ffp-contract=off keeps FMA out, so both versions give the same bits. */
#include <string.h>

#include "internal.h"

#define MR 4
#define NR 16

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(AC_NO_CLONES)
#define AC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AC_CLONES
#endif

/* One MR x NR block (full size) of C. */
static inline void block_full(int64_t K, const float *A, int64_t lda, const float *Bp, float *C,
                              int64_t ldc, bool acc) {
    float c[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) c[r][j] = acc ? C[r * ldc + j] : 0.0f;
    for (int64_t k = 0; k < K; k++) {
        const float *b = Bp + k * NR;
        for (int r = 0; r < MR; r++) {
            float a = A[r * lda + k];
            for (int j = 0; j < NR; j++) c[r][j] += a * b[j];
        }
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) C[r * ldc + j] = c[r][j];
}

/* An edge block: mr <= MR rows, nr <= NR columns. */
static inline void block_edge(int64_t K, const float *A, int64_t lda, const float *Bp, float *C,
                              int64_t ldc, int mr, int nr, bool acc) {
    float c[MR][NR];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < NR; j++) c[r][j] = (acc && j < nr) ? C[r * ldc + j] : 0.0f;
    for (int64_t k = 0; k < K; k++) {
        const float *b = Bp + k * NR;
        for (int r = 0; r < mr; r++) {
            float a = A[r * lda + k];
            for (int j = 0; j < NR; j++) c[r][j] += a * b[j];
        }
    }
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) C[r * ldc + j] = c[r][j];
}

AC_CLONES
static void gemm_impl(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                      int64_t ldb, float *C, int64_t ldc, bool acc, float *Bp) {
    for (int64_t j0 = 0; j0 < N; j0 += NR) {
        int nr = N - j0 < NR ? (int)(N - j0) : NR;
        for (int64_t k = 0; k < K; k++) { /* pack B[:, j0:j0+nr], zero-padded to NR */
            const float *src = B + k * ldb + j0;
            float *dst = Bp + k * NR;
            for (int j = 0; j < nr; j++) dst[j] = src[j];
            for (int j = nr; j < NR; j++) dst[j] = 0.0f;
        }
        int64_t i0 = 0;
        if (nr == NR)
            for (; i0 + MR <= M; i0 += MR) block_full(K, A + i0 * lda, lda, Bp, C + i0 * ldc + j0, ldc, acc);
        for (; i0 < M; i0 += MR) {
            int mr = M - i0 < MR ? (int)(M - i0) : MR;
            block_edge(K, A + i0 * lda, lda, Bp, C + i0 * ldc + j0, ldc, mr, nr, acc);
        }
    }
}

void ac_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
             float *C, int64_t ldc, bool accumulate) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        if (!accumulate)
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
        return;
    }
    ac_mark m = ac_arena_mark();
    float *Bp = ac_arena_alloc(sizeof(float) * (size_t)(K * NR));
    gemm_impl(M, N, K, A, lda, B, ldb, C, ldc, accumulate, Bp);
    ac_arena_release(m);
}

void ac_transpose2d(const float *src, int64_t rows, int64_t cols, float *out) {
    const int64_t T = 32; /* tiles keep both sides in cache */
    for (int64_t i0 = 0; i0 < rows; i0 += T)
        for (int64_t j0 = 0; j0 < cols; j0 += T)
            for (int64_t i = i0; i < rows && i < i0 + T; i++)
                for (int64_t j = j0; j < cols && j < j0 + T; j++) out[j * rows + i] = src[i * cols + j];
}
