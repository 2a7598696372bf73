/* Private helpers shared by the tensor/ sources: graph nodes, new tensors,
 * broadcasting, gradient accumulation. Not part of the public API. */
#ifndef ATTENTION_INTERNAL_H
#define ATTENTION_INTERNAL_H

#include "extend.h"
#include "tensor.h"

/* What the library keeps beside the public Tensor: every tensor is allocated
 * as a TensorImpl (ac_new, ac_view_of, ac_persist), so a Tensor * is the
 * first member of one. */
typedef struct TensorImpl {
    Tensor pub;
    struct TensorImpl *base;  /* a view: the tensor that owns the storage (never a view itself); NULL otherwise */
    uint64_t *version;        /* the storage's version counter (t._version), shared by its views */
    uint64_t own_version;     /* the counter itself, in the tensor that owns the storage */
    Tensor *gradbuf;          /* leaf: preallocated storage .grad points to */
    bool retains_grad;        /* retain_grad(): a non-leaf keeps its .grad */
    bool heap;                /* the header is malloc'd (debug mode, arena.c), not in the arena */
    uint32_t stamp;           /* AC_STAMP_LIVE; AC_STAMP_DEAD once ac_arena_release freed it */
    uint64_t made;            /* the arena generation it was made in (1 + the thread's releases that freed tensors) */
    uint64_t released;        /* dead: the release that freed it (release k ends generation k) */
} TensorImpl;
static inline TensorImpl *ac_impl(const Tensor *t) { return (TensorImpl *)(uintptr_t)t; }

void ac_check_inplace(Tensor *t, const char *op); /* PyTorch's leaf / view-of-leaf refusals */
/* masked_fill_ on a float tensor that is no view, contiguous, the mask checked (op_mask.c) */
void ac_masked_fill_whole_(Tensor *t, Tensor *mask, double value);
/* add_, sub_, mul_, div_ (op 0-3) by a number, on a float tensor that is no view, contiguous (op_elementwise.c) */
void ac_scalar_op_whole_(Tensor *x, int op, double s);

/* One node of the backward graph: what made a tensor, and how to send its
 * gradient back to the inputs. backward() receives the gradient of `out`
 * (out's shape, any strides: it reads it through ac_cdata or its strides, a
 * view handed on is not copied) and calls ac_accum() once per input. The edges
 * are taken when the node is made (PyTorch's next_functions): next[k] is the
 * grad_fn inputs[k] had then, so an in-place op that later gives an input a
 * new history does not reroute this node's gradient. What the backward needs
 * beyond the inputs is the op's own struct in ctx (AC_CTX); tensors whose
 * values it reads are kept as ac_saved, checked for in-place changes when
 * unpacked (PyTorch's SavedVariable). */
typedef struct Node Node;
typedef void (*ac_backward_fn)(Node *n, Tensor *grad_out);
struct Node {
    const char *name;        /* PyTorch 1.13's grad_fn name */
    ac_backward_fn backward;
    int n_inputs;
    Tensor **inputs;         /* inputs[i] may be NULL (no grad path) */
    Node **next;             /* inputs[i]'s grad_fn when this node was made; NULL: a leaf */
    bool *needs;             /* inputs[i] required grad when this node was made */
    Tensor *out;
    void *ctx;               /* the op's typed state (AC_CTX) */
    bool uses_saved;         /* saved tensors: a second backward after freeing is an error */
    bool freed;
    /* during backward */
    Tensor *bgrad;           /* the gradient of out accumulated so far */
    bool bgrad_owned;        /* nothing else refers to bgrad: it may be written into */
    uint32_t visit;
    uint64_t seq;            /* PyTorch's sequence_nr: the order nodes were made in (per thread) */
    int64_t deps;            /* during backward: edges from nodes not run yet */
};
void *ac_node_ctx(Node *n, size_t bytes);      /* zeroed, in the arena, kept in n->ctx */
#define AC_CTX(n, Type) ((Type *)ac_node_ctx((n), sizeof(Type)))

