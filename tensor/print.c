/* print(tensor) exactly as PyTorch 1.13 prints it (torch/_tensor_str.py with
 * the default options but sci_mode, which torch_set_printoptions_sci_mode sets; spec Part 2): one formatter for the whole tensor, 80
 * columns, summarising above 1000 elements, then the grad_fn / requires_grad
 * suffixes. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define LINEWIDTH 80
#define EDGE 3
#define THRESHOLD 1000

/* torch.set_printoptions(sci_mode=...): PRINT_OPTS.sci_mode, process-wide */
static _Atomic int sci_mode_opt = TORCH_SCI_MODE_NONE;

void torch_set_printoptions_sci_mode(torch_sci_mode mode) {
    if (mode != TORCH_SCI_MODE_NONE && mode != TORCH_SCI_MODE_FALSE && mode != TORCH_SCI_MODE_TRUE)
        ac_raise(AC_TYPE_ERROR, "set_printoptions: sci_mode must be None, False or True (got %d)", (int)mode);
    sci_mode_opt = mode;
}

typedef struct { char *s; size_t n, cap; } Buf;

static void put(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->s = ac_arena_grow(b->s, b->n ? b->n + 1 : 0, &b->cap, b->n + n + 1, 1);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }
static void spaces(Buf *b, int n) { for (int i = 0; i < n; i++) put(b, " ", 1); }

typedef struct {
    ac_dtype dtype;
    bool int_mode, sci;
    int width;
} Fmt;

static double value_at(const Tensor *t, int64_t off) { return ac_element_at(t, off); }
static bool floating(ac_dtype d) { return d == AC_FLOAT32 || d == AC_FLOAT64 || d == AC_BFLOAT16; }

/* Element text before right-alignment. */
static int elem_text(const Fmt *f, double v, char *out, size_t cap) {
    if (f->dtype == AC_BOOL) return snprintf(out, cap, "%s", v != 0 ? "True" : "False");
    if (!floating(f->dtype)) return snprintf(out, cap, "%lld", (long long)v);
    if (isnan(v)) return snprintf(out, cap, "nan");   /* never glibc's "-nan" */
    if (isinf(v)) return snprintf(out, cap, v > 0 ? "inf" : "-inf");
    if (f->sci) return snprintf(out, cap, "%.4e", v);
    if (f->int_mode) return snprintf(out, cap, "%.0f.", v);
    return snprintf(out, cap, "%.4f", v);
}

/* Collect the values that decide the format: all of them, or when summarising
 * only those that will be shown (first and last EDGE of every long dim). */
typedef struct { double *v; size_t n, cap; } Vals;
static void push_val(Vals *vs, double x) {
    vs->v = ac_arena_grow(vs->v, vs->n, &vs->cap, vs->n + 1, sizeof(double));
    vs->v[vs->n++] = x;
}
static void collect(const Tensor *t, int dim, int64_t off, bool summarize, Vals *vs) {
    if (t->ndim == 0) { push_val(vs, value_at(t, off)); return; }
    int64_t n = t->shape[dim];
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
        int64_t o = off + i * t->stride[dim];
        if (dim == t->ndim - 1) push_val(vs, value_at(t, o));
        else collect(t, dim + 1, o, summarize, vs);
    }
}

static Fmt make_fmt(const Tensor *t, bool summarize) {
    Fmt f = {t->dtype, true, false, 1};
    Vals vs = {0};
    collect(t, 0, t->offset, summarize, &vs);
    char tmp[64];
    if (!floating(t->dtype)) {
        for (int64_t i = 0; i < (int64_t)vs.n; i++) {
            int w = elem_text(&f, vs.v[i], tmp, sizeof tmp);
            if (w > f.width) f.width = w;
        }
        return f;
    }
    double mn = INFINITY, mx = 0;
    int64_t nnz = 0;
    for (int64_t i = 0; i < (int64_t)vs.n; i++) {
        double v = vs.v[i];
        if (!isfinite(v) || v == 0.0) continue;
        nnz++;
        double a = fabs(v);
        if (a < mn) mn = a;
        if (a > mx) mx = a;
        if (v != ceil(v)) f.int_mode = false;
    }
    if (nnz > 0) {
        f.sci = mx / mn > 1000.0 || mx > 1.0e8 || (!f.int_mode && mn < 1.0e-4);
        for (int64_t i = 0; i < (int64_t)vs.n; i++) {
            double v = vs.v[i];
            if (!isfinite(v) || v == 0.0) continue;
            int w = f.sci ? snprintf(tmp, sizeof tmp, "%.4e", v)
                  : f.int_mode ? snprintf(tmp, sizeof tmp, "%.0f", v) + 1
                               : snprintf(tmp, sizeof tmp, "%.4f", v);
            if (w > f.width) f.width = w;
        }
        /* _Formatter: the width is the one chosen above; only then does the option decide */
        int opt = sci_mode_opt;
        if (opt != TORCH_SCI_MODE_NONE) f.sci = opt == TORCH_SCI_MODE_TRUE;
    }
    return f;
}

static void put_elem(Buf *b, const Fmt *f, double v) {
    char tmp[64];
    int w = elem_text(f, v, tmp, sizeof tmp);
    spaces(b, f->width - w);
    put(b, tmp, (size_t)w);
}

