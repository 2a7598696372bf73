/* attention.c: float32 tensors with reverse-mode autograd, mirroring PyTorch 1.13.
 *
 * Reading guide: every torch_ function is named after the PyTorch call it
 * mirrors (torch.rand -> torch_rand, x.masked_fill -> torch_masked_fill,
 * F.softmax -> torch_softmax), with the same argument order; calls PyTorch
 * has no counterpart for (the arena, long-lived copies, raw data) take ac_.
 * Shapes are written with the SHAPE(...) macro, which plays the role of a
 * Python tuple:
 *
 *     torch.rand(3, 2)              torch_rand(SHAPE(3, 2))
 *     x.view(b, t, h, dh)           torch_view(x, SHAPE(b, t, h, dh))
 *     torch.cat([a, b], dim=-1)     torch_cat(TENSORS(a, b), -1)
 *
 * Dimensions are in PyTorch's order (the last one is the innermost) and a
 * negative dim counts from the end, everywhere.
 *
 * Memory (see README.md, "Memory model"):
 *   - Every tensor made by a creation function or an op lives in the ARENA.
 *     ac_arena_mark() / ac_arena_release(mark) frees, in one call, everything
 *     made since the mark: one training step is one mark/release pair.
 *   - Long-lived tensors (parameters, buffers, optimizer state) are made with
 *     ac_persist(t) (a malloc'd copy) and freed with ac_free(t); modules
 *     and optimizers do that for you.
 *   - ac_shutdown() releases the arena's blocks at program exit.
 *
 * Errors: a bad shape, dim, index or dtype calls the error handler with the
 * kind of Python exception PyTorch raises (RuntimeError, IndexError, ...) and a
 * message naming the op, then PyTorch's own words. The default handler prints
 * "IndexError: <message>" (the kind's name) and aborts; install your own with
 * ac_set_error_handler (it must not return: longjmp or exit).
 *
 * Threads: the arena, grad mode and the error handler are per thread (as
 * PyTorch's GradMode), so threads can compute side by side; a tensor and its
 * graph belong to one thread at a time. The default generator is one per
 * process, locked per op; a thread can draw from its own (ac_set_thread_generator).
 */
#ifndef ATTENTION_TENSOR_H
#define ATTENTION_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AC_MAX_DIMS 8

/* ---- shapes and tensor lists as call arguments --------------------------- */
#define AC_NARGS_I64(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* SHAPE(2, 3) expands to the two arguments `2, (const int64_t[]){2, 3}`. */
#define SHAPE(...) AC_NARGS_I64(__VA_ARGS__), ((const int64_t[]){__VA_ARGS__})
#define TENSORS(...) ((int)(sizeof((Tensor *[]){__VA_ARGS__}) / sizeof(Tensor *))), ((Tensor *[]){__VA_ARGS__})

/* Ops compute in float32 (with int64 indices and bool masks); float64 and
 * int32 tensors can be made, copied and printed, as PyTorch prints them.
 * bfloat16 is storage for a weight held so for generation (half float32's
 * bytes): torch_linear and torch_embedding read it, widening each value
 * exactly, with no gradient; torch_copy_ converts both ways. */
typedef enum { AC_FLOAT32 = 0, AC_INT64 = 1, AC_BOOL = 2, AC_FLOAT64 = 3, AC_INT32 = 4, AC_BFLOAT16 = 5 } ac_dtype;

struct Node;

typedef struct Tensor {
    ac_dtype dtype;
    int ndim;
    int64_t shape[AC_MAX_DIMS];
    int64_t stride[AC_MAX_DIMS]; /* in elements */
    int64_t offset;              /* in elements, into data */
    void *data;                  /* storage base, shared by views */
    bool requires_grad;
    bool is_param;      /* prints as "Parameter containing:" */
    bool persistent;    /* made by ac_persist: owned by malloc, freed by ac_free */
    struct Tensor *grad;       /* .grad: NULL until a backward reaches this leaf */
    struct Node *grad_fn;      /* .grad_fn: NULL for leaves */
} Tensor; /* the library allocates every tensor, with private bookkeeping after these fields */

/* ---- memory --------------------------------------------------------------- */
typedef struct { size_t block; size_t used; size_t tensors; } ac_mark; /* tensors: headers made before it */
ac_mark ac_arena_mark(void);
/* Frees every tensor made since m. A tensor it freed that an op is given later
 * is an error naming the op ("a tensor released by ac_arena_release was used",
 * with the generations) as long as its header's memory was not reused; in the
 * default mode the headers stay in the arena, so a stale pointer whose memory a
 * new tensor took reads as that tensor. With AC_DEBUG=1 in the environment (and
 * always in the ASan build) headers are malloc'd and the last 65,536 freed are
 * kept, dead, so that a stale one is always caught while it is kept. */
