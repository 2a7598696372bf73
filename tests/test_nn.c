/* Modules against PyTorch (tests/data/nn_golden.txt, from tests/tools/gen_golden.py):
 * outputs within 1e-5 (+1e-5 relative), gradients within 1e-4 relative (+1e-6
 * absolute for gradients that are ~0); and the article's own checks. */
#include <math.h>
#include <stdlib.h>

#include "tests.h"

#define FWD_ATOL 1e-5
#define FWD_RTOL 1e-5
#define GRAD_ATOL 1e-6
#define GRAD_RTOL 1e-4
#define G "nn_golden.txt"

/* torch.rand(shape, generator=torch.Generator().manual_seed(7)): a separate generator */
static Tensor *loss_weights(const Tensor *out) {
    torch_Generator saved = torch_default_generator;
    torch_manual_seed(7);
    Tensor *w = torch_rand(out->ndim, out->shape);
    torch_default_generator = saved;
    return w;
}

/* out vs golden, then (out * w).sum().backward() and every parameter's (and input's) gradient */
static void check_module(const char *name, nn_Module *m, Tensor *out, int n_in, const char **in_names, Tensor **ins) {
    char key[160];
    snprintf(key, sizeof key, "%s.out", name);
    assert_tensor_golden(out, G, key, FWD_ATOL, FWD_RTOL);
    torch_backward(torch_sum(torch_mul(out, loss_weights(out))), NULL);
    if (m) {
        nn_TensorList ps = nn_named_parameters(m);
        for (int i = 0; i < ps.n; i++) {
            snprintf(key, sizeof key, "%s.grad.%s", name, ps.names[i]);
            assert_tensor_golden(ps.tensors[i]->grad, G, key, GRAD_ATOL, GRAD_RTOL);
        }
    }
    for (int i = 0; i < n_in; i++) {
        snprintf(key, sizeof key, "%s.grad.%s", name, in_names[i]);
        assert_tensor_golden(ins[i]->grad, G, key, GRAD_ATOL, GRAD_RTOL);
    }
}

static Tensor *embedded_sentence(void) {
    torch_manual_seed(123);
    nn_Embedding *e = nn_Embedding_new(50000, 3);
    Tensor *x = torch_detach(nn_Embedding_forward(e, torch_tensor_long((const int64_t[]){0, 4, 5, 2, 1, 3}, SHAPE(6))));
    x = torch_contiguous(torch_clone(x)); /* survives the module */
    nn_free(&e->module);
    return x;
}

START_TEST(test_attention_modules_vs_pytorch) {
    Tensor *emb = embedded_sentence();
    torch_manual_seed(123);
    nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 4);
    Tensor *x = torch_requires_grad_(torch_clone(emb), true);
    check_module("sa", &sa->module, nn_SelfAttention_forward(sa, x), 1, (const char *[]){"x"}, (Tensor *[]){x});
    nn_free(&sa->module);

    torch_manual_seed(123);
    nn_MultiHeadAttentionWrapper *mw = nn_MultiHeadAttentionWrapper_new(3, 2, 1, 4);
    check_module("mhw", &mw->module, nn_MultiHeadAttentionWrapper_forward(mw, emb), 0, NULL, NULL);
    nn_free(&mw->module);

    torch_manual_seed(5);
    nn_CausalAttention *ca = nn_CausalAttention_new(3, 2, 4, 6, 0.0);
    Tensor *xb = torch_requires_grad_(torch_randn(SHAPE(2, 5, 3)), true);
    check_module("causal", &ca->module, nn_CausalAttention_forward(ca, xb), 1, (const char *[]){"x"}, (Tensor *[]){xb});
    nn_free(&ca->module);

    torch_manual_seed(123);
    nn_CrossAttention *cr = nn_CrossAttention_new(3, 2, 4);
    Tensor *x2 = torch_requires_grad_(torch_rand(SHAPE(8, 3)), true);
    check_module("cross", &cr->module, nn_CrossAttention_forward(cr, emb, x2), 1, (const char *[]){"x_2"}, (Tensor *[]){x2});
    nn_free(&cr->module);

    torch_manual_seed(11);
    nn_MultiHeadAttention *mha = nn_MultiHeadAttention_new(8, 8, 6, 2);
    Tensor *xm = torch_requires_grad_(torch_randn(SHAPE(2, 5, 8)), true);
    check_module("mha", &mha->module, nn_MultiHeadAttention_forward(mha, xm), 1, (const char *[]){"x"}, (Tensor *[]){xm});
    nn_free(&mha->module);
}
END_TEST

