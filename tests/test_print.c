/* The printer against ../shared/spec/print-golden.txt, character for character.
 *
 * Level 1, every record: the tensor torch printed (dtype, shape, Parameter,
 * requires_grad, grad_fn name and its exact values, from
 * tests/data/print_records.txt) is rebuilt here and printed. A line there is
 *   IDX tensor DTYPE IS_PARAM REQUIRES_GRAD GRAD_FN NDIM SHAPE... NUMEL VALUES...
 * (f32 values as hex bits; for summarised tensors the hidden elements are
 * runs "xN", filled with 1e30 so that a printer looking at them would fail), or
 *   IDX size NDIM SHAPE...
 * Level 2, every record: the same tensor computed end to end in C (generator,
 * modules, ops) must print the same text. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"
#include "tests.h"

#define N_RECORDS 122

typedef struct { char *code, *printed; } Record;

/* Split print-golden.txt into records: ">>> " lines, then the printed text up
 * to an empty line that is followed by ">>> " (or the end). */
static int parse_golden(char *text, Record *out) {
    int n = 0;
    char *p = text;
    while (*p && strncmp(p, ">>> ", 4) != 0) p = strchr(p, '\n') + 1; /* header comments */
    while (*p && n < N_RECORDS) {
        out[n].code = p;
        while (strncmp(p, ">>> ", 4) == 0) p = strchr(p, '\n') + 1;
        p[-1] = 0;
        out[n].printed = p;
        char *end = strstr(p, "\n\n>>> ");
        if (end) {
            *end = 0;
            p = end + 2;
        } else {
            size_t len = strlen(p);
            while (len && p[len - 1] == '\n') p[--len] = 0;
            p += len;
        }
        n++;
    }
    return n;
}

static Tensor *with_flags(Tensor *t, int is_param, int rg, const char *gf) {
    if (strcmp(gf, "-") != 0) {
        Node *n = ac_arena_alloc(sizeof(Node));
        memset(n, 0, sizeof *n);
        n->name = strcpy(ac_arena_alloc(strlen(gf) + 1), gf);
        t->grad_fn = n;
        t->requires_grad = true;
    } else if (rg) {
        t->requires_grad = true;
    }
    t->is_param = is_param;
    return t;
}

START_TEST(test_every_record_printer_only) {
    char *golden_text = read_text(shared_path("spec/print-golden.txt"));
    char *recs_text = read_text(data_path("print_records.txt"));
    Record recs[N_RECORDS];
    ck_assert_int_eq(parse_golden(golden_text, recs), N_RECORDS);
    int checked = 0;
    for (char *line = strtok(recs_text, "\n"); line; line = strtok(NULL, "\n")) {
        char *p = line;
        int idx = (int)strtol(p, &p, 10);
        while (*p == ' ') p++;
        ac_mark m = ac_arena_mark();
        if (strncmp(p, "size", 4) == 0) {
            p += 4;
            int nd = (int)strtol(p, &p, 10);
            int64_t shape[AC_MAX_DIMS];
            for (int d = 0; d < nd; d++) shape[d] = strtoll(p, &p, 10);
            const char *got = torch_size_str(torch_zeros(nd, shape));
            ck_assert_msg(strcmp(got, recs[idx].printed) == 0, "record %d: %s vs %s", idx, got, recs[idx].printed);
        } else {
            char dt[8], gf[64];
            int isp, rg, nd, used;
            ck_assert(sscanf(p, "tensor %7s %d %d %63s %d%n", dt, &isp, &rg, gf, &nd, &used) == 5);
            p += used;
            int64_t shape[AC_MAX_DIMS];
            for (int d = 0; d < nd; d++) shape[d] = strtoll(p, &p, 10);
            int64_t n = strtoll(p, &p, 10);
            ac_dtype dtype = strcmp(dt, "f32") == 0 ? AC_FLOAT32 : strcmp(dt, "f64") == 0 ? AC_FLOAT64
                           : strcmp(dt, "i64") == 0 ? AC_INT64 : strcmp(dt, "i32") == 0 ? AC_INT32 : AC_BOOL;
            Tensor *t = torch_empty(nd, shape, dtype);
            for (int64_t i = 0; i < n;) {
                while (*p == ' ') p++;
                if (*p == 'x') { /* a run of hidden elements */
                    int64_t run = strtoll(p + 1, &p, 10);
                    for (int64_t k = 0; k < run; k++, i++) {
                        ck_assert(dtype == AC_FLOAT32 || dtype == AC_INT64);
                        if (dtype == AC_FLOAT32) ((float *)t->data)[i] = 1e30f;
                        else ((int64_t *)t->data)[i] = 999999999999LL;
                    }
                    continue;
                }
                switch (dtype) {
                case AC_FLOAT32: {
                    uint32_t bits = (uint32_t)strtoul(p, &p, 16);
                    memcpy((float *)t->data + i, &bits, 4);
                    break;
                }
                case AC_FLOAT64: ((double *)t->data)[i] = strtod(p, &p); break;
                case AC_INT64: ((int64_t *)t->data)[i] = strtoll(p, &p, 10); break;
                case AC_INT32: ((int32_t *)t->data)[i] = (int32_t)strtol(p, &p, 10); break;
                default: ((bool *)t->data)[i] = strtol(p, &p, 10) != 0; break;
                }
                i++;
            }
            with_flags(t, isp, rg, gf);
            const char *got = torch_repr(t);
            ck_assert_msg(strcmp(got, recs[idx].printed) == 0, "record %d (%s):\n%s\nexpected:\n%s", idx,
                          recs[idx].code, got, recs[idx].printed);
        }
        ac_arena_release(m);
        checked++;
    }
    ck_assert_int_eq(checked, N_RECORDS);
    free(golden_text);
    free(recs_text);
}
END_TEST

