/* A structured fuzzer: the input is a small program that builds tensors of
 * random shapes (empty dims included), runs random ops on them with random
 * dims, indices and values, then backward(). Errors are fine; a crash, a
 * sanitizer report, or a gradient of the wrong shape is not. The program then
 * runs again with no gradient written in place (ac_grad_reuse off) and every
 * gradient in the arena: the first run took every gradient a backward made,
 * however small, from the reused gradient buffers. The leaves' gradients must
 * be the same bits in exact math (in fast math a linear layer's dX added in
 * place rounds once less: within 1e-3 there, for a program whose fast
 * gradients are within 1e-3 of its exact ones). */
#include <math.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "internal.h" /* ac_grad_reuse, ac_gbuf_* */

typedef struct { const uint8_t *p; size_t n; } Input;
static int byte(Input *in) {
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}
static int64_t small(Input *in) { return (int64_t)(int8_t)byte(in) % 6; } /* -5..5: dims, sizes, indices */

#define POOL 8
static Tensor *pool[POOL];
static Tensor *leaves[64];
static int n_pool, n_leaves, n_pushed;

static Tensor *pick(Input *in) { return n_pool ? pool[byte(in) % n_pool] : NULL; }
static void push(Tensor *t) {
    if (n_pool < POOL) pool[n_pool++] = t;
    else pool[(size_t)n_pushed * 5 % POOL] = t; /* not by address: the second run must build the same program */
    n_pushed++;
}

static Tensor *random_tensor(Input *in, bool index) {
    int nd = byte(in) % 4;
    int64_t shape[3];
    for (int i = 0; i < nd; i++) shape[i] = byte(in) % 5;
    if (index) return torch_randint(small(in), 1 + byte(in) % 6, nd, shape);
    Tensor *t = torch_rand(nd, shape);
    if (byte(in) & 1) {
        torch_requires_grad_(t, true);
        if (n_leaves < 64) leaves[n_leaves++] = t;
    }
    return t;
}

