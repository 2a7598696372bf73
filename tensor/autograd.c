/* The reverse-mode engine, micrograd-style: each op records a Node with its
 * inputs; backward() orders the graph topologically (iteratively: a graph
 * 100,000 nodes deep must not overflow the C stack), then sweeps it in reverse,
 * each node adding (+=) its inputs' gradients. Leaves keep .grad across calls
 * (gradients accumulate until zeroed, as in PyTorch); non-leaf gradients live
 * only during the sweep. */
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "internal.h"

/* Grad mode is per thread, as PyTorch's thread-local GradMode. */
static _Thread_local bool grad_enabled = true;
static _Thread_local uint32_t generation;
/* The node whose backward runs on this thread (NULL outside a backward). */
static _Thread_local Node *running;
/* torch.autograd.grad: the inputs whose gradients a sweep captures (instead of
 * writing any leaf's .grad), and the sums so far; n 0 outside such a sweep. */
typedef struct { int n; Tensor **inputs, **grads; } Capture;
static _Thread_local Capture capture;

bool torch_is_grad_enabled(void) { return grad_enabled; }
bool torch_set_grad_enabled(bool enabled) {
    bool prev = grad_enabled;
    grad_enabled = enabled;
    return prev;
}

/* The library's own no-grad sections (backward, optimizer steps, ...) are
 * tracked, so that an error raised inside one, whose handler longjmps out,
 * does not leave grad mode off behind the program's back. */
static _Thread_local int internal_depth;
static _Thread_local bool user_mode;

static void autograd_recover(void);
static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static void register_hook(void) { ac_on_error(autograd_recover); }

bool torch_no_grad_enter(void) {
    pthread_once(&hook_once, register_hook);
    if (internal_depth++ == 0) user_mode = grad_enabled;
    bool prev = grad_enabled;
    grad_enabled = false;
    return prev;
}

void torch_no_grad_exit(bool prev) {
    grad_enabled = prev;
    if (internal_depth > 0) internal_depth--;
}

/* after an error: back to the user's grad mode, no backward running */
static void autograd_recover(void) {
    if (internal_depth > 0) grad_enabled = user_mode;
    internal_depth = 0;
    running = NULL;
    capture.n = 0;
    ac_gbuf_abort();
}

const char *torch_grad_fn_name(const Tensor *t) {
    if (t) ac_check_live(t, "grad_fn");
    return t && t->grad_fn ? t->grad_fn->name : NULL;
}

/* extend.h: the graph, read only */
const char *ac_grad_fn_name(const Node *fn) { return fn ? fn->name : NULL; }
int ac_grad_fn_inputs(const Node *fn) { return fn ? fn->n_inputs : 0; }
static bool edge_ok(const Node *fn, int k) { return fn && k >= 0 && k < fn->n_inputs; }
Tensor *ac_grad_fn_input(const Node *fn, int k) { return edge_ok(fn, k) ? fn->inputs[k] : NULL; }
Node *ac_grad_fn_next(const Node *fn, int k) { return edge_ok(fn, k) ? fn->next[k] : NULL; }
bool ac_grad_fn_needs(const Node *fn, int k) { return edge_ok(fn, k) && fn->needs[k]; }


static int input_slot(const Node *n, const Tensor *t) {
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] == t) return k;
    return -1;
}

bool ac_needs_grad(const Tensor *t) {
    if (!t) return false;
    if (running) {
        int k = input_slot(running, t);
        if (k >= 0) return running->needs[k];
    }
    return t->requires_grad;
}

/* Nodes are numbered as PyTorch numbers them (sequence_nr, per thread), for backward's order. */
static _Thread_local uint64_t sequence_nr;

