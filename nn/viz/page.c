/* The reader's page: one self-contained HTML file (no script, no network),
 * a section per code block, Python and C on the same row, what they print,
 * and pictures. The page is also well-formed XML, so the same checker that
 * reads the SVG files reads it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extend.h"
#include "svg.h"

static const char style[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1400px;padding:0 24px;"
    "color:#1b1b1b;background:#fff}\n"
    "h1{font-size:1.5em;margin:1.2em 0 .3em}h2{font-size:1.2em;margin:1.8em 0 .5em;border-bottom:1px solid #ddd}\n"
    "h3{font-size:1em;margin:1em 0 .3em;color:#555}\n"
    "table.code{border-collapse:collapse;width:100%;table-layout:fixed}\n"
    "table.code th{text-align:left;font-weight:600;background:#f3f3f3;padding:4px 8px}\n"
    "table.code td{vertical-align:top;padding:0 8px;font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;"
    "font-size:12.5px;white-space:pre-wrap;overflow-wrap:anywhere;padding-left:calc(8px + 4ch);text-indent:-4ch}\n"
    "table.code .nb{white-space:nowrap}\n"
    "table.code .note{color:#6b6b6b;font-style:italic}\n"
    "table.code summary{color:#6b6b6b;cursor:pointer}table.code details div{text-indent:0}\n"
    "table.code td.py{background:#fbf8ef;border-right:2px solid #e5dfc8}table.code td.c{background:#f4f8fb}\n"
    "table.code tr:hover td{background:#fff3b0}\n"
    "pre.out{background:#111;color:#e8e8e8;padding:8px 12px;font-size:12.5px;overflow-x:auto}\n"
    ".figs{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.figs figure{margin:0}\n"
    ".figs figcaption{font-size:.85em;color:#555}.figs svg{max-width:100%;height:auto}\n"
    "nav ol{columns:2;font-size:.95em}\n";

/* C code, escaped, with each "->" kept whole: a wrapped line never breaks between - and >. */
static void code_cell(FILE *f, const char *c) {
    for (const char *p = c; *p;) {
        const char *arrow = strstr(p, "->");
        size_t n = arrow ? (size_t)(arrow - p) : strlen(p);
        char *part = ac_malloc(n + 1);
        memcpy(part, p, n);
        part[n] = 0;
        ac_xml_escape(f, part);
        free(part);
        if (!arrow) break;
        fputs("<span class=\"nb\">-&gt;</span>", f);
        p = arrow + 2;
    }
}

void ac_page_begin(FILE *f, const char *title, const char *intro_html) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>",
          f);
    ac_xml_escape(f, title);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<header>\n<h1>", style);
    ac_xml_escape(f, title);
    fprintf(f, "</h1>\n%s\n</header>\n", intro_html ? intro_html : "");
}

void ac_page_toc(FILE *f, int n, const char *const *ids, const char *const *titles) {
    fputs("<nav>\n<ol>\n", f);
    for (int i = 0; i < n; i++) {
        fputs("<li><a href=\"#", f);
        ac_xml_escape(f, ids[i]);
        fputs("\">", f);
        ac_xml_escape(f, titles[i]);
        fputs("</a></li>\n", f);
    }
    fputs("</ol>\n</nav>\n", f);
}

void ac_page_section_begin(FILE *f, const char *id, const char *title) {
    fputs("<section id=\"", f);
    ac_xml_escape(f, id);
    fputs("\">\n<h2>", f);
    ac_xml_escape(f, title);
    fputs("</h2>\n", f);
}

/* A cell's text wraps under its own indentation: the leading blanks stay (a copy keeps them), the
 * first line hangs out by them, and what wraps lands 4 columns in. */
static void cell_open(FILE *f, const char *cls, const char *text) {
    size_t k = strspn(text, " ");
    if (k == 0) fprintf(f, "<td class=\"%s\">", cls); /* the style sheet's hang of 4 */
    else fprintf(f, "<td class=\"%s\" style=\"padding-left:calc(8px + %zuch);text-indent:-%zuch\">", cls, k + 4, k + 4);
}

