/* Shared helpers of the Check suite. */
#ifndef ATTENTION_TESTS_H
#define ATTENTION_TESTS_H

#include <check.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "optim.h"
#include "safetensors.h"
#include "tensor.h"
#include "toy_lm.h"

/* ../shared/<rel> (or $AC_SHARED/<rel>), tests/data/<rel>; static buffers. */
const char *shared_path(const char *rel);
const char *data_path(const char *rel);
char *read_text(const char *path);       /* malloc'd, NUL-terminated; aborts the test if missing */
int run_command(const char *cmd, char **out); /* exit status; stdout malloc'd into *out (if out) */
const char *build_dir(void);             /* $AC_BUILD or build: where the programs under test are */
char *temp_dir(void);                    /* a new directory under /tmp (static buffer) */
void remove_dir(const char *dir);        /* rm -rf */
bool under_asan(void);                   /* built with AddressSanitizer */
/* Runs fn in a forked child and returns its wait status; what it wrote to
 * stderr lands in buf (NUL-terminated). */
int child_stderr(void (*fn)(void), char *buf, size_t n);
/* A small GPT-2 in Hugging Face's layout in dir (tests/test_gpt.c; tests/tools/gen_gpt2_golden.py's
 * weights); `skip` leaves a key out, `bad` gives it one column too few, `config` replaces config.json. */
void write_gpt2(const char *dir, bool prefix, const char *skip, const char *bad, const char *config);

/* A reader's page (ac_page_code's rows): no "(C: ...)" note in the book's column, and every function
 * shown has its Python def (or class) line or a note of C's own on its signature. */
void assert_page_rows(const char *page, const char *what);

/* A golden record `name n v1 ... vn` of tests/data/<file>. */
typedef struct { int n; double *v; } Golden;
Golden golden(const char *file, const char *name);

/* |got - want| <= atol + rtol * |want| for every element. */
void assert_close(const float *got, const double *want, int64_t n, double atol, double rtol, const char *what);
void assert_tensor_golden(Tensor *t, const char *file, const char *name, double atol, double rtol);
void assert_repr(const Tensor *t, const char *expected);

/* Run a statement that must fail with an error whose message contains `needle`. */
extern jmp_buf *test_jmp;
extern char test_msg[1024];
extern ac_error_kind test_kind;
void test_error_handler(ac_error_kind kind, const char *msg, void *user);
#define EXPECT_ERROR(needle, ...)                                                                  \
    do {                                                                                           \
        jmp_buf jb_;                                                                               \
        test_jmp = &jb_;                                                                           \
        test_msg[0] = 0;                                                                           \
        ac_set_error_handler(test_error_handler, NULL);                                            \
        if (setjmp(jb_) == 0) {                                                                    \
            __VA_ARGS__;                                                                           \
            ac_set_error_handler(NULL, NULL);                                                      \
            ck_abort_msg("expected an error containing \"%s\", got none", needle);                 \
        }                                                                                          \
        ac_set_error_handler(NULL, NULL);                                                          \
        ck_assert_msg(strstr(test_msg, needle) != NULL, "error \"%s\" does not contain \"%s\"",    \
                      test_msg, needle);                                                           \
    } while (0)

/* Every test case frees the arena at the end (LeakSanitizer checks each forked test). */
TCase *tcase(const char *name);

Suite *suite_rng(void);
Suite *suite_print(void);
Suite *suite_ops(void);
Suite *suite_grad(void);
Suite *suite_autograd(void);
Suite *suite_errors(void);
Suite *suite_article(void);
Suite *suite_nn(void);
Suite *suite_optim(void);
Suite *suite_train(void);
Suite *suite_memory(void);
Suite *suite_memory_backward(void);
Suite *suite_viz(void);
Suite *suite_hostile(void);
Suite *suite_error_paths(void);
Suite *suite_threads(void);
Suite *suite_kernels(void);
Suite *suite_attention(void);
Suite *suite_calls(void);
Suite *suite_error_table(void);
Suite *suite_tokenizer(void);
Suite *suite_gpt(void);
Suite *suite_build(void);

#endif
