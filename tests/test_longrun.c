/* Long runs lose nothing (examples/longrun.h): a trainer stopped by a signal saves where it stands and
 * says so in one stderr line; --resume (finetune) goes on, and the two runs' stdout, --log,
 * --responses and --plot together are the uninterrupted run's, byte for byte, in exact and in the
 * default math. The stops fall at exact points through AC_TEST_SIGNAL (the program raises the
 * signal itself there; the handler and the save are the ones a Ctrl-C reaches), and one real
 * signal from outside, and two in a row, are sent as a user would. Every refusal of a bad flag or
 * file comes before the first line of stdout; a stdout that cannot be written stops a run at once. */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpt.h"
#include "tests.h"

static char *file_or_empty(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return calloc(1, 1);
    return read_text(path);
}

static void assert_same_file(const char *a, const char *b, const char *what) {
    char *x = file_or_empty(a), *y = file_or_empty(b);
    ck_assert_msg(!strcmp(x, y), "%s differs:\n%.2000s\n---- the uninterrupted run's:\n%.2000s", what, x, y);
    free(x), free(y);
}

/* `finetune FLAGS` uninterrupted, then stopped at `where` (AC_TEST_SIGNAL) with --save, then
 * --resume: stdout, --log, and (when asked) --responses and --plot, the same. Returns the stop's
 * stderr (malloc'd). */
static char *stop_and_resume(const char *dir, const char *flags, const char *where, int want_rc, bool with_files) {
    char cmd[4096], base[2048], files[1200] = "";
    snprintf(base, sizeof base, "%s/finetune %s --tokenizer %s", build_dir(), flags, shared_path("data/gpt2"));
    const char *names[] = {"full", "half"};
    for (int k = 0; k < 2; k++) {
        if (with_files)
            snprintf(files, sizeof files, " --responses %s/%s.json --plot %s/%s.svg", dir, names[k], dir, names[k]);
        if (k == 0) {
            snprintf(cmd, sizeof cmd, "%s --log %s/full.log%s > %s/full.txt 2>/dev/null", base, dir, files, dir);
            ck_assert_msg(system(cmd) == 0, "%s", cmd);
            continue;
        }
        snprintf(cmd, sizeof cmd, "AC_TEST_SIGNAL='%s' %s --log %s/half.log%s --save %s/run.safetensors > %s/a.txt 2>%s/a.err",
                 where, base, dir, files, dir, dir, dir);
        int st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want_rc, "%s: status %d, want %d", cmd, WEXITSTATUS(st), want_rc);
        snprintf(cmd, sizeof cmd, "%s --log %s/half.log%s --resume %s/run.safetensors > %s/b.txt 2>/dev/null", base, dir,
                 files, dir, dir);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
    }
    snprintf(cmd, sizeof cmd, "cat %s/a.txt %s/b.txt > %s/both.txt", dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    char p1[700], p2[700];
#define SAME(x, y, what) (snprintf(p1, sizeof p1, "%s/%s", dir, x), snprintf(p2, sizeof p2, "%s/%s", dir, y), \
                          assert_same_file(p1, p2, what))
    SAME("both.txt", "full.txt", "stdout before the stop and after --resume");
    SAME("half.log", "full.log", "--log across the stop");
    if (with_files) {
        SAME("half.json", "full.json", "--responses across the stop");
        SAME("half.svg", "full.svg", "--plot across the stop");
    }
#undef SAME
    snprintf(p1, sizeof p1, "%s/a.err", dir);
    char *err = read_text(p1);
    /* the one line, last on stderr, after the handler's "stopping after this ..." */
    const char *line = strstr(err, "finetune: stopped by signal ");
    ck_assert_msg(line && strstr(line, "; saved to ") && !strchr(strchr(line, '\n') + 1, '\n'), "stderr: %s", err);
    return err;
}

static void each_math(const char *dir, const char *flags, const char *where, int rc, bool files, const char *after) {
    for (int exact = under_asan() ? 0 : 1; exact >= 0; exact--) {
        char f[1500];
        snprintf(f, sizeof f, "%s%s", flags, exact ? " --exact" : "");
        char *err = stop_and_resume(dir, f, where, rc, files);
        ck_assert_msg(strstr(err, after), "%s: want '%s' in: %s", f, after, err);
        free(err);
    }
}

