/* The Makefile: objects of another compiler or other flags are never reused
 * (make CC=clang after a gcc build rebuilds), and an unchanged build is not
 * rebuilt. One small object into a build directory of its own. And two cheap
 * checks of the tree: each room of nn/ includes only the rooms below it
 * (README.md's "Layout" table), and every repository path the READMEs, the
 * headers' comments and the Makefile name exists. */
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tests.h"

START_TEST(test_objects_follow_the_compiler) {
    char *dir = temp_dir(), cmd[1024], *out;
    const char *obj = "obj/tensor/error.o";
    snprintf(cmd, sizeof cmd, "make --no-print-directory B=%s %s/%s 2>&1", dir, dir, obj);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "tensor/error.c"), "the first build compiles: %s", out);
    free(out);
    ck_assert_int_eq(run_command(cmd, &out), 0); /* the same compiler and flags: nothing to do */
    ck_assert_msg(!strstr(out, "tensor/error.c"), "rebuilt with nothing changed: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "make --no-print-directory B=%s CFLAGS=-DAC_TEST_OTHER_FLAGS %s/%s 2>&1", dir, dir, obj);
    ck_assert_int_eq(run_command(cmd, &out), 0); /* other flags (or CC=clang): compiled again */
    ck_assert_msg(strstr(out, "-DAC_TEST_OTHER_FLAGS") && strstr(out, "tensor/error.c"), "not rebuilt: %s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* A plain `make` (README's first command) builds the library and every example: the
 * default goal is `all`, not whichever rule the Makefile happens to list first. */
START_TEST(test_plain_make_builds_all) {
    char *dir = temp_dir(), cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "make --no-print-directory -n B=%s 2>&1", dir);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "libattention.a") && strstr(out, "examples/article.c") && strstr(out, "examples/gpt.c"),
                  "a plain make does not build the library and the examples: %s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* ---- the rooms' layering: README.md's "Layout" table, as data ------------------------------------- */

static const char *const rooms[] = {"tensor", "nn", "nn/blocks", "nn/formats", "nn/text", "nn/data", "nn/models",
                                    "nn/models/gpt", "nn/viz", "optim"}; /* the -I order */
#define N_ROOMS (sizeof rooms / sizeof *rooms)
static const struct { const char *room, *uses; } layering[] = { /* tensor/ is below every room */
    {"nn", ""},
    {"nn/blocks", "nn"},
    {"optim", "nn"},
    {"nn/formats", "nn optim"},
    {"nn/text", "nn/formats"},
    {"nn/data", "nn/formats nn/text"},
    {"nn/models", "nn nn/blocks optim nn/formats nn/text nn/data"},
    {"nn/models/gpt", "nn nn/blocks optim nn/formats nn/text nn/data nn/models"},
    {"nn/viz", "nn nn/text/chartext.h"},
};
/* The toy model (toy_lm.[ch], toy_lm_checkpoint.c) sits in nn/ but uses more, as the table says: a
 * room of its own above nn/formats and nn/text, which no room of nn/ may include. */
static const char *const toy_uses = "nn optim nn/text/chartext.h nn/formats";
static bool is_toy(const char *name) { return strncmp(name, "toy_lm", 6) == 0; }

static bool word_in(const char *list, const char *w) {
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return true;
    return false;
}

static const char *room_of(const char *header, char *full, size_t fullsz) { /* as the compiler's -I finds it */
    struct stat st;
    for (size_t r = 0; r < N_ROOMS; r++) {
        snprintf(full, fullsz, "%s/%s", rooms[r], header);
        if (stat(full, &st) == 0) return rooms[r];
    }
    return NULL;
}

/* Every '#include "x.h"' in `room`'s files: "" if all are allowed, else the first that is not. */
static void check_room(const char *room, const char *uses, char *bad, size_t badsz) {
    DIR *d = opendir(room);
    ck_assert_msg(d != NULL, "%s: no such folder", room);
    struct dirent *e;
    while (!bad[0] && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || e->d_name[n - 2] != '.' || (e->d_name[n - 1] != 'c' && e->d_name[n - 1] != 'h')) continue;
        char path[512], full[600];
        snprintf(path, sizeof path, "%s/%s", room, e->d_name);
        char *text = read_text(path);
        bool toy = strcmp(room, "nn") == 0 && is_toy(e->d_name);
        /* nn/models/archs.c is the table of every model (lm.h's lm_archs): it lists the GPT's row too */
        bool table = strcmp(room, "nn/models") == 0 && strcmp(e->d_name, "archs.c") == 0;
        for (char *p = text; !bad[0] && (p = strstr(p, "#include \"")); p++) {
            char header[256];
            if (sscanf(p + 10, "%255[^\"]", header) != 1) continue;
            const char *r = room_of(header, full, sizeof full);
            if (!r) continue; /* a generated or test header: not a room's */
            const char *u = toy ? toy_uses : uses;
            if (is_toy(header) && !toy) r = "the toy model";
            else if (strcmp(r, "tensor") == 0 || strcmp(r, room) == 0 || word_in(u, r) || word_in(u, full) ||
                     (table && strcmp(r, "nn/models/gpt") == 0))
                continue;
            snprintf(bad, badsz, "%.200s includes %.200s (%s): %s uses only tensor/ and \"%s\" (README.md's Layout)", path,
                     full, r, toy ? "the toy model" : room, u);
        }
        free(text);
    }
    closedir(d);
}