void ac_arena_release(ac_mark m);
size_t ac_arena_bytes_in_use(void);
size_t ac_arena_bytes_reserved(void);
void *ac_arena_alloc(size_t bytes);   /* 64-byte aligned, not initialised */
/* A growable array in the arena: room for `need` elements of `elem` bytes (the
 * capacity *cap doubles), the first `used` copied over; returns the array. */
void *ac_arena_grow(void *old, size_t used, size_t *cap, size_t need, size_t elem);
void ac_shutdown(void);               /* releases all arena blocks */
/* The big gradients a backward makes live only until the node they reach has
 * run: their data is taken from buffers kept from one backward to the next,
 * not from the arena. Bytes those buffers hold, and the most in use at once
 * during the last backward. */
size_t ac_gbuf_bytes_reserved(void);
size_t ac_gbuf_peak_bytes(void);
/* The library's allocator: never NULL; a failure or a size that overflows is an
 * error "not enough memory: you tried to allocate N bytes". */
void *ac_malloc(size_t bytes);
void *ac_calloc(size_t n, size_t elem_size);
void *ac_realloc(void *p, size_t bytes);
char *ac_strdup(const char *s);
void *ac_try_malloc(size_t bytes);                   /* NULL on failure, for code that reports errors itself */
void *ac_try_realloc(void *p, size_t bytes);
size_t ac_size_mul(size_t n, size_t elem_size);       /* n * elem_size, or that error */
size_t ac_elem_bytes(int64_t n, size_t elem_size);    /* the same from an element count, checked on 32-bit too */
/* Fault injection, for tests: the n-th allocation from now fails (0: none).
 * AC_FAIL_ALLOC=n in the environment does the same from the process's start. */
void ac_fail_alloc_at(uint64_t n);
uint64_t ac_alloc_count(void);                       /* allocations so far (malloc'd and arena blocks) */
Tensor *ac_persist(Tensor *t);     /* long-lived contiguous copy (a leaf) */
Tensor *ac_persist_zeros(ac_dtype dtype, int ndim, const int64_t *shape); /* long-lived zeros, no arena copy */
/* long-lived and not initialised (torch.empty's memory): for what is written before it is read, as a
 * loader's weights; a big one's pages are not touched until then */
Tensor *ac_persist_empty(ac_dtype dtype, int ndim, const int64_t *shape);
void ac_free(Tensor *t);              /* frees an ac_persist tensor and its .grad */

/* ---- exact or fast math -------------------------------------------------------
 * Fast (the default): matmul with fused multiply-adds and the widest vectors
 * the CPU has, within float rounding of PyTorch. Exact: every matmul sums in
 * reference BLAS's order with separate roundings, so results equal PyTorch's
 * (Debian's, reference BLAS) bit for bit; the article and the golden tests run
 * exact. Either way no result depends on the number of threads. Set it
 * before computing (it is process-wide). */
void ac_set_exact(bool exact);
bool ac_get_exact(void);
const char *ac_gemm_kernel_name(void); /* the fast kernel this CPU runs: "avx512", "avx2+fma" or "portable" */

/* ---- threads inside ops (as torch.set_num_threads) ----------------------------
 * Default: the cores this process may use, or OMP_NUM_THREADS. Matmul, softmax,
 * masked_fill, large elementwise ops, copies, embedding's backward and Adam
 * split their outputs among the threads; the bits never depend on the count.
 * ac_shutdown() stops the pool's threads (the next op starts them again). */
void torch_set_num_threads(int n);
int torch_get_num_threads(void);

/* ---- errors ---------------------------------------------------------------
 * Every error has a kind, the Python exception PyTorch raises for the same
 * misuse, and a message: the op's name, then PyTorch 1.13's own first line
 * word for word, then any detail of ours. */
typedef enum {
    AC_RUNTIME_ERROR = 0, /* RuntimeError: shapes, dtypes, autograd misuse, out of memory */
    AC_INDEX_ERROR,       /* IndexError: a dim or an index out of range */
    AC_VALUE_ERROR,       /* ValueError: a bad argument value (a batch size, a Python-level check) */
    AC_TYPE_ERROR,        /* TypeError: an argument of the wrong kind */
} ac_error_kind;
const char *ac_error_kind_name(ac_error_kind kind);  /* "RuntimeError", "IndexError", ... */
const char *ac_pyfloat(double v, char buf[32]);      /* a float as Python prints it ("1.0", "0.1"), for messages */
typedef void (*ac_error_handler)(ac_error_kind kind, const char *message, void *user);
/* This thread's handler; NULL: the default, which prints "IndexError: <message>"
 * (the kind's name) to stderr and aborts. A handler must not return: longjmp or exit. */