static void step(Input *in) {
    Tensor *a = pick(in), *b = pick(in), *r = NULL;
    int op = byte(in) % 67;
    int64_t d = small(in), e = small(in);
    switch (op) {
    case 0: r = random_tensor(in, false); break;
    case 1: r = random_tensor(in, true); break;
    case 2: r = torch_add(a, b); break;
    case 3: r = torch_sub(a, b); break;
    case 4: r = torch_mul(a, b); break;
    case 5: r = torch_div(a, b); break;
    case 6: r = torch_matmul(a, b); break;
    case 7: r = torch_cat(2, (Tensor *[]){a, b}, d); break;
    case 8: r = torch_stack(2, (Tensor *[]){a, b}, d); break;
    case 9: r = torch_masked_fill(a, torch_to_bool(b), (double)e); break;
    case 10: r = torch_dot(a, b); break;
    case 11: r = torch_exp(a); break;
    case 12: r = torch_log(a); break;
    case 13: r = torch_sqrt(a); break;
    case 14: r = byte(in) & 1 ? torch_relu(a) : torch_tanh(a); break;
    case 15: r = torch_gelu(a); break;
    case 16: r = torch_pow(a, (double)e); break;
    case 17: r = torch_softmax(a, d); break;
    case 18: r = torch_log_softmax(a, d); break;
    case 19: r = torch_sum(a); break;
    case 20: r = torch_sum_dim(a, 1, (int64_t[]){d}, e & 1); break;
    case 21: r = torch_mean_dim(a, 2, (int64_t[]){d, e}, false); break;
    case 22: r = torch_transpose(a, d, e); break;
    case 23: r = byte(in) & 1 ? torch_t(a) : torch_T(a); break;
    case 24: r = torch_view(a, 2, (int64_t[]){d, e}); break;
    case 25: r = torch_reshape(a, 3, (int64_t[]){d, e, small(in)}); break;
    case 26: r = torch_unsqueeze(a, d); break;
    case 27: r = torch_select(a, d, e); break;
    case 28: r = torch_slice(a, d, e, small(in)); break;
    case 29: r = torch_contiguous(a); break;
    case 30: r = byte(in) & 1 ? torch_tril(a, d) : torch_triu(a, d); break;
    case 31: r = torch_layer_norm(a, 1, (int64_t[]){a ? (a->ndim ? a->shape[a->ndim - 1] : 1) : 1}, NULL, NULL, 1e-5); break;
    case 32: r = torch_dropout(a, (double)(byte(in) % 5) / 4.0, true); break;
    case 33: r = torch_argmax(a, d, e & 1); break;
    case 34: r = torch_index_select(a, d, b); break;
    case 35: r = torch_index(a, b); break;
    case 36: r = torch_embedding(a, b, small(in)); break;
    case 37: r = torch_cross_entropy(a, b, small(in)); break;
    case 38: r = torch_nll_loss(a, b, small(in)); break;
    case 39: r = torch_linear(a, b, byte(in) & 1 ? NULL : pick(in)); break;
    /* the calls of issue 10, in-place writes included (into views, through autograd) */
    case 40: r = byte(in) & 1 ? torch_sigmoid(a) : torch_silu(a); break;
    case 41: r = torch_softplus(a, (double)(e ? e : 1), (double)d); break;
    case 42: r = byte(in) & 1 ? torch_abs(a) : torch_clamp(a, (double)d / 4, e & 1 ? NAN : (double)e / 4); break;
    case 43: r = torch_where(torch_to_bool(pick(in)), a, b); break;
    case 44: r = byte(in) & 1 ? torch_max(a) : torch_min(a); break;
    case 45: r = (byte(in) & 1 ? torch_max_dim(a, d, e & 1) : torch_min_dim(a, d, e & 1)).values; break;
    case 46: r = byte(in) & 1 ? torch_amax(a, 2, (int64_t[]){d, e}, false) : torch_amin(a, 1, (int64_t[]){d}, true); break;
    case 47: r = torch_topk(a, e, d, byte(in) & 1, true).values; break;
    case 48: r = torch_repeat(a, 3, (int64_t[]){d, e, small(in)}); break;
    case 49: r = torch_expand(a, 3, (int64_t[]){d, e, small(in)}); break;
    case 50: r = torch_permute(a, a ? a->ndim : 0, (int64_t[]){d, e, small(in), 0, 0, 0, 0, 0}); break;
    case 51: r = torch_flatten(a, d, e); break;
    case 52: {
        int n = 0;
        Tensor **c = byte(in) & 1 ? torch_chunk(a, e, d, &n) : torch_split(a, e, d, &n);
        r = n ? c[byte(in) % n] : NULL;
        break;
    }
    case 53: r = torch_split_with_sizes(a, 2, (int64_t[]){d, e}, small(in), &(int){0})[0]; break;
    case 54: r = torch_gather(a, d, b); break;
    case 55: r = torch_scatter_add(a, d, b, pick(in)); break;
    case 56: r = torch_fill_(a, (double)e); break;
    case 57: r = torch_zero_(a); break;
    case 58: r = torch_copy_(a, b); break;
    case 59: r = torch_masked_fill_(a, torch_to_bool(b), (double)e); break;
    case 60: r = torch_index_put_(a, b, pick(in), byte(in) & 1); break;
    case 61: r = torch_fill_(torch_select(a, d, e), (double)e); break;
    case 62: r = torch_copy_(torch_slice(a, d, e, small(in)), b); break;
    case 63: r = torch_detach(a); break;
    case 64: if (a && a->requires_grad) torch_retain_grad(a); r = a; break;
    case 65: r = torch_clone(a); break;
    case 66: r = byte(in) & 1 ? torch_mul_scalar(a, (double)e) : torch_div_scalar(a, (double)e); break;
    }
    if (r && torch_numel(r) <= 1 << 14) push(r); /* no growth past that: repeat of repeat once took 13 s an input */
}

