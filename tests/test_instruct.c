/* The book's chapter 7 data path (nn/data/instruct.h) against ../shared/pytorch/finetune.py run by
 * tests/tools/gen_instruct_golden.py (PyTorch 1.13): the splits of the real data (935/55/110), the
 * prompts, every training entry's ids, cmd_instruct's loaders batch by batch with torch.manual_seed(123)
 * (the book's shapes: [8, 61], [8, 76], [8, 73], ...) and where the generator is after them, a shuffled
 * loader cut by allowed_max_length, custom_collate_fn on hand-made batches, the loss over padded
 * targets (F.cross_entropy with ignore_index=-100: value and gradient), and bad data refused with
 * the entry and key named. */
#include <math.h>
#include <stdlib.h>

#include "instruct.h"
#include "tests.h"

#define GOLD "instruct_golden.txt"

static void assert_ids(const int64_t *got, int64_t n, Golden g, const char *what) {
    ck_assert_msg(n == g.n, "%s: %lld values, PyTorch %d", what, (long long)n, g.n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == (int64_t)g.v[i], "%s[%lld]: %lld, PyTorch %.0f", what, (long long)i, (long long)got[i],
                      g.v[i]);
}

static Tokenizer *gpt2(void) {
    char err[512];
    Tokenizer *t = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

static JsonValue *real_data(void) {
    char err[512];
    JsonValue *data = instruct_load(shared_path("data/instruction-data.json"), err, sizeof err);
    ck_assert_msg(data != NULL, "%s", err);
    return data;
}

/* ---- the splits and the prompts ------------------------------------------------------------- */

START_TEST(test_instruct_splits) {
    JsonValue *data = real_data();
    ck_assert_uint_eq(json_len(data), 1100);
    InstructSplits s = instruct_split(data, 0);
    Golden g = golden(GOLD, "split_lengths");
    ck_assert(s.train.n == g.v[0] && s.val.n == g.v[1] && s.test.n == g.v[2]); /* 935, 55, 110 */
    ck_assert_ptr_eq(s.train.entries[0], json_at(data, 0));
    ck_assert_ptr_eq(s.test.entries[0], json_at(data, 935));
    ck_assert_ptr_eq(s.val.entries[0], json_at(data, 1045));
    s = instruct_split(data, 10);
    g = golden(GOLD, "subset_lengths");
    ck_assert(s.train.n == g.v[0] && s.val.n == g.v[1] && s.test.n == g.v[2]);
    ck_assert_ptr_eq(s.test.entries[0], json_at(data, 935));
    s = instruct_split(data, 100); /* a subset larger than a split leaves it whole */
    ck_assert(s.train.n == 100 && s.val.n == 55 && s.test.n == 100);
    json_free(data);
    /* tiny lists: int(n * 0.85), int(n * 0.1), the rest */
    const int64_t sizes[][4] = {{0, 0, 0, 0}, {1, 0, 0, 1}, {7, 5, 0, 2}, {10, 8, 1, 1}, {20, 17, 2, 1}};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        JsonValue *list = json_new_array();
        for (int64_t i = 0; i < sizes[k][0]; i++) json_append(list, json_new_object());
        s = instruct_split(list, 0);
        ck_assert_msg(s.train.n == sizes[k][1] && s.test.n == sizes[k][2] && s.val.n == sizes[k][3], "n=%lld",
                      (long long)sizes[k][0]);
        json_free(list);
    }
}
END_TEST

START_TEST(test_instruct_prompts) {
    char err[512];
    JsonValue *data = real_data(), *want = json_load(data_path("instruct_prompts.txt"), err, sizeof err);
    ck_assert_msg(want != NULL, "%s", err);
    ck_assert_uint_ge(json_len(want), 7);
    for (size_t k = 0; k < json_len(want); k++) {
        JsonValue *pair = json_at(want, k);
        size_t i = (size_t)json_at(pair, 0)->number;
        char *got = format_input(json_at(data, i));
        ck_assert_msg(strcmp(got, json_at(pair, 1)->str) == 0, "format_input(data[%zu]):\n%s\nPython:\n%s", i, got,
                      json_at(pair, 1)->str);
        free(got);
    }
    json_free(want);
    json_free(data);
    /* an input that is empty adds nothing; one with a NUL keeps all of it */
    JsonValue *e = json_new_object();
    json_set_string(e, "instruction", "Say hi.", 7);
    json_set_string(e, "input", "", 0);
    char *p = format_input(e);
    ck_assert_str_eq(p, "Below is an instruction that describes a task. Write a response that appropriately completes "
                        "the request.\n\n### Instruction:\nSay hi.");
    free(p);
    json_set_string(e, "input", "a\0b", 3);
    size_t n;
    p = format_input_len(e, &n);
    ck_assert(n > 4 && memcmp(p + n - 16, "\n\n### Input:\na\0b", 16) == 0 && memcmp(p + n - 3, "a\0b", 3) == 0);
    free(p);
    json_free(e);
}
END_TEST

