/* Threads inside ops: a small persistent pool on POSIX threads.
 *
 * ac_parallel_for(n, grain, fn, ctx) cuts [0, n) into pieces of fixed
 * boundaries (at least `grain` items each, up to PIECES_PER_THREAD per
 * thread) and returns when all are done. The calling thread takes pieces
 * itself, one after another, from an atomic counter; the workers take them
 * too, as they wake. So the caller never waits for a worker that the system
 * has not scheduled: it waits only for pieces a worker has started. fn(ctx,
 * begin, end, slot) learns the slot of the thread running it (0 the caller,
 * below ac_parallel_chunks(n, grain)), which indexes per-thread scratch. An
 * op splits only over output elements, never across one sum, and computes
 * each element the same way whatever piece and thread it falls to: no result
 * depends on the number of threads or on who ran what. Tasks must not raise
 * errors or allocate from the arena of the calling thread (they get scratch
 * from their caller); a parallel_for inside a task runs serially.
 *
 * Busy machines: a worker polls for a little while after a job (a step's
 * many small ops find it awake), then sleeps on a condition variable. Before
 * a job the caller looks at how many threads the system is running (Linux's
 * /proc/loadavg, at most every 20 ms): threads beyond the free cores would
 * only wait for each other, so a job takes no more threads than the cores
 * left free, down to the caller alone, and workers do not poll while the
 * machine is full.
 *
 * The thread count is PyTorch's: torch_set_num_threads(n), and by default the
 * cores this process may use, or OMP_NUM_THREADS when it is set. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAX_THREADS 256
#define PIECES_PER_THREAD 2 /* a worker late to a job leaves the caller half its share to take; 4 measured no better */
#define SPIN_NS 200000      /* how long a worker polls after a job before it sleeps (200 us; 50 us lost train-tiny's gain) */

/* The job is published as a sequence lock: the dispatcher makes `generation`
 * odd, writes the job (relaxed atomics), sets `claim` to the job's tag, and
 * makes `generation` even (release). A worker reads an even generation, the
 * job, then the generation again, and uses the job only if it did not change.
 * A piece is claimed by a compare-and-swap on `claim` = (tag << 32 | next
 * piece): a worker holding a job that is over fails it (the tag moved on), so
 * it never runs a piece of a job twice or with another job's description. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t work, finished;
    int n_workers;                  /* started (only the dispatcher starts them) */
    pthread_t threads[MAX_THREADS];
    uint64_t born[MAX_THREADS];     /* the generation a worker was started in: jobs before it are not its own */
    _Atomic bool quit;              /* ac_parallel_shutdown: workers leave */
    _Atomic uint64_t generation;    /* two per parallel_for */
    _Atomic uint64_t claim;         /* the job's tag << 32 | the next piece to take */
    _Atomic int done;               /* pieces finished */
    _Atomic int awake;              /* workers polling or working (not asleep) */
    _Atomic int64_t n, piece;       /* the job: [0, n) in pieces of `piece` */
    _Atomic int n_pieces, slots;
    _Atomic(ac_task) fn;
    _Atomic(void *) ctx;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .finished = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define RELAXED memory_order_relaxed
static _Atomic int num_threads; /* 0: not decided yet */
_Atomic int ac_pool_test_delay_us;
_Atomic int ac_pool_test_free_cores = -1; /* tests: pretend this many cores are free (-1: look) */
static pthread_mutex_t dispatch = PTHREAD_MUTEX_INITIALIZER; /* one parallel_for at a time */
static _Thread_local bool in_task;

static int cpu_count(void) { /* the cores this process may use (OMP_NUM_THREADS aside) */
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 1) return CPU_COUNT(&set);
#endif
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c >= 1 ? (int)c : 1;
}

static int default_threads(void) {
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp && *omp) {
        long v = strtol(omp, NULL, 10);
        if (v >= 1) return v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
    int c = cpu_count();
    return c > MAX_THREADS ? MAX_THREADS : c;
}

int torch_get_num_threads(void) {
    int t = atomic_load_explicit(&num_threads, RELAXED);
    if (t == 0) {
        int d = default_threads();
        atomic_compare_exchange_strong(&num_threads, &t, d); /* two threads asking first agree */
        t = atomic_load_explicit(&num_threads, RELAXED);
    }
    return t;
}