void ac_set_error_handler(ac_error_handler fn, void *user);
void ac_raise(ac_error_kind kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3), noreturn))
#endif
    ;
/* ac_raise(AC_RUNTIME_ERROR, ...) */
void ac_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
const char *ac_last_error(void);          /* this thread's last message */
ac_error_kind ac_last_error_kind(void);   /* and its kind */
/* A program's last call (return ac_finish_output("train", rc)): flushes stdout
 * and stderr; if either could not be written (a full disk, a closed pipe,
 * > /dev/full) it says so on stderr, if it can, and returns 1 where rc was 0,
 * as coreutils do: output that was lost is never a success. */
int ac_finish_output(const char *program, int rc);

/* Progress of a long loop inside the library (a loader's batches as a model is evaluated, a
 * model's tensors as they load): fn(what, done, total, user) with done 0 when the loop starts and
 * after each item, total at the end. A program draws a live line with it (examples/longrun.h);
 * by default nothing is called. One handler for the process; set it before any thread runs. */
typedef void (*ac_progress_handler)(const char *what, int64_t done, int64_t total, void *user);
void ac_set_progress_handler(ac_progress_handler fn, void *user);
void ac_progress(const char *what, int64_t done, int64_t total); /* tells the handler, if there is one */

/* ---- creation ------------------------------------------------------------- */
Tensor *torch_tensor(const float *data, int ndim, const int64_t *shape);        /* float32 copy */
Tensor *torch_tensor_long(const int64_t *data, int ndim, const int64_t *shape); /* int64 copy */
Tensor *torch_tensor_bool(const bool *data, int ndim, const int64_t *shape);
Tensor *torch_tensor_double(const double *data, int ndim, const int64_t *shape);  /* dtype=torch.float64 */
Tensor *torch_tensor_int(const int32_t *data, int ndim, const int64_t *shape);    /* dtype=torch.int32 */
Tensor *torch_scalar_tensor(double value);              /* 0-d float32: torch.tensor(1.5) */
Tensor *torch_empty(int ndim, const int64_t *shape, ac_dtype dtype); /* zeroed here (PyTorch's is uninitialised) */
Tensor *torch_zeros(int ndim, const int64_t *shape);
Tensor *torch_ones(int ndim, const int64_t *shape);
Tensor *torch_full(int ndim, const int64_t *shape, double value);
/* with a dtype: torch.zeros(2, 3, dtype=torch.bool) -> torch_zeros_dtype(SHAPE(2, 3), AC_BOOL) */
Tensor *torch_zeros_dtype(int ndim, const int64_t *shape, ac_dtype dtype);
Tensor *torch_ones_dtype(int ndim, const int64_t *shape, ac_dtype dtype);
Tensor *torch_full_dtype(int ndim, const int64_t *shape, double value, ac_dtype dtype);
/* t's shape and dtype */
Tensor *torch_zeros_like(const Tensor *t);
Tensor *torch_ones_like(const Tensor *t);
Tensor *torch_full_like(const Tensor *t, double value);
Tensor *torch_empty_like(const Tensor *t);
/* with a dtype: torch.zeros_like(x, dtype=torch.bool) -> torch_zeros_like_dtype(x, AC_BOOL) */
Tensor *torch_zeros_like_dtype(const Tensor *t, ac_dtype dtype);
Tensor *torch_ones_like_dtype(const Tensor *t, ac_dtype dtype);
Tensor *torch_full_like_dtype(const Tensor *t, double value, ac_dtype dtype);
Tensor *torch_empty_like_dtype(const Tensor *t, ac_dtype dtype);
/* torch.linspace(start, end, steps): float32, PyTorch's two-sided formula */
Tensor *torch_linspace(double start, double end, int64_t steps);
Tensor *torch_arange(int64_t end);                      /* int64, like torch.arange(5) */
Tensor *torch_arange_float(double start, double end, double step); /* torch.arange(0., 30.) */
Tensor *torch_clone(Tensor *t);                         /* CloneBackward0 */
Tensor *torch_to_bool(Tensor *t);                       /* t.bool() */
Tensor *torch_to_float(Tensor *t);                      /* t.float() */
Tensor *torch_detach(Tensor *t);                        /* shares storage, no grad */

