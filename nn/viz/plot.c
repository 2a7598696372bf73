/* Line plots (a loss curve): x and y axes with "nice" ticks (1, 2 or 5 times
 * a power of ten), up to 8 series, a legend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "svg.h"

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

/* A tick step near range/target of the form {1, 2, 5} x 10^k. */
static double nice_step(double range, int target) {
    double raw = range / target, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* Extends [*lo, *hi] outwards to whole steps; returns the step. */
static double nice_range(double *lo, double *hi, int target) {
    if (!isfinite(*hi - *lo)) *lo = -1, *hi = 1; /* nothing finite, or a range past double's */
    if (!(*hi > *lo)) { /* one value (or none): a unit around it */
        double c = isfinite(*lo) ? *lo : 0, d = fabs(c) > 0 ? fabs(c) * 0.1 : 1;
        *lo = c - d, *hi = c + d;
    }
    double step = nice_step(*hi - *lo, target);
    *lo = floor(*lo / step + 1e-9) * step;
    *hi = ceil(*hi / step - 1e-9) * step;
    return step;
}

bool ac_plot_svg(FILE *f, const ac_plot_opts *opts, int n_series, const ac_series *series) {
    static const ac_plot_opts none = {0};
    const ac_plot_opts *o = opts ? opts : &none;
    if (n_series < 0 || n_series > 8) ac_error("plot: expected 0 to 8 series, got %d", n_series);
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int s = 0; s < n_series; s++) {
        if (series[s].n < 0) ac_error("plot: series %d has %lld points", s, (long long)series[s].n);
        for (int64_t i = 0; i < series[s].n; i++) {
            double x = series[s].x[i], y = series[s].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            xlo = fmin(xlo, x), xhi = fmax(xhi, x), ylo = fmin(ylo, y), yhi = fmax(yhi, y);
        }
    }
    double xstep = nice_range(&xlo, &xhi, 6), ystep = nice_range(&ylo, &yhi, 5);
    bool top = o->x2_per_x > 0 && isfinite(o->x2_per_x);
    const double W = 640, H = 400, L = 72, R = 24, T = (o->title ? 40 : 20) + (top ? 40 : 0), B = 56;
    double pw = W - L - R, ph = H - T - B;
#define PX(x) (L + ((x) - xlo) / (xhi - xlo) * pw)
#define PY(y) (T + ph - ((y) - ylo) / (yhi - ylo) * ph)
    svg_begin(f, W, H);
    if (o->title) svg_text(f, W / 2, 24, "middle", "font-size=\"14\" font-weight=\"bold\"", o->title);
    char buf[32];
    /* grid lines and ticks; tick values as i * step, so no drift accumulates */
    for (int64_t i = (int64_t)llround(ylo / ystep); i <= (int64_t)llround(yhi / ystep); i++) {
        double y = PY(i * ystep);
        fprintf(f, "<path d=\"M%.1f %.1fH%.1f\" stroke=\"#e5e5e5\"/>\n", L, y, L + pw);
        svg_number(buf, sizeof buf, i * ystep);
        svg_text(f, L - 6, y + 4, "end", NULL, buf);
    }
    for (int64_t i = (int64_t)llround(xlo / xstep); i <= (int64_t)llround(xhi / xstep); i++) {
        double x = PX(i * xstep);
        fprintf(f, "<path d=\"M%.1f %.1fV%.1f\" stroke=\"#e5e5e5\"/>\n", x, T, T + ph);
        svg_number(buf, sizeof buf, i * xstep);
        svg_text(f, x, T + ph + 16, "middle", NULL, buf);
    }
    if (top) { /* the second axis: ticks at its own nice values, mapped back to x */
        double lo2 = xlo * o->x2_per_x, hi2 = xhi * o->x2_per_x, step2 = nice_step(hi2 - lo2, 6);
        for (int64_t i = (int64_t)ceil(lo2 / step2 - 1e-9); i * step2 <= hi2 * (1 + 1e-12); i++) {
            double x = PX(i * step2 / o->x2_per_x);
            fprintf(f, "<path d=\"M%.1f %.1fv-5\" stroke=\"#444444\"/>\n", x, T);
            svg_number(buf, sizeof buf, i * step2);
            svg_text(f, x, T - 8, "middle", NULL, buf);
        }
        if (o->x2label) svg_text(f, L + pw / 2, T - 26, "middle", NULL, o->x2label);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n", L, T,
            pw, ph);
    if (o->xlabel) svg_text(f, L + pw / 2, H - 14, "middle", NULL, o->xlabel);
    if (o->ylabel) {
        char tr[64];
        snprintf(tr, sizeof tr, "transform=\"rotate(-90 16 %.1f)\"", T + ph / 2);
        svg_text(f, 16, T + ph / 2, "middle", tr, o->ylabel);
    }
    int legend = 0;
    for (int s = 0; s < n_series; s++) {
        const ac_series *sr = &series[s];
        fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" stroke-linejoin=\"round\" d=\"", palette[s]);
        bool pen = false;
        for (int64_t i = 0; i < sr->n; i++) {
            if (!isfinite(sr->x[i]) || !isfinite(sr->y[i])) { /* a gap */
                pen = false;
                continue;
            }
            fprintf(f, "%s%.2f %.2f", pen ? "L" : "M", PX(sr->x[i]), PY(sr->y[i]));
            pen = true;
        }
        fputs("\"/>\n", f);
        for (int64_t i = 0; i < sr->n; i++) { /* a point with no neighbour draws no line: a marker shows it */
#define OK(k) ((k) >= 0 && (k) < sr->n && isfinite(sr->x[k]) && isfinite(sr->y[k]))
            if (OK(i) && !OK(i - 1) && !OK(i + 1))
                fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", PX(sr->x[i]), PY(sr->y[i]), palette[s]);
#undef OK
        }
        if (sr->name) {
            double y = T + 14 + 18 * legend++;
            double x = L + pw - 12 - ac_text_columns(sr->name) * SVG_CHAR_W - 28;
            fprintf(f, "<path d=\"M%.1f %.1fh20\" stroke=\"%s\" stroke-width=\"2\"/>\n", x, y - 4, palette[s]);
            svg_text(f, x + 26, y, "start", NULL, sr->name);
        }
    }
#undef PX
#undef PY
    svg_end(f);
    return !ferror(f);
}

void ac_points_add(ac_points *p, double x, double a, double b) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->x = ac_realloc(p->x, sizeof(double) * (size_t)p->cap);
        p->a = ac_realloc(p->a, sizeof(double) * (size_t)p->cap);
        p->b = ac_realloc(p->b, sizeof(double) * (size_t)p->cap);
    }
    p->x[p->n] = x, p->a[p->n] = a, p->b[p->n++] = b;
}

void ac_points_free(ac_points *p) {
    free(p->x), free(p->a), free(p->b);
    *p = (ac_points){0};
}
