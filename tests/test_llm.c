/* Qwen3 and Llama 3 (nn/blocks/blocks.h, nn/models/llm.h, ./build/llm) against tests/tools/llm_ref.py, the
 * book's classes in PyTorch 1.13 (tests/data/llm_golden.txt and the small models of tests/data/llm/,
 * made by tests/tools/gen_llm_golden.py):
 * - compute_rope_params's cos and sin, bit for bit (Qwen3's and Llama 3's scaled frequencies);
 * - finite-difference checks of RMSNorm, apply_rope, the SwiGLU FeedForward, GroupedQueryAttention
 *   (groups, a free head_dim, q/k norm) and a whole model, and that the check fails a wrong backward;
 * - `llm generate` gives the reference's ids on every model (GQA, q/k norm, tied and untied, F32,
 *   BF16, F16, sharded), greedy and sampled, with the KV cache on and off, in exact and default math;
 *   --config --seed makes the book's draws; print(model) is PyTorch's; the eos id stops it;
 * - `llm train` prints the reference's lines, and every step's loss within 1e-5 (exact math);
 * - Hugging Face's layout back and forth, and bad input refused naming the file and the key;
 * - `llm train --html` and `llm generate --html`: the reader's page, the run's output unchanged. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json.h"
#include "llm.h"
#include "tests.h"
#include "xml_check.h"

/* ---- records -------------------------------------------------------------------------------------- */

typedef struct { char flags[600]; int n_out, n_log; char *out[64]; double log[256]; } Run;

static int load_runs_from(const char *file, Run *runs, int max) {
    char *text = read_text(data_path(file)), *save = NULL;
    int n = -1;
    bool in_run = false;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "run ", 4)) {
            ck_assert(++n < max);
            memset(&runs[n], 0, sizeof runs[n]);
            snprintf(runs[n].flags, sizeof runs[n].flags, "%s", line + 4);
            in_run = true;
        } else if (in_run && !strncmp(line, "out ", 4)) {
            ck_assert(runs[n].n_out < 64);
            runs[n].out[runs[n].n_out++] = strdup(line + 4);
        } else if (in_run && !strncmp(line, "log ", 4)) {
            long step;
            double l;
            ck_assert(sscanf(line + 4, "%ld %lf", &step, &l) == 2 && step == runs[n].n_log && runs[n].n_log < 256);
            runs[n].log[runs[n].n_log++] = l;
        } else if (!strcmp(line, "end")) {
            in_run = false;
        }
    }
    free(text);
    return n + 1;
}

static int load_runs(Run *runs, int max) { return load_runs_from("llm_golden.txt", runs, max); }

static void free_runs(Run *runs, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < runs[i].n_out; j++) free(runs[i].out[j]);
}

static int split_lines(char *out, char ***lines) {
    int n = 0, cap = 0;
    *lines = NULL;
    for (char *p = out; *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (n == cap) *lines = realloc(*lines, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 64));
        (*lines)[n++] = strndup(p, len);
        p += len + (nl ? 1 : 0);
    }
    return n;
}

static int run_llm_tok(const char *tok, const char *flags, const char *extra, char ***lines, int *n) {
    char cmd[2048], *out;
    int w = snprintf(cmd, sizeof cmd, "%s/llm %s --tokenizer %s %s 2>/dev/null", build_dir(), flags, shared_path(tok), extra);
    ck_assert(w > 0 && (size_t)w < sizeof cmd);
    int rc = run_command(cmd, &out);
    *n = split_lines(out, lines);
    free(out);
    return rc;
}

static int run_llm(const char *flags, const char *extra, char ***lines, int *n) {
    return run_llm_tok("data/gpt2", flags, extra, lines, n);
}

