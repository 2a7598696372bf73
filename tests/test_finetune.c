/* Chapter 6's frozen model and appendix E's LoRA (nn/lora.c, nn/models/gpt/classifier.c) against what the
 * book's classes do in PyTorch (tests/data/lora_golden.txt and lora_repr_expected.txt, made by
 * tests/tools/gen_lora_golden.py) on a small GPTModel: the trainable counts, LoRA's draws, the last
 * token's logits, the first step's gradients and three AdamW steps' losses, print(model).
 * And ./build/finetune classify and instruct against finetune.py (tests/data/classify_golden.txt and
 * instruct_run_golden.txt, made by tests/tools/gen_classify_golden.py and gen_instruct_run_golden.py) on
 * the sample TSV and the book's instruction data, test-mode models and a small GPT-2, with and without
 * LoRA: in exact math every printed line the same and each --log loss within 1e-5; in the
 * default math the same lines but for the losses' last printed digit (within 2e-3) and --log within 1e-4
 * (under ASan the default math alone: that pass looks for memory errors).
 * Exact math: the draws bit for bit; logits and losses within 1e-6 relative; gradients within 1e-8
 * absolute + 1e-6 relative (the small ones are sums that cancel: a few ulps of their terms). */
#include <math.h>
#include <stdlib.h>
#include <ctype.h>
#include <sys/stat.h>

#include "gpt.h"
#include "tests.h"

#define GOLD "lora_golden.txt"

static nn_GPTConfig small_cfg(void) {
    return (nn_GPTConfig){.vocab_size = 97, .context_length = 16, .emb_dim = 12, .n_heads = 2, .n_layers = 2,
                          .drop_rate = 0.0, .qkv_bias = true};
}

static Tensor *batch_x(void) {
    return torch_tensor_long((const int64_t[]){5, 17, 3, 90, 42, 8, 61, 1, 2, 3, 4, 5, 6, 7}, SHAPE(2, 7));
}
static Tensor *batch_y(void) { return torch_tensor_long((const int64_t[]){0, 1}, SHAPE(2)); }

static void expect_count(int64_t got, const char *name) {
    Golden g = golden(GOLD, name);
    ck_assert_msg(got == (int64_t)g.v[0], "%s: %lld, PyTorch %.0f", name, (long long)got, g.v[0]);
}

static Tensor *param(nn_Module *m, const char *name) {
    nn_TensorList l = nn_named_parameters(m);
    for (int i = 0; i < l.n; i++)
        if (strcmp(l.names[i], name) == 0) return l.tensors[i];
    ck_abort_msg("no parameter %s", name);
    return NULL;
}

/* the model of finetune.py's model_for: manual_seed, GPTModel(cfg), eval() */
static nn_GPTModel *new_model(void) {
    torch_manual_seed(123);
    nn_GPTModel *m = nn_GPTModel_new(small_cfg());
    nn_eval(&m->module);
    return m;
}

static void new_head(nn_GPTModel *m) {
    torch_manual_seed(123);
    m->out_head = (nn_Linear *)nn_setattr(&m->module, "out_head", &nn_Linear_new(m->cfg.emb_dim, 2, true)->module);
}

/* three AdamW steps on the fixed batch; the first step's gradients of `grads` against PyTorch's, and
 * that no frozen parameter got a gradient or changed */