static void c_text(FILE *f, const ac_code_row *row) {
    code_cell(f, row->c);
    if (row->note && row->note[0]) {
        fputs(row->c[0] ? "  <span class=\"note\">" : "<span class=\"note\">", f);
        ac_xml_escape(f, row->note);
        fputs("</span>", f);
    }
}

/* A row of C alone (no Python, no note), other than a function's closing brace: plumbing. */
static bool plumbing(const ac_code_row *row) {
    return !row->python[0] && !(row->note && row->note[0]) && strcmp(row->c, "}") != 0;
}
#define FOLD_MIN 5 /* this many rows of plumbing in a row are folded into one */

void ac_page_code(FILE *f, const char *caption, const char *left_head, const char *right_head, int n,
                  const ac_code_row *rows) {
    if (caption) {
        fputs("<h3>", f);
        ac_xml_escape(f, caption);
        fputs("</h3>\n", f);
    }
    fputs("<table class=\"code\">\n<tr><th>", f);
    ac_xml_escape(f, left_head);
    fputs("</th><th>", f);
    ac_xml_escape(f, right_head);
    fputs("</th></tr>\n", f);
    for (int i = 0; i < n; i++) {
        int run = 0;
        while (i + run < n && plumbing(&rows[i + run])) run++;
        if (run >= FOLD_MIN) { /* the C's own work, summed up in a line that opens onto it */
            const char *first = rows[i].c + strspn(rows[i].c, " ");
            fputs("<tr><td class=\"py\"></td>", f);
            cell_open(f, "c", rows[i].c);
            fputs("<details><summary>", f);
            ac_xml_escape(f, first);
            fprintf(f, " \xe2\x80\xa6 (C: %d lines the Python has no need of)</summary>", run - 1);
            for (int j = i + 1; j < i + run; j++) {
                size_t k = strspn(rows[j].c, " "), base = strspn(rows[i].c, " ");
                fprintf(f, "<div style=\"padding-left:%zuch;text-indent:-4ch\">", (k > base ? k - base : 0) + 4);
                code_cell(f, rows[j].c + (k > base ? base : k));
                fputs("</div>", f);
            }
            fputs("</details></td></tr>\n", f);
            i += run - 1;
            continue;
        }
        fputs("<tr>", f);
        cell_open(f, "py", rows[i].python);
        ac_xml_escape(f, rows[i].python);
        fputs("</td>", f);
        cell_open(f, "c", rows[i].c);
        c_text(f, &rows[i]);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

void ac_page_output(FILE *f, const char *text, size_t len) {
    fputs("<h3>Output (the same from Python and from C)</h3>\n<pre class=\"out\">", f);
    char *s = ac_malloc(len + 1);
    memcpy(s, text, len);
    s[len] = 0;
    ac_xml_escape(f, s);
    free(s);
    fputs("</pre>\n", f);
}

void ac_page_figures(FILE *f, int n, const char *const *svgs, const char *const *captions) {
    if (n == 0) return;
    fputs("<div class=\"figs\">\n", f);
    for (int i = 0; i < n; i++) {
        fputs("<figure>\n", f);
        fputs(svgs[i], f); /* our own writers' SVG: already escaped */
        fputs("<figcaption>", f);
        ac_xml_escape(f, captions[i]);
        fputs("</figcaption>\n</figure>\n", f);
    }
    fputs("</div>\n", f);
}

void ac_page_section_end(FILE *f) { fputs("</section>\n", f); }

void ac_page_end(FILE *f, const char *footer_html) {
    fprintf(f, "<footer>\n%s\n</footer>\n</body>\n</html>\n", footer_html ? footer_html : "");
}

/* ---- source lines and their trailing comments ------------------------------------------------- */

/* Where a trailing comment starts on a line of C (outside string and char
 * literals), or NULL. */
static const char *comment_start(const char *s, const char *end) {
    char quote = 0;
    for (const char *p = s; p < end; p++) {
        if (quote) {
            if (*p == '\\') p++;
            else if (*p == quote) quote = 0;
        } else if (*p == '"' || *p == '\'') quote = *p;
        else if (p + 1 < end && *p == '/' && (p[1] == '/' || p[1] == '*')) return p;
    }
    return NULL;
}

static char *dup_range(const char *a, const char *b) {
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) b--; /* trailing blanks */
    char *s = ac_malloc((size_t)(b - a) + 1);
    memcpy(s, a, (size_t)(b - a));
    s[b - a] = 0;
    return s;
}

ac_code_row ac_split_line(const char *line, size_t len) {
    const char *end = line + len, *c = comment_start(line, end);
    ac_code_row r;
    r.c = dup_range(line, c ? c : end);
    r.note = dup_range(end, end);
    if (!c) {
        r.python = dup_range(end, end);
        return r;
    }
    const char *p = c + 2, *q = end;
    if (c[1] == '*') { /* a block comment: up to its end */
        const char *e = strstr(p, "*/");
        if (e && e < end) q = e;
    }
    if (p < q && *p == ' ') p++; /* one space after the marker; the rest is the Python's indentation */
    r.python = dup_range(p, q);
    const char *note = strstr(r.python, "(C:"); /* C's own note, not the book's: all of it, or after the Python */
    if (note && (note == r.python || note[-1] == ' ')) {
        free((char *)r.note);
        r.note = ac_strdup(note);
        char *py = (char *)r.python;
        size_t k = (size_t)(note - py);
        while (k > 0 && py[k - 1] == ' ') k--;
        py[k] = 0;
    }
    return r;
}

void ac_code_rows_free(int n, ac_code_row *rows) {
    for (int i = 0; i < n; i++) free((char *)rows[i].c), free((char *)rows[i].python), free((char *)rows[i].note);
    free(rows);
}

/* ---- rows of a source text (the C column of a page, its comments the Python) ---------------------- */

static void push_row(ac_rows *r, ac_code_row row) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->rows = ac_realloc(r->rows, sizeof(ac_code_row) * (size_t)r->cap);
    }
    r->rows[r->n++] = row;
}

