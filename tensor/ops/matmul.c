/* matmul in every form `@` takes, and dot. All forms run through one batched,
 * broadcasting product:
 *     a: (batch_a..., n, k)   b: (batch_b..., k, m)   ->   (batch..., n, m)
 * with a 1-D operand unsqueezed to (1, k) or (k, 1) and squeezed back after.
 * The backward is, per batch:
 *     in the forward:  C = A @ B
 *     so:              dA = dC @ B^T,   dB = A^T @ dC
 * summed over the batches an operand was broadcast across. */
#include <string.h>

#include "internal.h"

/* The operands are read through their own strides (a transposed or sliced
 * view costs no copy): per matrix a row and a column stride, per batch dim a
 * stride in elements (0 where broadcast). A gradient summed over the batches
 * an operand was broadcast across is contiguous: ga and gb are its batch strides. */
typedef struct {
    int nd;                                   /* batch dims */
    int64_t shape[AC_MAX_DIMS];               /* broadcast batch shape */
    int64_t sa[AC_MAX_DIMS], sb[AC_MAX_DIMS]; /* batch strides of a and b (elements), 0 = broadcast */
    int64_t ga[AC_MAX_DIMS], gb[AC_MAX_DIMS]; /* the same in contiguous tensors of a's and b's shapes */
    int64_t rsa, csa, rsb, csb;               /* a(i, k) = A[i*rsa + k*csa], b(k, j) = B[k*rsb + j*csb] */
    int64_t nbatch, n, k, m;
    bool fold;                                /* b is one matrix and a's batches are rows apart: one product */
    bool a_broadcast, b_broadcast;            /* an operand reused across batches: its gradient sums them */
} Plan;

/* Where batch bi starts in a tensor with these batch strides (p's batch shape). */
static int64_t batch_offset(const Plan *p, int64_t bi, const int64_t *stride) {
    int64_t o = 0;
    for (int d = p->nd - 1; d >= 0; d--) {
        o += bi % p->shape[d] * stride[d];
        bi /= p->shape[d];
    }
    return o;
}

