/* The float32 2-norm in PyTorch 1.13's CPU order: eight running sums of
 * x * x, added left to right, then the n % 8 tail one by one, then sqrtf.
 * That is its kernel for a contiguous tensor as the scalar build runs it
 * (ATEN_CPU_CAPABILITY=default, the setting every golden file of exact math
 * is made with); the AVX2 build fuses the multiply-adds. See extend.h. */
#include <math.h>

#include "internal.h"

float ac_norm2_f32(const float *x, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[i + j] * x[i + j];
    float s = acc[0];
    for (int j = 1; j < 8; j++) s += acc[j];
    for (; i < n; i++) s += x[i] * x[i];
    return sqrtf(s);
}