START_TEST(test_classify_stops_and_resumes) {
    char *dir = temp_dir();
    const char *cls = "classify --epochs 2 --eval-freq 3";
    each_math(dir, cls, "step 4", 130, false, "after step 4;");                   /* inside the first epoch */
    each_math(dir, cls, "step 9", 130, false, "after step 9;");                   /* its last step: the epoch's end comes after */
    each_math(dir, cls, "step 12 15", 143, false, "stopped by signal 15 after step 12;"); /* SIGTERM */
    each_math(dir, cls, "line 2", 130, false, "after training and 2 of the 5 final lines;");
    remove_dir(dir);
}
END_TEST

START_TEST(test_lora_stops_and_resumes) {
    char *dir = temp_dir();
    const char *lora = "classify --lora 4 --lora-alpha 8 --emb-dim 16 --heads 4 --layers 2 --batch 4 --epochs 2 "
                       "--eval-freq 7 --max-length 20 --seed 7";
    each_math(dir, lora, "step 11", 130, false, "after step 11;");
    each_math(dir, lora, "line 4", 130, false, "after training and 4 of the 5 final lines;");
    remove_dir(dir);
}
END_TEST

START_TEST(test_instruct_stops_and_resumes) {
    char *dir = temp_dir();
    const char *ins = "instruct --subset 24 --batch 4 --allowed-max-length 24 --epochs 2 --eval-freq 2 --eval-iter 1 "
                      "--max-new-tokens 6";
    each_math(dir, ins, "step 6", 130, true, "after step 6;");
    each_math(dir, ins, "step 4 1", 129, true, "stopped by signal 1 after step 4;"); /* SIGHUP, the epoch's last step */
    each_math(dir, ins, "answer 2", 130, true, "after answer 2 of 24;");
    remove_dir(dir);
}
END_TEST

/* gpt train and the toy trainer, stopped and resumed by their --load, in both maths: the halves'
 * stdout and --log are the uninterrupted run's */
START_TEST(test_gpt_and_train_stop_and_resume) {
    char *dir = temp_dir(), cmd[4096];
    static const struct { const char *base, *first, *rest, *where; } runs[] = {
        {"gpt train --data DATA --layers 2 --emb-dim 16 --heads 2 --context 12 --epochs 2 --eval-freq 3 --sample-tokens 4",
         "", "", "step 10"},
        {"train --data DATA --batch 4 --context 16", " --steps 40", " --steps 17", "step 23"},
    };
    for (int r = 0; r < 2; r++)
        for (int exact = under_asan() ? 0 : 1; exact >= 0; exact--) {
            char base[1500], *o = base;
            for (const char *p = runs[r].base; *p;)
                if (!strncmp(p, "DATA", 4)) o += sprintf(o, "%s", shared_path("data/the-verdict.txt")), p += 4;
                else *o++ = *p++;
            *o = 0;
            const char *tk = r == 0 ? " --tokenizer " : "", *tkp = r == 0 ? shared_path("data/gpt2") : "", *ex = exact ? " --exact" : "";
            snprintf(cmd, sizeof cmd, "%s/%s%s%s%s%s --log %s/full.log > %s/full.txt 2>/dev/null", build_dir(), base,
                     runs[r].first, tk, tkp, ex, dir, dir);
            ck_assert_msg(system(cmd) == 0, "%s", cmd);
            snprintf(cmd, sizeof cmd, "AC_TEST_SIGNAL='%s' %s/%s%s%s%s%s --log %s/half.log --save %s/ck.safetensors > %s/a.txt "
                     "2>%s/a.err", runs[r].where, build_dir(), base, runs[r].first, tk, tkp, ex, dir, dir, dir, dir);
            ck_assert_int_eq(WEXITSTATUS(system(cmd)), 130);
            snprintf(cmd, sizeof cmd, "%s/%s%s%s%s%s --log %s/half.log --load %s/ck.safetensors > %s/b.txt 2>/dev/null && "
                     "cat %s/a.txt %s/b.txt > %s/both.txt", build_dir(), base, r == 0 ? runs[r].first : runs[r].rest, tk, tkp, ex,
                     dir, dir, dir, dir, dir, dir);
            ck_assert_msg(system(cmd) == 0, "%s", cmd);
            char p1[700], p2[700];
            snprintf(p1, sizeof p1, "%s/both.txt", dir), snprintf(p2, sizeof p2, "%s/full.txt", dir);
            assert_same_file(p1, p2, runs[r].base);
            snprintf(p1, sizeof p1, "%s/half.log", dir), snprintf(p2, sizeof p2, "%s/full.log", dir);
            assert_same_file(p1, p2, runs[r].base);
            snprintf(p1, sizeof p1, "%s/a.err", dir);
            char *err = read_text(p1);
            ck_assert_msg(strstr(err, "stopped by signal 2 after step ") && strstr(err, "; saved to "), "%s", err);
            free(err);
        }
    remove_dir(dir);
}
END_TEST