/* ---- the dataset and cmd_instruct's loaders ------------------------------------------------- */

START_TEST(test_instruct_dataset) {
    char err[512];
    JsonValue *data = real_data();
    Tokenizer *tok = gpt2();
    InstructSplits s = instruct_split(data, 0);
    InstructionDataset *ds = InstructionDataset_new(s.train, tok, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    Golden lens = golden(GOLD, "train_lens"), sums = golden(GOLD, "train_sums");
    ck_assert_int_eq(InstructionDataset_len(ds), lens.n);
    for (int64_t i = 0; i < ds->n; i++) {
        int64_t n;
        const int64_t *ids = InstructionDataset_getitem(ds, i, &n);
        int64_t sum = 0;
        for (int64_t k = 0; k < n; k++) sum = (sum + ids[k] * (k + 1)) % 2147483648LL;
        ck_assert_msg(n == (int64_t)lens.v[i] && sum == (int64_t)sums.v[i], "entry %lld: %lld ids (PyTorch %.0f)",
                      (long long)i, (long long)n, lens.v[i]);
    }
    int64_t n;
    const int64_t *ids0 = InstructionDataset_getitem(ds, 0, &n);
    assert_ids(ids0, n, golden(GOLD, "train_ids_0"), "ds[0]");
    EXPECT_ERROR("list index out of range", InstructionDataset_getitem(ds, 935, &n));
    InstructionDataset_free(ds);
    tokenizer_free(tok);
    json_free(data);
}
END_TEST

static void assert_row(Tensor *t, int64_t row, const char *name) {
    Golden g = golden(GOLD, name);
    ck_assert_int_eq(t->shape[1], g.n);
    assert_ids((const int64_t *)t->data + row * t->shape[1], t->shape[1], g, name);
}

/* A loader's batch shapes against a record of (rows, T) pairs. */
static void assert_shapes(InstructDataLoader *l, const char *name) {
    Golden g = golden(GOLD, name);
    InstructDataLoaderIter it = InstructDataLoader_iter(l);
    Tensor *x, *y;
    int k = 0;
    while (InstructDataLoaderIter_next(&it, &x, &y)) {
        ck_assert_msg(2 * k + 1 < g.n, "%s: more batches than PyTorch's %d", name, g.n / 2);
        ck_assert_msg(x->shape[0] == g.v[2 * k] && x->shape[1] == g.v[2 * k + 1] && y->shape[0] == x->shape[0] &&
                          y->shape[1] == x->shape[1],
                      "%s, batch %d: (%lld, %lld), PyTorch (%.0f, %.0f)", name, k, (long long)x->shape[0],
                      (long long)x->shape[1], g.v[2 * k], g.v[2 * k + 1]);
        k++;
    }
    ck_assert_int_eq(2 * k, g.n);
}

START_TEST(test_instruct_loaders) {
    char err[512];
    JsonValue *data = real_data();
    Tokenizer *tok = gpt2();
    InstructSplits s = instruct_split(data, 0);
    InstructionDataset *train = InstructionDataset_new(s.train, tok, err, sizeof err);
    InstructionDataset *val = InstructionDataset_new(s.val, tok, err, sizeof err);
    ck_assert(train && val);
    CollateArgs collate = {50256, -100, 1024};
    torch_manual_seed(123);
    InstructDataLoader train_loader = InstructDataLoader_new(train, 8, true, true, collate);
    InstructDataLoader val_loader = InstructDataLoader_new(val, 8, false, false, collate);
    ck_assert_int_eq(InstructDataLoader_len(&train_loader), (int64_t)golden(GOLD, "train_len").v[0]); /* 116 */

    /* for inputs, targets in train_loader: print(inputs.shape, targets.shape) */
    Golden shapes = golden(GOLD, "train_shapes");
    InstructDataLoaderIter it = InstructDataLoader_iter(&train_loader);
    Tensor *x, *y, *last_x = NULL, *last_y = NULL;
    int k = 0;
    while (InstructDataLoaderIter_next(&it, &x, &y)) {
        ck_assert(x->dtype == AC_INT64 && y->dtype == AC_INT64 && x->ndim == 2);
        ck_assert_msg(x->shape[0] == shapes.v[2 * k] && x->shape[1] == shapes.v[2 * k + 1],
                      "batch %d: torch.Size([%lld, %lld]), PyTorch torch.Size([%.0f, %.0f])", k, (long long)x->shape[0],
                      (long long)x->shape[1], shapes.v[2 * k], shapes.v[2 * k + 1]);
        if (k == 0) assert_row(x, 0, "first_input"), assert_row(y, 0, "first_target");
        last_x = x, last_y = y;
        k++;
    }
    ck_assert_int_eq(k, 116);
    assert_row(last_x, 0, "last_input"); /* print(inputs[0]), print(targets[0]) */
    assert_row(last_y, 0, "last_target");
    /* the generator where PyTorch's is: the same torch.rand(2) */
    Tensor *r = torch_rand(SHAPE(2));
    Golden g = golden(GOLD, "after_epoch_rand");
    for (int i = 0; i < 2; i++) ck_assert_msg(((float *)r->data)[i] == (float)g.v[i], "torch.rand(2)[%d]", i);
    assert_shapes(&train_loader, "train_shapes_2");
    assert_shapes(&val_loader, "val_shapes");

    /* a loop left early, then freed; an iterator freed before it started */
    it = InstructDataLoader_iter(&train_loader);
    ck_assert(InstructDataLoaderIter_next(&it, &x, &y));
    InstructDataLoaderIter_free(&it);
    ck_assert(!InstructDataLoaderIter_next(&it, &x, &y));
    it = InstructDataLoader_iter(&val_loader);
    InstructDataLoaderIter_free(&it);
    EXPECT_ERROR("batch_size should be a positive integer value", InstructDataLoader_new(val, 0, false, false, collate));

    /* shuffled, not drop_last, allowed_max_length=40, seed 7: every row */
    torch_manual_seed(7);
    InstructDataLoader cut = InstructDataLoader_new(val, 4, true, false, (CollateArgs){50256, -100, 40});
    Golden cs = golden(GOLD, "cut_shapes"), ci = golden(GOLD, "cut_inputs"), ct = golden(GOLD, "cut_targets");
    it = InstructDataLoader_iter(&cut);
    int64_t at = 0;
    k = 0;
    while (InstructDataLoaderIter_next(&it, &x, &y)) {
        ck_assert(x->shape[0] == cs.v[2 * k] && x->shape[1] == cs.v[2 * k + 1]);
        int64_t n = torch_numel(x);
        assert_ids(x->data, n, (Golden){(int)n, ci.v + at}, "cut inputs");
        assert_ids(y->data, n, (Golden){(int)n, ct.v + at}, "cut targets");
        at += n, k++;
    }
    ck_assert_int_eq(at, ci.n);
    InstructionDataset_free(train);
    InstructionDataset_free(val);
    tokenizer_free(tok);
    json_free(data);
}
END_TEST

/* ---- custom_collate_fn ---------------------------------------------------------------------- */

START_TEST(test_instruct_collate) {
    int cases = 0;
    for (int k = 0;; k++) {
        char name[64];
        snprintf(name, sizeof name, "collate%d_lens", k);
        char *text = read_text(data_path(GOLD));
        bool more = strstr(text, name) != NULL;
        free(text);
        if (!more) break;
        Golden lens = golden(GOLD, name);
        snprintf(name, sizeof name, "collate%d_ids", k);
        Golden ids = golden(GOLD, name);
        snprintf(name, sizeof name, "collate%d_args", k);
        Golden args = golden(GOLD, name);
        const int64_t *items[16];
        int64_t ls[16], flat[256], at = 0;
        for (int i = 0; i < ids.n; i++) flat[i] = (int64_t)ids.v[i];
        for (int i = 0; i < lens.n; i++) items[i] = flat + at, ls[i] = (int64_t)lens.v[i], at += ls[i];
        Tensor *x, *y;
        custom_collate_fn(items, ls, lens.n, (int64_t)args.v[0], (int64_t)args.v[1],
                          args.v[2] != 0 ? (int64_t)args.v[3] : COLLATE_NONE, &x, &y);
        snprintf(name, sizeof name, "collate%d_shape", k);
        Golden shape = golden(GOLD, name);
        ck_assert_msg(x->ndim == 2 && x->shape[0] == shape.v[0] && x->shape[1] == shape.v[1] && y->shape[1] == x->shape[1],
                      "case %d: (%lld, %lld), PyTorch (%.0f, %.0f)", k, (long long)x->shape[0], (long long)x->shape[1],
                      shape.v[0], shape.v[1]);
        snprintf(name, sizeof name, "collate%d_inputs", k);
        assert_ids(x->data, torch_numel(x), golden(GOLD, name), name);
        snprintf(name, sizeof name, "collate%d_targets", k);
        assert_ids(y->data, torch_numel(y), golden(GOLD, name), name);
        cases++;
    }
    ck_assert_int_ge(cases, 10);
    Tensor *x, *y;
    EXPECT_ERROR("max() arg is an empty sequence", custom_collate_fn(NULL, NULL, 0, 50256, -100, COLLATE_NONE, &x, &y));
}
END_TEST

/* A collate function of one's own gets the batch's items in the sampler's order. */
typedef struct { int calls; int64_t rows; } Seen;

static void my_collate(const int64_t *const *items, const int64_t *lens, int64_t n, void *ctx, Tensor **inputs,
                       Tensor **targets) {
    Seen *seen = ctx;
    seen->calls++;
    seen->rows += n;
    *inputs = torch_empty(SHAPE(n, 1), AC_INT64);
    *targets = torch_empty(SHAPE(n, 1), AC_INT64);
    for (int64_t r = 0; r < n; r++) ((int64_t *)(*inputs)->data)[r] = lens[r], ((int64_t *)(*targets)->data)[r] = items[r][0];
}

START_TEST(test_instruct_own_collate) {
    int64_t a[] = {1}, b[] = {2, 2}, c[] = {3, 3, 3};
    int64_t *ids[] = {a, b, c}, lens[] = {1, 2, 3};
    InstructionDataset ds = {3, ids, lens};
    InstructDataLoader l = InstructDataLoader_new(&ds, 2, false, false, COLLATE_DEFAULTS);
    Seen seen = {0, 0};
    l.collate_fn = my_collate;
    l.collate_ctx = &seen;
    InstructDataLoaderIter it = InstructDataLoader_iter(&l);
    Tensor *x, *y;
    ck_assert(InstructDataLoaderIter_next(&it, &x, &y));
    ck_assert(((int64_t *)x->data)[1] == 2 && ((int64_t *)y->data)[1] == 2);
    ck_assert(InstructDataLoaderIter_next(&it, &x, &y));
    ck_assert(x->shape[0] == 1 && ((int64_t *)y->data)[0] == 3);
    ck_assert(!InstructDataLoaderIter_next(&it, &x, &y));
    ck_assert(seen.calls == 2 && seen.rows == 3);
    ck_assert_int_eq(InstructDataLoader_len(&l), 2);
    /* the default collate over the same: padded to the longest + 1, then the first pad kept */
    l.collate_fn = NULL;
    it = InstructDataLoader_iter(&l);
    ck_assert(InstructDataLoaderIter_next(&it, &x, &y));
    ck_assert(x->shape[0] == 2 && x->shape[1] == 2);
    const int64_t want_x[] = {1, 50256, 2, 2}, want_y[] = {50256, -100, 2, 50256};
    for (int i = 0; i < 4; i++) ck_assert(((int64_t *)x->data)[i] == want_x[i] && ((int64_t *)y->data)[i] == want_y[i]);
    InstructDataLoaderIter_free(&it);
}
END_TEST

/* ---- the loss over padded targets ----------------------------------------------------------- */

/* F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100) and its gradient, in exact
 * math, within 1e-6 relative (|got - want| <= 1e-6 |want|, or 1e-12 for zeros). Measured: the losses bit for
 * bit; gradient elements a few ulps off (PyTorch's vectorized exp against libm's expf; measured at most
 * 5.7e-7 relative, on the smallest elements). Every target -100: nan, as PyTorch, and a zero gradient. */
static bool near(float got, double want) {
    return fabs((double)got - want) <= 1e-6 * fabs(want) + 1e-12;
}

START_TEST(test_instruct_cross_entropy) {
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "ce%d_shape", k);
        Golden shape = golden(GOLD, name);
        int64_t b = (int64_t)shape.v[0], T = (int64_t)shape.v[1], V = (int64_t)shape.v[2];
        snprintf(name, sizeof name, "ce%d_logits", k);
        Golden lg = golden(GOLD, name);
        snprintf(name, sizeof name, "ce%d_targets", k);
        Golden tg = golden(GOLD, name);
        float *lf = malloc(sizeof(float) * (size_t)lg.n);
        int64_t *ti = malloc(sizeof(int64_t) * (size_t)tg.n);
        for (int i = 0; i < lg.n; i++) lf[i] = (float)lg.v[i];
        for (int i = 0; i < tg.n; i++) ti[i] = (int64_t)tg.v[i];
        Tensor *logits = torch_requires_grad_(torch_tensor(lf, 3, (int64_t[]){b, T, V}), true);
        Tensor *targets = torch_tensor_long(ti, 2, (int64_t[]){b, T});
        Tensor *loss = torch_cross_entropy(torch_flatten(logits, 0, 1), torch_flatten(targets, 0, -1), -100);
        torch_backward(loss, NULL);
        snprintf(name, sizeof name, "ce%d_loss", k);
        double want = golden(GOLD, name).v[0];
        float got = *(float *)loss->data;
        if (isnan(want)) ck_assert_msg(isnan(got), "case %d: every target -100: PyTorch nan, got %g", k, (double)got);
        else ck_assert_msg(got == (float)want, "case %d: loss %.9g, PyTorch %.9g", k, (double)got, want);
        snprintf(name, sizeof name, "ce%d_grad", k);
        Golden gr = golden(GOLD, name);
        ck_assert_int_eq(gr.n, torch_numel(logits));
        const float *g = logits->grad->data;
        for (int i = 0; i < gr.n; i++) {
            ck_assert_msg(near(g[i], gr.v[i]), "case %d: grad[%d] %.9g, PyTorch %.9g", k, i, (double)g[i], gr.v[i]);
            if (gr.v[i] != 0) worst = fmax(worst, fabs((double)g[i] - gr.v[i]) / fabs(gr.v[i]));
            else ck_assert_msg(g[i] == 0, "case %d: grad[%d] %g, PyTorch 0", k, i, (double)g[i]);
        }
        free(lf);
        free(ti);
    }
    ck_assert_msg(worst <= 1e-6, "the gradient's worst relative difference: %g", worst); /* measured 5.7e-7 */
}
END_TEST

