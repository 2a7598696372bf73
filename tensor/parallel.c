/* Threads inside ops: a small persistent pool on POSIX threads.
 *
 * ac_parallel_for(n, grain, fn, ctx) splits [0, n) into contiguous chunks, one
 * per thread (the caller runs the first), and returns when all are done;
 * fn(ctx, begin, end, chunk) learns its chunk's number, below
 * ac_parallel_chunks(n, grain), so that its scratch can come from the caller. An op
 * splits only over output elements, never across one sum, and computes each
 * element the same way whatever chunk it falls in: no result depends on the
 * number of threads. Tasks must not raise errors or allocate from the arena of
 * the calling thread (they get scratch from their caller); a parallel_for
 * inside a task runs serially.
 *
 * The thread count is PyTorch's: torch_set_num_threads(n), and by default the
 * cores this process may use, or OMP_NUM_THREADS when it is set. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include "internal.h"

#define MAX_THREADS 256
#define SPIN 20000 /* polls before a worker sleeps: a step's many small ops find it awake */

/* The job is published as a sequence lock: the dispatching thread makes
 * `generation` odd (writing), writes the job, makes it even again (release).
 * A worker reads an even generation, the job, then the generation again, and
 * takes the job only if it did not change. A worker with no chunk in a job is
 * not waited for, so it may wake up while the next job is being written: the
 * check keeps it from running a chunk of a half-written job, or one chunk
 * twice (which made a result depend, rarely, on the thread count). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    int n_workers;               /* started (only the dispatcher starts them) */
    pthread_t threads[MAX_THREADS];
    uint64_t born[MAX_THREADS];  /* the generation a worker was started in: jobs before it are not its own */
    bool quit;                   /* ac_parallel_shutdown: workers leave */
    _Atomic uint64_t generation; /* one per parallel_for */
    _Atomic int pending;         /* chunks not finished */
    int n_chunks;
    int64_t n, chunk;
    ac_task fn;
    void *ctx;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int num_threads; /* 0: not decided yet */
_Atomic int ac_pool_test_delay_us;
static pthread_mutex_t dispatch = PTHREAD_MUTEX_INITIALIZER; /* one parallel_for at a time */
static _Thread_local bool in_task;

static int default_threads(void) {
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp && *omp) {
        long v = strtol(omp, NULL, 10);
        if (v >= 1) return v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c >= 1) return c > MAX_THREADS ? MAX_THREADS : c;
    }
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c >= 1 ? (c > MAX_THREADS ? MAX_THREADS : (int)c) : 1;
}

int torch_get_num_threads(void) {
    if (num_threads == 0) num_threads = default_threads();
    return num_threads;
}

void torch_set_num_threads(int n) {
    if (n < 1) ac_error("set_num_threads: Expected number of threads to be positive, but got %d", n);
    num_threads = n > MAX_THREADS ? MAX_THREADS : n;
}

static void run_chunk(int c) {
    int64_t b = (int64_t)c * pool.chunk, e = b + pool.chunk < pool.n ? b + pool.chunk : pool.n;
    if (b < e) pool.fn(pool.ctx, b, e, c);
}

/* The threads for n items in chunks of at least grain (at most max_chunks),
 * and the chunk size: n split into ceil(n / chunk) chunks, at most t. */
static int threads_for(int64_t n, int64_t grain, int max_chunks, int64_t *chunk) {
    int t = torch_get_num_threads();
    if (t > max_chunks) t = max_chunks;
    if (grain < 1) grain = 1;
    int64_t want = (n + grain - 1) / grain;
    if (want < t) t = (int)want;
    if (t < 1) t = 1;
    *chunk = (n + t - 1) / t;
    return t;
}