typedef struct { Tensor *t; uint64_t version; bool is_output; } ac_saved;
ac_saved ac_save(Node *n, Tensor *t);          /* t and its version now; NULL stays NULL */
Tensor *ac_unpack(const Node *n, ac_saved s);  /* t, or PyTorch's error if it was changed in place */

/* AC_ASAN: built with AddressSanitizer (gcc says so one way, clang another). */
#if defined(__SANITIZE_ADDRESS__)
#define AC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AC_ASAN 1
#endif
#endif
/* Memory no live allocation owns is poisoned under ASan (the arena's blocks, the
 * gradient buffers), so that a read of it fails loudly; nothing otherwise. */
#ifdef AC_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define POISON(p, n) __asan_poison_memory_region((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Use after release (arena.c). Every header is stamped live when made; each
 * thread logs the arena headers made since its marks, so that a release
 * stamps those it frees dead with its number. Every op runs ac_check_live on
 * its tensor inputs (through ac_check_defined): a dead stamp is an error
 * naming the op and the generations, a stamp that is neither (the memory
 * reused by data, or never a tensor) "not a live tensor". In the default mode
 * a header stays in the arena, so a stale pointer whose memory a new header
 * took reads that header's live stamp and is not caught; in debug mode
 * (AC_DEBUG=1, always in the ASan build) headers are malloc'd and a release
 * keeps the last AC_QUARANTINE it freed, dead, so that none aliases a new one. */
#define AC_STAMP_LIVE 0x7fb1e55du
#define AC_STAMP_DEAD 0x7fdeadedu
#define AC_QUARANTINE 65536
TensorImpl *ac_new_header(void);        /* zeroed, stamped live, logged: in the arena, or malloc'd in debug mode */
uint64_t ac_arena_generation(void);     /* this thread's: 1 + its releases that freed tensors so far */
/* The header's memory is read even where ASan has poisoned it (a released
 * header in the default mode): the stamp says what it is. */
#ifdef AC_ASAN
#define AC_NO_ASAN __attribute__((no_sanitize_address))
#else
#define AC_NO_ASAN
#endif
void ac_not_live(const Tensor *t, const char *op) /* the error for a stamp that is not live */
#if defined(__GNUC__)
    __attribute__((noreturn, cold))
#endif
    ;
static inline AC_NO_ASAN void ac_check_live(const Tensor *t, const char *op) {
    if (ac_impl(t)->stamp != AC_STAMP_LIVE) ac_not_live(t, op);
}
/* Tests: 1 headers malloc'd and quarantined (debug mode), 0 in the arena, -1
 * as the environment says (AC_DEBUG=1; always on in the ASan build). */
void ac_debug_tensors(int mode);
bool ac_debug_tensors_on(void);
size_t ac_quarantined(void);            /* this thread's quarantined headers */

/* The backward's gradient buffers (grad_buffers.c): while a node's backward
 * runs, ac_new takes the data of big tensors from here; autograd holds a
 * buffer for each pending node whose gradient it is and drops it when that
 * node has run, and what nothing holds is reused. */
bool ac_gbuf_wants(size_t bytes);       /* a node's backward is running and the tensor is big */
void *ac_gbuf_alloc(size_t bytes);
void ac_gbuf_hold(const Tensor *t);     /* no-op for a tensor whose data is not a buffer */
void ac_gbuf_drop(const Tensor *t);
bool ac_gbuf_suspend(void);             /* what is made until the resume goes to the arena (a leaf's .grad) */
void ac_gbuf_resume(bool was);
void ac_gbuf_sweep_begin(void);
void ac_gbuf_node_begin(void);
void ac_gbuf_node_end(void);
void ac_gbuf_sweep_end(void);
void ac_gbuf_abort(void);               /* an error ended the sweep */
void ac_gbuf_shutdown(void);
extern bool ac_gbuf_enabled;            /* false: everything in the arena (tests compare the two) */
extern size_t ac_gbuf_min_bytes;        /* the least a tensor takes from the buffers (64 KiB; the fuzzer: 0) */

