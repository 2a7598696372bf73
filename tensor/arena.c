/* The arena: every tensor an op makes comes from here, and a mark/release pair
 * frees a whole step in one call. Blocks grow (never a fixed pool that runs
 * out) and are kept after a release, so a training loop runs in flat memory. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define AC_ALIGN 64
#define AC_FIRST_BLOCK ((size_t)1 << 20)
#define AC_MAX_GROWTH ((size_t)64 << 20)

typedef struct { char *mem; size_t cap; } Block;

/* One arena per thread: what a thread makes is its own, and it releases it
 * itself (ac_shutdown frees the calling thread's blocks). */
static _Thread_local Block *blocks;
static _Thread_local size_t nblocks, blocks_cap;
static _Thread_local size_t cur;   /* block being filled */
static _Thread_local size_t used;  /* bytes used in blocks[cur] */

/* Under AddressSanitizer every byte of a block that no live allocation owns is
 * poisoned (POISON, internal.h): the unused tail, the padding after each
 * allocation, everything a release hands back. A read past the end of a
 * tensor then fails loudly, as it would with malloc. */

static size_t round_up(size_t n) {
    if (n > SIZE_MAX - AC_ALIGN) ac_out_of_memory(n, 1);
    return (n + AC_ALIGN - 1) & ~(size_t)(AC_ALIGN - 1);
}

/* A new block, or an error that leaves the arena as it was. */
static char *new_block_memory(size_t cap) {
    size_t huge = (size_t)2 << 20;
    bool big = cap >= 2 * huge && cap % huge == 0;
    char *p = ac_alloc_refused(cap) ? NULL : aligned_alloc(big ? huge : AC_ALIGN, cap); /* C11; cap is a multiple of 64 */
    if (!p) ac_out_of_memory(cap, 1);
#if defined(MADV_HUGEPAGE) && !defined(AC_ASAN)
    if (big) madvise(p, cap, MADV_HUGEPAGE); /* fewer TLB misses on passes over big tensors; a hint, failure is harmless */
#endif
    POISON(p, cap);
    return p;
}

void *ac_arena_alloc(size_t bytes) {
    size_t want = bytes ? bytes : 1, n = round_up(want);
    if (nblocks > 0 && used + n <= blocks[cur].cap) {
        char *p = blocks[cur].mem + used;
        used += n;
        UNPOISON(p, want);
        return p;
    }
    /* Move on to the next block, reusing a released one when it is big enough.
     * Every allocation that can fail comes before any change to the arena. */
    size_t next = nblocks == 0 ? 0 : cur + 1;
    if (next < nblocks && blocks[next].cap < n) {
        size_t old = blocks[next].cap, cap = old <= SIZE_MAX / 2 && old * 2 >= n ? old * 2 : n;
        char *mem = new_block_memory(cap);
        free(blocks[next].mem);
        blocks[next].mem = mem;
        blocks[next].cap = cap;
    } else if (next >= nblocks) {
        if (nblocks == blocks_cap) {
            size_t nc = blocks_cap ? blocks_cap * 2 : 16;
            blocks = ac_realloc(blocks, ac_size_mul(nc, sizeof *blocks));
            blocks_cap = nc;
        }
        size_t cap = nblocks == 0 ? AC_FIRST_BLOCK : blocks[nblocks - 1].cap * 2;
        if (cap > AC_MAX_GROWTH) cap = AC_MAX_GROWTH;
        if (cap < n) cap = n;
        blocks[nblocks].mem = new_block_memory(cap);
        blocks[nblocks].cap = cap;
        nblocks++;
    }
    cur = next;
    used = n;
    UNPOISON(blocks[cur].mem, want);
    return blocks[cur].mem;
}

ac_mark ac_arena_mark(void) { return (ac_mark){cur, used}; }

void ac_arena_release(ac_mark m) {
    if (m.block > cur || (m.block == cur && m.used > used))
        ac_error("ac_arena_release: the mark (block %zu, %zu bytes) is newer than the arena "
                 "(block %zu, %zu bytes); was it released twice?", m.block, m.used, cur, used);
    if (nblocks > 0) { /* what the release hands back is poisoned again */
        POISON(blocks[m.block].mem + m.used, blocks[m.block].cap - m.used);
        for (size_t b = m.block + 1; b <= cur; b++) POISON(blocks[b].mem, blocks[b].cap);
    }
    cur = m.block;
    used = m.used;
}

size_t ac_arena_bytes_in_use(void) {
    size_t s = used;
    for (size_t i = 0; i < cur && i < nblocks; i++) s += blocks[i].cap;
    return s;
}

size_t ac_arena_bytes_reserved(void) {
    size_t s = 0;
    for (size_t i = 0; i < nblocks; i++) s += blocks[i].cap;
    return s;
}

void ac_shutdown(void) {
    ac_parallel_shutdown(); /* the pool's threads, and their arenas, first */
    ac_gbuf_shutdown();
    for (size_t i = 0; i < nblocks; i++) {
        UNPOISON(blocks[i].mem, blocks[i].cap);
        free(blocks[i].mem);
    }
    free(blocks);
    blocks = NULL;
    nblocks = blocks_cap = cur = used = 0;
}

/* The library's one growable array: in the arena, so an error halfway leaks
 * nothing; the old copy stays until the caller's release. */
void *ac_arena_grow(void *old, size_t n_used, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap && old) return old;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc = nc <= SIZE_MAX / 2 ? nc * 2 : need;
    void *p = ac_arena_alloc(ac_size_mul(nc, elem));
    if (old && n_used) memcpy(p, old, n_used * elem);
    *cap = nc;
    return p;
}