/* How many chunks ac_parallel_for(n, grain, ...) will use (1 when it runs serially). */
int ac_parallel_chunks(int64_t n, int64_t grain) {
    if (n <= 0 || in_task) return 1;
    int64_t chunk;
    if (threads_for(n, grain, MAX_THREADS, &chunk) <= 1) return 1;
    return (int)((n + chunk - 1) / chunk);
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg; /* runs chunk id (1 ..) of each generation it takes part in */
    in_task = true;
    ac_fail_alloc_at(0); /* fault injection (AC_FAIL_ALLOC) is for the threads that call the library */
    uint64_t seen = pool.born[id - 1]; /* written before this thread was created */
    for (;;) {
        for (int i = 0; i < SPIN && atomic_load_explicit(&pool.generation, memory_order_acquire) == seen; i++)
            cpu_relax();
        if (atomic_load_explicit(&pool.generation, memory_order_acquire) == seen) {
            pthread_mutex_lock(&pool.lock);
            while (atomic_load_explicit(&pool.generation, memory_order_acquire) == seen)
                pthread_cond_wait(&pool.work, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        uint64_t g = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (g & 1) { /* being written */
            cpu_relax();
            continue;
        }
        if (ac_pool_test_delay_us) usleep((useconds_t)ac_pool_test_delay_us); /* tests: a worker late here */
        bool quit = pool.quit;
        int n_chunks = pool.n_chunks;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&pool.generation, memory_order_relaxed) != g) continue; /* changed while read */
        seen = g;
        if (quit) break;
        if (id >= n_chunks) continue;
        run_chunk(id); /* the job cannot change until this chunk is counted */
        atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_release);
    }
    ac_shutdown(); /* this worker's arena */
    return NULL;
}

/* Stops the workers (after any parallel_for under way) and frees what they
 * hold; the next parallel_for starts them again. ac_shutdown calls it. */
void ac_parallel_shutdown(void) {
    if (in_task) return;
    pthread_mutex_lock(&dispatch);
    if (pool.n_workers > 0) {
        pthread_mutex_lock(&pool.lock);
        atomic_fetch_add_explicit(&pool.generation, 1, memory_order_relaxed); /* odd: writing */
        atomic_thread_fence(memory_order_release);
        pool.quit = true;
        atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
        pthread_cond_broadcast(&pool.work);
        pthread_mutex_unlock(&pool.lock);
        for (int i = 0; i < pool.n_workers; i++) pthread_join(pool.threads[i], NULL);
        pool.n_workers = 0;
        pool.quit = false;
    }
    pthread_mutex_unlock(&dispatch);
}

/* A forked child has none of the parent's workers: it starts afresh. */
static void forked_child(void) {
    pool.n_workers = 0;
    pool.quit = false;
    atomic_store(&pool.pending, 0);
    if (atomic_load(&pool.generation) & 1) atomic_fetch_add(&pool.generation, 1); /* forked mid-write */
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_mutex_init(&dispatch, NULL);
    in_task = false;
}

void ac_parallel_for(int64_t n, int64_t grain, ac_task fn, void *ctx) { ac_parallel_for_max(n, grain, 1 << 30, fn, ctx); }

void ac_parallel_for_max(int64_t n, int64_t grain, int max_chunks, ac_task fn, void *ctx) {
    if (n <= 0) return;
    int64_t chunk; /* at most max_chunks: the caller made scratch for that many (the count may have changed since) */
    int t = threads_for(n, grain, max_chunks, &chunk);
    if (t <= 1 || in_task || pthread_mutex_trylock(&dispatch) != 0) { /* serial: small, nested, or busy */
        fn(ctx, 0, n, 0);
        return;
    }
    static bool atfork;
    if (!atfork) atfork = pthread_atfork(NULL, NULL, forked_child) == 0;
    while (pool.n_workers < t - 1) { /* start what is missing: it waits for the next generation, not the last */
        pool.born[pool.n_workers] = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (pthread_create(&pool.threads[pool.n_workers], NULL, worker, (void *)(intptr_t)(pool.n_workers + 1)) != 0)
            break;
        pool.n_workers++;
    }
    if (t - 1 > pool.n_workers) { /* a thread could not start; the chunks were announced: run serially */
        pthread_mutex_unlock(&dispatch);
        fn(ctx, 0, n, 0);
        return;
    }
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_relaxed); /* odd: writing */
    atomic_thread_fence(memory_order_release);
    pool.n = n;
    pool.chunk = chunk;
    pool.n_chunks = (int)((n + pool.chunk - 1) / pool.chunk);
    pool.fn = fn;
    pool.ctx = ctx;
    atomic_store_explicit(&pool.pending, pool.n_chunks - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool.lock); /* a worker between its last poll and its wait must not miss this */
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release); /* even: published */
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    in_task = true;
    run_chunk(0);
    in_task = false;
    for (long i = 0; atomic_load_explicit(&pool.pending, memory_order_acquire) > 0; i++)
        if (i < SPIN) cpu_relax();
        else sched_yield();
    pthread_mutex_unlock(&dispatch);
}