/* ---- in-place writes (tensor/ops/inplace.c) -------------------------------------
 * Each bumps t._version; with grad mode on they are recorded in autograd as
 * PyTorch records them (FillBackward2, CopyBackwards, ..., CopySlices for a
 * write into a view), and a leaf that requires grad refuses them.
 *     x.fill_(0.5)                 torch_fill_(x, 0.5)
 *     x[1] = 5.0                   torch_fill_(torch_select(x, 0, 1), 5.0)
 *     x[i, :] = t                  torch_copy_(torch_select(x, 0, i), t)
 *     x[:, 1:3] = t                torch_copy_(torch_slice(x, 1, 1, 3), t)
 *     x[idx] = v  (idx int64)      torch_index_put_(x, idx, v, false)
 *     x.masked_fill_(m, v)         torch_masked_fill_(x, m, v)                    */
Tensor *torch_fill_(Tensor *t, double value);
Tensor *torch_zero_(Tensor *t);
Tensor *torch_copy_(Tensor *dst, Tensor *src);          /* src broadcast to dst's shape, any dtypes */
Tensor *torch_masked_fill_(Tensor *t, Tensor *mask, double value);
Tensor *torch_index_put_(Tensor *t, Tensor *index, Tensor *values, bool accumulate);

/* ---- random numbers (PyTorch 1.13 CPU streams; see tensor/rng.c) ---------- */
typedef struct torch_Generator {
    uint32_t st[624];
    int left, next;
    uint64_t seed;
    bool has_next_double_normal;
    double next_double_normal;
} torch_Generator;
extern torch_Generator torch_default_generator;
void torch_manual_seed(uint64_t seed);   /* seeds this thread's generator (the default one unless set below) */
uint64_t torch_initial_seed(void);
/* Threads: the default generator is shared and locked per op (safe, but the
 * threads' draws interleave as they run). A thread that wants its own
 * reproducible stream sets its own generator: its random ops draw from it,
 * torch_manual_seed seeds it. NULL: back to the default. */
void ac_set_thread_generator(torch_Generator *g);
torch_Generator *ac_thread_generator(void);
/* g = torch.Generator(); g.manual_seed(42)  ->  torch_Generator g; torch_generator_manual_seed(&g, 42);
 * A generator of one's own is used by one thread at a time (no lock). */
void torch_generator_manual_seed(torch_Generator *g, uint64_t seed);
uint64_t torch_generator_initial_seed(torch_Generator *g);
/* The state: an int64 tensor of 628 values (the MT19937 words, the position,
 * the cached normal); set_state takes back what get_state gave, so the draws
 * that follow repeat. PyTorch's is a 5056-byte ByteTensor: same use, other layout. */
Tensor *torch_get_rng_state(void);                        /* torch.get_rng_state() */
void torch_set_rng_state(Tensor *state);                  /* torch.set_rng_state(state) */
Tensor *torch_generator_get_state(torch_Generator *g);    /* g.get_state() */
void torch_generator_set_state(torch_Generator *g, Tensor *state);
uint32_t ac_random32(torch_Generator *g);
uint64_t ac_random64(torch_Generator *g);
Tensor *torch_rand(int ndim, const int64_t *shape);
Tensor *torch_randn(int ndim, const int64_t *shape);
Tensor *torch_randint(int64_t low, int64_t high, int ndim, const int64_t *shape);
Tensor *torch_randperm(int64_t n);
Tensor *torch_uniform_(Tensor *t, double from, double to);   /* in place, no grad */
Tensor *torch_normal_(Tensor *t, double mean, double std);   /* in place, no grad */
Tensor *torch_bernoulli_(Tensor *t, double p);               /* in place, no grad */
Tensor *torch_exponential_(Tensor *t, double lambd);         /* in place, no grad */
Tensor *torch_multinomial(Tensor *probs, int64_t num_samples, bool replacement);
/* t.random_() in place, any dtype: torch.empty((), dtype=torch.int64).random_() is how a
 * DataLoader draws its seeds (int64: random64() % 2^63) */
Tensor *torch_random_(Tensor *t);
/* generator=g: the same ops with the generator last (NULL: as without).
 *     torch.rand(3, 2, generator=g)     torch_rand_gen(SHAPE(3, 2), &g) */