void torch_set_num_threads(int n) {
    if (n < 1) ac_error("set_num_threads: Expected number of threads to be positive, but got %d", n);
    atomic_store_explicit(&num_threads, n > MAX_THREADS ? MAX_THREADS : n, RELAXED);
}

/* ---- how many cores are free ----------------------------------------------------------
 * /proc/loadavg's fourth field is "running/total": the threads runnable right
 * now, this caller and our awake workers among them; the rest are other work.
 * One reading sees passing kernel threads too, so the count taken is the
 * smallest of the last 4 readings, 10 ms apart (a reading costs about 10 us):
 * a busy process shows in all of them, a blip in one. The cores the others
 * leave free (of those this process may use) bound a job's threads, so a
 * thread count above the cores (OMP_NUM_THREADS=3 on two) runs as many as
 * there are. Tests that want more set AC_POOL_FREE_CORES (or
 * ac_pool_test_free_cores in-process).
 * Elsewhere than Linux: all free. */
#define LOAD_READINGS 4
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static void read_env(void) { /* AC_POOL_FREE_CORES=N: as ac_pool_test_free_cores, for tests of other processes */
    const char *e = getenv("AC_POOL_FREE_CORES");
    if (e && *e) atomic_store(&ac_pool_test_free_cores, atoi(e));
}

static int free_cores(void) {
    pthread_once(&env_once, read_env);
    int forced = atomic_load_explicit(&ac_pool_test_free_cores, RELAXED);
    if (forced >= 0) return forced;
#if defined(__linux__)
    static _Atomic int64_t last_ns;
    static _Atomic int last_free = MAX_THREADS, others[LOAD_READINGS], next;
    int64_t t = now_ns(), last = atomic_load_explicit(&last_ns, RELAXED);
    if (t - last < 10000000 || !atomic_compare_exchange_strong(&last_ns, &last, t)) /* one thread reads */
        return atomic_load_explicit(&last_free, RELAXED);
    FILE *f = fopen("/proc/loadavg", "r");
    int running = 0, total = 0;
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total) == 5) {
        int o = running - 1 - atomic_load_explicit(&pool.awake, RELAXED);
        atomic_store_explicit(&others[atomic_fetch_add_explicit(&next, 1, RELAXED) % LOAD_READINGS], o > 0 ? o : 0, RELAXED);
        int least = MAX_THREADS;
        for (int k = 0; k < LOAD_READINGS; k++) {
            int v = atomic_load_explicit(&others[k], RELAXED);
            if (v < least) least = v;
        }
        int result = cpu_count() - 1 - least;
        atomic_store_explicit(&last_free, result > 0 ? result : 0, RELAXED);
    }
    if (f) fclose(f);
    return atomic_load_explicit(&last_free, RELAXED);
#else
    return MAX_THREADS;
#endif
}

/* The threads (slots) for n items in pieces of at least grain, at most max_slots. */
static int threads_for(int64_t n, int64_t grain, int max_slots) {
    int t = torch_get_num_threads();
    if (t > max_slots) t = max_slots;
    if (grain < 1) grain = 1;
    int64_t want = (n + grain - 1) / grain;
    if (want < t) t = (int)want;
    return t < 1 ? 1 : t;
}

/* How many slots ac_parallel_for(n, grain, ...) may use (1 when it runs serially). */
int ac_parallel_chunks(int64_t n, int64_t grain) {
    if (n <= 0 || in_task) return 1;
    return threads_for(n, grain, MAX_THREADS);
}

/* A job as one thread read it: inside the sequence lock, so all of one job. */
typedef struct { int64_t n, piece; int n_pieces, slots; ac_task fn; void *ctx; bool quit; } Job;

static Job read_job(void) {
    return (Job){atomic_load_explicit(&pool.n, RELAXED),     atomic_load_explicit(&pool.piece, RELAXED),
                 atomic_load_explicit(&pool.n_pieces, RELAXED), atomic_load_explicit(&pool.slots, RELAXED),
                 atomic_load_explicit(&pool.fn, RELAXED),    atomic_load_explicit(&pool.ctx, RELAXED),
                 atomic_load_explicit(&pool.quit, RELAXED)};
}

