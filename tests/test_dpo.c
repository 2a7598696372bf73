/* The book's DPO notebook (issue 42) against tests/tools/dpo.py (PyTorch 1.13): the preference data path,
 * pprint, compute_logprobs and compute_dpo_loss with their gradients, logsigmoid, the frozen reference model,
 * and `finetune dpo` line for line (tests/data/dpo_golden.txt, dpo_pprint.txt and dpo_run_golden.txt, made by
 * tests/tools/gen_dpo_golden.py).
 *
 * Tolerances: the suite runs in exact math, where every value here is PyTorch's float32 bits (compared ==);
 * finetune dpo's printed lines are the same text in exact math and within 2e-3 in the default math, its
 * --log losses the same to the printed 6 digits (exact) or within 1e-4 (default), --responses the same bytes
 * in exact math. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dpo.h"
#include "tests.h"
#include "xml_check.h"

#define GOLD "dpo_golden.txt"

static Tensor *golden_float(const char *name, int nd, const int64_t *shape) {
    Golden g = golden(GOLD, name);
    Tensor *t = torch_empty(nd, shape, AC_FLOAT32);
    ck_assert_int_eq(g.n, torch_numel(t));
    for (int i = 0; i < g.n; i++) ((float *)t->data)[i] = (float)g.v[i];
    return t;
}

static Tensor *golden_long(const char *name, int nd, const int64_t *shape) {
    Golden g = golden(GOLD, name);
    Tensor *t = torch_empty(nd, shape, AC_INT64);
    ck_assert_int_eq(g.n, torch_numel(t));
    for (int i = 0; i < g.n; i++) ((int64_t *)t->data)[i] = (int64_t)g.v[i];
    return t;
}

/* every element PyTorch's float32 bits */
static void assert_bits(Tensor *t, const char *name) {
    Golden g = golden(GOLD, name);
    Tensor *c = torch_contiguous(t);
    ck_assert_msg(g.n == torch_numel(c), "%s: %lld values, PyTorch %d", name, (long long)torch_numel(c), g.n);
    const float *d = ac_data_float(c);
    for (int i = 0; i < g.n; i++)
        ck_assert_msg(d[i] == (float)g.v[i], "%s[%d]: %.9g, PyTorch %.9g", name, i, (double)d[i], g.v[i]);
}

START_TEST(test_logsigmoid_bits) {
    Golden x = golden(GOLD, "logsigmoid_x");
    Tensor *xt = torch_requires_grad_(golden_float("logsigmoid_x", SHAPE(x.n)), true);
    Tensor *y = torch_logsigmoid(xt);
    ck_assert_str_eq(torch_grad_fn_name(y), "LogSigmoidBackward0");
    assert_bits(y, "logsigmoid_y");
    torch_backward(y, golden_float("logsigmoid_w", SHAPE(x.n)));
    assert_bits(xt->grad, "logsigmoid_grad");
    EXPECT_ERROR("log_sigmoid", torch_logsigmoid(torch_zeros_dtype(SHAPE(2), AC_INT64)));
}
END_TEST

/* torch.sum(x, -1) and x.mean(-1): ATen's order of an inner sum (row_sum under 8 floats, its 8-lane
 * vectors from 8 on), bit for bit, at the lengths either side of each of its steps */
START_TEST(test_inner_sums) {
    static const int ns[] = {1, 3, 4, 5, 6, 7, 8, 9, 15, 16, 31, 33, 64, 76, 77, 100, 129, 257, 768, 1000};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        char n[64];
        snprintf(n, sizeof n, "rowsum%d_x", ns[k]);
        Tensor *x = golden_float(n, SHAPE(3, ns[k]));
        snprintf(n, sizeof n, "rowsum%d_sum", ns[k]);
        assert_bits(torch_sum_dim(x, 1, (int64_t[]){-1}, false), n);
        snprintf(n, sizeof n, "rowsum%d_mean", ns[k]);
        assert_bits(torch_mean_dim(x, 1, (int64_t[]){-1}, false), n);
    }
}
END_TEST