static void train3(nn_GPTModel *m, const char *prefix, const char *const *grads, int n_grads) {
    nn_TensorList ps = nn_named_parameters(&m->module);
    Tensor **before = ac_arena_alloc(sizeof(Tensor *) * (size_t)ps.n);
    for (int i = 0; i < ps.n; i++) before[i] = torch_clone(ps.tensors[i]);
    torch_manual_seed(123);
    optim_Optimizer *opt = optim_AdamW(ps, 0.01, 0.9, 0.999, 1e-8, 0.1, false);
    double losses[3];
    char name[256];
    for (int step = 0; step < 3; step++) {
        optim_zero_grad(opt);
        Tensor *loss = gpt_calc_loss_batch_cls(batch_x(), batch_y(), m);
        torch_backward(loss, NULL);
        if (step == 0) {
            for (int k = 0; k < n_grads; k++) {
                snprintf(name, sizeof name, "%sgrad.%s", prefix, grads[k]);
                Tensor *p = param(&m->module, grads[k]);
                ck_assert_msg(p->grad, "%s has no gradient", grads[k]);
                assert_tensor_golden(p->grad, GOLD, name, 1e-8, 1e-6);
            }
        }
        optim_step(opt);
        losses[step] = torch_item(loss);
    }
    snprintf(name, sizeof name, "%slosses", prefix);
    Golden g = golden(GOLD, name);
    for (int i = 0; i < 3; i++) ck_assert_msg(fabs(losses[i] - g.v[i]) <= 1e-6 * fabs(g.v[i]), "%s step %d: %.9g, PyTorch %.9g", prefix, i, losses[i], g.v[i]);
    for (int i = 0; i < ps.n; i++) {
        Tensor *p = ps.tensors[i];
        if (p->requires_grad) continue;
        ck_assert_msg(!p->grad, "frozen %s got a gradient", ps.names[i]);
        ck_assert_msg(memcmp(p->data, before[i]->data, sizeof(float) * (size_t)torch_numel(p)) == 0, "frozen %s changed", ps.names[i]);
    }
    optim_free(opt);
}

START_TEST(test_chapter6_frozen_model) {
    ac_set_exact(true);
    nn_GPTModel *m = new_model();
    nn_requires_grad_(&m->module, false);                                  /* for p in model.parameters(): p.requires_grad = False */
    new_head(m);
    nn_requires_grad_(nn_Sequential_get(m->trf_blocks, -1), true);         /* model.trf_blocks[-1] */
    nn_requires_grad_(&m->final_norm->module, true);
    expect_count(nn_num_trainable_parameters(&m->module), "cls.trainable");
    ck_assert_int_eq(m->out_head->out_features, 2);
    {
        bool prev = torch_no_grad_enter();
        assert_tensor_golden(gpt_last_token_logits(m, batch_x()), GOLD, "cls.logits", 1e-9, 1e-6);
        torch_no_grad_exit(prev);
    }
    {   /* the frozen block keeps nothing past its output: a forward with grad holds one block's intermediates */
        size_t before = ac_arena_bytes_in_use();
        gpt_calc_loss_batch_cls(batch_x(), batch_y(), m);
        size_t frozen = ac_arena_bytes_in_use() - before;
        nn_requires_grad_(nn_Sequential_get(m->trf_blocks, 0), true);
        before = ac_arena_bytes_in_use();
        gpt_calc_loss_batch_cls(batch_x(), batch_y(), m);
        size_t all = ac_arena_bytes_in_use() - before;
        nn_requires_grad_(nn_Sequential_get(m->trf_blocks, 0), false);
        ck_assert_msg(frozen < all * 3 / 4, "a forward kept %zu bytes with block 0 frozen, %zu without", frozen, all);
    }
    static const char *const grads[] = {"out_head.weight", "out_head.bias", "trf_blocks.1.ff.layers.0.weight",
                                        "final_norm.scale", "trf_blocks.1.att.W_query.bias"};
    train3(m, "cls.", grads, 5);
    nn_free(&m->module);
    ac_set_exact(false);
}
END_TEST

