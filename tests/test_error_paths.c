/* The error paths that the behaviour tests do not reach: every check of the
 * constructors, the optimizers, the loaders and the tensor accessors gives
 * its message and leaves the library usable (make coverage shows what is left). */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"

START_TEST(test_tensor_errors) {
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_ERROR("zeros: tensors have at most 8 dimensions, got 9", torch_zeros(9, nine));
    EXPECT_ERROR("Trying to create tensor with negative dimension -2", torch_ones(SHAPE(3, -2)));
    Tensor *t = torch_transpose(torch_rand(SHAPE(2, 3)), 0, 1);
    EXPECT_ERROR("contiguous", ac_data_float(t));
    EXPECT_ERROR("Long", ac_data_long(torch_rand(SHAPE(2))));
    EXPECT_ERROR("contiguous", ac_data_long(torch_transpose(torch_reshape(torch_arange(4), SHAPE(2, 2)), 0, 1)));
    Tensor *l = torch_arange(6);
    EXPECT_ERROR("", ac_get(l, 2, (const int64_t[]){0, 0}));
    EXPECT_ERROR("index 6 is out of bounds", ac_get(l, 1, (const int64_t[]){6}));
    ck_assert(ac_get(l, 1, (const int64_t[]){-1}) == 5.0);
    EXPECT_ERROR("data is NULL", torch_tensor(NULL, SHAPE(2)));
    EXPECT_ERROR("arange: upper bound and larger bound inconsistent with step sign", torch_arange(-1));
    EXPECT_ERROR("arange", torch_arange_float(0, 1, 0));
    EXPECT_ERROR("arange", torch_arange_float(0, INFINITY, 1));
    EXPECT_ERROR("arange", torch_arange_float(1, 0, 1));
    ck_assert(torch_to_float(torch_rand(SHAPE(2)))->dtype == AC_FLOAT32);
    ck_assert(torch_item(torch_to_float(torch_tensor_long((const int64_t[]){7}, SHAPE(1)))) == 7.0);
    EXPECT_ERROR("copy_: The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0",
                 torch_copy_(torch_zeros(SHAPE(2)), torch_zeros(SHAPE(3))));
    ck_assert(torch_item(torch_sum(torch_copy_(torch_zeros(SHAPE(2)), torch_arange(2)))) == 1.0); /* converts, as PyTorch */
    torch_copy_(t, torch_ones(SHAPE(3, 2))); /* into a transposed view */
    ck_assert(torch_item(torch_sum(t)) == 6.0);
    EXPECT_ERROR("a leaf Variable that requires grad is being used in an in-place operation",
                 torch_copy_(torch_requires_grad_(torch_zeros(SHAPE(2)), true), torch_ones(SHAPE(2))));
    EXPECT_ERROR("ac_free: the tensor lives in the arena", ac_free(torch_zeros(SHAPE(1))));
    ac_free(NULL); /* like free(NULL) */
    /* int64 tensors through the strided copy (8-byte elements) */
    Tensor *lt = torch_transpose(torch_reshape(torch_arange(6), SHAPE(2, 3)), 0, 1);
    ck_assert_str_eq(torch_repr(torch_contiguous(lt)), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
    Tensor *p = ac_persist(lt);
    ck_assert_str_eq(torch_repr(p), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
    ac_free(p);
    EXPECT_ERROR("ac_arena_release: the mark", ac_arena_release((ac_mark){1000, 0, 0}));
    ck_assert(ac_arena_bytes_in_use() > 0 && ac_arena_bytes_reserved() >= ac_arena_bytes_in_use());
}
END_TEST

START_TEST(test_alloc_errors) {
    EXPECT_ERROR("not enough memory: you tried to allocate 18446744073709551615 * 3 bytes", ac_size_mul(SIZE_MAX, 3));
    EXPECT_ERROR("not enough memory: you tried to allocate 36893488147419103230 bytes", ac_size_mul(SIZE_MAX, 2));
    ac_fail_alloc_at(1);
    EXPECT_ERROR("not enough memory: you tried to allocate 10 bytes", ac_malloc(10));
    ac_fail_alloc_at(1);
    EXPECT_ERROR("not enough memory: you tried to allocate 12 bytes", ac_calloc(3, 4));
    char *p = ac_malloc(4);
    ac_fail_alloc_at(1);
    EXPECT_ERROR("not enough memory: you tried to allocate 64 bytes", ac_realloc(p, 64)); /* p is still valid */
    free(p);
    ac_fail_alloc_at(1);
    ck_assert(ac_try_malloc(8) == NULL);
    ac_fail_alloc_at(1);
    ck_assert(ac_try_realloc(NULL, 8) == NULL);
    void *q = ac_try_malloc(0);
    ck_assert(q != NULL);
    q = ac_try_realloc(q, 16);
    ck_assert(q != NULL);
    free(q);
    uint64_t before = ac_alloc_count();
    free(ac_malloc(1));
    ck_assert(ac_alloc_count() == before + 1);
    EXPECT_ERROR("numel: integer multiplication overflow", torch_zeros(SHAPE(INT64_MAX / 3, 4)));
}
END_TEST

START_TEST(test_module_errors) {
    EXPECT_ERROR("Linear", nn_Linear_new(-1, 2, true));
    nn_Linear *z = nn_Linear_new(0, 2, true); /* fan_in 0: PyTorch draws from U(0, 0) */
    ck_assert_str_eq(torch_repr(torch_detach(z->bias)), "tensor([0., 0.])");
    nn_free(&z->module);
    EXPECT_ERROR("Embedding: sizes must be >= 0", nn_Embedding_new(-1, 3));
    EXPECT_ERROR("Embedding: Padding_idx must be within num_embeddings (got 4 for 4 embeddings)", nn_Embedding_new_padded(4, 2, 4));
    nn_Embedding *e = nn_Embedding_new_padded(4, 2, -1); /* the last row, as PyTorch counts */
    ck_assert_int_eq(e->padding_idx, 3);
    nn_free(&e->module);
    EXPECT_ERROR("Dropout: dropout probability has to be between 0 and 1, but got 1.5", nn_Dropout_new(1.5));
    nn_CrossAttention *c = nn_CrossAttention_new(3, 2, 4);
    EXPECT_ERROR("nn_forward: CrossAttention has no one-input forward", nn_forward(&c->module, torch_rand(SHAPE(2, 3))));
    EXPECT_ERROR("CrossAttention (x_1): expected an input whose last dimension is d_in=3",
                 nn_CrossAttention_forward(c, torch_rand(SHAPE(2, 4)), torch_rand(SHAPE(2, 3))));
    EXPECT_ERROR("expected an input whose last dimension", nn_CrossAttention_forward(c, torch_scalar_tensor(1), NULL));
    nn_free(&c->module);
    EXPECT_ERROR("MultiHeadAttentionWrapper: num_heads must be >= 1, got 0", nn_MultiHeadAttentionWrapper_new(3, 2, 1, 0));
    EXPECT_ERROR("CausalAttention: context_length must be >= 1, got 0", nn_CausalAttention_new(3, 2, 2, 0, 0.0));
    nn_CausalAttention *ca = nn_CausalAttention_new(3, 2, 2, 4, 0.0);
    EXPECT_ERROR("CausalAttention: expected input of shape (t, d_in) or (b, t, d_in)",
                 nn_CausalAttention_forward(ca, torch_rand(SHAPE(1, 1, 2, 3))));
    nn_free(&ca->module);
    EXPECT_ERROR("MultiHeadAttention: num_heads must be >= 1, got 0", nn_MultiHeadAttention_new(4, 4, 4, 0));
    EXPECT_ERROR("MultiHeadAttention: context_length must be >= 1, got 0", nn_MultiHeadAttention_new(4, 4, 0, 2));
    nn_MultiHeadAttention *m = nn_MultiHeadAttention_new(4, 4, 4, 2);
    EXPECT_ERROR("MultiHeadAttention: expected input of shape (b, t, d_in), got [4, 4]",
                 nn_MultiHeadAttention_forward(m, torch_rand(SHAPE(4, 4))));
    nn_free(&m->module);
    nn_ModuleList *l = nn_ModuleList_new();
    for (int i = 0; i < 20; i++) nn_ModuleList_append(l, &nn_GELU_new()->module); /* past the first growth */
    ck_assert_int_eq(nn_ModuleList_len(l), 20);
    ck_assert(nn_ModuleList_get(l, -1) == nn_ModuleList_get(l, 19));
    EXPECT_ERROR("ModuleList: index 20 is out of range (len 20)", nn_ModuleList_get(l, 20));
    nn_free(&l->module);
    nn_free(NULL);
    torch_manual_seed(0);
    nn_ToyLM *lm = nn_ToyLM_new(5, 4, 4, 2);
    EXPECT_ERROR("ToyLM: expected token ids of shape (b, t), got [3]", nn_ToyLM_forward(lm, torch_arange(3)));
    EXPECT_ERROR("ToyLM", nn_ToyLM_forward(lm, torch_zeros_like(torch_empty(SHAPE(1, 5), AC_INT64))));
    nn_zero_grad(&lm->module);
    nn_free(&lm->module);
    /* linear's other forms and grad paths: a 1-D input, and only the weight needing a gradient */
    Tensor *w = torch_requires_grad_(torch_rand(SHAPE(2, 3)), true);
    Tensor *y = torch_linear(torch_rand(SHAPE(3)), w, NULL);
    ck_assert_str_eq(torch_grad_fn_name(y), "SqueezeBackward3");
    torch_backward(torch_sum(y), NULL);
    ck_assert(w->grad != NULL);
    EXPECT_ERROR("linear: weight must be 2-D", torch_linear(torch_rand(SHAPE(3)), torch_rand(SHAPE(3)), NULL));
    EXPECT_ERROR("linear: input must have at least 1 dimension", torch_linear(torch_scalar_tensor(1), w, NULL));
    EXPECT_ERROR("linear: bias must have shape [2], got [3]", torch_linear(torch_rand(SHAPE(3)), w, torch_rand(SHAPE(3))));
}
END_TEST

START_TEST(test_optimizer_errors) {
    Tensor *p = nn_Parameter(torch_rand(SHAPE(2)));
    const char *nm[] = {"p"};
    nn_TensorList ps = {1, nm, &p};
    EXPECT_ERROR("SGD: Invalid learning rate: -1.0", optim_SGD(ps, -1, 0, 0, 0, false));
    EXPECT_ERROR("SGD: Invalid weight_decay value: -1.0", optim_SGD(ps, 0.1, 0, 0, -1, false));
    EXPECT_ERROR("SGD: optimizer got an empty parameter list", optim_SGD((nn_TensorList){0}, 0.1, 0, 0, 0, false));
    Tensor *leaf = torch_rand(SHAPE(2)); /* kept, as PyTorch keeps it, and never changed (no gradient): test_optim */
    optim_free(optim_SGD((nn_TensorList){1, NULL, &leaf}, 0.1, 0, 0, 0, false));
    EXPECT_ERROR("SGD: Invalid momentum value: -1.0", optim_SGD(ps, 0.1, -1, 0, 0, false));
    EXPECT_ERROR("SGD: Nesterov momentum requires a momentum and zero dampening", optim_SGD(ps, 0.1, 0.9, 0.1, 0, true));
    EXPECT_ERROR("Adam: Invalid epsilon value: -1.0", optim_Adam(ps, 0.1, 0.9, 0.999, -1, 0, false));
    EXPECT_ERROR("Adam: Invalid beta parameter at index 0: 1.0", optim_Adam(ps, 0.1, 1.0, 0.999, 1e-8, 0, false));
    EXPECT_ERROR("AdamW: Invalid beta parameter at index 1: -0.5", optim_AdamW(ps, 0.1, 0.9, -0.5, 1e-8, 0, false));
    optim_free(NULL);
    /* load_state_dict: every refusal, and nothing changed by any of them */
    optim_Optimizer *adam = optim_Adam(ps, 0.1, 0.9, 0.999, 1e-8, 0, false);
    optim_Optimizer *ams = optim_Adam(ps, 0.1, 0.9, 0.999, 1e-8, 0, true);
    optim_Optimizer *sgd = optim_SGD(ps, 0.1, 0.9, 0, 0, false);
    Tensor *two = torch_zeros(SHAPE(2)), *three = torch_zeros(SHAPE(3)), *one = torch_ones(SHAPE(1));
    Tensor *half = torch_full(SHAPE(1), 0.5), *lng = torch_arange(2);
    struct { optim_Optimizer *o; int n; const char *names[4]; Tensor *ts[4]; const char *msg; } cases[] = {
        {adam, 1, {"foo"}, {two}, "unexpected optimizer key \"foo\""},
        {adam, 1, {"state.1.exp_avg"}, {two}, "unexpected optimizer key \"state.1.exp_avg\""},
        {adam, 1, {"state.x.exp_avg"}, {two}, "unexpected optimizer key"},
        {adam, 1, {"state.0."}, {two}, "unexpected optimizer key"},
        {adam, 1, {"state.0"}, {two}, "unexpected optimizer key"},
        {adam, 1, {"state.0.exp_avg"}, {lng}, "must be float32"},
        {adam, 1, {"state.0.step"}, {two}, "must hold one whole number of steps"},
        {adam, 1, {"state.0.step"}, {half}, "must hold one whole number of steps"},
        {adam, 1, {"state.0.momentum_buffer"}, {two}, "does not belong to this optimizer"},
        {adam, 1, {"state.0.max_exp_avg_sq"}, {two}, "does not belong to this optimizer"},
        {sgd, 1, {"state.0.exp_avg"}, {two}, "does not belong to this optimizer"},
        {adam, 1, {"state.0.exp_avg"}, {three}, "has shape [3], but parameter 0 has shape [2]"},
        {adam, 2, {"state.0.exp_avg", "state.0.exp_avg"}, {two, two}, "appears twice"},
        {adam, 2, {"state.0.step", "state.0.exp_avg"}, {one, two}, "the optimizer state of parameter 0 is incomplete"},
        {ams, 3, {"state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq"}, {one, two, two}, "max_exp_avg_sq"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_assert_msg(!optim_load_state_dict(cases[i].o, (nn_TensorList){cases[i].n, cases[i].names, cases[i].ts}, true,
                                             err, sizeof err), "case %zu accepted", i);
        ck_assert_msg(strstr(err, cases[i].msg), "case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].msg);
    }
    ck_assert_int_eq(optim_state_dict(adam).n, 0); /* nothing was loaded */
    /* a whole SGD state loads */
    ck_assert(optim_load_state_dict(sgd, (nn_TensorList){1, (const char *[]){"state.0.momentum_buffer"}, &two}, true, err,
                                    sizeof err));
    ck_assert_int_eq(optim_state_dict(sgd).n, 1);
    optim_free(adam), optim_free(ams), optim_free(sgd);
    ac_free(p);
}
END_TEST

static void write_raw(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

static void st_file(const char *path, const char *header, size_t data) {
    char buf[1024] = {0};
    uint64_t h = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (char)(h >> (8 * i));
    memcpy(buf + 8, header, h);
    write_raw(path, buf, 8 + h + data);
}

START_TEST(test_safetensors_errors) {
    char dir[] = "/tmp/ac_err_XXXXXX", path[256], err[512];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    static const struct { const char *header; size_t data; const char *msg; } bad[] = {
        {"[]", 0, "corrupt header (expected a JSON object)"},
        {"{1:2}", 0, "corrupt header (expected \"name\": {...})"},
        {"{\"a\" 2}", 0, "corrupt header (expected \"name\": {...})"},
        {"{\"__metadata__\":[]}", 0, "corrupt __metadata__"},
        {"{\"__metadata__\":{\"a\":\"b\" \"c\":\"d\"}}", 0, "corrupt __metadata__ (expected '}')"},
        {"{\"__metadata__\":{\"a\" \"b\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"a\":{} }", 0, "corrupt entry for \"a\""},
        {"{\"a\":[]}", 0, "corrupt entry for \"a\""},
        {"{\"a\":{\"dtype\":1}}", 0, "corrupt entry for \"a\""},
        {"{\"a\":{\"dtype\" \"F32\"}}", 0, "corrupt entry for \"a\""},
        {"{\"a\":{\"foo\":1}}", 0, "unexpected key \"foo\" in entry \"a\""},
        {"{\"a\":{\"shape\":1}}", 0, "corrupt entry for \"a\""},
        {"{\"a\":{\"shape\":[1,]}}", 0, "bad shape"},
        {"{\"a\":{\"shape\":[1 2]}}", 0, "bad shape"},
        {"{\"a\":{\"shape\":[1,1,1,1,1,1,1,1,1]}}", 0, "bad shape"},
        {"{\"a\":{\"shape\":[99999999999999999999]}}", 0, "bad shape"},
        {"{\"a\":{\"shape\":[9223372036854775808]}}", 0, "bad shape"},
        {"{\"a\":{\"data_offsets\":[0]}}", 0, "corrupt entry for \"a\""},
        {"{\"a\":{\"data_offsets\":[0,4,]}}", 0, "corrupt entry for \"a\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 0, "do not fit"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]} \"b\":1}", 4, "corrupt header (expected '}' or ',')"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, "truncated"},
        {"{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, ""},
        {"{\"__metadata__\":{\"k\":\"\\ud800\\u0041\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"\\u12\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"abc}}", 0, "corrupt __metadata__ entry"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        st_file(path, bad[i].header, bad[i].data);
        safetensors_File f;
        bool ok = safetensors_load(path, &f, err, sizeof err);
        if (!bad[i].msg[0]) { /* the BOOL byte 0 is valid */
            ck_assert_msg(ok, "%s: %s", bad[i].header, err);
            continue;
        }
        ck_assert_msg(!ok, "accepted: %s", bad[i].header);
        ck_assert_msg(strstr(err, bad[i].msg), "%s -> \"%s\", expected \"%s\"", bad[i].header, err, bad[i].msg);
    }
    /* a BOOL that is not 0 or 1, and escapes of every kind that JSON has */
    {
        char buf[128] = {0};
        const char *h = "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}";
        buf[0] = (char)strlen(h);
        memcpy(buf + 8, h, strlen(h));
        buf[8 + strlen(h)] = 2;
        write_raw(path, buf, 8 + strlen(h) + 1);
        safetensors_File f;
        ck_assert(!safetensors_load(path, &f, err, sizeof err));
        ck_assert_msg(strstr(err, "holds a BOOL that is not 0 or 1"), "%s", err);
        st_file(path, "{\"__metadata__\":{\"k\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\uD83D\\uDE00\"}}", 0);
        ck_assert_msg(safetensors_load(path, &f, err, sizeof err), "%s", err);
        ck_assert_str_eq(safetensors_meta(&f, "k"), "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
        ck_assert(safetensors_meta(&f, "nope") == NULL && safetensors_get(&f, "nope") == NULL);
    }
    /* saving: metadata with quotes and control characters round-trips; an unwritable place, a path that is a directory */
    Tensor *t = torch_ones(SHAPE(2));
    const char *names[] = {"t"};
    const char *kv[] = {"q\"\\", "line\nbreak\x01"};
    ck_assert_msg(safetensors_save(path, (nn_TensorList){1, names, &t}, 1, kv, err, sizeof err), "%s", err);
    safetensors_File f;
    ck_assert(safetensors_load(path, &f, err, sizeof err));
    ck_assert_str_eq(safetensors_meta(&f, "q\"\\"), "line\nbreak\x01");
    ck_assert(!safetensors_save("/nonexistent/dir/x.safetensors", (nn_TensorList){1, names, &t}, 0, NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "cannot write /nonexistent/dir/x.safetensors.tmp"), "%s", err);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    ck_assert(!safetensors_save(sub, (nn_TensorList){1, names, &t}, 0, NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "adir is a directory, not a regular file: it is not replaced"), "%s", err);
    ck_assert(!safetensors_load(sub, &f, err, sizeof err)); /* reading a directory */
    /* a bare name saves in the current directory */
    char cwd[512];
    ck_assert(getcwd(cwd, sizeof cwd) != NULL);
    ck_assert_int_eq(chdir(dir), 0);
    ck_assert(safetensors_save("bare.safetensors", (nn_TensorList){1, names, &t}, 0, NULL, err, sizeof err));
    ck_assert_int_eq(chdir(cwd), 0);
    /* copy_into: an unknown name in the file, another dtype */
    Tensor *lt = torch_arange(2);
    ck_assert(safetensors_save(path, (nn_TensorList){2, (const char *[]){"t", "extra"}, (Tensor *[]){t, lt}}, 0, NULL, err,
                               sizeof err));
    ck_assert(safetensors_load(path, &f, err, sizeof err));
    Tensor *dst = torch_zeros(SHAPE(2));
    ck_assert(!safetensors_copy_into(&f, (nn_TensorList){1, names, &dst}, NULL, true, err, sizeof err));
    ck_assert_msg(strstr(err, "unexpected tensor \"extra\""), "%s", err);
    Tensor *ldst = torch_zeros(SHAPE(2));
    ck_assert(!safetensors_copy_into(&f, (nn_TensorList){1, (const char *[]){"extra"}, &ldst}, (const char *[]){"t", NULL},
                                     true, err, sizeof err));
    ck_assert_msg(strstr(err, "the file has I64 [2], the model expects F32 [2]"), "%s", err);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_text_errors) {
    CharText ct;
    char err[128];
    ck_assert(chartext_init(&ct, "", 0, err, sizeof err));
    ck_assert_int_eq(ct.vocab_size, 0);
    chartext_free(&ct);
    ck_assert(!chartext_init(&ct, "ab\xc3", 3, err, sizeof err));
    ck_assert_str_eq(err, "invalid UTF-8 at byte 2");
    ck_assert(chartext_init(&ct, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10, err, sizeof err));
    ck_assert_int_eq(ct.vocab_size, 4);
    char out[5];
    ck_assert_int_eq(chartext_decode(&ct, 3, out), 4);          /* U+1F600 */
    ck_assert_int_eq(chartext_decode(&ct, 2, out), 3);          /* U+20AC */
    ck_assert_int_eq(chartext_decode(&ct, 99, out), 3);         /* out of range: U+FFFD */
    ck_assert_int_eq(chartext_encode_char(&ct, 'z'), -1);
    ck_assert_int_eq(chartext_encode_char(&ct, 0x1F601), -1);
    Tensor *x, *y;
    EXPECT_ERROR("get_batch", nn_ToyLM_get_batch(&ct, 1, 4, &x, &y));
    chartext_free(&ct);
    uint32_t cp;
    ck_assert_int_eq(chartext_utf8_next("", 0, &cp), 0);
    ck_assert_int_eq(chartext_utf8_next("\xc0\x80", 2, &cp), 0); /* overlong */
    ck_assert_int_eq(chartext_utf8_next("\xf4\x90\x80\x80", 4, &cp), 0); /* past U+10FFFF */
}
END_TEST

/* Checkpoint refusals that the trainer's flags cannot reach: a generator state
 * out of range, sizes that differ, a vocabulary of another size. */
START_TEST(test_checkpoint_errors) {
    char dir[] = "/tmp/ac_ckerr_XXXXXX", path[256], err[512];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    CharText ct, other;
    ck_assert(chartext_init(&ct, "abcdefgh", 8, err, sizeof err));
    ck_assert(chartext_init(&other, "abcdefghi", 9, err, sizeof err));
    torch_manual_seed(0);
    nn_ToyLM *m = nn_ToyLM_new(ct.vocab_size, 4, 4, 2), *wide = nn_ToyLM_new(ct.vocab_size, 4, 8, 2);
    optim_Optimizer *o = optim_Adam(nn_named_parameters(&m->module), 1e-3, 0.9, 0.999, 1e-8, 0, false);
    optim_Optimizer *ow = optim_Adam(nn_named_parameters(&wide->module), 1e-3, 0.9, 0.999, 1e-8, 0, false);
    ck_assert_msg(nn_ToyLM_save_checkpoint(path, m, o, &ct, 7, err, sizeof err), "%s", err);
    int64_t step = -1;
    ck_assert_msg(nn_ToyLM_load_checkpoint(path, m, o, &ct, &step, err, sizeof err), "%s", err);
    ck_assert_int_eq(step, 7);
    ck_assert(!nn_ToyLM_load_checkpoint(path, wide, ow, &ct, &step, err, sizeof err));
    ck_assert_msg(strstr(err, "trained with --context 4 --dim 4 --heads 2; this run has --context 4 --dim 8"), "%s", err);
    ck_assert(!nn_ToyLM_load_checkpoint(path, m, o, &other, &step, err, sizeof err));
    ck_assert_msg(strstr(err, "different character vocabulary"), "%s", err);
    /* generator states that cannot be */
    safetensors_File f;
    ck_assert(safetensors_load(path, &f, err, sizeof err));
    Tensor *rng = safetensors_get(&f, "rng_state");
    int64_t *p = rng->data;
    struct { int at; int64_t v; const char *msg; } rs[] = {
        {0, -1, "generator word out of range"}, {5, (int64_t)1 << 32, "generator word out of range"},
        {624, 0, "invalid generator position"}, {625, 624, "invalid generator position"}, {626, 2, "invalid generator position"},
    };
    const char *kv[10];
    for (int i = 0; i < f.n_meta; i++) kv[2 * i] = f.meta_keys[i], kv[2 * i + 1] = f.meta_values[i];
    for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) {
        int64_t keep = p[rs[i].at];
        p[rs[i].at] = rs[i].v;
        char bad[300];
        snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
        ck_assert(safetensors_save(bad, f.tensors, f.n_meta, kv, err, sizeof err));
        ck_assert(!nn_ToyLM_load_checkpoint(bad, m, o, &ct, &step, err, sizeof err));
        ck_assert_msg(strstr(err, rs[i].msg), "%s", err);
        p[rs[i].at] = keep;
    }
    Tensor *short_rng = torch_zeros(SHAPE(3));
    for (int i = 0; i < f.tensors.n; i++)
        if (f.tensors.tensors[i] == rng) f.tensors.tensors[i] = short_rng;
    ck_assert(safetensors_save(path, f.tensors, f.n_meta, kv, err, sizeof err));
    ck_assert(!nn_ToyLM_load_checkpoint(path, m, o, &ct, &step, err, sizeof err));
    ck_assert_msg(strstr(err, "Expected an RNG state of 628 int64 values"), "%s", err);
    ck_assert(!nn_ToyLM_load_checkpoint("/nonexistent.safetensors", m, o, &ct, &step, err, sizeof err));
    optim_free(o), optim_free(ow);
    nn_free(&m->module), nn_free(&wide->module);
    chartext_free(&ct), chartext_free(&other);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_op_and_rng_errors) {
    torch_manual_seed(0);
    Tensor *s = torch_scalar_tensor(2), *v = torch_rand(SHAPE(3)), *m = torch_rand(SHAPE(2, 3));
    ck_assert(torch_t(v)->ndim == 1 && torch_T(v) == v);
    ck_assert_int_eq(torch_transpose(s, 0, -1)->ndim, 0);
    EXPECT_ERROR("t: t() expects a tensor with <= 2 dimensions, but self is 3D", torch_t(torch_rand(SHAPE(1, 2, 3))));
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 6};
    EXPECT_ERROR("at most 8 dimensions, got 9", torch_view(m, 9, nine));
    EXPECT_ERROR("view", torch_view(m, SHAPE(-1, -1)));
    EXPECT_ERROR("view", torch_view(m, SHAPE(-2, 3)));
    EXPECT_ERROR("view", torch_view(m, SHAPE(-1, 4)));
    EXPECT_ERROR("view", torch_view(torch_zeros(SHAPE(0, 3)), SHAPE(0, -1)));
    ck_assert_int_eq(torch_numel(torch_view(torch_zeros(SHAPE(0, 3)), SHAPE(3, 0))), 0);
    ck_assert_int_eq(torch_reshape(s, SHAPE(1, 1))->ndim, 2);
    EXPECT_ERROR("select: select() cannot be applied to a 0-dim tensor.", torch_select(s, 0, 0));
    EXPECT_ERROR("select", torch_select(m, 0, 2));
    EXPECT_ERROR("slice: slice() cannot be applied to a 0-dim tensor.", torch_slice(s, 0, 0, 1));
    ck_assert_int_eq(torch_slice(m, 1, -2, -1)->shape[1], 1);
    ck_assert_int_eq(torch_slice(m, 1, 5, 9)->shape[1], 0);
    EXPECT_ERROR("layer_norm: normalized_shape [2, 2, 3] does not fit", torch_layer_norm(m, SHAPE(2, 2, 3), NULL, NULL, 1e-5));
    EXPECT_ERROR("layer_norm: weight has 2 elements, expected 3",
                 torch_layer_norm(m, SHAPE(3), torch_rand(SHAPE(2)), NULL, 1e-5));
    EXPECT_ERROR("layer_norm: bias has 2 elements, expected 3",
                 torch_layer_norm(m, SHAPE(3), NULL, torch_rand(SHAPE(2)), 1e-5));
    EXPECT_ERROR("dropout: dropout probability has to be between 0 and 1, but got -0.5", torch_dropout(m, -0.5, true));
    ck_assert_str_eq(torch_repr(torch_dropout(torch_ones(SHAPE(2)), 1.0, true)), "tensor([0., 0.])");
    EXPECT_ERROR("argmax: argmax(): Expected reduction dim 1 to have non-zero size.", torch_argmax(torch_zeros(SHAPE(2, 0)), 1, false));
    ck_assert_str_eq(torch_repr(torch_argmax(torch_tensor((const float[]){1, 3, 2, 0}, SHAPE(2, 2)), 0, true)),
                     "tensor([[1, 0]])");
    ck_assert_str_eq(torch_repr(torch_relu(torch_tensor((const float[]){NAN, -1, 2}, SHAPE(3)))), "tensor([nan, 0., 2.])");
    Tensor *x = torch_requires_grad_(torch_tensor((const float[]){0, 2}, SHAPE(2)), true);
    torch_backward(torch_sum(torch_pow(x, 0)), NULL);
    ck_assert_str_eq(torch_repr(x->grad), "tensor([0., 0.])");
    Tensor *a = torch_requires_grad_(torch_rand(SHAPE(2)), true), *b = torch_rand(SHAPE(2));
    torch_backward(torch_sum(torch_add(torch_mul(a, b), torch_div(a, b))), NULL); /* only a needs a gradient */
    ck_assert(a->grad != NULL && b->grad == NULL);
    ck_assert_int_eq(torch_numel(torch_add(torch_zeros(SHAPE(0)), torch_zeros(SHAPE(1)))), 0);
    /* the generator's argument checks */
    EXPECT_ERROR("uniform_: uniform_ expects", torch_uniform_(torch_empty(SHAPE(2), AC_FLOAT32), 1, 0));
    EXPECT_ERROR("normal_: normal expects std >= 0.0, but found std -1", torch_normal_(torch_empty(SHAPE(2), AC_FLOAT32), 0, -1));
    EXPECT_ERROR("a leaf Variable that requires grad is being used in an in-place operation",
                 torch_normal_(torch_requires_grad_(torch_zeros(SHAPE(2)), true), 0, 1));
    ck_assert_int_eq(torch_numel(torch_normal_(torch_transpose(torch_zeros(SHAPE(4, 5)), 0, 1), 0, 1)), 20);
    EXPECT_ERROR("bernoulli_: bernoulli_ expects p to be in [0, 1], but got p=2", torch_bernoulli_(torch_zeros(SHAPE(2)), 2));
    EXPECT_ERROR("exponential_: expects lambda > 0.0, but found lambda=0", torch_exponential_(torch_zeros(SHAPE(2)), 0));
    EXPECT_ERROR("randperm: Trying to create tensor with negative dimension -1: [-1]", torch_randperm(-1));
    EXPECT_ERROR("multinomial", torch_multinomial(torch_rand(SHAPE(1, 2, 3)), 1, false));
    EXPECT_ERROR("multinomial: cannot sample n_sample <= 0 samples (got 0)", torch_multinomial(v, 0, false));
    EXPECT_ERROR("multinomial", torch_multinomial(v, 4, false));
    EXPECT_ERROR("multinomial", torch_multinomial(torch_tensor((const float[]){1, -1}, SHAPE(2)), 1, false));
    EXPECT_ERROR("multinomial", torch_multinomial(torch_tensor((const float[]){1, INFINITY}, SHAPE(2)), 1, false));
    EXPECT_ERROR("multinomial: invalid multinomial distribution (sum of probabilities <= 0)",
                 torch_multinomial(torch_zeros(SHAPE(2)), 1, false));
    ck_assert_int_eq(torch_numel(torch_multinomial(torch_rand(SHAPE(2, 4)), 3, false)), 6);
}
END_TEST

Suite *suite_error_paths(void) {
    Suite *s = suite_create("error paths");
    TCase *tc = tcase("error paths");
    tcase_add_test(tc, test_tensor_errors);
    tcase_add_test(tc, test_alloc_errors);
    tcase_add_test(tc, test_module_errors);
    tcase_add_test(tc, test_optimizer_errors);
    tcase_add_test(tc, test_safetensors_errors);
    tcase_add_test(tc, test_text_errors);
    tcase_add_test(tc, test_checkpoint_errors);
    tcase_add_test(tc, test_op_and_rng_errors);
    suite_add_tcase(s, tc);
    return s;
}