START_TEST(test_compute_logprobs) {
    for (int k = 1; k <= 2; k++) {
        char n[64];
#define NAME(s) (snprintf(n, sizeof n, "logprobs%d_%s", k, s), n)
        Golden s = golden(GOLD, NAME("shape"));
        int64_t b = (int64_t)s.v[0], t = (int64_t)s.v[1], v = (int64_t)s.v[2];
        Tensor *logits = torch_requires_grad_(golden_float(NAME("logits"), SHAPE(b, t, v)), true);
        Tensor *labels = golden_long(NAME("labels"), SHAPE(b, t));
        Tensor *mask = torch_empty(SHAPE(b, t), AC_BOOL);
        torch_copy_(mask, golden_long(NAME("mask"), SHAPE(b, t)));
        Tensor *out = gpt_compute_logprobs(logits, labels, k == 1 ? mask : NULL);
        ck_assert_int_eq(out->ndim, 1);
        ck_assert_int_eq(out->shape[0], b);
        assert_bits(out, NAME("out"));
        torch_backward(out, golden_float(NAME("w"), SHAPE(b)));
        assert_bits(logits->grad, NAME("grad"));
#undef NAME
    }
    EXPECT_ERROR("compute_logprobs", gpt_compute_logprobs(torch_zeros(SHAPE(2, 3, 4)), torch_zeros_dtype(SHAPE(2, 4), AC_INT64), NULL));
}
END_TEST

START_TEST(test_compute_dpo_loss) {
    Tensor *mc = torch_requires_grad_(golden_float("dpo_mc", SHAPE(5)), true);
    Tensor *mr = torch_requires_grad_(golden_float("dpo_mr", SHAPE(5)), true);
    gpt_DPOLoss l = gpt_compute_dpo_loss(mc, mr, golden_float("dpo_rc", SHAPE(5)), golden_float("dpo_rr", SHAPE(5)), 0.25);
    Golden want = golden(GOLD, "dpo_out");
    ck_assert(torch_item(l.loss) == (float)want.v[0]);
    ck_assert(torch_item(l.chosen_rewards) == (float)want.v[1]);
    ck_assert(torch_item(l.rejected_rewards) == (float)want.v[2]);
    ck_assert(!l.chosen_rewards->requires_grad && !l.rejected_rewards->requires_grad); /* .detach() */
    torch_backward(l.loss, NULL);
    assert_bits(mc->grad, "dpo_grad_mc");
    assert_bits(mr->grad, "dpo_grad_mr");
    /* a policy equal to its reference: ln 2 and no reward, whatever beta */
    gpt_DPOLoss z = gpt_compute_dpo_loss(mc, mr, mc, mr, 0.4);
    ck_assert(torch_item(z.loss) == (float)M_LN2);
    ck_assert(torch_item(z.chosen_rewards) == 0.0 && torch_item(z.rejected_rewards) == 0.0);
}
END_TEST

/* A dataset of the golden's hand-made items (ids copied) */
static PreferenceDataset *items_dataset(void) {
    PreferenceDataset *ds = ac_calloc(1, sizeof *ds);
    ds->n = 2;
    ds->prompt = ac_calloc(2, sizeof(int64_t *)), ds->chosen = ac_calloc(2, sizeof(int64_t *));
    ds->rejected = ac_calloc(2, sizeof(int64_t *));
    ds->prompt_lens = ac_calloc(2, sizeof(int64_t)), ds->chosen_lens = ac_calloc(2, sizeof(int64_t));
    ds->rejected_lens = ac_calloc(2, sizeof(int64_t));
    static const char *const keys[] = {"prompt", "chosen", "rejected"};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) {
            char n[64];
            snprintf(n, sizeof n, "collate_item%d_%s", i, keys[k]);
            Golden g = golden(GOLD, n);
            int64_t *ids = ac_malloc(sizeof(int64_t) * (size_t)g.n);
            for (int j = 0; j < g.n; j++) ids[j] = (int64_t)g.v[j];
            int64_t **dst = k == 0 ? ds->prompt : k == 1 ? ds->chosen : ds->rejected;
            int64_t *lens = k == 0 ? ds->prompt_lens : k == 1 ? ds->chosen_lens : ds->rejected_lens;
            dst[i] = ids, lens[i] = g.n;
        }
    return ds;
}

