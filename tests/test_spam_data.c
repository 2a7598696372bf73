/* Chapter 6's data pipeline (nn/data/spam_data.h) against pandas 1.5, numpy and PyTorch 1.13:
 * tests/data/spam_golden.txt and spam_{train,validation,test}_csv.txt, written once by
 * tests/tools/gen_spam_golden.py (its header says each record). Hostile TSVs and CSVs read as pandas
 * reads them (or refused where pandas would read NaN, naming the line), to_csv byte for byte,
 * RandomState's permutations through DataFrame.sample, value_counts' text, the sample file's
 * balanced set, split, CSV files and SpamDataset's ids, and a DataLoader's first batch. */
#include <stdlib.h>
#include <sys/stat.h>

#include "spam_data.h"
#include "tests.h"

static char *golden_text;

/* the golden file's lines, one at a time: next_line(&p) (NULL at the end), NUL-terminated in place */
static char *next_line(char **p) {
    if (!*p || !**p) return NULL;
    char *s = *p, *e = strchr(s, '\n');
    if (e) *e = 0, *p = e + 1;
    else *p = s + strlen(s);
    return s;
}

static char **golden_lines(int *n) {
    free(golden_text);
    golden_text = read_text(data_path("spam_golden.txt"));
    int cap = 1024;
    char **v = malloc(cap * sizeof *v), *p = golden_text, *l;
    *n = 0;
    while ((l = next_line(&p))) {
        if (*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = l;
    }
    return v;
}

static size_t unhex(const char *h, char *out) {
    size_t n = 0;
    if (strcmp(h, "-") == 0) return 0;
    for (; h[0] && h[1] && h[0] != ' '; h += 2) {
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (char)v;
    }
    return n;
}

static void write_bytes(const char *path, const char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f, "%s missing", path);
    char *b = malloc(1 << 20);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static bool zeroed(const SpamFrame *f) { return f->n == 0 && !f->labels && !f->texts && !f->index; }

/* rows K / row LABEL HEX... at lines[*i]: the frame must hold them */
static void expect_rows(char **lines, int *i, const SpamFrame *f, const char *case_name) {
    int k;
    ck_assert(sscanf(lines[(*i)++], "rows %d", &k) == 1);
    ck_assert_msg(f->n == k, "%s: %lld rows, pandas %d", case_name, (long long)f->n, k);
    static char text[1 << 16];
    for (int r = 0; r < k; r++, (*i)++) {
        char lab[16], hex[1 << 14];
        ck_assert(sscanf(lines[*i], "row %15s %16383s", lab, hex) == 2);
        size_t n = unhex(hex, text);
        text[n] = 0;
        long long want = strcmp(lab, "spam") == 0 || strcmp(lab, "1") == 0;
        ck_assert_msg(f->labels[r] == want, "%s row %d: label", case_name, r);
        ck_assert_msg(strlen(f->texts[r]) == n && memcmp(f->texts[r], text, n) == 0, "%s row %d: \"%s\" vs \"%s\"",
                      case_name, r, f->texts[r], text);
        ck_assert_int_eq(f->index[r], r);
    }
}

/* error MSG / refuse SUBSTRING: how the reader failed */
static void expect_failure(const char *line, bool ok, const SpamFrame *f, const char *path, const char *err,
                           const char *case_name) {
    ck_assert_msg(!ok, "%s: read, pandas: %s", case_name, line);
    ck_assert(zeroed(f));
    ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && strncmp(err + strlen(path), ": ", 2) == 0,
                  "%s: \"%s\" does not name the path", case_name, err);
    const char *msg = err + strlen(path) + 2;
    if (strncmp(line, "error ", 6) == 0)
        ck_assert_msg(strcmp(msg, line + 6) == 0, "%s: \"%s\", pandas \"%s\"", case_name, msg, line + 6);
    else
        ck_assert_msg(strncmp(line, "refuse ", 7) == 0 && strstr(msg, line + 7), "%s: \"%s\" lacks \"%s\"", case_name,
                      msg, line + 7);
}

