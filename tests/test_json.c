/* nn/formats/json.h against Python's json module (tests/tools/gen_json_golden.py wrote the golden files):
 * what json.loads accepts, written back as json.dumps writes it (indent 4, None and 0) byte for byte;
 * what it refuses, with its message, line and column (json.loads and json.load of a file); a hostile
 * object through a file; chapter 7's test set with a "model_response" per entry, as cmd_instruct
 * writes it; the builders; and random and truncated bytes (never a crash). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "json.h"
#include "tests.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static int hexdigit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* hex (or "-" for empty) into a malloc'd buffer */
static char *unhex(const char *h, size_t n, size_t *len) {
    if (n == 1 && h[0] == '-') n = 0;
    char *b = malloc(n / 2 + 1);
    for (size_t i = 0; i + 1 < n; i += 2) b[i / 2] = (char)(hexdigit(h[i]) << 4 | hexdigit(h[i + 1]));
    b[n / 2] = 0;
    *len = n / 2;
    return b;
}

/* A line of json_cases.txt split at tabs: up to 6 fields, each decoded from hex but the first two. */
typedef struct {
    char kind[8], name[64];
    char *f[4];
    size_t len[4];
    int n;
} Case;

static const char *next_case(const char *p, Case *c) {
    const char *end = strchr(p, '\n');
    memset(c, 0, sizeof *c);
    int field = 0;
    for (const char *q = p; q < end; field++) {
        const char *tab = memchr(q, '\t', (size_t)(end - q));
        const char *stop = tab ? tab : end;
        size_t n = (size_t)(stop - q);
        if (field == 0) snprintf(c->kind, sizeof c->kind, "%.*s", (int)n, q);
        else if (field == 1) snprintf(c->name, sizeof c->name, "%.*s", (int)n, q);
        else c->f[c->n] = unhex(q, n, &c->len[c->n]), c->n++;
        q = tab ? tab + 1 : end;
    }
    return end + 1;
}

static void free_case(Case *c) {
    for (int i = 0; i < c->n; i++) free(c->f[i]);
}