START_TEST(test_layers_vs_pytorch) {
    torch_manual_seed(3);
    nn_Linear *lin = nn_Linear_new(5, 3, true);
    Tensor *xl = torch_requires_grad_(torch_randn(SHAPE(4, 5)), true);
    check_module("linear2d", &lin->module, nn_Linear_forward(lin, xl), 1, (const char *[]){"x"}, (Tensor *[]){xl});
    nn_zero_grad(&lin->module);
    Tensor *xl3 = torch_requires_grad_(torch_randn(SHAPE(2, 3, 5)), true);
    check_module("linear3d", &lin->module, nn_Linear_forward(lin, xl3), 1, (const char *[]){"x"}, (Tensor *[]){xl3});
    nn_free(&lin->module);

    torch_manual_seed(4);
    nn_Embedding *e = nn_Embedding_new_padded(10, 4, 2);
    Tensor *ids = torch_tensor_long((const int64_t[]){1, 2, 3, 3, 3, 9}, SHAPE(2, 3));
    check_module("embedding", &e->module, nn_Embedding_forward(e, ids), 0, NULL, NULL);
    nn_free(&e->module);

    torch_manual_seed(6);
    nn_LayerNorm *ln = nn_LayerNorm_new(6);
    bool prev = torch_no_grad_enter();
    torch_copy_(ln->weight, torch_add_scalar(torch_rand(SHAPE(6)), 0.5));
    torch_copy_(ln->bias, torch_sub_scalar(torch_rand(SHAPE(6)), 0.5));
    torch_no_grad_exit(prev);
    Tensor *xn = torch_requires_grad_(torch_randn(SHAPE(3, 6)), true);
    check_module("layernorm", &ln->module, nn_LayerNorm_forward(ln, xn), 1, (const char *[]){"x"}, (Tensor *[]){xn});
    nn_free(&ln->module);

    torch_manual_seed(8);
    Tensor *xg = torch_requires_grad_(torch_randn(SHAPE(10)), true);
    nn_GELU *gelu = nn_GELU_new();
    check_module("gelu", NULL, nn_GELU_forward(gelu, xg), 1, (const char *[]){"x"}, (Tensor *[]){xg});
    nn_free(&gelu->module);

    torch_manual_seed(9);
    Tensor *xd = torch_requires_grad_(torch_randn(SHAPE(4, 5)), true);
    check_module("dropout", NULL, torch_dropout(xd, 0.3, true), 1, (const char *[]){"x"}, (Tensor *[]){xd});

    torch_manual_seed(10);
    Tensor *logits = torch_requires_grad_(torch_randn(SHAPE(6, 5)), true);
    Tensor *tgt = torch_tensor_long((const int64_t[]){1, 0, 4, -100, 2, 2}, SHAPE(6));
    Tensor *loss = torch_cross_entropy(logits, tgt, -100);
    assert_tensor_golden(loss, G, "ce.loss", FWD_ATOL, FWD_RTOL);
    torch_backward(loss, NULL);
    assert_tensor_golden(logits->grad, G, "ce.grad", GRAD_ATOL, GRAD_RTOL);
    logits->grad = NULL;
    check_module("logsoftmax", NULL, torch_log_softmax(logits, -1), 1, (const char *[]){"x"}, (Tensor *[]){logits});
}
END_TEST