/* Takes and runs pieces of job `tag` (described by j) until none is left; none
 * at all if that job is over, since then the tag has moved on or every piece
 * is taken: j is never used for another job's pieces. */
static void run_pieces(uint32_t tag, int slot, const Job *j) {
    int64_t n = j->n, piece = j->piece;
    int n_pieces = j->n_pieces;
    ac_task fn = j->fn;
    void *ctx = j->ctx;
    for (;;) {
        uint64_t c = atomic_load_explicit(&pool.claim, memory_order_acquire);
        if ((uint32_t)(c >> 32) != tag || (int)(uint32_t)c >= n_pieces) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        int64_t b = (int64_t)(uint32_t)c * piece, e = b + piece < n ? b + piece : n;
        fn(ctx, b, e, slot);
        if (atomic_fetch_add_explicit(&pool.done, 1, memory_order_acq_rel) + 1 == n_pieces && slot != 0) {
            pthread_mutex_lock(&pool.lock); /* the last piece, by a worker: the caller may be asleep */
            pthread_cond_signal(&pool.finished);
            pthread_mutex_unlock(&pool.lock);
        }
    }
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg; /* slot id (1 ..) in each job it takes part in */
    in_task = true;
    ac_fail_alloc_at(0); /* fault injection (AC_FAIL_ALLOC) is for the threads that call the library */
    uint64_t seen = pool.born[id - 1]; /* written before this thread was created */
    for (;;) {
        /* poll for a while, unless the machine has no core to spare, then sleep */
        if (atomic_load_explicit(&pool.generation, memory_order_acquire) == seen && free_cores() > 0) {
            int64_t until = now_ns() + SPIN_NS;
            for (int i = 0; atomic_load_explicit(&pool.generation, memory_order_acquire) == seen; i++) {
                cpu_relax();
                if ((i & 63) == 63 && now_ns() > until) break;
            }
        }
        if (atomic_load_explicit(&pool.generation, memory_order_acquire) == seen) {
            pthread_mutex_lock(&pool.lock);
            atomic_fetch_sub_explicit(&pool.awake, 1, RELAXED);
            while (atomic_load_explicit(&pool.generation, memory_order_acquire) == seen)
                pthread_cond_wait(&pool.work, &pool.lock);
            atomic_fetch_add_explicit(&pool.awake, 1, RELAXED);
            pthread_mutex_unlock(&pool.lock);
        }
        uint64_t g = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (g & 1) { /* being written */
            cpu_relax();
            continue;
        }
        if (atomic_load_explicit(&ac_pool_test_delay_us, RELAXED)) /* tests: a worker late here */
            usleep((useconds_t)atomic_load_explicit(&ac_pool_test_delay_us, RELAXED));
        Job j = read_job();
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&pool.generation, RELAXED) != g) continue; /* changed while read */
        seen = g;
        if (j.quit) break;
        if (id < j.slots) run_pieces((uint32_t)(g >> 1), id, &j); /* the job cannot end before its claimed pieces */
    }
    atomic_fetch_sub_explicit(&pool.awake, 1, RELAXED);
    ac_shutdown(); /* this worker's arena */
    return NULL;
}

static void publish_begin(void) {
    atomic_fetch_add_explicit(&pool.generation, 1, RELAXED); /* odd: writing */
    atomic_thread_fence(memory_order_release);
}

static void publish_end(void) { /* even: published; a worker between its last poll and its wait must see it */
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
}

/* Stops the workers (after any parallel_for under way) and frees what they
 * hold; the next parallel_for starts them again. ac_shutdown calls it. */
void ac_parallel_shutdown(void) {
    if (in_task) return;
    pthread_mutex_lock(&dispatch);
    if (pool.n_workers > 0) {
        publish_begin();
        atomic_store_explicit(&pool.quit, true, RELAXED);
        publish_end();
        for (int i = 0; i < pool.n_workers; i++) pthread_join(pool.threads[i], NULL);
        pool.n_workers = 0;
        atomic_store_explicit(&pool.quit, false, RELAXED);
    }
    pthread_mutex_unlock(&dispatch);
}