Tensor *torch_rand_gen(int ndim, const int64_t *shape, torch_Generator *generator);
Tensor *torch_randn_gen(int ndim, const int64_t *shape, torch_Generator *generator);
Tensor *torch_randint_gen(int64_t low, int64_t high, int ndim, const int64_t *shape, torch_Generator *generator);
Tensor *torch_randperm_gen(int64_t n, torch_Generator *generator);
Tensor *torch_uniform_gen_(Tensor *t, double from, double to, torch_Generator *generator);
Tensor *torch_normal_gen_(Tensor *t, double mean, double std, torch_Generator *generator);
Tensor *torch_bernoulli_gen_(Tensor *t, double p, torch_Generator *generator);
Tensor *torch_exponential_gen_(Tensor *t, double lambd, torch_Generator *generator);
Tensor *torch_multinomial_gen(Tensor *probs, int64_t num_samples, bool replacement, torch_Generator *generator);
Tensor *torch_random_gen_(Tensor *t, torch_Generator *generator);
Tensor *torch_dropout_gen(Tensor *x, double p, bool training, torch_Generator *generator);

/* ---- shape and element access ---------------------------------------------- */
int64_t torch_numel(const Tensor *t);
size_t ac_dtype_size(ac_dtype d);                   /* bytes per element */
int64_t torch_size(const Tensor *t, int64_t dim);     /* t.shape[dim] */
bool torch_is_contiguous(const Tensor *t);
float *ac_data_float(Tensor *t);                  /* contiguous float32 only */
int64_t *ac_data_long(Tensor *t);                 /* contiguous int64 only */
double torch_item(Tensor *t);                        /* one element tensors */
double ac_get(Tensor *t, int n, const int64_t *index); /* t[i, j, ...] as double */
int64_t ac_wrap_dim(int64_t dim, int ndim, const char *op);   /* negative dims; error if out of range */
void ac_check_defined(const Tensor *t, const char *op);       /* error on NULL, or on a tensor a release freed */
void ac_check_float(const Tensor *t, const char *op);         /* error unless float32 */
char *ac_shape_str(const Tensor *t);                          /* "[2, 3]" (arena) */
char *ac_dims_str(int n, const int64_t *dims);                /* "[2, 3]" (arena) */

/* ---- ops (each has a backward; grad_fn names as PyTorch 1.13) -------------- */
Tensor *torch_matmul(Tensor *a, Tensor *b);          /* a @ b, every form; two int64 tensors: int64, no grad */
Tensor *torch_dot(Tensor *a, Tensor *b);             /* DotBackward0 */
Tensor *torch_add(Tensor *a, Tensor *b);             /* broadcasting */
Tensor *torch_sub(Tensor *a, Tensor *b);
Tensor *torch_mul(Tensor *a, Tensor *b);
Tensor *torch_div(Tensor *a, Tensor *b);
Tensor *torch_add_scalar(Tensor *a, double s);       /* a + s */
Tensor *torch_sub_scalar(Tensor *a, double s);       /* a - s */
Tensor *torch_mul_scalar(Tensor *a, double s);       /* a * s */
Tensor *torch_div_scalar(Tensor *a, double s);       /* a / s */
/* In place, as x.add_(y) ... x.div_(2): y broadcasts to x's shape (never grows it), the result
 * is rounded to x's dtype, x's version goes up, and autograd records the op (AddBackward0, ...)
 * on x's new history; a leaf that requires grad is refused, as PyTorch does. Returns x. */
Tensor *torch_add_(Tensor *x, Tensor *y);
Tensor *torch_sub_(Tensor *x, Tensor *y);
Tensor *torch_mul_(Tensor *x, Tensor *y);
Tensor *torch_div_(Tensor *x, Tensor *y);
Tensor *torch_add_scalar_(Tensor *x, double s);
Tensor *torch_sub_scalar_(Tensor *x, double s);
Tensor *torch_mul_scalar_(Tensor *x, double s);
Tensor *torch_div_scalar_(Tensor *x, double s);
Tensor *torch_neg(Tensor *a);
Tensor *torch_exp(Tensor *a);
Tensor *torch_log(Tensor *a);
Tensor *torch_sqrt(Tensor *a);
Tensor *torch_rsqrt(Tensor *a); /* 1 / sqrt(a) in float, as PyTorch's CPU rsqrt; RsqrtBackward0 */
Tensor *torch_pow(Tensor *a, double exponent);       /* a ** exponent */
Tensor *torch_relu(Tensor *a);
Tensor *torch_tanh(Tensor *a);
Tensor *torch_gelu(Tensor *a);                       /* exact (erf) GELU */
Tensor *torch_sum(Tensor *a);                        /* SumBackward0; of an int64 or bool tensor: int64, no grad */
Tensor *torch_sum_dim(Tensor *a, int ndims, const int64_t *dims, bool keepdim); /* SumBackward1 */
Tensor *torch_mean(Tensor *a);                       /* MeanBackward0 */
Tensor *torch_mean_dim(Tensor *a, int ndims, const int64_t *dims, bool keepdim); /* MeanBackward1 */
/* x.var(dim, unbiased, keepdim) / x.std(...): in double, rounded once (VarBackward0, StdBackward0);
 * torch_var(x, unbiased) is x.var(unbiased=...) over everything */
