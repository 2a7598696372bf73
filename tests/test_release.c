/* Use after release: a tensor freed by ac_arena_release and given to an op
 * later is an error naming the op and the generations, not garbage or a
 * crash (internal.h, "Use after release"). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "internal.h"
#include "tests.h"

/* The error for a tensor made in generation `made` and freed by release `released`. */
static const char *dead_msg(const char *op, uint64_t made, uint64_t released) {
    static char buf[512];
    snprintf(buf, sizeof buf,
             "%s: a tensor released by ac_arena_release was used: it was made in arena generation %llu and released "
             "by release %llu (the current generation is %llu); keep it with ac_persist, or use it before the release",
             op, (unsigned long long)made, (unsigned long long)released, (unsigned long long)ac_arena_generation());
    return buf;
}

/* In the default mode a released header keeps its stamp until the arena hands
 * its memory out again: a big tensor made first after each mark takes what
 * the test makes after the release, far from the tensors it checks. */
static void filler(void) { torch_zeros(SHAPE(1 << 16)); }

#define NOT_LIVE "not a live tensor (freed by ac_arena_release and its memory reused, or never a tensor)"

START_TEST(test_use_after_release_names_the_op) {
    ac_debug_tensors(0); /* the default mode: headers in the arena */
    uint64_t g = ac_arena_generation();
    ac_mark m = ac_arena_mark();
    filler();
    Tensor *x = torch_ones(SHAPE(2, 3)), *w = torch_requires_grad_(torch_ones(SHAPE(3, 2)), true);
    Tensor *loss = torch_sum(torch_matmul(x, w));
    ac_arena_release(m);
    ck_assert_uint_eq(ac_arena_generation(), g + 1);
    /* used before anything reuses its memory: every kind of op says so */
    EXPECT_ERROR(dead_msg("add", g, g), torch_add(x, x));
    ck_assert_str_eq(test_msg, dead_msg("add", g, g));
    ck_assert_int_eq(test_kind, AC_RUNTIME_ERROR);
    EXPECT_ERROR(dead_msg("matmul", g, g), torch_matmul(x, w));
    EXPECT_ERROR(dead_msg("item", g, g), torch_item(x));
    EXPECT_ERROR(dead_msg("backward", g, g), torch_backward(loss, NULL));
    EXPECT_ERROR(dead_msg("view", g, g), torch_view(x, SHAPE(6)));
    EXPECT_ERROR(dead_msg("softmax", g, g), torch_softmax(x, -1));
    EXPECT_ERROR(dead_msg("ac_persist", g, g), ac_persist(x));
    EXPECT_ERROR(dead_msg("zeros_like", g, g), torch_zeros_like(x));
    EXPECT_ERROR("released by ac_arena_release", torch_print(x));
    EXPECT_ERROR("released by ac_arena_release", torch_cat(TENSORS(torch_ones(SHAPE(2, 3)), x), 0));
    /* optional inputs are checked too */
    Tensor *y = torch_ones(SHAPE(2, 3));
    EXPECT_ERROR(dead_msg("layer_norm", g, g), torch_layer_norm(y, SHAPE(3), x, NULL, 1e-5));
    EXPECT_ERROR(dead_msg("backward", g, g),
                 torch_backward(torch_mul_scalar(torch_requires_grad_(torch_ones(SHAPE(2, 3)), true), 2), x));

    /* nested marks: what was made before the inner mark lives until its own release */
    g = ac_arena_generation();
    ac_mark outer = ac_arena_mark();
    filler();
    Tensor *a = torch_ones(SHAPE(4));
    ac_mark inner = ac_arena_mark();
    filler();
    Tensor *b = torch_mul_scalar(a, 2);
    ac_arena_release(inner);
    ck_assert(torch_item(torch_sum(a)) == 4); /* a outlives the inner release */
    EXPECT_ERROR(dead_msg("sum", g, g), torch_sum(b));
    ac_arena_release(outer);
    EXPECT_ERROR(dead_msg("sum", g, g + 1), torch_sum(a));

    /* a mark an older one's release went past is refused, even once the arena has grown past it again */
    ac_mark m1 = ac_arena_mark();
    torch_ones(SHAPE(2));
    ac_mark m2 = ac_arena_mark();
    ac_arena_release(m1);
    ac_arena_alloc(1 << 16); /* data, no tensor */
    EXPECT_ERROR("is newer than the arena", ac_arena_release(m2));
    ac_debug_tensors(-1);
}
END_TEST

START_TEST(test_memory_reused_is_not_a_live_tensor) {
    ac_debug_tensors(0);
    ac_mark m = ac_arena_mark();
    Tensor *a = torch_ones(SHAPE(2, 3)), *x = torch_ones(SHAPE(2, 3)); /* x's header right after a's data */
    (void)a;
    ac_arena_release(m);
    /* the next tensor's header takes a's place, its data x's: x's header is now floats */
    Tensor *big = torch_full(SHAPE(1000), 2.0);
    ck_assert_ptr_eq(big, a);
    EXPECT_ERROR(NOT_LIVE, torch_add(x, x));
    ck_assert_str_eq(test_msg, "add: " NOT_LIVE "; AC_DEBUG=1 catches more of these");
    EXPECT_ERROR("exp: " NOT_LIVE, torch_exp(x));
    /* memory that never held a tensor */
    void *junk = calloc(1, 512);
    EXPECT_ERROR("mean: " NOT_LIVE, torch_mean(junk));
    free(junk);
    ac_debug_tensors(-1);
}
END_TEST

/* The program: x's header is where y's would be. */
static void aliasing_program(void) {
    ac_mark m = ac_arena_mark();
    Tensor *x = torch_ones(SHAPE(2, 3));
    ac_arena_release(m);
    Tensor *y = torch_zeros(SHAPE(100, 100));
    (void)y;
    Tensor *z = torch_add(x, x);
    torch_print(z);
}