static void free_lines(char **l, int n) {
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

/* every generate record (both cache settings are records of their own) in this math */
static void check_generate(const char *extra) {
    static Run runs[64];
    int nr = load_runs(runs, 64), checked = 0;
    for (int r = 0; r < nr; r++) {
        if (strncmp(runs[r].flags, "generate", 8)) continue;
        char **got;
        int n;
        int rc = run_llm(runs[r].flags, extra, &got, &n);
        ck_assert_msg(rc == 0, "llm %s %s: exit %d", runs[r].flags, extra, rc);
        ck_assert_msg(n == runs[r].n_out, "llm %s %s: %d lines, llm_ref.py printed %d", runs[r].flags, extra, n, runs[r].n_out);
        for (int i = 0; i < n; i++)
            ck_assert_msg(!strcmp(got[i], runs[r].out[i]), "llm %s %s:\n  '%s'\n  for llm_ref.py's '%s'", runs[r].flags,
                          extra, got[i], runs[r].out[i]);
        free_lines(got, n);
        checked++;
    }
    ck_assert_int_ge(checked, 30);
    free_runs(runs, nr);
}

START_TEST(test_generate_exact) { check_generate("--exact"); }
END_TEST

START_TEST(test_generate_default_math) { check_generate("--threads 2"); }
END_TEST

/* train: every line; the two initial losses (17 digits) within rel_init, the Ep lines within ep_tol;
 * every step's loss (--log) within log_tol */
static void check_train_in(const char *golden, const char *tok, const char *extra, double rel_init, double ep_tol,
                           double log_tol, int max_runs) {
    static Run runs[64];
    int nr = load_runs_from(golden, runs, 64), checked = 0;
    char *dir = temp_dir(), flags[1200], logp[1100];
    snprintf(logp, sizeof logp, "%s/log.txt", dir);
    for (int r = 0; r < nr && checked < max_runs; r++) {
        if (strncmp(runs[r].flags, "train", 5)) continue;
        char **got;
        int n;
        snprintf(flags, sizeof flags, "%s --log %s", extra, logp);
        ck_assert_int_eq(run_llm_tok(tok, runs[r].flags, flags, &got, &n), 0);
        char *log_text = read_text(logp), *save = NULL;
        int steps = 0;
        for (char *line = strtok_r(log_text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), steps++) {
            long step;
            double l;
            ck_assert_msg(sscanf(line, "step %ld loss %lf", &step, &l) == 2 && step == steps, "log line '%s'", line);
            ck_assert_msg(steps < runs[r].n_log, "more steps than llm_ref.py's %d", runs[r].n_log);
            ck_assert_msg(fabs(l - runs[r].log[steps]) <= log_tol, "llm %s: step %d loss %.6f, llm_ref.py's %.6f", runs[r].flags,
                          steps, l, runs[r].log[steps]);
        }
        ck_assert_int_eq(steps, runs[r].n_log);
        free(log_text);
        ck_assert_msg(n == runs[r].n_out, "llm %s: %d lines, llm_ref.py printed %d", runs[r].flags, n, runs[r].n_out);
        for (int i = 0; i < n; i++) {
            const char *g = got[i], *w = runs[r].out[i];
            if (!strncmp(w, "Training loss: ", 15) || !strncmp(w, "Validation loss: ", 17)) {
                const char *gc = strchr(g, ':'), *wc = strchr(w, ':');
                ck_assert_msg(gc && gc - g == wc - w && !strncmp(g, w, (size_t)(wc - w)), "'%s' for '%s'", g, w);
                double gv = atof(gc + 1), wv = atof(wc + 1);
                ck_assert_msg(fabs(gv - wv) <= rel_init * fabs(wv), "'%s' for '%s'", g, w);
            } else if (ep_tol > 0 && !strncmp(w, "Ep ", 3)) {
                double gt, gvl, wt, wvl;
                char gh[64], wh[64];
                ck_assert(sscanf(w, "%63[^:]: Train loss %lf, Val loss %lf", wh, &wt, &wvl) == 3);
                ck_assert_msg(sscanf(g, "%63[^:]: Train loss %lf, Val loss %lf", gh, &gt, &gvl) == 3, "'%s'", g);
                ck_assert_str_eq(gh, wh);
                ck_assert_msg(fabs(gt - wt) <= ep_tol && fabs(gvl - wvl) <= ep_tol, "'%s' for '%s'", g, w);
            } else {
                ck_assert_msg(!strcmp(g, w), "llm %s:\n  '%s'\n  for llm_ref.py's '%s'", runs[r].flags, g, w);
            }
        }
        free_lines(got, n);
        checked++;
    }
    ck_assert_int_eq(checked, max_runs);
    free_runs(runs, nr);
    remove_dir(dir);
}

static void check_train(const char *extra, double rel_init, double ep_tol, double log_tol, int max_runs) {
    check_train_in("llm_golden.txt", "data/gpt2", extra, rel_init, ep_tol, log_tol, max_runs);
}

/* exact: every line but the 17 digits of the two initial losses (PyTorch's exp, even at
 * ATEN_CPU_CAPABILITY=default, is a few ulps from libm's: measured 1e-8 relative) */
START_TEST(test_train_exact) { check_train("--exact", 1e-6, 0, 1e-5, 2); }
END_TEST

/* default math: the Qwen3 run (the Llama one as well costs a minute under ASan) */
START_TEST(test_train_default_math) { check_train("", 1e-5, 0.002, 1e-4, 1); }
END_TEST

/* ---- text: llm tokenize, llm generate --prompt [--chat] with Qwen3's tokenizer ----------------------- */

/* llm tokenize against the JavaScript encoder's ids (tests/data/hf_tokenizer_golden.txt) for texts of
 * tests/data/hf_tokenizer_corpus.json fed on stdin: Unicode, digits, special tokens in the text,
 * whitespace, CRLF; and --chat against the book's Qwen3Tokenizer's (add_generation_prompt) */
START_TEST(test_tokenize_cli) {
    char *golden = read_text(data_path("hf_tokenizer_golden.txt")), *corpus = read_text(data_path("hf_tokenizer_corpus.json"));
    JsonValue *c = json_loads(corpus, strlen(corpus), NULL, 0);
    ck_assert(c);
    char *dir = temp_dir(), in[1100], cmd[4096];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    const char *names[] = {"hello", "digits", "cjk", "emoji", "crlf", "whitespace_runs", "special_in_text", "think_tags",
                           "hi", "unicode", "multiline"};
    int checked = 0;
    for (int k = 0; k < 11; k++) {
        bool chat = k >= 8;
        const JsonValue *list = json_get(c, chat ? "chat" : "texts"), *text = NULL;
        for (size_t i = 0; i < json_len(list); i++)
            if (!strcmp(json_get(json_at(list, i), "name")->str, names[k])) text = json_get(json_at(list, i), "text");
        ck_assert_msg(text, "%s not in the corpus", names[k]);
        FILE *f = fopen(in, "wb");
        ck_assert(f && fwrite(text->str, 1, text->len, f) == text->len && fclose(f) == 0);
        char key[96], *want = NULL;
        snprintf(key, sizeof key, chat ? "\nqwen3chat_%s_gen " : "\nqwen3_%s ", names[k]);
        char *at = strstr(golden, key);
        ck_assert_msg(at, "%s", key);
        at = strchr(at + strlen(key), ' ') + 1; /* past the count */
        want = strndup(at, strcspn(at, "\n"));
        snprintf(cmd, sizeof cmd, "%s/llm tokenize --tokenizer %s%s < %s", build_dir(), shared_path("data/qwen3"),
                 chat ? " --chat" : "", in);
        char *out;
        ck_assert_int_eq(run_command(cmd, &out), 0);
        size_t n = strlen(out);
        ck_assert_msg(n && out[n - 1] == '\n', "'%s'", out);
        out[n - 1] = 0; /* one line: single spaces, no trailing space */
        ck_assert_msg(!strcmp(out, want), "llm tokenize%s of %s:\n  '%s'\n  for JavaScript's '%s'", chat ? " --chat" : "",
                      names[k], out, want);
        free(out), free(want);
        checked++;
    }
    ck_assert_int_eq(checked, 11);
    json_free(c);
    free(golden), free(corpus);
    remove_dir(dir);
}
END_TEST

/* `boost CONFIG SEED ID FACTOR`: CONFIG's model drawn after torch.manual_seed(SEED), out_head's row ID
 * scaled by FACTOR (a random model that says that token), saved in Hugging Face's layout to dir */
static void make_boosted(const char *spec, const char *dir) {
    char cfgp[512];
    long long seed, id;
    double factor;
    ck_assert(sscanf(spec, "%511s %lld %lld %lf", cfgp, &seed, &id, &factor) == 4);
    nn_LLMConfig cfg;
    char err[1024];
    ck_assert_msg(llm_config_load(cfgp, &cfg, err, sizeof err), "%s", err);
    torch_manual_seed((uint64_t)seed);
    nn_LLMModel *m = nn_LLMModel_new(cfg);
    Tensor *w = m->out_head->weight;
    float *row = (float *)w->data + w->offset + id * w->shape[1];
    for (int64_t j = 0; j < w->shape[1]; j++) row[j] = (float)(row[j] * factor); /* weight[ID] *= FACTOR */
    ck_assert_msg(llm_save_pretrained(m, dir, "F32", err, sizeof err), "%s", err);
    nn_LLMModel_free(m);
}

/* every record of tests/data/llm_text_golden.txt (llm_ref.py decoding with tokenizer.json's vocabulary,
 * the prompts' ids the JavaScript encoder's) in this math: the text streamed, --chat's answer alone and
 * its stop at <|im_end|>, the ids with --print-ids */
static void check_text_generate(const char *extra) {
    char *text = read_text(data_path("llm_text_golden.txt")), *save = NULL, *dir = temp_dir(), flags[2048], cmd[4096];
    flags[0] = 0;
    char *want[8];
    int n_want = 0, checked = 0;
    bool boosted = false;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "boost ", 6)) {
            if (!boosted) make_boosted(line + 6, dir); /* (all the records' boosts are one model) */
            boosted = true;
        } else if (!strncmp(line, "run train", 9)) {
            flags[0] = 0; /* (check_train_in's) */
        } else if (!strncmp(line, "run ", 4)) {
            const char *b = strstr(line, "@BOOST@");
            if (b) snprintf(flags, sizeof flags, "%.*s%s%s", (int)(b - line - 4), line + 4, dir, b + 7);
            else snprintf(flags, sizeof flags, "%s", line + 4);
            n_want = 0;
        } else if (!strncmp(line, "out ", 4) && flags[0]) {
            ck_assert(n_want < 8);
            want[n_want++] = line + 4;
        } else if (!strcmp(line, "end") && flags[0]) {
            snprintf(cmd, sizeof cmd, "%s/llm %s --tokenizer %s %s 2>/dev/null", build_dir(), flags, shared_path("data/qwen3"), extra);
            char *out, **got;
            int rc = run_command(cmd, &out);
            ck_assert_msg(rc == 0, "llm %s %s: exit %d", flags, extra, rc);
            int n = split_lines(out, &got);
            free(out);
            ck_assert_msg(n == n_want, "llm %s %s: %d lines, llm_ref.py printed %d", flags, extra, n, n_want);
            for (int i = 0; i < n; i++)
                ck_assert_msg(!strcmp(got[i], want[i]), "llm %s %s:\n  '%s'\n  for llm_ref.py's '%s'", flags, extra, got[i], want[i]);
            free_lines(got, n);
            checked++;
        }
    }
    ck_assert(boosted);
    ck_assert_int_eq(checked, 16);
    free(text);
    remove_dir(dir);
}

