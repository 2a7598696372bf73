/* attention.c's extension API: what code built on top of tensor/ (nn/,
 * optim/, the picture writers, or a user's own modules) may use beyond tensor.h, without
 * reaching into the library's private state (tensor/internal.h).
 *
 *   - threads: split a loop among the pool's threads, as ops do;
 *   - the autograd graph, read only: a grad_fn's name and its edges
 *     (PyTorch's grad_fn.name() and grad_fn.next_functions);
 *   - checks a loader needs before it changes anything (an RNG state). */
#ifndef ATTENTION_EXTEND_H
#define ATTENTION_EXTEND_H

#include <string.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- threads -------------------------------------------------------------------
 * fn(ctx, begin, end, chunk) over [0, n) in chunks of at least `grain`
 * elements; chunk < ac_parallel_chunks(n, grain) indexes per-chunk scratch.
 * The split depends on the thread count, so each element must be computed
 * the same way whatever chunk it falls in (never split one sum). */
typedef void (*ac_task)(void *ctx, int64_t begin, int64_t end, int chunk);
void ac_parallel_for(int64_t n, int64_t grain, ac_task fn, void *ctx);
int ac_parallel_chunks(int64_t n, int64_t grain);
#define AC_GRAIN 32768 /* elements of a cheap elementwise loop worth a thread */

/* ---- bfloat16 (AC_BFLOAT16's storage) -------------------------------------------
 * bfloat16 is float32's top half: widening is exact; narrowing rounds to nearest even, as
 * .to(torch.bfloat16) does (a NaN stays a quiet NaN) */
static inline float ac_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint16_t ac_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* ---- the autograd graph, read only ---------------------------------------------
 * fn = t->grad_fn. Input k of fn is the tensor it was given; ac_grad_fn_next
 * is the grad_fn that input had when fn was made (NULL: a leaf, or no
 * gradient flows there: see ac_grad_fn_needs). */
const char *ac_grad_fn_name(const struct Node *fn);
int ac_grad_fn_inputs(const struct Node *fn);
Tensor *ac_grad_fn_input(const struct Node *fn, int k);
struct Node *ac_grad_fn_next(const struct Node *fn, int k);
bool ac_grad_fn_needs(const struct Node *fn, int k);

/* ---- writing a tensor's data directly ------------------------------------------
 * After writing through ac_data_float (as an optimizer's step does), tell
 * autograd: t._version += 1 (its views share the counter), so a backward
 * that saved the old values raises PyTorch's "modified by an inplace
 * operation" error instead of computing with the new ones. */
void ac_bump_version(Tensor *t);

/* ---- checks -------------------------------------------------------------------- */
/* May PATH be replaced by a file written elsewhere and renamed over it? Yes if
 * it does not exist or is a regular file (or a symlink to one); a device, a
 * FIFO, a directory or a socket is refused, with a message in err. try_write
 * also creates and removes PATH.tmp, so that an unwritable place fails now,
 * before hours of work. */
bool ac_output_path_check(const char *path, bool try_write, char *err, size_t errlen);
/* fclose(f) of a file written in place (a log): flushed, its error flag checked and closed, in
 * this order, whatever fails; false with errno saying why (EIO where the stream kept none). */
bool ac_close_output(FILE *f);

/* ---- kernels -------------------------------------------------------------------- */
/* The 2-norm of n contiguous floats, in PyTorch 1.13's CPU order (kernels/norm2.c):
 * torch.norm(x, 2) of a contiguous float32 tensor, bit for bit. */
float ac_norm2_f32(const float *x, int64_t n);

/* ---- the book's GELU and LayerNorm as one op each (ops/fused.c) -------------------
 * The same bits as the book's lines op by op (nn/models/gpt/gpt.c), forward and every
 * gradient, in exact and fast math, at any thread count; what autograd keeps is x
 * and one tensor (GELU) or three floats a row (LayerNorm) instead of each op's
 * result. grad_fn: BookGeluBackward0, BookLayerNormBackward0 (no PyTorch names:
 * PyTorch runs the book's ops one by one). _fits: the inputs the op takes (float32;
 * LayerNorm: x [*, n], n >= 1, scale and shift [n], three tensors); an error only for
 * a NULL or released tensor.
 *     0.5 * x * (1 + torch.tanh(torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))
 *     scale * ((x - x.mean(dim=-1, keepdim=True)) / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)) + shift */
bool ac_book_gelu_fits(const Tensor *x);
Tensor *ac_book_gelu(Tensor *x);
bool ac_book_layer_norm_fits(const Tensor *x, const Tensor *scale, const Tensor *shift);
Tensor *ac_book_layer_norm(Tensor *x, Tensor *scale, Tensor *shift, double eps);
/* The book's RMSNorm (Qwen3's; nn.RMSNorm's math) as one op, the same bits as nn/blocks/rmsnorm.c's lines
 * op by op, in exact and fast math; autograd keeps x and two floats a row. grad_fn:
 * BookRMSNormBackward0. _fits: x [*, n] (n >= 1) and a scale [n], float32, two tensors.
 *     x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * scale */
bool ac_book_rms_norm_fits(const Tensor *x, const Tensor *scale);
Tensor *ac_book_rms_norm(Tensor *x, Tensor *scale, double eps);

/* ---- files --------------------------------------------------------------------- */
/* The whole of f or of the file at path, read to its end (a pipe, a FIFO or a
 * /proc file whole too) and NUL-terminated (the NUL not in *len); the caller
 * frees it. NULL, with "cannot open PATH: why" or "cannot read NAME: why" in
 * err, when it cannot be had (a directory reads as EISDIR). */
char *ac_read_file(const char *path, size_t *len, char *err, size_t errlen);
char *ac_read_stream(FILE *f, const char *name, size_t *len, char *err, size_t errlen);

/* ---- UTF-8 -------------------------------------------------------------------- */
/* One UTF-8 sequence at s (len bytes left) into *cp; returns its length, 0 if invalid
 * (overlong, a surrogate, above U+10FFFF, cut short). */
int ac_utf8_next(const char *s, size_t len, uint32_t *cp);
/* Code point cp (<= U+10FFFF; a surrogate too, as WTF-8) as UTF-8 into out (up to 4 bytes,
 * no NUL); returns its length. */
int ac_utf8_put(uint32_t cp, char *out);

/* Is t a state torch_set_rng_state accepts? If not, why, in err. */
bool ac_rng_state_check(const Tensor *t, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
