/* nn: parameters and modules that mirror PyTorch's classes.
 *
 *     Python                                   C
 *     nn.Parameter(torch.rand(3, 2))           nn_Parameter(torch_rand(SHAPE(3, 2)))
 *     sa = SelfAttention(3, 2, 4)              nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 4);
 *     sa(x)                                    nn_SelfAttention_forward(sa, x)  (or nn_forward(&sa->module, x))
 *     sa.W_query                               sa->W_query
 *     sa.named_parameters()                    nn_named_parameters(&sa->module)
 *     sa.zero_grad() / sa.train() / sa.eval()  nn_zero_grad / nn_train / nn_eval (&sa->module)
 *     del sa                                   nn_free(&sa->module)
 *
 * Every module struct starts with an nn_Module, which holds its parameters,
 * buffers and submodules by name in registration order. A module of your own
 * (as a PyTorch class derives from nn.Module):
 *
 *     typedef struct { nn_Module module; nn_Linear *fc1, *fc2; } MLP;     class MLP(nn.Module):
 *     static Tensor *mlp_forward(nn_Module *m, Tensor *x) { ... }          def forward(self, x): ...
 *     MLP *mlp = nn_module_new(sizeof *mlp, "MLP", mlp_forward);           super().__init__()
 *     mlp->fc1 = (nn_Linear *)nn_register_module(&mlp->module, "fc1", &nn_Linear_new(1, 16, true)->module);
 *     ...; nn_free(&mlp->module);                                          (the struct too)
 *
 * or, for a struct you own (on the stack, inside another), nn_module_init(&m.module, ...):
 * then nn_free(&m.module) frees what it holds and leaves the struct to you. Constructors create
 * parameters in the order the PyTorch __init__ does, so the same seed gives the
 * same weights. Parameters and buffers are long-lived (ac_persist); what a
 * forward makes lives in the arena.
 */
#ifndef ATTENTION_NN_H
#define ATTENTION_NN_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nn_Module nn_Module;
#define NN_MODULE_MAGIC 0x6e6e4d6fu
typedef Tensor *(*nn_forward_fn)(nn_Module *m, Tensor *x);
/* A module's extra_repr(): what its repr shows inside the parentheses ("in_features=2, ..."),
 * an arena string; NULL (or no function) for none. */
typedef char *(*nn_extra_repr_fn)(nn_Module *m);

typedef struct { char *name; Tensor *t; } nn_Named;
typedef struct { char *name; nn_Module *m; } nn_Child;

struct nn_Module {
    unsigned magic;          /* NN_MODULE_MAGIC while initialised: nn_free refuses anything else */
    bool owned;              /* made by nn_module_new: nn_free frees the struct too */
    const char *type;        /* class name, "Linear" */
    bool training;
    nn_forward_fn forward;   /* one-input forward, NULL for CrossAttention */
    int n_params, n_buffers, n_children;
    nn_Named *params, *buffers;
    nn_Child *children;
    nn_extra_repr_fn extra_repr; /* NULL: none, as nn.Module's default */
};

/* A list of named tensors (arena): what named_parameters() / state_dict() give. */
typedef struct { int n; const char **names; Tensor **tensors; } nn_TensorList;

Tensor *nn_Parameter(Tensor *data);          /* long-lived leaf that requires grad */
/* A zeroed module struct of `size` bytes (its first member an nn_Module), initialised. */
void *nn_module_new(size_t size, const char *type, nn_forward_fn forward);
void nn_module_init(nn_Module *m, const char *type, nn_forward_fn forward); /* a struct you own */
Tensor *nn_register_parameter(nn_Module *m, const char *name, Tensor *data); /* takes nn_Parameter(data) */
/* nn_set_skip_init's parameter: this shape over one zero (every stride 0; PyTorch's meta device), for
 * a loader to replace with storage of its own (nn_LLMModel_fresh_weights) */