START_TEST(test_text_generate_exact) { check_text_generate("--exact"); }
END_TEST

START_TEST(test_text_generate_default_math) { check_text_generate("--threads 2"); }
END_TEST

/* llm train --tokenizer with Qwen3's tokenizer.json: llm_ref.py's lines (its data's ids the JavaScript
 * encoder's), every step's loss, in both maths */
START_TEST(test_train_text_exact) { check_train_in("llm_text_golden.txt", "data/qwen3", "--exact", 1e-6, 0, 1e-5, 2); }
END_TEST

START_TEST(test_train_text_default_math) { check_train_in("llm_text_golden.txt", "data/qwen3", "", 1e-5, 0.002, 1e-4, 2); }
END_TEST

/* llm train --tokenizer takes a tokenizer.json (Qwen3's) as it takes GPT-2's files: the run goes
 * through, its sample lines are tokenizer.json's text */
START_TEST(test_train_tokenizer_json) {
    char cmd[4096], *out;
    snprintf(cmd, sizeof cmd, "%s/llm train --config %s --seed 1 --data %s --tokenizer %s --context 16 --epochs 1 "
             "--eval-freq 50 --sample-tokens 3 --prompt 'Hello, world!' 2>&1", build_dir(), data_path("llm/qwen_text.json"),
             data_path("tokenizer_corpus.txt"), shared_path("data/qwen3"));
    ck_assert_msg(run_command(cmd, &out) == 0, "%s", out);
    const char *tl = strstr(out, "Training loss: ");
    double loss = tl ? atof(tl + 15) : 0;
    ck_assert_msg(loss > 11 && loss < 13 && strstr(out, "\nHello, world!") && strstr(out, "Output text:\n Hello, world!"), "%s",
                  out); /* about ln(151669) = 11.93: a random model's loss over Qwen3's vocabulary */
    free(out);
}
END_TEST

/* ---- the reader's page (--html) --------------------------------------------------------------------- */

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* `llm FLAGS --html DIR/page.html`: exit 0, stdout what the run without --html prints; the page
 * well-formed, with `sections` sections; returned (malloc'd), and the run's output in *plain */
static char *page_of(const char *flags, int sections, char **plain) {
    char *dir = temp_dir(), cmd[4096], path[1100], *out, err[256];
    snprintf(path, sizeof path, "%s/page.html", dir);
    snprintf(cmd, sizeof cmd, "%s/llm %s 2>/dev/null", build_dir(), flags);
    ck_assert_int_eq(run_command(cmd, plain), 0);
    snprintf(cmd, sizeof cmd, "%s/llm %s --html %s 2>/dev/null", build_dir(), flags, path);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strcmp(out, *plain) == 0, "llm %s: --html changed what it prints:\n%s\nwithout:\n%s", flags, out, *plain);
    char *page = read_text(path);
    ck_assert_msg(xml_check(page, strlen(page), err, sizeof err), "llm %s --html: the page is not well-formed: %s", flags, err);
    ck_assert_int_eq(count(page, "<section id="), sections);
    ck_assert_int_eq(count(page, "<td class=\"py\""), count(page, "<td class=\"c\""));
    ck_assert_msg(strstr(page, "<script") == NULL && strstr(page, " src=") == NULL, "no script, nothing fetched");
    free(out);
    remove_dir(dir);
    return page;
}

/* the functions of each section's C, and rows of the book's Python beside them */
static void check_model_sections(const char *page) {
    const char *functions[] = {"llm_model_build(", "llm_forward(", "qwen3_block_new(", "block_forward(", "rmsnorm_new(",
                               "nn_RMSNorm_forward(", "nn_compute_rope_params(", "nn_apply_rope(", "nn_SwiGLUFeedForward_new(",
                               "nn_SwiGLUFeedForward_forward(", "nn_GroupedQueryAttention_new(",
                               "nn_GroupedQueryAttention_forward("};
    for (size_t i = 0; i < sizeof functions / sizeof *functions; i++)
        ck_assert_msg(strstr(page, functions[i]), "the page lacks %s", functions[i]);
    const char *python[] = {">def compute_rope_params(head_dim, theta_base=10_000,</td>",
                            ">    variance = x.pow(2).mean(dim=-1, keepdim=True)</td>",
                            ">    self.scale = nn.Parameter(torch.ones(emb_dim))</td>",
                            ">    keys = keys.repeat_interleave(self.group_size, dim=1)</td>",
                            ">    return self.fc3(nn.functional.silu(x_fc1) * x_fc2)</td>",
                            ">    x = self.final_norm(x)</td>"};
    for (size_t i = 0; i < sizeof python / sizeof *python; i++)
        ck_assert_msg(strstr(page, python[i]), "the page lacks the Python row %s", python[i]);
}

/* llm train --html: five sections (the model, its blocks, the losses, the loop and its curve, the
 * samples), the run's output as printed, in pieces under them */
START_TEST(test_train_html) {
    char flags[2048], *plain;
    snprintf(flags, sizeof flags, "train --config %s --seed 123 --data %s --tokenizer %s --epochs 1 --eval-freq 5 "
             "--eval-iter 2 --sample-tokens 6", data_path("llm/qwen_train.json"), data_path("tokenizer_corpus.txt"),
             shared_path("data/gpt2"));
    char *page = page_of(flags, 5, &plain);
    check_model_sections(page);
    const char *functions[] = {"lm_calc_loss_batch(", "lm_calc_loss_loader(", "lm_evaluate_model(", "cmd_train(",
                               "lm_generate("};
    for (size_t i = 0; i < sizeof functions / sizeof *functions; i++)
        ck_assert_msg(strstr(page, functions[i]), "the page lacks %s", functions[i]);
    ck_assert_msg(strstr(page, ">        loss.backward()</td>"), "the loop's Python");
    char first[256];
    snprintf(first, sizeof first, "<pre class=\"out\">%.*s\n", (int)strcspn(plain, "\n"), plain);
    ck_assert_msg(strncmp(plain, "Training loss: ", 15) == 0 && strstr(page, first), "the run's first line: %s", first);
    ck_assert_msg(strstr(page, "\nEp 1 (Step 000055): Train loss ") && strstr(page, "\nOutput text:\n Every effort moves you"),
                  "the run's lines");
    ck_assert_int_eq(count(page, "<pre class=\"out\">"), 3);
    ck_assert_int_eq(count(page, "<svg "), 1); /* the loss curve: its 12 points, its legend */
    ck_assert_msg(strstr(page, ">Training loss</text>") && strstr(page, ">Validation loss</text>") &&
                  strstr(page, ">Tokens seen</text>"), "the loss curve");
    free(page), free(plain);
}
END_TEST