Node *ac_node(const char *name, ac_backward_fn fn, Tensor *out, int n, Tensor **inputs) {
    if (!grad_enabled) return NULL;
    bool any = false;
    for (int i = 0; i < n; i++) any = any || (inputs[i] && inputs[i]->requires_grad);
    if (!any) return NULL;
    Node *node = ac_arena_alloc(sizeof(Node));
    memset(node, 0, sizeof *node);
    node->seq = ++sequence_nr;
    node->name = name;
    node->backward = fn;
    node->n_inputs = n;
    size_t slots = (size_t)(n ? n : 1);
    node->inputs = ac_arena_alloc(sizeof(Tensor *) * slots);
    node->next = ac_arena_alloc(sizeof(Node *) * slots);
    node->needs = ac_arena_alloc(sizeof(bool) * slots);
    for (int i = 0; i < n; i++) {
        node->inputs[i] = inputs[i];
        node->needs[i] = inputs[i] && inputs[i]->requires_grad;
        node->next[i] = node->needs[i] ? inputs[i]->grad_fn : NULL;
    }
    node->out = out;
    out->grad_fn = node;
    out->requires_grad = true;
    return node;
}

/* A leaf's gradient buffer, made when its first gradient arrives (as PyTorch makes .grad then, so
 * a frozen weight costs no memory). It shares the leaf's lifetime: persistent leaves get a
 * persistent buffer, arena leaves one in the arena. */
static Tensor *leaf_gradbuf(Tensor *t) {
    TensorImpl *ti = ac_impl(t);
    if (!ti->gradbuf) {
        if (t->persistent) {
            ti->gradbuf = ac_persist_zeros(AC_FLOAT32, t->ndim, t->shape);
        } else {
            bool was = ac_gbuf_suspend(); /* made in a backward, and kept */
            ti->gradbuf = ac_new_zeros(AC_FLOAT32, t->ndim, t->shape);
            ac_gbuf_resume(was);
        }
    }
    return ti->gradbuf;
}

Tensor *torch_requires_grad_(Tensor *t, bool requires_grad) {
    ac_check_defined(t, "requires_grad_");
    if (t->grad_fn) {
        if (!requires_grad)
            ac_error("requires_grad_: you can only change requires_grad flags of leaf variables. "
                     "If you want to use a computed variable in a subgraph that doesn't require "
                     "differentiation use var_no_grad = var.detach().");
        return t;
    }
    if (requires_grad && t->dtype != AC_FLOAT32)
        ac_error("requires_grad_: only Tensors of floating point dtype can require gradients (got %s)",
                 ac_dtype_name(t->dtype));
    /* A parameter's .grad storage comes with its first gradient (leaf_gradbuf), so a frozen weight costs
     * nothing; an arena leaf's is made now, before the backward whose arena use stays flat. */
    if (requires_grad && !t->persistent) leaf_gradbuf(t);
    t->requires_grad = requires_grad;
    return t;
}


static void zero_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    memset((float *)ctx + i0, 0, sizeof(float) * (size_t)(i1 - i0));
}

void ac_zero_floats(float *p, int64_t n) { ac_parallel_for(n, 1 << 18, zero_task, p); /* 1 MB a piece */ }

void torch_zero_grad_(Tensor *t) {
    if (t) ac_check_live(t, "zero_grad_");
    if (t && t->grad) ac_zero_floats(t->grad->data, torch_numel(t->grad));
}

typedef struct { float *dst; const float *src, *a; } AddJob;
static void add_task(void *ctx, int64_t i0, int64_t i1, int chunk) {
    const AddJob *j = ctx;
    const float *a = j->a ? j->a : j->dst;
    for (int64_t i = i0; i < i1; i++) j->dst[i] = a[i] + j->src[i];
}

/* dst = (a ? a : dst) + src, split among threads for large gradients */
static void add_into(float *dst, const float *src, int64_t n) {
    AddJob j = {dst, src, NULL};
    ac_parallel_for(n, AC_GRAIN, add_task, &j);
}

void ac_add_into(float *dst, const float *src, int64_t n) { add_into(dst, src, n); }