Tensor *nn_register_parameter_empty(nn_Module *m, const char *name, int ndim, const int64_t *shape);
Tensor *nn_register_buffer(nn_Module *m, const char *name, Tensor *data);    /* long-lived copy */
Tensor *nn_adopt_buffer(nn_Module *m, const char *name, Tensor *persistent); /* takes a ac_persist tensor, no copy */
/* torch.nn.utils.skip_init's idea for a loader: while set, Linear and Embedding make their weights
 * as shapes alone (nn_register_parameter_empty), with no draws and no memory, for a loader that
 * gives them storage and reads them in (Linear's bias: zeros). The random generator is not advanced
 * by them. Returns the previous setting. */
bool nn_set_skip_init(bool skip);
bool nn_skip_init(void);
nn_Module *nn_register_module(nn_Module *m, const char *name, nn_Module *child);
Tensor *nn_forward(nn_Module *m, Tensor *x);
/* What Python does with a module's attributes, for the modules registered under names:
 *     model.out_head                        nn_get_submodule(&model->module, "out_head")
 *     self.W_query(x)                       nn_call(&self->module, "W_query", x)
 *     model.out_head = nn.Linear(768, 2)    model->out_head = (nn_Linear *)nn_setattr(&model->module, "out_head",
 *                                                                &nn_Linear_new(768, 2, true)->module);
 *     model.requires_grad_(False)           nn_requires_grad_(&model->module, false)
 *     (for p in model.parameters(): p.requires_grad = False: the same)
 *     sum(p.numel() for p in model.parameters() if p.requires_grad)
 *                                           nn_num_trainable_parameters(&model->module)
 * nn_setattr keeps the name's place in registration order and frees the module it replaces,
 * unless the new one holds it (LinearWithLoRA(linear) takes the Linear it wraps); a new name is
 * registered. A typed field (model->out_head) is the caller's to update, as above. The modules of
 * this library call their children through nn_call, so a replaced child is the one that runs. */
nn_Module *nn_get_submodule(nn_Module *m, const char *name);
Tensor *nn_call(nn_Module *m, const char *name, Tensor *x);
nn_Module *nn_setattr(nn_Module *m, const char *name, nn_Module *child);
void nn_requires_grad_(nn_Module *m, bool requires_grad);
int64_t nn_num_trainable_parameters(nn_Module *m);
nn_TensorList nn_named_parameters(nn_Module *m);  /* "attn.W_query.weight", registration order */
nn_TensorList nn_state_dict(nn_Module *m);        /* parameters and buffers, PyTorch's order */
int64_t nn_num_parameters(nn_Module *m);
void nn_zero_grad(nn_Module *m);                  /* 1.13 default: .grad.zero_() */
/* torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type): the total norm of
 * the gradients there are (0-d float32, arena; tensor(0.) when none has one), and every
 * gradient scaled by max_norm / (total + 1e-6) where that is below 1, in PyTorch 1.13's
 * order (norm_type 2.0 or INFINITY). */
Tensor *nn_clip_grad_norm_(nn_TensorList parameters, double max_norm, double norm_type);
void nn_train(nn_Module *m, bool mode);
void nn_eval(nn_Module *m);
void nn_free(nn_Module *m); /* its parameters, buffers and submodules, and the struct if nn_module_new made it */
/* repr(model) and print(model), as nn.Module.__repr__: the type, its extra_repr, then each child
 * as "(name): repr" indented by two spaces:
 *     NeuralNetwork(
 *       (layers): Sequential(
 *         (0): Linear(in_features=50, out_features=30, bias=True)
 *         (1): ReLU()
 *     ...                                                   (nn_module_repr: an arena string) */
char *nn_module_repr(nn_Module *m);
void nn_print(nn_Module *m);
/* For an extra_repr of your own: printf into an arena string. */
char *nn_repr_printf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- layers ------------------------------------------------------------------- */

typedef struct { nn_Module module; int64_t in_features, out_features; Tensor *weight, *bias; } nn_Linear;
nn_Linear *nn_Linear_new(int64_t in_features, int64_t out_features, bool bias);
Tensor *nn_Linear_forward(nn_Linear *self, Tensor *x);