START_TEST(test_toylm_init_matches_pytorch) {
    torch_manual_seed(123);
    nn_ToyLM *m = nn_ToyLM_new(65, 8, 16, 4);
    nn_TensorList sd = nn_state_dict(&m->module);
    const char *order[] = {"tok_emb.weight", "pos_emb.weight", "attn.mask", "attn.W_query.weight", "attn.W_key.weight",
                           "attn.W_value.weight", "attn.out_proj.weight", "attn.out_proj.bias", "head.weight", "head.bias"};
    ck_assert_int_eq(sd.n, 10);
    for (int i = 0; i < sd.n; i++) {
        ck_assert_str_eq(sd.names[i], order[i]); /* PyTorch's state_dict order */
        char key[96];
        snprintf(key, sizeof key, "toylm.init.%s", sd.names[i]);
        assert_tensor_golden(sd.tensors[i], G, key, 0.0, 0.0); /* the same draws: identical */
    }
    ck_assert_int_eq(nn_named_parameters(&m->module).n, 9); /* the mask is a buffer, not a parameter */
    ck_assert_int_eq(nn_num_parameters(&m->module), 65 * 16 + 8 * 16 + 3 * 16 * 16 + 16 * 16 + 16 + 16 * 65 + 65);
    nn_free(&m->module);
}
END_TEST

/* The article: a wrapper of 1-dim heads reproduces the single head in its first column. */
START_TEST(test_wrapper_first_column_is_the_single_head) {
    Tensor *emb = embedded_sentence();
    torch_manual_seed(123);
    nn_SelfAttention *sa = nn_SelfAttention_new(3, 2, 1);
    Tensor *single = nn_SelfAttention_forward(sa, emb);
    torch_manual_seed(123);
    nn_MultiHeadAttentionWrapper *mw = nn_MultiHeadAttentionWrapper_new(3, 2, 1, 4);
    Tensor *all = nn_MultiHeadAttentionWrapper_forward(mw, emb);
    ck_assert_str_eq(torch_size_str(all), "torch.Size([6, 4])");
    Tensor *col = torch_contiguous(torch_select(all, 1, 0));
    for (int i = 0; i < 6; i++) ck_assert(ac_data_float(col)[i] == ac_data_float(single)[i]);
    nn_TensorList ps = nn_named_parameters(&mw->module);
    ck_assert_int_eq(ps.n, 12);
    ck_assert_str_eq(ps.names[0], "heads.0.W_query");
    ck_assert_str_eq(ps.names[11], "heads.3.W_value");
    nn_free(&sa->module);
    nn_free(&mw->module);
}
END_TEST

/* The batched MultiHeadAttention equals a wrapper of causal heads holding its weights. */
START_TEST(test_batched_mha_equals_wrapper_of_causal_heads) {
    const int64_t d = 6, ctx = 5, h = 2, dh = 3;
    torch_manual_seed(21);
    nn_MultiHeadAttention *mha = nn_MultiHeadAttention_new(d, d, ctx, h);
    nn_MultiHeadAttentionWrapper *mw = nn_MultiHeadAttentionWrapper_new_causal(d, dh, dh, ctx, 0.0, (int)h);
    bool prev = torch_no_grad_enter();
    for (int k = 0; k < h; k++) {
        nn_CausalAttention *head = (nn_CausalAttention *)nn_ModuleList_get(mw->heads, k);
        /* head k's (d_in, dh) matrix is rows k*dh..(k+1)*dh of the Linear weight (out, in), transposed */
        torch_copy_(head->W_query, torch_contiguous(torch_T(torch_slice(mha->W_query->weight, 0, k * dh, (k + 1) * dh))));
        torch_copy_(head->W_key, torch_contiguous(torch_T(torch_slice(mha->W_key->weight, 0, k * dh, (k + 1) * dh))));
        torch_copy_(head->W_value, torch_contiguous(torch_T(torch_slice(mha->W_value->weight, 0, k * dh, (k + 1) * dh))));
    }
    torch_no_grad_exit(prev);
    Tensor *x = torch_randn(SHAPE(3, 4, d));
    Tensor *batched = nn_MultiHeadAttention_forward(mha, x);
    Tensor *wrapped = torch_linear(nn_MultiHeadAttentionWrapper_forward(mw, x), mha->out_proj->weight, mha->out_proj->bias);
    const float *a = ac_data_float(batched), *b = ac_data_float(wrapped);
    for (int64_t i = 0; i < torch_numel(batched); i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-6f + 1e-5f * fabsf(b[i]), "[%lld] %.9g vs %.9g", (long long)i, a[i], b[i]);
    nn_free(&mha->module);
    nn_free(&mw->module);
}
END_TEST