static void assert_ints(Tensor *t, const char *name) {
    Golden g = golden(GOLD, name);
    ck_assert_int_eq(g.n, torch_numel(t));
    for (int i = 0; i < g.n; i++) {
        int64_t got = t->dtype == AC_BOOL ? ((const bool *)t->data)[i] : ((const int64_t *)t->data)[i];
        ck_assert_msg(got == (int64_t)g.v[i], "%s[%d]: %lld, PyTorch %lld", name, i, (long long)got, (long long)g.v[i]);
    }
}

START_TEST(test_preference_collate) {
    PreferenceDataset *ds = items_dataset();
    const struct { const char *name; int64_t cut; bool masked; } cases[] = {{"a", 6, false}, {"b", COLLATE_NONE, true}};
    for (int c = 0; c < 2; c++) {
        PreferenceBatch b;
        preference_collate_fn(ds, (const int64_t[]){0, 1}, 2, 50256, cases[c].cut, cases[c].masked, &b);
        char n[64];
        snprintf(n, sizeof n, "collate_%s_shape", cases[c].name);
        Golden s = golden(GOLD, n);
        ck_assert_int_eq(b.chosen->shape[0], (int64_t)s.v[0]);
        ck_assert_int_eq(b.chosen->shape[1], (int64_t)s.v[1]);
        ck_assert(b.chosen_mask->dtype == AC_BOOL && b.rejected->dtype == AC_INT64);
        static const char *const keys[] = {"chosen", "rejected", "chosen_mask", "rejected_mask"};
        Tensor *ts[] = {b.chosen, b.rejected, b.chosen_mask, b.rejected_mask};
        for (int k = 0; k < 4; k++) {
            snprintf(n, sizeof n, "collate_%s_%s", cases[c].name, keys[k]);
            assert_ints(ts[k], n);
        }
        ck_assert(b.prompt[1] == ds->prompt[1] && b.prompt_lens[0] == 3);
    }
    /* the response tokens the masks keep: len - (prompt + 2), cut by allowed_max_length */
    ck_assert_int_eq(preference_response_tokens(ds, 0, true, COLLATE_NONE), 2);
    ck_assert_int_eq(preference_response_tokens(ds, 0, false, 5), 0);
    ck_assert_int_eq(preference_response_tokens(ds, 1, false, COLLATE_NONE), 6);
    EXPECT_ERROR("empty batch", { PreferenceBatch b; preference_collate_fn(ds, NULL, 0, 50256, 9, true, &b); });
    PreferenceDataset_free(ds);
}
END_TEST

START_TEST(test_pprint) {
    char err[512];
    char *text = read_text(data_path("dpo_pprint.txt"));
    JsonValue *cases = json_loads(text, strlen(text), err, sizeof err);
    ck_assert_msg(cases != NULL, "%s", err);
    for (size_t i = 0; i < json_len(cases); i++) {
        JsonValue *c = json_at(cases, i);
        char *got = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&got, &len);
        pprint_pp(json_at(c, 0), f);
        fclose(f);
        const JsonValue *want = json_at(c, 1);
        ck_assert_msg(len == want->len && !memcmp(got, want->str, len), "case %zu:\n%s\npprint:\n%s", i, got, want->str);
        free(got);
    }
    json_free(cases);
    free(text);
}
END_TEST

