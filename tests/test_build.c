/* The Makefile: objects of another compiler or other flags are never reused
 * (make CC=clang after a gcc build rebuilds), and an unchanged build is not
 * rebuilt. One small object into a build directory of its own. */
#include <stdlib.h>

#include "tests.h"

START_TEST(test_objects_follow_the_compiler) {
    char *dir = temp_dir(), cmd[1024], *out;
    const char *obj = "obj/tensor/error.o";
    snprintf(cmd, sizeof cmd, "make --no-print-directory B=%s %s/%s 2>&1", dir, dir, obj);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "tensor/error.c"), "the first build compiles: %s", out);
    free(out);
    ck_assert_int_eq(run_command(cmd, &out), 0); /* the same compiler and flags: nothing to do */
    ck_assert_msg(!strstr(out, "tensor/error.c"), "rebuilt with nothing changed: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "make --no-print-directory B=%s CFLAGS=-DAC_TEST_OTHER_FLAGS %s/%s 2>&1", dir, dir, obj);
    ck_assert_int_eq(run_command(cmd, &out), 0); /* other flags (or CC=clang): compiled again */
    ck_assert_msg(strstr(out, "-DAC_TEST_OTHER_FLAGS") && strstr(out, "tensor/error.c"), "not rebuilt: %s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* A plain `make` (README's first command) builds the library and every example: the
 * default goal is `all`, not whichever rule the Makefile happens to list first. */
START_TEST(test_plain_make_builds_all) {
    char *dir = temp_dir(), cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "make --no-print-directory -n B=%s 2>&1", dir);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "libattention.a") && strstr(out, "examples/article.c") && strstr(out, "examples/gpt.c"),
                  "a plain make does not build the library and the examples: %s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

Suite *suite_build(void) {
    Suite *s = suite_create("build");
    TCase *tc = tcase("build");
    tcase_add_test(tc, test_objects_follow_the_compiler);
    tcase_add_test(tc, test_plain_make_builds_all);
    suite_add_tcase(s, tc);
    return s;
}
