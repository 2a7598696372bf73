/* Memory: an arena per step runs in flat memory. */
#include "tests.h"

START_TEST(test_ten_thousand_steps_in_flat_memory) {
    torch_manual_seed(123);
    nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 4);
    Tensor *x = ac_persist(torch_randn(SHAPE(6, 3)));
    size_t reserved_after_first = 0;
    ac_mark start = ac_arena_mark();
    size_t in_use_at_start = ac_arena_bytes_in_use();
    for (int step = 0; step < 10000; step++) {
        ac_mark m = ac_arena_mark();
        nn_zero_grad(&sa->module);
        torch_backward(torch_sum(nn_SelfAttention_forward(sa, x)), NULL);
        ac_arena_release(m);
        if (step == 0) reserved_after_first = ac_arena_bytes_reserved();
        ck_assert_int_eq(ac_arena_bytes_in_use(), in_use_at_start);
    }
    ck_assert_int_eq(ac_arena_bytes_reserved(), reserved_after_first);
    ck_assert(sa->W_query->grad != NULL);
    ac_arena_release(start);
    ac_free(x);
    nn_free(&sa->module);
}
END_TEST

START_TEST(test_arena_grows_past_one_block) {
    /* no fixed pool to run out of (ggml #322): 40 MB in one step */
    ac_mark m = ac_arena_mark();
    Tensor *big = torch_ones(SHAPE(10 * 1000 * 1000));
    ck_assert(torch_item(torch_sum(big)) == 1e7);
    ck_assert(ac_arena_bytes_reserved() >= 40u * 1000 * 1000);
    ac_arena_release(m);
    EXPECT_ERROR("newer than the arena", ac_arena_release((ac_mark){1000, 0, 0}));
}
END_TEST

Suite *suite_memory(void) {
    Suite *s = suite_create("memory");
    TCase *tc = tcase("arena");
    tcase_add_test(tc, test_ten_thousand_steps_in_flat_memory);
    tcase_add_test(tc, test_arena_grows_past_one_block);
    suite_add_tcase(s, tc);
    return s;
}