START_TEST(test_appendix_e_lora) {
    ac_set_exact(true);
    nn_GPTModel *m = new_model();
    new_head(m);
    expect_count(nn_num_trainable_parameters(&m->module), "lora.trainable_before");
    nn_requires_grad_(&m->module, false);
    expect_count(nn_num_trainable_parameters(&m->module), "lora.trainable_after");
    nn_replace_linear_with_lora(&m->module, 2, 4);
    expect_count(nn_num_trainable_parameters(&m->module), "lora.trainable_lora");
    nn_LinearWithLoRA *wq = (nn_LinearWithLoRA *)nn_get_submodule(&nn_GPTModel_block(m, 0)->att->module, "W_query");
    ck_assert_str_eq(wq->module.type, "LinearWithLoRA");
    ck_assert_ptr_eq(wq->linear, nn_GPTModel_block(m, 0)->att->W_query); /* the typed field: the Linear inside */
    assert_tensor_golden(wq->lora->A, GOLD, "lora.A0", 0, 0);           /* the draws, bit for bit */
    nn_LinearWithLoRA *head = (nn_LinearWithLoRA *)nn_get_submodule(&m->module, "out_head");
    assert_tensor_golden(head->lora->A, GOLD, "lora.A_last", 0, 0);
    {
        bool prev = torch_no_grad_enter();
        torch_fill_(wq->lora->B, 0.25);                                  /* B = 0 would hide the LoRA path */
        assert_tensor_golden(gpt_last_token_logits(m, batch_x()), GOLD, "lora.logits", 1e-9, 1e-6);
        torch_fill_(wq->lora->B, 0.0);
        torch_no_grad_exit(prev);
    }
    static const char *const grads[] = {"trf_blocks.0.att.W_query.lora.B", "trf_blocks.1.ff.layers.2.lora.A",
                                        "out_head.lora.B"};
    train3(m, "lora.", grads, 3);
    expect_count(nn_state_dict(&m->module).n, "lora.state_dict_len");
    char *want = read_text(data_path("lora_repr_expected.txt"));
    char *got = nn_module_repr(&m->module);
    size_t n = strlen(got);
    ck_assert_msg(strncmp(got, want, n) == 0 && want[n] == '\n' && want[n + 1] == 0, "print(model) differs:\n%s", got);
    free(want);
    nn_free(&m->module);
    ac_set_exact(false);
}
END_TEST

START_TEST(test_lora_refusals) {
    EXPECT_ERROR("rank must be >= 1, got 0", nn_LoRALayer_new(4, 4, 0, 16));
    nn_Linear *l = nn_Linear_new(3, 2, true);
    EXPECT_ERROR("rank must be >= 1, got -1", nn_LinearWithLoRA_new(l, -1, 16));
    nn_free(&l->module); /* the refusal left it where it was */
    EXPECT_ERROR("expected an nn.Linear", nn_LinearWithLoRA_new(NULL, 2, 16));
    nn_GPTModel *m = new_model();
    EXPECT_ERROR("'GPTModel' object has no attribute 'head'", nn_get_submodule(&m->module, "head"));
    nn_free(&m->module);
}
END_TEST

/* setattr frees what it replaces (ASan/valgrind would see a leak or a double free), keeps the order */
START_TEST(test_setattr_order_and_ownership) {
    nn_Sequential *s = nn_Sequential_new(MODULES(&nn_Linear_new(2, 3, true)->module, &nn_ReLU_new()->module));
    nn_setattr(&s->module, "1", &nn_Tanh_new()->module);
    nn_replace_linear_with_lora(&s->module, 1, 1);
    ck_assert_str_eq(nn_module_repr(&s->module),
                     "Sequential(\n  (0): LinearWithLoRA(\n    (linear): Linear(in_features=2, out_features=3, bias=True)\n"
                     "    (lora): LoRALayer()\n  )\n  (1): Tanh()\n)");
    nn_free(&s->module);
}
END_TEST

/* ---- finetune classify and instruct against finetune.py --------------------------------------------- */

typedef struct { char flags[512]; int n_out, n_log, n_resp; char *out[256], *resp[1024]; double log[512]; } Run;

static int load_runs(const char *file, Run *runs, int max) {
    char *text = read_text(data_path(file)), *save = NULL;
    int n = -1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "run ", 4)) {
            ck_assert(++n < max);
            memset(&runs[n], 0, sizeof runs[n]);
            snprintf(runs[n].flags, sizeof runs[n].flags, "%s", line + 4);
        } else if (!strncmp(line, "out ", 4) || !strcmp(line, "out")) {
            ck_assert(runs[n].n_out < 256);
            runs[n].out[runs[n].n_out++] = strdup(line[3] ? line + 4 : "");
        } else if (!strncmp(line, "resp ", 5) || !strcmp(line, "resp")) {
            ck_assert(runs[n].n_resp < 1024);
            runs[n].resp[runs[n].n_resp++] = strdup(line[4] ? line + 5 : "");
        } else if (!strncmp(line, "log ", 4)) {
            long step;
            double l;
            ck_assert(sscanf(line + 4, "%ld %lf", &step, &l) == 2 && step == runs[n].n_log && runs[n].n_log < 512);
            runs[n].log[runs[n].n_log++] = l;
        }
    }
    free(text);
    return n + 1;
}

