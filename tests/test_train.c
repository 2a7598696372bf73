/* The trainer: the same loss as PyTorch's toy_lm.py at every step, resuming
 * from a checkpoint, checkpoints that are refused, and its flags. Runs the
 * real ./build/train (or $AC_BUILD/train). */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests.h"

/* "step N loss X" lines -> losses[N-1]; returns the number of lines. */
static int parse_losses(const char *text, double *losses, int cap, int *first_step) {
    int n = 0;
    for (const char *p = strstr(text, "step "); p && n < cap; p = strstr(p + 1, "\nstep ")) {
        if (*p == '\n') p++;
        int s;
        double l;
        if (sscanf(p, "step %d loss %lf", &s, &l) != 2) break;
        if (n == 0 && first_step) *first_step = s;
        losses[n++] = l;
    }
    return n;
}

/* The golden line `name flags | n l1 ... ln` of toy_lm_losses.txt. */
static int golden_losses(const char *name, char *flags, size_t flen, double *l) {
    char *text = read_text(data_path("toy_lm_losses.txt"));
    char *p = strstr(text, name);
    ck_assert(p != NULL);
    char *bar = strchr(p, '|');
    size_t n = (size_t)(bar - p) - strlen(name);
    snprintf(flags, flen, "%.*s", (int)n, p + strlen(name));
    char *e;
    int cnt = (int)strtol(bar + 1, &e, 10);
    for (int i = 0; i < cnt; i++) l[i] = strtod(e, &e);
    free(text);
    return cnt;
}

/* The loss at every step against toy_lm.py's. Exact math: equal to the last
 * printed digit (2e-6: the two printouts may round a value on the boundary
 * apart). Fast math (FMA kernels, other roundings): within 1e-4. */
static void check_against_pytorch(const char *name, const char *mode, double tol) {
    double want[400], got[400];
    char flags[256], cmd[1024];
    int n = golden_losses(name, flags, sizeof flags, want);
    snprintf(cmd, sizeof cmd, "%s/train %s --data %s %s", build_dir(), mode, shared_path("data/the-verdict.txt"), flags);
    char *out;
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_int_eq(parse_losses(out, got, 400, NULL), n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (d > worst) worst = d;
        ck_assert_msg(d <= tol, "%s step %d: loss %.6f, PyTorch %.6f", name, i + 1, got[i], want[i]);
    }
    fprintf(stderr, "train %s (%s): %d steps, largest difference from PyTorch %.2g\n", name, mode[0] ? mode : "fast math",
            n, worst);
    free(out);
}

START_TEST(test_same_loss_as_pytorch_default_flags) { check_against_pytorch("default", "--exact", 2e-6); }
END_TEST

START_TEST(test_same_loss_as_pytorch_other_flags) { check_against_pytorch("custom", "--exact", 2e-6); }
END_TEST

START_TEST(test_fast_math_within_1e4_of_pytorch) {
    check_against_pytorch("default", "", 1e-4);
    check_against_pytorch("custom", "", 1e-4);
    check_against_pytorch("default", "--attention fused", 1e-4); /* the fused attention, too */
    check_against_pytorch("custom", "--attention fused --threads 3", 1e-4);
}
END_TEST