/* llm generate --html: the model's sections and the generating loop's, its ids */
START_TEST(test_generate_html) {
    char flags[2048], *plain;
    snprintf(flags, sizeof flags, "generate --model %s --ids \"5 6 7\" --max-new-tokens 12", data_path("llm/llama_gqa_f32"));
    char *page = page_of(flags, 3, &plain);
    ck_assert_str_eq(plain, "5 6 7 51 94 19 70 49 45 7 51 26 17 99 33\n"); /* llm_ref.py's (examples/README.md) */
    check_model_sections(page);
    ck_assert_msg(strstr(page, "cmd_generate(") && strstr(page, "lm_generate(") && strstr(page, "lm_forward_cached("),
                  "the generating loop");
    ck_assert_msg(strstr(page, "<pre class=\"out\">5 6 7 51 94 19 70 49 45 7 51 26 17 99 33\n</pre>"), "the run's output");
    ck_assert_int_eq(count(page, "<svg "), 0);
    free(page), free(plain);
}
END_TEST

/* --html into a path that cannot be written: refused before the run (exit 1, the path named, nothing on
 * stdout, no page); on a command without a page, or with --print-model or --resume: a usage error */
START_TEST(test_html_refusals) {
    char cmd[4096], *out, *dir = temp_dir(), errp[1100];
    snprintf(errp, sizeof errp, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd, "%s/llm train --config %s --seed 123 --data %s --tokenizer %s --epochs 1 "
             "--html /nonexistent/x.html 2>%s", build_dir(), data_path("llm/qwen_train.json"), data_path("tokenizer_corpus.txt"),
             shared_path("data/gpt2"), errp);
    int rc = run_command(cmd, &out);
    char *err = read_text(errp);
    ck_assert_msg(rc == 1 && out[0] == 0 && strstr(err, "llm: --html ") && strstr(err, "/nonexistent/x.html"),
                  "exit %d, stdout '%s', stderr '%s'", rc, out, err);
    ck_assert_msg(strstr(err, "training took") == NULL, "refused before the run: %s", err);
    free(out), free(err);
    static const struct { const char *flags, *says; } usage[] = {
        {"tokenize --html %s/x.html", "--html goes with generate and train, not tokenize"},
        {"generate --config tests/data/llm/qwen_config.json --print-model --html %s/x.html", "--html shows a whole run: give it to a run without --print-model"},
        {"train --config tests/data/llm/qwen_config.json --data tests/data/tokenizer_corpus.txt --resume %s --html x.html",
         "--html shows a whole run: give it to a run without --resume"},
    };
    for (int k = 0; k < 3; k++) {
        char flags[1200];
        snprintf(flags, sizeof flags, usage[k].flags, dir);
        snprintf(cmd, sizeof cmd, "%s/llm %s 2>&1 < /dev/null", build_dir(), flags);
        rc = run_command(cmd, &out);
        ck_assert_msg(rc == 2 && strstr(out, usage[k].says), "llm %s: exit %d: %s", flags, rc, out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "ls -A %s", dir);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_str_eq(out, "err.txt\n"); /* no page, no temporary file */
    free(out);
    remove_dir(dir);
}
END_TEST

/* ---- RoPE -------------------------------------------------------------------------------------------- */

START_TEST(test_rope_bits) {
    char *text = read_text(data_path("llm_golden.txt")), *save = NULL;
    int cases = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "rope ", 5)) continue;
        char name[32], fc_s[32];
        long long hd, ctx;
        double theta;
        nn_RopeFreqConfig fc;
        int k = sscanf(line + 5, "%31s %lld %lf %lld %31s", name, &hd, &theta, &ctx, fc_s);
        ck_assert_int_eq(k, 5);
        bool has_fc = strcmp(fc_s, "none") != 0;
        if (has_fc)
            ck_assert(sscanf(line + 5, "%*s %*d %*f %*d %lf %lf %lf %lf", &fc.factor, &fc.low_freq_factor,
                             &fc.high_freq_factor, &fc.original_context_length) == 4);
        Tensor *cos, *sin;
        nn_compute_rope_params(hd, theta, ctx, has_fc ? &fc : NULL, &cos, &sin);
        for (int which = 0; which < 2; which++) {
            char *vals = strtok_r(NULL, "\n", &save);
            ck_assert(vals && !strncmp(vals, which ? "sin " : "cos ", 4));
            const float *d = ac_data_float(which ? sin : cos);
            char *p = vals + 4;
            for (int64_t i = 0; i < hd * ctx; i++) {
                unsigned long bits = strtoul(p, &p, 16);
                uint32_t mine;
                memcpy(&mine, &d[i], 4);
                ck_assert_msg(mine == bits, "rope %s %s[%lld]: %08x, PyTorch %08lx", name, which ? "sin" : "cos", (long long)i,
                              mine, bits);
            }
        }
        ac_free(cos);
        ac_free(sin);
        cases++;
    }
    ck_assert_int_eq(cases, 3);
    free(text);
}
END_TEST

/* ---- finite differences (tests/test_grad.c's method: L = sum(w * f), the 5-point stencil, h = 2^-6
 * on values that are multiples of 2^-10) --------------------------------------------------------------- */

#define H (1.0 / 64.0)
typedef Tensor *(*Fn)(void);
static Tensor *grad_inputs[4];
static int n_grad_inputs;

static double weighted(Fn f, const float *w, double *abs_sum) {
    ac_mark m = ac_arena_mark();
    bool prev = torch_set_grad_enabled(false);
    Tensor *out = torch_contiguous(f());
    torch_set_grad_enabled(prev);
    const float *o = ac_data_float(out);
    double s = 0, a = 0;
    for (int64_t i = 0, n = torch_numel(out); i < n; i++) s += (double)w[i] * o[i], a += fabs((double)w[i] * o[i]);
    ac_arena_release(m);
    if (abs_sum) *abs_sum = a;
    return s;
}

/* the worst error / tolerance over every element of every input; <= 1 passes */
static double gradcheck_ratio(Fn f) {
    for (int i = 0; i < n_grad_inputs; i++) torch_zero_grad_(grad_inputs[i]);
    Tensor *out = f();
    torch_manual_seed(99);
    Tensor *w = torch_sub_scalar(torch_mul_scalar(torch_rand(out->ndim, out->shape), 2.0), 1.0);
    torch_backward(out, w);
    const float *wd = ac_data_float(w);
    double abs_sum;
    weighted(f, wd, &abs_sum);
    double noise = 2.0 * 1.5 * ldexp(abs_sum, -20) / H, worst = 0;
    for (int i = 0; i < n_grad_inputs; i++) {
        Tensor *x = grad_inputs[i];
        ck_assert_msg(x->grad != NULL, "input %d got no gradient", i);
        float *xd = ac_data_float(x);
        const float *g = ac_data_float(x->grad);
        for (int64_t j = 0, len = torch_numel(x); j < len; j++) {
            float x0 = xd[j];
            double l[4];
            const double steps[4] = {H, -H, 2 * H, -2 * H};
            for (int k = 0; k < 4; k++) {
                xd[j] = (float)(x0 + steps[k]);
                l[k] = weighted(f, wd, NULL);
            }
            xd[j] = x0;
            double num = (8.0 * (l[0] - l[1]) - (l[2] - l[3])) / (12.0 * H);
            double r = fabs(num - g[j]) / (noise + 1e-4 * fabs(g[j]));
            if (r > worst) worst = r;
        }
    }
    return worst;
}

