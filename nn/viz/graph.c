/* The autograd graph that backward() walks, as torchviz's make_dot draws it:
 * a box per grad_fn, a box per leaf with its name and shape, the output's box,
 * arrows from inputs to the op that uses them. DOT for Graphviz, and an SVG
 * laid out here (a small Sugiyama layout: layers by longest path, dummy points
 * for long edges, barycentre ordering, then x positions that never overlap). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "svg.h"

typedef enum { V_OUTPUT, V_OP, V_LEAF, V_DUMMY } VKind;

typedef struct {
    VKind kind;
    const void *key;   /* the Node or the leaf Tensor (the output: its Tensor, tagged) */
    char label[2][96]; /* up to two lines */
    int rank;          /* 0: the output, at the bottom */
    double x, w, order;
} Vertex;

typedef struct { int from, to; } Edge; /* from: an input; to: what uses it */

typedef struct {
    Vertex *v;
    int nv;
    size_t cap_v;
    Edge *e;
    int ne;
    size_t cap_e;
    int *slot; /* hash of keys -> vertex index + 1 */
    int nslot;
} Graph;

#define GRAPH_MAX_VERTICES 20000

/* Everything here lives in the arena, between a mark and its release in
 * ac_graph_dot/svg: an error (too many nodes, out of memory) leaks nothing,
 * since the caller's release takes it back. */
static void *alloc(size_t n) { return ac_arena_alloc(n ? n : 1); }
static void *zalloc(size_t n) { return memset(alloc(n), 0, n ? n : 1); }

static size_t hash_ptr(const void *p, int n) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull) & (size_t)(n - 1); }

static int find(const Graph *g, const void *key) {
    for (size_t h = hash_ptr(key, g->nslot);; h = (h + 1) & (size_t)(g->nslot - 1)) {
        int s = g->slot[h];
        if (s == 0) return -1;
        if (g->v[s - 1].key == key && g->v[s - 1].kind != V_DUMMY) return s - 1;
    }
}

static void rehash(Graph *g) {
    g->nslot = g->nslot ? g->nslot * 2 : 256;
    g->slot = zalloc(sizeof(int) * (size_t)g->nslot);
    for (int i = 0; i < g->nv; i++) {
        if (!g->v[i].key) continue;
        size_t h = hash_ptr(g->v[i].key, g->nslot);
        while (g->slot[h]) h = (h + 1) & (size_t)(g->nslot - 1);
        g->slot[h] = i + 1;
    }
}

static int add_vertex(Graph *g, VKind kind, const void *key) {
    if (g->nv >= GRAPH_MAX_VERTICES)
        ac_error("graph: more than %d nodes are too many to draw", GRAPH_MAX_VERTICES);
    g->v = ac_arena_grow(g->v, (size_t)g->nv, &g->cap_v, (size_t)g->nv + 1, sizeof(Vertex));
    Vertex *v = &g->v[g->nv];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->key = key;
    g->nv++;
    if (key) {
        if (2 * g->nv >= g->nslot) rehash(g);
        else {
            size_t h = hash_ptr(key, g->nslot);
            while (g->slot[h]) h = (h + 1) & (size_t)(g->nslot - 1);
            g->slot[h] = g->nv;
        }
    }
    return g->nv - 1;
}

static void add_edge(Graph *g, int from, int to) {
    g->e = ac_arena_grow(g->e, (size_t)g->ne, &g->cap_e, (size_t)g->ne + 1, sizeof(Edge));
    g->e[g->ne++] = (Edge){from, to};
}

static void shape_label(char *buf, size_t n, const Tensor *t) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < n) snprintf(buf + k, n - k, t->ndim == 1 ? ",)" : ")");
}

static const char *name_of(const Tensor *t, nn_TensorList names) {
    for (int i = 0; i < names.n; i++)
        if (names.tensors[i] == t) return names.names[i];
    return NULL;
}

/* The vertex of an input: fn, the op that made it (the edge taken when the
 * consumer was made), or the leaf t; made on first sight. */
static int vertex_of(Graph *g, Tensor *t, struct Node *fn, nn_TensorList names, int *stack, int *sp) {
    const void *key = fn ? (const void *)fn : (const void *)t;
    int i = find(g, key);
    if (i >= 0) return i;
    if (fn) {
        i = add_vertex(g, V_OP, key);
        snprintf(g->v[i].label[0], sizeof g->v[i].label[0], "%s", ac_grad_fn_name(fn));
        stack[(*sp)++] = i;
    } else {
        i = add_vertex(g, V_LEAF, key);
        const char *nm = name_of(t, names);
        snprintf(g->v[i].label[0], sizeof g->v[i].label[0], "%s", nm ? nm : "tensor");
        shape_label(g->v[i].label[1], sizeof g->v[i].label[1], t);
    }
    return i;
}