Tensor *torch_var(Tensor *a, bool unbiased);
Tensor *torch_std(Tensor *a, bool unbiased);
Tensor *torch_var_dim(Tensor *a, int ndims, const int64_t *dims, bool unbiased, bool keepdim);
Tensor *torch_std_dim(Tensor *a, int ndims, const int64_t *dims, bool unbiased, bool keepdim);
Tensor *torch_softmax(Tensor *a, int64_t dim);
Tensor *torch_log_softmax(Tensor *a, int64_t dim);
Tensor *torch_masked_fill(Tensor *a, Tensor *mask, double value);
Tensor *torch_tril(Tensor *a, int64_t diagonal);
Tensor *torch_triu(Tensor *a, int64_t diagonal);
Tensor *torch_cat(int n, Tensor **ts, int64_t dim);
Tensor *torch_stack(int n, Tensor **ts, int64_t dim);
Tensor *torch_transpose(Tensor *a, int64_t dim0, int64_t dim1); /* view */
Tensor *torch_T(Tensor *a);                          /* a.T (PermuteBackward0), view */
Tensor *torch_t(Tensor *a);                          /* a.t() (TBackward0), view */
Tensor *torch_view(Tensor *a, int ndim, const int64_t *shape);    /* view, -1 allowed */
Tensor *torch_reshape(Tensor *a, int ndim, const int64_t *shape); /* view when it can */
Tensor *torch_contiguous(Tensor *a);
Tensor *torch_unsqueeze(Tensor *a, int64_t dim);     /* view */
Tensor *torch_select(Tensor *a, int64_t dim, int64_t index);      /* a[i] / a[:, i], view */
Tensor *torch_slice(Tensor *a, int64_t dim, int64_t start, int64_t end); /* a[s:e], view */
Tensor *torch_index_select(Tensor *a, int64_t dim, Tensor *index);
Tensor *torch_index(Tensor *a, Tensor *index);       /* a[idx], idx an int64 tensor (IndexBackward0) */
Tensor *torch_embedding(Tensor *weight, Tensor *indices, int64_t padding_idx); /* -1: none */
Tensor *torch_layer_norm(Tensor *x, int n_norm, const int64_t *normalized_shape,
                         Tensor *weight, Tensor *bias, double eps);
Tensor *torch_dropout(Tensor *x, double p, bool training);
Tensor *torch_linear(Tensor *x, Tensor *weight, Tensor *bias); /* x @ W^T + b */
Tensor *torch_cross_entropy(Tensor *logits, Tensor *target, int64_t ignore_index);
Tensor *torch_nll_loss(Tensor *log_probs, Tensor *target, int64_t ignore_index);  /* F.nll_loss, mean */
Tensor *torch_argmax(Tensor *a, int64_t dim, bool keepdim);    /* int64, no grad */
Tensor *torch_sigmoid(Tensor *a);
Tensor *torch_silu(Tensor *a);                       /* F.silu: x * sigmoid(x) */
Tensor *torch_softplus(Tensor *a, double beta, double threshold); /* F.softplus(x, beta=1, threshold=20) */
Tensor *torch_logsigmoid(Tensor *a);                 /* F.logsigmoid: min(x, 0) - log1p(exp(-|x|)) (LogSigmoidBackward0) */
Tensor *torch_abs(Tensor *a);
Tensor *torch_sin(Tensor *a);
Tensor *torch_cos(Tensor *a);
/* F.binary_cross_entropy(input, target): mean of -(y log x + (1 - y) log(1 - x)), each log clamped
 * at -100, input in [0, 1], target input's shape (BinaryCrossEntropyBackward0); the _with_logits
 * form takes logits, as log(sigmoid) computed stably (BinaryCrossEntropyWithLogitsBackward0) */
Tensor *torch_binary_cross_entropy(Tensor *input, Tensor *target);
Tensor *torch_binary_cross_entropy_with_logits(Tensor *input, Tensor *target);
/* F.mse_loss(input, target): mean of (input - target)^2 (they broadcast), MseLossBackward0 */
Tensor *torch_mse_loss(Tensor *input, Tensor *target);
/* torch.equal(a, b): the same shape and the same values (NaN equals nothing);
 * torch.allclose(a, b, rtol, atol, equal_nan): |a - b| <= atol + rtol |b| everywhere (broadcast) */
