/* viz: pictures of what attention.c computes, as SVG (and DOT for graphs),
 * with no dependency: attention heatmaps, the autograd graph, loss curves, and
 * the HTML page that sets Python beside C.
 *
 *     PyTorch ecosystem                     attention.c
 *     sns.heatmap(attn_weights)             ac_heatmap_svg(f, attn_weights, &opts)
 *     torchviz.make_dot(y, params=...)      ac_graph_dot(f, y, nn_named_parameters(&m->module))
 *     (the same, drawn without Graphviz)    ac_graph_svg(f, y, names)
 *     plt.plot(steps, losses)               ac_plot_svg(f, &plot, n_series, series)
 *
 * Every writer is deterministic (the same input gives the same bytes), writes
 * well-formed XML in UTF-8 without an XML declaration (so the same text can be
 * inlined in HTML), uses no element ids (so several pictures can share one
 * page), and escapes every label: markup characters become entities, control
 * characters but tab and newline their visible Unicode pictures (U+2400..),
 * invalid UTF-8 U+FFFD.
 * The writers return false when the FILE reports a write error; a tensor of the
 * wrong shape or dtype is an error of the library (ac_error), as for any op.
 */
#ifndef ATTENTION_VIZ_H
#define ATTENTION_VIZ_H

#include "nn.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Text s (UTF-8, any bytes) as XML/HTML character data or attribute value. */
void ac_xml_escape(FILE *f, const char *s);
/* Its width in code points after escaping (what a label occupies on screen). */
int ac_text_columns(const char *s);

/* ---- attention heatmaps ----------------------------------------------------------------------- */
typedef enum {
    AC_MASK_AUTO = 0, /* -inf cells, and exact zeros strictly above the diagonal of a
                         lower-triangular square matrix (a causal mask), are drawn as masked */
    AC_MASK_INF,      /* only -inf cells are masked */
} ac_mask_mode;

typedef struct {
    const char *title;              /* above the picture; NULL: none */
    const char *const *row_labels;  /* T_q labels (the queries, y axis); NULL: 0, 1, ... */
    const char *const *col_labels;  /* T_k labels (the keys, x axis); NULL: 0, 1, ... */
    const char *const *head_titles; /* one per head of a 3-D input; NULL: "head 0", ... */
    int show_values;                /* -1: when both sides are <= 16; 0: never; 1: always */
    ac_mask_mode mask;
} ac_heatmap_opts;

/* weights: (T_k,) drawn as one row, (T_q, T_k), or (H, T_q, T_k) drawn as H
 * panels side by side with one colour scale. Float32, any strides. A matrix
 * with negative values gets a diverging scale centred on 0, else 0..max. */
bool ac_heatmap_svg(FILE *f, Tensor *weights, const ac_heatmap_opts *opts);

/* ---- the autograd graph -------------------------------------------------------------------------- */
/* One node per grad_fn (PyTorch's name), one box per leaf that requires grad
 * (its name from `names` when it is there, e.g. nn_named_parameters(&m->module),
 * else "tensor", and its shape), and the output's box; arrows run from inputs
 * to the op that uses them, as torchviz draws them. names may be {0}. */
bool ac_graph_dot(FILE *f, Tensor *root, nn_TensorList names);
/* The same graph laid out in layers (no Graphviz needed): inputs at the top,
 * the output at the bottom, no two boxes overlapping. */
bool ac_graph_svg(FILE *f, Tensor *root, nn_TensorList names);

/* ---- line plots ------------------------------------------------------------------------------------ */
typedef struct {
    const char *name;  /* in the legend; NULL: no legend entry */
    int64_t n;         /* points */
    const double *x, *y;
} ac_series;
typedef struct {
    const char *title, *xlabel, *ylabel;
    /* a second x axis along the top (the book's "Tokens seen" over "Epochs"), when x2_per_x > 0:
     * its value at x is x * x2_per_x, its ticks its own nice numbers */
    const char *x2label;
    double x2_per_x;
} ac_plot_opts;
/* Up to 8 series; non-finite points are skipped. */
bool ac_plot_svg(FILE *f, const ac_plot_opts *opts, int n_series, const ac_series *series);
/* A plot's points as a program collects them, one x and two y's a point (an Ep line's epochs seen,
 * train and val loss): grown by ac_points_add (an error if memory runs out), freed by ac_points_free.
 * {0} is empty. */
typedef struct { int64_t n, cap; double *x, *a, *b; } ac_points;
void ac_points_add(ac_points *p, double x, double a, double b);
void ac_points_free(ac_points *p);