typedef struct { nn_Module module; int64_t num_embeddings, embedding_dim, padding_idx; Tensor *weight; } nn_Embedding;
nn_Embedding *nn_Embedding_new(int64_t num_embeddings, int64_t embedding_dim); /* padding_idx None */
nn_Embedding *nn_Embedding_new_padded(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx);
Tensor *nn_Embedding_forward(nn_Embedding *self, Tensor *indices);

typedef struct { nn_Module module; double p; } nn_Dropout;
nn_Dropout *nn_Dropout_new(double p);
Tensor *nn_Dropout_forward(nn_Dropout *self, Tensor *x);

typedef struct { nn_Module module; int64_t normalized_shape; double eps; Tensor *weight, *bias; } nn_LayerNorm;
nn_LayerNorm *nn_LayerNorm_new(int64_t normalized_shape); /* eps 1e-5, elementwise_affine */
Tensor *nn_LayerNorm_forward(nn_LayerNorm *self, Tensor *x);

typedef struct { nn_Module module; } nn_GELU;
nn_GELU *nn_GELU_new(void);
Tensor *nn_GELU_forward(nn_GELU *self, Tensor *x);

/* The activations and shape layers (nn/activations.c), each a module for nn_Sequential:
 *     nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.SiLU()   nn_ReLU_new(), nn_Tanh_new(), nn_Sigmoid_new(), nn_SiLU_new()
 *     nn.Softmax(dim=1)                              nn_Softmax_new(1)
 *     nn.Flatten()  (start_dim=1, end_dim=-1)        nn_Flatten_new(1, -1)
 * Their forwards are torch_relu, torch_tanh, torch_sigmoid, torch_silu, torch_softmax(x, dim) and
 * torch_flatten(x, start_dim, end_dim); their reprs PyTorch's (ReLU(), Softmax(dim=1), ...). */
typedef struct { nn_Module module; } nn_ReLU;
typedef struct { nn_Module module; } nn_Tanh;
typedef struct { nn_Module module; } nn_Sigmoid;
typedef struct { nn_Module module; } nn_SiLU;
typedef struct { nn_Module module; int64_t dim; } nn_Softmax;
typedef struct { nn_Module module; int64_t start_dim, end_dim; } nn_Flatten;
nn_ReLU *nn_ReLU_new(void);
nn_Tanh *nn_Tanh_new(void);
nn_Sigmoid *nn_Sigmoid_new(void);
nn_SiLU *nn_SiLU_new(void);
nn_Softmax *nn_Softmax_new(int64_t dim);
nn_Flatten *nn_Flatten_new(int64_t start_dim, int64_t end_dim);
Tensor *nn_ReLU_forward(nn_ReLU *self, Tensor *x);
Tensor *nn_Tanh_forward(nn_Tanh *self, Tensor *x);
Tensor *nn_Sigmoid_forward(nn_Sigmoid *self, Tensor *x);
Tensor *nn_SiLU_forward(nn_SiLU *self, Tensor *x);
Tensor *nn_Softmax_forward(nn_Softmax *self, Tensor *x);
Tensor *nn_Flatten_forward(nn_Flatten *self, Tensor *x);

typedef struct { nn_Module module; } nn_ModuleList; /* children named "0", "1", ... */
nn_ModuleList *nn_ModuleList_new(void);
void nn_ModuleList_append(nn_ModuleList *self, nn_Module *m);
int nn_ModuleList_len(nn_ModuleList *self);
nn_Module *nn_ModuleList_get(nn_ModuleList *self, int i);

/* nn.Sequential(a, b, c): children "0", "1", ...; forward(x) runs them in turn.
 *     nn.Sequential(nn.Linear(2, 8), nn.GELU(), nn.Linear(8, 1))
 *     nn_Sequential_new(MODULES(&nn_Linear_new(2, 8, true)->module, &nn_GELU_new()->module,
 *                               &nn_Linear_new(8, 1, true)->module))
 * It takes the modules (nn_free frees them with it); each needs a one-input forward. */