/* Walks the graph from root (iteratively: graphs can be deep), vertices in
 * discovery order, inputs in order: the same graph gives the same numbering. */
static void build(Graph *g, Tensor *root, nn_TensorList names) {
    memset(g, 0, sizeof *g);
    rehash(g);
    ac_check_defined(root, "graph");
    int out = add_vertex(g, V_OUTPUT, NULL);
    snprintf(g->v[out].label[0], sizeof g->v[out].label[0], "output");
    shape_label(g->v[out].label[1], sizeof g->v[out].label[1], root);
    if (!root->requires_grad) return;
    int *stack = alloc(sizeof(int) * GRAPH_MAX_VERTICES);
    int sp = 0;
    add_edge(g, vertex_of(g, root, root->grad_fn, names, stack, &sp), out);
    while (sp > 0) {
        int i = stack[--sp];
        const struct Node *n = g->v[i].key;
        for (int k = 0; k < ac_grad_fn_inputs(n); k++) {
            if (!ac_grad_fn_needs(n, k)) continue;
            add_edge(g, vertex_of(g, ac_grad_fn_input(n, k), ac_grad_fn_next(n, k), names, stack, &sp), i);
        }
    }
}

/* ---- DOT ----------------------------------------------------------------------------------------- */

static void dot_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f), fputc(*s, f);
        else if (*s == '\n') fputs("\\n", f);
        else if ((unsigned char)*s < 0x20) fputc(' ', f);
        else fputc(*s, f);
    }
    fputc('"', f);
}

bool ac_graph_dot(FILE *f, Tensor *root, nn_TensorList names) {
    ac_mark m = ac_arena_mark();
    Graph g;
    build(&g, root, names);
    fputs("digraph autograd {\n  node [shape=box, style=filled, fontname=monospace, fontsize=12, height=0.2];\n", f);
    static const char *fill[] = {"darkolivegreen1", "lightgrey", "lightblue"};
    for (int i = 0; i < g.nv; i++) {
        char lab[200];
        snprintf(lab, sizeof lab, "%s%s%s", g.v[i].label[0], g.v[i].label[1][0] ? "\n" : "", g.v[i].label[1]);
        fprintf(f, "  n%d [label=", i);
        dot_string(f, lab);
        fprintf(f, ", fillcolor=%s];\n", fill[g.v[i].kind]);
    }
    for (int k = 0; k < g.ne; k++) fprintf(f, "  n%d -> n%d;\n", g.e[k].from, g.e[k].to);
    fputs("}\n", f);
    ac_arena_release(m);
    return !ferror(f);
}

/* ---- layout ---------------------------------------------------------------------------------------- */

static int cmp_order(const void *a, const void *b, const Vertex *v) {
    double x = v[*(const int *)a].order, y = v[*(const int *)b].order;
    return x < y ? -1 : x > y;
}
static const Vertex *sort_v; /* qsort has no context argument in C11 */
static int cmp_order_q(const void *a, const void *b) { return cmp_order(a, b, sort_v); }

typedef struct {
    int nrank;
    int *count, **row; /* row[r][i]: vertex indices of rank r, left to right */
    int **path;        /* path[k]: the chain of vertices of edge k (from ... to), through dummies */
    int *plen;
} Layout;

/* Ranks: the longest path to the output (a vertex sits above everything it
 * feeds). The edges already form a DAG; Kahn's order from the output down. */
static void assign_ranks(Graph *g) {
    int *pending = zalloc(sizeof(int) * (size_t)g->nv), *queue = alloc(sizeof(int) * (size_t)g->nv);
    for (int k = 0; k < g->ne; k++) pending[g->e[k].from]++; /* consumers not yet ranked */
    int qh = 0, qt = 0;
    for (int i = 0; i < g->nv; i++)
        if (pending[i] == 0) queue[qt++] = i;
    /* edges grouped by their consumer, so that each vertex relaxes its inputs once */
    int *start = zalloc(sizeof(int) * ((size_t)g->nv + 1)), *by_to = alloc(sizeof(int) * (size_t)g->ne);
    for (int k = 0; k < g->ne; k++) start[g->e[k].to + 1]++;
    for (int i = 0; i < g->nv; i++) start[i + 1] += start[i];
    int *fill = zalloc(sizeof(int) * (size_t)g->nv);
    for (int k = 0; k < g->ne; k++) by_to[start[g->e[k].to] + fill[g->e[k].to]++] = k;
    while (qh < qt) {
        int i = queue[qh++];
        for (int s = start[i]; s < start[i + 1]; s++) {
            int from = g->e[by_to[s]].from;
            if (g->v[from].rank < g->v[i].rank + 1) g->v[from].rank = g->v[i].rank + 1;
            if (--pending[from] == 0) queue[qt++] = from;
        }
    }
}