/* values on the 2^-10 grid in [lo, hi) */
static void quantize(Tensor *t, double lo, double hi, uint64_t seed) {
    torch_manual_seed(seed);
    Tensor *r = torch_rand(t->ndim, t->shape);
    float *d = ac_data_float(t);
    const float *rd = ac_data_float(r);
    for (int64_t i = 0; i < torch_numel(t); i++) d[i] = (float)(round((lo + (hi - lo) * rd[i]) * 1024.0) / 1024.0);
}

static Tensor *leaf(uint64_t seed, double lo, double hi, int nd, const int64_t *shape) {
    Tensor *t = ac_persist(torch_zeros(nd, shape));
    quantize(t, lo, hi, seed);
    torch_requires_grad_(t, true);
    return t;
}

static nn_RMSNorm *g_norm;
static nn_SwiGLUFeedForward *g_ff;
static nn_GroupedQueryAttention *g_att;
static nn_LLMModel *g_model;
static Tensor *g_cos, *g_sin, *g_mask, *g_ids, *g_targets;

static Tensor *rmsnorm_fn(void) { return nn_RMSNorm_forward(g_norm, grad_inputs[0]); }
static Tensor *rmsnorm_wrong_fn(void) { /* the variance detached: a backward that misses a path */
    Tensor *x = grad_inputs[0];
    Tensor *v = torch_detach(torch_mean_dim(torch_pow(x, 2.0), 1, (int64_t[]){-1}, true));
    return torch_mul(torch_mul(x, torch_pow(torch_add_scalar(v, 1e-6), -0.5)), g_norm->scale);
}
static Tensor *rope_fn(void) { return nn_apply_rope(grad_inputs[0], g_cos, g_sin, 2); }
static Tensor *ff_fn(void) { return nn_SwiGLUFeedForward_forward(g_ff, grad_inputs[0]); }
static Tensor *att_fn(void) { return nn_GroupedQueryAttention_forward(g_att, grad_inputs[0], g_mask, g_cos, g_sin, 0, NULL); }
static Tensor *model_fn(void) { return llm_calc_loss_batch(g_ids, g_targets, g_model); }

static void quantize_params(nn_Module *m, double scale) {
    nn_TensorList p = nn_named_parameters(m);
    for (int i = 0; i < p.n; i++) quantize(p.tensors[i], -scale, scale, 100 + (uint64_t)i);
}

START_TEST(test_rmsnorm_grad) {
    g_norm = nn_RMSNorm_new(6, 1e-6);
    quantize(g_norm->scale, 0.5, 1.5, 3);
    grad_inputs[0] = leaf(1, -2, 2, SHAPE(2, 3, 6));
    grad_inputs[1] = g_norm->scale;
    n_grad_inputs = 2;
    double r = gradcheck_ratio(rmsnorm_fn);
    ck_assert_msg(r <= 1.0, "RMSNorm: worst error %.3g of the tolerance", r);
    n_grad_inputs = 1;
    double wrong = gradcheck_ratio(rmsnorm_wrong_fn);
    ck_assert_msg(wrong > 10.0, "a backward that misses the variance's path passed (ratio %.3g)", wrong);
    ac_free(grad_inputs[0]);
    nn_free(&g_norm->module);
}
END_TEST

START_TEST(test_rope_grad) {
    nn_RopeFreqConfig fc = {32.0, 1.0, 4.0, 4.0};
    nn_compute_rope_params(8, 10000.0, 8, &fc, &g_cos, &g_sin);
    grad_inputs[0] = leaf(2, -1, 1, SHAPE(1, 2, 3, 8));
    n_grad_inputs = 1;
    double r = gradcheck_ratio(rope_fn);
    ck_assert_msg(r <= 1.0, "apply_rope: worst error %.3g of the tolerance", r);
    ac_free(grad_inputs[0]), ac_free(g_cos), ac_free(g_sin);
}
END_TEST

START_TEST(test_swiglu_grad) {
    torch_manual_seed(5);
    g_ff = nn_SwiGLUFeedForward_new(4, 6);
    quantize_params(&g_ff->module, 0.5);
    grad_inputs[0] = leaf(3, -1, 1, SHAPE(2, 2, 4));
    grad_inputs[1] = g_ff->fc1->weight;
    grad_inputs[2] = g_ff->fc3->weight;
    n_grad_inputs = 3;
    double r = gradcheck_ratio(ff_fn);
    ck_assert_msg(r <= 1.0, "FeedForward: worst error %.3g of the tolerance", r);
    ac_free(grad_inputs[0]);
    nn_free(&g_ff->module);
}
END_TEST

static void att_case(bool llama, bool qk_norm, int64_t heads, int64_t groups, int64_t head_dim) {
    torch_manual_seed(7);
    g_att = nn_GroupedQueryAttention_new(8, heads, groups, head_dim, qk_norm, 1e-6, llama);
    quantize_params(&g_att->module, 0.5);
    int64_t hd = head_dim ? head_dim : 8 / heads;
    nn_compute_rope_params(hd, 10000.0, 8, NULL, &g_cos, &g_sin);
    g_mask = ac_persist(torch_to_bool(torch_triu(torch_ones(SHAPE(3, 3)), 1)));
    grad_inputs[0] = leaf(4, -1, 1, SHAPE(2, 3, 8));
    grad_inputs[1] = g_att->W_query->weight;
    grad_inputs[2] = g_att->W_value->weight;
    grad_inputs[3] = qk_norm ? g_att->k_norm->scale : g_att->out_proj->weight;
    n_grad_inputs = 4;
    double r = gradcheck_ratio(att_fn);
    ck_assert_msg(r <= 1.0, "GroupedQueryAttention (heads %lld, groups %lld, head_dim %lld, qk_norm %d): worst error %.3g",
                  (long long)heads, (long long)groups, (long long)head_dim, qk_norm, r);
    ac_free(grad_inputs[0]), ac_free(g_cos), ac_free(g_sin), ac_free(g_mask);
    nn_free(&g_att->module);
}

START_TEST(test_gqa_grad) {
    att_case(false, true, 4, 2, 6); /* Qwen3: q/k norm, 2 groups of 2, head_dim 6 (not 8 / 4) */
    att_case(true, false, 4, 1, 0); /* Llama 3: one key/value head for 4, head_dim 2 */
    att_case(false, false, 2, 2, 4); /* plain multi-head */
}
END_TEST