static void free_runs(Run *runs, int n) {
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < runs[r].n_out; j++) free(runs[r].out[j]);
        for (int j = 0; j < runs[r].n_resp; j++) free(runs[r].resp[j]);
    }
}

/* The same words, and numbers within tol of each other ("0.714," and "0.715,") */
static bool lines_close(const char *a, const char *b, double tol) {
    while (*a && *b) {
        char *ea, *eb;
        double x = strtod(a, &ea), y = strtod(b, &eb);
        if (ea != a && eb != b && (isdigit((unsigned char)*a) || *a == '-')) {
            if (fabs(x - y) > tol) return false;
            a = ea, b = eb;
        } else if (*a++ != *b++) {
            return false;
        }
    }
    return *a == *b;
}

static char *subst_dir(const char *flags, const char *dir) {
    static char out[1024];
    const char *at = strstr(flags, "GPT2DIR");
    if (!at) snprintf(out, sizeof out, "%.600s", flags);
    else snprintf(out, sizeof out, "%.*s%.300s%.300s", (int)(at - flags), flags, dir, at + 7);
    return out;
}

/* out's lines against the run's: the same in exact math; numbers within 2e-3 in the default math */
static void compare_lines(const char *cmd, char *out, const Run *run, bool exact, const char *what, char *const *want, int n_want) {
    int i = 0;
    char *line = out;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (!nl) nl = line + strlen(line);
        bool last = !*nl;
        *nl = 0;
        ck_assert_msg(i < n_want, "%s: more %s lines than finetune.py's %d: %s", cmd, what, n_want, line);
        /* exact: the same text, but for chapter 7's two initial losses printed with 17 digits: float32 batch
         * losses over 50257 logits a few ulps apart (the exp sums' order) agree to 1e-5 there */
        bool repr_loss = !strncmp(line, "Training loss: ", 15) || !strncmp(line, "Validation loss: ", 17);
        bool same = exact ? strcmp(line, want[i]) == 0 || (repr_loss && lines_close(line, want[i], 1e-5))
                          : lines_close(line, want[i], 2e-3);
        ck_assert_msg(same, "%s\n%s line %d: %s\nfinetune.py: %s", cmd, what, i + 1, line, want[i]);
        i++;
        if (last) break;
        line = nl + 1;
    }
    ck_assert_msg(i == n_want, "%s: %d %s lines, finetune.py %d", cmd, i, what, n_want);
    (void)run;
}

static void check_log(const char *cmd, const char *log, const Run *run, bool exact) {
    char *text = read_text(log), *p = text;
    for (int k = 0; k < run->n_log; k++) {
        long step;
        double l;
        int used = 0;
        ck_assert_msg(sscanf(p, "step %ld loss %lf\n%n", &step, &l, &used) == 2 && step == k, "%s: log line %d", cmd, k);
        ck_assert_msg(fabs(l - run->log[k]) <= (exact ? 1e-5 : 1e-4), "%s: step %d loss %.6f, finetune.py %.6f", cmd, k, l,
                      run->log[k]);
        p += used;
    }
    ck_assert_msg(*p == 0, "%s: more log lines than finetune.py's %d", cmd, run->n_log);
    free(text);
}

