/* Test helpers: paths, golden files, comparisons, error capture. */
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"

jmp_buf *test_jmp;
char test_msg[1024];
ac_error_kind test_kind;

void test_error_handler(ac_error_kind kind, const char *msg, void *user) {
    (void)user;
    snprintf(test_msg, sizeof test_msg, "%s", msg);
    test_kind = kind;
    longjmp(*test_jmp, 1);
}

static void teardown(void) { ac_shutdown(); }

TCase *tcase(const char *name) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 600);
    return tc;
}

const char *shared_path(const char *rel) {
    static char buf[4][1024];
    static int k;
    const char *root = getenv("AC_SHARED");
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", root ? root : "../shared", rel);
    return b;
}

const char *data_path(const char *rel) {
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "tests/data/%s", rel);
    return b;
}

char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run the tests from the repository root, with ../shared beside it)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert(s != NULL);
    ck_assert_int_eq((long)fread(s, 1, (size_t)n, f), n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Golden files are read once per process and kept (a few hundred KB). */
typedef struct { char *file; char *text; } Loaded;
static Loaded loaded[8];

Golden golden(const char *file, const char *name) {
    char *text = NULL;
    for (int i = 0; i < 8 && loaded[i].file; i++)
        if (strcmp(loaded[i].file, file) == 0) text = loaded[i].text;
    if (!text) {
        int i = 0;
        while (loaded[i].file) i++;
        loaded[i].file = strdup(file);
        loaded[i].text = text = read_text(data_path(file));
    }
    size_t nl = strlen(name);
    for (const char *p = text; *p;) {
        if (strncmp(p, name, nl) == 0 && p[nl] == ' ') {
            char *end;
            long n = strtol(p + nl + 1, &end, 10);
            Golden g = {(int)n, ac_arena_alloc(sizeof(double) * (size_t)(n ? n : 1))};
            for (long i = 0; i < n; i++) g.v[i] = strtod(end, &end);
            return g;
        }
        const char *nlp = strchr(p, '\n');
        if (!nlp) break;
        p = nlp + 1;
    }
    ck_abort_msg("golden record %s not found in tests/data/%s", name, file);
    return (Golden){0, NULL};
}

void assert_close(const float *got, const double *want, int64_t n, double atol, double rtol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        /* golden values are float32 values printed with %.9g: rounding to float recovers them exactly */
        double g = got[i], w = (double)(float)want[i];
        if (isnan(w) && isnan(g)) continue;
        if (isinf(w) && g == w) continue;
        ck_assert_msg(fabs(g - w) <= atol + rtol * fabs(w), "%s[%lld]: got %.9g, want %.9g (atol %g, rtol %g)", what,
                      (long long)i, g, w, atol, rtol);
    }
}

void assert_tensor_golden(Tensor *t, const char *file, const char *name, double atol, double rtol) {
    ck_assert_msg(t != NULL, "%s: no tensor (missing gradient?)", name);
    Golden g = golden(file, name);
    ck_assert_msg(g.n == torch_numel(t), "%s: %lld elements, golden has %d", name, (long long)torch_numel(t), g.n);
    assert_close(ac_data_float(torch_contiguous(torch_detach(t))), g.v, g.n, atol, rtol, name);
}

void assert_repr(const Tensor *t, const char *expected) {
    const char *got = torch_repr(t);
    ck_assert_msg(strcmp(got, expected) == 0, "printed:\n%s\nexpected:\n%s", got, expected);
}

const char *build_dir(void) { return getenv("AC_BUILD") ? getenv("AC_BUILD") : "build"; }

char *temp_dir(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/ac_test_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
    return dir;
}

void remove_dir(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

int child_stderr(void (*fn)(void), char *buf, size_t n) {
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fn();
        _exit(0);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < n && (k = read(fd[0], buf + got, n - 1 - got)) > 0) got += (size_t)k;
    buf[got] = 0;
    close(fd[0]);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return st;
}