START_TEST(test_causal_weights_and_dropout_modes) {
    torch_manual_seed(2);
    nn_CausalAttention *ca = nn_CausalAttention_new(3, 2, 4, 8, 0.5);
    Tensor *x = torch_randn(SHAPE(2, 6, 3));
    nn_eval(&ca->module);
    Tensor *out_eval = nn_CausalAttention_forward(ca, x);
    Tensor *w = ca->last_attn_weights; /* (2, 6, 6) */
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 6; i++) {
            double row = 0;
            for (int j = 0; j < 6; j++) {
                double v = ac_get(w, SHAPE(b, i, j));
                if (j > i) ck_assert_msg(v == 0.0, "weight above the diagonal at (%d, %d, %d): %g", b, i, j, v);
                row += v;
            }
            ck_assert_msg(fabs(row - 1.0) < 1e-6, "row %d sums to %.9g", i, row);
        }
    /* eval mode: dropout is the identity (the very same tensor comes back) */
    nn_Dropout *d = nn_Dropout_new(0.5);
    nn_eval(&d->module);
    ck_assert_ptr_eq(nn_Dropout_forward(d, x), x);
    nn_train(&d->module, true);
    Tensor *dropped = nn_Dropout_forward(d, torch_ones(SHAPE(1000)));
    int zeros = 0;
    for (int i = 0; i < 1000; i++) {
        float v = ac_data_float(dropped)[i];
        ck_assert(v == 0.0f || v == 2.0f);
        zeros += v == 0.0f;
    }
    ck_assert(zeros > 400 && zeros < 600);
    /* training mode drops attention weights: the output changes */
    nn_train(&ca->module, true);
    Tensor *out_train = nn_CausalAttention_forward(ca, x);
    bool differs = false;
    for (int64_t i = 0; i < torch_numel(out_train); i++)
        differs = differs || ac_data_float(out_train)[i] != ac_data_float(out_eval)[i];
    ck_assert(differs);
    nn_free(&d->module);
    nn_free(&ca->module);
}
END_TEST

/* A module of one's own, as a PyTorch class derives from nn.Module: made by
 * nn_module_new (freed whole by nn_free) or, on the stack, by nn_module_init
 * (nn_free frees what it holds, not the struct); misuse is an error. */
typedef struct { nn_Module module; nn_Linear *fc1, *fc2; } MLP;
static Tensor *mlp_forward(nn_Module *m, Tensor *x) {
    MLP *mlp = (MLP *)m;
    return nn_Linear_forward(mlp->fc2, torch_tanh(nn_Linear_forward(mlp->fc1, x)));
}