START_TEST(test_preference_data) {
    char err[1024];
    JsonValue *data = preference_load(shared_path("data/instruction-data-with-preference.json"), err, sizeof err);
    ck_assert_msg(data != NULL, "%s", err);
    ck_assert_int_eq(json_len(data), 1100);
    int64_t first, n = preference_count_equal(data, &first);
    ck_assert_int_eq(n, 6);
    ck_assert_int_eq(first, 122);
    Tokenizer *tok = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    ck_assert_msg(tok != NULL, "%s", err);
    InstructSplits sp = instruct_split(data, 0);
    PreferenceDataset *ds = PreferenceDataset_new(sp.train, tok, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    ck_assert_int_eq(PreferenceDataset_len(ds), 935);
    /* the notebook's batch["prompt"][0]: 48 ids, ... 19503, 521, 14610, 1545 */
    ck_assert_int_eq(ds->prompt_lens[0], 48);
    ck_assert_int_eq(ds->prompt[0][47], 1545);
    ck_assert_int_eq(ds->chosen_lens[0], 74); /* batch["chosen"][0] is 81 with 7 pads */
    /* the loader: the notebook's first shapes after manual_seed(123) */
    torch_manual_seed(123);
    PreferenceDataLoader l = PreferenceDataLoader_new(ds, 8, true, true, (PreferenceCollateArgs){50256, 1024, true});
    ck_assert_int_eq(PreferenceDataLoader_len(&l), 116);
    PreferenceDataLoaderIter it = PreferenceDataLoader_iter(&l);
    PreferenceBatch b;
    const int64_t want[] = {77, 81, 94, 75, 75, 76, 99};
    for (int k = 0; k < 7; k++) {
        ck_assert(PreferenceDataLoaderIter_next(&it, &b));
        ck_assert_int_eq(b.chosen->shape[1], want[k]);
        ck_assert_int_eq(b.rejected->shape[1], want[k]);
    }
    PreferenceDataLoaderIter_free(&it);
    ck_assert(!PreferenceDataLoaderIter_next(&it, &b));
    PreferenceDataset_free(ds);
    tokenizer_free(tok);
    /* bad entries: named by index and key */
    const struct { const char *json, *want; } bad[] = {
        {"[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\", \"rejected\": \"c\"}]", "entry 0: key 'chosen' is missing"},
        {"[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\", \"chosen\": \"c\", \"rejected\": \"d\"},"
         " {\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\", \"chosen\": \"c\", \"rejected\": 3}]",
         "entry 1: 'rejected' is int, not str"},
        {"[{\"instruction\": \"a\", \"output\": \"b\", \"chosen\": \"c\", \"rejected\": \"d\"}]", "entry 0: key 'input' is missing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        JsonValue *d = json_loads(bad[i].json, strlen(bad[i].json), err, sizeof err);
        ck_assert(d != NULL);
        ck_assert(!preference_check(d, err, sizeof err));
        ck_assert_msg(strstr(err, bad[i].want), "%s: %s", bad[i].want, err);
        json_free(d);
    }
    json_free(data);
}
END_TEST

/* The frozen copy: the same weights, no grad, eval mode, the generator untouched; a DPO step moves the
 * policy and leaves the reference and its (absent) gradients alone. */
START_TEST(test_reference_model) {
    nn_GPTConfig cfg = {.vocab_size = 50, .context_length = 16, .emb_dim = 8, .n_heads = 2, .n_layers = 1,
                        .drop_rate = 0.0, .qkv_bias = true};
    torch_manual_seed(4);
    nn_GPTModel *policy = nn_GPTModel_new(cfg);
    double before = torch_item(torch_rand(SHAPE(1)));
    torch_manual_seed(4);
    nn_GPTModel *p2 = nn_GPTModel_new(cfg);
    nn_GPTModel *ref = gpt_reference_model(p2);
    ck_assert(torch_item(torch_rand(SHAPE(1))) == before); /* no draw taken */
    nn_TensorList a = nn_named_parameters(&policy->module), r = nn_named_parameters(&ref->module);
    ck_assert_int_eq(a.n, r.n);
    for (int i = 0; i < a.n; i++) {
        ck_assert(!r.tensors[i]->requires_grad);
        ck_assert(torch_equal(a.tensors[i], r.tensors[i]));
    }
    ck_assert_int_eq(nn_num_trainable_parameters(&ref->module), 0);
    ck_assert(!ref->module.training);
    /* one step on a hand-made batch */
    PreferenceDataset *ds = items_dataset();
    for (int i = 0; i < 2; i++) /* ids within the small vocabulary */
        for (int64_t t = 0; t < ds->chosen_lens[i]; t++) ds->chosen[i][t] %= 50;
    for (int i = 0; i < 2; i++)
        for (int64_t t = 0; t < ds->rejected_lens[i]; t++) ds->rejected[i][t] %= 50;
    PreferenceBatch b;
    preference_collate_fn(ds, (const int64_t[]){0, 1}, 2, 49, COLLATE_NONE, true, &b);
    optim_Optimizer *opt = optim_AdamW(nn_named_parameters(&policy->module), 1e-2, 0.9, 0.999, 1e-8, 0.01, false);
    gpt_DPOLoss l = gpt_compute_dpo_loss_batch(&b, policy, ref, 0.1);
    ck_assert(torch_item(l.loss) == (float)M_LN2);
    torch_backward(l.loss, NULL);
    optim_step(opt);
    bool moved = false;
    for (int i = 0; i < a.n; i++) {
        ck_assert(r.tensors[i]->grad == NULL);
        moved = moved || !torch_equal(a.tensors[i], r.tensors[i]);
    }
    ck_assert(moved);
    gpt_DPOLoss l2 = gpt_compute_dpo_loss_batch(&b, policy, ref, 0.1);
    ck_assert(torch_item(l2.loss) < M_LN2); /* the step learned the preference */
    optim_free(opt);
    PreferenceDataset_free(ds);
    nn_free(&ref->module), nn_free(&policy->module), nn_free(&p2->module);
}
END_TEST

/* ---- finetune dpo against dpo.py ---------------------------------------------------------------- */

enum { DV = 50257, DC = 128, DE = 8 };

/* tests/tools/gen_dpo_golden.py's dpo_gpt2: manual_seed(11), randn * 0.05 per key (LayerNorm weights
 * 1 + randn * 0.1); vocab: the config's vocab_size (a smaller one for the refusal) */
static void write_dpo_gpt2(const char *dir, int64_t vocab) {
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"n_embd\": %d, \"n_head\": 2, \"n_layer\": 1, \"n_positions\": %d, \"vocab_size\": %lld}", DE, DC,
            (long long)vocab);
    fclose(f);
    static const char *const names[] = {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias",
                                        "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight",
                                        "h.0.attn.c_proj.bias", "h.0.ln_2.weight", "h.0.ln_2.bias", "h.0.mlp.c_fc.weight",
                                        "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight", "h.0.mlp.c_proj.bias",
                                        "ln_f.weight", "ln_f.bias"};
    const int64_t shapes[][2] = {{vocab, DE}, {DC, DE}, {DE, 0}, {DE, 0}, {DE, 3 * DE}, {3 * DE, 0}, {DE, DE}, {DE, 0},
                                 {DE, 0}, {DE, 0}, {DE, 4 * DE}, {4 * DE, 0}, {4 * DE, DE}, {DE, 0}, {DE, 0}, {DE, 0}};
    Tensor *ts[16];
    torch_manual_seed(11);
    for (int i = 0; i < 16; i++) {
        Tensor *t = shapes[i][1] ? torch_randn(SHAPE(shapes[i][0], shapes[i][1])) : torch_randn(SHAPE(shapes[i][0]));
        ts[i] = strstr(names[i], "ln_") && strstr(names[i], "weight") ? torch_add_scalar(torch_mul_scalar(t, 0.1), 1.0)
                                                                       : torch_mul_scalar(t, 0.05);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(safetensors_save(path, (nn_TensorList){16, (const char **)names, ts}, 0, NULL, err, sizeof err), "%s", err);
}

typedef struct { char flags[512]; int n_out, n_log, n_resp; char **out, **resp; char log[64][32]; } Run;

static int load_runs(Run *runs, int max) {
    char *text = read_text(data_path("dpo_run_golden.txt")), *save = NULL;
    int n = -1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "run ", 4)) {
            ck_assert(++n < max);
            memset(&runs[n], 0, sizeof runs[n]);
            runs[n].out = calloc(1024, sizeof(char *)), runs[n].resp = calloc(1024, sizeof(char *));
            snprintf(runs[n].flags, sizeof runs[n].flags, "%s", line + 4);
        } else if (!strncmp(line, "out", 3)) {
            ck_assert(runs[n].n_out < 1024);
            runs[n].out[runs[n].n_out++] = strdup(line[3] ? line + 4 : "");
        } else if (!strncmp(line, "resp", 4)) {
            ck_assert(runs[n].n_resp < 1024);
            runs[n].resp[runs[n].n_resp++] = strdup(line[4] ? line + 5 : "");
        } else if (!strncmp(line, "log ", 4)) {
            long step;
            char loss[32];
            ck_assert(sscanf(line + 4, "%ld %31s", &step, loss) == 2 && step == runs[n].n_log && runs[n].n_log < 64);
            snprintf(runs[n].log[runs[n].n_log++], 32, "%s", loss);
        }
    }
    free(text);
    return n + 1;
}

