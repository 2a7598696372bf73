/* Comparisons, no gradient: torch.equal and torch.allclose (one bool about two tensors), and
 * the elementwise lt gt le ge eq ne (a bool tensor). */
#include <math.h>

#include "internal.h"

bool torch_equal(const Tensor *a, const Tensor *b) {
    ac_check_defined(a, "equal");
    ac_check_defined(b, "equal");
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    int64_t n = torch_numel(a), ia[AC_MAX_DIMS] = {0}, ib[AC_MAX_DIMS] = {0}, oa = a->offset, ob = b->offset;
    for (int64_t k = 0; k < n; k++) {
        if (!(ac_element_at(a, oa) == ac_element_at(b, ob))) return false; /* NaN equals nothing */
        ac_advance(a->ndim, a->shape, a->stride, ia, &oa);
        ac_advance(b->ndim, b->shape, b->stride, ib, &ob);
    }
    return true;
}

/* |a - b| <= atol + rtol * |b|, a and b broadcast together (PyTorch's isclose, then all) */
bool torch_allclose(const Tensor *a, const Tensor *b, double rtol, double atol, bool equal_nan) {
    int nd;
    int64_t shape[AC_MAX_DIMS], sa[AC_MAX_DIMS], sb[AC_MAX_DIMS];
    ac_check_defined(a, "allclose");
    ac_check_defined(b, "allclose");
    ac_broadcast_check("allclose", a, b, &nd, shape);
    ac_broadcast_strides(a, nd, shape, sa);
    ac_broadcast_strides(b, nd, shape, sb);
    int64_t n = ac_shape_numel(nd, shape), ia[AC_MAX_DIMS] = {0}, ib[AC_MAX_DIMS] = {0}, oa = a->offset, ob = b->offset;
    for (int64_t k = 0; k < n; k++) {
        double x = ac_element_at(a, oa), y = ac_element_at(b, ob);
        bool close = x == y || (isnan(x) && isnan(y) && equal_nan) ||
                     (isfinite(x) && isfinite(y) && fabs(x - y) <= atol + rtol * fabs(y));
        if (!close) return false;
        ac_advance(nd, shape, sa, ia, &oa);
        ac_advance(nd, shape, sb, ib, &ob);
    }
    return true;
}

/* ---- lt gt le ge eq ne: elementwise, a bool tensor, no gradient ------------------------- */

typedef enum { LT, GT, LE, GE, EQ, NE } CmpOp;
static const char *const cmp_names[] = {"lt", "gt", "le", "ge", "eq", "ne"};

static bool cmp(CmpOp op, double x, double y) {
    switch (op) {
    case LT: return x < y;
    case GT: return x > y;
    case LE: return x <= y;
    case GE: return x >= y;
    case EQ: return x == y;
    case NE: return x != y;
    }
    return false;
}

/* PyTorch promotes to float32 when either side is float: each value is then rounded to float
 * before comparing (a float tensor against 0.1 compares with (float)0.1). Integers and bools
 * compare exactly (as doubles: exact up to 2^53). */
static Tensor *compare(CmpOp op, Tensor *a, Tensor *b) {
    ac_check_defined(a, cmp_names[op]);
    ac_check_defined(b, cmp_names[op]);
    int nd;
    int64_t shape[AC_MAX_DIMS], sa[AC_MAX_DIMS], sb[AC_MAX_DIMS];
    ac_broadcast_check(cmp_names[op], a, b, &nd, shape);
    ac_broadcast_strides(a, nd, shape, sa);
    ac_broadcast_strides(b, nd, shape, sb);
    bool as_float = a->dtype == AC_FLOAT32 || b->dtype == AC_FLOAT32;
    Tensor *out = ac_new(AC_BOOL, nd, shape);
    bool *o = out->data;
    int64_t n = torch_numel(out), ia[AC_MAX_DIMS] = {0}, ib[AC_MAX_DIMS] = {0}, oa = a->offset, ob = b->offset;
    for (int64_t k = 0; k < n; k++) {
        double x = ac_element_at(a, oa), y = ac_element_at(b, ob);
        o[k] = as_float ? cmp(op, (float)x, (float)y) : cmp(op, x, y);
        ac_advance(nd, shape, sa, ia, &oa);
        ac_advance(nd, shape, sb, ib, &ob);
    }
    return out;
}

/* A Python number beside a tensor: a float tensor compares with the number rounded to float32;
 * an integer tensor with a whole number compares exactly, with a fraction in float32 (promotion). */
static Tensor *compare_scalar(CmpOp op, Tensor *a, double s) {
    ac_check_defined(a, cmp_names[op]);
    bool as_float = a->dtype == AC_FLOAT32 || s != floor(s);
    Tensor *out = ac_new(AC_BOOL, a->ndim, a->shape);
    bool *o = out->data;
    int64_t n = torch_numel(a), ia[AC_MAX_DIMS] = {0}, oa = a->offset;
    for (int64_t k = 0; k < n; k++) {
        double x = ac_element_at(a, oa);
        o[k] = as_float ? cmp(op, (float)x, (float)s) : cmp(op, x, s);
        ac_advance(a->ndim, a->shape, a->stride, ia, &oa);
    }
    return out;
}

Tensor *torch_lt(Tensor *a, Tensor *b) { return compare(LT, a, b); }
Tensor *torch_gt(Tensor *a, Tensor *b) { return compare(GT, a, b); }
Tensor *torch_le(Tensor *a, Tensor *b) { return compare(LE, a, b); }
Tensor *torch_ge(Tensor *a, Tensor *b) { return compare(GE, a, b); }
Tensor *torch_eq(Tensor *a, Tensor *b) { return compare(EQ, a, b); }
Tensor *torch_ne(Tensor *a, Tensor *b) { return compare(NE, a, b); }
Tensor *torch_lt_scalar(Tensor *a, double s) { return compare_scalar(LT, a, s); }
Tensor *torch_gt_scalar(Tensor *a, double s) { return compare_scalar(GT, a, s); }
Tensor *torch_le_scalar(Tensor *a, double s) { return compare_scalar(LE, a, s); }
Tensor *torch_ge_scalar(Tensor *a, double s) { return compare_scalar(GE, a, s); }
Tensor *torch_eq_scalar(Tensor *a, double s) { return compare_scalar(EQ, a, s); }
Tensor *torch_ne_scalar(Tensor *a, double s) { return compare_scalar(NE, a, s); }