START_TEST(test_model_grad) {
    nn_LLMConfig cfg = {.vocab_size = 7, .context_length = 8, .emb_dim = 4, .n_heads = 2, .n_layers = 1, .hidden_dim = 6,
                        .head_dim = 4, .qk_norm = true, .n_kv_groups = 1, .rope_base = 10000.0, .rms_norm_eps = 1e-6,
                        .eos_token_id = -1};
    torch_manual_seed(11);
    g_model = nn_Qwen3Model_new(cfg);
    quantize_params(&g_model->module, 0.5);
    g_ids = ac_persist(torch_tensor_long((const int64_t[]){1, 5, 2, 6, 0, 3}, SHAPE(2, 3)));
    g_targets = ac_persist(torch_tensor_long((const int64_t[]){5, 2, 6, 0, 3, 3}, SHAPE(2, 3)));
    grad_inputs[0] = g_model->tok_emb->weight;
    grad_inputs[1] = nn_LLMModel_block(g_model, 0)->ff->fc2->weight;
    grad_inputs[2] = g_model->final_norm->scale;
    n_grad_inputs = 3;
    double r = gradcheck_ratio(model_fn);
    ck_assert_msg(r <= 1.0, "Qwen3Model's loss: worst error %.3g of the tolerance", r);
    nn_LLMModel_tie_weights(g_model); /* tied: tok_emb's weight gets both gradients */
    n_grad_inputs = 1;
    r = gradcheck_ratio(model_fn);
    ck_assert_msg(r <= 1.0, "tied Qwen3Model's loss: worst error %.3g of the tolerance", r);
    ac_free(g_ids), ac_free(g_targets);
    nn_LLMModel_free(g_model);
}
END_TEST

/* ---- the classes: names, order, tying ------------------------------------------------------------------ */

START_TEST(test_state_dict_names) {
    nn_LLMConfig cfg = {.vocab_size = 10, .context_length = 8, .emb_dim = 8, .n_heads = 2, .n_layers = 1, .hidden_dim = 12,
                        .n_kv_groups = 1, .rope_base = 10000.0, .rms_norm_eps = 1e-6, .qk_norm = true, .eos_token_id = -1};
    nn_LLMModel *q = nn_Qwen3Model_new(cfg);
    nn_TensorList p = nn_named_parameters(&q->module);
    const char *want_q[] = {"tok_emb.weight", "trf_blocks.0.att.W_query.weight", "trf_blocks.0.att.W_key.weight",
                            "trf_blocks.0.att.W_value.weight", "trf_blocks.0.att.out_proj.weight",
                            "trf_blocks.0.att.q_norm.scale", "trf_blocks.0.att.k_norm.scale", "trf_blocks.0.ff.fc1.weight",
                            "trf_blocks.0.ff.fc2.weight", "trf_blocks.0.ff.fc3.weight", "trf_blocks.0.norm1.scale",
                            "trf_blocks.0.norm2.scale", "final_norm.scale", "out_head.weight"};
    ck_assert_int_eq(p.n, 14);
    for (int i = 0; i < p.n; i++) ck_assert_str_eq(p.names[i], want_q[i]);
    int64_t untied = nn_num_parameters(&q->module);
    nn_LLMModel_tie_weights(q); /* named_parameters lists a shared weight once, as PyTorch's */
    ck_assert_int_eq(nn_num_parameters(&q->module), untied - 10 * 8);
    ck_assert_ptr_eq(q->out_head->weight, q->tok_emb->weight);
    nn_LLMModel_free(q);
    cfg.qk_norm = false;
    nn_LLMModel *l = nn_Llama3Model_new(cfg);
    p = nn_named_parameters(&l->module);
    ck_assert_str_eq(p.names[1], "trf_blocks.0.att.W_key.weight");
    ck_assert_str_eq(p.names[3], "trf_blocks.0.att.W_query.weight");
    ck_assert_str_eq(p.names[p.n - 2], "final_norm.weight");
    nn_LLMModel_free(l);
}
END_TEST

/* ---- Hugging Face's layout --------------------------------------------------------------------------- */

static void assert_same_weights(nn_LLMModel *a, nn_LLMModel *b) {
    nn_TensorList pa = nn_named_parameters(&a->module), pb = nn_named_parameters(&b->module);
    ck_assert_int_eq(pa.n, pb.n);
    for (int i = 0; i < pa.n; i++) {
        ck_assert_str_eq(pa.names[i], pb.names[i]);
        ck_assert_msg(torch_equal(pa.tensors[i], pb.tensors[i]), "%s differs", pa.names[i]);
    }
}

START_TEST(test_save_load_round_trip) {
    const char *models[] = {"llm/qwen_untied_bf16_sharded", "llm/llama_tied_bf16", "llm/qwen_mha_f16", "llm/qwen_tied_f32"};
    const char *dtypes[] = {"BF16", "BF16", "F16", "F32"};
    char err[1024];
    for (int k = 0; k < 4; k++) {
        nn_LLMModel *m = llm_from_pretrained(data_path(models[k]), err, sizeof err);
        ck_assert_msg(m != NULL, "%s", err);
        for (int pass = 0; pass < 2; pass++) { /* the file's dtype (exact: its values are that dtype's), then F32 */
            char *dir = temp_dir();
            ck_assert_msg(llm_save_pretrained(m, dir, pass ? "F32" : dtypes[k], err, sizeof err), "%s", err);
            nn_LLMModel *back = llm_from_pretrained(dir, err, sizeof err);
            ck_assert_msg(back != NULL, "%s", err);
            ck_assert(back->tied == m->tied);
            assert_same_weights(m, back);
            nn_LLMModel_free(back);
            remove_dir(dir);
        }
        nn_LLMModel_free(m);
    }
}
END_TEST

START_TEST(test_bf16_rounding) { /* 1 + 2^-8 + 2^-9... rounds to nearest even, as .to(torch.bfloat16) */
    nn_LLMConfig cfg;
    char err[1024];
    ck_assert_msg(llm_config_load(data_path("llm/qwen_config.json"), &cfg, err, sizeof err), "%s", err);
    cfg.n_layers = 0;
    nn_LLMModel *m = nn_LLMModel_new(cfg);
    float *w = ac_data_float(m->tok_emb->weight);
    const float in[] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-9f, 1.0f + 3 * 0x1p-8f, -1.0f - 0x1p-8f - 0x1p-20f};
    const float out[] = {1.0f, 1.0f + 0x1p-7f, 1.0f + 4 * 0x1p-8f, -1.0f - 0x1p-7f};
    for (int i = 0; i < 4; i++) w[i] = in[i];
    char *dir = temp_dir();
    ck_assert_msg(llm_save_pretrained(m, dir, "BF16", err, sizeof err), "%s", err);
    nn_LLMModel *back = llm_from_pretrained(dir, err, sizeof err);
    ck_assert_msg(back != NULL, "%s", err);
    const float *b = ac_data_float(back->tok_emb->weight);
    for (int i = 0; i < 4; i++) ck_assert_msg(b[i] == out[i], "bf16(%a) = %a, want %a", (double)in[i], (double)b[i], (double)out[i]);
    nn_LLMModel_free(back);
    nn_LLMModel_free(m);
    remove_dir(dir);
}
END_TEST

/* ---- bad input: exit 1, a message naming the file and the key ----------------------------------------- */

