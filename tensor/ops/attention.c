/* Fused attention: torch.nn.functional.scaled_dot_product_attention
 *     out = softmax(q @ k^T * scale + mask) @ v
 * in FlashAttention-2's way. Queries go in tiles of BR rows against keys in
 * tiles of BC, with an online softmax (a running max m and sum l per row), so
 * the (L, S) matrix of scores never exists: the forward keeps only the output
 * and the log-sum-exp of each row, O(B*H*L) extra. The backward recomputes
 * the probabilities tile by tile from them:
 *     in the forward:  P = exp(S - lse),  O = P V
 *     so:              dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D) with D = rowsum(dO * O),
 *                      dQ = dS K * scale,  dK = dS^T Q * scale
 * With is_causal, key tiles wholly above the diagonal are skipped, not masked.
 * Threads split the forward over (batch, query tile) and the backward over
 * batches: each output is computed by one thread, the same way at any count. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define BR 64
#define BC 64

typedef struct {
    int nd;                       /* batch dims */
    int64_t bshape[AC_MAX_DIMS];  /* batch shape (all four tensors the same) */
    int64_t nbatch, L, S, E, Ev;
    int64_t qs[AC_MAX_DIMS], ks[AC_MAX_DIMS], vs[AC_MAX_DIMS], ms[AC_MAX_DIMS]; /* batch strides */
    int64_t q_r, q_c, k_r, k_c, v_r, v_c; /* row and column strides */
    int64_t m_r, m_c;             /* the mask's (0 where it broadcasts) */
    const float *q, *k, *v;
    const void *mask;             /* NULL, bool (true: take part) or float (added) */
    bool mask_bool, causal;
    float scale;
} Attn;

static void offsets(const Attn *a, int64_t b, int64_t *oq, int64_t *ok, int64_t *ov, int64_t *om) {
    *oq = *ok = *ov = *om = 0;
    for (int d = a->nd - 1; d >= 0; d--) {
        int64_t i = b % a->bshape[d];
        b /= a->bshape[d];
        *oq += i * a->qs[d], *ok += i * a->ks[d], *ov += i * a->vs[d], *om += i * a->ms[d];
    }
}

/* Scores of query rows [i0, i0+br) against keys [j0, j0+bc): S = q k^T * scale,
 * then the masks; entries that take no part are -inf. */
static void scores(const Attn *a, int64_t oq, int64_t ok, int64_t om, int64_t i0, int br, int64_t j0, int bc,
                   float *s, float *scratch) {
    ac_gemm_serial(br, bc, a->E, a->q + oq + i0 * a->q_r, a->q_r, a->q_c, a->k + ok + j0 * a->k_r, a->k_c, a->k_r, s,
                   BC, false, scratch);
    for (int r = 0; r < br; r++)
        for (int c = 0; c < bc; c++) {
            float *x = &s[r * BC + c];
            *x *= a->scale;
            if (a->causal && j0 + c > i0 + r) *x = -INFINITY;
            if (a->mask) {
                int64_t mo = om + (i0 + r) * a->m_r + (j0 + c) * a->m_c;
                if (a->mask_bool) {
                    if (!((const bool *)a->mask)[mo]) *x = -INFINITY;
                } else {
                    *x += ((const float *)a->mask)[mo];
                }
            }
        }
}

/* The key tiles a query tile meets: with is_causal, none past its last row. */
static int64_t key_end(const Attn *a, int64_t i0, int br) {
    int64_t e = a->causal ? i0 + br : a->S;
    return e < a->S ? e : a->S;
}

typedef struct {
    const Attn *a;
    float *out, *lse, *scratch;
    size_t per_chunk;
} Fwd;

