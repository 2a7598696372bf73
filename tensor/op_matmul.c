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

typedef struct {
    int nd;                              /* batch dims */
    int64_t shape[AC_MAX_DIMS];          /* broadcast batch shape */
    int64_t sa[AC_MAX_DIMS], sb[AC_MAX_DIMS]; /* batch strides (in matrices) of a and b, 0 = broadcast */
    int64_t nbatch, n, k, m;
    bool fold;                           /* b is one matrix: fold a's batches into rows */
} Plan;

static void batch_offsets(const Plan *p, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int d = p->nd - 1; d >= 0; d--) {
        int64_t i = bi % p->shape[d];
        bi /= p->shape[d];
        *oa += i * p->sa[d];
        *ob += i * p->sb[d];
    }
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

static Plan make_plan(const Tensor *a, const Tensor *b) {
    Plan p;
    memset(&p, 0, sizeof p);
    int na, nb;
    int64_t sha[AC_MAX_DIMS], shb[AC_MAX_DIMS];
    promote(a, true, &na, sha);
    promote(b, false, &nb, shb);
    p.n = sha[na - 2];
    p.k = sha[na - 1];
    p.m = shb[nb - 1];
    if (shb[nb - 2] != p.k) {
        if (a->ndim == 2 && b->ndim == 1)
            ac_error("matmul: size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)", (long long)p.n,
                     (long long)p.n, (long long)p.k, (long long)b->shape[0]);
        /* PyTorch's wording, with the matrices as they meet in the product (a folded to 2-D
         * when it is batched and b is not: its rows are all its dims but the last) */
        int64_t rows = a->ndim > 2 && b->ndim <= 2 ? ac_rows(a) : p.n;
        ac_error("matmul: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", (long long)rows,
                 (long long)p.k, (long long)shb[nb - 2], (long long)p.m);
    }
    int ba = na - 2, bb = nb - 2;
    p.nd = ba > bb ? ba : bb;
    int64_t ca = 1, cb = 1;
    for (int d = p.nd - 1; d >= 0; d--) {
        int ia = ba - p.nd + d, ib = bb - p.nd + d;
        int64_t xa = ia >= 0 ? sha[ia] : 1, xb = ib >= 0 ? shb[ib] : 1;
        if (xa != xb && xa != 1 && xb != 1)
            ac_error("matmul: The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                     "non-singleton dimension %d (batch dims of %s and %s)", (long long)xa, (long long)xb, d,
                     ac_shape_str(a), ac_shape_str(b));
        p.shape[d] = xa == 1 ? xb : xa;
        p.sa[d] = xa == 1 ? 0 : ca;
        p.sb[d] = xb == 1 ? 0 : cb;
        ca *= xa;
        cb *= xb;
    }
    p.nbatch = 1;
    for (int d = 0; d < p.nd; d++) p.nbatch *= p.shape[d];
    p.fold = bb == 0 && ba > 0;
    return p;
}

static void product(const Plan *p, const float *A, const float *B, float *C) {
    int64_t n = p->n, k = p->k, m = p->m;
    if (p->fold) {
        ac_gemm(p->nbatch * n, m, k, A, k, B, m, C, m, false);
        return;
    }
    for (int64_t bi = 0; bi < p->nbatch; bi++) {
        int64_t oa, ob;
        batch_offsets(p, bi, &oa, &ob);
        ac_gemm(n, m, k, A + oa * n * k, k, B + ob * k * m, m, C + bi * n * m, m, false);
    }
}

static void matmul_backward(Node *node, Tensor *gt) {
    Tensor *a = node->inputs[0], *b = node->inputs[1];
    const Plan *p = node->ctx;
    int64_t n = p->n, k = p->k, m = p->m;
    const float *A = ac_cdata(a), *B = ac_cdata(b), *G = ac_cdata(gt);
    if (ac_needs_grad(a)) { /* dA = dC @ B^T (B read transposed) */
        Tensor *ga = ac_new_zeros(AC_FLOAT32, a->ndim, a->shape);
        if (p->fold) {
            ac_gemm_strided(p->nbatch * n, k, m, G, m, 1, B, 1, m, ga->data, k, false);
        } else {
            for (int64_t bi = 0; bi < p->nbatch; bi++) {
                int64_t oa, ob;
                batch_offsets(p, bi, &oa, &ob);
                ac_gemm_strided(n, k, m, G + bi * n * m, m, 1, B + ob * k * m, 1, m, (float *)ga->data + oa * n * k, k,
                                true);
            }
        }
        ac_accum(a, ga);
    }
    if (ac_needs_grad(b)) { /* dB = A^T @ dC (A read transposed) */
        Tensor *gb = ac_new_zeros(AC_FLOAT32, b->ndim, b->shape);
        if (p->fold) {
            ac_gemm_strided(k, m, p->nbatch * n, A, 1, k, G, m, 1, gb->data, m, false);
        } else {
            for (int64_t bi = 0; bi < p->nbatch; bi++) {
                int64_t oa, ob;
                batch_offsets(p, bi, &oa, &ob);
                ac_gemm_strided(k, m, n, A + oa * n * k, 1, k, G + bi * n * m, m, 1, (float *)gb->data + ob * k * m, m,
                                true);
            }
        }
        ac_accum(b, gb);
    }
}

static Tensor *matmul_impl(Tensor *a, Tensor *b, const char *op) {
    ac_check_float(a, op);
    ac_check_float(b, op);
    if (a->ndim == 0 || b->ndim == 0)
        ac_error("%s: both arguments to matmul need to be at least 1D, but they are %dD and %dD", op,
                 a->ndim, b->ndim);
    Plan p = make_plan(a, b);
    int64_t shape[AC_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < p.nd; d++) shape[nd++] = p.shape[d];
    if (a->ndim > 1) shape[nd++] = p.n;
    if (b->ndim > 1) shape[nd++] = p.m;
    if (nd > AC_MAX_DIMS) ac_error("%s: result has more than %d dimensions", op, AC_MAX_DIMS);
    Tensor *out = ac_new(AC_FLOAT32, nd, shape);
    product(&p, ac_cdata(a), ac_cdata(b), out->data);
    const char *name = a->ndim == 1 && b->ndim == 1 ? "DotBackward0"
                     : a->ndim == 2 && b->ndim == 2 ? "MmBackward0"
                     : a->ndim == 1 && b->ndim == 2 ? "SqueezeBackward3" /* 1.13: unsqueeze, mm, squeeze */
                     : a->ndim == 2 && b->ndim == 1 ? "MvBackward0"
                                                    : "UnsafeViewBackward0";
    Node *node = AC_NODE(name, matmul_backward, out, a, b);
    if (node) {
        node->ctx = ac_arena_alloc(sizeof p);
        memcpy(node->ctx, &p, sizeof p);
        node->uses_saved = true;
    }
    return out;
}

Tensor *torch_matmul(Tensor *a, Tensor *b) { return matmul_impl(a, b, "matmul"); }

Tensor *torch_dot(Tensor *a, Tensor *b) {
    ac_check_float(a, "dot");
    ac_check_float(b, "dot");
    if (a->ndim != 1 || b->ndim != 1)
        ac_error("dot: 1D tensors expected, but got %dD and %dD tensors", a->ndim, b->ndim);
    if (a->shape[0] != b->shape[0])
        ac_error("dot: inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same "
                 "number of elements, but got %lld and %lld elements respectively", (long long)a->shape[0],
                 (long long)b->shape[0], (long long)a->shape[0], (long long)b->shape[0]);
    return matmul_impl(a, b, "dot");
}