int64_t ac_pieces_from = (int64_t)4 << 20, ac_piece_floats = (int64_t)1 << 20; /* 16 MB and more, in 4 MB pieces */

float *ac_leaf_grad(Tensor *x, bool *add) {
    int k = x && running ? input_slot(running, x) : -1;
    if (k < 0 || !running->needs[k] || running->next[k]) return NULL;
    Tensor *buf = leaf_gradbuf(x);
    if (x->grad && x->grad != buf) return NULL; /* a .grad someone set: the engine adds to it as a whole */
    *add = x->grad != NULL;
    x->grad = buf;
    return x->grad->data;
}

/* Called by the running node's backward for one of its inputs: a leaf's .grad
 * += g; otherwise g is added to the buffer of the node that made the input. */
static void accum(Tensor *x, Tensor *g, bool owned);
/* An owned gradient's elements in order, to add into; NULL when it is not
 * owned or is a view whose elements are not in order (a transposed one). */
static float *writable(Tensor *t, bool owned) {
    return owned && ac_grad_reuse && torch_is_contiguous(t) ? (float *)t->data + t->offset : NULL;
}

bool ac_grad_reuse = true;
Tensor *torch_grad_take(Tensor *t) {
    ac_check_defined(t, "grad_take");
    Tensor *g = t->grad;
    t->grad = NULL;
    TensorImpl *ti = ac_impl(t);
    if (g && g == ti->gradbuf) ti->gradbuf = NULL; /* a new buffer at the next backward */
    return g;
}

void ac_accum(Tensor *x, Tensor *g) { accum(x, g, false); }
void ac_accum_new(Tensor *x, Tensor *g) { accum(x, g, true); }
void ac_accum_pass(Node *n, Tensor *x, Tensor *g) { accum(x, g, n->bgrad_owned); }

Tensor *ac_accum_target(Tensor *x) {
    int k = x && running && ac_grad_reuse ? input_slot(running, x) : -1;
    Node *fn = k >= 0 && running->needs[k] ? running->next[k] : NULL;
    if (!fn || !fn->bgrad || !fn->bgrad_owned) return NULL;
    Tensor *b = fn->bgrad;
    return b->offset == 0 && torch_is_contiguous(b) && torch_numel(b) == torch_numel(x) ? b : NULL;
}

Tensor *ac_grad_out(Node *n, Tensor *g) {
    return n->bgrad_owned && ac_grad_reuse && g->dtype == AC_FLOAT32 && g->offset == 0 && torch_is_contiguous(g)
               ? g : ac_new_like(g);
}

/* The captured gradient of x += g (a copy: g may be written into later), if x was asked for. */
static void capture_add(const Tensor *x, Tensor *g) {
    for (int i = 0; i < capture.n; i++) {
        if (capture.inputs[i] != x) continue;
        Tensor *c = capture.grads[i];
        if (!c) {
            c = capture.grads[i] = ac_new(AC_FLOAT32, x->ndim, x->shape);
            memcpy(c->data, ac_cdata(g), sizeof(float) * (size_t)torch_numel(x));
        } else {
            add_into(c->data, ac_cdata(g), torch_numel(x));
        }
    }
}