/* finetune dpo: its policy, AdamW, the generator and the epoch's order; the reference model comes again
 * from the flags (and --load) as the first run built it */
START_TEST(test_dpo_stops_and_resumes) {
    char *dir = temp_dir();
    /* (one stop in each math: a DPO step is four forwards over a 50257-wide head, the suite's slowest runs) */
    const char *dpo = "dpo --subset 12 --batch 4 --epochs 2 --eval-freq 2 --eval-iter 1 --max-new-tokens 5 --lr 1e-3 "
                      "--allowed-max-length 80";
    char *err = under_asan() ? NULL : stop_and_resume(dir, "dpo --subset 12 --batch 4 --epochs 2 --eval-freq 2 --eval-iter 1 "
                                                           "--max-new-tokens 5 --lr 1e-3 --allowed-max-length 80 --exact",
                                                      "step 2", 130, true);
    ck_assert_msg(!err || strstr(err, "after step 2;"), "%s", err);
    free(err);
    err = stop_and_resume(dir, dpo, "answer 4", 130, true); /* the three printed pairs, then a --responses one */
    ck_assert_msg(strstr(err, "after answer 4 of 15;"), "%s", err);
    free(err);
    remove_dir(dir);
}
END_TEST

/* llm train (a small Qwen3 and a tied Llama 3), stopped at exact points (inside an epoch, at step 0,
 * after an epoch's last step, by SIGTERM and by SIGHUP) and resumed by --resume DIR, in both maths:
 * the halves' stdout and --log are the uninterrupted run's; the stop's --save DIR holds the Hugging
 * Face layout that llm generate --model loads. Refusals of --resume come before the first line. */