/* ---- bad data ------------------------------------------------------------------------------- */

static void expect_refused(const char *dir, const char *text, size_t len, const char *needle) {
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/data.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(text, 1, len, f);
    fclose(f);
    JsonValue *v = instruct_load(path, err, sizeof err);
    ck_assert_msg(v == NULL, "accepted: %s", text);
    ck_assert_msg(strstr(err, needle) != NULL && strncmp(err, path, strlen(path)) == 0, "\"%s\" lacks \"%s\"", err,
                  needle);
}
#define REFUSED(dir, lit, needle) expect_refused(dir, lit, sizeof lit - 1, needle)

START_TEST(test_instruct_bad_data) {
    char *dir = temp_dir();
    REFUSED(dir, "{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"}", "is dict, not a list");
    REFUSED(dir, "\"text\"", "is str, not a list");
    REFUSED(dir, "[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"}, 7]", "entry 1: is int, not a dict");
    REFUSED(dir, "[[\"instruction\", \"input\", \"output\"]]", "entry 0: is list, not a dict");
    REFUSED(dir, "[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"}, {\"instruction\": \"a\", \"output\": \"b\"}]",
            "entry 1: key 'input' is missing");
    REFUSED(dir, "[{\"instruction\": \"a\", \"input\": \"\"}]", "entry 0: key 'output' is missing");
    REFUSED(dir, "[{\"instruction\": \"a\", \"input\": 3, \"output\": \"b\"}]", "entry 0: 'input' is int, not str");
    REFUSED(dir, "[{\"instruction\": null, \"input\": \"\", \"output\": \"b\"}]", "entry 0: 'instruction' is NoneType, not str");
    REFUSED(dir, "[{\"instruction\": \"a\", \"input\": \"\", \"output\": 1.5}]", "entry 0: 'output' is float, not str");
    REFUSED(dir, "[{\"instruction\": \"a\", \"input\": \"\", \"output\": [\"b\"]}]", "entry 0: 'output' is list, not str");
    REFUSED(dir, "[\n  {\"instruction\": \"a\",\n   \"input\": \"\"\n   \"output\": \"b\"}\n]",
            "Expecting ',' delimiter: line 4 column 4 (char 43)");
    REFUSED(dir, "[\r\n {\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"},\r\n]", "Expecting value: line 3 column 1 (char 53)");
    REFUSED(dir, "[{\"instruction\": \"caf\xc3\xa9 \xff\", \"input\": \"\", \"output\": \"b\"}]",
            "'utf-8' codec can't decode byte 0xff in position 24: invalid start byte (line 1 column 24)");
    REFUSED(dir, "", "Expecting value: line 1 column 1 (char 0)");
    char err[512];
    ck_assert_ptr_null(instruct_load("/nonexistent/data.json", err, sizeof err));
    ck_assert_msg(strstr(err, "/nonexistent/data.json") != NULL, "%s", err);

    /* extra keys are kept; a text the tokenizer cannot take (a lone surrogate) is refused by entry */
    const char ok[] = "[{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\", \"id\": 1},"
                      " {\"instruction\": \"a\", \"input\": \"\\ud800\", \"output\": \"b\"}]";
    JsonValue *data = json_loads(ok, sizeof ok - 1, err, sizeof err);
    ck_assert_msg(data && instruct_check(data, err, sizeof err), "%s", err);
    ck_assert_ptr_nonnull(json_get(json_at(data, 0), "id"));
    Tokenizer *tok = gpt2();
    InstructionDataset *ds = InstructionDataset_new((InstructList){data->items, 2}, tok, err, sizeof err);
    ck_assert_msg(ds == NULL && strncmp(err, "entry 1: ", 9) == 0, "%s", err);
    ds = InstructionDataset_new((InstructList){data->items, 1}, tok, err, sizeof err);
    ck_assert_msg(ds != NULL, "%s", err);
    InstructionDataset_free(ds);
    /* an unchecked entry given to format_input or the dataset */
    JsonValue *bad = json_new_object();
    json_set(bad, "instruction", json_new_int(1));
    EXPECT_ERROR("no str 'instruction'", format_input(bad));
    ds = InstructionDataset_new((InstructList){&bad, 1}, tok, err, sizeof err);
    ck_assert_msg(ds == NULL && strstr(err, "entry 0: 'instruction' is int, not str") != NULL, "%s", err);
    json_free(bad);
    tokenizer_free(tok);
    json_free(data);
    remove_dir(dir);
}
END_TEST