START_TEST(test_resume_from_checkpoint) {
    char dir[] = "/tmp/ac_train_XXXXXX", cmd[1024], *full, *first, *second, *log;
    ck_assert(mkdtemp(dir) != NULL);
    const char *data = shared_path("data/the-verdict.txt"), *b = build_dir();
    snprintf(cmd, sizeof cmd, "%s/train --data %s --steps 30 --batch 4 --context 16 --dim 16 --heads 2", b, data);
    ck_assert_int_eq(run_command(cmd, &full), 0);
    snprintf(cmd, sizeof cmd, "%s/train --data %s --steps 18 --batch 4 --context 16 --dim 16 --heads 2 --save %s/ck.safetensors --log %s/log.txt",
             b, data, dir, dir);
    ck_assert_int_eq(run_command(cmd, &first), 0);
    snprintf(cmd, sizeof cmd, "%s/train --data %s --steps 12 --batch 4 --context 16 --dim 16 --heads 2 --load %s/ck.safetensors",
             b, data, dir);
    ck_assert_int_eq(run_command(cmd, &second), 0);
    /* steps 1-18, then 19-30 after the reload: the same text as one run of 30 */
    size_t l1 = strlen(first);
    ck_assert(strncmp(full, first, l1) == 0);
    ck_assert_msg(strcmp(full + l1, second) == 0, "resumed:\n%s\nuninterrupted:\n%s", second, full + l1);
    char path[300];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    log = read_text(path);
    ck_assert_str_eq(log, first); /* --log holds the same lines */
    /* no temporary file is left behind */
    snprintf(path, sizeof path, "%s/ck.safetensors.tmp", dir);
    ck_assert(access(path, F_OK) != 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(full), free(first), free(second), free(log);
}
END_TEST

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    ck_assert(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* Bad checkpoints are refused with a message, and the model is left as it was. */
START_TEST(test_bad_checkpoints_refused) {
    char dir[] = "/tmp/ac_ckpt_XXXXXX", path[256], err[512];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    torch_manual_seed(1);
    nn_ToyLM *m = nn_ToyLM_new(10, 8, 8, 2);
    nn_TensorList sd = nn_state_dict(&m->module);
    ck_assert(safetensors_save(path, sd, 1, (const char *[]){"note", "a \"quoted\" value"}, err, sizeof err));
    char *good = read_text(path);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fclose(f);
    /* it reads back whole */
    safetensors_File sf;
    ck_assert_msg(safetensors_load(path, &sf, err, sizeof err), "%s", err);
    ck_assert_int_eq(sf.tensors.n, sd.n);
    ck_assert_str_eq(safetensors_meta(&sf, "note"), "a \"quoted\" value");
    ck_assert(safetensors_copy_into(&sf, sd, NULL, true, err, sizeof err));

    /* every dtype round-trips, value for value */
    {
        char rt[300];
        snprintf(rt, sizeof rt, "%s/dtypes.safetensors", dir);
        Tensor *all[] = {torch_tensor_double((const double[]){1.5, -2.25}, SHAPE(2)),
                         torch_tensor_int((const int32_t[]){7, -8, 9}, SHAPE(3)),
                         torch_tensor_long((const int64_t[]){1LL << 40}, SHAPE(1, 1)),
                         torch_tensor_bool((const bool[]){true, false}, SHAPE(2)),
                         torch_transpose(torch_reshape(torch_arange_float(0, 6, 1), SHAPE(2, 3)), 0, 1)};
        const char *nm[] = {"f64", "i32", "i64", "bool", "f32_transposed"};
        ck_assert_msg(safetensors_save(rt, (nn_TensorList){5, nm, all}, 0, NULL, err, sizeof err), "%s", err);
        safetensors_File rf;
        ck_assert_msg(safetensors_load(rt, &rf, err, sizeof err), "%s", err);
        ck_assert_int_eq(rf.tensors.n, 5);
        for (int i = 0; i < 5; i++) {
            Tensor *got = safetensors_get(&rf, nm[i]);
            ck_assert_msg(got && got->dtype == all[i]->dtype, "%s: dtype", nm[i]);
            ck_assert_str_eq(torch_repr(got), torch_repr(all[i]));
        }
    }

    /* a different model to load into: its weights must survive every refusal */
    torch_manual_seed(2);
    nn_ToyLM *other = nn_ToyLM_new(10, 8, 8, 2);
    nn_TensorList od = nn_state_dict(&other->module);
    float before = ac_data_float(od.tensors[0])[0];

    struct { const char *what; size_t len; const char *patch; size_t at; const char *msg; } cases[] = {
        {"empty", 0, NULL, 0, "shorter than its 8-byte header length"},
        {"truncated header", 20, NULL, 0, "corrupt safetensors header length"},
        {"truncated data", size - 7, NULL, 0, "truncated"},
        {"corrupt json", size, "{\"tok_emb.weight\":[", 8, "corrupt"},
        {"bad dtype", 0, NULL, 0, "dtype"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *bytes = malloc(size + 64);
        memcpy(bytes, good, size);
        size_t len = cases[i].len;
        if (i == 4) { /* F32 -> F16 for the first tensor */
            char *d = strstr(bytes + 8, "\"F32\"");
            ck_assert(d != NULL);
            memcpy(d, "\"F16\"", 5);
            len = size;
        }
        if (cases[i].patch) memcpy(bytes + cases[i].at, cases[i].patch, strlen(cases[i].patch));
        char bad[300];
        snprintf(bad, sizeof bad, "%s/bad%zu.safetensors", dir, i);
        write_bytes(bad, bytes, len);
        free(bytes);
        safetensors_File bf;
        ck_assert_msg(!safetensors_load(bad, &bf, err, sizeof err), "%s was accepted", cases[i].what);
        ck_assert_msg(strstr(err, cases[i].msg) != NULL, "%s: \"%s\" lacks \"%s\"", cases[i].what, err, cases[i].msg);
    }
    /* well-formed but not this model: other shapes, other names */
    torch_manual_seed(3);
    nn_ToyLM *wide = nn_ToyLM_new(10, 8, 16, 2);
    snprintf(path, sizeof path, "%s/wide.safetensors", dir);
    ck_assert(safetensors_save(path, nn_state_dict(&wide->module), 0, NULL, err, sizeof err));
    ck_assert(safetensors_load(path, &sf, err, sizeof err));
    ck_assert(!safetensors_copy_into(&sf, od, NULL, true, err, sizeof err));
    ck_assert_msg(strstr(err, "tensor \"tok_emb.weight\": the file has F32 [10, 16], the model expects F32 [10, 8]"), "%s", err);
    Tensor *one = torch_zeros(SHAPE(1));
    snprintf(path, sizeof path, "%s/names.safetensors", dir);
    ck_assert(safetensors_save(path, (nn_TensorList){1, (const char *[]){"something.else"}, &one}, 0, NULL, err, sizeof err));
    ck_assert(safetensors_load(path, &sf, err, sizeof err));
    ck_assert(!safetensors_copy_into(&sf, od, NULL, true, err, sizeof err));
    ck_assert_msg(strstr(err, "missing tensor \"tok_emb.weight\""), "%s", err);
    ck_assert(ac_data_float(od.tensors[0])[0] == before);
    /* a missing file */
    ck_assert(!safetensors_load("/nonexistent/x.safetensors", &sf, err, sizeof err));
    ck_assert(strstr(err, "cannot open /nonexistent/x.safetensors") != NULL);

    /* the trainer refuses a file that is not its checkpoint, and says why (exit 1, no crash) */
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s/train --steps 1 --dim 32 --load %s/wide.safetensors 2>&1", build_dir(), dir);
    ck_assert_int_eq(run_command(cmd, &out), 1);
    ck_assert_msg(strstr(out, "--load") && strstr(out, "metadata lacks \"format\""), "%s", out);
    free(out);
    /* the same shapes, another head count: refused by the recorded sizes */
    snprintf(cmd, sizeof cmd, "%s/train --steps 2 --context 8 --dim 8 --heads 2 --save %s/h2.safetensors >/dev/null 2>&1 && "
             "%s/train --steps 1 --context 8 --dim 8 --heads 4 --load %s/h2.safetensors 2>&1", build_dir(), dir, build_dir(), dir);
    ck_assert_int_eq(run_command(cmd, &out), 1);
    ck_assert_msg(strstr(out, "trained with --context 8 --dim 8 --heads 2; this run has --context 8 --dim 8 --heads 4"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(good);
    nn_free(&m->module);
    nn_free(&other->module);
    nn_free(&wide->module);
}
END_TEST

/* Ctrl-C stops after the current step and saves it: nothing is lost. */
START_TEST(test_interrupt_saves) {
    char dir[] = "/tmp/ac_int_XXXXXX", cmd[512], *out;
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd, "timeout --preserve-status -s INT 2 %s/train --steps 1000000 --save %s/ck.safetensors 2>&1", build_dir(), dir);
    ck_assert_int_eq(run_command(cmd, &out), 130); /* 128 + SIGINT, as a shell reports it */
    char *last = strstr(out, "train: stopped by signal 2 after step ");
    ck_assert_msg(last != NULL, "%s", out + (strlen(out) > 300 ? strlen(out) - 300 : 0));
    long stopped = strtol(last + strlen("train: stopped by signal 2 after step "), NULL, 10);
    ck_assert(stopped > 0);
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    safetensors_File f;
    ck_assert_msg(safetensors_load(path, &f, err, sizeof err), "%s", err);
    ck_assert_int_eq(strtol(safetensors_meta(&f, "step"), NULL, 10), stopped);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_flags_and_builtin_text) {
    char cmd[512], *out;
    const char *b = build_dir();
    snprintf(cmd, sizeof cmd, "%s/train --steps 3 --sample 40 --prompt 'The ' 2>&1", b);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "step 3 loss ") && strstr(out, "--- sample ---\nThe "), "%s", out);
    free(out);
    /* a character the text never has: named once, before training, and skipped */
    snprintf(cmd, sizeof cmd, "%s/train --steps 1 --sample 5 --prompt \"$(printf 'The\\303\\251')\" 2>&1", b);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "train: --prompt: '\303\251' is not in the training text: skipped\nstep 1 loss") &&
                  strstr(out, "--- sample ---\nThe"), "%s", out);
    free(out);
    /* a text without "A" and no --prompt: its first character, with no warning */
    char *dir = temp_dir(), path[300];
    snprintf(path, sizeof path, "%s/t.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("the cat sat on the mat, and the dog sat on the log; the end of the tale.", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/train --data %s --context 8 --steps 1 --sample 5 2>&1", b, path);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "step 1 loss") && !strstr(out, "prompt") && strstr(out, "\nt"), "%s", out);
    free(out);
    remove_dir(dir);
    /* --load without the --data it was trained on: the message says --data was not given */
    dir = temp_dir();
    snprintf(cmd, sizeof cmd, "%s/train --data %s --steps 1 --save %s/v.st >/dev/null 2>&1 && %s/train --load %s/v.st --steps 1 2>&1",
             b, shared_path("data/the-verdict.txt"), dir, b, dir);
    ck_assert_int_eq(run_command(cmd, &out), 1);
    ck_assert_msg(strstr(out, "different character vocabulary\ntrain: --data was not given, so this run has the built-in text"),
                  "%s", out);
    free(out);
    remove_dir(dir);
    /* a picture of a prompt longer than the context says it shows the prompt's end */
    dir = temp_dir();
    snprintf(cmd, sizeof cmd, "%s/train --steps 1 --context 4 --attention-svg %s/a.svg --prompt 'Attention lets' 2>&1", b, dir);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "train: --attention-svg shows the last 4 of the prompt's 14 characters (--context 4)"), "%s", out);
    free(out);
    remove_dir(dir);
    /* one line, not the usage, after a mistake */
    snprintf(cmd, sizeof cmd, "%s/train --bogus 1 2>&1", b);
    ck_assert_int_eq(run_command(cmd, &out), 2);
    ck_assert_str_eq(out, "train: unknown flag --bogus\ntrain: train --help lists the flags\n");
    free(out);
    struct { const char *flags; int rc; const char *msg; } bad[] = {
        {"--dim 10 --heads 4", 2, "--dim (10) must be divisible by --heads (4)"},
        {"--steps -1", 2, "--steps expects an integer >= 0, got '-1'"},
        {"--lr abc", 2, "--lr expects a number"},
        {"--bogus 1", 2, "unknown flag --bogus"},
        {"--steps", 2, "train: --steps needs a value"},
        {"--lr -1", 2, "--lr expects a number >= 0, got '-1'"},
        {"--temperature 0", 2, "--temperature expects a number > 0, got '0'"},
        {"--save-every 5", 2, "--save-every 5 needs --save FILE"},
        {"--prompt ZZZ --steps 1", 2, "--prompt \"ZZZ\": none of its characters is in the training text"},
        {"--prompt \"$(printf 'a\\377')\" --steps 1", 2, "--prompt is not UTF-8 (byte 1)"},
        {"--load /tmp", 1, "train: --load: /tmp is a directory, not a safetensors file\n"},
        {"--attention-svg /nonexistent/dir/a.svg", 1, "train: --attention-svg: cannot write /nonexistent/dir/a.svg"},
        {"--data /nonexistent/file.txt", 1, "--data: cannot open /nonexistent/file.txt: No such file or directory"},
        {"--data /tmp", 1, "--data: cannot read /tmp: Is a directory"},
        {"--context 5000", 1, "--context 5000 needs more than that"},
        {"--context 9223372036854775807", 1, "--context 9223372036854775807 needs more than that"},
        {"--lr 1e300", 2, "--lr 1e300 is not finite in float32"},
        {"--seed 18446744073709551616", 2, "--seed expects an integer from -2^63 to 2^64-1"},
        {"--save /nonexistent/dir/ck.safetensors", 1, "train: --save: cannot write /nonexistent/dir/ck.safetensors: the directory /nonexistent/dir does not exist"},
        {"--attention flash", 2, "--attention expects fused or explicit, got 'flash'"},
        {"--threads 0", 2, "--threads expects an integer >= 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s/train %s 2>&1", b, bad[i].flags);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == bad[i].rc && strstr(out, bad[i].msg), "%s: rc %d, output:\n%s", bad[i].flags, rc, out);
        free(out);
    }
}
END_TEST

Suite *suite_train(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase("trainer");
    tcase_add_test(tc, test_same_loss_as_pytorch_default_flags);
    tcase_add_test(tc, test_same_loss_as_pytorch_other_flags);
    tcase_add_test(tc, test_fast_math_within_1e4_of_pytorch);
    tcase_add_test(tc, test_resume_from_checkpoint);
    tcase_add_test(tc, test_bad_checkpoints_refused);
    tcase_add_test(tc, test_interrupt_saves);
    tcase_add_test(tc, test_flags_and_builtin_text);
    suite_add_tcase(s, tc);
    return s;
}
