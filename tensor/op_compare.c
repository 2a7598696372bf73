/* torch.equal and torch.allclose: a bool about two tensors, no gradient. */
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