static const char *skip_blanks(const char *p) {
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

void ac_rows_dedent(ac_rows *r) {
    size_t min = (size_t)-1;
    for (int i = 0; i < r->n; i++)
        if (r->rows[i].c[0]) {
            size_t k = (size_t)(skip_blanks(r->rows[i].c) - r->rows[i].c);
            if (k < min) min = k;
        }
    for (int i = 0; min != (size_t)-1 && i < r->n; i++)
        if (r->rows[i].c[0]) memmove((char *)r->rows[i].c, r->rows[i].c + min, strlen(r->rows[i].c + min) + 1);
}

/* How many parentheses s leaves open. */
static int open_parens(const char *s) {
    int d = 0;
    for (; *s; s++) d += (*s == '(') - (*s == ')');
    return d;
}

const char *ac_rows_collect(const char *from, const char *stop, ac_rows *r) {
    const char *p = from;
    size_t stop_len = stop ? strlen(stop) : 0;
    int note_open = 0; /* a "(C: ..." note goes on until its parenthesis closes */
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        const char *t = skip_blanks(p);
        if (p[0] == '}' || (stop && strncmp(t, stop, stop_len) == 0)) return p;
        bool skip = t == e || strncmp(t, "/*", 2) == 0 || strncmp(t, "//", 2) == 0 || strncmp(t, "* ", 2) == 0 ||
                    strncmp(t, "*/", 2) == 0 || strncmp(t, "picture_", 8) == 0;
        if (!skip) {
            ac_code_row row = ac_split_line(p, (size_t)(e - p));
            if (note_open > 0 && row.python[0]) { /* the note's next line */
                char *empty = (char *)row.note;
                row.note = row.python, row.python = empty;
            }
            note_open = row.note[0] ? (note_open > 0 ? note_open : 0) + open_parens(row.note) : 0;
            push_row(r, row);
        }
        p = *e ? e + 1 : e;
    }
    return p;
}

bool ac_rows_function(const char *src, const char *name, ac_rows *r) {
    size_t n = strlen(name);
    for (const char *p = src; (p = strstr(p, name)) != NULL; p += n) {
        const char *bol = p;
        while (bol > src && bol[-1] != '\n') bol--;
        if (p[n] != '(' || *bol == ' ' || *bol == '/' || *bol == '*') continue;
        size_t until = strcspn(p, "{;");
        if (p[until] != '{') continue; /* a declaration */
        ac_rows_collect(bol, NULL, r);
        push_row(r, ac_split_line("}", 1));
        return true;
    }
    return false;
}