typedef struct { nn_Module module; } nn_Sequential;
#define MODULES(...) ((int)(sizeof((nn_Module *[]){__VA_ARGS__}) / sizeof(nn_Module *))), ((nn_Module *[]){__VA_ARGS__})
nn_Sequential *nn_Sequential_new(int n, nn_Module *const *modules);
nn_Module *nn_Sequential_get(nn_Sequential *self, int i); /* self[i] (negative from the end) */
Tensor *nn_Sequential_forward(nn_Sequential *self, Tensor *x);

/* ---- appendix E: LoRA (nn/lora.c) --------------------------------------------------
 *     torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5))   nn_init_kaiming_uniform_(t, sqrt(5))
 *     LoRALayer(in_dim, out_dim, rank, alpha)             nn_LoRALayer_new(in_dim, out_dim, rank, alpha)
 *         A (in_dim, rank) kaiming-uniform, B (rank, out_dim) zeros;
 *         forward(x) = (alpha / rank) * (x @ A @ B)
 *     LinearWithLoRA(linear, rank, alpha)                 nn_LinearWithLoRA_new(linear, rank, alpha)
 *         forward(x) = linear(x) + lora(x); it takes the Linear (nn_free frees it with it)
 *     replace_linear_with_lora(model, rank, alpha)        nn_replace_linear_with_lora(&model->module, rank, alpha)
 *         every Linear under model, depth first in registration order, replaced in place by a
 *         LinearWithLoRA around it (each A drawn then, from the current generator). Typed fields
 *         (att->W_query) still point at the Linear, now its .linear; forwards reach the wrapper
 *         through nn_call. Its state_dict names are PyTorch's: ...W_query.linear.weight, ...W_query.lora.A. */
Tensor *nn_init_kaiming_uniform_(Tensor *t, double a);
typedef struct { nn_Module module; Tensor *A, *B; double alpha; int64_t rank; } nn_LoRALayer;
nn_LoRALayer *nn_LoRALayer_new(int64_t in_dim, int64_t out_dim, int64_t rank, double alpha);
Tensor *nn_LoRALayer_forward(nn_LoRALayer *self, Tensor *x);
typedef struct { nn_Module module; nn_Linear *linear; nn_LoRALayer *lora; } nn_LinearWithLoRA;
nn_LinearWithLoRA *nn_LinearWithLoRA_new(nn_Linear *linear, int64_t rank, double alpha);
Tensor *nn_LinearWithLoRA_forward(nn_LinearWithLoRA *self, Tensor *x);
void nn_replace_linear_with_lora(nn_Module *model, int64_t rank, double alpha);

/* ---- the article's attention classes ------------------------------------------ */

/* class SelfAttention(nn.Module):            (the article's compact class)
 *     W_query, W_key: nn.Parameter(torch.rand(d_in, d_out_kq)); W_value: rand(d_in, d_out_v)
 *     forward(x) = softmax((x W_query)(x W_key)^T / d_out_kq**0.5, dim=-1) @ (x W_value) */
typedef struct {
    nn_Module module;
    int64_t d_out_kq;
    Tensor *W_query, *W_key, *W_value;
    Tensor *last_attn_weights; /* the weights of the last forward (arena), to look at */
} nn_SelfAttention;
nn_SelfAttention *nn_SelfAttention_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v);
Tensor *nn_SelfAttention_forward(nn_SelfAttention *self, Tensor *x);

/* class MultiHeadAttentionWrapper(nn.Module): heads = ModuleList of num_heads
 * SelfAttention; forward(x) = torch.cat([head(x) for head in heads], dim=-1).
 * nn_MultiHeadAttentionWrapper_new_causal builds it from CausalAttention heads. */