START_TEST(test_modules_of_your_own) {
    torch_manual_seed(0);
    MLP *h = nn_module_new(sizeof *h, "MLP", mlp_forward);
    h->fc1 = (nn_Linear *)nn_register_module(&h->module, "fc1", &nn_Linear_new(1, 8, true)->module);
    h->fc2 = (nn_Linear *)nn_register_module(&h->module, "fc2", &nn_Linear_new(8, 1, true)->module);
    torch_manual_seed(0);
    MLP st; /* on the stack: the same weights, the same forward */
    nn_module_init(&st.module, "MLP", mlp_forward);
    st.fc1 = (nn_Linear *)nn_register_module(&st.module, "fc1", &nn_Linear_new(1, 8, true)->module);
    st.fc2 = (nn_Linear *)nn_register_module(&st.module, "fc2", &nn_Linear_new(8, 1, true)->module);
    Tensor *x = torch_rand(SHAPE(5, 1));
    Tensor *a = nn_forward(&h->module, x), *b = nn_forward(&st.module, x);
    ck_assert(memcmp(a->data, b->data, 5 * sizeof(float)) == 0);
    nn_TensorList sd = nn_state_dict(&st.module);
    ck_assert_int_eq(sd.n, 4);
    ck_assert_str_eq(sd.names[2], "fc2.weight");
    nn_free(&h->module);
    nn_free(&st.module); /* no abort: the struct is the stack's */
    EXPECT_ERROR("nn_free: this is not a module", nn_free(&st.module)); /* a second time */
    MLP junk;
    memset(&junk, 0x5a, sizeof junk);
    EXPECT_ERROR("initialise it with nn_module_new or nn_module_init", nn_free(&junk.module));
    EXPECT_ERROR("cannot hold an nn_Module", nn_module_new(4, "tiny", NULL));
}
END_TEST

/* nn.Sequential: children "0", "1", ...; the forward runs them in turn. */
START_TEST(test_sequential) {
    torch_manual_seed(1);
    nn_Linear *l1 = nn_Linear_new(3, 4, true), *l2 = nn_Linear_new(4, 2, false);
    nn_GELU *g = nn_GELU_new();
    nn_Sequential *seq = nn_Sequential_new(MODULES(&l1->module, &g->module, &l2->module));
    Tensor *x = torch_randn(SHAPE(2, 3));
    Tensor *y = nn_forward(&seq->module, x);
    Tensor *want = nn_Linear_forward(l2, nn_GELU_forward(g, nn_Linear_forward(l1, x)));
    ck_assert(memcmp(y->data, want->data, 4 * sizeof(float)) == 0);
    nn_TensorList p = nn_named_parameters(&seq->module);
    ck_assert_int_eq(p.n, 3);
    ck_assert_str_eq(p.names[0], "0.weight");
    ck_assert_str_eq(p.names[1], "0.bias");
    ck_assert_str_eq(p.names[2], "2.weight");
    nn_free(&seq->module);
    nn_CrossAttention *c = nn_CrossAttention_new(2, 2, 2);
    EXPECT_ERROR("Sequential: module 0 (CrossAttention) has no one-input forward", nn_Sequential_new(MODULES(&c->module)));
    nn_free(&c->module);
}
END_TEST


/* ---- torch.nn.utils.clip_grad_norm_ against PyTorch 1.13 (tests/data/clip_grad_golden.txt, made by
 * tests/tools/gen_clip_grad_golden.py): the total norm and every clipped gradient, bit for bit ---------- */

static uint32_t fnv_floats(Tensor *t) {
    uint32_t h = 0x811C9DC5u;
    const unsigned char *b = (const unsigned char *)ac_data_float(t);
    for (size_t i = 0, n = (size_t)torch_numel(t) * sizeof(float); i < n; i++) h = (h ^ b[i]) * 0x01000193u;
    return h;
}

typedef struct { const char *name; uint64_t seed; int n; int64_t shapes[4][2]; int ndims[4]; double scale; int plant_k, plant_i; float plant; } ClipCase;

