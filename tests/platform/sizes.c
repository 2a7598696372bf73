/* Sizes against the platform, without Check (so it builds for any target,
 * 32-bit too): every tensor whose bytes pass PTRDIFF_MAX of *this* platform
 * is refused with the exact byte count before anything is allocated, and the
 * library works on afterwards. Run by `make check-m32` (gcc -m32) and the suite.
 *     sizes            exits 0, or prints what went wrong and exits 1 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "tensor.h"

static jmp_buf jump;
static char message[1024];
static void on_error(ac_error_kind kind, const char *msg, void *user) {
    (void)kind, (void)user;
    snprintf(message, sizeof message, "%s", msg);
    longjmp(jump, 1);
}

static int failures;
#define REFUSED(what, want, ...)                                                                         \
    do {                                                                                                 \
        message[0] = 0;                                                                                  \
        if (setjmp(jump) == 0) {                                                                         \
            __VA_ARGS__;                                                                                 \
            printf("sizes: %s was accepted, expected \"%s\"\n", what, want);                              \
            failures++;                                                                                  \
        } else if (!strstr(message, want)) {                                                             \
            printf("sizes: %s: \"%s\", expected \"%s\"\n", what, message, want);                          \
            failures++;                                                                                  \
        }                                                                                                \
    } while (0)

int main(void) {
    ac_set_error_handler(on_error, NULL);
    /* past 2^63 bytes everywhere */
    REFUSED("zeros(2^62) float32", "you tried to allocate 18446744073709551616 bytes", torch_zeros(SHAPE((int64_t)1 << 62)));
    REFUSED("zeros(2^31, 2^31, 4)", "numel: integer multiplication overflow",
            torch_zeros(SHAPE((int64_t)1 << 31, (int64_t)1 << 31, 4)));
    if (sizeof(size_t) == 4) { /* what a 32-bit size_t would wrap */
        REFUSED("zeros(2^32)", "you tried to allocate 17179869184 bytes", torch_zeros(SHAPE((int64_t)1 << 32)));
        REFUSED("zeros(65536, 65536)", "you tried to allocate 17179869184 bytes", torch_zeros(SHAPE(65536, 65536)));
        REFUSED("empty(2^29) int64", "you tried to allocate 4294967296 bytes", torch_empty(SHAPE((int64_t)1 << 29), AC_INT64));
        REFUSED("ones(2048, 2048, 2048)", "you tried to allocate 34359738368 bytes", torch_ones(SHAPE(2048, 2048, 2048)));
        REFUSED("arange(2^31)", "you tried to allocate 17179869184 bytes", torch_arange((int64_t)1 << 31));
        REFUSED("Linear(65536, 65536)", "you tried to allocate 17179869184 bytes", nn_Linear_new(65536, 65536, false));
        REFUSED("persist_zeros(2^30)", "you tried to allocate 4294967296 bytes",
                ac_persist_zeros(AC_FLOAT32, 1, (int64_t[]){(int64_t)1 << 30}));
        REFUSED("expand then contiguous", "you tried to allocate 17179869184 bytes",
                torch_contiguous(torch_expand(torch_zeros(SHAPE(1, 65536)), SHAPE(65536, 65536))));
    }
    /* and the library works on */
    if (setjmp(jump) == 0) {
        torch_manual_seed(123);
        Tensor *t = torch_matmul(torch_rand(SHAPE(3, 4)), torch_rand(SHAPE(4, 2)));
        if (torch_numel(t) != 6) printf("sizes: matmul after the refusals gave %lld elements\n", (long long)torch_numel(t)), failures++;
    } else {
        printf("sizes: an error after the refusals: %s\n", message);
        failures++;
    }
    ac_shutdown();
    printf("sizes: %d-bit, %d failures\n", (int)(8 * sizeof(size_t)), failures);
    return failures ? 1 : 0;
}