/* New contiguous tensors in the arena. ac_new leaves data uninitialised. */
Tensor *ac_new(ac_dtype dtype, int ndim, const int64_t *shape);
Tensor *ac_new_zeros(ac_dtype dtype, int ndim, const int64_t *shape);
Tensor *ac_new_like(const Tensor *t);                       /* float32, t's shape */
/* float32, t's shape, and t's strides when they are a dense block in some dim
 * order (PyTorch's empty_like, preserve_format), else contiguous */
Tensor *ac_new_dense_like(const Tensor *t);
Tensor *ac_view_of(Tensor *base, int ndim, const int64_t *shape,
                   const int64_t *stride, int64_t offset);  /* shares storage */
void ac_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t ac_shape_numel(int ndim, const int64_t *shape); /* error on overflow */
bool ac_alloc_should_fail(void);                        /* counts an allocation (fault injection) */
bool ac_alloc_refused(size_t bytes);                    /* the same, and sizes past PTRDIFF_MAX */
#define AC_HUGE_PAGE ((size_t)2 << 20)
void *ac_block_alloc(size_t cap, size_t align, size_t used); /* aligned_alloc, huge pages at AC_HUGE_PAGE */
void ac_out_of_memory(uint64_t n, size_t elem_size)     /* "not enough memory: you tried to allocate N bytes" */
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;
const char *ac_dtype_name(ac_dtype d);

/* Contiguous float data of t (t itself when contiguous, else a copy). */
const float *ac_cdata(Tensor *t);
Tensor *ac_materialize(Tensor *t);          /* contiguous copy without autograd */
void ac_copy_strided(Tensor *dst_contig, const Tensor *src);
double ac_element_at(const Tensor *t, int64_t offset); /* any dtype, as double */
void ac_store_element(Tensor *t, int64_t offset, double v); /* converted to t's dtype */

/* Checks. */
char *ac_shape_x(const Tensor *t);          /* "2x3" in the arena */

/* Graph construction: returns NULL (and records nothing) when grad mode is
 * off or no input requires grad; else marks out as requiring grad. */
Node *ac_node(const char *name, ac_backward_fn fn, Tensor *out, int n, Tensor **inputs);
#define AC_NODE(name, fn, out, ...) ac_node(name, fn, out, TENSORS(__VA_ARGS__))
bool ac_needs_grad(const Tensor *t);        /* input wants a gradient (in a backward: it did when the node was made) */
/* A hook ac_error runs before the handler (each thread's own state): autograd
 * registers one that puts grad mode back, rng one that lets go of the default
 * generator. Registering twice is harmless. */
void ac_on_error(void (*hook)(void));
void ac_accum(Tensor *x, Tensor *g);        /* x.grad += g (g: x's shape) */
/* Gradients that a backward may overwrite. A node owns its incoming gradient
 * when nothing else refers to it: the seed backward() made, a sum autograd
 * made, or a new tensor a backward handed on with ac_accum_new (a view of an
 * owned gradient, too). A backward that maps g element by element may then
 * write its result into g (ac_grad_out) instead of a new tensor: the passes
 * over a model's (b, h, t, t) scores cost a third less memory traffic. */
void ac_accum_new(Tensor *x, Tensor *g);    /* ac_accum, g new and referenced by nothing else */
/* In a node's backward: the sweep keeps the graph (retain_graph), so the node may run again and must
 * leave what it saved as it was; false: the node runs this once, and may reuse its own saved copies. */
bool ac_backward_retains_graph(void);
void ac_accum_pass(Node *n, Tensor *x, Tensor *g); /* ac_accum of n's own gradient g (or a view of it): owned if n owned it */
Tensor *ac_grad_out(Node *n, Tensor *g);    /* g when n owns it and it is contiguous, else a new tensor like g */
/* The gradient summed so far for input x of the running backward, when it is
 * a contiguous buffer nothing else reads: a product may add into it directly
 * (fast math: C += A @ B rounds differently from C + (A @ B)). NULL otherwise. */
