/* The arena: every tensor an op makes comes from here, and a mark/release pair
 * frees a whole step in one call. Blocks grow (never a fixed pool that runs
 * out) and are kept after a release, so a training loop runs in flat memory. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define AC_ALIGN 64
#define AC_FIRST_BLOCK ((size_t)1 << 20)
#define AC_MAX_GROWTH ((size_t)64 << 20)

typedef struct { char *mem; size_t cap; } Block;

static Block *blocks;
static size_t nblocks, blocks_cap;
static size_t cur;   /* block being filled */
static size_t used;  /* bytes used in blocks[cur] */

static size_t round_up(size_t n) { return (n + AC_ALIGN - 1) & ~(size_t)(AC_ALIGN - 1); }

static char *new_block_memory(size_t cap) {
    return aligned_alloc(AC_ALIGN, round_up(cap)); /* C11; cap is a multiple of 64 */
}

void *ac_arena_alloc(size_t bytes) {
    size_t n = round_up(bytes ? bytes : 1);
    if (nblocks > 0 && used + n <= blocks[cur].cap) {
        void *p = blocks[cur].mem + used;
        used += n;
        return p;
    }
    /* Move on to the next block, reusing a released one when it is big enough. */
    size_t next = nblocks == 0 ? 0 : cur + 1;
    if (next < nblocks && blocks[next].cap < n) {
        free(blocks[next].mem);
        size_t cap = n > blocks[next].cap * 2 ? n : blocks[next].cap * 2;
        blocks[next].mem = new_block_memory(cap);
        blocks[next].cap = cap;
        if (!blocks[next].mem) ac_error("arena: out of memory allocating %zu bytes", cap);
    } else if (next >= nblocks) {
        if (nblocks == blocks_cap) {
            size_t nc = blocks_cap ? blocks_cap * 2 : 16;
            Block *nb = realloc(blocks, nc * sizeof *nb);
            if (!nb) ac_error("arena: out of memory growing the block list");
            blocks = nb;
            blocks_cap = nc;
        }
        size_t cap = nblocks == 0 ? AC_FIRST_BLOCK : blocks[nblocks - 1].cap * 2;
        if (cap > AC_MAX_GROWTH) cap = AC_MAX_GROWTH;
        if (cap < n) cap = n;
        blocks[nblocks].mem = new_block_memory(cap);
        blocks[nblocks].cap = cap;
        if (!blocks[nblocks].mem) ac_error("arena: out of memory allocating %zu bytes", cap);
        nblocks++;
    }
    cur = next;
    used = n;
    return blocks[cur].mem;
}

ac_mark ac_arena_mark(void) { return (ac_mark){cur, used}; }

void ac_arena_release(ac_mark m) {
    if (m.block > cur || (m.block == cur && m.used > used))
        ac_error("ac_arena_release: the mark (block %zu, %zu bytes) is newer than the arena "
                 "(block %zu, %zu bytes); was it released twice?", m.block, m.used, cur, used);
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
    for (size_t i = 0; i < nblocks; i++) free(blocks[i].mem);
    free(blocks);
    blocks = NULL;
    nblocks = blocks_cap = cur = used = 0;
}
