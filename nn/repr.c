/* repr(module): nn.Module.__repr__ of PyTorch 1.13, for print(model).
 *
 *     def __repr__(self):
 *         extra_lines = self.extra_repr().split('\n') if self.extra_repr() else []
 *         child_lines = ['(' + key + '): ' + _addindent(repr(module), 2)
 *                        for key, module in self._modules.items()]
 *         lines = extra_lines + child_lines
 *         main_str = self._get_name() + '('
 *         if lines:
 *             if len(extra_lines) == 1 and not child_lines: main_str += extra_lines[0]
 *             else: main_str += '\n  ' + '\n  '.join(lines) + '\n'
 *         return main_str + ')' */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"

typedef struct { char *s; size_t n, cap; } Buf;

static void put(Buf *b, const char *s, size_t n) {
    b->s = ac_arena_grow(b->s, b->n, &b->cap, b->n + n + 1, 1);
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

char *nn_repr_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ac_arena_alloc((size_t)(n > 0 ? n : 0) + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* _addindent(s, 2): every line after the first, two spaces in */
static void put_indented(Buf *b, const char *s) {
    for (const char *p = s; *p; p++) {
        put(b, p, 1);
        if (*p == '\n') puts_(b, "  ");
    }
}

char *nn_module_repr(nn_Module *m) {
    if (!m || m->magic != NN_MODULE_MAGIC)
        ac_error("repr: this is not a module: initialise it with nn_module_new or nn_module_init (or it was freed already)");
    Buf b = {0};
    puts_(&b, m->type);
    puts_(&b, "(");
    char *extra = m->extra_repr ? m->extra_repr(m) : NULL;
    bool has_extra = extra && *extra;
    if (has_extra && m->n_children == 0 && !strchr(extra, '\n')) {
        puts_(&b, extra);
    } else if (has_extra || m->n_children > 0) {
        if (has_extra) {
            puts_(&b, "\n  ");
            put_indented(&b, extra); /* its lines, each a line of the list */
        }
        for (int i = 0; i < m->n_children; i++) {
            puts_(&b, "\n  (");
            puts_(&b, m->children[i].name);
            puts_(&b, "): ");
            put_indented(&b, nn_module_repr(m->children[i].m));
        }
        puts_(&b, "\n");
    }
    puts_(&b, ")");
    return b.s;
}

void nn_print(nn_Module *m) {
    ac_mark mk = ac_arena_mark();
    printf("%s\n", nn_module_repr(m));
    ac_arena_release(mk);
}
