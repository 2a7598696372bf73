/* Which vector instructions the fast kernels use: the widest this CPU runs, or fewer where
 * AC_CPU_CAPABILITY says so, as PyTorch's ATEN_CPU_CAPABILITY does for its own ("avx512", "avx2"
 * or "default", the portable C). One machine can then time the paths a machine without AVX-512
 * takes, both sides capped alike. Exact math's bits never depend on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "internal.h"

static ac_isa isa;
static pthread_once_t asked = PTHREAD_ONCE_INIT;

static ac_isa hardware(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return AC_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return AC_ISA_AVX2;
#endif
    return AC_ISA_DEFAULT;
}

static void ask(void) {
    isa = hardware();
    const char *e = getenv("AC_CPU_CAPABILITY");
    if (!e || !*e) return;
    ac_isa cap;
    if (strcmp(e, "avx512") == 0) cap = AC_ISA_AVX512;
    else if (strcmp(e, "avx2") == 0) cap = AC_ISA_AVX2;
    else if (strcmp(e, "default") == 0) cap = AC_ISA_DEFAULT;
    else { /* PyTorch's words for its own variable; the kernels go on with what the CPU has */
        fprintf(stderr, "Warning: ignoring invalid value for AC_CPU_CAPABILITY: %s (expected avx512, avx2 or default)\n", e);
        return;
    }
    if (cap < isa) isa = cap; /* asking for more than the CPU has gives what it has */
}

ac_isa ac_cpu_isa(void) {
    pthread_once(&asked, ask);
    return isa;
}