/* Each record of the golden file run as `finetune COMMAND`, in exact then the default math */
static void check_against_pytorch(const char *golden_file, const char *command, const char *data, int want_runs) {
    static Run runs[8];
    int n = load_runs(golden_file, runs, 8);
    ck_assert_int_eq(n, want_runs);
    char *dir = temp_dir(), cmd[4096], log[600], resp[600], *out;
    write_gpt2(dir, true, NULL, NULL, NULL);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(resp, sizeof resp, "%s/responses.json", dir);
    /* Under ASan the runs are for memory errors: the default math's alone (the same code but the exact
     * kernels, which the other suites run under ASan; exact math's scalar sums are its slow half) */
    for (int exact = under_asan() ? 0 : 1; exact >= 0; exact--) {
        for (int r = 0; r < n; r++) {
            char extra[700] = "";
            if (runs[r].n_resp) snprintf(extra, sizeof extra, " --responses %s", resp);
            snprintf(cmd, sizeof cmd, "%s/finetune %s %s --tokenizer %s --data %s --log %s%s%s 2>/dev/null", build_dir(), command,
                     subst_dir(runs[r].flags, dir), shared_path("data/gpt2"), shared_path(data), log, extra,
                     exact ? " --exact" : "");
            ck_assert_msg(run_command(cmd, &out) == 0, "%s failed", cmd);
            compare_lines(cmd, out, &runs[r], exact, "printed", runs[r].out, runs[r].n_out);
            free(out);
            check_log(cmd, log, &runs[r], exact);
            if (runs[r].n_resp) { /* byte for byte in exact math */
                char *text = read_text(resp);
                compare_lines(cmd, text, &runs[r], exact, "--responses", runs[r].resp, runs[r].n_resp);
                free(text);
            }
        }
    }
    free_runs(runs, n);
    remove_dir(dir);
}

START_TEST(test_classify_against_pytorch) {
    check_against_pytorch("classify_golden.txt", "classify", "data/sms_spam_sample.tsv", 4);
}
END_TEST

START_TEST(test_instruct_against_pytorch) {
    check_against_pytorch("instruct_run_golden.txt", "instruct", "data/instruction-data.json", 2);
}
END_TEST

/* Each bad input refused with exit 1 and a message naming the line, the entry and key, or the sizes,
 * before any training; a bad flag with exit 2 (argparse's status). */
START_TEST(test_refusals) {
    static const struct { const char *command, *file, *flags, *want; int rc; } cases[] = {
        {"classify", "ham\thello\nspam\ta\tb\n", "", "Expected 2 fields in line 2, saw 3", 1},
        {"classify", "ham\thello\nfoo\tbar\n", "", "line 2: label \"foo\" is not ham or spam", 1},
        {"classify", "ham\thello\nspam\t\n", "", "line 2: empty text", 1},
        {"classify", "ham\thello\nham\tbar\n", "", "no spam", 1},
        {"classify", "spam\thello\nspam\tbar\n", "", "no ham", 1},
        {"classify", "ham\ta\nham\tb\nham\tc\nspam\td\nspam\te\nspam\tf\n", "",
         "the training split has 4 of 6 balanced texts", 1},
        {"classify", NULL, "--context 10", "Dataset length 25 exceeds model's context length 10", 1},
        {"classify", NULL, "--lora 0", "--lora expects an integer from 1", 2},
        {"classify", NULL, "--show-batches", "--show-batches goes with instruct and dpo, not classify", 2},
        {"classify", NULL, "--gpt2 x --emb-dim 8", "--emb-dim is not used with --gpt2", 2},
        {"classify", NULL, "--load x --save y", "--load skips training", 2},
        {"classify", NULL, "--log /nonexistent-dir/log.txt", "--log", 1},
        {"instruct", "{\"instruction\": \"a\"}", "", "not a list", 1},
        {"instruct", "[{\"instruction\": \"a\", \"input\": 3, \"output\": \"b\"}]", "", "entry 0: 'input' is int, not str", 1},
        {"instruct", "[{\"instruction\": \"a\", \"output\": \"b\"}]", "", "entry 0: key 'input' is missing", 1},
        {"instruct", "[{\"instruction\": \"a\",, }]", "", "line 1 column", 1},
        {"instruct", NULL, "--subset 5", "the training split has 5 entries, fewer than one --batch", 1},
        {"instruct", NULL, "--subset 16 --context 40", "training entry 0 has 74 tokens, more than the model's context_length 40", 1},
        {"instruct", NULL, "--subset 16 --responses /nonexistent-dir/r.json", "--responses", 1},
        {"instruct", NULL, "--prompt hi", "give its weights with --load FILE", 2},
        {"instruct", NULL, "--lora 2", "--lora goes with classify, not instruct", 2},
    };
    char *dir = temp_dir(), path[600], cmd[2048], *out;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool cls = !strcmp(cases[i].command, "classify");
        if (cases[i].file) {
            snprintf(path, sizeof path, "%s/bad.%s", dir, cls ? "tsv" : "json");
            FILE *f = fopen(path, "w");
            fputs(cases[i].file, f);
            fclose(f);
        } else {
            snprintf(path, sizeof path, "%s", shared_path(cls ? "data/sms_spam_sample.tsv" : "data/instruction-data.json"));
        }
        char split[700] = "";
        if (cls) snprintf(split, sizeof split, "--split-dir %s/split%zu", dir, i);
        snprintf(cmd, sizeof cmd, "%s/finetune %s --data %s --tokenizer %s %s %s 2>&1 >/dev/null", build_dir(),
                 cases[i].command, path, shared_path("data/gpt2"), split, cases[i].flags);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == cases[i].rc, "%s: status %d, want %d", cmd, rc, cases[i].rc);
        ck_assert_msg(strstr(out, cases[i].want), "%s: said\n%s\nwant: %s", cmd, out, cases[i].want);
        free(out);
        if (cls && cases[i].file) { /* refused before the splits were written */
            struct stat st;
            snprintf(path, sizeof path, "%s/split%zu", dir, i);
            ck_assert_msg(stat(path, &st) != 0, "%s: %s was made", cmd, path);
        }
    }
    remove_dir(dir);
}
END_TEST

