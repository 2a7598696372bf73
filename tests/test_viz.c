/* The pictures (nn/viz.h): every picture the project writes is parsed as XML, is deterministic,
 * escapes hostile labels; the graph's boxes never overlap; the article's
 * --svg and --html, the trainer's --plot and --attention-svg, checked from
 * the real programs; the page in a real browser when Chromium is there. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "viz.h"
#include "xml_check.h"

/* What draw() writes, as a malloc'd string. */
typedef bool (*drawer)(FILE *f, void *u);
static char *slurp(FILE *f, size_t *len) {
    long n = ftell(f);
    ck_assert(n >= 0);
    char *buf = malloc((size_t)n + 1);
    rewind(f);
    ck_assert_int_eq((long)fread(buf, 1, (size_t)n, f), n);
    buf[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}
static char *render(drawer draw, void *u, size_t *len) {
    FILE *f = tmpfile();
    ck_assert(f != NULL);
    ck_assert_msg(draw(f, u), "the writer reported a failure");
    return slurp(f, len);
}

static void assert_xml(const char *text, size_t len, const char *what) {
    char err[256];
    ck_assert_msg(xml_check(text, len, err, sizeof err), "%s is not well-formed XML: %s", what, err);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

typedef struct { Tensor *t; ac_heatmap_opts o; nn_TensorList names; ac_plot_opts po; int ns; ac_series *s; } Args;
static bool heat(FILE *f, void *u) { return ac_heatmap_svg(f, ((Args *)u)->t, &((Args *)u)->o); }
static bool gsvg(FILE *f, void *u) { return ac_graph_svg(f, ((Args *)u)->t, ((Args *)u)->names); }
static bool gdot(FILE *f, void *u) { return ac_graph_dot(f, ((Args *)u)->t, ((Args *)u)->names); }
static bool plot(FILE *f, void *u) { return ac_plot_svg(f, &((Args *)u)->po, ((Args *)u)->ns, ((Args *)u)->s); }

/* ---- the checker itself must fail where it should ------------------------------------------- */
START_TEST(test_xml_checker_rejects_broken_xml) {
    static const char *bad[] = {
        "<a>&</a>", "<a>&foo;</a>", "<a>a < b</a>", "<a b=c/>", "<a b=\"<\"/>", "<a></b>", "<a>", "<a/><b/>",
        "<a b='1' b='2'/>", "<a>\x01</a>", "<a>\xff</a>", "<a>&#0;</a>", "<a>&#xD800;</a>", "text<a/>", "<a>]]></a>",
        "<a><!-- x -- y --></a>", "<1a/>", "",
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!xml_check(bad[i], strlen(bad[i]), err, sizeof err), "accepted: %s", bad[i]);
    static const char *good[] = {"<a/>", "<!DOCTYPE html>\n<a b=\"&amp;&lt;&#39;&#x263A;\">t&gt;</a>\n",
                                 "<a><b c='\"'/><!-- c --></a>"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(xml_check(good[i], strlen(good[i]), err, sizeof err), "rejected %s: %s", good[i], err);
}
END_TEST

/* ---- heatmaps ------------------------------------------------------------------------------------ */
static Tensor *causal_weights(int64_t T) {
    torch_manual_seed(1);
    Tensor *s = torch_randn(SHAPE(T, T));
    Tensor *mask = torch_to_bool(torch_triu(torch_ones(SHAPE(T, T)), 1));
    return torch_softmax(torch_masked_fill(s, mask, -INFINITY), -1);
}

START_TEST(test_heatmap_causal_weights) {
    static const char *words[] = {"Life", "is", "short", "eat", "dessert", "first"};
    Args a = {.t = causal_weights(6), .o = {.title = "causal", .row_labels = words, .col_labels = words, .show_values = -1}};
    size_t n;
    char *svg = render(heat, &a, &n);
    assert_xml(svg, n, "heatmap");
    ck_assert_int_eq(count(svg, "stroke=\"#9a9a9a\" stroke-width=\"1\""), 15); /* the 15 cells above the diagonal */
    ck_assert_int_eq(count(svg, ">dessert</text>"), 2);                          /* both axes */
    ck_assert_msg(strstr(svg, ">1.00</text>") != NULL, "the first row's weight 1.00 is written in its cell");
    ck_assert_int_eq(count(svg, "<rect x="), 36 + 40 + 3);                       /* cells, legend, frames, masked key */
    char *again = render(heat, &a, NULL);
    ck_assert_msg(strcmp(svg, again) == 0, "same input, different bytes");
    /* AC_MASK_INF: the zeros are drawn as zeros */
    a.o.mask = AC_MASK_INF;
    char *plain = render(heat, &a, NULL);
    ck_assert_int_eq(count(plain, "stroke=\"#9a9a9a\" stroke-width=\"1\""), 0);
    ck_assert_int_eq(count(plain, ">0.00</text>"), 15 + 1); /* the cells, and the legend's lowest tick */
    free(svg), free(again), free(plain);
}
END_TEST

START_TEST(test_heatmap_shapes_and_scales) {
    torch_manual_seed(2);
    /* scores with negative values: a diverging scale symmetric around 0; -inf masked */
    Tensor *scores = torch_masked_fill(torch_randn(SHAPE(5, 5)), torch_to_bool(torch_triu(torch_ones(SHAPE(5, 5)), 1)),
                                       -INFINITY);
    Args a = {.t = scores, .o = {.show_values = -1}};
    size_t n;
    char *svg = render(heat, &a, &n);
    assert_xml(svg, n, "scores heatmap");
    ck_assert_int_eq(count(svg, "stroke=\"#9a9a9a\" stroke-width=\"1\""), 10);
    ck_assert_msg(strstr(svg, "(-inf)</title>") != NULL, "a masked cell's tooltip says -inf");
    ck_assert_msg(strstr(svg, ">masked (a -inf score: after softmax, weight 0)</text>") && !strstr(svg, "causal mask"),
                  "raw scores: the key says -inf, not the causal mask's weight 0");
    free(svg);
    /* weights of 0.06-0.19 (cross-attention's): the scale spans them, not 0-0.19; the ticks share their decimals */
    Tensor *narrow = torch_add_scalar(torch_mul_scalar(torch_rand(SHAPE(4, 6)), 0.13), 0.06);
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < 24; i++) lo = fminf(lo, ((float *)narrow->data)[i]), hi = fmaxf(hi, ((float *)narrow->data)[i]);
    a = (Args){.t = narrow, .o = {.show_values = 0}};
    svg = render(heat, &a, &n);
    char tick[64];
    snprintf(tick, sizeof tick, ">%.3f</text>", (double)lo);
    ck_assert_msg(strstr(svg, tick) != NULL, "the lowest tick is the least value %s", tick);
    snprintf(tick, sizeof tick, ">%.3f</text>", (double)hi);
    ck_assert_msg(strstr(svg, tick) != NULL, "the highest tick is the greatest value %s", tick);
    ck_assert_msg(strstr(svg, "fill=\"#f7fbff\"") != NULL, "the least value has the ramp's lightest colour");
    free(svg);
    /* one row, several heads side by side, a strided view */
    Tensor *row = torch_softmax(torch_randn(SHAPE(7)), 0);
    a = (Args){.t = row, .o = {.show_values = -1}};
    svg = render(heat, &a, &n);
    assert_xml(svg, n, "1-D heatmap");
    free(svg);
    Tensor *heads = torch_transpose(torch_softmax(torch_randn(SHAPE(4, 3, 4)), -1), 1, 2); /* (4, 4, 3), strided */
    a = (Args){.t = heads, .o = {.show_values = 1}};
    svg = render(heat, &a, &n);
    assert_xml(svg, n, "3-D heatmap");
    double head_y[4];
    for (int h = 0; h < 4; h++) {
        char want[32];
        snprintf(want, sizeof want, ">head %d</text>", h);
        const char *at = strstr(svg, want);
        ck_assert_msg(at != NULL, "%s missing", want);
        const char *tag = at;
        while (tag > svg && strncmp(tag, "<text", 5) != 0) tag--;
        ck_assert(sscanf(strstr(tag, " y=\"") + 4, "%lf", &head_y[h]) == 1);
    }
    /* four heads two by two: heads 0 and 1 in one row, 2 and 3 in the next */
    ck_assert(head_y[0] == head_y[1] && head_y[2] == head_y[3] && head_y[2] > head_y[0]);
    free(svg);
    /* large: no values in the cells (17 > 16), labels thinned so they cannot overlap */
    a = (Args){.t = causal_weights(17), .o = {.show_values = -1}};
    svg = render(heat, &a, &n);
    assert_xml(svg, n, "17x17 heatmap");
    ck_assert_int_eq(count(svg, "font-size=\"10\""), 0);
    free(svg);
    a = (Args){.t = causal_weights(200), .o = {.show_values = -1}};
    svg = render(heat, &a, &n);
    assert_xml(svg, n, "200x200 heatmap");
    ck_assert_int_lt(count(svg, "transform=\"rotate(-90"), 200); /* every other column label at most */
    free(svg);
}
END_TEST

START_TEST(test_heatmap_errors) {
    FILE *null = fopen("/dev/null", "w"); /* the error longjmps out of the writer: nothing of its own to leak */
    EXPECT_ERROR("heatmap: expected weights of shape (T_k,), (T_q, T_k) or (H, T_q, T_k), got [2, 2, 2, 2]",
                 ac_heatmap_svg(null, torch_zeros(SHAPE(2, 2, 2, 2)), NULL));
    EXPECT_ERROR("heatmap: expected a tensor of dtype Float (float32), but got Long", ac_heatmap_svg(null, torch_arange(4), NULL));
    EXPECT_ERROR("heatmap: nothing to draw", ac_heatmap_svg(null, torch_zeros(SHAPE(0, 3)), NULL));
    EXPECT_ERROR("heatmap", ac_heatmap_svg(null, NULL, NULL));
    fclose(null);
}
END_TEST

/* Labels of random bytes (control characters, markup, invalid UTF-8, quotes)
 * through every writer: each output must stay well-formed. */
static uint64_t lcg = 88172645463325252ull;
static unsigned next_byte(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(lcg >> 56);
}
static char *hostile_label(void) {
    static const char *nasty[] = {"<script>", "&amp;", "\"'", "]]>", "\xff\xfe", "a\001b", "\xed\xa0\x80",
                                  "\xef\xbf\xbe", "\xc2\x85", "--", "&#0;", "\x7f", "\r\n", "é😀", "</svg>"};
    int n = 1 + (int)(next_byte() % 12);
    char *s = ac_arena_alloc(64 + 1);
    int k = 0;
    while (k < n) {
        if (next_byte() % 3 == 0) {
            const char *w = nasty[next_byte() % (sizeof nasty / sizeof *nasty)];
            size_t l = strlen(w);
            if (k + (int)l > 64) break;
            memcpy(s + k, w, l);
            k += (int)l;
        } else {
            unsigned c = next_byte();
            s[k++] = (char)(c ? c : 'x');
        }
    }
    s[k] = 0;
    return s;
}

START_TEST(test_writers_escape_hostile_labels) {
    for (int round = 0; round < 300; round++) {
        ac_mark m = ac_arena_mark();
        const char *rows[3], *cols[4], *heads[2] = {hostile_label(), hostile_label()};
        for (int i = 0; i < 3; i++) rows[i] = hostile_label();
        for (int i = 0; i < 4; i++) cols[i] = hostile_label();
        torch_manual_seed((uint64_t)round);
        Args a = {.t = torch_rand(SHAPE(2, 3, 4)),
                  .o = {.title = hostile_label(), .row_labels = rows, .col_labels = cols, .head_titles = heads,
                        .show_values = -1}};
        size_t n;
        char *svg = render(heat, &a, &n);
        assert_xml(svg, n, "heatmap with hostile labels");
        free(svg);
        /* graph: hostile parameter names */
        Tensor *w = torch_requires_grad_(torch_rand(SHAPE(3, 2)), true), *b = torch_requires_grad_(torch_rand(SHAPE(2)), true);
        Tensor *y = torch_sum(torch_relu(torch_add(torch_matmul(torch_rand(SHAPE(4, 3)), w), b)));
        const char *names[] = {hostile_label(), hostile_label()};
        Tensor *ts[] = {w, b};
        a.t = y, a.names = (nn_TensorList){2, names, ts};
        svg = render(gsvg, &a, &n);
        assert_xml(svg, n, "graph with hostile names");
        free(svg);
        char *dot = render(gdot, &a, &n); /* DOT: every quote and backslash escaped, no raw newline in a string */
        for (char *p = strstr(dot, "label=\""); p; p = strstr(p + 1, "label=\"")) {
            char *q = p + 7;
            while (*q && *q != '"') {
                ck_assert_msg(*q != '\n', "raw newline inside a DOT string");
                q += *q == '\\' ? 2 : 1;
            }
            ck_assert_msg(*q == '"', "unterminated DOT string");
        }
        free(dot);
        /* plot: hostile title, axis labels and series names */
        double x[3] = {1, 2, 3}, yv[3] = {3, 1, 2};
        ac_series s[2] = {{hostile_label(), 3, x, yv}, {hostile_label(), 3, x, x}};
        a.po = (ac_plot_opts){hostile_label(), hostile_label(), hostile_label(), hostile_label(), 1000.0};
        a.ns = 2, a.s = s;
        svg = render(plot, &a, &n);
        assert_xml(svg, n, "plot with hostile labels");
        free(svg);
        ac_arena_release(m);
    }
    /* what the escaping makes of a few: entities, pictures for controls, U+FFFD for bad bytes */
    FILE *f = tmpfile();
    ac_xml_escape(f, "<a href=\"x\">&'\x01\xff\tok\n");
    char *buf = slurp(f, NULL);
    ck_assert_str_eq(buf, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\xe2\x90\x81\xef\xbf\xbd\tok\n");
    free(buf);
}
END_TEST

/* ---- the autograd graph ------------------------------------------------------------------------- */

/* Every box (rx="3" rects) against every other: no two overlap. Returns the number of boxes. */
static int assert_no_overlap(const char *svg) {
    double r[4096][4];
    int n = 0;
    for (const char *p = strstr(svg, "<rect x=\""); p; p = strstr(p + 1, "<rect x=\"")) {
        double x, y, w, h;
        const char *end = strchr(p, '>'), *rx = strstr(p, " rx=\"3\"");
        if (rx && rx < end && sscanf(p, "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"", &x, &y, &w, &h) == 4 && n < 4096)
            r[n][0] = x, r[n][1] = y, r[n][2] = w, r[n][3] = h, n++;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            bool apart = r[i][0] + r[i][2] <= r[j][0] || r[j][0] + r[j][2] <= r[i][0] || r[i][1] + r[i][3] <= r[j][1] ||
                         r[j][1] + r[j][3] <= r[i][1];
            ck_assert_msg(apart, "boxes %d and %d overlap", i, j);
        }
    return n;
}

START_TEST(test_graph_of_selfattention) {
    torch_manual_seed(123);
    nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 4);
    Tensor *x = torch_rand(SHAPE(6, 3));
    Args a = {.t = nn_SelfAttention_forward(sa, x), .names = nn_named_parameters(&sa->module)};
    size_t n;
    char *dot = render(gdot, &a, &n);
    /* 8 ops (4 Mm, Permute, Div, Softmax, Mm), 3 parameters, the output; 11 arrows */
    ck_assert_int_eq(count(dot, "[label="), 12);
    ck_assert_int_eq(count(dot, " -> "), 11);
    ck_assert_int_eq(count(dot, "MmBackward0"), 5);
    for (int i = 0; i < 3; i++) {
        const char *want[] = {"\"W_query\\n(3, 2)\"", "\"W_key\\n(3, 2)\"", "\"W_value\\n(3, 4)\""};
        ck_assert_msg(strstr(dot, want[i]) != NULL, "%s missing from\n%s", want[i], dot);
    }
    ck_assert_msg(strstr(dot, "\"output\\n(6, 4)\"") != NULL, "the output's box");
    char *svg = render(gsvg, &a, &n);
    assert_xml(svg, n, "graph");
    ck_assert_int_eq(assert_no_overlap(svg), 12);
    ck_assert_msg(strstr(svg, ">the output</text>") && strstr(svg, ">an op (its grad_fn)</text>") &&
                      strstr(svg, ">a leaf that requires grad</text>"), "the key to the colours");
    ck_assert_int_eq(count(svg, "l-4 -7h8z"), 11); /* one arrowhead per edge */
    char *again = render(gsvg, &a, NULL);
    ck_assert_msg(strcmp(svg, again) == 0, "same graph, different bytes");
    free(dot), free(svg), free(again);
    /* a leaf that needs no grad is not drawn; a tensor without grad is just its box */
    a.t = torch_rand(SHAPE(2, 2));
    dot = render(gdot, &a, NULL);
    ck_assert_int_eq(count(dot, "[label="), 1);
    free(dot);
    nn_free(&sa->module);
}
END_TEST

START_TEST(test_graph_of_toy_lm_and_deep_chain) {
    torch_manual_seed(0);
    nn_ToyLM *m = nn_ToyLM_new(11, 8, 16, 2);
    Tensor *idx = torch_randint(0, 11, SHAPE(2, 8)), *y = torch_randint(0, 11, SHAPE(16));
    Tensor *loss = torch_cross_entropy(torch_view(nn_ToyLM_forward(m, idx), SHAPE(-1, 11)), y, -100);
    Args a = {.t = loss, .names = nn_named_parameters(&m->module)};
    size_t n;
    char *svg = render(gsvg, &a, &n);
    assert_xml(svg, n, "ToyLM graph");
    int boxes = assert_no_overlap(svg);
    ck_assert_int_gt(boxes, 30);
    ck_assert_msg(strstr(svg, ">attn.W_query.weight</text>") != NULL, "parameter names from named_parameters");
    ck_assert_msg(strstr(svg, ">tok_emb.weight</text>") != NULL, "parameter names from named_parameters");
    free(svg);
    nn_free(&m->module);
    /* a chain 3000 ops deep: laid out without recursion */
    Tensor *t = torch_requires_grad_(torch_rand(SHAPE(2)), true), *h = t;
    for (int i = 0; i < 3000; i++) h = torch_mul_scalar(h, 1.0);
    a = (Args){.t = h};
    svg = render(gsvg, &a, &n);
    assert_xml(svg, n, "deep graph");
    ck_assert_int_eq(count(svg, "MulBackward0"), 3000);
    free(svg);
    /* past 20000 nodes: an error, and nothing leaks (the writer's memory is in the arena) */
    for (int i = 0; i < 20000; i++) h = torch_mul_scalar(h, 1.0);
    FILE *null = fopen("/dev/null", "w");
    EXPECT_ERROR("graph: more than 20000 nodes are too many to draw", ac_graph_svg(null, h, (nn_TensorList){0}));
    EXPECT_ERROR("graph: more than 20000 nodes are too many to draw", ac_graph_dot(null, h, (nn_TensorList){0}));
    fclose(null);
}
END_TEST

/* ---- plots, files -------------------------------------------------------------------------------- */
START_TEST(test_plot) {
    double x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {4.2, 3.1, NAN, 2.5, INFINITY, 2.0}, big[2] = {1e300, -1e300};
    ac_series s[2] = {{"loss", 6, x, y}, {NULL, 6, x, x}};
    Args a = {.po = {.title = "loss", .xlabel = "step", .ylabel = "loss"}, .ns = 2, .s = s};
    size_t n;
    char *svg = render(plot, &a, &n);
    assert_xml(svg, n, "plot");
    ck_assert_int_eq(count(svg, "stroke-width=\"1.5\""), 2);
    /* the first series: NaN and inf leave gaps, so three pieces (M ... L ..., M ..., M ...) */
    const char *d = strstr(svg, "stroke=\"#1f77b4\" stroke-width=\"1.5\" stroke-linejoin=\"round\" d=\"");
    ck_assert(d != NULL);
    d = strchr(d, 'd');
    int moves = 0;
    for (d = strstr(d, "d=\"") + 3; *d != '"'; d++) moves += *d == 'M';
    ck_assert_int_eq(moves, 3);
    ck_assert_msg(strstr(svg, "d=\"M72.00 ") != NULL, "the x axis starts at the first step");
    ck_assert_int_eq(count(svg, ">loss</text>"), 3); /* title, y label, legend */
    /* a point without a neighbour draws no line: 2.5 (between NaN and inf) and 2.0 (after inf) get a marker */
    ck_assert_int_eq(count(svg, "<circle "), 2);
    free(svg);
    ac_series odd[3] = {{"none", 0, x, y}, {"one", 1, x, y}, {"huge", 2, big, big}};
    for (int k = 1; k <= 3; k++) {
        a = (Args){.ns = k, .s = odd};
        svg = render(plot, &a, &n);
        assert_xml(svg, n, "plot of odd data");
        ck_assert_msg(count(svg, "<circle ") == (k >= 2), "%d series: a single point is %sdrawn as a marker", k, k >= 2 ? "not " : "");
        free(svg);
    }
    FILE *null = fopen("/dev/null", "w");
    EXPECT_ERROR("plot: expected 0 to 8 series, got 9", ac_plot_svg(null, NULL, 9, odd));
    fclose(null);
}
END_TEST

START_TEST(test_write_file_atomic) {
    char dir[] = "/tmp/ac_viz_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[256], tmp[300];
    snprintf(path, sizeof path, "%s/p.svg", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    double x[2] = {0, 1};
    ac_series s = {"a", 2, x, x};
    Args a = {.ns = 1, .s = &s};
    ck_assert(ac_write_file_atomic(path, plot, &a));
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    char *text = read_text(path);
    assert_xml(text, strlen(text), "written plot");
    free(text);
    snprintf(path, sizeof path, "%s/no/such/dir/p.svg", dir);
    ck_assert(!ac_write_file_atomic(path, plot, &a));
    snprintf(path, sizeof path, "rm -rf %s", dir);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

START_TEST(test_split_line) {
    ac_code_row r = ac_split_line("    printf(\"a // b\"); // print('a // b')", 40);
    ck_assert_str_eq(r.c, "    printf(\"a // b\");");
    ck_assert_str_eq(r.python, "print('a // b')");
    ac_code_row *rows = malloc(sizeof *rows * 3);
    rows[0] = r;
    rows[1] = ac_split_line("x = y; /* x = y */ ", 19);
    ck_assert_str_eq(rows[1].c, "x = y;");
    ck_assert_str_eq(rows[1].python, "x = y");
    rows[2] = ac_split_line("int c = '/';", 12);
    ck_assert_str_eq(rows[2].c, "int c = '/';");
    ck_assert_str_eq(rows[2].python, "");
    ck_assert_str_eq(rows[2].note, "");
    ac_code_rows_free(3, rows);
    /* a note of C's own: all of the comment, or after the Python */
    const char *note = "x = y; // (C: C's own)", *both = "x = y; /* x = y (C: and C's) */";
    r = ac_split_line(note, strlen(note));
    ck_assert_str_eq(r.python, "");
    ck_assert_str_eq(r.note, "(C: C's own)");
    free((char *)r.python), free((char *)r.c), free((char *)r.note);
    r = ac_split_line(both, strlen(both));
    ck_assert_str_eq(r.python, "x = y");
    ck_assert_str_eq(r.note, "(C: and C's)");
    free((char *)r.python), free((char *)r.c), free((char *)r.note);
}
END_TEST

/* Rows of a source: a note whose parenthesis stays open goes on in the next comments; on the page a
 * note sits in C's column, five rows or more of C alone fold into one, and a cell wraps under its
 * own indentation. */
START_TEST(test_page_rows) {
    const char *src = "int f(int x) { // def f(x):\n"
                      "    int a = 1; /* (C: a note that\n"
                      "    int b = 2; /* goes on (here) and ends) */\n"
                      "    int c = 3; // c = 3\n"
                      "    a++;\n    a++;\n    a++;\n    a++;\n    a++;\n"
                      "    return a + b + c; // return a + b + c\n"
                      "}\n";
    ac_rows r = {0};
    ck_assert(ac_rows_function(src, "f", &r));
    ck_assert_int_eq(r.n, 11);
    ck_assert_str_eq(r.rows[0].python, "def f(x):");
    ck_assert_str_eq(r.rows[1].python, "");
    ck_assert_str_eq(r.rows[1].note, "(C: a note that");
    ck_assert_str_eq(r.rows[2].python, "");
    ck_assert_str_eq(r.rows[2].note, "goes on (here) and ends)");
    ck_assert_str_eq(r.rows[3].python, "c = 3");
    ck_assert_str_eq(r.rows[3].note, "");
    char *dir = temp_dir(), path[512];
    snprintf(path, sizeof path, "%s/rows.html", dir);
    FILE *f = fopen(path, "w");
    ac_page_code(f, NULL, "Python", "C", r.n, r.rows);
    fclose(f);
    char *page = read_text(path);
    assert_xml(page, strlen(page), "the rows");
    ck_assert_int_eq(count(page, "<tr>"), 1 + 11 - 4); /* the head, and the five a++ in one */
    ck_assert_int_eq(count(page, "<details>"), 1);
    ck_assert_msg(strstr(page, "<summary>a++; \xe2\x80\xa6 (C: 4 lines the Python has no need of)</summary>"), "%s", page);
    ck_assert_msg(strstr(page, "<td class=\"py\"></td><td class=\"c\" style=\"padding-left:calc(8px + 8ch);text-indent:-8ch\">"
                               "    int a = 1;  <span class=\"note\">(C: a note that</span></td>"), "%s", page);
    ck_assert_msg(strstr(page, "<td class=\"py\">def f(x):</td><td class=\"c\">int f(int x) {</td>"), "%s", page);
    assert_page_rows(page, "the rows");
    free(page);
    ac_code_rows_free(r.n, r.rows);
    remove_dir(dir);
}
END_TEST

/* ---- the programs ---------------------------------------------------------------------------------- */

static const char *const article_pictures[] = {
    "omega_2", "attention_weights_2", "selfattention_weights", "selfattention_graph", "mha_heads", "causal_scores",
    "causal_weights_before_mask", "masked_simple_norm", "causal_masked_scores", "causal_weights",
    "cross_attention_weights"};
#define N_PICTURES (int)(sizeof article_pictures / sizeof *article_pictures)

START_TEST(test_article_svg) {
    char *dir = temp_dir(), cmd[512], path[512];
    snprintf(cmd, sizeof cmd, "%s/article --svg %s/pics", build_dir(), dir);
    char *out;
    ck_assert_int_eq(run_command(cmd, &out), 0);
    char *want = read_text(shared_path("pytorch/article_expected.txt"));
    ck_assert_msg(strcmp(out, want) == 0, "--svg changed what the article prints");
    for (int i = 0; i < N_PICTURES; i++) {
        snprintf(path, sizeof path, "%s/pics/%s.svg", dir, article_pictures[i]);
        char *svg = read_text(path);
        assert_xml(svg, strlen(svg), path);
        free(svg);
    }
    snprintf(path, sizeof path, "%s/pics/selfattention_graph.dot", dir);
    char *dot = read_text(path);
    ck_assert_int_eq(count(dot, " -> "), 11);
    free(dot);
    /* the README's pictures are what the program draws today */
    static const char *docs[] = {"causal_weights", "selfattention_graph", "mha_heads"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/pics/%s.svg", dir, docs[i]);
        char *now = read_text(path);
        snprintf(path, sizeof path, "examples/pictures/%s.svg", docs[i]);
        char *committed = read_text(path);
        ck_assert_msg(strcmp(now, committed) == 0, "%s is out of date: make docs", path);
        free(now), free(committed);
    }
    free(out), free(want);
    remove_dir(dir);
}
END_TEST

static const char *const section_titles[] = {
    "1. Embedding an input sentence", "2. Defining the weight matrices", "3. Computing the unnormalized attention weights",
    "4. Computing the attention weights", "5. Self-attention as a class", "6. Multi-head attention",
    "7. Causal self-attention", "8. Cross-attention (the bonus section)"};

START_TEST(test_article_html) {
    char *dir = temp_dir(), cmd[1200], path[512];
    snprintf(path, sizeof path, "%s/article.html", dir);
    snprintf(cmd, sizeof cmd, "%s/article --html %s", build_dir(), path);
    char *out;
    ck_assert_int_eq(run_command(cmd, &out), 0);
    char *want = read_text(shared_path("pytorch/article_expected.txt"));
    ck_assert_msg(strcmp(out, want) == 0, "--html changed what the article prints");
    char *page = read_text(path);
    assert_xml(page, strlen(page), "the page");
    for (int i = 0; i < 8; i++) {
        char h2[160];
        snprintf(h2, sizeof h2, "<h2>%s</h2>", section_titles[i]);
        ck_assert_msg(strstr(page, h2) != NULL, "section %s missing", section_titles[i]);
    }
    ck_assert_int_eq(count(page, "<section id="), 9); /* and the C-only clean-up */
    ck_assert_int_eq(count(page, "<svg "), N_PICTURES);
    ck_assert_int_eq(count(page, "<pre class=\"out\">"), 7); /* the sections that print */
    /* Python and C on one row, taken from the sources */
    ck_assert_msg(strstr(page, "<td class=\"py\">query_2 = x_2 @ W_query</td><td class=\"c\">Tensor *query_2 = "
                               "torch_matmul(x_2, W_query);</td>") != NULL, "a row of examples/article.c");
    ck_assert_msg(strstr(page, "<td class=\"py\" style=\"padding-left:calc(8px + 8ch);text-indent:-8ch\">    keys = x @ "
                               "self.W_key</td><td class=\"c\" style=\"padding-left:calc(8px + 8ch);text-indent:-8ch\">    "
                               "Tensor *keys = torch_matmul(x, self<span class=\"nb\">-&gt;</span>W_key);") != NULL,
                  "a row of the class from nn/blocks/attention.c, its -> kept from breaking, wrapped under its indentation");
    assert_page_rows(page, "the article's page");
    ck_assert_msg(strstr(page, "grad_fn=&lt;SoftmaxBackward0&gt;)") != NULL, "the outputs, escaped");
    ck_assert_msg(strstr(page, "<script") == NULL && strstr(page, "<link") == NULL && strstr(page, " src=") == NULL &&
                      strstr(page, "url(") == NULL && strstr(page, "@import") == NULL,
                  "no script, nothing fetched");
    /* the output as printed sits in the page: its first and last lines */
    ck_assert_msg(strstr(page, "{&#39;Life&#39;: 0, &#39;dessert&#39;: 1") != NULL, "the first output line");
    ck_assert_msg(strstr(page, "Output shape: torch.Size([6, 4])") != NULL, "the last output line");
    free(out), free(want), free(page);
    remove_dir(dir);
}
END_TEST

/* The page in a real browser: Chromium renders it, its DOM has every section
 * and picture, and the console stays quiet. Skipped (with a message) without Chromium. */
START_TEST(test_article_html_in_chromium) {
    const char *browser = NULL;
    static const char *candidates[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"};
    for (int i = 0; i < 3; i++)
        if (access(candidates[i], X_OK) == 0) browser = candidates[i];
    if (!browser) {
        fprintf(stderr, "viz: Chromium not found: the page's browser check is skipped (apt-get install chromium)\n");
        return;
    }
    char *dir = temp_dir(), cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/article.html", dir);
    snprintf(cmd, sizeof cmd, "%s/article --html %s >/dev/null", build_dir(), path);
    ck_assert_int_eq(run_command(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd,
             "%s --headless --no-sandbox --disable-gpu --user-data-dir=%s/profile --enable-logging=stderr --v=0 "
             "--dump-dom file://%s 2>%s/console.txt",
             browser, dir, path, dir);
    char *dom;
    ck_assert_int_eq(run_command(cmd, &dom), 0);
    for (int i = 0; i < 8; i++) ck_assert_msg(strstr(dom, section_titles[i]) != NULL, "DOM lacks %s", section_titles[i]);
    ck_assert_int_eq(count(dom, "<section id="), 9);
    ck_assert_int_eq(count(dom, "<svg "), N_PICTURES);
    ck_assert_int_eq(count(dom, "<td class=\"py\""), count(dom, "<td class=\"c\""));
    snprintf(path, sizeof path, "%s/console.txt", dir);
    char *console = read_text(path);
    ck_assert_msg(strstr(console, "CONSOLE") == NULL, "console messages:\n%s", console);
    free(dom), free(console);
    remove_dir(dir);
}
END_TEST

/* gpt --html: the book's page of a small run: its output as printed, six sections of Python beside
 * C from the sources, three pictures, nothing fetched; and in Chromium, when there is one. */
START_TEST(test_gpt_html) {
    char *dir = temp_dir(), cmd[2048], path[512], *out, *plain;
    snprintf(path, sizeof path, "%s/book.html", dir);
    const char *flags = "--layers 1 --emb-dim 16 --heads 2 --context 8 --batch 4 --epochs 1 --eval-freq 10 --sample-tokens 5";
    snprintf(cmd, sizeof cmd, "%s/gpt %s --data %s --tokenizer %s --html %s 2>/dev/null", build_dir(), flags,
             data_path("tokenizer_corpus.txt"), shared_path("data/gpt2"), path);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    snprintf(cmd, sizeof cmd, "%s/gpt train %s --data %s --tokenizer %s 2>/dev/null", build_dir(), flags,
             data_path("tokenizer_corpus.txt"), shared_path("data/gpt2"));
    ck_assert_int_eq(run_command(cmd, &plain), 0);
    ck_assert_msg(strcmp(out, plain) == 0, "--html changed what train prints");
    char *page = read_text(path);
    assert_xml(page, strlen(page), "the book's page");
    ck_assert_int_eq(count(page, "<section id="), 6);
    ck_assert_int_eq(count(page, "<svg "), 3);
    ck_assert_int_eq(count(page, "<pre class=\"out\">"), 3);
    ck_assert_msg(strstr(page, ">    self.eps = 1e-5</td>") != NULL, "a row of nn/models/gpt/gpt.c with its Python");
    ck_assert_msg(strstr(page, ">def generate(model, idx, max_new_tokens,</td>") != NULL, "generate's def line");
    ck_assert_msg(strstr(page, "<span class=\"note\">(C: the cache is for eval mode;") != NULL, "a note of C's own, in C's column");
    ck_assert_msg(strstr(page, "<details><summary>") != NULL, "C's plumbing folded");
    assert_page_rows(page, "the book's page");
    ck_assert_msg(strstr(page, "optim_step(opt);") != NULL, "the training loop of examples/gpt.c");
    ck_assert_msg(strstr(page, "Training loss: ") && strstr(page, "Output text:"), "the run's output");
    ck_assert_msg(strstr(page, ">Every</text>") && strstr(page, "> effort</text>") && strstr(page, "> you</text>"),
                  "the heatmap's labels are the prompt's tokens, each its own");
    ck_assert_msg(strstr(page, "<script") == NULL && strstr(page, " src=") == NULL && strstr(page, "url(") == NULL,
                  "no script, nothing fetched");
    const char *browser = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
    if (browser) {
        snprintf(cmd, sizeof cmd, "%s --headless --no-sandbox --disable-gpu --user-data-dir=%s/profile --enable-logging=stderr "
                 "--v=0 --dump-dom file://%s 2>%s/console.txt", browser, dir, path, dir);
        char *dom;
        ck_assert_int_eq(run_command(cmd, &dom), 0);
        ck_assert_int_eq(count(dom, "<section id="), 6);
        ck_assert_int_eq(count(dom, "<svg "), 3);
        ck_assert_int_eq(count(dom, "<td class=\"py\""), count(dom, "<td class=\"c\""));
        snprintf(path, sizeof path, "%s/console.txt", dir);
        char *console = read_text(path);
        ck_assert_msg(strstr(console, "CONSOLE") == NULL, "console messages:\n%s", console);
        free(dom), free(console);
    } else {
        fprintf(stderr, "viz: Chromium not found: the book page's browser check is skipped\n");
    }
    free(out), free(plain), free(page);
    remove_dir(dir);
}
END_TEST

/* gpt appendix-d --plot: the loss figure and, beside it, the learning rate over every step (the
 * appendix's figure), one well-formed SVG */
START_TEST(test_appendix_d_plot) {
    char *dir = temp_dir(), cmd[1024], path[512], *out;
    snprintf(cmd, sizeof cmd, "%s/gpt appendix-d --tokenizer %s --data %s --layers 1 --emb-dim 8 --heads 2 --context 8 "
             "--epochs 2 --eval-freq 10 --plot %s/lr.svg", build_dir(), shared_path("data/gpt2"),
             data_path("tokenizer_corpus.txt"), dir);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    free(out);
    snprintf(path, sizeof path, "%s/lr.svg", dir);
    char *svg = read_text(path);
    assert_xml(svg, strlen(svg), "appendix-d --plot");
    ck_assert_int_eq(count(svg, "<svg"), 3); /* the figure, the losses, the learning rate */
    ck_assert_int_eq(count(svg, "stroke-width=\"1.5\""), 3);
    ck_assert_msg(strstr(svg, ">The learning rate (appendix D)</text>") != NULL, "the learning rate's plot");
    free(svg);
    remove_dir(dir);
}
END_TEST

START_TEST(test_train_pictures) {
    char *dir = temp_dir(), cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/text.txt", dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 20; i++) fputs("A <query> & a \"key\" meet. ", f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "%s/train --data %s --steps 30 --plot %s/loss.svg --plot-every 7 --attention-svg %s/attn.svg "
             "--prompt 'A <query> & \"key\"'",
             build_dir(), path, dir, dir);
    char *out;
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "step 30 loss") != NULL, "trained");
    snprintf(path, sizeof path, "%s/loss.svg", dir);
    char *svg = read_text(path);
    assert_xml(svg, strlen(svg), "--plot");
    ck_assert_int_eq(count(svg, "stroke-width=\"1.5\""), 2);
    free(svg);
    snprintf(path, sizeof path, "%s/attn.svg", dir);
    svg = read_text(path);
    assert_xml(svg, strlen(svg), "--attention-svg");
    ck_assert_int_eq(count(svg, ">head "), 4);
    ck_assert_msg(strstr(svg, ">&lt;</text>") != NULL, "the prompt's '<' escaped as a label");
    free(svg), free(out);
    /* an unwritable --plot fails before training */
    snprintf(cmd, sizeof cmd, "%s/train --steps 5 --plot %s/no/such/dir/loss.svg 2>&1", build_dir(), dir);
    ck_assert_int_eq(run_command(cmd, &out), 1);
    ck_assert_msg(strstr(out, "train: --plot: cannot write") && !strstr(out, "step 1 "), "got:\n%s", out);
    free(out);
    remove_dir(dir);
}
END_TEST

/* examples/minimal.c, the README's complete program, prints what PyTorch prints. */
START_TEST(test_minimal_example) {
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, "%s/minimal", build_dir());
    ck_assert_int_eq(run_command(cmd, &out), 0);
    char *want = read_text(data_path("minimal_expected.txt"));
    ck_assert_str_eq(out, want);
    free(out), free(want);
}
END_TEST

START_TEST(test_programs_help) {
    static const char *progs[][3] = {{"article", "--svg DIR", "--html FILE"},
                                     {"train", "--temperature X", "--top-k K"},
                                     {"bench", "train-base", "matmul"}};
    for (int i = 0; i < 3; i++) {
        char cmd[256], *out;
        snprintf(cmd, sizeof cmd, "%s/%s --help", build_dir(), progs[i][0]);
        ck_assert_int_eq(run_command(cmd, &out), 0);
        ck_assert_msg(strstr(out, progs[i][1]) && strstr(out, progs[i][2]) && strstr(out, "example"),
                      "%s --help:\n%s", progs[i][0], out);
        free(out);
    }
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, "%s/train --help", build_dir());
    run_command(cmd, &out);
    ck_assert_msg(strstr(out, "after --load, N more steps") && strstr(out, "default \"A\""), "%s", out);
    free(out);
}
END_TEST

/* bench floor: the FMA peak and read bandwidth measured, and gpt-124m's work counted: 394.0 GFLOP
 * (6 x 512 tokens x 123.5M weights of Linear, and attention's products) and AdamW's 4.55 GB (28 bytes
 * for each of 162,419,712 parameters). */
START_TEST(test_bench_floor) {
    char cmd[256], *out;
    snprintf(cmd, sizeof cmd, "%s/bench --threads 1 floor", build_dir());
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert_msg(strstr(out, "\"gpt_124m_gflop\": 394.0, \"adamw_gb\": 4.55, "), "%s", out);
    const char *keys[] = {"\"peak_gflops\": ", "\"read_gb_per_s\": ", "\"gpt_124m_floor_ms\": "};
    double v[3];
    for (int k = 0; k < 3; k++) {
        const char *at = strstr(out, keys[k]);
        ck_assert_msg(at != NULL, "%s missing: %s", keys[k], out);
        v[k] = atof(at + strlen(keys[k]));
    }
    double peak = v[0], bw = v[1], floor_ms = v[2];
    ck_assert_msg(peak > 0.5 && bw > 0.1, "%s", out);
    ck_assert_msg(fabs(floor_ms - (394.0 / peak + 4.55 / bw) * 1e3) <= 0.01 * floor_ms, "the floor is the sum: %s", out);
    free(out);
}
END_TEST

/* finetune classify and instruct --html: the run prints what it prints without the flag; the page is
 * well-formed, each section a table of the book's Python beside the C, the run's output, the figure */
START_TEST(test_finetune_pages) {
    static const struct { const char *args; int sections, tables; const char *row; } runs[] = {
        {"classify --epochs 2 --eval-freq 5 --lora 2", 5, 6, ">    return self.linear(x) + self.lora(x)</td>"},
        {"instruct --subset 8 --batch 4 --allowed-max-length 24 --epochs 1 --max-new-tokens 5", 3, 3,
         ">        optimizer.zero_grad()</td>"},
    };
    char *dir = temp_dir(), cmd[1024], path[512];
    for (int r = 0; r < 2; r++) {
        char *plain, *out;
        snprintf(cmd, sizeof cmd, "%s/finetune %s --tokenizer %s 2>/dev/null", build_dir(), runs[r].args, shared_path("data/gpt2"));
        ck_assert_int_eq(run_command(cmd, &plain), 0);
        snprintf(path, sizeof path, "%s/page%d.html", dir, r);
        snprintf(cmd, sizeof cmd, "%s/finetune %s --tokenizer %s --html %s 2>/dev/null", build_dir(), runs[r].args,
                 shared_path("data/gpt2"), path);
        ck_assert_int_eq(run_command(cmd, &out), 0);
        ck_assert_str_eq(out, plain);
        char *page = read_text(path);
        assert_xml(page, strlen(page), path);
        ck_assert_int_eq(count(page, "<section id="), runs[r].sections);
        ck_assert_int_eq(count(page, "<table"), runs[r].tables);
        ck_assert_int_eq(count(page, "<pre class=\"out\">"), runs[r].sections);
        ck_assert_msg(strstr(page, runs[r].row), "%s: a row with its Python (%s)", runs[r].args, runs[r].row);
        assert_page_rows(page, runs[r].args);
        ck_assert_msg(count(page, "<svg ") >= 1, "%s: the figure", runs[r].args);
        ck_assert_msg(strstr(page, "<script") == NULL && strstr(page, " src=") == NULL, "no script, nothing fetched");
        free(plain), free(out), free(page);
    }
    remove_dir(dir);
}
END_TEST

Suite *suite_viz(void) {
    Suite *s = suite_create("viz");
    TCase *tc = tcase("viz");
    tcase_add_test(tc, test_xml_checker_rejects_broken_xml);
    tcase_add_test(tc, test_heatmap_causal_weights);
    tcase_add_test(tc, test_heatmap_shapes_and_scales);
    tcase_add_test(tc, test_heatmap_errors);
    tcase_add_test(tc, test_writers_escape_hostile_labels);
    tcase_add_test(tc, test_graph_of_selfattention);
    tcase_add_test(tc, test_graph_of_toy_lm_and_deep_chain);
    tcase_add_test(tc, test_plot);
    tcase_add_test(tc, test_write_file_atomic);
    tcase_add_test(tc, test_split_line);
    tcase_add_test(tc, test_page_rows);
    tcase_add_test(tc, test_bench_floor);
    tcase_add_test(tc, test_article_svg);
    tcase_add_test(tc, test_article_html);
    tcase_add_test(tc, test_article_html_in_chromium);
    tcase_add_test(tc, test_gpt_html);
    tcase_add_test(tc, test_train_pictures);
    tcase_add_test(tc, test_appendix_d_plot);
    tcase_add_test(tc, test_finetune_pages);
    tcase_add_test(tc, test_minimal_example);
    tcase_add_test(tc, test_programs_help);
    suite_add_tcase(s, tc);
    return s;
}