static void accum(Tensor *x, Tensor *g, bool owned) {
    if (!x || !running) return;
    int k = input_slot(running, x);
    if (k < 0) ac_error("autograd: %s sent a gradient to a tensor that is not its input (internal error)", running->name);
    if (!running->needs[k]) return;
    if (torch_numel(g) != torch_numel(x))
        ac_error("autograd: gradient of shape %s for a tensor of shape %s (internal error)",
                 ac_shape_str(g), ac_shape_str(x));
    int64_t n = torch_numel(x);
    Node *fn = running->next[k];
    if (fn && !fn->bgrad) { /* take g as it is, any strides: the next backward reads it through ac_cdata */
        fn->bgrad = g;
        fn->bgrad_owned = owned;
        ac_gbuf_hold(g);
        return;
    }
    const float *gd = ac_cdata(g);
    if (!fn && capture.n) { /* autograd.grad: a leaf asked for sums its gradient apart; no .grad is written */
        capture_add(x, g);
        return;
    }
    if (!fn) { /* a leaf: .grad += g */
        Tensor *buf = leaf_gradbuf(x);
        if (!x->grad) {
            x->grad = buf;
            memcpy(x->grad->data, gd, sizeof(float) * (size_t)n);
        } else {
            add_into(x->grad->data, gd, n);
        }
        return;
    }
    float *into;
    if ((into = writable(fn->bgrad, fn->bgrad_owned))) { /* the sum so far is ours, in order: add to it */
        add_into(into, gd, n);
    } else if ((into = writable(g, owned))) { /* the sum into g, which nothing else reads */
        add_into(into, ac_cdata(fn->bgrad), n);
        ac_gbuf_drop(fn->bgrad);
        fn->bgrad = g;
        fn->bgrad_owned = true;
        ac_gbuf_hold(g);
    } else {
        Tensor *s = ac_new_like(x);
        AddJob j = {s->data, gd, ac_cdata(fn->bgrad)};
        ac_parallel_for(n, AC_GRAIN, add_task, &j);
        ac_gbuf_drop(fn->bgrad);
        fn->bgrad = s;
        fn->bgrad_owned = true;
        ac_gbuf_hold(s);
    }
}

/* A leaf's backward (t.backward() on a leaf): its .grad += seed. */
static void accum_leaf(Tensor *t, Tensor *seed) {
    Node self = {.n_inputs = 1, .inputs = &t, .next = &(Node *){NULL}, .needs = &(bool){true}};
    running = &self;
    ac_accum(t, seed);
    running = NULL;
}

/* x.retain_grad(): a non-leaf's .grad is filled by backward (accumulating
 * across calls, as a leaf's); on a leaf it changes nothing. */
void torch_retain_grad(Tensor *t) {
    ac_check_defined(t, "retain_grad");
    if (!t->requires_grad) ac_error("retain_grad: can't retain_grad on Tensor that has requires_grad=False");
    if (t->grad_fn) ac_impl(t)->retains_grad = true;
}

bool torch_retains_grad(const Tensor *t) { return t && t->grad_fn && ac_impl(t)->retains_grad; }
bool torch_is_leaf(const Tensor *t) { return t && !t->grad_fn; }

/* The complete gradient of a non-leaf that retains it, when its node runs. */
static void retain(Tensor *t, Tensor *g) {
    int64_t n = torch_numel(t);
    if (!t->grad) {
        t->grad = ac_new_like(t);
        memcpy(t->grad->data, ac_cdata(g), sizeof(float) * (size_t)n);
    } else {
        add_into(t->grad->data, ac_cdata(g), n);
    }
}

/* ---- saved tensors: the op's values, checked against in-place changes ------------- */

void *ac_node_ctx(Node *n, size_t bytes) {
    void *p = ac_arena_alloc(bytes);
    memset(p, 0, bytes);
    n->ctx = p;
    return p;
}

ac_saved ac_save(Node *n, Tensor *t) {
    n->uses_saved = true;
    return (ac_saved){t, t ? *ac_impl(t)->version : 0, t && t == n->out};
}

Tensor *ac_unpack(const Node *n, ac_saved s) {
    if (s.t && *ac_impl(s.t)->version != s.version) {
        char which[128] = "";
        /* PyTorch names the op that made a saved output, and an input's grad_fn now */
        const char *fn = s.is_output ? n->name : s.t->grad_fn ? s.t->grad_fn->name : NULL;
        if (fn) snprintf(which, sizeof which, ", which is output 0 of %s,", fn);
        ac_error("backward: one of the variables needed for gradient computation has been modified by an inplace "
                 "operation: [torch.%sTensor %s]%s is at version %llu; expected version %llu instead. Hint: "
                 "enable anomaly detection to find the operation that failed to compute its gradient, with "
                 "torch.autograd.set_detect_anomaly(True).",
                 ac_dtype_name(s.t->dtype), ac_shape_str(s.t), which,
                 (unsigned long long)*ac_impl(s.t)->version, (unsigned long long)s.version);
    }
    return s.t;
}