static void layout(Graph *g, Layout *L) {
    assign_ranks(g);
    /* break edges that span several ranks with dummy points */
    int ne = g->ne;
    L->path = alloc(sizeof(int *) * (size_t)ne);
    L->plen = alloc(sizeof(int) * (size_t)ne);
    for (int k = 0; k < ne; k++) {
        int from = g->e[k].from, to = g->e[k].to, span = g->v[from].rank - g->v[to].rank;
        L->plen[k] = span + 1;
        L->path[k] = alloc(sizeof(int) * (size_t)(span + 1));
        L->path[k][0] = from;
        for (int s = 1; s < span; s++) {
            int d = add_vertex(g, V_DUMMY, NULL);
            g->v[d].rank = g->v[from].rank - s;
            L->path[k][s] = d;
        }
        L->path[k][span] = to;
    }
    L->nrank = 0;
    for (int i = 0; i < g->nv; i++) L->nrank = g->v[i].rank + 1 > L->nrank ? g->v[i].rank + 1 : L->nrank;
    L->count = zalloc(sizeof(int) * (size_t)L->nrank);
    L->row = alloc(sizeof(int *) * (size_t)L->nrank);
    for (int i = 0; i < g->nv; i++) L->count[g->v[i].rank]++;
    for (int r = 0; r < L->nrank; r++) {
        L->row[r] = alloc(sizeof(int) * (size_t)L->count[r]);
        L->count[r] = 0;
    }
    for (int i = 0; i < g->nv; i++) { /* discovery order first */
        g->v[i].order = i;
        L->row[g->v[i].rank][L->count[g->v[i].rank]++] = i;
    }
    for (int i = 0; i < g->nv; i++) {
        Vertex *v = &g->v[i];
        int cols = ac_text_columns(v->label[0]), c1 = ac_text_columns(v->label[1]);
        v->w = v->kind == V_DUMMY ? 8 : (cols > c1 ? cols : c1) * SVG_CHAR_W + 16;
    }
    /* barycentre sweeps: order each rank by the mean position of its neighbours
     * in the rank below (downward sweep), then above (upward) */
    double *sum = alloc(sizeof(double) * (size_t)g->nv);
    int *cnt = alloc(sizeof(int) * (size_t)g->nv);
    for (int it = 0; it < 8; it++) {
        bool up = it % 2 == 1;
        for (int i = 0; i < g->nv; i++) sum[i] = 0, cnt[i] = 0;
        for (int k = 0; k < ne; k++)
            for (int s = 0; s + 1 < L->plen[k]; s++) {
                int a = L->path[k][s], b = L->path[k][s + 1]; /* a is one rank above b */
                if (up) sum[b] += g->v[a].order, cnt[b]++;
                else sum[a] += g->v[b].order, cnt[a]++;
            }
        for (int r = 0; r < L->nrank; r++) {
            for (int i = 0; i < L->count[r]; i++) {
                int v = L->row[r][i];
                if (cnt[v]) g->v[v].order = sum[v] / cnt[v] + 1e-6 * i; /* ties keep their order */
            }
            sort_v = g->v;
            qsort(L->row[r], (size_t)L->count[r], sizeof(int), cmp_order_q);
            for (int i = 0; i < L->count[r]; i++) g->v[L->row[r][i]].order = i;
        }
    }
    /* x: pack each rank left to right, then pull every vertex towards the mean x
     * of its neighbours and push apart again, keeping a gap of 16 */
    for (int r = 0; r < L->nrank; r++) {
        double x = 0;
        for (int i = 0; i < L->count[r]; i++) {
            Vertex *v = &g->v[L->row[r][i]];
            v->x = x + v->w / 2;
            x += v->w + 16;
        }
    }
    for (int it = 0; it < 6; it++) {
        for (int i = 0; i < g->nv; i++) sum[i] = 0, cnt[i] = 0;
        for (int k = 0; k < ne; k++)
            for (int s = 0; s + 1 < L->plen[k]; s++) {
                int a = L->path[k][s], b = L->path[k][s + 1];
                sum[a] += g->v[b].x, cnt[a]++;
                sum[b] += g->v[a].x, cnt[b]++;
            }
        for (int r = 0; r < L->nrank; r++) {
            int n = L->count[r];
            for (int i = 0; i < n; i++) {
                Vertex *v = &g->v[L->row[r][i]];
                if (cnt[L->row[r][i]]) v->x = sum[L->row[r][i]] / cnt[L->row[r][i]];
            }
            for (int i = 1; i < n; i++) { /* left to right: no overlap */
                Vertex *a = &g->v[L->row[r][i - 1]], *b = &g->v[L->row[r][i]];
                double min = a->x + a->w / 2 + 16 + b->w / 2;
                if (b->x < min) b->x = min;
            }
            for (int i = n - 2; i >= 0; i--) { /* and back, spreading the shift */
                Vertex *a = &g->v[L->row[r][i]], *b = &g->v[L->row[r][i + 1]];
                double max = b->x - b->w / 2 - 16 - a->w / 2;
                if (a->x > max) a->x = max;
            }
        }
    }
}