static void forward_task(void *ctx, int64_t u0, int64_t u1, int chunk) {
    const Fwd *f = ctx;
    const Attn *a = f->a;
    int64_t tiles = (a->L + BR - 1) / BR;
    float *s = f->scratch + (size_t)chunk * f->per_chunk, *acc = s + BR * BC, *gs = acc + BR * a->Ev;
    float m[BR], l[BR];
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / tiles, i0 = (u % tiles) * BR, oq, ok, ov, om;
        int br = a->L - i0 < BR ? (int)(a->L - i0) : BR;
        offsets(a, b, &oq, &ok, &ov, &om);
        for (int r = 0; r < br; r++) m[r] = -INFINITY, l[r] = 0;
        memset(acc, 0, sizeof(float) * (size_t)(br * a->Ev));
        int64_t jend = key_end(a, i0, br);
        for (int64_t j0 = 0; j0 < jend; j0 += BC) {
            int bc = jend - j0 < BC ? (int)(jend - j0) : BC;
            scores(a, oq, ok, om, i0, br, j0, bc, s, gs);
            for (int r = 0; r < br; r++) { /* the online softmax: rescale what came before */
                float *sr = s + r * BC, mx = m[r];
                for (int c = 0; c < bc; c++) mx = sr[c] > mx ? sr[c] : mx;
                float alpha = mx == -INFINITY ? 1.0f : expf(m[r] - mx), sum = 0;
                for (int c = 0; c < bc; c++) sum += sr[c] = mx == -INFINITY ? 0.0f : expf(sr[c] - mx);
                l[r] = l[r] * alpha + sum;
                m[r] = mx;
                if (alpha != 1.0f)
                    for (int64_t e = 0; e < a->Ev; e++) acc[r * a->Ev + e] *= alpha;
            }
            /* acc += P V */
            ac_gemm_serial(br, a->Ev, bc, s, BC, 1, a->v + ov + j0 * a->v_r, a->v_r, a->v_c, acc, a->Ev, true, gs);
        }
        int64_t ob = b * a->L * a->Ev;
        for (int r = 0; r < br; r++) {
            float inv = 1.0f / l[r]; /* a row with nothing to attend to: 0/0, NaN, as the explicit softmax gives */
            for (int64_t e = 0; e < a->Ev; e++) f->out[ob + (i0 + r) * a->Ev + e] = acc[r * a->Ev + e] * inv;
            f->lse[b * a->L + i0 + r] = m[r] + logf(l[r]);
        }
    }
}

typedef struct {
    const Attn *a;
    const float *out, *lse, *dout;
    float *dq, *dk, *dv, *scratch;
    size_t per_chunk;
} Bwd;

static void backward_task(void *ctx, int64_t b0, int64_t b1, int chunk) {
    const Bwd *w = ctx;
    const Attn *a = w->a;
    int64_t L = a->L, S = a->S, E = a->E, Ev = a->Ev;
    float *p = w->scratch + (size_t)chunk * w->per_chunk, *dp = p + BR * BC, *d = dp + BR * BC, *gs = d + BR;
    for (int64_t b = b0; b < b1; b++) {
        int64_t oq, ok, ov, om;
        offsets(a, b, &oq, &ok, &ov, &om);
        const float *o = w->out + b * L * Ev, *g = w->dout + b * L * Ev, *lse = w->lse + b * L;
        float *dq = w->dq + b * L * E, *dk = w->dk + b * S * E, *dv = w->dv + b * S * Ev;
        for (int64_t i0 = 0; i0 < L; i0 += BR) {
            int br = L - i0 < BR ? (int)(L - i0) : BR;
            for (int r = 0; r < br; r++) { /* D = rowsum(dO * O) */
                float s = 0;
                for (int64_t e = 0; e < Ev; e++) s += g[(i0 + r) * Ev + e] * o[(i0 + r) * Ev + e];
                d[r] = s;
            }
            int64_t jend = key_end(a, i0, br);
            for (int64_t j0 = 0; j0 < jend; j0 += BC) {
                int bc = jend - j0 < BC ? (int)(jend - j0) : BC;
                scores(a, oq, ok, om, i0, br, j0, bc, p, gs);
                for (int r = 0; r < br; r++) /* P = exp(S - lse), recomputed */
                    for (int c = 0; c < bc; c++) {
                        float x = p[r * BC + c];
                        p[r * BC + c] = x == -INFINITY ? 0.0f : expf(x - lse[i0 + r]);
                    }
                /* dV[j] += P^T dO[i] */
                ac_gemm_serial(bc, Ev, br, p, 1, BC, g + i0 * Ev, Ev, 1, dv + j0 * Ev, Ev, true, gs);
                /* dP = dO[i] V[j]^T */
                ac_gemm_serial(br, bc, Ev, g + i0 * Ev, Ev, 1, a->v + ov + j0 * a->v_r, a->v_c, a->v_r, dp, BC, false, gs);
                for (int r = 0; r < br; r++) /* dS = P * (dP - D) * scale */
                    for (int c = 0; c < bc; c++) dp[r * BC + c] = p[r * BC + c] * (dp[r * BC + c] - d[r]) * a->scale;
                /* dQ[i] += dS K[j];  dK[j] += dS^T Q[i] */
                ac_gemm_serial(br, E, bc, dp, BC, 1, a->k + ok + j0 * a->k_r, a->k_r, a->k_c, dq + i0 * E, E, true, gs);
                ac_gemm_serial(bc, E, br, dp, 1, BC, a->q + oq + i0 * a->q_r, a->q_r, a->q_c, dk + j0 * E, E, true, gs);
            }
        }
    }
}