/* cmd_instruct's --responses file: the test split with each model_response, json.dump(test_data, f, indent=4) */
START_TEST(test_instruct_responses_file) {
    char err[512], *dir = temp_dir(), path[700];
    JsonValue *data = real_data();
    InstructSplits s = instruct_split(data, 0);
    JsonValue *test = instruct_list_json(s.test);
    ck_assert_uint_eq(json_len(test), 110);
    static const char *const responses[] = {"The capital of France is Paris."};
    for (size_t i = 0; i < json_len(test); i++) {
        char r[64];
        int n = snprintf(r, sizeof r, "%s #%zu", responses[0], i);
        json_set_string(json_at(test, i), "model_response", r, (size_t)n);
    }
    snprintf(path, sizeof path, "%s/responses.json", dir);
    ck_assert_msg(json_dump(test, path, 4, err, sizeof err), "%s", err);
    /* what the golden file of test_json holds at entry 0 (RESPONSES[0] there too) */
    char *got = read_text(path), *want = read_text(data_path("json_testset.json"));
    const char *cut = strstr(want, "\n    },");
    ck_assert_ptr_nonnull(cut);
    ck_assert_msg(strncmp(got, want, (size_t)(cut - want)) == 0, "the first entry differs from Python's");
    ck_assert_ptr_null(json_get(json_at(data, 935), "model_response")); /* the copies changed, not the data */
    free(got), free(want);
    json_free(test), json_free(data);
    remove_dir(dir);
}
END_TEST

Suite *suite_instruct(void) {
    Suite *s = suite_create("instruct");
    TCase *tc = tcase("instruct");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_instruct_splits);
    tcase_add_test(tc, test_instruct_prompts);
    tcase_add_test(tc, test_instruct_dataset);
    tcase_add_test(tc, test_instruct_loaders);
    tcase_add_test(tc, test_instruct_collate);
    tcase_add_test(tc, test_instruct_own_collate);
    tcase_add_test(tc, test_instruct_cross_entropy);
    tcase_add_test(tc, test_instruct_bad_data);
    tcase_add_test(tc, test_instruct_responses_file);
    suite_add_tcase(s, tc);
    return s;
}