START_TEST(test_llm_train_stop_and_resume) {
    char *dir = temp_dir(), cmd[4096], base[2048], p1[700], p2[700];
    static const struct { const char *flags, *where; int rc, step; } runs[] = { /* (qwen_train: 56 steps an epoch) */
        {"--config DATA/llm/qwen_train.json --seed 123 --epochs 2 --batch 2 --eval-freq 5 --eval-iter 2 --sample-tokens 6", "step 7", 130, 7},
        {"--config DATA/llm/qwen_train.json --seed 123 --epochs 2 --batch 2 --eval-freq 5 --eval-iter 2 --sample-tokens 6", "step 55 15", 143, 55},
        {"--config DATA/llm/llama_train.json --seed 9 --epochs 2 --batch 3 --eval-freq 7 --eval-iter 1 --sample-tokens 5 --lr 0.001", "step 0 1", 129, 0},
    };
    for (int r = 0; r < 3; r++)
        for (int exact = under_asan() ? 0 : 1; exact >= 0; exact--) {
            char flags[600], *o = flags;
            for (const char *p = runs[r].flags; *p;)
                if (!strncmp(p, "DATA", 4)) o += sprintf(o, "%s", data_path("")), p += 4;
                else *o++ = *p++;
            *o = 0;
            snprintf(base, sizeof base, "%s/llm train %s --data %s --tokenizer %s%s", build_dir(), flags,
                     data_path("tokenizer_corpus.txt"), shared_path("data/gpt2"), exact ? " --exact" : "");
            snprintf(cmd, sizeof cmd, "%s --log %s/full.log > %s/full.txt 2>/dev/null", base, dir, dir);
            ck_assert_msg(system(cmd) == 0, "%s", cmd);
            snprintf(cmd, sizeof cmd, "rm -rf %s/s; AC_TEST_SIGNAL='%s' %s --log %s/half.log --save %s/s > %s/a.txt 2>%s/a.err",
                     dir, runs[r].where, base, dir, dir, dir, dir);
            int st = system(cmd);
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == runs[r].rc, "%s: status %d", cmd, WEXITSTATUS(st));
            snprintf(cmd, sizeof cmd, "%s --log %s/half.log --resume %s/s > %s/b.txt 2>/dev/null && cat %s/a.txt %s/b.txt > %s/both.txt",
                     base, dir, dir, dir, dir, dir, dir);
            ck_assert_msg(system(cmd) == 0, "%s", cmd);
            snprintf(p1, sizeof p1, "%s/both.txt", dir), snprintf(p2, sizeof p2, "%s/full.txt", dir);
            assert_same_file(p1, p2, runs[r].flags);
            snprintf(p1, sizeof p1, "%s/half.log", dir), snprintf(p2, sizeof p2, "%s/full.log", dir);
            assert_same_file(p1, p2, runs[r].flags);
            snprintf(p1, sizeof p1, "%s/a.err", dir);
            char *err = read_text(p1), want[128];
            snprintf(want, sizeof want, "llm: stopped by signal %d after step %d; saved to ", runs[r].rc - 128, runs[r].step);
            ck_assert_msg(strstr(err, want), "'%s' for '%s'", err, want);
            free(err);
        }
    /* the stop's weights answer llm generate --model */
    snprintf(cmd, sizeof cmd, "%s/llm generate --model %s/s --ids '1 2 3' --max-new-tokens 3 2>&1", build_dir(), dir);
    char *out;
    ck_assert_msg(run_command(cmd, &out) == 0, "%s", out);
    free(out);
    /* refusals before the first line of stdout (DIR/s: the Llama run's stop) */
    const char *bad[][2] = {{"--resume /nonexistent", "cannot open /nonexistent/train_state.safetensors"},
                            {"--resume DIR/s --batch 2", "was trained on 56 batches of 3 an epoch; this run has 84 of 2"},
                            {"--resume DIR/s --config CFG --context 8", "the model flags of the stopped run"}};
    for (int k = 0; k < 3; k++) {
        char arg[1400], *a = arg;
        for (const char *p = bad[k][0]; *p;)
            if (!strncmp(p, "DIR", 3)) a += sprintf(a, "%s", dir), p += 3;
            else if (!strncmp(p, "CFG", 3)) a += sprintf(a, "%s", data_path("llm/qwen_text.json")), p += 3;
            else *a++ = *p++;
        *a = 0;
        snprintf(cmd, sizeof cmd, "%s/llm train --config %s --seed 9 --epochs 2 --batch 3 --lr 0.001 --data %s --tokenizer %s %s 2>%s/e.err",
                 build_dir(), data_path("llm/llama_train.json"), data_path("tokenizer_corpus.txt"), shared_path("data/gpt2"), arg, dir);
        ck_assert_int_eq(run_command(cmd, &out), 1);
        ck_assert_msg(!*out, "%s: printed '%s' before refusing", arg, out);
        free(out);
        snprintf(p1, sizeof p1, "%s/e.err", dir);
        char *err = read_text(p1);
        ck_assert_msg(strstr(err, bad[k][1]), "%s: '%s' for '%s'", arg, err, bad[k][1]);
        free(err);
    }
    remove_dir(dir);
}
END_TEST

