/* Chapter 6's frozen model and appendix E's LoRA (nn/lora.c, nn/gpt/classifier.c) against what the
 * book's classes do in PyTorch (tests/data/lora_golden.txt and lora_repr_expected.txt, made by
 * tests/tools/gen_lora_golden.py) on a small GPTModel: the trainable counts, LoRA's draws, the last
 * token's logits, the first step's gradients and three AdamW steps' losses, print(model).
 * Exact math: the draws bit for bit; logits and losses within 1e-6 relative; gradients within 1e-8
 * absolute + 1e-6 relative (the small ones are sums that cancel: a few ulps of their terms). */
#include <math.h>
#include <stdlib.h>

#include "gpt.h"
#include "tests.h"

#define GOLD "lora_golden.txt"

static nn_GPTConfig small_cfg(void) {
    return (nn_GPTConfig){.vocab_size = 97, .context_length = 16, .emb_dim = 12, .n_heads = 2, .n_layers = 2,
                          .drop_rate = 0.0, .qkv_bias = true};
}

static Tensor *batch_x(void) {
    return torch_tensor_long((const int64_t[]){5, 17, 3, 90, 42, 8, 61, 1, 2, 3, 4, 5, 6, 7}, SHAPE(2, 7));
}
static Tensor *batch_y(void) { return torch_tensor_long((const int64_t[]){0, 1}, SHAPE(2)); }

static void expect_count(int64_t got, const char *name) {
    Golden g = golden(GOLD, name);
    ck_assert_msg(got == (int64_t)g.v[0], "%s: %lld, PyTorch %.0f", name, (long long)got, g.v[0]);
}

static Tensor *param(nn_Module *m, const char *name) {
    nn_TensorList l = nn_named_parameters(m);
    for (int i = 0; i < l.n; i++)
        if (strcmp(l.names[i], name) == 0) return l.tensors[i];
    ck_abort_msg("no parameter %s", name);
    return NULL;
}

/* the model of finetune.py's model_for: manual_seed, GPTModel(cfg), eval() */
static nn_GPTModel *new_model(void) {
    torch_manual_seed(123);
    nn_GPTModel *m = nn_GPTModel_new(small_cfg());
    nn_eval(&m->module);
    return m;
}

static void new_head(nn_GPTModel *m) {
    torch_manual_seed(123);
    m->out_head = (nn_Linear *)nn_setattr(&m->module, "out_head", &nn_Linear_new(m->cfg.emb_dim, 2, true)->module);
}

/* three AdamW steps on the fixed batch; the first step's gradients of `grads` against PyTorch's, and
 * that no frozen parameter got a gradient or changed */
static void train3(nn_GPTModel *m, const char *prefix, const char *const *grads, int n_grads) {
    nn_TensorList ps = nn_named_parameters(&m->module);
    Tensor **before = ac_arena_alloc(sizeof(Tensor *) * (size_t)ps.n);
    for (int i = 0; i < ps.n; i++) before[i] = torch_clone(ps.tensors[i]);
    torch_manual_seed(123);
    optim_Optimizer *opt = optim_AdamW(ps, 0.01, 0.9, 0.999, 1e-8, 0.1, false);
    double losses[3];
    char name[256];
    for (int step = 0; step < 3; step++) {
        optim_zero_grad(opt);
        Tensor *loss = gpt_calc_loss_batch_cls(batch_x(), batch_y(), m);
        torch_backward(loss, NULL);
        if (step == 0) {
            for (int k = 0; k < n_grads; k++) {
                snprintf(name, sizeof name, "%sgrad.%s", prefix, grads[k]);
                Tensor *p = param(&m->module, grads[k]);
                ck_assert_msg(p->grad, "%s has no gradient", grads[k]);
                assert_tensor_golden(p->grad, GOLD, name, 1e-8, 1e-6);
            }
        }
        optim_step(opt);
        losses[step] = torch_item(loss);
    }
    snprintf(name, sizeof name, "%slosses", prefix);
    Golden g = golden(GOLD, name);
    for (int i = 0; i < 3; i++) ck_assert_msg(fabs(losses[i] - g.v[i]) <= 1e-6 * fabs(g.v[i]), "%s step %d: %.9g, PyTorch %.9g", prefix, i, losses[i], g.v[i]);
    for (int i = 0; i < ps.n; i++) {
        Tensor *p = ps.tensors[i];
        if (p->requires_grad) continue;
        ck_assert_msg(!p->grad, "frozen %s got a gradient", ps.names[i]);
        ck_assert_msg(memcmp(p->data, before[i]->data, sizeof(float) * (size_t)torch_numel(p)) == 0, "frozen %s changed", ps.names[i]);
    }
    optim_free(opt);
}