/* after a TSV read as pandas reads it: csv HEX (to_csv's bytes), then back K + text HEX..., or back_refuse */
static void expect_round_trip(char **lines, int *i, const SpamFrame *f, const char *dir, const char *case_name) {
    static char want[1 << 16], text[1 << 16];
    char path[600], err[1024];
    snprintf(path, sizeof path, "%s/%s.csv", dir, case_name);
    ck_assert_msg(spam_to_csv(f, path, err, sizeof err), "%s", err);
    size_t n, wn = unhex(lines[(*i)++] + 4, want);
    char *got = slurp(path, &n);
    ck_assert_msg(n == wn && memcmp(got, want, n) == 0, "%s: to_csv differs from pandas' (%zu vs %zu bytes)",
                  case_name, n, wn);
    free(got);
    SpamFrame back;
    bool ok = spam_read_csv(path, &back, err, sizeof err);
    if (strcmp(lines[*i], "back_refuse") == 0) { /* pandas reads other rows back: refused, naming a line */
        (*i)++;
        ck_assert_msg(!ok && strstr(err, "line "), "%s: read back, pandas reads other rows", case_name);
        return;
    }
    int k;
    ck_assert(sscanf(lines[(*i)++], "back %d", &k) == 1);
    ck_assert_msg(ok, "%s: %s", case_name, err);
    ck_assert_int_eq(back.n, k);
    for (int r = 0; r < k; r++, (*i)++) {
        size_t tn = unhex(lines[*i] + 5, text);
        ck_assert(strlen(back.texts[r]) == tn && memcmp(back.texts[r], text, tn) == 0);
        ck_assert_int_eq(back.labels[r], f->labels[r]);
    }
    SpamFrame_free(&back);
}

static void run_cases(const char *kind, bool tsv) {
    int n, cases = 0;
    char **lines = golden_lines(&n), *dir = temp_dir(), path[600], err[1024], name[128];
    static char bytes[1 << 16];
    size_t klen = strlen(kind);
    for (int i = 0; i < n;) {
        if (strncmp(lines[i], kind, klen) != 0 || lines[i][klen] != ' ') { i++; continue; }
        char *sp = strchr(lines[i] + klen + 1, ' ');
        snprintf(name, sizeof name, "%.*s", (int)(sp - lines[i] - klen - 1), lines[i] + klen + 1);
        size_t bn = unhex(sp + 1, bytes);
        snprintf(path, sizeof path, "%s/%s.%s", dir, name, tsv ? "tsv" : "csv");
        write_bytes(path, bytes, bn);
        i++, cases++;
        SpamFrame f;
        bool ok = tsv ? spam_read_tsv(path, &f, err, sizeof err) : spam_read_csv(path, &f, err, sizeof err);
        if (strncmp(lines[i], "rows ", 5) != 0) {
            expect_failure(lines[i++], ok, &f, path, err, name);
            continue;
        }
        ck_assert_msg(ok, "%s: %s", name, err);
        expect_rows(lines, &i, &f, name);
        if (tsv) expect_round_trip(lines, &i, &f, dir, name);
        SpamFrame_free(&f);
    }
    ck_assert_int_ge(cases, tsv ? 30 : 8);
    remove_dir(dir);
    free(lines);
}

START_TEST(test_tsv_as_pandas) { run_cases("tsv", true); }
END_TEST

START_TEST(test_csv_as_pandas) { run_cases("csvin", false); }
END_TEST