/* the same words, and numbers within tol */
static bool lines_close(const char *a, const char *b, double tol) {
    while (*a && *b) {
        char *ea, *eb;
        double x = strtod(a, &ea), y = strtod(b, &eb);
        if (ea != a && eb != b && (isdigit((unsigned char)*a) || *a == '-')) {
            if (!(fabs(x - y) <= tol) && !(isnan(x) && isnan(y))) return false;
            a = ea, b = eb;
        } else if (*a++ != *b++) {
            return false;
        }
    }
    return *a == *b;
}

static void compare_lines(const char *cmd, char *text, char **want, int n_want, bool exact, const char *what) {
    int i = 0;
    for (char *line = text, *nl; line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!nl && !*line && i == n_want) break; /* the text's last newline */
        ck_assert_msg(i < n_want, "%s: more %s lines than dpo.py's %d: %s", cmd, what, n_want, line);
        bool same = exact ? !strcmp(line, want[i]) : lines_close(line, want[i], 2e-3);
        ck_assert_msg(same, "%s\n%s line %d: %s\ndpo.py:  %s", cmd, what, i + 1, line, want[i]);
        i++;
    }
    ck_assert_msg(i == n_want, "%s: %d %s lines, dpo.py %d", cmd, i, what, n_want);
}

START_TEST(test_dpo_against_pytorch) {
    static Run runs[4];
    int n = load_runs(runs, 4);
    ck_assert_int_eq(n, 3);
    char *dir = temp_dir(), cmd[4096], log[600], resp[600], *out;
    write_dpo_gpt2(dir, DV);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(resp, sizeof resp, "%s/responses.json", dir);
    for (int exact = under_asan() ? 0 : 1; exact >= 0; exact--)
        for (int r = 0; r < n; r++) {
            char flags[1024];
            const char *at = strstr(runs[r].flags, "GPT2DIR");
            if (at) snprintf(flags, sizeof flags, "%.*s%s%s --responses %s", (int)(at - runs[r].flags), runs[r].flags, dir, at + 7, resp);
            else snprintf(flags, sizeof flags, "%s", runs[r].flags);
            snprintf(cmd, sizeof cmd, "%s/finetune dpo %s --tokenizer %s --data %s --log %s%s%s 2>/dev/null", build_dir(),
                     flags, shared_path("data/gpt2"), shared_path("data/instruction-data-with-preference.json"), log,
                     exact ? " --exact" : "", r == 2 ? " --threads 2" : "");
            ck_assert_msg(run_command(cmd, &out) == 0, "%s failed", cmd);
            compare_lines(cmd, out, runs[r].out, runs[r].n_out, exact, "printed");
            free(out);
            char *text = read_text(log), *p = text;
            for (int k = 0; k < runs[r].n_log; k++) {
                long step;
                double l;
                int used = 0;
                ck_assert_msg(sscanf(p, "step %ld loss %lf\n%n", &step, &l, &used) == 2 && step == k, "%s: log line %d", cmd, k);
                double want = strtod(runs[r].log[k], NULL);
                ck_assert_msg(exact ? l == want : fabs(l - want) <= 1e-4, "%s: step %d loss %.6f, dpo.py %s", cmd, k, l,
                              runs[r].log[k]);
                p += used;
            }
            ck_assert_msg(*p == 0, "%s: more log lines than dpo.py's %d", cmd, runs[r].n_log);
            free(text);
            if (runs[r].n_resp) {
                text = read_text(resp);
                compare_lines(cmd, text, runs[r].resp, runs[r].n_resp, exact, "--responses");
                free(text);
            }
        }
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < runs[r].n_out; j++) free(runs[r].out[j]);
        for (int j = 0; j < runs[r].n_resp; j++) free(runs[r].resp[j]);
        free(runs[r].out), free(runs[r].resp);
    }
    remove_dir(dir);
}
END_TEST

