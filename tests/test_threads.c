/* Threads: two models trained on two threads at once each give exactly the
 * losses they give alone (arena, grad mode, errors per thread; each thread
 * with its own generator); the default generator is safe to share. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "tests.h"

typedef struct {
    const CharText *ct;
    uint64_t seed;
    int steps;
    double losses[40];
    bool grad_mode_seen_off;
} Run;

static void *train(void *arg) {
    Run *r = arg;
    torch_Generator g;
    ac_set_thread_generator(&g);
    torch_manual_seed(r->seed); /* seeds g */
    nn_ToyLM *m = nn_ToyLM_new(r->ct->vocab_size, 16, 32, 4);
    optim_Optimizer *opt = optim_Adam(nn_named_parameters(&m->module), 3e-3, 0.9, 0.999, 1e-8, 0.0, false);
    for (int s = 0; s < r->steps; s++) {
        ac_mark mk = ac_arena_mark();
        Tensor *x, *y;
        nn_ToyLM_get_batch(r->ct, 8, 16, &x, &y);
        Tensor *loss = torch_cross_entropy(torch_view(nn_ToyLM_forward(m, x), SHAPE(-1, r->ct->vocab_size)),
                                           torch_view(y, SHAPE(-1)), -100);
        optim_zero_grad(opt);
        torch_backward(loss, NULL);
        optim_step(opt);
        r->losses[s] = torch_item(loss);
        r->grad_mode_seen_off |= !torch_is_grad_enabled();
        ac_arena_release(mk);
    }
    optim_free(opt);
    nn_free(&m->module);
    ac_set_thread_generator(NULL);
    ac_shutdown(); /* this thread's arena */
    return NULL;
}

START_TEST(test_two_models_on_two_threads) {
    char *text = read_text(shared_path("data/the-verdict.txt"));
    CharText ct;
    char err[128];
    ck_assert(chartext_init(&ct, text, strlen(text), err, sizeof err));
    free(text);
    Run alone[2] = {{&ct, 123, 20, {0}, false}, {&ct, 7, 20, {0}, false}};
    train(&alone[0]);
    train(&alone[1]);
    ck_assert(alone[0].losses[0] != alone[1].losses[0]);
    for (int round = 0; round < 3; round++) {
        Run both[2] = {{&ct, 123, 20, {0}, false}, {&ct, 7, 20, {0}, false}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, train, &both[i]), 0);
        /* meanwhile this thread's grad mode is off: the others' must not see it */
        bool prev = torch_no_grad_enter();
        for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
        torch_no_grad_exit(prev);
        for (int i = 0; i < 2; i++) {
            ck_assert(!both[i].grad_mode_seen_off);
            for (int s = 0; s < 20; s++)
                ck_assert_msg(both[i].losses[s] == alone[i].losses[s], "model %d step %d: %.9g on a thread, %.9g alone",
                              i, s + 1, both[i].losses[s], alone[i].losses[s]);
        }
    }
    chartext_free(&ct);
}
END_TEST

/* Errors are per thread: a handler installed on one thread catches that
 * thread's errors, and the last message is the thread's own. */
static _Thread_local jmp_buf *thread_jmp;
static void thread_handler(ac_error_kind kind, const char *msg, void *user) {
    (void)kind, (void)msg, (void)user;
    longjmp(*thread_jmp, 1);
}
static void *fail_on_thread(void *arg) {
    (void)arg;
    jmp_buf jb;
    thread_jmp = &jb;
    char *got = calloc(1, 256);
    ac_set_error_handler(thread_handler, NULL);
    if (setjmp(jb) == 0) torch_matmul(torch_ones(SHAPE(2, 3)), torch_ones(SHAPE(2, 3)));
    ac_set_error_handler(NULL, NULL);
    snprintf(got, 256, "%s", ac_last_error());
    ac_shutdown();
    return got;
}

/* The shared default generator: threads drawing from it at once get every
 * number of the stream exactly once (the lock keeps each op's draws whole). */