static void aliasing_in_debug_mode(void) {
    ac_debug_tensors(1);
    aliasing_program();
}

START_TEST(test_debug_mode_catches_the_aliasing_program) {
    ac_debug_tensors(1);
    ck_assert(ac_debug_tensors_on());
    uint64_t g = ac_arena_generation();
    EXPECT_ERROR(dead_msg("add", g, g), aliasing_program());
    /* with the default handler: the message and an abort, not a silent exit 139 */
    char buf[512];
    int st = child_stderr(aliasing_in_debug_mode, buf, sizeof buf);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "status %d", st);
    ck_assert(strncmp(buf, "RuntimeError: add: a tensor released by ac_arena_release was used", 65) == 0);
    /* headers are not in the arena in this mode, and a view of a long-lived tensor dies with its release too */
    Tensor *p = ac_persist(torch_ones(SHAPE(2, 2)));
    g = ac_arena_generation();
    ac_mark m = ac_arena_mark();
    size_t before = ac_arena_bytes_in_use();
    Tensor *v = torch_T(p);
    ck_assert_uint_eq(ac_arena_bytes_in_use(), before);
    ac_arena_release(m);
    EXPECT_ERROR(dead_msg("neg", g, g), torch_neg(v));
    ck_assert(torch_item(torch_sum(p)) == 4);
    ac_free(p);
    /* AC_DEBUG=1 in the environment turns it on (the ASan build has it on anyway) */
    setenv("AC_DEBUG", "1", 1);
    ac_debug_tensors(-1);
    ck_assert(ac_debug_tensors_on());
    setenv("AC_DEBUG", "0", 1);
    ac_debug_tensors(-1);
#ifdef AC_ASAN
    ck_assert(ac_debug_tensors_on());
#else
    ck_assert(!ac_debug_tensors_on());
#endif
    unsetenv("AC_DEBUG");
    ac_debug_tensors(-1);
}
END_TEST

START_TEST(test_debug_mode_training_loop_is_bounded) {
    ac_debug_tensors(1);
    torch_manual_seed(123);
    nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 4);
    Tensor *x = ac_persist(torch_randn(SHAPE(6, 3)));
    size_t reserved = 0, wrapped_at = 0;
    Tensor *stale = NULL;
    for (int step = 0; step < 1000; step++) {
        ac_mark m = ac_arena_mark();
        for (int pass = 0; pass < 4; pass++) { /* a few micro-batches a step: the ring wraps within the loop */
            nn_zero_grad(&sa->module);
            stale = torch_sum(nn_SelfAttention_forward(sa, x));
            torch_backward(stale, NULL);
        }
        size_t q = ac_quarantined();
        ac_arena_release(m);
        /* every header the release freed is kept, up to the bound; then the oldest go */
        ck_assert_uint_le(ac_quarantined(), AC_QUARANTINE);
        ck_assert(ac_quarantined() > q || ac_quarantined() == AC_QUARANTINE);
        if (!wrapped_at && ac_quarantined() == AC_QUARANTINE) wrapped_at = (size_t)step;
        if (step == 1) reserved = ac_arena_bytes_reserved();
        if (step > 1) ck_assert_uint_eq(ac_arena_bytes_reserved(), reserved);
    }
    ck_assert_msg(wrapped_at > 0 && wrapped_at < 900, "the quarantine filled at step %zu", wrapped_at);
    EXPECT_ERROR("backward: a tensor released by ac_arena_release was used", torch_backward(stale, NULL));
    ac_free(x);
    nn_free(&sa->module);
    ac_debug_tensors(-1);
}
END_TEST

START_TEST(test_correct_programs_are_unchanged) {
    for (int debug = 0; debug < 2; debug++) {
        ac_debug_tensors(debug);
        Tensor *w = ac_persist(torch_ones(SHAPE(3, 3))), *z = ac_persist_zeros(AC_FLOAT32, SHAPE(3));
        ac_mark start = ac_arena_mark();
        Tensor *kept = torch_full(SHAPE(3), 2.0); /* made before the loop's marks */
        for (int step = 0; step < 50; step++) {
            ac_mark m = ac_arena_mark();
            Tensor *y = torch_add(torch_matmul(w, kept), z);
            ck_assert(torch_item(torch_sum(y)) == 18);
            torch_add_(z, torch_zeros(SHAPE(3)));
            ac_arena_release(m);
        }
        ck_assert(torch_item(torch_sum(kept)) == 6);
        ac_arena_release(start);
        ck_assert(torch_item(torch_sum(w)) == 9); /* long-lived tensors outlive every release */
        ac_free(w);
        ac_free(z);
        /* after ac_shutdown the log starts again */
        Tensor *t = torch_ones(SHAPE(2));
        (void)t;
        ac_shutdown();
        ac_mark m = ac_arena_mark();
        ck_assert_uint_eq(m.tensors, 0);
        ck_assert(torch_item(torch_sum(torch_ones(SHAPE(5)))) == 5);
        ac_arena_release(m);
    }
    ac_debug_tensors(-1);
}
END_TEST

Suite *suite_release(void) {
    Suite *s = suite_create("release");
    TCase *tc = tcase("use after release");
    tcase_add_test(tc, test_use_after_release_names_the_op);
    tcase_add_test(tc, test_memory_reused_is_not_a_live_tensor);
    tcase_add_test(tc, test_debug_mode_catches_the_aliasing_program);
    tcase_add_test(tc, test_debug_mode_training_loop_is_bounded);
    tcase_add_test(tc, test_correct_programs_are_unchanged);
    suite_add_tcase(s, tc);
    return s;
}
