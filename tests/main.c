/* The Check runner: every suite, fork mode (each test in its own process). */
#include <stdlib.h>

#include "tests.h"

Suite *suite_appendix_a(void); /* tests/test_appendix_a.c */
Suite *suite_spam_data(void); /* tests/test_spam_data.c */
Suite *suite_json(void);       /* tests/test_json.c */
Suite *suite_instruct(void);   /* tests/test_instruct.c */
Suite *suite_finetune(void);  /* tests/test_finetune.c */
Suite *suite_release(void);   /* tests/test_release.c */
Suite *suite_longrun(void);   /* tests/test_longrun.c */
Suite *suite_hf_tokenizer(void); /* tests/test_hf_tokenizer.c */
Suite *suite_llm(void);       /* tests/test_llm.c */
Suite *suite_dpo(void);       /* tests/test_dpo.c */
Suite *suite_exact_orders(void); /* tests/test_exact_orders.c */
Suite *suite_bf16(void);      /* tests/test_bf16.c */
Suite *suite_variants(void); /* tests/test_variants.c */

int main(void) {
    /* Exact math: the golden values are PyTorch's bits. The tests of the fast
     * kernel switch it off in their own (forked) process. */
    ac_set_exact(true);
    SRunner *sr = srunner_create(suite_rng());
    srunner_add_suite(sr, suite_print());
    srunner_add_suite(sr, suite_ops());
    srunner_add_suite(sr, suite_grad());
    srunner_add_suite(sr, suite_autograd());
    srunner_add_suite(sr, suite_errors());
    srunner_add_suite(sr, suite_article());
    srunner_add_suite(sr, suite_nn());
    srunner_add_suite(sr, suite_optim());
    srunner_add_suite(sr, suite_train());
    srunner_add_suite(sr, suite_memory());
    srunner_add_suite(sr, suite_memory_backward());
    srunner_add_suite(sr, suite_release());
    srunner_add_suite(sr, suite_viz());
    srunner_add_suite(sr, suite_hostile());
    srunner_add_suite(sr, suite_error_paths());
    srunner_add_suite(sr, suite_threads());
    srunner_add_suite(sr, suite_kernels());
    srunner_add_suite(sr, suite_attention());
    srunner_add_suite(sr, suite_calls());
    srunner_add_suite(sr, suite_error_table());
    srunner_add_suite(sr, suite_tokenizer());
    srunner_add_suite(sr, suite_hf_tokenizer());
    srunner_add_suite(sr, suite_gpt());
    srunner_add_suite(sr, suite_longrun());
    srunner_add_suite(sr, suite_build());
    srunner_add_suite(sr, suite_appendix_a());
    srunner_add_suite(sr, suite_spam_data());
    srunner_add_suite(sr, suite_json());
    srunner_add_suite(sr, suite_instruct());
    srunner_add_suite(sr, suite_finetune());
    srunner_add_suite(sr, suite_llm());
    srunner_add_suite(sr, suite_bf16());
    srunner_add_suite(sr, suite_dpo());
    srunner_add_suite(sr, suite_exact_orders());
    srunner_add_suite(sr, suite_variants());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