/* ---- a page of code beside code (examples/article.c --html) --------------------------------------- */
/* One self-contained XHTML-compatible page: no script, no network. The
 * strings are escaped; intro_html, footer_html and the SVG figures are markup. */
/* A row: the Python a line of C reproduces, the C, and a note that is C's own ("(C: ...)"; "" when
 * none), shown in the C column, never in the book's. */
typedef struct { const char *python, *c, *note; } ac_code_row;
void ac_page_begin(FILE *f, const char *title, const char *intro_html);
void ac_page_toc(FILE *f, int n, const char *const *ids, const char *const *titles);
void ac_page_section_begin(FILE *f, const char *id, const char *title);
void ac_page_code(FILE *f, const char *caption, const char *left_head, const char *right_head, int n,
                  const ac_code_row *rows);
void ac_page_output(FILE *f, const char *text, size_t len);
void ac_page_figures(FILE *f, int n, const char *const *svgs, const char *const *captions);
void ac_page_section_end(FILE *f);
void ac_page_end(FILE *f, const char *footer_html);
/* A program's reader's page of its own run (article, appendix_a, gpt, finetune and llm with --html): the
 * path checked first; run(ctx) with stdout captured, so that each section knows where its output
 * starts; the output printed as usual; then, if run returned 0, write_page(page, output, length)
 * into html_path (the output NUL-terminated). run's status, or 1 after a message naming program
 * and path where the page failed. */
int ac_page_of_run(const char *program, const char *html_path, int (*run)(void *ctx), void *ctx,
                   void (*write_page)(FILE *page, const char *out, size_t len));
/* A line of C split into its code and its trailing comment (`// ...` or
 * `/ * ... * /`), which in this project's examples is the Python the line
 * reproduces, or, when it starts "(C:", a note of C's own. The strings
 * malloc'd; free rows with ac_code_rows_free. */
ac_code_row ac_split_line(const char *line, size_t len);
void ac_code_rows_free(int n, ac_code_row *rows);
/* Rows gathered from a source text: ac_rows_collect takes the lines from `from` up to the "}" at
 * column 0 or the line that starts (after blanks) with `stop` (NULL: none), less blank and
 * comment-only lines, and returns where it stopped (a "(C: ..." note whose parenthesis stays open
 * goes on in the next lines' comments); ac_rows_function the definition of function
 * `name` (from the line at column 0 that names it before a "{", through its "}"), false when src
 * has none; ac_rows_dedent takes the common indentation off the C column. */
typedef struct { int n, cap; ac_code_row *rows; } ac_rows;
const char *ac_rows_collect(const char *from, const char *stop, ac_rows *r);
bool ac_rows_function(const char *src, const char *name, ac_rows *r);
void ac_rows_dedent(ac_rows *r);
/* One table of a program's page: the functions `names` (separated by blanks) of source text src, in
 * that order, the book's Python under left_head beside the C under "C (src_name)". A name src lacks
 * is an error (ac_error: the page and its program's sources disagree). */
void ac_page_functions(FILE *f, const char *caption, const char *left_head, const char *src, const char *src_name,
                       const char *names);
/* A page's sections of such tables, with the table of contents: the entries in order, each a table
 * (caption may be NULL); an entry with its predecessor's id adds its table to that section, the first
 * gives the section its title. After a section's last entry, number i, the run's output from cuts[i]
 * to cuts[i + 1] (n + 1 cuts; none when that is empty), and after entry figure_at's the figure, when
 * figure_svg is not NULL.
 * At most 32 sections. */
typedef struct { const char *id, *title, *src, *src_name, *functions, *caption; } ac_page_table;
void ac_page_tables(FILE *f, const char *left_head, int n, const ac_page_table *t, const char *const *cuts,
                    int figure_at, const char *figure_svg, const char *figure_caption);
/* Where a line of out (from `from` up to end) starts with `mark`, or dflt: where a page cuts a run's
 * output into its sections' parts. */
const char *ac_page_line_at(const char *from, const char *end, const char *mark, const char *dflt);

/* Writes through FILE.tmp and renames it into place, so that a reader (a
 * browser watching a loss curve) never sees half a file. draw() returns false
 * on a write error. Returns false (with errno set) when the file cannot be
 * written. */
bool ac_write_file_atomic(const char *path, bool (*draw)(FILE *f, void *user), void *user);
/* What draw() writes, as a NUL-terminated malloc'd string (a picture for a page); NULL when it
 * fails or there is no temporary file. */
char *ac_draw_to_string(bool (*draw)(FILE *f, void *user), void *user);

#ifdef __cplusplus
}
#endif

#endif