/* every NaN marker pandas knows, as a text, is refused */
START_TEST(test_na_markers) {
    int n;
    char **lines = golden_lines(&n), *dir = temp_dir(), path[600], err[1024], file[256];
    char *p = NULL;
    for (int i = 0; i < n; i++)
        if (strncmp(lines[i], "na ", 3) == 0) p = lines[i] + 3;
    ck_assert(p);
    snprintf(path, sizeof path, "%s/na.tsv", dir);
    int count = 0;
    for (char *tok = strtok(p, " "); tok; tok = strtok(NULL, " "), count++) {
        char v[64];
        size_t vn = unhex(tok, v);
        v[vn] = 0;
        int fn = snprintf(file, sizeof file, "spam\tx\nham\t%s\n", v);
        write_bytes(path, file, (size_t)fn);
        SpamFrame f;
        ck_assert_msg(!spam_read_tsv(path, &f, err, sizeof err), "\"%s\" read", v);
        ck_assert_msg(strstr(err, "line 2: ") && (vn == 0 ? strstr(err, "empty text") : strstr(err, "NaN markers")),
                      "\"%s\": %s", v, err);
        char quoted[80]; /* and quoted: pandas' quoting does not keep it from being NaN */
        snprintf(quoted, sizeof quoted, "\"%s\"", v);
        fn = snprintf(file, sizeof file, "spam\tx\nham\t%s\n", quoted);
        write_bytes(path, file, (size_t)fn);
        ck_assert(!spam_read_tsv(path, &f, err, sizeof err));
    }
    ck_assert_int_eq(count, 18);
    remove_dir(dir);
    free(lines);
}
END_TEST

/* RandomState(seed).permutation(n)[:k], as DataFrame.sample(k, random_state=seed) draws */
START_TEST(test_permutation) {
    int n, records = 0;
    char **lines = golden_lines(&n);
    for (int i = 0; i < n; i++) {
        long long seed, len, k;
        int at;
        if (sscanf(lines[i], "perm %lld %lld %lld%n", &seed, &len, &k, &at) != 3) continue;
        int64_t *perm = malloc((size_t)len * sizeof *perm);
        np_RandomState rs;
        np_RandomState_seed(&rs, (uint32_t)seed);
        np_permutation(&rs, len, perm);
        char *p = lines[i] + at;
        for (long long j = 0; j < k; j++) {
            long long v = strtoll(p, &p, 10);
            ck_assert_msg(perm[j] == v, "seed %lld n %lld: [%lld] %lld, numpy %lld", seed, len, j, (long long)perm[j], v);
        }
        if (len <= 1000) { /* and through spam_sample, on a frame of len rows */
            SpamFrame f, s;
            char err[256], t[24];
            ck_assert(f.labels = calloc(len, sizeof *f.labels));
            f.index = calloc(len, sizeof *f.index), f.texts = calloc(len, sizeof *f.texts), f.n = len;
            for (long long j = 0; j < len; j++) snprintf(t, sizeof t, "%lld", j), f.texts[j] = strdup(t), f.index[j] = j;
            ck_assert_msg(spam_sample(&f, k, seed, &s, err, sizeof err), "%s", err);
            for (long long j = 0; j < k; j++) ck_assert(s.index[j] == perm[j] && atoll(s.texts[j]) == perm[j]);
            SpamFrame_free(&s), SpamFrame_free(&f);
        }
        free(perm);
        records++;
    }
    ck_assert_int_eq(records, 35);
    free(lines);
}
END_TEST

static const char *golden_vc(char **lines, int n, const char *name, char *buf) {
    char key[64];
    int kn = snprintf(key, sizeof key, "vc %s ", name);
    for (int i = 0; i < n; i++)
        if (strncmp(lines[i], key, (size_t)kn) == 0) {
            buf[unhex(lines[i] + kn, buf)] = 0;
            return buf;
        }
    ck_abort_msg("no vc %s", name);
    return NULL;
}

static void check_vc(char **lines, int n, const char *name, const char *labels, bool mapped) {
    SpamFrame f = {0};
    int64_t m = 0, cap = 2000;

    f.labels = calloc(cap, sizeof *f.labels);
    for (int label, reps, used; sscanf(labels, "%d*%d%n", &label, &reps, &used) == 2; labels += used)
        for (int r = 0; r < reps; r++) f.labels[m++] = label;
    f.n = m;
    char want[256], *got = spam_value_counts(&f, mapped);
    golden_vc(lines, n, name, want);
    ck_assert_msg(strcmp(got, want) == 0, "%s: \"%s\", pandas \"%s\"", name, got, want);
    free(got);
    f.n = 0;
    free(f.labels);
}