/* A forked child has none of the parent's workers: it starts afresh. */
static void forked_child(void) {
    pool.n_workers = 0;
    atomic_store(&pool.quit, false);
    atomic_store(&pool.awake, 0);
    if (atomic_load(&pool.generation) & 1) atomic_fetch_add(&pool.generation, 1); /* forked mid-write */
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.finished, NULL);
    pthread_mutex_init(&dispatch, NULL);
    in_task = false;
}

void ac_parallel_for(int64_t n, int64_t grain, ac_task fn, void *ctx) { ac_parallel_for_max(n, grain, 1 << 30, fn, ctx); }

void ac_parallel_for_max(int64_t n, int64_t grain, int max_slots, ac_task fn, void *ctx) {
    if (n <= 0) return;
    /* at most max_slots: the caller made scratch for that many (the count may have changed since) */
    int t = threads_for(n, grain, max_slots);
    if (t > 1 && !in_task) {
        int spare = free_cores();
        if (t > spare + 1) t = spare + 1; /* threads past the free cores would wait for each other */
    }
    if (t <= 1 || in_task || pthread_mutex_trylock(&dispatch) != 0) { /* serial: small, nested, busy or full */
        fn(ctx, 0, n, 0);
        return;
    }
    static _Atomic bool atfork;
    if (!atomic_load_explicit(&atfork, RELAXED)) atomic_store(&atfork, pthread_atfork(NULL, NULL, forked_child) == 0);
    while (pool.n_workers < t - 1) { /* start what is missing: it waits for the next generation, not the last */
        pool.born[pool.n_workers] = atomic_load_explicit(&pool.generation, memory_order_acquire);
        atomic_fetch_add_explicit(&pool.awake, 1, RELAXED);
        if (pthread_create(&pool.threads[pool.n_workers], NULL, worker, (void *)(intptr_t)(pool.n_workers + 1)) != 0) {
            atomic_fetch_sub_explicit(&pool.awake, 1, RELAXED);
            break;
        }
        pool.n_workers++;
    }
    if (t - 1 > pool.n_workers) t = pool.n_workers + 1; /* a thread could not start: fewer slots */
    if (grain < 1) grain = 1;
    int64_t want = (n + grain - 1) / grain, pieces = (int64_t)t * PIECES_PER_THREAD;
    if (pieces > want) pieces = want;
    int64_t piece = (n + pieces - 1) / pieces;
    int n_pieces = (int)((n + piece - 1) / piece);
    publish_begin();
    uint32_t tag = (uint32_t)(atomic_load_explicit(&pool.generation, RELAXED) + 1) >> 1; /* the even generation's */
    atomic_store_explicit(&pool.n, n, RELAXED);
    atomic_store_explicit(&pool.piece, piece, RELAXED);
    atomic_store_explicit(&pool.n_pieces, n_pieces, RELAXED);
    atomic_store_explicit(&pool.slots, t, RELAXED);
    atomic_store_explicit(&pool.fn, fn, RELAXED);
    atomic_store_explicit(&pool.ctx, ctx, RELAXED);
    atomic_store_explicit(&pool.done, 0, RELAXED);
    atomic_store_explicit(&pool.claim, (uint64_t)tag << 32, memory_order_release);
    publish_end();
    in_task = true;
    Job mine = {n, piece, n_pieces, t, fn, ctx, false};
    run_pieces(tag, 0, &mine);
    in_task = false;
    /* what is left are pieces workers are running: poll briefly, then sleep until the last is done */
    int64_t until = now_ns() + SPIN_NS;
    for (int i = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < n_pieces; i++) {
        cpu_relax();
        if ((i & 63) == 63 && now_ns() > until) {
            pthread_mutex_lock(&pool.lock); /* the worker that ends the last piece signals under this lock */
            while (atomic_load_explicit(&pool.done, memory_order_acquire) < n_pieces)
                pthread_cond_wait(&pool.finished, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
            break;
        }
    }
    pthread_mutex_unlock(&dispatch);
}