static void *draw_default(void *arg) {
    float *out = arg;
    for (int i = 0; i < 200; i++) {
        ac_mark m = ac_arena_mark();
        Tensor *t = torch_rand(SHAPE(50));
        memcpy(out + i * 50, t->data, sizeof(float) * 50);
        ac_arena_release(m);
    }
    ac_shutdown();
    return NULL;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_shared_default_generator) {
    torch_manual_seed(42);
    Tensor *want = torch_rand(SHAPE(4 * 200 * 50));
    float *w = malloc(sizeof(float) * 40000), *got = malloc(sizeof(float) * 40000);
    memcpy(w, want->data, sizeof(float) * 40000);
    torch_manual_seed(42);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, draw_default, got + i * 10000), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    qsort(w, 40000, sizeof(float), cmp_float);
    qsort(got, 40000, sizeof(float), cmp_float);
    ck_assert_msg(memcmp(w, got, sizeof(float) * 40000) == 0, "the threads' draws are not the stream, each number once");
    free(w), free(got);
    EXPECT_ERROR("softmax", torch_softmax(torch_ones(SHAPE(2)), 3));
    void *msg;
    pthread_t e;
    ck_assert_int_eq(pthread_create(&e, NULL, fail_on_thread, NULL), 0);
    pthread_join(e, &msg);
    ck_assert_str_eq((char *)msg, "matmul: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
    ck_assert_msg(strstr(ac_last_error(), "softmax"), "this thread's last error is its own: %s", ac_last_error());
    free(msg);
}
END_TEST

/* The bits never depend on the thread count: a 20-step run's checkpoint is
 * the same file, byte for byte, at 1, 2 and 3 threads, in both maths. */
/* The pool runs every chunk of every job exactly once. Jobs of 2 and 3
 * chunks alternate on 3 threads; the worker with no chunk in a job is made
 * late (ac_pool_test_delay_us, as if descheduled) between reading the job's
 * generation and the job, so the next job is written meanwhile. It once read
 * that job and ran a chunk twice: a training run differed, rarely (a few runs
 * in a hundred under load), from the one-thread run. */
static _Atomic int visits[3];
static void visit_task(void *ctx, int64_t b, int64_t e, int chunk) {
    (void)ctx, (void)chunk;
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&visits[i], 1);
}

START_TEST(test_pool_runs_each_chunk_once) {
    atomic_store(&ac_pool_test_free_cores, 8); /* 3 threads, however busy or small the machine */
    torch_set_num_threads(3);
    ac_parallel_for(3, 1, visit_task, NULL); /* the workers exist */
    atomic_store(&ac_pool_test_delay_us, 2000);
    int bad = 0;
    for (int it = 0; it < 1000 && !bad; it++) {
        int64_t n = it % 2 ? 3 : 2;
        for (int i = 0; i < 3; i++) atomic_store(&visits[i], 0);
        ac_parallel_for(n, 1, visit_task, NULL);
        for (int i = 0; i < n; i++) bad += atomic_load(&visits[i]) != 1;
    }
    atomic_store(&ac_pool_test_delay_us, 0);
    ck_assert_msg(bad == 0, "a chunk ran twice or never");
}
END_TEST

/* The caller never waits for a piece nobody started: with the worker late by
 * 50 ms (as if descheduled by a busy machine), the caller runs every piece
 * itself; with no core free, a job runs on the caller alone. */
static _Atomic int by_slot[4];
static void slot_task(void *ctx, int64_t b, int64_t e, int slot) {
    (void)ctx, (void)b, (void)e;
    atomic_fetch_add(&by_slot[slot], 1);
}

START_TEST(test_caller_takes_unstarted_pieces) {
    atomic_store(&ac_pool_test_free_cores, 8);
    torch_set_num_threads(2);
    ck_assert_int_eq(ac_parallel_chunks(1000, 1), 2);
    ac_parallel_for(1000, 1, slot_task, NULL); /* the worker exists */
    atomic_store(&ac_pool_test_delay_us, 50000);
    atomic_store(&by_slot[0], 0), atomic_store(&by_slot[1], 0);
    ac_parallel_for(1000, 1, slot_task, NULL);
    ck_assert_int_eq(atomic_load(&by_slot[0]), 4); /* 2 threads x 2 pieces, all the caller's */
    ck_assert_int_eq(atomic_load(&by_slot[1]), 0);
    atomic_store(&ac_pool_test_delay_us, 0);
    usleep(100000); /* the late worker finds the job over and takes nothing */
    atomic_store(&ac_pool_test_free_cores, 0); /* a full machine: the caller alone */
    atomic_store(&by_slot[0], 0), atomic_store(&by_slot[1], 0);
    for (int i = 0; i < 100; i++) ac_parallel_for(1000, 1, slot_task, NULL);
    ck_assert_int_eq(atomic_load(&by_slot[0]), 100); /* one call of the whole range each */
    ck_assert_int_eq(atomic_load(&by_slot[1]), 0);
    atomic_store(&ac_pool_test_free_cores, -1);
}
END_TEST