/* ---- the backward sweep ------------------------------------------------------------ */

/* The sweep's work lists live in the arena: an error raised mid-backward
 * (whose handler may longjmp out) leaves nothing malloc'd behind. */
typedef struct { Node **v; size_t n, cap; } Vec;
static void vpush(Vec *v, Node *t) {
    v->v = ac_arena_grow(v->v, v->n, &v->cap, v->n + 1, sizeof(Node *));
    v->v[v->n++] = t;
}

/* Post-order DFS over the nodes with an explicit stack of (node, next edge) frames. */
typedef struct { Node *node; int k; } Frame;

static void topo_sort(Node *root, Vec *order) {
    size_t n = 0, cap = 0;
    Frame *st = ac_arena_grow(NULL, 0, &cap, 256, sizeof *st);
    generation++;
    root->visit = generation;
    st[n++] = (Frame){root, 0};
    while (n) {
        Frame *f = &st[n - 1];
        Node *child = NULL;
        while (f->k < f->node->n_inputs) {
            Node *in = f->node->next[f->k++];
            if (in && in->visit != generation) {
                child = in;
                break;
            }
        }
        if (!child) {
            vpush(order, f->node);
            n--;
            continue;
        }
        child->visit = generation;
        st = ac_arena_grow(st, n, &cap, n + 1, sizeof *st);
        st[n++] = (Frame){child, 0};
    }
}

static void sweep(Tensor *root, Tensor *gradient, bool retain_graph);

/* A binary max-heap of nodes by seq. */
static void heap_push(Node **h, size_t *n, Node *x) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2]->seq < x->seq) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static Node *heap_pop(Node **h, size_t *n) {
    Node *top = h[0], *last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1]->seq > h[c]->seq) c++;
        if (h[c]->seq <= last->seq) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

void torch_backward_ex(Tensor *root, Tensor *gradient, bool retain_graph) { sweep(root, gradient, retain_graph); }

/* torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph): the same sweep as
 * backward(), but the gradients of `inputs` (leaves or not) are returned, and no .grad
 * is written. An input the output does not depend on is PyTorch's error (allow_unused=False). */
Tensor **torch_autograd_grad(Tensor *output, int n_inputs, Tensor **inputs, Tensor *grad_output, bool retain_graph) {
    ac_check_defined(output, "grad");
    for (int i = 0; i < n_inputs; i++) {
        ac_check_defined(inputs[i], "grad");
        if (!inputs[i]->requires_grad) ac_error("grad: One of the differentiated Tensors does not require grad");
    }
    Tensor **grads = ac_arena_alloc(sizeof(Tensor *) * (size_t)(n_inputs > 0 ? n_inputs : 1));
    memset(grads, 0, sizeof(Tensor *) * (size_t)(n_inputs > 0 ? n_inputs : 1));
    if (n_inputs == 0) ac_error("grad: grad requires non-empty inputs.");
    capture = (Capture){n_inputs, inputs, grads};
    sweep(output, grad_output, retain_graph);
    capture.n = 0;
    for (int i = 0; i < n_inputs; i++)
        if (!grads[i])
            ac_error("grad: One of the differentiated Tensors appears to not have been used in the graph. Set "
                     "allow_unused=True if this is the desired behavior.");
    return grads;
}

static _Thread_local bool sweep_retains; /* the running sweep's retain_graph */
bool ac_backward_retains_graph(void) { return sweep_retains; }