START_TEST(test_rooms_include_only_rooms_below) {
    char bad[1024] = "";
    for (size_t i = 0; i < sizeof layering / sizeof *layering && !bad[0]; i++)
        check_room(layering[i].room, layering[i].uses, bad, sizeof bad);
    ck_assert_msg(!bad[0], "%s", bad);
    /* the check can fail: nn/models, were it allowed nn/ alone, is caught including what else it uses */
    check_room("nn/models", "nn", bad, sizeof bad);
    ck_assert_msg(strstr(bad, "nn/models/") && strstr(bad, " includes "), "a layering breach was not seen: %s", bad);
}
END_TEST

/* ---- every path the docs name exists ---------------------------------------------------------------- */

/* The first repository path (nn/..., tensor/..., tests/..., examples/..., optim/... with an extension)
 * in `text` that does not exist, into bad; the file's name for the message. */
static void check_paths(const char *file, const char *text, char *bad, size_t badsz) {
    static const char *const tops[] = {"nn/", "tensor/", "tests/", "examples/", "optim/"};
    for (const char *p = text; *p && !bad[0]; p++) {
        if (p > text && (isalnum((unsigned char)p[-1]) || strchr("_./-", p[-1]))) continue;
        size_t t = 0;
        while (t < 5 && strncmp(p, tops[t], strlen(tops[t])) != 0) t++;
        if (t == 5) continue;
        size_t n = 0;
        while (p[n] && (isalnum((unsigned char)p[n]) || strchr("_./-", p[n]))) n++;
        while (n > 0 && p[n - 1] == '.') n--; /* a sentence's full stop */
        size_t slash = 0, dot = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '/') slash = i;
            if (p[i] == '.') dot = i;
        }
        if (dot < slash) continue; /* a folder, or no extension */
        char path[512];
        snprintf(path, sizeof path, "%.*s", (int)n, p);
        struct stat st;
        if (stat(path, &st) != 0) snprintf(bad, badsz, "%s names %s, which does not exist", file, path);
    }
}

static void check_paths_in(const char *file, char *bad, size_t badsz) {
    char *text = read_text(file);
    check_paths(file, text, bad, badsz);
    free(text);
}

static void check_dir_paths(const char *dir, const char *ending, char *bad, size_t badsz) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while (!bad[0] && (e = readdir(d))) {
        size_t n = strlen(e->d_name), k = strlen(ending);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (n >= k && strcmp(e->d_name + n - k, ending) == 0) check_paths_in(path, bad, badsz);
    }
    closedir(d);
}

START_TEST(test_docs_name_paths_that_exist) {
    char bad[1024] = "";
    static const char *const docs[] = {"README.md", "Makefile", "nn/README.md", "tensor/README.md", "tests/README.md",
                                       "examples/README.md"};
    for (size_t i = 0; i < sizeof docs / sizeof *docs && !bad[0]; i++) check_paths_in(docs[i], bad, sizeof bad);
    for (size_t r = 0; r < N_ROOMS && !bad[0]; r++) check_dir_paths(rooms[r], ".h", bad, sizeof bad);
    check_dir_paths("tensor/ops", ".h", bad, sizeof bad);
    check_dir_paths("tensor/kernels", ".h", bad, sizeof bad);
    ck_assert_msg(!bad[0], "%s", bad);
    /* tests/README.md's count of the suite: "(N tests in M suites" as the tests' .c files register them */
    int tests = 0, suites = 0, said_tests = -1, said_suites = -1;
    DIR *d = opendir("tests");
    ck_assert(d != NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".c") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "tests/%s", e->d_name);
        char *text = read_text(path);
        for (const char *p = text; (p = strstr(p, "tcase_add_test(")); p++) tests += p[15] != '"'; /* not this line's */
        for (const char *p = text; (p = strstr(p, "suite_create(\"")); p++) suites++;
        free(text);
    }
    closedir(d);
    char *readme = read_text("tests/README.md"), *at = strstr(readme, " tests in ");
    ck_assert_msg(at != NULL, "tests/README.md does not say how many tests");
    while (at > readme && isdigit((unsigned char)at[-1])) at--;
    ck_assert_int_eq(sscanf(at, "%d tests in %d suites", &said_tests, &said_suites), 2);
    free(readme);
    ck_assert_msg(said_tests == tests && said_suites == suites, "tests/README.md says %d tests in %d suites; tests/*.c have %d in %d",
                  said_tests, said_suites, tests, suites);
    /* the check can fail: a header comment naming a file that is gone */
    check_paths("toy_lm.h", "/* Checkpoints (safetensors, nn/checkpoint.c): ... */", bad, sizeof bad);
    ck_assert_str_eq(bad, "toy_lm.h names nn/checkpoint.c, which does not exist");
}
END_TEST

Suite *suite_build(void) {
    Suite *s = suite_create("build");
    TCase *tc = tcase("build");
    tcase_add_test(tc, test_objects_follow_the_compiler);
    tcase_add_test(tc, test_plain_make_builds_all);
    tcase_add_test(tc, test_rooms_include_only_rooms_below);
    tcase_add_test(tc, test_docs_name_paths_that_exist);
    suite_add_tcase(s, tc);
    return s;
}