START_TEST(test_value_counts) {
    int n;
    char **lines = golden_lines(&n);
    check_vc(lines, n, "ham_first", "0*5 1*3 0*1", false); /* the generator's lists, as label*count runs */
    check_vc(lines, n, "tie_spam_first", "1*1 0*2 1*1", false);
    check_vc(lines, n, "tie_ham_first", "0*1 1*1", false);
    check_vc(lines, n, "wide", "1*3 0*1234", false);
    check_vc(lines, n, "int_tie", "1*1 0*2 1*1", true);
    check_vc(lines, n, "int_wide", "0*12 1*3", true);
    check_vc(lines, n, "int_tie0", "0*1 1*1", true);
    free(lines);
}
END_TEST

static int64_t *golden_ints(char **lines, int n, const char *key, int64_t *count) {
    size_t kn = strlen(key);
    for (int i = 0; i < n; i++)
        if (strncmp(lines[i], key, kn) == 0 && lines[i][kn] == ' ') {
            int64_t *v = malloc(200000 * sizeof *v), m = 0;
            char *p = lines[i] + kn, *e;
            for (long long x = strtoll(p, &e, 10); e != p; x = strtoll(p, &e, 10)) v[m++] = x, p = e;
            *count = m;
            return v;
        }
    ck_abort_msg("no record %s", key);
    return NULL;
}

static void compare_file(const char *got_path, const char *want_path) {
    size_t a, b;
    char *x = slurp(got_path, &a), *y = slurp(want_path, &b);
    ck_assert_msg(a == b && memcmp(x, y, a) == 0, "%s differs from %s", got_path, want_path);
    free(x), free(y);
}

/* cmd_classify's first steps on the sample file: read, count, balance, map, split, to_csv */
START_TEST(test_sample_pipeline) {
    int n;
    char **lines = golden_lines(&n), err[1024], want[256], *dir = temp_dir(), path[600];
    SpamFrame df, balanced, part[3];
    ck_assert_msg(spam_read_tsv(shared_path("data/sms_spam_sample.tsv"), &df, err, sizeof err), "%s", err);
    char *vc = spam_value_counts(&df, false);
    ck_assert_str_eq(vc, golden_vc(lines, n, "df", want));
    free(vc);
    ck_assert_msg(create_balanced_dataset(&df, 123, &balanced, err, sizeof err), "%s", err);
    int64_t m, *index = golden_ints(lines, n, "index balanced", &m);
    ck_assert_int_eq(balanced.n, m);
    for (int64_t i = 0; i < m; i++) {
        ck_assert_int_eq(balanced.index[i], index[i]);
        ck_assert_str_eq(balanced.texts[i], df.texts[index[i]]);
        ck_assert_int_eq(balanced.labels[i], df.labels[index[i]]);
    }
    free(index);
    vc = spam_value_counts(&balanced, true);
    ck_assert_str_eq(vc, golden_vc(lines, n, "balanced", want));
    free(vc);
    ck_assert_msg(random_split(&balanced, 0.7, 0.1, 123, &part[0], &part[1], &part[2], err, sizeof err), "%s", err);
    int64_t *sizes = golden_ints(lines, n, "split", &m), *shuffled = golden_ints(lines, n, "index shuffled", &m);
    const char *names[3] = {"train", "validation", "test"};
    for (int k = 0, at = 0; k < 3; k++) {
        ck_assert_int_eq(part[k].n, sizes[k]);
        for (int64_t i = 0; i < part[k].n; i++, at++) { /* reset_index, and the rows sample(frac=1) drew */
            ck_assert_int_eq(part[k].index[i], at);
            ck_assert_str_eq(part[k].texts[i], df.texts[shuffled[at]]);
        }
        char file[64];
        snprintf(path, sizeof path, "%s/%s.csv", dir, names[k]);
        snprintf(file, sizeof file, "spam_%s_csv.txt", names[k]);
        ck_assert_msg(spam_to_csv(&part[k], path, err, sizeof err), "%s", err);
        compare_file(path, data_path(file));
        SpamFrame back; /* read back: the texts pandas reads */
        ck_assert_msg(spam_read_csv(path, &back, err, sizeof err), "%s", err);
        for (int64_t i = 0; i < back.n; i++) ck_assert_str_eq(back.texts[i], part[k].texts[i]);
        SpamFrame_free(&back), SpamFrame_free(&part[k]);
    }
    free(sizes), free(shuffled);
    SpamFrame_free(&balanced), SpamFrame_free(&df);
    remove_dir(dir);
    free(lines);
}
END_TEST