static void copy_model(const char *from, const char *to) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp %s/* %s/", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

static void sed_file(const char *path, const char *expr) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "sed -i '%s' %s", expr, path);
    ck_assert_int_eq(system(cmd), 0);
}

static void expect_refusal(const char *flags, const char *needle) {
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s/llm %s 2>&1", build_dir(), flags);
    int rc = run_command(cmd, &out);
    ck_assert_msg(rc == 1, "llm %s: exit %d, want 1 (%s)", flags, rc, out);
    ck_assert_msg(strstr(out, needle) != NULL, "llm %s: '%s' does not say '%s'", flags, out, needle);
    free(out);
}

static void write_bytes(const char *path, const char *header, size_t data_len) {
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    uint64_t n = strlen(header);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data_len; i++) fputc(0, f);
    fclose(f);
}

START_TEST(test_bad_input) {
    char *dir = temp_dir(), flags[1536], cfgp[1100], path[1100];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    snprintf(flags, sizeof flags, "generate --model %s --ids \"1 2\"", dir);
#define FRESH(model) do { char c_[1200]; snprintf(c_, sizeof c_, "rm -f %s/*", dir); ck_assert_int_eq(system(c_), 0); copy_model(data_path(model), dir); } while (0)
    FRESH("llm/qwen_untied_bf16_sharded");
    sed_file(cfgp, "/\"hidden_size\"/d");
    expect_refusal(flags, "config.json: missing key \"hidden_size\"");
    FRESH("llm/qwen_untied_bf16_sharded");
    sed_file(cfgp, "s/Qwen3ForCausalLM/GPT2LMHeadModel/");
    expect_refusal(flags, "config.json: unknown architecture \"GPT2LMHeadModel\"");
    FRESH("llm/qwen_untied_bf16_sharded");
    sed_file(cfgp, "s/\"intermediate_size\": 40/\"intermediate_size\": 44/");
    expect_refusal(flags, "tensor \"model.layers.0.mlp.gate_proj.weight\" has shape [40, 24]; config.json makes it [44, 24]");
    FRESH("llm/qwen_untied_bf16_sharded");
    snprintf(path, sizeof path, "%s/model-00002-of-00003.safetensors", dir);
    remove(path);
    expect_refusal(flags, "model.safetensors.index.json: shard model-00002-of-00003.safetensors");
    FRESH("llm/llama_tied_bf16");
    sed_file(cfgp, "s/\"tie_word_embeddings\": true/\"tie_word_embeddings\": false/");
    expect_refusal(flags, "missing tensor \"lm_head.weight\"");
    /* headers that lie, on a one-file model */
    FRESH("llm/qwen_mha_f16");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_bytes(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0);
    expect_refusal(flags, "tensor \"a\": data_offsets [0, 8] lie outside the data (0 bytes)");
    write_bytes(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
    expect_refusal(flags, "tensors \"a\" and \"b\" overlap");
    write_bytes(path, "{\"a\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    expect_refusal(flags, "tensor \"a\" has dtype I8");
    FILE *f = fopen(path, "wb");
    fwrite("\xff\xff\xff\x00\x00\x00\x00\x00{}", 1, 10, f);
    fclose(f);
    expect_refusal(flags, "model.safetensors: the header length 16777215 runs past the end of the file");
    write_bytes(path, "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_refusal(flags, "model.safetensors: tensor \"model.embed_tokens.weight\" has shape [2]; config.json makes it [64, 16]");
    /* ids */
    FRESH("llm/qwen_mha_f16");
    snprintf(flags, sizeof flags, "generate --model %s --ids \"1 64\"", dir);
    expect_refusal(flags, "id 64 is at or beyond the vocabulary (vocab_size 64)");
    sed_file(cfgp, "s/\"max_position_embeddings\": 64/\"max_position_embeddings\": 3/");
    snprintf(flags, sizeof flags, "generate --model %s --ids \"1 2 3 4\"", dir);
    expect_refusal(flags, "the prompt's 4 tokens are longer than the context (max_position_embeddings 3)");
    { /* a flag that contradicts another: a usage error, exit 2 */
        char cmd[2048], *out;
        snprintf(cmd, sizeof cmd, "%s/llm generate --config %s --ids \"1 2\" --prompt hello 2>&1", build_dir(), cfgp);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == 2 && strstr(out, "--ids and --prompt both give the prompt"), "%s: exit %d: %s", cmd, rc, out);
        free(out);
    }
#undef FRESH
    remove_dir(dir);
}
END_TEST

/* config.json's eos_token_id as a list (Llama 3.2 Instruct lists three): any of them stops, and it is
 * written back as a list */
START_TEST(test_eos_list) {
    char *dir = temp_dir(), cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "sed 's/\"eos_token_id\": 50/\"eos_token_id\": [1000, 50, 7]/' %s > %s/config.json",
             data_path("llm/llama_eos.json"), dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/llm generate --config %s/config.json --seed 4 --ids \"8 9\" --max-new-tokens 8", build_dir(), dir);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_str_eq(out, "8 9 0 24 25\n"); /* llm_ref.py's with the single id 50 (tests/data/llm_golden.txt) */
    free(out);
    nn_LLMConfig cfg;
    char err[1024], path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    ck_assert_msg(llm_config_load(path, &cfg, err, sizeof err), "%s", err);
    ck_assert_int_eq(cfg.n_eos, 3);
    ck_assert_int_eq(cfg.eos_token_ids[1], 50);
    cfg.n_layers = 0;
    nn_LLMModel *m = nn_LLMModel_new(cfg);
    ck_assert_msg(llm_save_pretrained(m, dir, "F32", err, sizeof err), "%s", err);
    nn_LLMConfig back;
    ck_assert_msg(llm_config_load(path, &back, err, sizeof err), "%s", err);
    ck_assert_int_eq(back.n_eos, 3);
    ck_assert_int_eq(back.eos_token_ids[2], 7);
    nn_LLMModel_free(m);
    remove_dir(dir);
}
END_TEST

/* ---- the book's RMSNorm as one op (tensor/ops/fused.c) against its lines op by op ------------------
 * nn_rmsnorm_fused true runs ac_book_rms_norm, false nn_RMSNorm_forward's lines one by one: the output
 * and every gradient must be the same bits (memcmp), in exact and fast math, at 1 and 2 threads,
 * whatever else sends x a gradient and in which state (send_terms in fused.c decides from it). */

static void rms_same_bits(Tensor *fused, Tensor *ops, const char *what, const char *where) {
    ck_assert_msg((fused == NULL) == (ops == NULL), "%s, %s: a gradient on one side only", where, what);
    if (!fused) return;
    int64_t n = torch_numel(ops);
    ck_assert_msg(torch_numel(fused) == n, "%s, %s: %lld elements, op by op %lld", where, what,
                  (long long)torch_numel(fused), (long long)n);
    const float *a = ac_data_float(torch_contiguous(fused)), *b = ac_data_float(torch_contiguous(ops));
    if (memcmp(a, b, sizeof(float) * (size_t)n) == 0) return;
    int64_t i = 0;
    while (i < n && memcmp(a + i, b + i, sizeof(float)) == 0) i++;
    ck_abort_msg("%s, %s: element %lld is %a fused, %a op by op", where, what, (long long)i, (double)a[i], (double)b[i]);
}

