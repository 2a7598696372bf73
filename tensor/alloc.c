/* The one allocator of the library: malloc/calloc/realloc that never return
 * NULL (a failure is an error, in PyTorch's words), checked size arithmetic,
 * and a fault injector so that tests can make the N-th allocation fail. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

static _Thread_local uint64_t alloc_count, fail_at; /* per thread, like the arena */
static _Thread_local bool env_read;

void ac_fail_alloc_at(uint64_t n) {
    env_read = true; /* an explicit call wins over AC_FAIL_ALLOC */
    fail_at = n ? alloc_count + n : 0;
}

uint64_t ac_alloc_count(void) { return alloc_count; }

/* Counts an allocation; true when this one is to fail (AC_FAIL_ALLOC=N: the N-th of the process). */
bool ac_alloc_should_fail(void) { return ac_alloc_refused(0); }

/* No object may be larger than PTRDIFF_MAX (C's pointer differences, and glibc
 * refuses it anyway): such a size fails here, the same on every allocator. */
bool ac_alloc_refused(size_t bytes) {
    if (bytes > PTRDIFF_MAX) return true;
    if (!env_read) {
        env_read = true;
        const char *e = getenv("AC_FAIL_ALLOC");
        if (e && *e) fail_at = strtoull(e, NULL, 10);
    }
    return ++alloc_count == fail_at;
}

/* A block of cap bytes (a multiple of align) from aligned_alloc, for big long-lived data: the arena's
 * blocks, gradient buffers, long-lived tensors. Aligned to AC_HUGE_PAGE, the whole 2 MiB pages of its
 * first `used` bytes are asked to be huge pages (MADV_HUGEPAGE, a hint; failure is harmless): fewer
 * TLB misses, and its first touch faults 512 times fewer pieces. Bytes past `used` are never
 * touched, and a huge page there would be memory for nothing. An error if it cannot be had. */
void *ac_block_alloc(size_t cap, size_t align, size_t used) {
    void *p = ac_alloc_refused(cap) ? NULL : aligned_alloc(align, cap);
    if (!p) ac_out_of_memory(cap, 1);
#if defined(MADV_HUGEPAGE) && !defined(AC_ASAN)
    if (align == AC_HUGE_PAGE && used >= AC_HUGE_PAGE) madvise(p, used & ~(AC_HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    return p;
}

/* "18446744073709551616": n * 2^shift in decimal, even past 2^64. */
static void bytes_str(char *buf, size_t len, uint64_t n, int shift) {
    uint64_t hi = shift ? n >> (64 - shift) : 0, lo = n << shift;
    char tmp[48];
    int k = 0;
    do { /* divide the 128-bit (hi, lo) by 10 */
        uint64_t rem = hi % 10, q_hi = hi / 10, q_lo = 0;
        for (int b = 63; b >= 0; b--) {
            rem = (rem << 1) | ((lo >> b) & 1);
            q_lo = (q_lo << 1) | (rem >= 10);
            if (rem >= 10) rem -= 10;
        }
        tmp[k++] = (char)('0' + rem);
        hi = q_hi, lo = q_lo;
    } while (hi || lo);
    size_t i = 0;
    while (k > 0 && i + 1 < len) buf[i++] = tmp[--k];
    buf[i] = 0;
}

void ac_out_of_memory(uint64_t n, size_t elem_size) {
    int shift = 0;
    while (shift < 6 && ((size_t)1 << shift) < elem_size) shift++;
    char b[48];
    if (((size_t)1 << shift) == elem_size) bytes_str(b, sizeof b, n, shift);
    else snprintf(b, sizeof b, "%llu * %zu", (unsigned long long)n, elem_size);
    ac_error("not enough memory: you tried to allocate %s bytes", b);
}

size_t ac_size_mul(size_t n, size_t elem_size) {
    if (elem_size && n > SIZE_MAX / elem_size) ac_out_of_memory(n, elem_size);
    return n * elem_size;
}

/* n elements of elem bytes as a size_t, checked against this platform's
 * PTRDIFF_MAX before the cast (on 32-bit, 2^32 elements would wrap to a small
 * allocation written past); past it, the not-enough-memory error with the
 * exact byte count. */
size_t ac_elem_bytes(int64_t n, size_t elem_size) {
    if (n < 0 || (elem_size && (uint64_t)n > (uint64_t)PTRDIFF_MAX / elem_size)) ac_out_of_memory((uint64_t)n, elem_size);
    return (size_t)n * elem_size;
}

void *ac_malloc(size_t bytes) {
    void *p = ac_alloc_refused(bytes) ? NULL : malloc(bytes ? bytes : 1);
    if (!p) ac_out_of_memory(bytes, 1);
    return p;
}

void *ac_calloc(size_t n, size_t elem_size) {
    size_t bytes = ac_size_mul(n, elem_size);
    void *p = ac_alloc_refused(bytes) ? NULL : calloc(bytes ? bytes : 1, 1);
    if (!p) ac_out_of_memory(bytes, 1);
    return p;
}

void *ac_realloc(void *old, size_t bytes) {
    void *p = ac_alloc_refused(bytes) ? NULL : realloc(old, bytes ? bytes : 1);
    if (!p) ac_out_of_memory(bytes, 1); /* old is still valid, as realloc leaves it */
    return p;
}

void *ac_try_malloc(size_t bytes) { return ac_alloc_refused(bytes) ? NULL : malloc(bytes ? bytes : 1); }
void *ac_try_realloc(void *old, size_t bytes) { return ac_alloc_refused(bytes) ? NULL : realloc(old, bytes ? bytes : 1); }

char *ac_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(ac_malloc(n), s, n);
}

int64_t ac_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) zero = zero || shape[i] == 0;
    if (zero) return 0; /* (0, 2^62, 2^62) has no elements, whatever the rest multiplies to */
    for (int i = 0; i < ndim; i++) {
#if defined(__GNUC__) || defined(__clang__)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) /* no division: this runs for every op */
#else
        if (shape[i] < 0 || n > INT64_MAX / shape[i] || (n *= shape[i], false))
#endif
            ac_error("numel: integer multiplication overflow");
    }
    return n;
}
