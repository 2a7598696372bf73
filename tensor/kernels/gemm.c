/* The matmul kernel. C[M,N] = A[M,K] @ B[K,N], with any strides for A and B
 * (a transposed operand is just other strides: no copy).
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

#if defined(__x86_64__) && defined(__linux__) && (!defined(__clang__) || __clang_major__ >= 14) && \
    !defined(AC_NO_CLONES)
#define AC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AC_CLONES
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AC_INLINE static inline __attribute__((always_inline)) /* into each clone of gemm_impl */
/* 8 floats as one vector (GCC/clang vector extensions: AVX2 registers in the
 * AVX2 clone, pairs of SSE/NEON registers elsewhere); aligned(4) allows
 * unaligned loads and stores of C. */
typedef float v8 __attribute__((vector_size(32), aligned(4)));
#define AC_VECTOR_KERNEL 1
#else
#define AC_INLINE static inline
#endif

/* One MR x NR block (full size) of C: 4 rows x 2 vectors of accumulators stay
 * in registers for the whole k loop; each step adds a[r][k] * b[k][:] (a
 * multiply, then an add: never fused). */
AC_INLINE void block_full(int64_t K, const float *A, int64_t rsa, int64_t csa, const float *Bp, float *C,
                              int64_t ldc, bool acc) {
#ifdef AC_VECTOR_KERNEL
    v8 c00, c01, c10, c11, c20, c21, c30, c31;
    if (acc) {
        c00 = *(const v8 *)(C + 0 * ldc), c01 = *(const v8 *)(C + 0 * ldc + 8);
        c10 = *(const v8 *)(C + 1 * ldc), c11 = *(const v8 *)(C + 1 * ldc + 8);
        c20 = *(const v8 *)(C + 2 * ldc), c21 = *(const v8 *)(C + 2 * ldc + 8);
        c30 = *(const v8 *)(C + 3 * ldc), c31 = *(const v8 *)(C + 3 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = (v8){0};
    }
    const float *a = A;
    const float *b = Bp;
    for (int64_t k = 0; k < K; k++, a += csa, b += NR) {
        v8 b0 = *(const v8 *)b, b1 = *(const v8 *)(b + 8);
        float s0 = a[0], s1 = a[rsa], s2 = a[2 * rsa], s3 = a[3 * rsa];
        v8 x;
        x = (v8){s0, s0, s0, s0, s0, s0, s0, s0}; c00 += x * b0; c01 += x * b1; /* a broadcast, not 0 + a */
        x = (v8){s1, s1, s1, s1, s1, s1, s1, s1}; c10 += x * b0; c11 += x * b1;
        x = (v8){s2, s2, s2, s2, s2, s2, s2, s2}; c20 += x * b0; c21 += x * b1;
        x = (v8){s3, s3, s3, s3, s3, s3, s3, s3}; c30 += x * b0; c31 += x * b1;
    }
    *(v8 *)(C + 0 * ldc) = c00, *(v8 *)(C + 0 * ldc + 8) = c01;
    *(v8 *)(C + 1 * ldc) = c10, *(v8 *)(C + 1 * ldc + 8) = c11;
    *(v8 *)(C + 2 * ldc) = c20, *(v8 *)(C + 2 * ldc + 8) = c21;
    *(v8 *)(C + 3 * ldc) = c30, *(v8 *)(C + 3 * ldc + 8) = c31;
#else
    float c[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) c[r][j] = acc ? C[r * ldc + j] : 0.0f;
    for (int64_t k = 0; k < K; k++)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) c[r][j] += A[r * rsa + k * csa] * Bp[k * NR + j];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) C[r * ldc + j] = c[r][j];
#endif
}

/* An edge block: mr <= MR rows, nr <= NR columns (B's panel is zero-padded). */
AC_INLINE void block_edge(int64_t K, const float *A, int64_t rsa, int64_t csa, const float *Bp, float *C,
                              int64_t ldc, int mr, int nr, bool acc) {
    for (int r = 0; r < mr; r++) {
        float c[NR];
        for (int j = 0; j < NR; j++) c[j] = (acc && j < nr) ? C[r * ldc + j] : 0.0f;
        const float *a = A + r * rsa;
        for (int64_t k = 0; k < K; k++)
            for (int j = 0; j < NR; j++) c[j] += a[k * csa] * Bp[k * NR + j];
        for (int j = 0; j < nr; j++) C[r * ldc + j] = c[j];
    }
}

AC_CLONES
static void gemm_impl(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                      int64_t rsb, int64_t csb, float *C, int64_t ldc, bool acc, float *Bp) {
    for (int64_t j0 = 0; j0 < N; j0 += NR) {
        int nr = N - j0 < NR ? (int)(N - j0) : NR;
        /* pack B[:, j0:j0+nr] as K rows of NR (zero-padded), whatever B's layout */
        if (csb == 1) {
            for (int64_t k = 0; k < K; k++) {
                const float *src = B + k * rsb + j0;
                float *dst = Bp + k * NR;
                for (int j = 0; j < nr; j++) dst[j] = src[j];
                for (int j = nr; j < NR; j++) dst[j] = 0.0f;
            }
        } else {
            for (int j = 0; j < NR; j++) {
                const float *src = B + (j0 + j) * csb;
                for (int64_t k = 0; k < K; k++) Bp[k * NR + j] = j < nr ? src[k * rsb] : 0.0f;
            }
        }
        int64_t i0 = 0;
        if (nr == NR)
            for (; i0 + MR <= M; i0 += MR) block_full(K, A + i0 * rsa, rsa, csa, Bp, C + i0 * ldc + j0, ldc, acc);
        for (; i0 < M; i0 += MR) {
            int mr = M - i0 < MR ? (int)(M - i0) : MR;
            block_edge(K, A + i0 * rsa, rsa, csa, Bp, C + i0 * ldc + j0, ldc, mr, nr, acc);
        }
    }
}