/* --save, then --load: the same answers without training; --prompt streams the one respond() gives */
START_TEST(test_instruct_load_and_prompt) {
    char *dir = temp_dir(), cmd[4096], *trained, *loaded, *answer;
    const char *common = "--subset 8 --batch 4 --allowed-max-length 24 --max-new-tokens 12";
    snprintf(cmd, sizeof cmd, "%s/finetune instruct %s --epochs 1 --tokenizer %s --save %s/m.safetensors 2>/dev/null",
             build_dir(), common, shared_path("data/gpt2"), dir);
    ck_assert_int_eq(run_command(cmd, &trained), 0);
    snprintf(cmd, sizeof cmd, "%s/finetune instruct %s --tokenizer %s --load %s/m.safetensors 2>/dev/null", build_dir(),
             common, shared_path("data/gpt2"), dir);
    ck_assert_int_eq(run_command(cmd, &loaded), 0);
    const char *a = strstr(trained, "\nModel response:"), *b = strstr(loaded, "\nModel response:");
    ck_assert_msg(a && b && !strcmp(a, b), "the loaded model answers otherwise:\n%s\n----\n%s", a, b);
    /* test entry 1 (of the data, 936) has no input: --prompt its instruction gives its answer */
    const char *second = strstr(a + 1, "\nModel response:\n>> ");
    ck_assert(second);
    second += strlen("\nModel response:\n>> ");
    snprintf(cmd, sizeof cmd, "%s/finetune instruct --max-new-tokens 12 --tokenizer %s --load %s/m.safetensors "
             "--prompt 'What type of cloud is typically associated with thunderstorms?' 2>/dev/null", build_dir(),
             shared_path("data/gpt2"), dir);
    ck_assert_int_eq(run_command(cmd, &answer), 0);
    ck_assert_msg(!strncmp(answer, second, strlen(answer) - 1) && second[strlen(answer) - 1] == '\n',
                  "--prompt answered\n%s\nthe run: %.200s", answer, second);
    free(trained), free(loaded), free(answer);
    remove_dir(dir);
}
END_TEST

Suite *suite_finetune(void) {
    Suite *s = suite_create("finetune");
    TCase *tc = tcase("finetune");
    tcase_add_test(tc, test_chapter6_frozen_model);
    tcase_add_test(tc, test_appendix_e_lora);
    tcase_add_test(tc, test_lora_refusals);
    tcase_add_test(tc, test_setattr_order_and_ownership);
    tcase_add_test(tc, test_classify_against_pytorch);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_instruct_against_pytorch);
    tcase_add_test(tc, test_instruct_load_and_prompt);
    suite_add_tcase(s, tc);
    return s;
}