Tensor *ac_accum_target(Tensor *x);
/* false: no gradient is written into or added to in place (the fuzzer's
 * reference run; the gradients must come out the same) */
extern bool ac_grad_reuse;
Tensor *ac_sum_to(Tensor *g, const Tensor *like); /* undo broadcasting */
/* o[j] += g[i * len + j] for each row i in order; threads split the columns (j) */
void ac_sum_rows(const float *g, int64_t rows, int64_t len, float *o);
/* A leaf input's .grad buffer (contiguous, x's shape) for a backward that makes
 * the gradient in pieces, with *add: true when the pieces are to be added to
 * it (the leaf had a gradient), false when they are its first values. NULL
 * when x is not a leaf input of the running node that needs a gradient. */
float *ac_leaf_grad(Tensor *x, bool *add);
/* From how many floats a leaf gets its gradient in pieces, and a piece's floats
 * (4M and 1M; tests make them small, so that small tensors take that path). */
extern int64_t ac_pieces_from, ac_piece_floats;
/* [a, a + na) and [b, b + nb) share memory (a gradient made in place must not be what it reads) */
static inline bool ac_overlap(const float *a, int64_t na, const float *b, int64_t nb) {
    return (uintptr_t)a < (uintptr_t)(b + nb) && (uintptr_t)b < (uintptr_t)(a + na);
}
void ac_add_into(float *dst, const float *src, int64_t n); /* dst += src, split among threads */
void ac_zero_floats(float *p, int64_t n);                     /* p[0 .. n) = 0, split among threads */

/* Broadcasting of two shapes (broadcast.c); returns false when they cannot broadcast. */
bool ac_broadcast_shape(const Tensor *a, const Tensor *b, int *ndim, int64_t *shape);
/* The same, or PyTorch's error: "op: The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0". */
void ac_broadcast_check(const char *op, const Tensor *a, const Tensor *b, int *ndim, int64_t *shape);
/* Strides of t (contiguous) seen through the broadcast shape (0 where expanded). */
void ac_broadcast_strides(const Tensor *t, int ndim, const int64_t *shape, int64_t *stride);

/* The row-major odometer: advance idx over shape[0..nd) by one element and
 * move *off by the strides of the dims that change (a stride of 0 broadcasts). */
static inline void ac_advance(int nd, const int64_t *shape, const int64_t *stride, int64_t *idx, int64_t *off) {
    for (int d = nd - 1; d >= 0; d--) {
        *off += stride[d];
        if (++idx[d] < shape[d]) return;
        *off -= stride[d] * shape[d];
        idx[d] = 0;
    }
}

/* The rows of t seen as a matrix over its last dim: the product of the other
 * dims (not numel / last, which is wrong when the last dim is 0). */
static inline int64_t ac_rows(const Tensor *t) {
    int64_t r = 1;
    for (int d = 0; d + 1 < t->ndim; d++) r *= t->shape[d];
    return r;
}

/* Threads inside ops (parallel.c; ac_parallel_for in extend.h). */
/* The same with at most max_chunks chunks: for tasks that index scratch made
 * for ac_parallel_chunks(n, grain) chunks. */
void ac_parallel_for_max(int64_t n, int64_t grain, int max_chunks, ac_task fn, void *ctx);
void ac_parallel_shutdown(void); /* stop the workers (ac_shutdown does) */
/* Tests only: a worker sleeps this long between reading a job's generation and
 * the job, as a descheduled one would (the window of an old race). */
extern _Atomic int ac_pool_test_delay_us;
extern _Atomic int ac_pool_test_free_cores; /* tests: pretend this many cores are free (-1: look at the system) */