static void check_dataset(char **lines, int n, const SpamDataset *ds, const char *name) {
    char key[64];
    int64_t m, *want;
    snprintf(key, sizeof key, "ids %s", name);
    want = golden_ints(lines, n, key, &m);
    ck_assert_int_eq(ds->n, want[0]);
    ck_assert_int_eq(ds->max_length, want[1]);
    ck_assert_int_eq(ds->input_ids->ndim, 2);
    ck_assert(ds->input_ids->dtype == AC_INT64 && ds->labels->dtype == AC_INT64);
    const int64_t *x = ac_data_long(ds->input_ids), *y = ac_data_long(ds->labels);
    for (int64_t i = 0; i < m - 2; i++) ck_assert_msg(x[i] == want[i + 2], "%s: id %lld", name, (long long)i);
    free(want);
    snprintf(key, sizeof key, "labels %s", name);
    want = golden_ints(lines, n, key, &m);
    ck_assert_int_eq(m, ds->n);
    for (int64_t i = 0; i < m; i++) ck_assert_int_eq(y[i], want[i]);
    free(want);
}

START_TEST(test_spam_dataset) {
    int n;
    char **lines = golden_lines(&n), err[1024];
    Tokenizer *tok = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    ck_assert_msg(tok, "%s", err);
    SpamDataset *train = SpamDataset_new(data_path("spam_train_csv.txt"), tok, SPAM_MAX_LENGTH_NONE, 50256, err, sizeof err);
    ck_assert_msg(train, "%s", err);
    SpamDataset *val = SpamDataset_new(data_path("spam_validation_csv.txt"), tok, train->max_length, 50256, err, sizeof err);
    SpamDataset *test8 = SpamDataset_new(data_path("spam_test_csv.txt"), tok, 8, 50256, err, sizeof err);
    ck_assert(val && test8);
    check_dataset(lines, n, train, "train");
    check_dataset(lines, n, val, "validation");
    check_dataset(lines, n, test8, "test8");
    /* torch.manual_seed(123); DataLoader(train, batch_size=8, shuffle=True, drop_last=True): its first batch */
    torch_manual_seed(123);
    TensorDataLoader loader = TensorDataLoader_new(&train->dataset, 8, true, true);
    TensorDataLoaderIter it = TensorDataLoader_iter(&loader);
    Tensor *x, *y;
    ck_assert(TensorDataLoaderIter_next(&it, &x, &y));
    int64_t m, *wx = golden_ints(lines, n, "batch x", &m), *wy;
    ck_assert_int_eq(torch_numel(x), m);
    x = torch_contiguous(x), y = torch_contiguous(y);
    for (int64_t i = 0; i < m; i++) ck_assert_int_eq(ac_data_long(x)[i], wx[i]);
    wy = golden_ints(lines, n, "batch y", &m);
    for (int64_t i = 0; i < m; i++) ck_assert_int_eq(ac_data_long(y)[i], wy[i]);
    free(wx), free(wy);
    TensorDataLoaderIter_free(&it);
    SpamDataset_free(train), SpamDataset_free(val), SpamDataset_free(test8);
    tokenizer_free(tok);
    free(lines);
}
END_TEST