char *ac_draw_to_string(bool (*draw)(FILE *f, void *user), void *user) {
    FILE *f = tmpfile();
    if (!f || !draw(f, user)) {
        if (f) fclose(f);
        return NULL;
    }
    long n = ftell(f);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    rewind(f);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n) free(text), text = NULL;
    if (text) text[n] = 0;
    fclose(f);
    return text;
}

int ac_page_of_run(const char *program, const char *html_path, int (*run)(void *ctx), void *ctx,
                   void (*write_page)(FILE *page, const char *out, size_t len)) {
    char err[1200];
    if (!ac_output_path_check(html_path, true, err, sizeof err)) {
        fprintf(stderr, "%s: --html %s\n", program, err);
        return 1;
    }
    FILE *cap = tmpfile();
    int saved = cap ? dup(1) : -1;
    if (saved < 0) {
        fprintf(stderr, "%s: --html: no temporary file for the output: %s\n", program, strerror(errno));
        if (cap) fclose(cap);
        return 1;
    }
    fflush(stdout);
    dup2(fileno(cap), 1);
    int rc = run(ctx);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    long n = lseek(fileno(cap), 0, SEEK_END);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    rewind(cap);
    bool read = out && fread(out, 1, (size_t)n, cap) == (size_t)n;
    fclose(cap);
    if (!read) {
        fprintf(stderr, "%s: --html: cannot read back the output\n", program);
        free(out);
        return 1;
    }
    out[n] = 0;
    fwrite(out, 1, (size_t)n, stdout);
    if (rc == 0) { /* a run that failed leaves no page */
        FILE *page = fopen(html_path, "wb");
        if (!page) {
            fprintf(stderr, "%s: cannot write --html %s: %s\n", program, html_path, strerror(errno));
            rc = 1;
        } else {
            write_page(page, out, (size_t)n);
            bool ok = !ferror(page);
            if (fclose(page) != 0 || !ok) {
                fprintf(stderr, "%s: writing --html %s failed\n", program, html_path);
                rc = 1;
            }
        }
    }
    free(out);
    return rc;
}

void ac_page_functions(FILE *f, const char *caption, const char *left_head, const char *src, const char *src_name,
                       const char *names) {
    ac_rows r = {0};
    for (const char *p = names + strspn(names, " "); *p; p += strspn(p, " ")) {
        size_t n = strcspn(p, " ");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        if (!ac_rows_function(src, name, &r)) ac_error("--html: %s not found in %s", name, src_name);
        p += n;
    }
    char head[512];
    snprintf(head, sizeof head, "C (%s)", src_name);
    ac_page_code(f, caption, left_head, head, r.n, r.rows);
    ac_code_rows_free(r.n, r.rows);
}

void ac_page_tables(FILE *f, const char *left_head, int n, const ac_page_table *t, const char *const *cuts,
                    int figure_at, const char *figure_svg, const char *figure_caption) {
    const char *ids[32] = {0}, *titles[32] = {0};
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!i || strcmp(t[i].id, t[i - 1].id)) {
            if (k == 32) ac_error("ac_page_tables: more than 32 sections");
            ids[k] = t[i].id, titles[k++] = t[i].title;
        }
    ac_page_toc(f, k, ids, titles);
    for (int i = 0; i < n; i++) {
        if (!i || strcmp(t[i].id, t[i - 1].id)) ac_page_section_begin(f, t[i].id, t[i].title);
        ac_page_functions(f, t[i].caption, left_head, t[i].src, t[i].src_name, t[i].functions);
        if (i + 1 < n && !strcmp(t[i + 1].id, t[i].id)) continue;
        if (cuts[i + 1] > cuts[i]) ac_page_output(f, cuts[i], (size_t)(cuts[i + 1] - cuts[i]));
        const char *figs[1] = {figure_svg}, *caps[1] = {figure_caption};
        ac_page_figures(f, i == figure_at && figure_svg ? 1 : 0, figs, caps);
        ac_page_section_end(f);
    }
}

const char *ac_page_line_at(const char *from, const char *end, const char *mark, const char *dflt) {
    size_t n = strlen(mark);
    for (const char *p = from; p < end;) {
        if ((size_t)(end - p) >= n && !memcmp(p, mark, n)) return p;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    return dflt;
}