/* The fast kernel split among threads, by rows of C in units of 24 (whole
 * micro-kernel blocks for MR = 8, 6 and 4) or by columns in units of 32 (whole
 * NR panels), each chunk with its own scratch from this thread's arena. A
 * piece packs its own share of B, and A once per NC columns: by rows, every
 * piece packs all of B; by columns, every piece packs all of A. The split
 * taken packs fewer floats: a GPT's linear layers (M = 512 tokens, N = 768 to
 * 50257) go by columns, their weight gradients (M = 768 to 50257) mostly by
 * rows. Either way an element's sum is the same, whoever computes it. */
#define ROW_UNIT 24
#define COL_UNIT 32
typedef struct {
    int64_t M, N, K, rsa, csa, rsb, csb, ldc;
    const float *A, *B;
    float *C, *scratch;
    size_t per_chunk;
    bool acc;
} GemmJob;

static void gemm_rows_task(void *ctx, int64_t b, int64_t e, int chunk) {
    const GemmJob *j = ctx;
    int64_t i0 = b * ROW_UNIT, i1 = e * ROW_UNIT < j->M ? e * ROW_UNIT : j->M;
    ac_gemm_fast_rows(j->M, j->N, j->K, j->A, j->rsa, j->csa, j->B, j->rsb, j->csb, j->C, j->ldc, j->acc, i0, i1,
                      j->scratch + (size_t)chunk * j->per_chunk);
}

static void gemm_cols_task(void *ctx, int64_t b, int64_t e, int chunk) {
    const GemmJob *j = ctx;
    int64_t j0 = b * COL_UNIT, j1 = e * COL_UNIT < j->N ? e * COL_UNIT : j->N;
    ac_gemm_fast_rows(j->M, j1 - j0, j->K, j->A, j->rsa, j->csa, j->B + j0 * j->csb, j->rsb, j->csb, j->C + j0, j->ldc,
                      j->acc, 0, j->M, j->scratch + (size_t)chunk * j->per_chunk);
}

static void gemm_fast_parallel(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                               const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc, bool acc) {
    int64_t flop = 2 * M * N * K, min_flop = 1 << 21; /* a chunk worth a thread: at least ~2 MFLOP */
    int64_t rows = (M + ROW_UNIT - 1) / ROW_UNIT, cols = (N + COL_UNIT - 1) / COL_UNIT;
    int64_t row_grain = rows * min_flop / flop + 1, col_grain = cols * min_flop / flop + 1;
    int row_chunks = ac_parallel_chunks(rows, row_grain), col_chunks = ac_parallel_chunks(cols, col_grain);
    /* floats packed (over K): by rows, B once a piece and A once per NC columns; by columns, A once
     * per piece and per NC columns of it, B once (pieces: ac_parallel_for's two per thread) */
    int64_t nblocks = (N + AC_GEMM_NC - 1) / AC_GEMM_NC, pr = 2 * row_chunks, pc = 2 * col_chunks;
    int64_t by_rows = pr * N + M * nblocks, by_cols = N + M * (pc > nblocks ? pc : nblocks);
    bool split_cols = col_chunks > 1 && (row_chunks == 1 || by_cols < by_rows);
    GemmJob j = {M, N, K, rsa, csa, rsb, csb, ldc, A, B, C, NULL, ac_gemm_fast_scratch(N, K), acc};
    int chunks = split_cols ? col_chunks : row_chunks;
    j.scratch = ac_arena_alloc(sizeof(float) * ac_size_mul(j.per_chunk, (size_t)chunks));
    if (split_cols) ac_parallel_for_max(cols, col_grain, chunks, gemm_cols_task, &j);
    else ac_parallel_for_max(rows, row_grain, chunks, gemm_rows_task, &j);
}

/* Exact or fast math, for the whole library (the default: fast). */
static bool exact_math;
void ac_set_exact(bool exact) { exact_math = exact; }
bool ac_get_exact(void) { return exact_math; }

/* An empty product: nothing to do, or (k = 0) C = 0. True when handled. */
static bool empty_product(int64_t M, int64_t N, int64_t K, float *C, int64_t ldc, bool accumulate) {
    if (M != 0 && N != 0 && K != 0) return false;
    if (M != 0 && N != 0 && !accumulate)
        for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    return true;
}

void ac_gemm_strided(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                     int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate) {
    if (empty_product(M, N, K, C, ldc, accumulate)) return;
    if (!exact_math && M * N * K <= AC_GEMM_TINY) { /* tiny: plain loops, no scratch, no threads */
        ac_gemm_fast_rows(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate, 0, M, NULL);
        return;
    }
    ac_mark m = ac_arena_mark();
    if (!exact_math) {
        gemm_fast_parallel(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
    } else {
        float *Bp = ac_arena_alloc(sizeof(float) * (size_t)(K * NR));
        gemm_impl(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate, Bp);
    }
    ac_arena_release(m);
}

size_t ac_gemm_scratch(int64_t N, int64_t K) {
    return exact_math ? (size_t)(K * NR) : ac_gemm_fast_scratch(N, K);
}

void ac_gemm_serial(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                    int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate, float *scratch) {
    if (empty_product(M, N, K, C, ldc, accumulate)) return;
    if (exact_math) gemm_impl(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate, scratch);
    else ac_gemm_fast_rows(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate, 0, M, scratch);
}

void ac_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
             int64_t ldc, bool accumulate) {
    ac_gemm_strided(M, N, K, A, lda, 1, B, ldb, 1, C, ldc, accumulate);
}