static size_t gemm_scratch(const Attn *a) {
    size_t s = ac_gemm_scratch(BC, a->E), t = ac_gemm_scratch(a->Ev, BC), u = ac_gemm_scratch(a->E, BC);
    size_t w = ac_gemm_scratch(a->Ev, BR), x = ac_gemm_scratch(BC, a->Ev);
    s = s > t ? s : t, s = s > u ? s : u, s = s > w ? s : w;
    return s > x ? s : x;
}

/* The plan (which reads q, k, v through their strides), the inputs and the
 * output saved, and the op's own logsumexp per query. */
typedef struct { Attn *a; ac_saved q, k, v, out; Tensor *lse; } SdpaSaved;

static void sdpa_backward(Node *n, Tensor *gt) {
    const SdpaSaved *sv = n->ctx;
    const Attn *a = sv->a;
    Tensor *q = ac_unpack(n, sv->q), *k = ac_unpack(n, sv->k), *v = ac_unpack(n, sv->v), *out = ac_unpack(n, sv->out);
    Tensor *dq = ac_new_zeros(AC_FLOAT32, q->ndim, q->shape), *dk = ac_new_zeros(AC_FLOAT32, k->ndim, k->shape),
           *dv = ac_new_zeros(AC_FLOAT32, v->ndim, v->shape);
    Bwd w = {a, out->data, sv->lse->data, ac_cdata(gt), dq->data, dk->data, dv->data, NULL, 0};
    w.per_chunk = 2 * BR * BC + BR + gemm_scratch(a);
    int chunks = ac_parallel_chunks(a->nbatch, 1);
    w.scratch = ac_arena_alloc(sizeof(float) * ac_size_mul(w.per_chunk, (size_t)chunks));
    ac_parallel_for_max(a->nbatch, 1, chunks, backward_task, &w);
    ac_accum(q, dq);
    ac_accum(k, dk);
    ac_accum(v, dv);
}

