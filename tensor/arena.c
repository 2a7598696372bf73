/* The arena: every tensor an op makes comes from here, and a mark/release pair
 * frees a whole step in one call. Blocks grow (never a fixed pool that runs
 * out) and are kept after a release, so a training loop runs in flat memory. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
    bool big = cap >= 2 * AC_HUGE_PAGE && cap % AC_HUGE_PAGE == 0;
    char *p = ac_block_alloc(cap, big ? AC_HUGE_PAGE : AC_ALIGN, cap); /* cap is a multiple of 64 */
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

/* ---- use after release (internal.h) ----------------------------------------
 * Every arena header this thread made that no release has freed yet, in
 * order (the log itself malloc'd): a mark records how many there are, its
 * release stamps the rest dead. One pointer a tensor when made, one store at
 * the release. */
static _Thread_local TensorImpl **made;
static _Thread_local size_t nmade, made_cap;
static _Thread_local uint64_t generation = 1; /* 1 + this thread's releases that freed tensors */
/* Debug mode: headers malloc'd, and the last AC_QUARANTINE released kept dead
 * (a ring, the oldest freed) so that a stale pointer aliases no new tensor. */
static _Thread_local TensorImpl **quarantine;
static _Thread_local size_t q_first, q_len;
static _Atomic int debug_mode = -1; /* -1: the environment not read yet */

void ac_debug_tensors(int mode) {
    if (mode < 0) {
        const char *e = getenv("AC_DEBUG");
        mode = e && strcmp(e, "1") == 0;
#ifdef AC_ASAN
        mode = 1;
#endif
    }
    atomic_store_explicit(&debug_mode, mode, memory_order_relaxed);
}

bool ac_debug_tensors_on(void) {
    int d = atomic_load_explicit(&debug_mode, memory_order_relaxed);
    if (d < 0) {
        ac_debug_tensors(-1);
        d = atomic_load_explicit(&debug_mode, memory_order_relaxed);
    }
    return d == 1;
}

uint64_t ac_arena_generation(void) { return generation; }
size_t ac_quarantined(void) { return q_len; }

TensorImpl *ac_new_header(void) {
    if (nmade == made_cap) { /* before the header: a failure leaves nothing behind */
        size_t nc = made_cap ? made_cap * 2 : 1024;
        TensorImpl **p = nc <= SIZE_MAX / sizeof *made ? realloc(made, nc * sizeof *made) : NULL;
        if (!p) ac_out_of_memory(nc, sizeof *made);
        made = p;
        made_cap = nc;
    }
    bool heap = ac_debug_tensors_on();
    TensorImpl *ti = heap ? malloc(sizeof *ti) : ac_arena_alloc(sizeof *ti);
    if (!ti) ac_out_of_memory(sizeof *ti, 1);
    memset(ti, 0, sizeof *ti);
    ti->heap = heap;
    ti->stamp = AC_STAMP_LIVE;
    ti->made = generation;
    made[nmade++] = ti;
    return ti;
}

static void quarantine_put(TensorImpl *ti) {
    if (!quarantine && !(quarantine = malloc(AC_QUARANTINE * sizeof *quarantine))) {
        free(ti); /* no room to keep it: freed as it would be without the debug mode */
        return;
    }
    if (q_len == AC_QUARANTINE) { /* the oldest goes */
        free(quarantine[q_first]);
        quarantine[q_first] = ti;
        q_first = (q_first + 1) % AC_QUARANTINE;
    } else {
        quarantine[(q_first + q_len++) % AC_QUARANTINE] = ti;
    }
}

static void free_headers(void) {
    for (size_t i = 0; i < nmade; i++)
        if (made[i]->heap) free(made[i]);
    free(made);
    made = NULL;
    nmade = made_cap = 0;
    for (size_t i = 0; i < q_len; i++) free(quarantine[(q_first + i) % AC_QUARANTINE]);
    free(quarantine);
    quarantine = NULL;
    q_first = q_len = 0;
}

/* A dead stamp whose numbers fit (made no later than released, released before
 * now) was written by a release; anything else is not a tensor header any more. */
AC_NO_ASAN void ac_not_live(const Tensor *t, const char *op) {
    const TensorImpl *ti = ac_impl(t);
    if (ti->stamp == AC_STAMP_DEAD && ti->made <= ti->released && ti->released < generation)
        ac_error("%s: a tensor released by ac_arena_release was used: it was made in arena generation %llu and "
                 "released by release %llu (the current generation is %llu); keep it with ac_persist, or use "
                 "it before the release", op, (unsigned long long)ti->made, (unsigned long long)ti->released,
                 (unsigned long long)generation);
    ac_error("%s: not a live tensor (freed by ac_arena_release and its memory reused, or never a tensor)%s", op,
             ac_debug_tensors_on() ? "" : "; AC_DEBUG=1 catches more of these");
}

ac_mark ac_arena_mark(void) { return (ac_mark){cur, used, nmade}; }

void ac_arena_release(ac_mark m) {
    if (m.block > cur || (m.block == cur && m.used > used) || m.tensors > nmade)
        ac_error("ac_arena_release: the mark (block %zu, %zu bytes, %zu tensors) is newer than the arena "
                 "(block %zu, %zu bytes, %zu tensors); was it released twice?", m.block, m.used, m.tensors, cur, used,
                 nmade);
    /* the headers made since the mark, stamped dead before their memory is poisoned */
    for (size_t i = m.tensors; i < nmade; i++) {
        TensorImpl *ti = made[i];
        ti->stamp = AC_STAMP_DEAD;
        ti->released = generation;
        if (ti->heap) quarantine_put(ti);
    }
    if (m.tensors < nmade) { /* a release that freed no tensor (an op's scratch) starts no generation */
        nmade = m.tensors;
        generation++;
    }
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
    free_headers();
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
