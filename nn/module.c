/* nn_Module: named parameters, buffers and submodules in registration order,
 * and what PyTorch's nn.Module does with them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

static void *grow(void *arr, int n, size_t elem) { return ac_realloc(arr, ac_size_mul((size_t)n + 1, elem)); }

Tensor *nn_Parameter(Tensor *data) {
    ac_check_defined(data, "Parameter");
    Tensor *p = ac_persist(data);
    torch_requires_grad_(p, true);
    p->is_param = true;
    return p;
}

void nn_module_init(nn_Module *m, const char *type, nn_forward_fn forward) {
    memset(m, 0, sizeof *m);
    m->magic = NN_MODULE_MAGIC;
    m->type = type;
    m->training = true;
    m->forward = forward;
}

void *nn_module_new(size_t size, const char *type, nn_forward_fn forward) {
    if (size < sizeof(nn_Module)) ac_error("nn_module_new: %zu bytes cannot hold an nn_Module (%zu)", size, sizeof(nn_Module));
    nn_Module *m = ac_calloc(1, size);
    nn_module_init(m, type, forward);
    m->owned = true;
    return m;
}

static void check_module(const nn_Module *m, const char *op) {
    if (m->magic != NN_MODULE_MAGIC)
        ac_error("%s: this is not a module: initialise it with nn_module_new or nn_module_init (or it was freed already)", op);
}

static Tensor *add_param(nn_Module *m, const char *name, Tensor *p) {
    m->params = grow(m->params, m->n_params, sizeof *m->params);
    m->params[m->n_params++] = (nn_Named){ac_strdup(name), p};
    return p;
}

Tensor *nn_register_parameter(nn_Module *m, const char *name, Tensor *data) { return add_param(m, name, nn_Parameter(data)); }

Tensor *nn_register_parameter_empty(nn_Module *m, const char *name, int ndim, const int64_t *shape) {
    /* PyTorch's meta device: the shape alone, over one zero (every stride 0), no memory of its size */
    if (ndim < 1 || ndim > AC_MAX_DIMS) ac_error("nn_register_parameter_empty: %d dimensions", ndim);
    Tensor *p = ac_persist_zeros(AC_FLOAT32, 1, (int64_t[]){1});
    p->ndim = ndim;
    for (int d = 0; d < ndim; d++) p->shape[d] = shape[d], p->stride[d] = 0;
    torch_requires_grad_(p, true);
    p->is_param = true;
    return add_param(m, name, p);
}

static _Thread_local bool skip_init;
bool nn_set_skip_init(bool skip) {
    bool prev = skip_init;
    skip_init = skip;
    return prev;
}
bool nn_skip_init(void) { return skip_init; }

Tensor *nn_register_buffer(nn_Module *m, const char *name, Tensor *data) { return nn_adopt_buffer(m, name, ac_persist(data)); }

Tensor *nn_adopt_buffer(nn_Module *m, const char *name, Tensor *b) {
    if (!b || !b->persistent) ac_error("nn_adopt_buffer: %s must be a ac_persist tensor", name);
    m->buffers = grow(m->buffers, m->n_buffers, sizeof *m->buffers);
    m->buffers[m->n_buffers++] = (nn_Named){ac_strdup(name), b};
    return b;
}

nn_Module *nn_register_module(nn_Module *m, const char *name, nn_Module *child) {
    check_module(m, "register_module");
    check_module(child, "register_module");
    m->children = grow(m->children, m->n_children, sizeof *m->children);
    m->children[m->n_children++] = (nn_Child){ac_strdup(name), child};
    return child;
}

Tensor *nn_forward(nn_Module *m, Tensor *x) {
    if (!m->forward) ac_error("nn_forward: %s has no one-input forward", m->type);
    return m->forward(m, x);
}

static int child_index(nn_Module *m, const char *name) {
    for (int i = 0; i < m->n_children; i++)
        if (strcmp(m->children[i].name, name) == 0) return i;
    return -1;
}