START_TEST(test_chapter6_frozen_model) {
    ac_set_exact(true);
    nn_GPTModel *m = new_model();
    nn_requires_grad_(&m->module, false);                                  /* for p in model.parameters(): p.requires_grad = False */
    new_head(m);
    nn_requires_grad_(nn_Sequential_get(m->trf_blocks, -1), true);         /* model.trf_blocks[-1] */
    nn_requires_grad_(&m->final_norm->module, true);
    expect_count(nn_num_trainable_parameters(&m->module), "cls.trainable");
    ck_assert_int_eq(m->out_head->out_features, 2);
    {
        bool prev = torch_no_grad_enter();
        assert_tensor_golden(gpt_last_token_logits(m, batch_x()), GOLD, "cls.logits", 1e-9, 1e-6);
        torch_no_grad_exit(prev);
    }
    static const char *const grads[] = {"out_head.weight", "out_head.bias", "trf_blocks.1.ff.layers.0.weight",
                                        "final_norm.scale", "trf_blocks.1.att.W_query.bias"};
    train3(m, "cls.", grads, 5);
    nn_free(&m->module);
    ac_set_exact(false);
}
END_TEST

START_TEST(test_appendix_e_lora) {
    ac_set_exact(true);
    nn_GPTModel *m = new_model();
    new_head(m);
    expect_count(nn_num_trainable_parameters(&m->module), "lora.trainable_before");
    nn_requires_grad_(&m->module, false);
    expect_count(nn_num_trainable_parameters(&m->module), "lora.trainable_after");
    nn_replace_linear_with_lora(&m->module, 2, 4);
    expect_count(nn_num_trainable_parameters(&m->module), "lora.trainable_lora");
    nn_LinearWithLoRA *wq = (nn_LinearWithLoRA *)nn_get_submodule(&nn_GPTModel_block(m, 0)->att->module, "W_query");
    ck_assert_str_eq(wq->module.type, "LinearWithLoRA");
    ck_assert_ptr_eq(wq->linear, nn_GPTModel_block(m, 0)->att->W_query); /* the typed field: the Linear inside */
    assert_tensor_golden(wq->lora->A, GOLD, "lora.A0", 0, 0);           /* the draws, bit for bit */
    nn_LinearWithLoRA *head = (nn_LinearWithLoRA *)nn_get_submodule(&m->module, "out_head");
    assert_tensor_golden(head->lora->A, GOLD, "lora.A_last", 0, 0);
    {
        bool prev = torch_no_grad_enter();
        torch_fill_(wq->lora->B, 0.25);                                  /* B = 0 would hide the LoRA path */
        assert_tensor_golden(gpt_last_token_logits(m, batch_x()), GOLD, "lora.logits", 1e-9, 1e-6);
        torch_fill_(wq->lora->B, 0.0);
        torch_no_grad_exit(prev);
    }
    static const char *const grads[] = {"trf_blocks.0.att.W_query.lora.B", "trf_blocks.1.ff.layers.2.lora.A",
                                        "out_head.lora.B"};
    train3(m, "lora.", grads, 3);
    expect_count(nn_state_dict(&m->module).n, "lora.state_dict_len");
    char *want = read_text(data_path("lora_repr_expected.txt"));
    char *got = nn_module_repr(&m->module);
    size_t n = strlen(got);
    ck_assert_msg(strncmp(got, want, n) == 0 && want[n] == '\n' && want[n + 1] == 0, "print(model) differs:\n%s", got);
    free(want);
    nn_free(&m->module);
    ac_set_exact(false);
}
END_TEST

START_TEST(test_lora_refusals) {
    EXPECT_ERROR("rank must be >= 1, got 0", nn_LoRALayer_new(4, 4, 0, 16));
    nn_Linear *l = nn_Linear_new(3, 2, true);
    EXPECT_ERROR("rank must be >= 1, got -1", nn_LinearWithLoRA_new(l, -1, 16));
    nn_free(&l->module); /* the refusal left it where it was */
    EXPECT_ERROR("expected an nn.Linear", nn_LinearWithLoRA_new(NULL, 2, 16));
    nn_GPTModel *m = new_model();
    EXPECT_ERROR("'GPTModel' object has no attribute 'head'", nn_get_submodule(&m->module, "head"));
    nn_free(&m->module);
}
END_TEST

/* setattr frees what it replaces (ASan/valgrind would see a leak or a double free), keeps the order */
START_TEST(test_setattr_order_and_ownership) {
    nn_Sequential *s = nn_Sequential_new(MODULES(&nn_Linear_new(2, 3, true)->module, &nn_ReLU_new()->module));
    nn_setattr(&s->module, "1", &nn_Tanh_new()->module);
    nn_replace_linear_with_lora(&s->module, 1, 1);
    ck_assert_str_eq(nn_module_repr(&s->module),
                     "Sequential(\n  (0): LinearWithLoRA(\n    (linear): Linear(in_features=2, out_features=3, bias=True)\n"
                     "    (lora): LoRALayer()\n  )\n  (1): Tanh()\n)");
    nn_free(&s->module);
}
END_TEST

Suite *suite_finetune(void) {
    Suite *s = suite_create("finetune");
    TCase *tc = tcase("finetune");
    tcase_add_test(tc, test_chapter6_frozen_model);
    tcase_add_test(tc, test_appendix_e_lora);
    tcase_add_test(tc, test_lora_refusals);
    tcase_add_test(tc, test_setattr_order_and_ownership);
    suite_add_tcase(s, tc);
    return s;
}