/* the errors that are not the readers' (those are above): each returns false, names what, leaks nothing */
START_TEST(test_errors) {
    char err[1024], path[700], *dir = temp_dir();
    SpamFrame df, out, a, b, c;
    ck_assert(!spam_read_tsv("/nonexistent/x.tsv", &df, err, sizeof err));
    ck_assert(strstr(err, "/nonexistent/x.tsv: ") && zeroed(&df));
    ck_assert(!spam_read_csv("/nonexistent/x.csv", &df, err, sizeof err));
    ck_assert(strstr(err, "/nonexistent/x.csv: "));
    snprintf(path, sizeof path, "%s/more_spam.tsv", dir);
    write_bytes(path, "spam\ta\nham\tb\nspam\tc\n", 20);
    ck_assert(spam_read_tsv(path, &df, err, sizeof err));
    ck_assert(!create_balanced_dataset(&df, 1, &out, err, sizeof err));
    ck_assert_str_eq(err, "Cannot take a larger sample than population when 'replace=False'");
    ck_assert(zeroed(&out));
    ck_assert(!spam_sample(&df, 1, 4294967296LL, &out, err, sizeof err));
    ck_assert_str_eq(err, "Seed must be between 0 and 2**32 - 1");
    ck_assert(!spam_sample(&df, 1, -1, &out, err, sizeof err));
    ck_assert(!random_split(&df, 0.7, 0.4, 1, &a, &b, &c, err, sizeof err));
    ck_assert(strstr(err, "random_split") && zeroed(&a) && zeroed(&b) && zeroed(&c));
    ck_assert(!spam_to_csv(&df, "/nonexistent/dir/out.csv", err, sizeof err));
    ck_assert_msg(strstr(err, "/nonexistent/dir/out.csv"), "%s", err);
    snprintf(path, sizeof path, "%s/sub", dir); /* a directory in the way of the rename: nothing left behind */
    mkdir(path, 0700);
    ck_assert(!spam_to_csv(&df, path, err, sizeof err));
    ck_assert_msg(strstr(err, path), "%s", err);
    snprintf(path, sizeof path, "%s/sub.tmp", dir);
    struct stat st;
    ck_assert(stat(path, &st) != 0);
    /* SpamDataset: max_length=None over no rows is Python's ValueError; a given one is fine */
    Tokenizer *tok = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    ck_assert(tok);
    snprintf(path, sizeof path, "%s/empty.csv", dir);
    write_bytes(path, "Label,Text\n", 11);
    ck_assert(!SpamDataset_new(path, tok, SPAM_MAX_LENGTH_NONE, 50256, err, sizeof err));
    ck_assert_str_eq(err, "SpamDataset: max() arg is an empty sequence");
    SpamDataset *ds = SpamDataset_new(path, tok, 4, 50256, err, sizeof err);
    ck_assert(ds && ds->n == 0 && ds->input_ids->shape[1] == 4);
    SpamDataset_free(ds);
    snprintf(path, sizeof path, "%s/empty2.csv", dir);
    write_bytes(path, "", 0);
    ck_assert(!SpamDataset_new(path, tok, 4, 50256, err, sizeof err));
    ck_assert(strstr(err, "No columns to parse from file"));
    ck_assert(!SpamDataset_new("/nonexistent/t.csv", tok, 4, 50256, err, sizeof err));
    /* max_length cuts and pads: "ab" is one GPT-2 id */
    snprintf(path, sizeof path, "%s/two.csv", dir);
    write_bytes(path, "Label,Text\n1,ab<|endoftext|>\n", 29);
    ds = SpamDataset_new(path, tok, 3, 7, err, sizeof err);
    ck_assert_msg(ds, "%s", err);
    ck_assert_int_eq(ac_data_long(ds->input_ids)[1], 50256);
    ck_assert_int_eq(ac_data_long(ds->input_ids)[2], 7);
    ck_assert_int_eq(ac_data_long(ds->labels)[0], 1);
    SpamDataset_free(ds);
    tokenizer_free(tok);
    SpamFrame_free(&df);
    remove_dir(dir);
}
END_TEST

Suite *suite_spam_data(void) {
    Suite *s = suite_create("spam_data");
    TCase *tc = tcase("spam_data");
    tcase_add_test(tc, test_tsv_as_pandas);
    tcase_add_test(tc, test_csv_as_pandas);
    tcase_add_test(tc, test_na_markers);
    tcase_add_test(tc, test_permutation);
    tcase_add_test(tc, test_value_counts);
    tcase_add_test(tc, test_sample_pipeline);
    tcase_add_test(tc, test_spam_dataset);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