static void sweep(Tensor *root, Tensor *gradient, bool retain_graph) {
    ac_check_defined(root, "backward");
    if (gradient) ac_check_live(gradient, "backward");
    if (!root->requires_grad)
        ac_error("backward: element 0 of tensors does not require grad and does not have a grad_fn");
    if (!gradient && torch_numel(root) != 1)
        ac_error("backward: grad can be implicitly created only for scalar outputs");
    if (gradient) {
        ac_check_float(gradient, "backward");
        if (gradient->ndim != root->ndim || torch_numel(gradient) != torch_numel(root) ||
            memcmp(gradient->shape, root->shape, sizeof(int64_t) * (size_t)root->ndim) != 0)
            ac_error("backward: Mismatch in shape: grad_output[0] has a shape of torch.Size(%s) and "
                     "output[0] has a shape of torch.Size(%s).", ac_shape_str(gradient), ac_shape_str(root));
    }
    bool prev = torch_no_grad_enter();
    Tensor *seed = gradient ? ac_materialize(gradient) : torch_ones_like(root);
    if (!root->grad_fn) { /* backward on a leaf: its grad is the seed */
        accum_leaf(root, seed);
        torch_no_grad_exit(prev);
        return;
    }
    Vec order = {0};
    topo_sort(root->grad_fn, &order);
    ac_gbuf_sweep_begin();
    sweep_retains = retain_graph;
    for (size_t i = 0; i < order.n; i++) order.v[i]->bgrad = NULL;
    root->grad_fn->bgrad = seed;
    root->grad_fn->bgrad_owned = seed != gradient; /* never write into the caller's tensor */
    /* PyTorch's engine runs, of the nodes whose every consumer has run, the one made last (the
     * highest sequence_nr): the order in which a tensor's gradients arrive, and so how they are summed
     * (a layer's q, k and v projections send theirs value, query, key). Kahn's algorithm on that. */
    for (size_t i = 0; i < order.n; i++) order.v[i]->deps = 0;
    for (size_t i = 0; i < order.n; i++)
        for (int k = 0; k < order.v[i]->n_inputs; k++)
            if (order.v[i]->next[k]) order.v[i]->next[k]->deps++;
    size_t nheap = 0, cap = 0;
    Node **heap = ac_arena_grow(NULL, 0, &cap, 64, sizeof *heap);
    heap[nheap++] = root->grad_fn;
    while (nheap) {
        Node *n = heap_pop(heap, &nheap);
        for (int k = 0; k < n->n_inputs; k++) {
            Node *c = n->next[k];
            if (c && --c->deps == 0) {
                heap = ac_arena_grow(heap, nheap, &cap, nheap + 1, sizeof *heap);
                heap_push(heap, &nheap, c);
            }
        }
        if (!n->bgrad) continue;
        if (n->freed)
            ac_error("backward: Trying to backward through the graph a second time (or directly access "
                     "saved tensors after they have already been freed). Saved intermediate values of "
                     "the graph are freed when you call .backward() or autograd.grad(). Specify "
                     "retain_graph=True if you need to backward through the graph a second time or if "
                     "you need to access saved tensors after calling backward. (node %s)", n->name);
        Tensor *g = n->bgrad;
        n->bgrad = NULL;
        if (capture.n && n->out && n->out->grad_fn == n) capture_add(n->out, g); /* a non-leaf asked for */
        else if (n->out && n->out->grad_fn == n && ac_impl(n->out)->retains_grad) retain(n->out, g);
        running = n;
        ac_gbuf_node_begin();
        n->backward(n, g);
        running = NULL;
        ac_gbuf_drop(g); /* n's hold on its gradient, taken when the gradient reached it */
        ac_gbuf_node_end();
        if (!retain_graph && n->uses_saved) n->freed = true;
    }
    ac_gbuf_sweep_end();
    torch_no_grad_exit(prev);
}

void torch_backward(Tensor *t, Tensor *gradient) { torch_backward_ex(t, gradient, false); }