nn_Module *nn_get_submodule(nn_Module *m, const char *name) {
    check_module(m, "get_submodule");
    int i = child_index(m, name);
    if (i < 0) ac_raise(AC_RUNTIME_ERROR, "'%s' object has no attribute '%s'", m->type, name); /* AttributeError */
    return m->children[i].m;
}

/* self.W_query(x): the child registered under that name now, which replace_linear_with_lora may
 * have swapped for a LinearWithLoRA (a lookup among a handful of names, once per call) */
Tensor *nn_call(nn_Module *m, const char *name, Tensor *x) { return nn_forward(nn_get_submodule(m, name), x); }

static bool contains(nn_Module *tree, nn_Module *m) {
    if (tree == m) return true;
    for (int i = 0; i < tree->n_children; i++)
        if (contains(tree->children[i].m, m)) return true;
    return false;
}

nn_Module *nn_setattr(nn_Module *m, const char *name, nn_Module *child) {
    check_module(m, "setattr");
    check_module(child, "setattr");
    int i = child_index(m, name);
    if (i < 0) return nn_register_module(m, name, child);
    nn_Module *old = m->children[i].m;
    m->children[i].m = child;                   /* the same place in registration order, as PyTorch's _modules */
    if (!contains(child, old)) nn_free(old);    /* nothing holds the old one any more: Python's GC would drop it */
    return child;
}

void nn_requires_grad_(nn_Module *m, bool requires_grad) {
    check_module(m, "requires_grad_");
    for (int i = 0; i < m->n_params; i++) torch_requires_grad_(m->params[i].t, requires_grad);
    for (int i = 0; i < m->n_children; i++) nn_requires_grad_(m->children[i].m, requires_grad);
}

/* a walk of the tree, no names made: GPTModel's forward asks it of each block */
int64_t nn_num_trainable_parameters(nn_Module *m) {
    check_module(m, "num_trainable_parameters");
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].t->requires_grad) n += torch_numel(m->params[i].t);
    for (int i = 0; i < m->n_children; i++) n += nn_num_trainable_parameters(m->children[i].m);
    return n;
}

/* named_modules() order: the module itself, then each child depth-first. */
typedef struct { int n; size_t ncap, tcap; const char **names; Tensor **tensors; } List;

static void add(List *l, const char *prefix, const char *name, Tensor *t) {
    size_t n = (size_t)l->n;
    l->names = ac_arena_grow(l->names, n, &l->ncap, n + 1, sizeof(char *));
    l->tensors = ac_arena_grow(l->tensors, n, &l->tcap, n + 1, sizeof(Tensor *));
    size_t len = strlen(prefix) + strlen(name) + 1;
    char *full = ac_arena_alloc(len);
    snprintf(full, len, "%s%s", prefix, name);
    l->names[l->n] = full;
    l->tensors[l->n++] = t;
}

static void walk(nn_Module *m, const char *prefix, List *l, bool params, bool buffers) {
    /* PyTorch's state_dict(): per module, its parameters then its buffers; then children */
    if (params)
        for (int i = 0; i < m->n_params; i++) add(l, prefix, m->params[i].name, m->params[i].t);
    if (buffers)
        for (int i = 0; i < m->n_buffers; i++) add(l, prefix, m->buffers[i].name, m->buffers[i].t);
    for (int i = 0; i < m->n_children; i++) {
        size_t len = strlen(prefix) + strlen(m->children[i].name) + 2;
        char *p = ac_arena_alloc(len);
        snprintf(p, len, "%s%s.", prefix, m->children[i].name);
        walk(m->children[i].m, p, l, params, buffers);
    }
}

static nn_TensorList collect(nn_Module *m, bool buffers) {
    List l = {0};
    walk(m, "", &l, true, buffers);
    return (nn_TensorList){l.n, l.names, l.tensors};
}

