/* Attention heatmaps: who attends to whom. Rows are the queries, columns the
 * keys (attn_weights[i, j]: how much token i looks at token j), as the article
 * prints them. One colour scale for all panels, a legend beside it, the value
 * in each cell when the matrix is small, masked cells drawn as masked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "svg.h"

typedef struct { unsigned char r, g, b; } rgb;

/* Colour ramps (ColorBrewer's Blues and RdBu), interpolated linearly. */
static const rgb blues[] = {{247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
static const rgb rdbu[] = {{178, 24, 43}, {239, 138, 98}, {247, 247, 247}, {103, 169, 207}, {33, 102, 172}};

static rgb ramp(const rgb *stops, double t) { /* t in [0, 1] */
    if (!(t > 0)) t = 0;
    if (t > 1) t = 1;
    double p = t * 4;
    int i = p >= 4 ? 3 : (int)p;
    double u = p - i;
    rgb a = stops[i], b = stops[i + 1];
    return (rgb){(unsigned char)lround(a.r + (b.r - a.r) * u), (unsigned char)lround(a.g + (b.g - a.g) * u),
                 (unsigned char)lround(a.b + (b.b - a.b) * u)};
}

typedef struct {
    int64_t H, Tq, Tk;
    double *v;     /* H*Tq*Tk values */
    bool *masked;  /* drawn as masked */
    bool masked_inf, masked_causal; /* why: a -inf score, or a zero weight above a causal diagonal */
    double lo, hi; /* the colour scale */
    bool diverging;
} Grid;

static rgb colour(const Grid *g, double v) {
    return g->diverging ? ramp(rdbu, (v - g->lo) / (g->hi - g->lo)) : ramp(blues, (v - g->lo) / (g->hi - g->lo));
}

/* A causal panel: square, every entry strictly above the diagonal exactly 0,
 * and something nonzero on or below it. */
static bool causal_zeros(const double *p, int64_t Tq, int64_t Tk) {
    if (Tq != Tk || Tq < 2) return false;
    bool below = false;
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++) {
            if (j > i && p[i * Tk + j] != 0) return false;
            if (j <= i && p[i * Tk + j] != 0) below = true;
        }
    return below;
}

static void load_grid(Grid *g, Tensor *w, ac_mask_mode mode) {
    ac_check_defined(w, "heatmap");
    ac_check_float(w, "heatmap");
    if (w->ndim < 1 || w->ndim > 3)
        ac_error("heatmap: expected weights of shape (T_k,), (T_q, T_k) or (H, T_q, T_k), got %s", ac_shape_str(w));
    *g = (Grid){0};
    g->H = w->ndim == 3 ? w->shape[0] : 1;
    g->Tq = w->ndim >= 2 ? w->shape[w->ndim - 2] : 1;
    g->Tk = w->shape[w->ndim - 1];
    int64_t n = g->H * g->Tq * g->Tk;
    if (n == 0) ac_error("heatmap: nothing to draw in a tensor of shape %s", ac_shape_str(w));
    if (n > (int64_t)1 << 22) ac_error("heatmap: %lld cells are too many to draw (at most 4194304)", (long long)n);
    g->v = ac_arena_alloc(sizeof(double) * (size_t)n); /* the caller's ac_heatmap_svg releases them */
    g->masked = ac_arena_alloc(sizeof(bool) * (size_t)n);
    ac_mark m = ac_arena_mark();
    const float *d = ac_data_float(torch_contiguous(torch_detach(w)));
    for (int64_t i = 0; i < n; i++) g->v[i] = d[i];
    ac_arena_release(m);
    for (int64_t h = 0; h < g->H; h++) {
        double *p = g->v + h * g->Tq * g->Tk;
        bool causal = mode == AC_MASK_AUTO && causal_zeros(p, g->Tq, g->Tk);
        for (int64_t i = 0; i < g->Tq; i++)
            for (int64_t j = 0; j < g->Tk; j++) {
                double x = p[i * g->Tk + j];
                bool inf = isinf(x) && x < 0, above = causal && j > i;
                g->masked[(h * g->Tq + i) * g->Tk + j] = inf || above;
                g->masked_inf = g->masked_inf || inf;
                g->masked_causal = g->masked_causal || (above && !inf);
            }
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (!g->masked[i] && isfinite(g->v[i])) lo = fmin(lo, g->v[i]), hi = fmax(hi, g->v[i]);
    if (!(lo <= hi)) lo = 0, hi = 1; /* nothing finite */
    g->diverging = lo < 0 && hi > 0; /* both signs: a diverging scale centred on 0 */
    if (g->diverging) {
        double a = fmax(-lo, hi);
        g->lo = -a, g->hi = a;
    } else { /* the values' own range, so that weights of 0.06-0.19 use the whole ramp */
        g->lo = lo, g->hi = hi;
        if (!(g->hi > g->lo)) g->lo = g->hi - 1; /* one value: the top colour */
    }
}

static const char *label(const char *const *labels, int64_t i, char *buf, size_t n) {
    if (labels) return labels[i] ? labels[i] : "";
    snprintf(buf, n, "%lld", (long long)i);
    return buf;
}

static void cell_text(char *buf, size_t n, double v) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else if (fabs(v) >= 99.995) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.2f", v == 0 ? 0.0 : v);
}

bool ac_heatmap_svg(FILE *f, Tensor *weights, const ac_heatmap_opts *opts) {
    static const ac_heatmap_opts none = {0};
    const ac_heatmap_opts *o = opts ? opts : &none;
    ac_mark arena = ac_arena_mark();
    Grid g;
    load_grid(&g, weights, o->mask);
    bool values = o->show_values > 0 || (o->show_values < 0 && g.Tq <= 16 && g.Tk <= 16);
    int64_t big = g.Tq > g.Tk ? g.Tq : g.Tk;
    double cell = values ? 40 : fmax(4, fmin(28, 560.0 / (double)big));
    int64_t step = (int64_t)ceil(14.0 / cell); /* label every step-th row/column so labels never overlap */
    char buf[32];
    int row_w = 0, col_h = 0;
    for (int64_t i = 0; i < g.Tq; i += step) {
        int c = ac_text_columns(label(o->row_labels, i, buf, sizeof buf));
        row_w = c > row_w ? c : row_w;
    }
    for (int64_t j = 0; j < g.Tk; j += step) {
        int c = ac_text_columns(label(o->col_labels, j, buf, sizeof buf));
        col_h = c > col_h ? c : col_h;
    }
    double left = 12 + row_w * SVG_CHAR_W + 8, gap = 28;
    double panel_w = g.Tk * cell, panel_h = g.Tq * cell;
    /* heads in a grid, as near square as it goes: 1, 2 side by side, 3-4 two by two, ... */
    int64_t cols = g.H <= 2 ? g.H : (int64_t)ceil(sqrt((double)g.H)), rows = (g.H + cols - 1) / cols;
    bool head_row = g.H > 1 || o->head_titles;
    double head_top = (head_row ? 20 : 0) + col_h * SVG_CHAR_W + 8; /* above each panel: its title, key labels */
    double top = 10 + (o->title ? 24 : 0) + head_top;
    double row_gap = head_top + 16;
    double grid_w = cols * panel_w + (cols - 1) * gap, grid_h = rows * panel_h + (rows - 1) * row_gap;
    double legend_x = left + grid_w + 24;
    double legend_h = fmax(fmin(grid_h, 2 * panel_h + row_gap), 120);
    double width = legend_x + 16 + 8 + 9 * SVG_CHAR_W + 12;
    if (o->title) width = fmax(width, 24 + ac_text_columns(o->title) * 8.6);
    double height = top + fmax(grid_h, legend_h) + 20;
    bool any_masked = g.masked_inf || g.masked_causal;
    const char *why = g.masked_inf && g.masked_causal ? "masked (a -inf score, or the causal mask's weight 0)"
                      : g.masked_inf                   ? "masked (a -inf score: after softmax, weight 0)"
                                                       : "masked (by the causal mask: weight 0)";
    if (any_masked) height += 26, width = fmax(width, left + 20 + ac_text_columns(why) * SVG_CHAR_W + 12);

    svg_begin(f, width, height);
    if (o->title) svg_text(f, 12, 24, "start", "font-size=\"14\" font-weight=\"bold\"", o->title);
    bool tooltips = g.H * g.Tq * g.Tk <= 4096;
    for (int64_t h = 0; h < g.H; h++) {
        double x0 = left + (h % cols) * (panel_w + gap), y0 = top + (h / cols) * (panel_h + row_gap);
        if (head_row) {
            char hb[32];
            snprintf(hb, sizeof hb, "head %lld", (long long)h);
            svg_text(f, x0 + panel_w / 2, y0 - col_h * SVG_CHAR_W - 14, "middle", "font-weight=\"bold\"",
                     o->head_titles && o->head_titles[h] ? o->head_titles[h] : hb);
        }
        /* key labels above the columns, written upwards; query labels left of each row of panels */
        for (int64_t j = 0; j < g.Tk; j += step) {
            double cx = x0 + (j + 0.5) * cell + 4, cy = y0 - 6;
            char tr[96];
            snprintf(tr, sizeof tr, "transform=\"rotate(-90 %.1f %.1f)\"", cx, cy);
            svg_text(f, cx, cy, "start", tr, label(o->col_labels, j, buf, sizeof buf));
        }
        if (h % cols == 0)
            for (int64_t i = 0; i < g.Tq; i += step)
                svg_text(f, left - 8, y0 + (i + 0.5) * cell + 4, "end", NULL, label(o->row_labels, i, buf, sizeof buf));
        for (int64_t i = 0; i < g.Tq; i++)
            for (int64_t j = 0; j < g.Tk; j++) {
                int64_t k = (h * g.Tq + i) * g.Tk + j;
                double v = g.v[k], x = x0 + j * cell, y = y0 + i * cell;
                bool masked = g.masked[k];
                rgb c = masked || isnan(v) ? (rgb){217, 217, 217} : colour(&g, v);
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#%02x%02x%02x\">", x, y,
                        cell, cell, c.r, c.g, c.b);
                if (tooltips) {
                    char vb[32], qb[32], kb[32];
                    cell_text(vb, sizeof vb, v);
                    fputs("<title>", f);
                    ac_xml_escape(f, label(o->row_labels, i, qb, sizeof qb));
                    fputs(" \xe2\x86\x92 ", f); /* → */
                    ac_xml_escape(f, label(o->col_labels, j, kb, sizeof kb));
                    fprintf(f, ": %s%s</title>", masked ? "masked" : vb, masked && isinf(v) ? " (-inf)" : "");
                }
                fputs("</rect>\n", f);
                if (masked) /* hatched: one diagonal stroke */
                    fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1f\" stroke=\"#9a9a9a\" stroke-width=\"1\"/>\n", x,
                            y + cell, x + cell, y);
                else if (values) {
                    cell_text(buf, sizeof buf, v);
                    double lum = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
                    svg_text(f, x + cell / 2, y + cell / 2 + 3.5, "middle",
                             lum < 140 ? "font-size=\"10\" fill=\"#ffffff\"" : "font-size=\"10\" fill=\"#000000\"", buf);
                }
            }
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n", x0,
                y0, panel_w, panel_h);
    }
    /* the legend: 40 steps of the scale, top = hi; ticks at hi, middle, lo, with one number of
     * decimals for all three (enough to tell them apart) */
    int steps = 40;
    for (int s = 0; s < steps; s++) {
        double v = g.hi - (g.hi - g.lo) * (s + 0.5) / steps;
        rgb c = colour(&g, v);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.2f\" width=\"16\" height=\"%.2f\" fill=\"#%02x%02x%02x\"/>\n", legend_x,
                top + legend_h * s / steps, legend_h / steps + 0.05, c.r, c.g, c.b);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n", legend_x,
            top, legend_h);
    double ticks[3] = {g.hi, (g.hi + g.lo) / 2, g.lo}, half = (g.hi - g.lo) / 2;
    int decimals = half > 0 ? (int)ceil(-log10(half)) + 1 : 2;
    if (decimals < 0) decimals = 0;
    if (decimals > 6) decimals = 6;
    for (int t = 0; t < 3; t++) {
        double y = top + legend_h * t / 2;
        if (fabs(ticks[t]) >= 1e6) svg_number(buf, sizeof buf, ticks[t]);
        else snprintf(buf, sizeof buf, "%.*f", decimals, ticks[t] == 0 ? 0.0 : ticks[t]);
        fprintf(f, "<path d=\"M%.1f %.1fh4\" stroke=\"#444444\"/>\n", legend_x + 16, y);
        svg_text(f, legend_x + 24, y + 4, "start", NULL, buf);
    }
    if (any_masked) {
        double y = top + fmax(grid_h, legend_h) + 14;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"#d9d9d9\"/>\n", left, y);
        fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1f\" stroke=\"#9a9a9a\"/>\n", left, y + 14, left + 14, y);
        svg_text(f, left + 20, y + 11, "start", NULL, why);
    }
    svg_end(f);
    ac_arena_release(arena);
    return !ferror(f);
}