static void vector_str(Buf *b, const Tensor *t, int64_t off, int indent, bool summarize, const Fmt *f) {
    int d = t->ndim - 1;
    int64_t n = t->shape[d];
    int per_line = (LINEWIDTH - indent) / (f->width + 2);
    if (per_line < 1) per_line = 1;
    puts_(b, "[");
    int on_line = 0;
    for (int64_t i = 0; i < n; i++) {
        bool marker = summarize && n > 2 * EDGE && i == EDGE;
        if (i > 0) {
            if (on_line == per_line) {
                puts_(b, ",\n");
                spaces(b, indent + 1);
                on_line = 0;
            } else {
                puts_(b, ", ");
            }
        }
        if (marker) {
            puts_(b, " ...");
            i = n - EDGE - 1;
        } else {
            put_elem(b, f, value_at(t, off + i * t->stride[d]));
        }
        on_line++;
    }
    puts_(b, "]");
}

static void tensor_str(Buf *b, const Tensor *t, int dim, int64_t off, int indent, bool summarize, const Fmt *f) {
    if (t->ndim == 0) { put_elem(b, f, value_at(t, off)); return; }
    if (dim == t->ndim - 1) { vector_str(b, t, off, indent, summarize, f); return; }
    int64_t n = t->shape[dim];
    int rest = t->ndim - dim; /* dimensions of this sub-tensor */
    puts_(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i > 0) {
            puts_(b, ",");
            for (int k = 0; k < rest - 1; k++) puts_(b, "\n");
            spaces(b, indent + 1);
        }
        if (summarize && n > 2 * EDGE && i == EDGE) {
            puts_(b, "...");
            i = n - EDGE - 1;
            continue;
        }
        tensor_str(b, t, dim + 1, off + i * t->stride[dim], indent + 1, summarize, f);
    }
    puts_(b, "]");
}

static void add_suffix(Buf *b, size_t *last_len, const char *suf) {
    size_t n = strlen(suf);
    if (*last_len + n + 2 > LINEWIDTH) {
        puts_(b, ",\n");
        spaces(b, 7);
        *last_len = 7 + n;
    } else {
        puts_(b, ", ");
        *last_len += n + 2;
    }
    puts_(b, suf);
}

static char *to_arena(Buf *b) { return b->s ? b->s : memset(ac_arena_alloc(1), 0, 1); }

char *torch_repr(const Tensor *t) {
    ac_check_defined(t, "print");
    Buf b = {0};
    if (t->is_param) puts_(&b, "Parameter containing:\n");
    size_t start = b.n;
    puts_(&b, "tensor(");
    int64_t n = torch_numel(t);
    char sufs[4][96];
    int ns = 0;
    if (n == 0) {
        puts_(&b, "[]");
        if (t->ndim != 1) {
            int k = snprintf(sufs[ns], sizeof sufs[ns], "size=(");
            for (int i = 0; i < t->ndim; i++)
                k += snprintf(sufs[ns] + k, sizeof sufs[ns] - (size_t)k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
            snprintf(sufs[ns] + k, sizeof sufs[ns] - (size_t)k, t->ndim == 1 ? ",)" : ")");
            ns++;
        }
    } else {
        bool summarize = n > THRESHOLD;
        Fmt f = make_fmt(t, summarize);
        tensor_str(&b, t, 0, t->offset, 7, summarize, &f);
    }
    /* dtype=... for dtypes other than the defaults; empty tensors show it even for int64 and bool */
    static const char *const torch_names[] = {"float32", "int64", "bool", "float64", "int32", "bfloat16"};
    if (t->dtype == AC_FLOAT64 || t->dtype == AC_INT32 || t->dtype == AC_BFLOAT16 || (n == 0 && t->dtype != AC_FLOAT32))
        snprintf(sufs[ns++], sizeof sufs[0], "dtype=torch.%s", torch_names[t->dtype]);
    if (t->grad_fn) snprintf(sufs[ns++], sizeof sufs[0], "grad_fn=<%s>", torch_grad_fn_name(t));
    else if (t->requires_grad) snprintf(sufs[ns++], sizeof sufs[0], "requires_grad=True");
    const char *nl = strrchr(b.s + start, '\n');
    size_t last_len = nl ? (size_t)(b.s + b.n - nl) + 1 : b.n - start + 2;
    for (int i = 0; i < ns; i++) add_suffix(&b, &last_len, sufs[i]);
    puts_(&b, ")");
    return to_arena(&b);
}

void torch_fprint(FILE *f, const Tensor *t) {
    ac_mark m = ac_arena_mark();
    fprintf(f, "%s\n", torch_repr(t));
    ac_arena_release(m);
}

void torch_print(const Tensor *t) { torch_fprint(stdout, t); }

char *torch_size_str(const Tensor *t) {
    ac_check_defined(t, "size");
    Buf b = {0};
    puts_(&b, "torch.Size([");
    char tmp[32];
    for (int i = 0; i < t->ndim; i++) {
        snprintf(tmp, sizeof tmp, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        puts_(&b, tmp);
    }
    puts_(&b, "])");
    return to_arena(&b);
}

const char *torch_dtype_str(ac_dtype dtype) {
    static const char *const names[] = {"torch.float32", "torch.int64", "torch.bool", "torch.float64", "torch.int32",
                                         "torch.bfloat16"};
    if ((int)dtype < 0 || (int)dtype > AC_BFLOAT16) ac_error("dtype: unknown dtype %d", (int)dtype);
    return names[dtype];
}

void torch_print_shape(const Tensor *t) {
    ac_mark m = ac_arena_mark();
    printf("%s\n", torch_size_str(t));
    ac_arena_release(m);
}