/* Runs a shell command, returns its exit status and its stdout (malloc'd). */
int run_command(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the reader's pages ---------------------------------------------------------------------------- */

/* The text of one cell: tags dropped (a note's span with them when drop_note), &lt; &gt; &amp; read back. */
static char *cell_text(const char *a, const char *b, bool drop_note) {
    char *s = malloc((size_t)(b - a) + 1), *o = s;
    for (const char *p = a; p < b;) {
        if (drop_note && strncmp(p, "<span class=\"note\">", 19) == 0) {
            const char *e = strstr(p, "</span>");
            p = e ? e + 7 : b;
            while (o > s && o[-1] == ' ') o--;
        } else if (*p == '<') {
            const char *e = strchr(p, '>');
            p = e ? e + 1 : b;
        } else if (*p == '&') {
            const char *e = strchr(p, ';');
            *o++ = !strncmp(p, "&lt;", 4) ? '<' : !strncmp(p, "&gt;", 4) ? '>' : !strncmp(p, "&amp;", 5) ? '&' : '?';
            p = e ? e + 1 : b;
        } else *o++ = *p++;
    }
    *o = 0;
    return s;
}

/* A row of C that begins a function's definition: a type and a name before the "(" at column 0, no
 * "=" or ";" (a statement), no keyword. */
static bool signature_start(const char *c) {
    static const char *const kw[] = {"if ", "if(", "for ", "while ", "return", "else", "switch", "do ", "}"};
    if (!*c || *c == ' ' || strchr(c, ';') || strchr(c, '=')) return false;
    for (size_t k = 0; k < sizeof kw / sizeof *kw; k++)
        if (!strncmp(c, kw[k], strlen(kw[k]))) return false;
    const char *paren = strchr(c, '(');
    if (!paren) return false;
    for (const char *p = c; p < paren; p++)
        if (*p == ' ') return true; /* "Tensor *name(", "static int name(" */
    return false;
}

void assert_page_rows(const char *page, const char *what) {
    int rows = 0, functions = 0;
    bool in_sig = false, sig_ok = false;
    char first[160] = "";
    for (const char *p = page; (p = strstr(p, "<tr><td class=\"py\"")) != NULL;) {
        const char *py = strchr(p, '>') + 1, *py_end = strstr(py, "</td>");
        const char *c = strchr(py_end + 5, '>') + 1, *c_end = strstr(c, "</td></tr>");
        ck_assert_msg(py_end && c_end, "%s: a row that does not close", what);
        p = c_end;
        rows++;
        char *pys = cell_text(py, py_end, false), *cs = cell_text(c, c_end, true);
        bool note = strstr(c, "<span class=\"note\">") != NULL && strstr(c, "<span class=\"note\">") < c_end;
        ck_assert_msg(strstr(pys, "(C:") == NULL, "%s: a note of C's own in the book's column: %s", what, pys);
        bool fold = strstr(c, "<details>") != NULL && strstr(c, "<details>") < c_end;
        if (!in_sig && !fold && signature_start(cs)) {
            in_sig = true, sig_ok = false;
            snprintf(first, sizeof first, "%s", cs);
            functions++;
        }
        if (in_sig) {
            const char *t = pys + strspn(pys, " ");
            sig_ok = sig_ok || note || !strncmp(t, "def ", 4) || !strncmp(t, "class ", 6);
            if (strchr(cs, '{')) {
                ck_assert_msg(sig_ok, "%s: the function %s... has no def line and no (C: ...) note", what, first);
                in_sig = false;
            }
        }
        free(pys), free(cs);
    }
    ck_assert_msg(rows > 0 && functions > 0, "%s: %d rows, %d functions", what, rows, functions);
}

/* Built with AddressSanitizer (make test's second pass): runs there look for memory errors */
bool under_asan(void) {
#if defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return true;
#endif
#endif
    return false;
}