#define ROW_H 70.0
#define BOX_H(v) ((v)->label[1][0] ? 34.0 : 22.0)

bool ac_graph_svg(FILE *f, Tensor *root, nn_TensorList names) {
    ac_mark m = ac_arena_mark();
    Graph g;
    build(&g, root, names);
    int ne = g.ne;
    Layout L;
    layout(&g, &L);
    double minx = INFINITY, maxx = -INFINITY;
    for (int i = 0; i < g.nv; i++) {
        minx = fmin(minx, g.v[i].x - g.v[i].w / 2);
        maxx = fmax(maxx, g.v[i].x + g.v[i].w / 2);
    }
    double shift = 20 - minx, width = maxx - minx + 40, height = L.nrank * ROW_H + 10 + 30; /* + the legend */
    static const char *const kinds[] = {"the output", "an op (its grad_fn)", "a leaf that requires grad"};
    double legend_w = 20;
    for (int k = 0; k < 3; k++) legend_w += 18 + ac_text_columns(kinds[k]) * SVG_CHAR_W + 16;
    if (legend_w > width) shift += (legend_w - width) / 2, width = legend_w;
    for (int i = 0; i < g.nv; i++) g.v[i].x += shift;
#define VY(v) (20 + (L.nrank - 1 - (v)->rank) * ROW_H) /* top of a box: inputs at the top */
    static const char *fill[] = {"#caff70", "#d3d3d3", "#add8e6"}; /* torchviz's: output, op, leaf */
    svg_begin(f, width, height);
    /* edges first, under the boxes: from the bottom of the input to the top of its user */
    for (int k = 0; k < ne; k++) {
        fputs("<path fill=\"none\" stroke=\"#555555\" stroke-width=\"1.2\" d=\"", f);
        for (int s = 0; s < L.plen[k]; s++) {
            const Vertex *v = &g.v[L.path[k][s]];
            double yt = VY(v), yb = v->kind == V_DUMMY ? yt + 22 : yt + BOX_H(v);
            if (s == 0) fprintf(f, "M%.1f %.1f", v->x, yb);
            else {
                const Vertex *p = &g.v[L.path[k][s - 1]];
                double py = p->kind == V_DUMMY ? VY(p) + 22 : VY(p) + BOX_H(p);
                double mid = (py + yt) / 2;
                fprintf(f, "C%.1f %.1f %.1f %.1f %.1f %.1f", p->x, mid, v->x, mid, v->x, yt - (s + 1 == L.plen[k] ? 6 : 0));
                if (v->kind == V_DUMMY) fprintf(f, "L%.1f %.1f", v->x, yb);
            }
        }
        fputs("\"/>\n", f);
        const Vertex *t = &g.v[L.path[k][L.plen[k] - 1]];
        double ty = VY(t);
        fprintf(f, "<path d=\"M%.1f %.1fl-4 -7h8z\" fill=\"#555555\"/>\n", t->x, ty);
    }
    for (int i = 0; i < g.nv; i++) {
        const Vertex *v = &g.v[i];
        if (v->kind == V_DUMMY) continue;
        double y = VY(v), h = BOX_H(v);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"3\" fill=\"%s\" stroke=\"#333333\"/>\n",
                v->x - v->w / 2, y, v->w, h, fill[v->kind]);
        svg_text(f, v->x, y + 15, "middle", NULL, v->label[0]);
        if (v->label[1][0]) svg_text(f, v->x, y + 28, "middle", NULL, v->label[1]);
    }
    /* what the colours mean, under the graph (swatches without rx: not boxes of the graph) */
    double lx = 20, ly = L.nrank * ROW_H + 14;
    for (int k = 0; k < 3; k++) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#333333\"/>\n", lx, ly,
                fill[k]);
        svg_text(f, lx + 18, ly + 10, "start", NULL, kinds[k]);
        lx += 18 + ac_text_columns(kinds[k]) * SVG_CHAR_W + 16;
    }
#undef VY
    svg_end(f);
    ac_arena_release(m);
    return !ferror(f);
}