START_TEST(test_clip_grad_norm_vs_pytorch) {
    /* the cases of gen_clip_grad_golden.py, in its order (ndim 0: a parameter without .grad) */
    static const ClipCase cases[] = {
        {"small", 1, 4, {{3, 5}, {17}, {8, 8}, {1}}, {2, 1, 2, 1}, 2.0, -1, 0, 0},
        {"unclipped", 2, 3, {{3, 5}, {17}, {8, 8}}, {2, 1, 2}, 0.01, -1, 0, 0},
        {"max_norm_0.3", 3, 2, {{7, 9}, {31}}, {2, 1}, 1.0, -1, 0, 0},
        {"big", 4, 3, {{1000, 1001}, {768}, {3, 50257}}, {2, 1, 2}, 1.0, -1, 0, 0},
        {"inf_norm", 5, 3, {{3, 5}, {17}, {8, 8}}, {2, 1, 2}, 3.0, -1, 0, 0},
        {"one_inf_norm", 6, 1, {{40}}, {1}, 3.0, -1, 0, 0},
        {"a_nan", 7, 2, {{3, 5}, {17}}, {2, 1}, 1.0, 1, 4, NAN},
        {"an_inf", 8, 2, {{3, 5}, {17}}, {2, 1}, 1.0, 0, 2, INFINITY},
        {"some_without_grad", 9, 4, {{3, 5}, {0}, {9}, {0}}, {2, 0, 1, 0}, 5.0, -1, 0, 0},
        {"none_with_grad", 10, 2, {{0}, {0}}, {0, 0}, 1.0, -1, 0, 0},
    };
    char *text = read_text(data_path("clip_grad_golden.txt")), *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    int ncases = (int)(sizeof cases / sizeof *cases);
    for (int c = 0; c < ncases; c++) {
        const ClipCase *k = &cases[c];
        char name[64];
        double max_norm, norm_type;
        ck_assert_msg(line && sscanf(line, "case %63s %lf %lf", name, &max_norm, &norm_type) == 3 &&
                      !strcmp(name, k->name), "golden case %d: '%s'", c, line ? line : "(end)");
        ac_mark m = ac_arena_mark();
        torch_manual_seed(k->seed);
        Tensor *params[4];
        const char *names[4] = {"0", "1", "2", "3"};
        for (int i = 0; i < k->n; i++) {
            params[i] = torch_requires_grad_(torch_zeros(SHAPE(2)), true);
            if (k->ndims[i]) params[i]->grad = torch_mul_scalar(torch_sub_scalar(torch_rand(k->ndims[i], k->shapes[i]), 0.5), k->scale);
        }
        if (k->plant_k >= 0) ac_data_float(params[k->plant_k]->grad)[k->plant_i] = k->plant;
        Tensor *total = nn_clip_grad_norm_((nn_TensorList){k->n, names, params}, max_norm, norm_type);
        line = strtok_r(NULL, "\n", &save);
        double want;
        ck_assert(line && sscanf(line, "total %la", &want) == 1);
        float got = torch_item(total);
        ck_assert_msg(memcmp(&got, &(float){(float)want}, sizeof got) == 0 || (isnan(got) && isnan(want)),
                      "%s: total %a, PyTorch's %a", k->name, (double)got, want);
        for (int i = 0; i < k->n; i++) {
            line = strtok_r(NULL, "\n", &save);
            char h[32];
            int gi;
            ck_assert(line && sscanf(line, "grad %d %31s", &gi, h) == 2 && gi == i);
            if (!strcmp(h, "none")) {
                ck_assert_msg(params[i]->grad == NULL, "%s: parameter %d got a .grad", k->name, i);
                continue;
            }
            ck_assert_msg(fnv_floats(params[i]->grad) == (uint32_t)strtoul(h, NULL, 10), "%s: gradient %d differs from PyTorch's",
                          k->name, i);
        }
        ac_arena_release(m);
        line = strtok_r(NULL, "\n", &save);
    }
    ck_assert_msg(line == NULL, "more golden cases than the test knows: '%s'", line);
    free(text);
    /* what PyTorch refuses: another norm_type; and an empty gradient under inf (max of nothing), before any change */
    Tensor *p = torch_requires_grad_(torch_zeros(SHAPE(2)), true), *q = torch_requires_grad_(torch_zeros(SHAPE(2)), true);
    p->grad = torch_full(SHAPE(2), 3.0);
    EXPECT_ERROR("norm_type 3 is not supported", nn_clip_grad_norm_((nn_TensorList){1, NULL, &p}, 1.0, 3.0));
    q->grad = torch_zeros(SHAPE(0));
    Tensor *pq[2] = {p, q};
    EXPECT_ERROR("Expected reduction dim", nn_clip_grad_norm_((nn_TensorList){2, NULL, pq}, 1.0, INFINITY));
    ck_assert_float_eq(ac_data_float(p->grad)[0], 3.0f);
}
END_TEST