/* Each bad input refused before the first line, exit 1, naming the entry and key or the value */
START_TEST(test_dpo_refusals) {
    char *dir = temp_dir(), cmd[4096], *out, path[700], small[700];
    snprintf(small, sizeof small, "%s/small", dir);
    char mk[800];
    snprintf(mk, sizeof mk, "mkdir -p %s", small);
    ck_assert_int_eq(system(mk), 0);
    write_dpo_gpt2(small, 1000);
    const char *e = "{\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"Hi.\", ";
    char equal[20000] = "[", good[20000] = "[";
    for (int i = 0; i < 60; i++) { /* 51 training, 6 test, 3 validation entries */
        snprintf(equal + strlen(equal), 300, "%s%s\"chosen\": \"Hi.\", \"rejected\": \"Hi.\"}", i ? ", " : "", e);
        snprintf(good + strlen(good), 300, "%s%s\"chosen\": \"Hi.\", \"rejected\": \"%s\"}", i ? ", " : "", e, i % 2 ? "Hi." : "Go away.");
    }
    strcat(equal, "]"), strcat(good, "]");
    char missing[600], nonstr[600];
    snprintf(missing, sizeof missing, "[%s\"chosen\": \"a\", \"rejected\": \"b\"}, %s\"rejected\": \"b\"}]", e, e);
    snprintf(nonstr, sizeof nonstr, "[%s\"chosen\": [\"a\"], \"rejected\": \"b\"}]", e);
    const struct { const char *data, *flags, *want; } cases[] = {
        {missing, "", "entry 1: key 'chosen' is missing"},
        {nonstr, "", "entry 0: 'chosen' is list, not str"},
        {equal, "", "every entry's 'chosen' equals its 'rejected'"},
        {good, "--beta 0", "--beta 0.0: beta must be greater than 0"},
        {good, "--beta -0.5", "--beta -0.5: beta must be greater than 0"},
        {good, "--batch 2 --allowed-max-length 29", "entry 0 (training entry 0), key 'chosen'"},
        {good, "--batch 2 --gpt2 SMALL", "the model's vocab_size 1000 is smaller than the tokenizer's 50257 tokens"},
        {good, "--batch 2 --context 20", "more than the model's context_length 20"},
        {good, "--batch 52", "the training split has 51 entries, fewer than one --batch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(path, sizeof path, "%s/data%zu.json", dir, i);
        FILE *f = fopen(path, "w");
        fputs(cases[i].data, f);
        fclose(f);
        char flags[1200];
        const char *s = strstr(cases[i].flags, "SMALL");
        if (s) snprintf(flags, sizeof flags, "%.*s%s%s", (int)(s - cases[i].flags), cases[i].flags, small, s + 5);
        else snprintf(flags, sizeof flags, "%s", cases[i].flags);
        /* stdout first, then stderr: nothing may come before the message */
        snprintf(cmd, sizeof cmd, "%s/finetune dpo --data %s --tokenizer %s %s 2>&1", build_dir(), path,
                 shared_path("data/gpt2"), flags);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == 1 && strstr(out, cases[i].want), "%s: rc %d, want 1 and '%s' in: %.600s", cmd, rc, cases[i].want, out);
        ck_assert_msg(!strncmp(out, "finetune: ", 10), "%s: printed before refusing: %s", cmd, out);
        free(out);
    }
    /* some equal pairs: a warning naming the count, and the run goes on */
    snprintf(path, sizeof path, "%s/good.json", dir);
    FILE *f = fopen(path, "w");
    fputs(good, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/finetune dpo --data %s --tokenizer %s --batch 2 --epochs 0 --max-new-tokens 1 2>&1 >/dev/null",
             build_dir(), path, shared_path("data/gpt2"));
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "warning") && strstr(out, "30 of 60 entries (entry 1 first) have 'chosen' equal to 'rejected'"), "%s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++) n++;
    return n;
}