/* ---- level 2: computed end to end ------------------------------------------------------------ */

static Tensor *params[8];
static int n_params;
static Tensor *P(Tensor *t) { return params[n_params++] = nn_Parameter(t); }
static nn_Module *mods[4];
static int n_mods;
static void *M(nn_Module *m) { return mods[n_mods++] = m; }

#define T1(...) torch_tensor((const float[]){__VA_ARGS__}, SHAPE(AC_NARGS_F(__VA_ARGS__)))
#define AC_NARGS_F(...) ((int64_t)(sizeof((float[]){__VA_ARGS__}) / sizeof(float)))
#define SEED(s) torch_manual_seed(s)

static Tensor *build(int i) {
    const float x3[] = {0.43f, 0.15f, 0.89f, 0.55f, 0.87f, 0.66f, 0.57f, 0.85f, 0.64f};
    Tensor *W;
    switch (i) {
    case 0: return T1(0.3374f, -0.1778f, -0.1690f);
    case 1: SEED(123); return ((nn_Embedding *)M(&nn_Embedding_new(6, 3)->module))->weight;
    case 2: SEED(123); return ((nn_Embedding *)M(&nn_Embedding_new(50000, 3)->module))->weight;
    case 3: {
        SEED(123);
        nn_Embedding *e = M(&nn_Embedding_new(50000, 3)->module);
        return nn_Embedding_forward(e, torch_tensor_long((const int64_t[]){0, 4, 5, 2, 1, 3}, SHAPE(6)));
    }
    case 4: SEED(123); return torch_rand(SHAPE(3, 2));
    case 5: SEED(123); return P(torch_rand(SHAPE(3, 2)));
    case 6: SEED(123); return ((nn_Linear *)M(&nn_Linear_new(3, 2, true)->module))->weight;
    case 7: SEED(123); return ((nn_Linear *)M(&nn_Linear_new(3, 2, true)->module))->bias;
    case 8: {
        SEED(123);
        nn_Linear *l = M(&nn_Linear_new(3, 2, true)->module);
        return nn_Linear_forward(l, torch_tensor(x3, SHAPE(2, 3)));
    }
    case 9: return T1(1.0f, 2.0f, 3.0f);
    case 10: return torch_zeros(SHAPE(2, 3));
    case 11: return T1(1e-5f, 1.0f);
    case 12: return T1(0.0001f, 0.5f);
    case 13: return T1(0.00011f, 0.5f);
    case 14: return T1(12345.678f, 1.0f);
    case 15: return T1(12345.678f);
    case 16: return T1(0.5f, 123.25f);
    case 17: return T1(1.0f, 1000.0f);
    case 18: return T1(1.0f, 1001.0f);
    case 19: return T1(123456789.0f);
    case 20: return T1(99999999.0f, 1.0f);
    case 21: return T1(0.001f, 0.9999f);
    case 22: return T1(-1.5e-3f, 2.25f, -3.0f);
    case 23: return T1(INFINITY, -INFINITY, NAN, 1.0f);
    case 24: return T1(INFINITY, -INFINITY, NAN);
    case 25: return T1(-INFINITY, 0.5f, -0.25f);
    case 26: return T1(1.0f, -INFINITY);
    case 27: return T1(1e-5f, NAN, -2.0f);
    case 28: return T1(-0.0f, 1.5f);
    case 29: return T1(-0.0f, 0.0f);
    case 30: return T1(0.0f, 1e-8f);
    case 31: return torch_arange_float(0, 30, 1);
    case 32: return torch_arange(30);
    case 33: return torch_add_scalar(torch_arange_float(0, 8, 1), 0.5);
    case 34: return torch_add_scalar(torch_arange_float(0, 9, 1), 0.5);
    case 35: return torch_neg(torch_add_scalar(torch_arange_float(0, 9, 1), 0.5));
    case 36: SEED(0); return torch_randn(SHAPE(25));
    case 37: SEED(0); return torch_randn(SHAPE(3, 12));
    case 38: SEED(0); return torch_randn(SHAPE(2, 3, 4));
    case 39: SEED(0); return torch_randn(SHAPE(2, 2, 2, 2));
    case 40: SEED(0); return torch_mul_scalar(torch_randn(SHAPE(2, 3, 9)), 1000);
    case 41: return torch_arange_float(0, 2000, 1);
    case 42: return torch_arange(1001);
    case 43: return torch_reshape(torch_arange(1200), SHAPE(40, 30));
    case 44: SEED(0); return torch_randn(SHAPE(10, 10, 11));
    case 45: return torch_tensor_long((const int64_t[]){0, 4, 5, 2, 1, 3}, SHAPE(6));
    case 46: return torch_tensor_long((const int64_t[]){-1, 100, 7}, SHAPE(3));
    case 47: return torch_tensor_long((const int64_t[]){1, 2, 3, 40}, SHAPE(2, 2));
    case 48: return torch_tensor_bool((const bool[]){true, false}, SHAPE(2));
    case 49: return torch_scalar_tensor(1.2903);
    case 50: return torch_tensor_long((const int64_t[]){3}, 0, NULL);
    case 51: return torch_scalar_tensor(-0.5);
    case 52: return torch_scalar_tensor(2.0);
    case 53: return torch_scalar_tensor(1e-6);
    case 54: return torch_tensor(NULL, SHAPE(0));
    case 55: return torch_zeros(SHAPE(0, 3));
    case 56: return torch_tensor_double((const double[]){1.5, 2.5}, SHAPE(2));
    case 57: return torch_tensor_int((const int32_t[]){1, 2}, SHAPE(2));
    case 59: return torch_requires_grad_(torch_scalar_tensor(2.0), true);
    case 60: return torch_requires_grad_(T1(1.0f, 2.0f), true);
    case 61: SEED(123); W = P(torch_rand(SHAPE(3, 2))); return torch_matmul(torch_tensor(x3, SHAPE(3, 3)), W);
    case 62: SEED(123); W = P(torch_rand(SHAPE(3, 2))); return torch_matmul(T1(0.55f, 0.87f, 0.66f), W);
    case 63:
    case 64: {
        SEED(123);
        W = P(torch_rand(SHAPE(3, 2)));
        Tensor *q = torch_matmul(T1(0.55f, 0.87f, 0.66f), W);
        return i == 63 ? torch_dot(q, q) : torch_matmul(q, q);
    }
    case 65: SEED(123); W = P(torch_rand(SHAPE(6, 3))); return torch_matmul(W, torch_T(W));
    case 66: SEED(123); return torch_T(P(torch_rand(SHAPE(6, 3))));
    case 67: SEED(123); return torch_transpose(P(torch_rand(SHAPE(6, 3))), 0, 1);
    case 68: SEED(123); return torch_transpose(P(torch_rand(SHAPE(2, 3, 2))), 1, 2);
    case 69: SEED(123); W = P(torch_rand(SHAPE(2, 3, 2))); return torch_matmul(W, torch_transpose(W, 1, 2));
    case 70: SEED(123); W = P(torch_rand(SHAPE(3, 2))); return torch_matmul(W, T1(0.55f, 0.87f));
    case 71: SEED(123); return torch_softmax(P(torch_rand(SHAPE(6, 6))), -1);
    case 72: SEED(123); return torch_softmax(torch_div_scalar(P(torch_rand(SHAPE(6, 6))), pow(3, 0.5)), 1);
    case 73:
    case 74: {
        SEED(123);
        W = P(torch_rand(SHAPE(4, 4)));
        Tensor *m = torch_masked_fill(W, torch_to_bool(torch_triu(torch_ones(SHAPE(4, 4)), 1)), -INFINITY);
        return i == 73 ? m : torch_softmax(m, -1);
    }
    case 75: SEED(123); W = P(torch_rand(SHAPE(2, 2))); return torch_cat(TENSORS(W, W), -1);
    case 76: SEED(123); W = P(torch_rand(SHAPE(2, 2))); return torch_mul(W, W);
    case 77: SEED(123); return torch_mul_scalar(P(torch_rand(SHAPE(2, 2))), 2);
    case 78: SEED(123); return torch_div_scalar(P(torch_rand(SHAPE(2, 2))), 2.0);
    case 79: SEED(123); W = P(torch_rand(SHAPE(2, 2))); return torch_add(W, W);
    case 80: SEED(123); return torch_add_scalar(P(torch_rand(SHAPE(2, 2))), 1);
    case 81: SEED(123); return torch_sub_scalar(P(torch_rand(SHAPE(2, 2))), 1);
    case 82: SEED(123); return torch_sum(P(torch_rand(SHAPE(2, 2))));
    case 83: SEED(123); return torch_sum_dim(P(torch_rand(SHAPE(2, 2))), SHAPE(0), false);
    case 84: SEED(123); return torch_mean(P(torch_rand(SHAPE(2, 2))));
    case 85: SEED(123); return torch_mean_dim(P(torch_rand(SHAPE(2, 2))), SHAPE(-1), true);
    case 86: SEED(123); return torch_tril(P(torch_rand(SHAPE(4, 4))), 0);
    case 87: {
        SEED(123);
        nn_Embedding *e = M(&nn_Embedding_new(6, 3)->module);
        return nn_Embedding_forward(e, torch_tensor_long((const int64_t[]){2, 3, 5, 1}, SHAPE(4)));
    }
    case 88: SEED(123); return torch_select(P(torch_rand(SHAPE(4, 3))), 0, 1);
    case 89: SEED(123); return torch_select(P(torch_rand(SHAPE(4, 3))), 1, 0);
    case 90: SEED(123); return torch_slice(P(torch_rand(SHAPE(4, 3))), 0, 1, 3);
    case 91:
        SEED(123);
        return torch_index(P(torch_rand(SHAPE(4, 3))), torch_tensor_long((const int64_t[]){0, 2}, SHAPE(2)));
    case 92:
        SEED(123);
        return torch_index_select(P(torch_rand(SHAPE(4, 3))), 0, torch_tensor_long((const int64_t[]){0, 2}, SHAPE(2)));
    case 93: SEED(123); return torch_view(P(torch_rand(SHAPE(4, 3))), SHAPE(2, 6));
    case 94: SEED(123); return torch_reshape(P(torch_rand(SHAPE(4, 3))), SHAPE(3, 4));
    case 95: SEED(123); return torch_reshape(torch_T(P(torch_rand(SHAPE(4, 3)))), SHAPE(12));
    case 96: SEED(123); return torch_reshape(P(torch_rand(SHAPE(4, 3))), SHAPE(-1)); /* flatten() */
    case 97: SEED(123); return torch_unsqueeze(P(torch_rand(SHAPE(4, 3))), 0);
    case 98:
    case 99: {
        SEED(123);
        Tensor *logits = P(torch_randn(SHAPE(3, 5)));
        if (i == 99) return torch_log_softmax(logits, -1);
        return torch_cross_entropy(logits, torch_tensor_long((const int64_t[]){1, 0, 4}, SHAPE(3)), -100);
    }
    case 100: {
        SEED(123);
        Tensor *logits = P(torch_randn(SHAPE(3, 5)));
        return torch_nll_loss(torch_log_softmax(logits, -1), torch_tensor_long((const int64_t[]){1, 0, 4}, SHAPE(3)), -100);
    }
    case 101: SEED(123); return torch_relu(P(torch_randn(SHAPE(4, 3))));
    case 102: SEED(123); return torch_exp(P(torch_randn(SHAPE(4, 3))));
    case 103: SEED(123); return torch_sqrt(P(torch_randn(SHAPE(4, 3))));
    case 104: SEED(123); return torch_mul_scalar(P(torch_randn(SHAPE(2, 8))), 1);
    case 105: SEED(123); return torch_mul_scalar(P(torch_randn(SHAPE(2, 7))), 1);
    case 106: SEED(123); return torch_mul_scalar(P(torch_randn(SHAPE(9))), 1);
    case 107: SEED(123); return P(torch_randn(SHAPE(2, 12)));
    case 108: SEED(123); return P(torch_mul_scalar(torch_randn(SHAPE(3, 2)), 100));
    case 109: SEED(123); return torch_dropout(P(torch_randn(SHAPE(4, 3))), 0.5, true);
    case 110: {
        SEED(123);
        nn_Dropout *d = M(&nn_Dropout_new(0.5)->module);
        return nn_Dropout_forward(d, torch_ones(SHAPE(6, 6)));
    }
    case 111: SEED(123); return torch_randperm(6);
    case 112: SEED(123); return torch_randint(0, 10, SHAPE(8));
    case 113: SEED(123); return torch_multinomial(torch_softmax(T1(1.0f, 2.0f, 0.5f, 3.0f), -1), 1, false);
    case 114: SEED(123); return torch_randn(SHAPE(3));
    case 115: SEED(123); return torch_randn(SHAPE(16));
    case 116: SEED(123); return torch_mul_scalar(torch_randn(SHAPE(4, 4)), 1e-6);
    case 117: return torch_tensor((const float[]){1e-10f, 1.0f, 2.0f, 3.0f}, SHAPE(2, 2));
    case 118: return T1(1e10f, -1.0f);
    case 119: return T1(1e30f, -1.0f);
    case 120: return T1(0.12345678f, 1.0f);
    case 121: return T1(100.0f, 200.5f, -300.25f);
    default: return NULL; /* 58 is a shape, checked below */
    }
}