nn_TensorList nn_named_parameters(nn_Module *m) { return collect(m, false); }
nn_TensorList nn_state_dict(nn_Module *m) { return collect(m, true); }

int64_t nn_num_parameters(nn_Module *m) {
    ac_mark mk = ac_arena_mark();
    nn_TensorList l = nn_named_parameters(m);
    int64_t n = 0;
    for (int i = 0; i < l.n; i++) n += torch_numel(l.tensors[i]);
    ac_arena_release(mk);
    return n;
}

void nn_zero_grad(nn_Module *m) {
    for (int i = 0; i < m->n_params; i++) torch_zero_grad_(m->params[i].t);
    for (int i = 0; i < m->n_children; i++) nn_zero_grad(m->children[i].m);
}

void nn_train(nn_Module *m, bool mode) {
    m->training = mode;
    for (int i = 0; i < m->n_children; i++) nn_train(m->children[i].m, mode);
}

void nn_eval(nn_Module *m) { nn_train(m, false); }

void nn_free(nn_Module *m) {
    if (!m) return;
    check_module(m, "nn_free");
    for (int i = 0; i < m->n_params; i++) {
        ac_free(m->params[i].t);
        free(m->params[i].name);
    }
    for (int i = 0; i < m->n_buffers; i++) {
        ac_free(m->buffers[i].t);
        free(m->buffers[i].name);
    }
    for (int i = 0; i < m->n_children; i++) {
        nn_free(m->children[i].m);
        free(m->children[i].name);
    }
    free(m->params);
    free(m->buffers);
    free(m->children);
    m->magic = 0; /* a second nn_free of a struct you own is an error, not a double free */
    if (m->owned) free(m); /* every module struct starts with its nn_Module */
}

/* ---- ModuleList ---------------------------------------------------------------------- */

nn_ModuleList *nn_ModuleList_new(void) {
    nn_ModuleList *l = nn_module_new(sizeof *l, "ModuleList", NULL);
    return l;
}

void nn_ModuleList_append(nn_ModuleList *self, nn_Module *m) {
    char name[24];
    snprintf(name, sizeof name, "%d", self->module.n_children);
    nn_register_module(&self->module, name, m);
}

int nn_ModuleList_len(nn_ModuleList *self) { return self->module.n_children; }

nn_Module *nn_ModuleList_get(nn_ModuleList *self, int i) {
    int n = self->module.n_children;
    if (i < -n || i >= n) ac_raise(AC_INDEX_ERROR, "ModuleList: index %d is out of range (len %d)", i, n);
    return self->module.children[i < 0 ? i + n : i].m;
}

/* ---- Sequential ------------------------------------------------------------------------ */

static Tensor *sequential_fwd(nn_Module *m, Tensor *x) { return nn_Sequential_forward((nn_Sequential *)m, x); }

nn_Sequential *nn_Sequential_new(int n, nn_Module *const *modules) {
    for (int i = 0; i < n; i++) {
        check_module(modules[i], "Sequential");
        if (!modules[i]->forward)
            ac_raise(AC_TYPE_ERROR, "Sequential: module %d (%s) has no one-input forward", i, modules[i]->type);
    }
    nn_Sequential *s = nn_module_new(sizeof *s, "Sequential", sequential_fwd);
    for (int i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "%d", i);
        nn_register_module(&s->module, name, modules[i]);
    }
    return s;
}

Tensor *nn_Sequential_forward(nn_Sequential *self, Tensor *x) { /* for module in self: input = module(input) */
    for (int i = 0; i < self->module.n_children; i++) x = nn_forward(self->module.children[i].m, x);
    return x;
}

nn_Module *nn_Sequential_get(nn_Sequential *self, int i) {
    int n = self->module.n_children;
    if (i < -n || i >= n) ac_raise(AC_INDEX_ERROR, "Sequential: index %d is out of range", i);
    return self->module.children[i < 0 ? i + n : i].m;
}