/* The file a stop leaves is loadable: --load answers with it, and its stand names the command */
START_TEST(test_stop_leaves_a_loadable_file) {
    char *dir = temp_dir(), cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "AC_TEST_SIGNAL='step 3' %s/finetune instruct --subset 16 --batch 4 --allowed-max-length 24 "
             "--epochs 1 --max-new-tokens 4 --tokenizer %s --save %s/s.safetensors > /dev/null 2>&1", build_dir(),
             shared_path("data/gpt2"), dir);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 130);
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/s.safetensors", dir);
    safetensors_File f;
    ck_assert_msg(safetensors_load(path, &f, err, sizeof err), "%s", err);
    ck_assert_str_eq(safetensors_meta(&f, "run"), "instruct");
    ck_assert_str_eq(safetensors_meta(&f, "global_step"), "3");
    ck_assert_str_eq(safetensors_meta(&f, "done"), "-1");
    ck_assert_msg(safetensors_get(&f, "rng_state") && safetensors_get(&f, "loader.order"), "no generator or order saved");
    ck_assert_msg(safetensors_get(&f, "optim.state.0.exp_avg"), "no AdamW state saved");
    snprintf(cmd, sizeof cmd, "%s/finetune instruct --subset 16 --batch 4 --allowed-max-length 24 --max-new-tokens 4 "
             "--tokenizer %s --load %s 2>&1", build_dir(), shared_path("data/gpt2"), path);
    ck_assert_msg(run_command(cmd, &out) == 0 && strstr(out, "Model response:"), "%s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* Real signals from outside, during training. One SIGINT: one line, a loadable file, exit 130. The
 * same SIGINT twice at once from one process, as timeout(1) sends it (to the program, then to its
 * process group): still one request, saved. A second SIGINT from another process once the first is
 * acknowledged: exit 130 at once, with no FILE.tmp left behind. */
START_TEST(test_real_signals) {
    char *dir = temp_dir(), cmd[4096], out1[700], errp[700];
    snprintf(out1, sizeof out1, "%s/out.txt", dir);
    snprintf(errp, sizeof errp, "%s/err.txt", dir);
    enum { ONCE, TWICE_AT_ONCE, AGAIN_LATER };
    for (int mode = ONCE; mode <= AGAIN_LATER; mode++) {
        unlink(out1); /* (the first run's lines must not start the second's signals) */
        unlink(errp);
        snprintf(cmd, sizeof cmd, "exec %s/finetune classify --epochs 100000 --eval-freq 5 --tokenizer %s --save %s/s.safetensors "
                 "> %s 2> %s", build_dir(), shared_path("data/gpt2"), dir, out1, errp);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        bool sent = false;
        for (int tries = 0; tries < 12000 && !sent; tries++) { /* up to 120 s to reach its second epoch */
            char *text = file_or_empty(out1);
            if (strstr(text, "Ep 2 ")) {
                sent = kill(pid, SIGINT) == 0;
                if (mode == TWICE_AT_ONCE) sent = kill(pid, SIGINT) == 0 && sent;
            }
            free(text);
            if (!sent) usleep(10000);
        }
        ck_assert_msg(sent, "the run never reached its second epoch");
        if (mode == AGAIN_LATER) {
            bool acknowledged = false;
            for (int tries = 0; tries < 10000 && !acknowledged; tries++) { /* up to 10 s */
                char *err = file_or_empty(errp);
                acknowledged = strstr(err, "stopping after this") != NULL;
                free(err);
                if (!acknowledged) usleep(1000);
            }
            ck_assert_msg(acknowledged, "the first SIGINT was not acknowledged on stderr");
            snprintf(cmd, sizeof cmd, "kill -INT %d 2>/dev/null", (int)pid); /* another process: a second request */
            ck_assert_int_eq(system(cmd) == -1, 0);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "exit status %d, want 130", WEXITSTATUS(st));
        char tmp[800];
        snprintf(tmp, sizeof tmp, "%s/s.safetensors.tmp", dir);
        struct stat sb;
        ck_assert_msg(stat(tmp, &sb) != 0, "%s was left behind", tmp);
        char *err = read_text(errp);
        if (mode != AGAIN_LATER) {
            ck_assert_msg(strstr(err, "finetune: stopped by signal 2 after step ") && strstr(err, "; saved to "), "%s", err);
            char path[700], e[512];
            snprintf(path, sizeof path, "%s/s.safetensors", dir);
            safetensors_File f;
            ck_assert_msg(safetensors_load(path, &f, e, sizeof e), "%s", e);
            unlink(path);
        }
        free(err);
    }
    remove_dir(dir);
}
END_TEST

/* Every refusal before the first line of stdout: exit 1 (2 for a flag), the reason on stderr, nothing printed */
START_TEST(test_refusals_before_output) {
    char *dir = temp_dir(), cmd[4096], *out;
    const char *tok = shared_path("data/gpt2");
    /* the files the cases name: a LoRA run's, an instruct run's, a stopped classify run's */
    snprintf(cmd, sizeof cmd, "%s/finetune classify --lora 4 --epochs 1 --tokenizer %s --save %s/lora.safetensors > /dev/null 2>&1 && "
             "%s/finetune instruct --subset 8 --batch 4 --allowed-max-length 24 --epochs 1 --max-new-tokens 2 --tokenizer %s "
             "--save %s/ins.safetensors > /dev/null 2>&1 && "
             "AC_TEST_SIGNAL='step 2' %s/finetune classify --epochs 1 --tokenizer %s --save %s/cls.safetensors > /dev/null 2>&1; "
             "test $? = 130", build_dir(), tok, dir, build_dir(), tok, dir, build_dir(), tok, dir);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    static const struct { const char *args, *needle; int rc; } cases[] = {
        {"finetune classify --gpt2 /nonexistent", "--gpt2 cannot open /nonexistent/config.json", 1},
        {"finetune instruct --gpt2 /nonexistent", "--gpt2 cannot open /nonexistent/config.json", 1},
        {"finetune classify --load DIR/lora.safetensors", "it holds LoRA tensors of rank 4 (a --lora 4 run's): add --lora 4", 1},
        {"finetune classify --lora 2 --load DIR/lora.safetensors", "its LoRA has rank 4: give --lora 4, not --lora 2", 1},
        {"finetune classify --load DIR/ins.safetensors", "it was saved by finetune instruct", 1},
        {"finetune instruct --subset 8 --batch 4 --allowed-max-length 24 --load DIR/lora.safetensors", "saved by finetune classify", 1},
        {"finetune classify --emb-dim 16 --load DIR/cls.safetensors", "give the model flags", 1},
        {"finetune classify --batch 4 --resume DIR/cls.safetensors", "this run has 21 of 4", 1},
        {"finetune instruct --subset 8 --batch 4 --resume DIR/cls.safetensors", "was saved by finetune classify", 1},
        {"finetune classify --resume /nonexistent.safetensors", "cannot open /nonexistent.safetensors", 1},
        {"finetune classify --resume DIR/cls.safetensors --load DIR/cls.safetensors", "give one", 2},
        {"finetune classify --save /nonexistent-dir/x.safetensors", "--save", 1},
        {"finetune classify --epoch 1", "did you mean --epochs?", 2},
        {"gpt generate --layers 1 --emb-dim 8 --heads 2 --context 8 --top-k 60000", "top_k (60000) is larger than the vocabulary", 1},
        {"gpt train --epoch 1", "unknown flag --epoch (did you mean --epochs?)", 2},
        {"gpt trian", "(did you mean train?)", 2},
        {"gpt train --data /nonexistent/text.txt", "cannot open /nonexistent/text.txt", 1},
        {"gpt generate --load /nonexistent.safetensors", "--load", 1},
        {"train --step 3", "did you mean --steps?", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[1500], *o = args;
        for (const char *p = cases[i].args; *p;) /* DIR: this test's directory */
            if (!strncmp(p, "DIR", 3)) o += sprintf(o, "%s", dir), p += 3;
            else *o++ = *p++;
        *o = 0;
        bool tk = strncmp(args, "train", 5) != 0;
        snprintf(cmd, sizeof cmd, "%s/%s%s%s 2>%s/err.txt", build_dir(), args, tk ? " --tokenizer " : "", tk ? tok : "", dir);
        int rc = run_command(cmd, &out);
        char ep[700];
        snprintf(ep, sizeof ep, "%s/err.txt", dir);
        char *err = read_text(ep);
        ck_assert_msg(rc == cases[i].rc && strstr(err, cases[i].needle) && !*out, "%s: status %d (want %d), stdout '%.300s', "
                      "stderr: %s (want '%s')", args, rc, cases[i].rc, out, err, cases[i].needle);
        free(out), free(err);
    }
    remove_dir(dir);
}
END_TEST

/* > /dev/full: the first printed line's failed write ends the run, not its end */
START_TEST(test_full_stdout_stops_at_once) {
    char *dir = temp_dir(), cmd[4096], *out;
    struct stat st;
    if (stat("/dev/full", &st) != 0) {
        remove_dir(dir);
        return;
    }
    const char *runs[] = {"gpt train --layers 1 --emb-dim 8 --heads 2 --context 8 --epochs 40 --eval-freq 1",
                          "finetune classify --epochs 40 --eval-freq 1"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s/%s --tokenizer %s --log %s/log.txt > /dev/full 2>&1; echo $?; wc -l < %s/log.txt",
                 build_dir(), runs[k], shared_path("data/gpt2"), dir, dir);
        ck_assert_int_eq(run_command(cmd, &out), 0);
        long rc = strtol(out, NULL, 10), lines = strtol(strchr(out, '\n') + 1, NULL, 10);
        ck_assert_msg(rc == 1 && lines <= 2, "%s: status %ld after %ld steps (want 1, at the first printed line)", runs[k], rc, lines);
        free(out);
    }
    remove_dir(dir);
}
END_TEST

Suite *suite_longrun(void) {
    Suite *s = suite_create("longrun");
    TCase *tc = tcase("longrun");
    tcase_set_tags(tc, "programs");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_classify_stops_and_resumes);
    tcase_add_test(tc, test_lora_stops_and_resumes);
    tcase_add_test(tc, test_instruct_stops_and_resumes);
    tcase_add_test(tc, test_dpo_stops_and_resumes);
    tcase_add_test(tc, test_gpt_and_train_stop_and_resume);
    tcase_add_test(tc, test_llm_train_stop_and_resume);
    tcase_add_test(tc, test_stop_leaves_a_loadable_file);
    tcase_add_test(tc, test_real_signals);
    tcase_add_test(tc, test_refusals_before_output);
    tcase_add_test(tc, test_full_stdout_stops_at_once);
    suite_add_tcase(s, tc);
    return s;
}
