/* The backward's gradient buffers. A gradient in flight lives only until the
 * node that receives it has run, so the arena, which frees only at a release,
 * would hold every one of them to the step's end (2.4 GB of the book's GPT).
 * During a sweep the data of each big tensor a backward makes comes from here
 * instead, and goes back as soon as nothing holds it:
 *   - a buffer is held once by each pending node whose summed gradient (its
 *     bgrad) is the buffer or a view of it (autograd.c's hold/drop);
 *   - when a node's backward returns, what it made that no node holds (its
 *     temporaries) and its own gradient, if no other node holds it, are free
 *     for the next request of the same size.
 * Headers and small tensors stay in the arena. Nothing a sweep makes here is
 * seen outside it: leaf gradients are copied into their own buffers and a
 * retained .grad is an arena copy. Buffers are kept from one sweep to the
 * next (a training loop reuses the same ones); those a whole sweep did not use
 * go back to the system at its end. Per thread, as the arena. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SMALL ((size_t)64 << 10)  /* below this the arena is cheaper than a lookup */

/* A buffer handed back is poisoned (POISON, internal.h) until it is handed out again. */

typedef struct {
    char *mem;
    size_t cap;     /* the size class: 64-byte multiple, or 2 MiB from 4 MiB up */
    int holds;      /* pending nodes whose bgrad is this buffer */
    bool live;      /* handed out in this sweep */
    uint32_t sweep; /* the last sweep that used it */
} Buf;

static _Thread_local Buf *bufs;
static _Thread_local size_t nbufs, bufs_cap;
static _Thread_local bool on;        /* a node's backward is running: ac_new's data may come from here */
static _Thread_local uint32_t sweep;
static _Thread_local size_t *check;  /* buffers to look at when the node is done: made by it, or let go */
static _Thread_local size_t ncheck, check_cap;
static _Thread_local size_t live_bytes, peak_bytes;

static size_t size_class(size_t bytes) {
    if (bytes >= 2 * AC_HUGE_PAGE) return bytes <= SIZE_MAX - AC_HUGE_PAGE ? (bytes + AC_HUGE_PAGE - 1) & ~(AC_HUGE_PAGE - 1) : 0;
    return (bytes + 63) & ~(size_t)63;
}

bool ac_gbuf_enabled = true;
size_t ac_gbuf_min_bytes = SMALL;
bool ac_gbuf_wants(size_t bytes) { return on && bytes >= ac_gbuf_min_bytes && ac_gbuf_enabled; }

bool ac_gbuf_suspend(void) {
    bool was = on;
    on = false;
    return was;
}
void ac_gbuf_resume(bool was) { on = was; }

/* Room for one more index in the list (the only step of a note that can fail). */
static void check_room(void) {
    if (ncheck < check_cap) return;
    size_t nc = check_cap ? 2 * check_cap : 64;
    check = ac_realloc(check, ac_size_mul(nc, sizeof *check));
    check_cap = nc;
}

static void note(size_t i) {
    check_room();
    check[ncheck++] = i;
}

/* Every allocation that can fail comes before any change, so an error leaves
 * the buffers as they were. */
void *ac_gbuf_alloc(size_t bytes) {
    size_t cap = size_class(bytes ? bytes : 1);
    if (!cap) ac_out_of_memory(bytes, 1);
    size_t i = 0;
    while (i < nbufs && (bufs[i].live || bufs[i].cap != cap)) i++;
    check_room();
    if (i == nbufs) {
        if (nbufs == bufs_cap) {
            size_t nc = bufs_cap ? 2 * bufs_cap : 32;
            bufs = ac_realloc(bufs, ac_size_mul(nc, sizeof *bufs));
            bufs_cap = nc;
        }
        char *mem = ac_block_alloc(cap, cap >= 2 * AC_HUGE_PAGE ? AC_HUGE_PAGE : 64, cap);
        bufs[nbufs++] = (Buf){mem, cap, 0, false, 0};
    }
    Buf *b = &bufs[i];
    b->live = true;
    b->holds = 0;
    b->sweep = sweep;
    live_bytes += cap;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
    check[ncheck++] = i;
    UNPOISON(b->mem, bytes);
    return b->mem;
}

static Buf *find(const Tensor *t) {
    if (!t || !nbufs) return NULL;
    for (size_t i = 0; i < nbufs; i++)
        if (bufs[i].live && bufs[i].mem == (const char *)t->data) return &bufs[i];
    return NULL;
}

void ac_gbuf_hold(const Tensor *t) {
    Buf *b = find(t);
    if (b) b->holds++;
}

void ac_gbuf_drop(const Tensor *t) {
    Buf *b = find(t);
    if (b && --b->holds == 0) note((size_t)(b - bufs));
}

void ac_gbuf_sweep_begin(void) {
    sweep++;
    for (size_t i = 0; i < nbufs; i++) /* a sweep an error ended may have left some out */
        if (bufs[i].live) {
            bufs[i].live = false;
            POISON(bufs[i].mem, bufs[i].cap);
        }
    ncheck = 0;
    live_bytes = peak_bytes = 0;
}

void ac_gbuf_node_begin(void) { on = true; }

/* The node has run: what nothing holds is free again. */
void ac_gbuf_node_end(void) {
    on = false;
    for (size_t k = 0; k < ncheck; k++) {
        Buf *b = &bufs[check[k]];
        if (b->live && b->holds == 0) {
            b->live = false;
            live_bytes -= b->cap;
            POISON(b->mem, b->cap);
        }
    }
    ncheck = 0;
}

/* After the sweep: buffers it did not use go back to the system. */
void ac_gbuf_sweep_end(void) {
    on = false;
    size_t kept = 0;
    for (size_t i = 0; i < nbufs; i++) {
        if (bufs[i].live || bufs[i].sweep == sweep) {
            bufs[kept++] = bufs[i];
        } else {
            UNPOISON(bufs[i].mem, bufs[i].cap);
            free(bufs[i].mem);
        }
    }
    nbufs = kept;
    ncheck = 0;
}

/* An error ended the sweep: no more buffers from here until the next one. */
void ac_gbuf_abort(void) { on = false; }

size_t ac_gbuf_bytes_reserved(void) {
    size_t s = 0;
    for (size_t i = 0; i < nbufs; i++) s += bufs[i].cap;
    return s;
}

size_t ac_gbuf_peak_bytes(void) { return peak_bytes; }

void ac_gbuf_shutdown(void) {
    for (size_t i = 0; i < nbufs; i++) {
        UNPOISON(bufs[i].mem, bufs[i].cap);
        free(bufs[i].mem);
    }
    free(bufs);
    free(check);
    bufs = NULL;
    check = NULL;
    nbufs = bufs_cap = ncheck = check_cap = 0;
    live_bytes = peak_bytes = 0;
    on = false;
}