Tensor *torch_scaled_dot_product_attention(Tensor *query, Tensor *key, Tensor *value, Tensor *attn_mask,
                                           double dropout_p, bool is_causal, double scale) {
    const char *op = "scaled_dot_product_attention";
    ac_check_float(query, op);
    ac_check_float(key, op);
    ac_check_float(value, op);
    if (attn_mask) ac_check_live(attn_mask, op);
    if (dropout_p != 0.0)
        ac_error("%s: dropout_p must be 0 here (got %g): attention.c's fused kernel has no dropout; use the explicit "
                 "softmax and torch_dropout for it", op, dropout_p);
    if (query->ndim < 2 || key->ndim != query->ndim || value->ndim != query->ndim)
        ac_error("%s: expected query, key and value of the same number of dims, at least 2 (got %dD, %dD, %dD)", op,
                 query->ndim, key->ndim, value->ndim);
    int nd = query->ndim - 2;
    for (int d = 0; d < nd; d++)
        if (key->shape[d] != query->shape[d] || value->shape[d] != query->shape[d])
            ac_error("%s: the batch dims of query %s, key %s and value %s must be equal", op, ac_shape_str(query),
                     ac_shape_str(key), ac_shape_str(value));
    Attn *a = ac_arena_alloc(sizeof *a);
    memset(a, 0, sizeof *a);
    a->nd = nd;
    a->L = query->shape[nd], a->S = key->shape[nd], a->E = query->shape[nd + 1], a->Ev = value->shape[nd + 1];
    if (key->shape[nd + 1] != a->E)
        ac_error("%s: query's last dim (%lld) and key's (%lld) must be equal", op, (long long)a->E,
                 (long long)key->shape[nd + 1]);
    if (value->shape[nd] != a->S)
        ac_error("%s: key has %lld positions, value %lld: they must be equal", op, (long long)a->S,
                 (long long)value->shape[nd]);
    if (is_causal && attn_mask) ac_error("%s: _scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True", op);
    a->nbatch = 1;
    for (int d = 0; d < nd; d++) {
        a->bshape[d] = query->shape[d];
        a->nbatch *= query->shape[d];
        a->qs[d] = query->stride[d], a->ks[d] = key->stride[d], a->vs[d] = value->stride[d];
    }
    a->q_r = query->stride[nd], a->q_c = query->stride[nd + 1];
    a->k_r = key->stride[nd], a->k_c = key->stride[nd + 1];
    a->v_r = value->stride[nd], a->v_c = value->stride[nd + 1];
    a->q = (const float *)query->data + query->offset, a->k = (const float *)key->data + key->offset;
    a->v = (const float *)value->data + value->offset;
    a->causal = is_causal;
    a->scale = (float)(isnan(scale) ? 1.0 / sqrt((double)a->E) : scale);
    if (attn_mask) { /* broadcast to (batch..., L, S), read through strides */
        if (attn_mask->dtype != AC_BOOL && attn_mask->dtype != AC_FLOAT32)
            ac_error("%s: Expected attn_mask dtype to be bool or float, but got %s", op, ac_dtype_name(attn_mask->dtype));
        int64_t shape[AC_MAX_DIMS], st[AC_MAX_DIMS];
        for (int d = 0; d < nd; d++) shape[d] = a->bshape[d];
        shape[nd] = a->L, shape[nd + 1] = a->S;
        Tensor target = {.ndim = nd + 2};
        memcpy(target.shape, shape, sizeof shape);
        int bnd;
        int64_t bshape[AC_MAX_DIMS];
        bool ok = attn_mask->ndim <= nd + 2 && ac_broadcast_shape(&target, attn_mask, &bnd, bshape) && bnd == nd + 2;
        for (int d = 0; ok && d < bnd; d++) ok = bshape[d] == shape[d];
        if (!ok)
            ac_error("%s: attn_mask of shape %s does not broadcast to %s", op, ac_shape_str(attn_mask),
                     ac_dims_str(nd + 2, shape));
        Tensor *mc = ac_materialize(attn_mask);
        ac_broadcast_strides(mc, nd + 2, shape, st);
        for (int d = 0; d < nd; d++) a->ms[d] = st[d];
        a->m_r = st[nd], a->m_c = st[nd + 1];
        a->mask = mc->data;
        a->mask_bool = attn_mask->dtype == AC_BOOL;
    }
    int64_t oshape[AC_MAX_DIMS];
    memcpy(oshape, query->shape, sizeof(int64_t) * (size_t)query->ndim);
    oshape[nd + 1] = a->Ev;
    Tensor *out = ac_new(AC_FLOAT32, query->ndim, oshape);
    Tensor *lse = ac_new(AC_FLOAT32, nd + 1, query->shape); /* (batch..., L) */
    if (a->L > 0) {
        int64_t units = a->nbatch * ((a->L + BR - 1) / BR);
        Fwd f = {a, out->data, lse->data, NULL, (size_t)(BR * BC + BR * a->Ev) + gemm_scratch(a)};
        int chunks = ac_parallel_chunks(units, 1);
        f.scratch = ac_arena_alloc(sizeof(float) * ac_size_mul(f.per_chunk, (size_t)chunks));
        ac_parallel_for_max(units, 1, chunks, forward_task, &f);
    }
    Node *n = AC_NODE("ScaledDotProductFlashAttentionForCpuBackward0", sdpa_backward, out, query, key, value);
    if (n) {
        SdpaSaved *sv = AC_CTX(n, SdpaSaved);
        sv->a = a;
        sv->q = ac_save(n, query), sv->k = ac_save(n, key), sv->v = ac_save(n, value);
        sv->out = ac_save(n, out);
        sv->lse = lse;
    }
    return out;
}