/* Shape of a 1-D-promoted operand: `a` as (…, n, k), `b` as (…, k, m). */
static void promote(const Tensor *t, bool left, int *nd, int64_t *shape) {
    if (t->ndim == 1) {
        *nd = 2;
        shape[0] = left ? 1 : t->shape[0];
        shape[1] = left ? t->shape[0] : 1;
        return;
    }
    *nd = t->ndim;
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

/* Written into *p, in the arena: the backward keeps that one, no copies made */
static void make_plan(const Tensor *a, const Tensor *b, Plan *p) {
    memset(p, 0, sizeof *p);
    int na, nb;
    int64_t sha[AC_MAX_DIMS], shb[AC_MAX_DIMS];
    promote(a, true, &na, sha);
    promote(b, false, &nb, shb);
    p->n = sha[na - 2];
    p->k = sha[na - 1];
    p->m = shb[nb - 1];
    if (shb[nb - 2] != p->k) {
        if (a->ndim == 2 && b->ndim == 1)
            ac_error("matmul: size mismatch, got %lld, %lldx%lld,%lld", (long long)p->n,
                     (long long)p->n, (long long)p->k, (long long)b->shape[0]);
        /* PyTorch's wording, with the matrices as they meet in the product (a folded to 2-D
         * when it is batched and b is not: its rows are all its dims but the last) */
        int64_t rows = a->ndim > 2 && b->ndim <= 2 ? ac_rows(a) : p->n;
        ac_error("matmul: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", (long long)rows,
                 (long long)p->k, (long long)shb[nb - 2], (long long)p->m);
    }
    int ba = na - 2, bb = nb - 2;
    p->nd = ba > bb ? ba : bb;
    int64_t cga = p->n * p->k, cgb = p->k * p->m; /* contiguous strides for the gradients' batches */
    for (int d = p->nd - 1; d >= 0; d--) {
        int ia = ba - p->nd + d, ib = bb - p->nd + d;
        int64_t xa = ia >= 0 ? sha[ia] : 1, xb = ib >= 0 ? shb[ib] : 1;
        if (xa != xb && xa != 1 && xb != 1)
            ac_error("matmul: The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                     "non-singleton dimension %d (batch dims of %s and %s)", (long long)xa, (long long)xb, d,
                     ac_shape_str(a), ac_shape_str(b));
        p->shape[d] = xa == 1 ? xb : xa;
        p->sa[d] = xa == 1 ? 0 : a->stride[ia];
        p->sb[d] = xb == 1 ? 0 : b->stride[ib];
        p->ga[d] = xa == 1 ? 0 : cga;
        p->gb[d] = xb == 1 ? 0 : cgb;
        /* reused across the batches, or across none (a batch dim of size 0): its gradient is a sum, zeros for none */
        p->a_broadcast |= xa == 1 && p->shape[d] != 1;
        p->b_broadcast |= xb == 1 && p->shape[d] != 1;
        cga *= xa;
        cgb *= xb;
    }
    /* the matrices' own strides (a 1-D operand is one row of a, one column of b) */
    p->rsa = a->ndim == 1 ? 0 : a->stride[a->ndim - 2];
    p->csa = a->stride[a->ndim - 1];
    p->rsb = b->ndim == 1 ? b->stride[0] : b->stride[b->ndim - 2];
    p->csb = b->ndim == 1 ? 1 : b->stride[b->ndim - 1];
    p->nbatch = 1;
    for (int d = 0; d < p->nd; d++) p->nbatch *= p->shape[d];
    /* folding a's batches into rows needs every batch to sit n rows after the last */
    p->fold = bb == 0 && ba > 0;
    int64_t expect = p->rsa * p->n;
    for (int d = p->nd - 1; d >= 0 && p->fold; d--) {
        if (p->shape[d] > 1 && p->sa[d] != expect) p->fold = false;
        expect *= p->shape[d];
    }
}

/* One product per batch, the batches split among threads (each writes its
 * own block of C). C is contiguous. */
typedef struct {
    const Plan *p;
    const float *A, *B;
    float *C;
    float *scratch;
    size_t per_chunk;
} Batches;

static void batches_task(void *ctx, int64_t b0, int64_t b1, int chunk) {
    const Batches *t = ctx;
    const Plan *p = t->p;
    for (int64_t bi = b0; bi < b1; bi++) {
        const float *a = t->A + batch_offset(p, bi, p->sa), *b = t->B + batch_offset(p, bi, p->sb);
        ac_gemm_serial(p->n, p->m, p->k, a, p->rsa, p->csa, b, p->rsb, p->csb,
                       t->C + bi * p->n * p->m, p->m, false, t->scratch + (size_t)chunk * t->per_chunk);
    }
}

static void product(const Plan *p, const float *A, const float *B, float *C) {
    int64_t n = p->n, k = p->k, m = p->m;
    if (p->fold || p->nbatch == 1) {
        ac_gemm_strided(p->nbatch * n, m, k, A, p->rsa, p->csa, B, p->rsb, p->csb, C, m, false);
        return;
    }
    ac_mark mk = ac_arena_mark();
    int64_t grain = 2 * n * m * k >= (1 << 21) ? 1 : (1 << 21) / (2 * n * m * k + 1) + 1;
    Batches t = {p, A, B, C, NULL, ac_gemm_scratch(m, k)};
    int chunks = ac_parallel_chunks(p->nbatch, grain);
    t.scratch = ac_arena_alloc(sizeof(float) * ac_size_mul(t.per_chunk, (size_t)chunks));
    ac_parallel_for_max(p->nbatch, grain, chunks, batches_task, &t);
    ac_arena_release(mk);
}

/* The gradients, per batch: dA = dC @ B^T, dB = A^T @ dC (operands read
 * transposed through their strides). An operand broadcast across batches sums
 * its gradient over them, in batch order, on one thread; otherwise each batch
 * writes its own block and the batches run on all threads.
 *
 * dC is read through its strides, and an unbroadcast operand's gradient is
 * laid out as the operand is (PyTorch's empty_like, preserve_format): the
 * gradient of a head's q = x.view(b, t, h, dh).transpose(1, 2) comes out in
 * (b, t, h, dh) order, so the transpose and view backwards above it hand it on
 * without a copy. A gradient laid out transposed is computed as its transpose
 * (dA^T = B @ dC^T): the same products, summed in the same order. */
typedef struct {
    const Plan *p;
    const float *A, *B, *G;
    float *out, *scratch;
    size_t per_chunk;
    bool for_a;
    int64_t gs[AC_MAX_DIMS], os[AC_MAX_DIMS]; /* batch strides of dC and of the gradient */
    int64_t rg;                               /* dC's row stride (its columns are adjacent) */
    int64_t ro, co;                           /* the gradient's row and column strides, one of them 1 */
} Grads;

static void grad_batch(const Grads *t, int64_t bi, float *scratch, bool acc) {
    const Plan *p = t->p;
    int64_t n = p->n, k = p->k, m = p->m, oa = batch_offset(p, bi, p->sa), ob = batch_offset(p, bi, p->sb);
    const float *g = t->G + batch_offset(p, bi, t->gs);
    float *o = t->out + batch_offset(p, bi, t->os);
    if (t->for_a) { /* (n, k) = (n, m) @ (m, k): B^T is b read with its strides swapped */
        if (t->co == 1) ac_gemm_serial(n, k, m, g, t->rg, 1, t->B + ob, p->csb, p->rsb, o, t->ro, acc, scratch);
        else ac_gemm_serial(k, n, m, t->B + ob, p->rsb, p->csb, g, 1, t->rg, o, t->co, acc, scratch);
    } else { /* (k, m) = (k, n) @ (n, m) */
        if (t->co == 1) ac_gemm_serial(k, m, n, t->A + oa, p->csa, p->rsa, g, t->rg, 1, o, t->ro, acc, scratch);
        else ac_gemm_serial(m, k, n, g, 1, t->rg, t->A + oa, p->rsa, p->csa, o, t->co, acc, scratch);
    }
}

static void grads_task(void *ctx, int64_t b0, int64_t b1, int chunk) {
    const Grads *t = ctx;
    for (int64_t bi = b0; bi < b1; bi++) grad_batch(t, bi, t->scratch + (size_t)chunk * t->per_chunk, false);
}

static void batched_grad(Grads *t, bool broadcast) {
    const Plan *p = t->p;
    int64_t n = p->n, k = p->k, m = p->m, wide = t->for_a ? (k > n ? k : n) : (m > k ? m : k);
    ac_mark mk = ac_arena_mark();
    t->per_chunk = ac_gemm_scratch(wide, t->for_a ? m : n); /* either orientation's */
    if (broadcast) {
        t->scratch = ac_arena_alloc(sizeof(float) * t->per_chunk);
        for (int64_t bi = 0; bi < p->nbatch; bi++) grad_batch(t, bi, t->scratch, true); /* out starts at zero */
    } else {
        int64_t grain = 2 * n * m * k >= (1 << 21) ? 1 : (1 << 21) / (2 * n * m * k + 1) + 1;
        int chunks = ac_parallel_chunks(p->nbatch, grain);
        t->scratch = ac_arena_alloc(sizeof(float) * ac_size_mul(t->per_chunk, (size_t)chunks));
        ac_parallel_for_max(p->nbatch, grain, chunks, grads_task, t);
    }
    ac_arena_release(mk);
}

/* The gradient of operand x (a batched matrix, not broadcast): laid out as x
 * when x is a dense block with adjacent rows or columns, else contiguous. */
static Tensor *grad_like(const Plan *p, const Tensor *x, Grads *t) {
    Tensor *g = ac_new_dense_like(x);
    int nd = x->ndim;
    if (g->stride[nd - 1] != 1 && g->stride[nd - 2] != 1) g = ac_new_like(x);
    t->ro = g->stride[nd - 2], t->co = g->stride[nd - 1];
    for (int d = 0; d < p->nd; d++) {
        int i = nd - 2 - p->nd + d;
        t->os[d] = i >= 0 && x->shape[i] != 1 ? g->stride[i] : 0;
    }
    t->out = g->data;
    return g;
}

/* The batched gradient of operand x (t->for_a says which): a sum over the
 * batches x was broadcast across, contiguous (batch strides cs, rows of cols)
 * and from zero; else laid out as x. */
static Tensor *operand_grad(const Plan *p, const Tensor *x, bool broadcast, const int64_t *cs, int64_t cols, Grads *t) {
    Tensor *g;
    if (broadcast || x->ndim < 2) {
        g = broadcast ? ac_new_zeros(AC_FLOAT32, x->ndim, x->shape) : ac_new(AC_FLOAT32, x->ndim, x->shape);
        t->out = g->data, t->ro = cols, t->co = 1;
        memcpy(t->os, cs, sizeof t->os);
    } else {
        g = grad_like(p, x, t);
    }
    batched_grad(t, broadcast);
    return g;
}

/* The plan, and each operand saved when the other one needs its gradient. */
typedef struct { const Plan *p; ac_saved a, b; } MatmulSaved;

static void matmul_backward(Node *node, Tensor *gt) {
    Tensor *a = node->inputs[0], *b = node->inputs[1];
    const MatmulSaved *sv = node->ctx;
    const Plan *p = sv->p;
    int64_t n = p->n, k = p->k, m = p->m;
    Tensor *as = ac_unpack(node, sv->a), *bs = ac_unpack(node, sv->b);
    const float *A = as ? (const float *)as->data + as->offset : NULL;
    const float *B = bs ? (const float *)bs->data + bs->offset : NULL;
    bool batched = !(p->fold || p->nbatch == 1);
    /* dC through its strides when its columns are adjacent (a batched product of matrices), else a copy */
    Grads t = {p, A, B, NULL, NULL, NULL, 0, false, {0}, {0}, m, 0, 1};
    if (batched && a->ndim >= 2 && b->ndim >= 2 && (gt->stride[gt->ndim - 1] == 1 || m == 1)) {
        t.G = (const float *)gt->data + gt->offset;
        t.rg = gt->stride[gt->ndim - 2];
        for (int d = 0; d < p->nd; d++) t.gs[d] = gt->stride[d];
    } else {
        t.G = ac_cdata(gt);
        int64_t s = n * m;
        for (int d = p->nd - 1; d >= 0; d--) t.gs[d] = s, s *= p->shape[d];
    }
    if (ac_needs_grad(a)) {
        Tensor *ga;
        t.for_a = true;
        if (!batched) { /* dA = dC @ B^T over all of a's (folded) rows */
            ga = ac_new(AC_FLOAT32, a->ndim, a->shape);
            ac_gemm_strided(p->nbatch * n, k, m, t.G, m, 1, B, p->csb, p->rsb, ga->data, k, false);
        } else {
            ga = operand_grad(p, a, p->a_broadcast, p->ga, k, &t);
        }
        ac_accum_new(a, ga);
    }
    if (ac_needs_grad(b)) {
        Tensor *gb;
        t.for_a = false;
        if (!batched) { /* dB = A^T @ dC, over all of a's (folded) rows */
            gb = ac_new(AC_FLOAT32, b->ndim, b->shape);
            ac_gemm_strided(k, m, p->nbatch * n, A, p->csa, p->rsa, t.G, m, 1, gb->data, m, false);
        } else {
            gb = operand_grad(p, b, p->b_broadcast, p->gb, m, &t);
        }
        ac_accum_new(b, gb);
    }
}

/* Two int64 operands (tensor2d @ tensor2d.T in appendix A): an int64 product, summed in k's
 * order with int64's wraparound, as ATen's integer matmul; no gradient. */
static void product_int64(const Plan *p, const int64_t *A, const int64_t *B, int64_t *C) {
    for (int64_t bi = 0; bi < p->nbatch; bi++) {
        const int64_t *a = A + batch_offset(p, bi, p->sa), *b = B + batch_offset(p, bi, p->sb);
        int64_t *c = C + bi * p->n * p->m;
        for (int64_t i = 0; i < p->n; i++)
            for (int64_t j = 0; j < p->m; j++) {
                uint64_t s = 0;
                for (int64_t kk = 0; kk < p->k; kk++)
                    s += (uint64_t)a[i * p->rsa + kk * p->csa] * (uint64_t)b[kk * p->rsb + j * p->csb];
                c[i * p->m + j] = (int64_t)s;
            }
    }
}

static Tensor *matmul_impl(Tensor *a, Tensor *b, const char *op) {
    ac_check_defined(a, op);
    ac_check_defined(b, op);
    bool ints = a->dtype == AC_INT64 && b->dtype == AC_INT64;
    if (!ints) {
        ac_check_float(a, op);
        ac_check_float(b, op);
    }
    if (a->ndim == 0 || b->ndim == 0)
        ac_error("%s: both arguments to matmul need to be at least 1D, but they are %dD and %dD", op,
                 a->ndim, b->ndim);
    Plan *p = ac_arena_alloc(sizeof *p);
    make_plan(a, b, p);
    int64_t shape[AC_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < p->nd; d++) shape[nd++] = p->shape[d];
    if (a->ndim > 1) shape[nd++] = p->n;
    if (b->ndim > 1) shape[nd++] = p->m;
    if (nd > AC_MAX_DIMS) ac_error("%s: result has more than %d dimensions", op, AC_MAX_DIMS);
    if (ints) {
        Tensor *o = ac_new(AC_INT64, nd, shape);
        product_int64(p, (const int64_t *)a->data + a->offset, (const int64_t *)b->data + b->offset, o->data);
        return o;
    }
    Tensor *out = ac_new(AC_FLOAT32, nd, shape);
    product(p, (const float *)a->data + a->offset, (const float *)b->data + b->offset, out->data);
    const char *name = a->ndim == 1 && b->ndim == 1 ? "DotBackward0"
                     : a->ndim == 2 && b->ndim == 2 ? "MmBackward0"
                     : a->ndim == 1 && b->ndim == 2 ? "SqueezeBackward3" /* 1.13: unsqueeze, mm, squeeze */
                     : a->ndim == 2 && b->ndim == 1 ? "MvBackward0"
                                                    : "UnsafeViewBackward0";
    Node *node = AC_NODE(name, matmul_backward, out, a, b);
    if (node) {
        MatmulSaved *sv = AC_CTX(node, MatmulSaved);
        sv->p = p;
        if (ac_needs_grad(b)) sv->a = ac_save(node, a);
        if (ac_needs_grad(a)) sv->b = ac_save(node, b);
    }
    return out;
}

Tensor *torch_matmul(Tensor *a, Tensor *b) { return matmul_impl(a, b, "matmul"); }

Tensor *torch_dot(Tensor *a, Tensor *b) {
    ac_check_defined(a, "dot");
    ac_check_defined(b, "dot");
    if (a->dtype != AC_INT64 || b->dtype != AC_INT64) {
        ac_check_float(a, "dot");
        ac_check_float(b, "dot");
    }
    if (a->ndim != 1 || b->ndim != 1)
        ac_error("dot: 1D tensors expected, but got %dD and %dD tensors", a->ndim, b->ndim);
    if (a->shape[0] != b->shape[0])
        ac_error("dot: inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same "
                 "number of elements, but got %lld and %lld elements respectively", (long long)a->shape[0],
                 (long long)b->shape[0], (long long)a->shape[0], (long long)b->shape[0]);
    return matmul_impl(a, b, "dot");
}