static void write_bytes(const char *path, const char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* ---- what Python accepts and how it writes it back -------------------------------------------- */

START_TEST(test_json_python_roundtrip) {
    char *text = read_text(data_path("json_cases.txt")), err[512];
    int cases = 0;
    for (const char *p = text; *p;) {
        Case c;
        p = next_case(p, &c);
        if (strcmp(c.kind, "ok") == 0) {
            JsonValue *v = json_loads(c.f[0], c.len[0], err, sizeof err);
            ck_assert_msg(v != NULL, "%s: %s", c.name, err);
            const int indents[] = {4, -1, 0};
            for (int k = 0; k < 3; k++) {
                size_t n;
                char *s = json_dumps(v, indents[k], &n, err, sizeof err);
                ck_assert_msg(s != NULL, "%s: %s", c.name, err);
                ck_assert_msg(n == c.len[k + 1] && memcmp(s, c.f[k + 1], n) == 0,
                              "%s, indent %d: got\n%.300s\nPython wrote\n%.300s", c.name, indents[k], s, c.f[k + 1]);
                free(s);
            }
            json_free(v);
            cases++;
        }
        free_case(&c);
    }
    ck_assert_int_ge(cases, 14);
    free(text);
}
END_TEST

/* Python's message, exactly; a UTF-8 error has our line and column after it; nesting past 1000
 * levels is Python's RecursionError, ours a message of our own. */
static void check_message(const char *got, const char *want, const char *input_name) {
    if (strncmp(want, "maximum recursion depth", 23) == 0) {
        ck_assert_msg(strstr(got, "nested deeper than 1000 levels") != NULL, "%s: %s", input_name, got);
        return;
    }
    if (strncmp(want, "'utf-8' codec", 13) == 0) {
        size_t n = strlen(want);
        ck_assert_msg(strncmp(got, want, n) == 0 && strncmp(got + n, " (line ", 7) == 0,
                      "%s: got \"%s\", Python \"%s\"", input_name, got, want);
        return;
    }
    ck_assert_msg(strcmp(got, want) == 0, "%s: got \"%s\", Python \"%s\"", input_name, got, want);
}

START_TEST(test_json_python_errors) {
    char *text = read_text(data_path("json_cases.txt")), err[512];
    char *dir = temp_dir(), path[600];
    snprintf(path, sizeof path, "%s/case.json", dir);
    int cases = 0;
    for (const char *p = text; *p;) {
        Case c;
        p = next_case(p, &c);
        if (strcmp(c.kind, "err") == 0) {
            char name[96];
            snprintf(name, sizeof name, "case %d (%s, %zu bytes)", cases, c.name, c.len[0]);
            JsonValue *v;
            const char *msg = err;
            if (strcmp(c.name, "load") == 0) {
                write_bytes(path, c.f[0], c.len[0]);
                v = json_load(path, err, sizeof err);
                size_t pl = strlen(path);
                ck_assert_msg(!v && strncmp(err, path, pl) == 0 && strncmp(err + pl, ": ", 2) == 0, "%s: %s", name, err);
                msg = err + pl + 2;
            } else {
                v = json_loads(c.f[0], c.len[0], err, sizeof err);
                ck_assert_msg(v == NULL, "%s: accepted", name);
            }
            check_message(msg, c.f[1], name);
            cases++;
        }
        free_case(&c);
    }
    ck_assert_int_ge(cases, 60);
    free(text);
    remove_dir(dir);
}
END_TEST

/* json.load of a file with raw UTF-8, tabs, odd separators and a CR LF, then json.dump(obj, f, indent=4) */
START_TEST(test_json_hostile_file) {
    char err[512], *dir = temp_dir(), out[600], tmp[610];
    JsonValue *v = json_load(data_path("json_hostile_in.json"), err, sizeof err);
    ck_assert_msg(v != NULL, "%s", err);
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    ck_assert_msg(json_dump(v, out, 4, err, sizeof err), "%s", err);
    char *got = read_text(out), *want = read_text(data_path("json_hostile.json"));
    ck_assert_msg(strcmp(got, want) == 0, "json_dump differs from Python's json.dump:\n%.400s", got);
    struct stat st;
    ck_assert_msg(stat(tmp, &st) != 0, "%s left behind", tmp);
    /* a few values read as Python reads them */
    ck_assert_str_eq(json_get(v, "plain")->str, "Hello, world");
    const JsonValue *nul = json_get(v, "nul");
    ck_assert(nul->len == 3 && memcmp(nul->str, "a\0b", 3) == 0);
    ck_assert_str_eq(json_get(v, "cjk")->str, "\xe6\xbc\xa2\xe5\xad\x97 \xe3\x81\x8b\xe3\x81\xaa "
                                              "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xe4\xb8\xad\xe6\x96\x87");
    const JsonValue *keys = json_get(v, "keys in order");
    const char *order[] = {"z", "a", "m", "\xc3\xa9", "\xf0\x9f\x98\x80", "", "a\"b\\c\n"};
    ck_assert_uint_eq(json_len(keys), 7);
    for (int i = 0; i < 7; i++) ck_assert_str_eq(keys->members[i].key, order[i]);
    const JsonValue *nums = json_get(v, "numbers");
    ck_assert(json_at(nums, 2)->is_int && strcmp(json_at(nums, 2)->str, "123456789012345678901234567890") == 0);
    ck_assert(!json_at(nums, 4)->is_int && json_at(nums, 4)->number == 0.1);
    /* json_dump over a directory, or into a missing one: refused, nothing written */
    ck_assert(!json_dump(v, dir, 4, err, sizeof err));
    snprintf(out, sizeof out, "%s/missing/out.json", dir);
    ck_assert(!json_dump(v, out, 4, err, sizeof err));
    ck_assert_msg(strstr(err, "missing") != NULL, "%s", err);
    json_free(v);
    free(got), free(want);
    remove_dir(dir);
}
END_TEST

/* test_data with entry["model_response"] set, json.dump(test_data, f, indent=4): cmd_instruct's file.
 * The same six strings as gen_json_golden.py's RESPONSES (given by length: one holds a NUL). */
#define S(lit) {lit, sizeof lit - 1}
static const struct { const char *s; size_t n; } RESPONSES[] = {
    S("The capital of France is Paris."),
    S("emoji \xf0\x9f\x98\x80\xf0\x9f\x8e\x89 CJK \xe6\xbc\xa2\xe5\xad\x97\xe3\x81\x8b\xe3\x81\xaa\xed\x95\x9c\xea\xb5\xad"
      "\xec\x96\xb4 accents \xc3\xa9\xc3\xbc\xc3\x9f"),
    S("quote \" backslash \\ slash / apostrophe '"),
    S("ctrl \x00\x01\x1f\x7f\xc2\x80\xc2\x9f tab\t nl\n cr\r bs\b ff\f"),
    S("astral \xf0\x9d\x84\x9e max \xf4\x8f\xbf\xbf bmp-end \xef\xbf\xbf ls\xe2\x80\xa8ps\xe2\x80\xa9 bom\xef\xbb\xbf"),
    S(""),
};

START_TEST(test_json_testset_responses) {
    char err[512], *dir = temp_dir(), out[600];
    JsonValue *data = json_load(shared_path("data/instruction-data.json"), err, sizeof err);
    ck_assert_msg(data != NULL, "%s", err);
    ck_assert_uint_eq(json_len(data), 1100);
    JsonValue *test = json_new_array();
    for (size_t i = 0; i < 110; i++) {
        JsonValue *e = json_copy(json_at(data, 935 + i));
        char resp[256];
        size_t k = i % 6, n = RESPONSES[k].n;
        memcpy(resp, RESPONSES[k].s, n);
        n += (size_t)snprintf(resp + n, sizeof resp - n, " #%zu", i);
        json_set_string(e, "model_response", resp, n);
        json_append(test, e);
    }
    snprintf(out, sizeof out, "%s/responses.json", dir);
    ck_assert_msg(json_dump(test, out, 4, err, sizeof err), "%s", err);
    char *got = read_text(out), *want = read_text(data_path("json_testset.json"));
    ck_assert_msg(strcmp(got, want) == 0, "the test set with responses differs from Python's json.dump");
    /* and it reads back to the same tree */
    JsonValue *back = json_load(out, err, sizeof err);
    ck_assert_msg(back != NULL, "%s", err);
    char *again = json_dumps(back, 4, NULL, err, sizeof err);
    ck_assert_str_eq(again, want);
    free(got), free(want), free(again);
    json_free(back), json_free(test), json_free(data);
    remove_dir(dir);
}
END_TEST

/* ---- the builders --------------------------------------------------------------------------- */

static char *dumps(const JsonValue *v, int indent) {
    char err[256];
    char *s = json_dumps(v, indent, NULL, err, sizeof err);
    ck_assert_msg(s != NULL, "%s", err);
    return s;
}

START_TEST(test_json_builders) {
    JsonValue *o = json_new_object();
    json_set(o, "b", json_new_int(-7));
    json_set(o, "a", json_new_float(0.1));
    json_set(o, "list", json_new_array());
    json_set(o, "b", json_new_bool(true)); /* a key present keeps its place: d["b"] = True */
    json_append(json_get(o, "list"), json_new_null());
    json_append(json_get(o, "list"), json_new_float(1e16));
    json_append(json_get(o, "list"), json_new_float(-0.0));
    json_append(json_get(o, "list"), json_new_float(NAN));
    json_append(json_get(o, "list"), json_new_string("\xed\xa0\x80", 3)); /* a lone surrogate (WTF-8) */
    json_set_string(o, "s", "\xf0\x9f\x98\x80\t", 5);
    char *s = dumps(o, 4);
    ck_assert_str_eq(s, "{\n    \"b\": true,\n    \"a\": 0.1,\n    \"list\": [\n        null,\n        1e+16,\n"
                        "        -0.0,\n        NaN,\n        \"\\ud800\"\n    ],\n    \"s\": \"\\ud83d\\ude00\\t\"\n}");
    free(s);
    s = dumps(o, -1);
    ck_assert_str_eq(s, "{\"b\": true, \"a\": 0.1, \"list\": [null, 1e+16, -0.0, NaN, \"\\ud800\"], "
                        "\"s\": \"\\ud83d\\ude00\\t\"}");
    free(s);
    ck_assert_str_eq(json_value_type_name(json_get(o, "a")), "float");
    ck_assert_str_eq(json_value_type_name(json_get(o, "list")), "list");
    ck_assert_ptr_null(json_get(o, "missing"));
    ck_assert_ptr_null(json_at(json_get(o, "list"), 5));

    /* a string that is not UTF-8 is refused, not written */
    char err[256];
    json_set_string(o, "bad", "ok\xff", 3);
    ck_assert_ptr_null(json_dumps(o, 4, NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "not UTF-8") != NULL, "%s", err);
    json_free(o);

    /* deeper than JSON_MAX_DEPTH: refused both ways */
    JsonValue *root = json_new_array(), *at = root;
    for (int i = 0; i < JSON_MAX_DEPTH + 5; i++) {
        JsonValue *inner = json_new_array();
        json_append(at, inner);
        at = inner;
    }
    ck_assert_ptr_null(json_dumps(root, -1, NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "deeper") != NULL, "%s", err);
    json_free(root);
}
END_TEST

/* Duplicate keys: first place, last value, also over many keys (sorted, not compared pairwise). */
START_TEST(test_json_many_keys) {
    enum { N = 200000 };
    size_t cap = (size_t)N * 24 + 64, n = 0;
    char *text = malloc(cap), err[256];
    n += (size_t)snprintf(text + n, cap - n, "{");
    for (int i = 0; i < N; i++) n += (size_t)snprintf(text + n, cap - n, "%s\"k%d\": %d", i ? ", " : "", i % (N / 2), i);
    n += (size_t)snprintf(text + n, cap - n, "}");
    JsonValue *v = json_loads(text, n, err, sizeof err);
    ck_assert_msg(v != NULL, "%s", err);
    ck_assert_uint_eq(json_len(v), N / 2);
    for (int i = 0; i < N / 2; i += 997) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        ck_assert_str_eq(v->members[i].key, key);
        ck_assert_int_eq((int)json_get(v, key)->number, i + N / 2);
    }
    json_free(v);
    free(text);
}
END_TEST

