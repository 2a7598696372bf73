/* Optimizers against torch.optim (5 steps from the same start; parameters
 * within 1e-6 + 1e-5 relative), and their state saved and restored. */
#include <math.h>
#include <stdlib.h>

#include "tests.h"

typedef optim_Optimizer *(*Make)(nn_TensorList);

static void run(const char *name, Make make) {
    torch_manual_seed(12);
    Tensor *p = nn_Parameter(torch_randn(SHAPE(7)));
    Tensor *t = torch_randn(SHAPE(7));
    optim_Optimizer *opt = make((nn_TensorList){1, (const char *[]){"p"}, &p});
    for (int s = 0; s < 5; s++) {
        ac_mark m = ac_arena_mark();
        optim_zero_grad(opt);
        /* ((p - t) ** 2 * torch.arange(1., 8.)).sum().backward() */
        Tensor *l = torch_sum(torch_mul(torch_pow(torch_sub(p, t), 2.0), torch_arange_float(1, 8, 1)));
        torch_backward(l, NULL);
        optim_step(opt);
        ac_arena_release(m);
    }
    char key[64];
    snprintf(key, sizeof key, "optim.%s", name);
    assert_tensor_golden(p, "nn_golden.txt", key, 1e-6, 1e-5);
    optim_free(opt);
    ac_free(p);
}

static optim_Optimizer *sgd(nn_TensorList ps) { return optim_SGD(ps, 0.01, 0, 0, 0, false); }
static optim_Optimizer *sgd_mom(nn_TensorList ps) { return optim_SGD(ps, 0.01, 0.9, 0.1, 0.01, false); }
static optim_Optimizer *sgd_nesterov(nn_TensorList ps) { return optim_SGD(ps, 0.01, 0.9, 0, 0, true); }
static optim_Optimizer *adam(nn_TensorList ps) { return optim_Adam(ps, 0.01, 0.9, 0.999, 1e-8, 0, false); }
static optim_Optimizer *adam_wd_ams(nn_TensorList ps) { return optim_Adam(ps, 0.01, 0.9, 0.999, 1e-8, 0.1, true); }
static optim_Optimizer *adamw(nn_TensorList ps) { return optim_AdamW(ps, 0.01, 0.9, 0.999, 1e-8, 1e-2, false); }
static optim_Optimizer *adamw_b(nn_TensorList ps) { return optim_AdamW(ps, 0.02, 0.8, 0.99, 1e-6, 0.05, false); }

START_TEST(test_optimizers_vs_pytorch) {
    run("sgd", sgd);
    run("sgd_mom", sgd_mom);
    run("sgd_nesterov", sgd_nesterov);
    run("adam", adam);
    run("adam_wd_ams", adam_wd_ams);
    run("adamw", adamw);
    run("adamw_b", adamw_b);
}
END_TEST

START_TEST(test_state_roundtrip_and_skips) {
    torch_manual_seed(1);
    Tensor *a = nn_Parameter(torch_randn(SHAPE(3))), *b = nn_Parameter(torch_randn(SHAPE(2, 2)));
    nn_TensorList ps = {2, (const char *[]){"a", "b"}, (Tensor *[]){a, b}};
    optim_Optimizer *o1 = optim_Adam(ps, 0.1, 0.9, 0.999, 1e-8, 0, false);
    torch_backward(torch_sum(torch_mul(a, a)), NULL); /* b gets no gradient: skipped, as torch does */
    float b0 = ac_data_float(b)[0];
    optim_step(o1);
    ck_assert(ac_data_float(b)[0] == b0);
    nn_TensorList st = optim_state_dict(o1);
    ck_assert_int_eq(st.n, 3); /* state.0.step, state.0.exp_avg, state.0.exp_avg_sq */
    ck_assert_str_eq(st.names[0], "state.0.step");
    optim_Optimizer *o2 = optim_Adam(ps, 0.1, 0.9, 0.999, 1e-8, 0, false);
    char err[256];
    ck_assert(optim_load_state_dict(o2, st, true, err, sizeof err));
    ck_assert(o2->step[0] == 1.0);
    ck_assert(ac_data_float(o2->exp_avg[0])[1] == ac_data_float(o1->exp_avg[0])[1]);
    /* a state that does not fit is refused and changes nothing */
    Tensor *bad = torch_zeros(SHAPE(4));
    nn_TensorList wrong = {1, (const char *[]){"state.0.exp_avg"}, &bad};
    ck_assert(!optim_load_state_dict(o2, wrong, true, err, sizeof err));
    ck_assert_msg(strstr(err, "has shape [4], but parameter 0 has shape [3]") != NULL, "%s", err);
    nn_TensorList unknown = {1, (const char *[]){"state.7.exp_avg"}, &bad};
    ck_assert(!optim_load_state_dict(o2, unknown, true, err, sizeof err));
    ck_assert(ac_data_float(o2->exp_avg[0])[1] == ac_data_float(o1->exp_avg[0])[1]);
    optim_free(o1);
    optim_free(o2);
    ac_free(a);
    ac_free(b);
}
END_TEST


/* param_group["lr"] = lr between steps (appendix D's schedule): opt->lr, the state kept, against
 * PyTorch (tests/data/set_lr_golden.txt, made by tests/tools/gen_set_lr_golden.py), bit for bit */
START_TEST(test_set_lr_between_steps) {
    static const double lrs[] = {0.1, 0.05, 0.2, 0.001};
    char *text = read_text(data_path("set_lr_golden.txt")), *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    for (int o = 0; o < 3; o++) {
        static const char *names[] = {"sgd", "adam", "adamw"};
        char want_name[16];
        ck_assert(line && sscanf(line, "opt %15s", want_name) == 1 && !strcmp(want_name, names[o]));
        torch_manual_seed(11);
        Tensor *p = nn_Parameter(torch_rand(SHAPE(6)));
        const char *pn = "p";
        nn_TensorList params = {1, &pn, &p};
        optim_Optimizer *opt = o == 0 ? optim_SGD(params, 1.0, 0.9, 0.0, 0.0, false)
                             : o == 1 ? optim_Adam(params, 1.0, 0.9, 0.999, 1e-8, 0.0, false)
                                      : optim_AdamW(params, 1.0, 0.9, 0.999, 1e-8, 0.1, false);
        for (int step = 0; step < 4; step++) {
            p->grad = torch_sub_scalar(torch_rand(SHAPE(6)), 0.5);             /* p.grad = torch.rand(6) - 0.5 */
            opt->lr = lrs[step];                                                /* param_group["lr"] = lr */
            optim_step(opt);
            line = strtok_r(NULL, "\n", &save);
            ck_assert(line && !strncmp(line, "param ", 6));
            const char *at = line + 6;
            for (int i = 0; i < 6; i++) {
                char *end;
                float want = (float)strtod(at, &end);
                at = end;
                float got = ac_data_float(p)[i];
                ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "%s step %d element %d: %a, PyTorch's %a", names[o], step,
                              i, (double)got, (double)want);
            }
        }
        p->grad = NULL; /* an arena tensor: not the parameter's to free */
        optim_free(opt);
        ac_free(p);
        line = strtok_r(NULL, "\n", &save);
    }
    free(text);
}
END_TEST

Suite *suite_optim(void) {
    Suite *s = suite_create("optim");
    TCase *tc = tcase("optimizers");
    tcase_add_test(tc, test_optimizers_vs_pytorch);
    tcase_add_test(tc, test_state_roundtrip_and_skips);
    tcase_add_test(tc, test_set_lr_between_steps);
    suite_add_tcase(s, tc);
    return s;
}