bool torch_equal(const Tensor *a, const Tensor *b);
bool torch_allclose(const Tensor *a, const Tensor *b, double rtol, double atol, bool equal_nan);
/* a < b, a > b, a <= b, a >= b, a == b, a != b: bool, broadcast, no gradient; a float side makes
 * both float32 first, as torch's promotion (x < 0.1 compares with (float)0.1) */
Tensor *torch_lt(Tensor *a, Tensor *b);
Tensor *torch_gt(Tensor *a, Tensor *b);
Tensor *torch_le(Tensor *a, Tensor *b);
Tensor *torch_ge(Tensor *a, Tensor *b);
Tensor *torch_eq(Tensor *a, Tensor *b);
Tensor *torch_ne(Tensor *a, Tensor *b);
Tensor *torch_lt_scalar(Tensor *a, double s);
Tensor *torch_gt_scalar(Tensor *a, double s);
Tensor *torch_le_scalar(Tensor *a, double s);
Tensor *torch_ge_scalar(Tensor *a, double s);
Tensor *torch_eq_scalar(Tensor *a, double s);
Tensor *torch_ne_scalar(Tensor *a, double s);
Tensor *torch_clamp(Tensor *a, double min, double max); /* NAN for None: x.clamp(min=0) -> torch_clamp(x, 0, NAN) */
Tensor *torch_where(Tensor *condition, Tensor *a, Tensor *b); /* condition bool; all three broadcast */
/* torch.return_types: (values, indices), indices int64 */
typedef struct { Tensor *values, *indices; } torch_return_types;
Tensor *torch_max(Tensor *a);                        /* a.max(): NaN if any (MaxBackward1) */
Tensor *torch_min(Tensor *a);
torch_return_types torch_max_dim(Tensor *a, int64_t dim, bool keepdim); /* a.max(dim): first index of the max */
torch_return_types torch_min_dim(Tensor *a, int64_t dim, bool keepdim);
Tensor *torch_amax(Tensor *a, int ndims, const int64_t *dims, bool keepdim); /* ties share the gradient */
Tensor *torch_amin(Tensor *a, int ndims, const int64_t *dims, bool keepdim);
torch_return_types torch_topk(Tensor *a, int64_t k, int64_t dim, bool largest, bool sorted);
Tensor *torch_gather(Tensor *a, int64_t dim, Tensor *index);            /* out[i][j] = a[index[i][j]][j] (dim 0) */
Tensor *torch_scatter_add(Tensor *a, int64_t dim, Tensor *index, Tensor *src); /* a.scatter_add(dim, index, src) */
Tensor *torch_repeat(Tensor *a, int n, const int64_t *sizes);            /* a.repeat(2, 1) -> torch_repeat(a, SHAPE(2, 1)) */
Tensor *torch_expand(Tensor *a, int n, const int64_t *sizes);            /* view; -1 keeps a size */
Tensor *torch_permute(Tensor *a, int n, const int64_t *dims);            /* view: a.permute(2, 0, 1) */
Tensor *torch_flatten(Tensor *a, int64_t start_dim, int64_t end_dim);    /* a.flatten(): torch_flatten(a, 0, -1) */
/* Views of consecutive pieces along dim (SplitBackward0): an arena array of
 * *n tensors. chunk: `chunks` pieces of ceil(size / chunks) (fewer when they
 * run out); split: pieces of split_size, the last one smaller. */
Tensor **torch_chunk(Tensor *a, int64_t chunks, int64_t dim, int *n);
Tensor **torch_split(Tensor *a, int64_t split_size, int64_t dim, int *n);
Tensor **torch_split_with_sizes(Tensor *a, int nsizes, const int64_t *sizes, int64_t dim, int *n);
/* F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)
 * (PyTorch 2.x): softmax(q @ k^T * scale + mask) @ v, fused (FlashAttention-2:
 * tiles and an online softmax, never the (L, S) scores; extra memory O(B*H*L)).
 * q (..., L, E), k (..., S, E), v (..., S, Ev), equal batch dims; attn_mask NULL,
 * bool (true: takes part) or float (added), broadcast to (..., L, S);
 * is_causal: key j only for queries i >= j; scale NAN: 1/sqrt(E); dropout_p
 * must be 0. grad_fn ScaledDotProductFlashAttentionForCpuBackward0. */