typedef struct { Tensor *out, *gx, *gscale; } RmsRun;

/* The norm on x0 (or on a non-leaf made from it), then sum((out [+ x | + 2 x]) * w), backward; kind:
 *   0  x0 itself, a leaf (its .grad), twice over without zeroing (the second adds to the first);
 *   1  x = x0 * 1: x's first gradient (handed on as it is);
 *   2  out + x: x has the add's gradient first, which the add also sends on (not writable);
 *   3  out + 2 x: x has the product's new gradient first (added to in place);
 *   6  x = (x0 * 1) with its last two dims swapped and swapped back by a transpose of a transpose: a
 *      view that is not contiguous (q/k norm's input, a transposed view), as 1 otherwise. */
static RmsRun rms_run(nn_RMSNorm *norm, bool fused, int kind, Tensor *x0, Tensor *w) {
    nn_rmsnorm_fused = fused;
    x0->grad = NULL;
    norm->scale->grad = NULL;
    RmsRun r = {0};
    for (int rep = 0; rep < (kind == 0 ? 2 : 1); rep++) {
        Tensor *x = kind == 0 ? x0 : torch_mul_scalar(x0, 1.0);
        if (kind == 6) x = torch_transpose(torch_contiguous(torch_transpose(x, 0, -1)), 0, -1);
        Tensor *y = nn_RMSNorm_forward(norm, x);
        if (y->requires_grad) ck_assert_str_eq(torch_grad_fn_name(y), fused ? "BookRMSNormBackward0" : "MulBackward0");
        r.out = y;
        if (kind == 2) y = torch_add(y, x);
        if (kind == 3) y = torch_add(y, torch_mul_scalar(x, 2.0));
        if (y->requires_grad) torch_backward(torch_sum(torch_mul(y, w)), NULL);
    }
    nn_rmsnorm_fused = true;
    r.gx = x0->grad ? torch_clone(x0->grad) : NULL;
    r.gscale = norm->scale->grad ? torch_clone(norm->scale->grad) : NULL;
    return r;
}

START_TEST(test_rmsnorm_fused_same_bits) {
    static const struct { int nd; int64_t shape[4]; } shapes[] = {
        {3, {2, 5, 16}}, {3, {3, 7, 13}}, {2, {4, 1}}, {1, {16}}, {1, {1}}, {3, {1, 1, 9}}, {3, {4, 64, 768}},
        {4, {2, 3, 33, 64}}};
    const double mags[] = {1.0, 1e-3}; /* 1e-3: the variance near eps */
    bool was_exact = ac_get_exact();
    int was_threads = torch_get_num_threads();
    atomic_store(&ac_pool_test_free_cores, 8); /* 2 threads, however busy the machine */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int m = 0; m < 2; m++)
            for (int exact = 0; exact < 2; exact++) {
                int nd = shapes[s].nd;
                const int64_t *shape = shapes[s].shape;
                int64_t D = shape[nd - 1];
                ac_set_exact(exact);
                ac_mark mark = ac_arena_mark();
                nn_RMSNorm *norm = nn_RMSNorm_new(D, 1e-6); /* scale not 1: its gradient counts */
                float *sc = ac_data_float(norm->scale);
                for (int64_t j = 0; j < D; j++) sc[j] = 0.5f + (float)j / (float)D;
                torch_manual_seed(7 + s);
                Tensor *w = torch_sub_scalar(torch_mul_scalar(torch_rand(nd, shape), 2.0), 1.0); /* not a plain sum */
                /* kinds 0-3 and 6 as rms_run says; 4: x frozen, scale not, and 5: scale frozen, x not (both
                 * on kind 1's graph) */
                for (int kind = 0; kind < 7; kind++) {
                    if (kind == 6 && nd < 2) continue;
                    torch_manual_seed(100 * s + 10 * m + kind);
                    Tensor *x0 = torch_sub_scalar(torch_mul_scalar(torch_rand(nd, shape), 2.0 * mags[m]), mags[m]);
                    if (kind != 4) torch_requires_grad_(x0, true);
                    torch_requires_grad_(norm->scale, kind != 5);
                    int k = kind == 4 || kind == 5 ? 1 : kind;
                    RmsRun at1 = {0};
                    for (int threads = 1; threads <= 2; threads++) {
                        torch_set_num_threads(threads);
                        char where[160];
                        snprintf(where, sizeof where, "RMSNorm on %s, |x| < %g, %s math, %d thread%s, kind %d",
                                 ac_shape_str(x0), mags[m], exact ? "exact" : "fast", threads, threads > 1 ? "s" : "", kind);
                        RmsRun f = rms_run(norm, true, k, x0, w), o = rms_run(norm, false, k, x0, w);
                        rms_same_bits(f.out, o.out, "the output", where);
                        rms_same_bits(f.gx, o.gx, "x's gradient", where);
                        rms_same_bits(f.gscale, o.gscale, "scale's gradient", where);
                        if (threads == 1) {
                            at1 = f;
                        } else { /* and the same at 2 threads as at 1 */
                            rms_same_bits(f.out, at1.out, "the output (1 and 2 threads)", where);
                            rms_same_bits(f.gx, at1.gx, "x's gradient (1 and 2 threads)", where);
                            rms_same_bits(f.gscale, at1.gscale, "scale's gradient (1 and 2 threads)", where);
                        }
                    }
                }
                nn_free(&norm->module);
                ac_arena_release(mark);
            }
    atomic_store(&ac_pool_test_free_cores, -1);
    torch_set_num_threads(was_threads);
    ac_set_exact(was_exact);
}
END_TEST

Suite *suite_llm(void) {
    Suite *s = suite_create("llm");
    TCase *tc = tcase("modules");
    tcase_add_test(tc, test_rope_bits);
    tcase_add_test(tc, test_rmsnorm_grad);
    tcase_add_test(tc, test_rmsnorm_fused_same_bits);
    tcase_add_test(tc, test_rope_grad);
    tcase_add_test(tc, test_swiglu_grad);
    tcase_add_test(tc, test_gqa_grad);
    tcase_add_test(tc, test_model_grad);
    tcase_add_test(tc, test_state_dict_names);
    suite_add_tcase(s, tc);
    tc = tcase("hugging_face");
    tcase_add_test(tc, test_save_load_round_trip);
    tcase_add_test(tc, test_bf16_rounding);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_eos_list);
    suite_add_tcase(s, tc);
    tc = tcase("llm_program");
    tcase_set_tags(tc, "programs");
    tcase_add_test(tc, test_generate_exact);
    tcase_add_test(tc, test_generate_default_math);
    tcase_add_test(tc, test_train_exact);
    tcase_add_test(tc, test_train_default_math);
    tcase_add_test(tc, test_tokenize_cli);
    tcase_add_test(tc, test_text_generate_exact);
    tcase_add_test(tc, test_text_generate_default_math);
    tcase_add_test(tc, test_train_tokenizer_json);
    tcase_add_test(tc, test_train_text_exact);
    tcase_add_test(tc, test_train_text_default_math);
    tcase_add_test(tc, test_train_html);
    tcase_add_test(tc, test_generate_html);
    tcase_add_test(tc, test_html_refusals);
    suite_add_tcase(s, tc);
    return s;
}