START_TEST(test_records_computed_in_c) {
    char *golden_text = read_text(shared_path("spec/print-golden.txt"));
    Record recs[N_RECORDS];
    ck_assert_int_eq(parse_golden(golden_text, recs), N_RECORDS);
    int built = 0;
    for (int i = 0; i < N_RECORDS; i++) {
        n_params = n_mods = 0;
        Tensor *t = build(i);
        if (t) {
            const char *got = torch_repr(t);
            ck_assert_msg(strcmp(got, recs[i].printed) == 0, "record %d (%s):\n%s\nexpected:\n%s", i, recs[i].code,
                          got, recs[i].printed);
            built++;
        }
        for (int k = 0; k < n_params; k++) ac_free(params[k]);
        for (int k = 0; k < n_mods; k++) nn_free(mods[k]);
    }
    ck_assert_int_eq(built, N_RECORDS - 1);
    /* record 58: print(torch.zeros(6, 3).shape) */
    ck_assert_str_eq(torch_size_str(torch_zeros(SHAPE(6, 3))), recs[58].printed);
    free(golden_text);
}
END_TEST

START_TEST(test_nan_sign_and_suffix_wrap) {
    /* sqrt(-1) is a NaN with the sign bit set: glibc would print "-nan" */
    Tensor *t = torch_sqrt(T1(-1.0f, 4.0f));
    assert_repr(t, "tensor([nan, 2.])");
    /* a long last line pushes the suffix to a line of its own */
    Tensor *r = torch_requires_grad_(torch_arange_float(0, 10, 1), true);
    assert_repr(torch_mul_scalar(r, 1.0),
                "tensor([0., 1., 2., 3., 4., 5., 6., 7., 8., 9.], grad_fn=<MulBackward0>)");
    Tensor *w = torch_requires_grad_(torch_add_scalar(torch_arange_float(0, 11, 1), 0.5), true);
    assert_repr(torch_mul_scalar(w, 1.0),
                "tensor([ 0.5000,  1.5000,  2.5000,  3.5000,  4.5000,  5.5000,  6.5000,  7.5000,\n"
                "         8.5000,  9.5000, 10.5000], grad_fn=<MulBackward0>)");
}
END_TEST

Suite *suite_print(void) {
    Suite *s = suite_create("print");
    TCase *tc = tcase("golden");
    tcase_add_test(tc, test_every_record_printer_only);
    tcase_add_test(tc, test_records_computed_in_c);
    tcase_add_test(tc, test_nan_sign_and_suffix_wrap);
    suite_add_tcase(s, tc);
    return s;
}