/* ---- hostile bytes -------------------------------------------------------------------------- */

/* Every prefix of a file and 3,000 random mutations of it: a tree or a message, never a crash
 * (ASan runs this too); what parses writes back and parses again to the same text. */
START_TEST(test_json_hostile_bytes) {
    char *text = read_text(data_path("json_hostile_in.json")), err[512];
    size_t len = strlen(text);
    for (size_t cut = 0; cut <= len; cut++) {
        JsonValue *v = json_loads(text, cut, err, sizeof err);
        ck_assert_msg(v != NULL || err[0], "prefix %zu: no message", cut);
        json_free(v);
    }
    uint64_t state = 12345;
    char *buf = malloc(len + 1);
    const char pool[] = "{}[]\",:\\u0123456789eE+-.ntfINa \t\r\n\x01\x7f\xc3\xa9\xed\xa0\x80\xf0\x9f\x98\x80\xff";
    for (int round = 0; round < 3000; round++) {
        memcpy(buf, text, len);
        for (int k = 0; k < 1 + round % 8; k++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t at = (size_t)(state >> 33) % len;
            buf[at] = pool[(state >> 17) % (sizeof pool - 1)];
        }
        err[0] = 0;
        JsonValue *v = json_loads(buf, len, err, sizeof err);
        if (!v) {
            ck_assert_msg(err[0], "round %d: refused without a message", round);
            continue;
        }
        size_t n1, n2;
        char *a = json_dumps(v, 4, &n1, err, sizeof err);
        ck_assert_msg(a != NULL, "round %d: %s", round, err); /* what was read can be written */
        JsonValue *w = json_loads(a, n1, err, sizeof err);
        ck_assert_msg(w != NULL, "round %d: %s", round, err);
        char *b = json_dumps(w, 4, &n2, err, sizeof err);
        ck_assert_msg(n1 == n2 && memcmp(a, b, n1) == 0, "round %d: written, read and written differ", round);
        free(a), free(b);
        json_free(v), json_free(w);
    }
    free(buf);
    free(text);
    ck_assert_ptr_null(json_load("/nonexistent/x.json", err, sizeof err));
    ck_assert_msg(strstr(err, "/nonexistent/x.json") != NULL, "%s", err);
}
END_TEST

Suite *suite_json(void) {
    Suite *s = suite_create("json");
    TCase *tc = tcase("json");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_json_python_roundtrip);
    tcase_add_test(tc, test_json_python_errors);
    tcase_add_test(tc, test_json_hostile_file);
    tcase_add_test(tc, test_json_testset_responses);
    tcase_add_test(tc, test_json_builders);
    tcase_add_test(tc, test_json_many_keys);
    tcase_add_test(tc, test_json_hostile_bytes);
    suite_add_tcase(s, tc);
    return s;
}