Tensor *torch_scaled_dot_product_attention(Tensor *query, Tensor *key, Tensor *value, Tensor *attn_mask,
                                           double dropout_p, bool is_causal, double scale);

/* ---- autograd --------------------------------------------------------------- */
Tensor *torch_requires_grad_(Tensor *t, bool requires_grad);
void torch_backward(Tensor *t, Tensor *gradient);    /* gradient NULL: t must be a scalar */
void torch_backward_ex(Tensor *t, Tensor *gradient, bool retain_graph);
/* torch.autograd.grad(output, inputs, grad_outputs=gradient, retain_graph): d output / d input for
 * each input (leaf or not), an arena array of n tensors (the tuple); no .grad is written.
 *     grad(loss, w1, retain_graph=True)   torch_autograd_grad(loss, TENSORS(w1), NULL, true)[0] */
Tensor **torch_autograd_grad(Tensor *output, int n_inputs, Tensor **inputs, Tensor *gradient, bool retain_graph);
const char *torch_grad_fn_name(const Tensor *t);     /* "MmBackward0", or NULL for a leaf */
bool torch_is_grad_enabled(void);
bool torch_set_grad_enabled(bool enabled);           /* returns the previous mode */
/* with torch.no_grad(): ...  ->  bool prev = torch_no_grad_enter(); ...; torch_no_grad_exit(prev);
 * If an error handler longjmps out of such a section, grad mode is restored. */
bool torch_no_grad_enter(void);
void torch_no_grad_exit(bool prev);
/* with torch.no_grad(): ...  ->  TORCH_NO_GRAD { ... }
 * A scope: grad mode comes back however the block is left (the end, break,
 * return, goto; an error's longjmp too). */
typedef struct { bool prev, once; } ac_no_grad_scope;
static inline void ac_no_grad_scope_exit(ac_no_grad_scope *s) { torch_no_grad_exit(s->prev); }
#define AC_CAT_(a, b) a##b
#define AC_CAT(a, b) AC_CAT_(a, b)
#define TORCH_NO_GRAD AC_NO_GRAD_(AC_CAT(ac_ng_, __LINE__)) /* a name per line: scopes nest */
#if defined(__GNUC__)
#define AC_NO_GRAD_(s) \
    for (ac_no_grad_scope s __attribute__((cleanup(ac_no_grad_scope_exit))) = {torch_no_grad_enter(), true}; s.once; s.once = false)
#else /* without cleanup attributes: leave the block only at its end */
#define AC_NO_GRAD_(s) for (ac_no_grad_scope s = {torch_no_grad_enter(), true}; s.once; ac_no_grad_scope_exit(&s), s.once = false)
#endif
void torch_zero_grad_(Tensor *t);                    /* t.grad.zero_() if it exists */
/* g = t.grad; t.grad = None: hands the gradient to you (ac_free it when t is long-lived; an
 * arena one goes with the arena) and the next backward writes a new one. Writing t->grad = NULL
 * yourself instead leaves the buffer t reuses: the next backward overwrites it. */
Tensor *torch_grad_take(Tensor *t);
void torch_retain_grad(Tensor *t);                   /* t.retain_grad(): a non-leaf's .grad is kept */
bool torch_retains_grad(const Tensor *t);            /* t.retains_grad */
bool torch_is_leaf(const Tensor *t);                 /* t.is_leaf */
int64_t torch_version(const Tensor *t);              /* t._version: in-place writes to its storage so far */

/* ---- printing (identical to PyTorch's print) -------------------------------- */
char *torch_repr(const Tensor *t);                   /* arena string */
void torch_print(const Tensor *t);                   /* print(t) */
void torch_fprint(FILE *f, const Tensor *t);
char *torch_size_str(const Tensor *t);               /* "torch.Size([6, 3])", arena */
void torch_print_shape(const Tensor *t);             /* print(t.shape) */
const char *torch_dtype_str(ac_dtype dtype);         /* print(t.dtype): "torch.int64", "torch.float32", ... */
/* torch.set_printoptions(sci_mode=False) (TORCH_SCI_MODE_FALSE), True, or None (the default:
 * chosen per tensor). Process-wide, as PyTorch's PRINT_OPTS. As 1.13 does, a tensor that would
 * have printed in scientific notation keeps that width: tensor([[    0.9991,     0.0009]]). */
typedef enum { TORCH_SCI_MODE_NONE = -1, TORCH_SCI_MODE_FALSE = 0, TORCH_SCI_MODE_TRUE = 1 } torch_sci_mode;
void torch_set_printoptions_sci_mode(torch_sci_mode mode);

#ifdef __cplusplus
}
#endif

#endif