START_TEST(test_checkpoint_same_at_any_thread_count) {
    char dir[] = "/tmp/ac_thr_XXXXXX", cmd[1024];
    ck_assert(mkdtemp(dir) != NULL);
    const char *b = getenv("AC_BUILD") ? getenv("AC_BUILD") : "build";
    for (int exact = 0; exact < 2; exact++) {
        for (int t = 1; t <= 3; t++) {
            snprintf(cmd, sizeof cmd,
                     "AC_POOL_FREE_CORES=8 OMP_NUM_THREADS=%d %s/train %s --data %s --steps 20 --batch 16 --context 64 --dim 64 --heads 4 "
                     "--sample 0 --save %s/t%d.safetensors > %s/t%d.log", t, b, exact ? "--exact" : "",
                     shared_path("data/the-verdict.txt"), dir, t, dir, t);
            ck_assert_int_eq(system(cmd), 0);
        }
        for (int t = 2; t <= 3; t++) {
            snprintf(cmd, sizeof cmd, "cmp %s/t1.safetensors %s/t%d.safetensors && cmp %s/t1.log %s/t%d.log", dir, dir, t,
                     dir, dir, t);
            ck_assert_msg(system(cmd) == 0, "%s math: %d threads differ from 1", exact ? "exact" : "fast", t);
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* torch_set_num_threads / torch_get_num_threads, as PyTorch's. */
START_TEST(test_num_threads) {
    int n = torch_get_num_threads();
    ck_assert_int_ge(n, 1);
    torch_set_num_threads(3);
    ck_assert_int_eq(torch_get_num_threads(), 3);
    EXPECT_ERROR("set_num_threads: Expected number of threads to be positive, but got 0", torch_set_num_threads(0));
    /* a product big enough to be split gives the same bits at 1 and 3 threads */
    torch_manual_seed(0);
    Tensor *a = torch_randn(SHAPE(300, 200)), *w = torch_randn(SHAPE(200, 100));
    Tensor *y3 = torch_softmax(torch_matmul(a, w), -1);
    torch_set_num_threads(1);
    Tensor *y1 = torch_softmax(torch_matmul(a, w), -1);
    ck_assert(memcmp(y1->data, y3->data, sizeof(float) * 300 * 100) == 0);
}
END_TEST

/* A child forked after the pool started has none of its workers: its ops
 * start afresh instead of waiting for threads that do not exist. */
static void big_product_in_child(void) {
    alarm(20); /* a hang ends as SIGALRM, not as a stuck suite */
    torch_manual_seed(1);
    Tensor *a = torch_randn(SHAPE(400, 400));
    Tensor *c = torch_matmul(a, a);
    fprintf(stderr, "%s", torch_numel(c) == 160000 ? "done" : "wrong");
    ac_shutdown();
}

START_TEST(test_fork_after_threads) {
#if defined(__SANITIZE_THREAD__)
    return; /* ThreadSanitizer cannot start threads in a child forked from a threaded process */
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return;
#endif
#endif
    ac_set_exact(false); /* the fast kernel splits this product among threads */
    torch_set_num_threads(2);
    torch_manual_seed(0);
    Tensor *a = torch_randn(SHAPE(400, 400));
    torch_matmul(a, a); /* the pool's workers are running now */
    char buf[64];
    int st = child_stderr(big_product_in_child, buf, sizeof buf);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strcmp(buf, "done") == 0, "the forked child: status %d, \"%s\"",
                  st, buf);
}
END_TEST

Suite *suite_threads(void) {
    Suite *s = suite_create("threads");
    TCase *tc = tcase("threads");
    tcase_add_test(tc, test_two_models_on_two_threads);
    tcase_add_test(tc, test_shared_default_generator);
    tcase_add_test(tc, test_pool_runs_each_chunk_once);
    tcase_add_test(tc, test_checkpoint_same_at_any_thread_count);
    tcase_add_test(tc, test_num_threads);
    tcase_add_test(tc, test_fork_after_threads);
    tcase_add_test(tc, test_caller_takes_unstarted_pieces);
    suite_add_tcase(s, tc);
    return s;
}