/* Builds and runs the program; true when backward ran (the leaves' gradients are set). */
static bool run(const uint8_t *data, size_t size) {
    Input in = {data, size};
    n_pool = n_leaves = n_pushed = 0;
    torch_manual_seed(size);
    bool ran = false;
    if (setjmp(fuzz_jump) == 0) {
        push(random_tensor(&in, false));
        for (int i = 0; i < 24 && in.n; i++) step(&in);
        Tensor *y = pool[n_pool - 1];
        if (y->requires_grad && y->dtype == AC_FLOAT32) {
            torch_backward(torch_sum(torch_mul(y, torch_rand(y->ndim, y->shape))), NULL);
            ran = true;
            for (int i = 0; i < n_leaves; i++) {
                Tensor *g = leaves[i]->grad;
                if (g && (g->ndim != leaves[i]->ndim ||
                          memcmp(g->shape, leaves[i]->shape, sizeof(int64_t) * (size_t)g->ndim) != 0))
                    abort(); /* a gradient of the wrong shape */
            }
        }
    }
    return ran;
}

static bool same(float a, float b, bool exact) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (exact || isinf(a) || isinf(b)) return memcmp(&a, &b, sizeof a) == 0 || a == b;
    return fabsf(a - b) <= 1e-3f * (1 + fabsf(a) + fabsf(b));
}

/* The leaves' gradients now against those of an earlier run (same program). */
static bool agree(Tensor **earlier, int n, bool exact) {
    for (int i = 0; i < n; i++) {
        Tensor *a = earlier[i], *b = leaves[i]->grad;
        if (!a || !b) {
            if (a != b) abort();
            continue;
        }
        const float *pa = ac_data_float(a), *pb = ac_data_float(b);
        for (int64_t k = 0, e = torch_numel(a); k < e; k++)
            if (!same(pa[k], pb[k], exact)) return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ac_mark m = ac_arena_mark();
    bool grad = torch_is_grad_enabled(), exact = ac_get_exact(), fast = size % 2 != 0;
    ac_set_error_handler(fuzz_on_error, NULL);
    ac_set_exact(!fast);
    ac_gbuf_min_bytes = 0;
    bool ran = run(data, size);
    ac_gbuf_min_bytes = (size_t)64 << 10;
    int n = n_leaves;
    Tensor *first[64], *second[64];
    for (int i = 0; i < n; i++) first[i] = leaves[i]->grad;
    ac_grad_reuse = false;
    ac_gbuf_enabled = false;
    bool again = run(data, size);
    if (ran != again || n_leaves != n) abort(); /* the same program */
    /* In fast math a program whose gradients an ulp moves by more than the
     * tolerance (18 chained y @ y^T once gave +886167 exact, -217424 fast)
     * cannot tell a rounding from a bug: it is compared only when its fast
     * gradients agree with its exact ones. */
    bool conditioned = true;
    if (ran && fast) {
        for (int i = 0; i < n; i++) second[i] = leaves[i]->grad;
        ac_set_exact(true);
        bool third = run(data, size);
        ac_set_error_handler(NULL, NULL);
        if (third != ran || n_leaves != n) abort();
        conditioned = agree(second, n, false);
        ac_set_error_handler(fuzz_on_error, NULL);
        ac_set_exact(false);
        for (int i = 0; i < n; i++) leaves[i]->grad = second[i]; /* the second run's, to compare with */
    }
    ac_grad_reuse = true;
    ac_gbuf_enabled = true;
    ac_set_error_handler(NULL, NULL); /* no run to jump back into: an error from here on is a failure */
    if (ran && conditioned && !agree(first, n, !fast)) abort(); /* a gradient written in place that was read after */
    ac_set_exact(exact);
    if (torch_is_grad_enabled() != grad) abort(); /* grad mode survives errors */
    ac_arena_release(m);
    return 0;
}