/* --html: the same output, and a well-formed page of four sections (the data, the loss, the loop, the
 * answers), five tables of the notebook's Python beside the C, every function with its def, the figures */
START_TEST(test_dpo_page) {
    const char *args = "dpo --subset 8 --batch 4 --epochs 1 --eval-freq 1 --eval-iter 1 --max-new-tokens 3 --show-batches";
    char *dir = temp_dir(), cmd[1024], path[600], err[256], *plain, *out;
    snprintf(cmd, sizeof cmd, "%s/finetune %s --tokenizer %s 2>/dev/null", build_dir(), args, shared_path("data/gpt2"));
    ck_assert_int_eq(run_command(cmd, &plain), 0);
    snprintf(path, sizeof path, "%s/page.html", dir);
    snprintf(cmd, sizeof cmd, "%s/finetune %s --tokenizer %s --html %s 2>/dev/null", build_dir(), args,
             shared_path("data/gpt2"), path);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_str_eq(out, plain);
    char *page = read_text(path);
    ck_assert_msg(xml_check(page, strlen(page), err, sizeof err), "%s: %s", path, err);
    ck_assert_int_eq(count(page, "<section id="), 4);
    ck_assert_int_eq(count(page, "<table"), 5);
    ck_assert_int_eq(count(page, "<pre class=\"out\">"), 4);
    ck_assert(strstr(page, "losses = -F.logsigmoid(beta * logits)</td>") != NULL);
    assert_page_rows(page, args);
    ck_assert_msg(count(page, "<svg ") >= 1, "the figures");
    ck_assert_msg(strstr(page, "<script") == NULL && strstr(page, " src=") == NULL, "no script, nothing fetched");
    free(plain), free(out), free(page);
    remove_dir(dir);
}
END_TEST

Suite *suite_dpo(void) {
    Suite *s = suite_create("dpo");
    TCase *tc = tcase("dpo");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_logsigmoid_bits);
    tcase_add_test(tc, test_inner_sums);
    tcase_add_test(tc, test_compute_logprobs);
    tcase_add_test(tc, test_compute_dpo_loss);
    tcase_add_test(tc, test_preference_collate);
    tcase_add_test(tc, test_pprint);
    tcase_add_test(tc, test_preference_data);
    tcase_add_test(tc, test_reference_model);
    tcase_add_test(tc, test_dpo_refusals);
    tcase_add_test(tc, test_dpo_against_pytorch);
    tcase_add_test(tc, test_dpo_page);
    suite_add_tcase(s, tc);
    return s;
}