typedef struct { nn_Module module; nn_ModuleList *heads; } nn_MultiHeadAttentionWrapper;
nn_MultiHeadAttentionWrapper *nn_MultiHeadAttentionWrapper_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v,
                                                               int num_heads);
nn_MultiHeadAttentionWrapper *nn_MultiHeadAttentionWrapper_new_causal(int64_t d_in, int64_t d_out_kq,
                                                                      int64_t d_out_v, int64_t context_length,
                                                                      double dropout, int num_heads);
Tensor *nn_MultiHeadAttentionWrapper_forward(nn_MultiHeadAttentionWrapper *self, Tensor *x);

/* The article's causal self-attention as a module (its Python would be):
 * class CausalAttention(nn.Module):
 *     def __init__(self, d_in, d_out_kq, d_out_v, context_length, dropout):
 *         W_query, W_key, W_value as in SelfAttention; self.dropout = nn.Dropout(dropout)
 *         self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
 *     def forward(self, x):                   # x: (t, d_in) or (b, t, d_in)
 *         attn_scores = queries @ keys.transpose(-2, -1)
 *         attn_scores = attn_scores.masked_fill(self.mask.bool()[:t, :t], -torch.inf)
 *         attn_weights = self.dropout(torch.softmax(attn_scores / self.d_out_kq**0.5, dim=-1))
 *         return attn_weights @ values */
typedef struct {
    nn_Module module;
    int64_t d_out_kq, context_length;
    Tensor *W_query, *W_key, *W_value, *mask;
    nn_Dropout *dropout;
    Tensor *last_attn_weights; /* the weights of the last forward (arena), to look at */
} nn_CausalAttention;
nn_CausalAttention *nn_CausalAttention_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v,
                                           int64_t context_length, double dropout);
Tensor *nn_CausalAttention_forward(nn_CausalAttention *self, Tensor *x);

/* class CrossAttention(nn.Module): the article's bonus section; queries from
 * x_1, keys and values from x_2. */
typedef struct {
    nn_Module module;
    int64_t d_out_kq;
    Tensor *W_query, *W_key, *W_value;
    Tensor *last_attn_weights; /* (t_1, t_2) weights of the last forward (arena) */
} nn_CrossAttention;
nn_CrossAttention *nn_CrossAttention_new(int64_t d_in, int64_t d_out_kq, int64_t d_out_v);
Tensor *nn_CrossAttention_forward(nn_CrossAttention *self, Tensor *x_1, Tensor *x_2);

/* class MultiHeadAttention(nn.Module): the batched form of toy_lm.py: one
 * Linear each for Q, K, V over all heads, view/transpose to (b, h, t, dh), the
 * causal mask, out_proj. d_out % num_heads != 0 is an error. */
typedef struct {
    nn_Module module;
    int64_t num_heads, head_dim, d_out, context_length;
    nn_Linear *W_query, *W_key, *W_value, *out_proj;
    nn_Dropout *dropout;       /* on the attention weights */
    Tensor *mask;
    Tensor *last_attn_weights; /* (b, h, t, t) weights of the last forward (arena), to look at; NULL when fused */
    bool fused; /* use torch_scaled_dot_product_attention (is_causal), as nn.MultiheadAttention does since 2.0 */
    bool queries_first; /* project queries, keys, values in that order (toy_lm.py's); false: keys first (the book's) */
} nn_MultiHeadAttention;
nn_MultiHeadAttention *nn_MultiHeadAttention_new(int64_t d_in, int64_t d_out, int64_t context_length,
                                                 int64_t num_heads);
/* The book's: MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False),
 * dropout on the attention weights, a bias on W_query/W_key/W_value when qkv_bias. */
nn_MultiHeadAttention *nn_MultiHeadAttention_new_ex(int64_t d_in, int64_t d_out, int64_t context_length,
                                                    double dropout, int64_t num_heads, bool qkv_bias);
Tensor *nn_MultiHeadAttention_forward(nn_MultiHeadAttention *self, Tensor *x);

#ifdef __cplusplus
}
#endif

#endif