/* nn.ReLU() ... nn.Flatten() as modules: PyTorch's reprs, grad_fn names and outputs, in a Sequential.
 * The reprs are what repr(nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.SiLU(),
 * nn.Softmax(dim=1), nn.Flatten(), nn.GELU(), nn.Dropout(0.1), nn.LayerNorm(8),
 * nn.Embedding(10, 3, padding_idx=0), nn.Linear(3, 1, bias=False))) gives in PyTorch 1.13. */
START_TEST(test_activation_modules_and_reprs) {
    nn_Linear *l1 = nn_Linear_new(2, 8, true);
    nn_ReLU *relu = nn_ReLU_new();
    nn_Tanh *tanh_ = nn_Tanh_new();
    nn_Sigmoid *sig = nn_Sigmoid_new();
    nn_SiLU *silu = nn_SiLU_new();
    nn_Softmax *sm = nn_Softmax_new(1);
    nn_Flatten *fl = nn_Flatten_new(1, -1);
    nn_GELU *gelu = nn_GELU_new();
    nn_Dropout *dr = nn_Dropout_new(0.1);
    nn_LayerNorm *ln = nn_LayerNorm_new(8);
    nn_Embedding *emb = nn_Embedding_new_padded(10, 3, 0);
    nn_Linear *l2 = nn_Linear_new(3, 1, false);
    nn_Sequential *seq = nn_Sequential_new(MODULES(&l1->module, &relu->module, &tanh_->module, &sig->module, &silu->module,
                                                   &sm->module, &fl->module, &gelu->module, &dr->module, &ln->module,
                                                   &emb->module, &l2->module));
    ck_assert_str_eq(nn_module_repr(&seq->module),
                     "Sequential(\n  (0): Linear(in_features=2, out_features=8, bias=True)\n  (1): ReLU()\n  (2): Tanh()\n"
                     "  (3): Sigmoid()\n  (4): SiLU()\n  (5): Softmax(dim=1)\n  (6): Flatten(start_dim=1, end_dim=-1)\n"
                     "  (7): GELU(approximate='none')\n  (8): Dropout(p=0.1, inplace=False)\n"
                     "  (9): LayerNorm((8,), eps=1e-05, elementwise_affine=True)\n  (10): Embedding(10, 3, padding_idx=0)\n"
                     "  (11): Linear(in_features=3, out_features=1, bias=False)\n)");
    ck_assert_str_eq(nn_module_repr(nn_Sequential_get(seq, 5)), "Softmax(dim=1)");
    ck_assert_ptr_eq(nn_Sequential_get(seq, -1), &l2->module);
    nn_free(&seq->module);
    nn_Sequential *empty = nn_Sequential_new(0, NULL);
    ck_assert_str_eq(nn_module_repr(&empty->module), "Sequential()");
    nn_free(&empty->module);
    /* each module's forward: its op and its grad_fn name (x = torch.randn(2, 3, 4, requires_grad=True)) */
    Tensor *x = torch_requires_grad_(torch_randn(SHAPE(2, 3, 4)), true);
    struct { nn_Module *m; const char *grad_fn; Tensor *want; } cases[] = {
        {&nn_ReLU_new()->module, "ReluBackward0", torch_relu(x)},
        {&nn_Tanh_new()->module, "TanhBackward0", torch_tanh(x)},
        {&nn_Sigmoid_new()->module, "SigmoidBackward0", torch_sigmoid(x)},
        {&nn_SiLU_new()->module, "SiluBackward0", torch_silu(x)},
        {&nn_Softmax_new(1)->module, "SoftmaxBackward0", torch_softmax(x, 1)},
        {&nn_Flatten_new(1, -1)->module, "ReshapeAliasBackward0", torch_flatten(x, 1, -1)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Tensor *y = nn_forward(cases[i].m, x);
        ck_assert_str_eq(torch_grad_fn_name(y), cases[i].grad_fn);
        ck_assert_msg(torch_equal(y, cases[i].want), "%s: not its op's output", cases[i].m->type);
        nn_free(cases[i].m);
    }
    /* nn.Flatten()(x).shape, nn.Flatten(0, 1)(x).shape for x of (2, 3, 4): [2, 12], [6, 4] */
    nn_Flatten *f2 = nn_Flatten_new(0, 1);
    ck_assert_str_eq(torch_size_str(nn_Flatten_forward(f2, x)), "torch.Size([6, 4])");
    ck_assert_str_eq(nn_module_repr(&f2->module), "Flatten(start_dim=0, end_dim=1)");
    nn_free(&f2->module);
    /* torch.manual_seed(0); m = nn.Sequential(nn.Linear(3, 4), nn.SiLU(), nn.Softmax(dim=-1))
     * m(torch.tensor([[0.5, -1.0, 2.0], [0.25, 0.75, -0.5]])) */
    torch_manual_seed(0);
    nn_Linear *lin = nn_Linear_new(3, 4, true);
    nn_SiLU *act = nn_SiLU_new();
    nn_Softmax *soft = nn_Softmax_new(-1);
    nn_Sequential *m = nn_Sequential_new(MODULES(&lin->module, &act->module, &soft->module));
    Tensor *in = torch_tensor((float[]){0.5f, -1.0f, 2.0f, 0.25f, 0.75f, -0.5f}, SHAPE(2, 3));
    assert_repr(nn_Sequential_forward(m, in), "tensor([[0.2185, 0.2733, 0.2198, 0.2884],\n"
                                              "        [0.2521, 0.2068, 0.2808, 0.2604]], grad_fn=<SoftmaxBackward0>)");
    nn_free(&m->module);
}
END_TEST

/* print(model) of a module of one's own: its children's reprs indented, as appendix A's NeuralNetwork */
static char *two_line_repr(nn_Module *m) { return nn_repr_printf("first line\nsecond line"); }
START_TEST(test_module_repr_nesting) {
    nn_Module *outer = nn_module_new(sizeof(nn_Module), "Outer", NULL);
    nn_Linear *a = nn_Linear_new(50, 30, true);
    nn_ReLU *r = nn_ReLU_new();
    nn_register_module(outer, "layers", &nn_Sequential_new(MODULES(&a->module, &r->module))->module);
    ck_assert_str_eq(nn_module_repr(outer), "Outer(\n  (layers): Sequential(\n"
                                            "    (0): Linear(in_features=50, out_features=30, bias=True)\n"
                                            "    (1): ReLU()\n  )\n)");
    /* an extra_repr of two lines, and children: each line its own line (nn.Module.__repr__) */
    outer->extra_repr = two_line_repr;
    ck_assert_str_eq(nn_module_repr(outer), "Outer(\n  first line\n  second line\n  (layers): Sequential(\n"
                                            "    (0): Linear(in_features=50, out_features=30, bias=True)\n"
                                            "    (1): ReLU()\n  )\n)");
    nn_free(outer);
    EXPECT_ERROR("this is not a module", nn_module_repr(&(nn_Module){0}));
}
END_TEST

Suite *suite_nn(void) {
    Suite *s = suite_create("nn");
    TCase *tc = tcase("modules");
    tcase_add_test(tc, test_attention_modules_vs_pytorch);
    tcase_add_test(tc, test_clip_grad_norm_vs_pytorch);
    tcase_add_test(tc, test_layers_vs_pytorch);
    tcase_add_test(tc, test_toylm_init_matches_pytorch);
    tcase_add_test(tc, test_wrapper_first_column_is_the_single_head);
    tcase_add_test(tc, test_batched_mha_equals_wrapper_of_causal_heads);
    tcase_add_test(tc, test_causal_weights_and_dropout_modes);
    tcase_add_test(tc, test_modules_of_your_own);
    tcase_add_test(tc, test_sequential);
    tcase_add_test(tc, test_activation_modules_and_reprs);
    tcase_add_test(tc, test_module_repr_nesting);
    suite_add_tcase(s, tc);
    return s;
}