/* y[i] = exp(x[i] - m) (fast_exp.c): libm's expf per element in exact math,
 * 16 or 8 at once (within 2 ulp) in fast math. _with: one path by name
 * ("avx512", "avx2+fma", "libm"), false where the CPU has none (tests). */
void ac_exp_sub(const float *x, float m, float *y, int64_t n);
bool ac_exp_sub_with(const char *path, const float *x, float m, float *y, int64_t n);
/* A softmax row in fast math with AVX-512 (max, exp, a 16-lane sum, scale);
 * false, nothing written, where the CPU has no AVX-512. */
bool ac_softmax_row_fast(const float *x, float *y, int64_t n);
/* keep[i] = the i-th of n bernoulli_(p) draws (rng.c), as torch_bernoulli_gen_ would draw them
 * into a contiguous tensor: dropout's mask without the floats. */
void ac_bernoulli_mask(torch_Generator *generator, double p, bool *keep, int64_t n);
/* The vector instructions the fast kernels may use (cpu.c; asked once): the widest this CPU runs,
 * capped by the environment's AC_CPU_CAPABILITY ("avx512", "avx2", "default"), as PyTorch's
 * ATEN_CPU_CAPABILITY caps its kernels. AVX2 means AVX2 with FMA. */
typedef enum { AC_ISA_DEFAULT, AC_ISA_AVX2, AC_ISA_AVX512 } ac_isa;
ac_isa ac_cpu_isa(void);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static inline bool ac_have_avx2(void) { return ac_cpu_isa() >= AC_ISA_AVX2; }
#endif
/* y[i] = tanh(x[i]) with AVX2 (fast_tanh.c), the bits of glibc's fdlibm tanhf; false, nothing
 * written, where the CPU has no AVX2. */
bool ac_tanh_fast(const float *x, float *y, int64_t n);

/* Reductions with PyTorch's summation order. */
float ac_cascade_sum(const float *x, int64_t n, int64_t stride); /* sum over a row (the last dim) */
float ac_ilp4_sum(const float *x, int64_t n, int64_t stride);    /* ATen's scalar row_sum */
float ac_lane8_sum(const float *x, int64_t n);

/* The fast kernel (gemm_fast.c) on rows [i_begin, i_end) of C, with scratch
 * of ac_gemm_fast_scratch(N, K) floats (none needed up to AC_GEMM_TINY = M*N*K,
 * where plain loops win). */
#define AC_GEMM_TINY 2048
#define AC_GEMM_NC 512 /* the columns of B packed at a time */
void ac_gemm_fast_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate, int64_t i_begin, int64_t i_end,
                       float *scratch);
size_t ac_gemm_fast_scratch(int64_t N, int64_t K);
/* One thread, the caller's scratch (ac_gemm_scratch(N, K) floats), either math: for tasks. */
void ac_gemm_serial(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                    int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate, float *scratch);
size_t ac_gemm_scratch(int64_t N, int64_t K);
const char *ac_gemm_fast_kernel_name(void);
bool ac_gemm_use_kernel(const char *name); /* tests: "avx512", "avx2+fma", "portable"; false if absent */
/* C[M,N] = A[M,K] @ W[N,K]^T with W held as bfloat16 (gemm_bf16.c; default math): each output the
 * same bits for any M, thread count or instruction set. _with: one path, serially (tests; false
 * where the CPU lacks it). */
void ac_gemm_bf16(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *W, float *C, int64_t ldc);
bool ac_gemm_bf16_with(ac_isa isa, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const uint16_t *W, float *C,
                       int64_t ldc);

/* C[M,N] = A[M,K] @ B[K,N], row-major with leading dims; sums run over k in
 * order (as reference BLAS does). accumulate: C += instead of C =. */
void ac_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
             const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate);
/* The same with any strides: A(i, k) = A[i*rsa + k*csa], B(k, j) = B[k*rsb + j*csb]
 * (a transposed operand costs no copy). */
void ac_gemm_strided(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                     int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate);

#endif
