/* Hostile input and faults: sizes that overflow, allocations that fail at
 * every point, crafted checkpoints, signals, kill -9, reads past a tensor.
 * Each must end in a clear error and nothing lost, never a crash. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "extend.h"
#include "internal.h" /* AC_ASAN */
#include "tests.h"

/* ---- sizes -------------------------------------------------------------------------------------- */
START_TEST(test_sizes_that_overflow) {
    EXPECT_ERROR("not enough memory: you tried to allocate 18446744073709551616 bytes", torch_zeros(SHAPE((int64_t)1 << 62)));
    EXPECT_ERROR("not enough memory: you tried to allocate 9223372036854775808 bytes", torch_empty(SHAPE((int64_t)1 << 61), AC_FLOAT32));
    EXPECT_ERROR("numel: integer multiplication overflow", torch_zeros(SHAPE((int64_t)1 << 32, (int64_t)1 << 32)));
    EXPECT_ERROR("numel: integer multiplication overflow", torch_empty(SHAPE(3, INT64_MAX / 2), AC_INT64));
    ck_assert_int_eq(torch_numel(torch_empty(SHAPE(0, (int64_t)1 << 62, (int64_t)1 << 62), AC_FLOAT32)), 0);
    EXPECT_ERROR("not enough memory: you tried to allocate 18446744073709551615 bytes", ac_arena_alloc(SIZE_MAX));
    EXPECT_ERROR("not enough memory: you tried to allocate", ac_malloc(SIZE_MAX));
    EXPECT_ERROR("not enough memory: you tried to allocate 36893488147419103228 bytes", ac_calloc(SIZE_MAX / 2, 4));
    EXPECT_ERROR("not enough memory: you tried to allocate", ac_realloc(NULL, SIZE_MAX - 8));
    /* the library is as usable as before */
    ck_assert_str_eq(torch_repr(torch_ones(SHAPE(2))), "tensor([1., 1.])");
}
END_TEST

START_TEST(test_error_texts) {
    Tensor *w = torch_rand(SHAPE(4, 3)), *i = torch_tensor_long((const int64_t[]){0, 1}, SHAPE(2));
    EXPECT_ERROR("embedding: Padding_idx must be within num_embeddings (padding_idx=4, num_embeddings=4)",
                 torch_embedding(w, i, 4));
    EXPECT_ERROR("embedding: Padding_idx must be within num_embeddings", torch_embedding(w, i, -2));
    ck_assert_int_eq(torch_numel(torch_embedding(w, i, 3)), 6);
    EXPECT_ERROR("layer_norm: Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[2, 4]",
                 torch_layer_norm(torch_rand(SHAPE(2, 4)), SHAPE(3), NULL, NULL, 1e-5));
}
END_TEST

/* What the graph fuzzer found: empty inner dims. F.linear over 0 input
 * features is the bias (it was uninitialised memory), a product over k = 0 is
 * zeros, layer_norm's backward over 0 features divided by zero, and a
 * mismatch error with k = 0 divided by zero. */
START_TEST(test_empty_inner_dims) {
    torch_manual_seed(0);
    Tensor *x = torch_requires_grad_(torch_rand(SHAPE(3, 0)), true), *w = torch_requires_grad_(torch_rand(SHAPE(2, 0)), true);
    Tensor *b = torch_requires_grad_(torch_tensor((const float[]){0.5f, -1.5f}, SHAPE(2)), true);
    Tensor *y = torch_linear(x, w, b);
    ck_assert_str_eq(torch_repr(torch_detach(y)), "tensor([[ 0.5000, -1.5000],\n        [ 0.5000, -1.5000],\n        [ 0.5000, -1.5000]])");
    torch_backward(torch_sum(y), NULL);
    ck_assert_str_eq(torch_repr(b->grad), "tensor([3., 3.])");
    ck_assert_str_eq(torch_repr(torch_matmul(torch_rand(SHAPE(2, 0)), torch_rand(SHAPE(0, 2)))), "tensor([[0., 0.],\n        [0., 0.]])");
    Tensor *e = torch_requires_grad_(torch_rand(SHAPE(2, 0)), true);
    torch_backward(torch_sum(torch_layer_norm(e, SHAPE(0), NULL, NULL, 1e-5)), NULL);
    ck_assert_int_eq(torch_numel(e->grad), 0);
    EXPECT_ERROR("matmul: mat1 and mat2 shapes cannot be multiplied (6x0 and 4x5)",
                 torch_matmul(torch_rand(SHAPE(2, 3, 0)), torch_rand(SHAPE(4, 5))));
    /* and the long fuzz run's find: index_select on a 0-dim tensor with several indices wrote past its one element */
    EXPECT_ERROR("index_select(): Index to scalar can have only 1 value, got 2 value(s)",
                 torch_index_select(torch_scalar_tensor(5), 0, torch_tensor_long((const int64_t[]){0, 0}, SHAPE(2))));
    ck_assert(torch_item(torch_index_select(torch_scalar_tensor(5), 0, torch_tensor_long((const int64_t[]){0}, SHAPE(1)))) == 5);
    EXPECT_ERROR("linear: mat1 and mat2 shapes cannot be multiplied (6x0 and 1x2)",
                 torch_linear(torch_rand(SHAPE(2, 3, 0)), torch_rand(SHAPE(2, 1)), NULL));
}
END_TEST

/* ---- the arena after a failed allocation ------------------------------------------------------------ */
START_TEST(test_arena_survives_failed_blocks) {
    ac_mark m = ac_arena_mark();
    ac_arena_alloc(3u << 20); /* a second block of 3 MiB */
    ac_arena_release(m);
    /* the released block is too small for 16 MiB: its replacement fails; the block must stay usable */
    ac_fail_alloc_at(1);
    EXPECT_ERROR("not enough memory: you tried to allocate", ac_arena_alloc(16u << 20));
    ac_fail_alloc_at(0);
    char *p = ac_arena_alloc(3u << 20);
    memset(p, 1, 3u << 20);
    char *q = ac_arena_alloc(16u << 20);
    memset(q, 2, 16u << 20);
    ac_arena_release(m);
    /* a brand-new block that fails, then the block list itself */
    ac_fail_alloc_at(1);
    EXPECT_ERROR("not enough memory", ac_arena_alloc(200u << 20));
    ac_fail_alloc_at(0);
    ck_assert(ac_arena_alloc(200u << 20) != NULL);
    ac_arena_release(m);
    ck_assert_str_eq(torch_repr(torch_arange(3)), "tensor([0, 1, 2])");
}
END_TEST

/* One training step of the article's SelfAttention with Adam, printed. */
static char *one_step(nn_SelfAttention *sa, optim_Optimizer *opt) {
    torch_manual_seed(5);
    Tensor *x = torch_rand(SHAPE(6, 3));
    optim_zero_grad(opt);
    Tensor *loss = torch_sum(torch_mul(nn_SelfAttention_forward(sa, x), torch_rand(SHAPE(6, 4))));
    torch_backward(loss, NULL);
    optim_step(opt);
    return torch_repr(sa->W_query);
}

/* Every allocation of a step fails once, in turn: each failure is an error
 * with PyTorch's words, and afterwards the same step gives the same numbers. */
START_TEST(test_every_allocation_of_a_step_can_fail) {
    torch_manual_seed(1);
    nn_SelfAttention *ref_sa = nn_SelfAttention_new(3, 2, 4), *sa = nn_SelfAttention_new(3, 2, 4);
    optim_Optimizer *ref_opt = optim_Adam(nn_named_parameters(&ref_sa->module), 0.1, 0.9, 0.999, 1e-8, 0, false);
    ac_mark m = ac_arena_mark();
    char *want = ac_strdup(one_step(ref_sa, ref_opt));
    ac_arena_release(m);
    int failures = 0;
    for (uint64_t n = 1;; n++) {
        /* sa starts where ref_sa started, whatever the last attempt did */
        ac_mark m2 = ac_arena_mark();
        torch_manual_seed(1);
        nn_SelfAttention *fresh = nn_SelfAttention_new(3, 2, 4);
        nn_TensorList to = nn_named_parameters(&sa->module), from = nn_named_parameters(&fresh->module);
        bool prev = torch_no_grad_enter();
        for (int i = 0; i < to.n; i++) torch_copy_(to.tensors[i], from.tensors[i]);
        torch_no_grad_exit(prev);
        nn_free(&fresh->module);
        optim_Optimizer *opt = optim_Adam(nn_named_parameters(&sa->module), 0.1, 0.9, 0.999, 1e-8, 0, false);
        ac_fail_alloc_at(n);
        jmp_buf jb;
        test_jmp = &jb;
        ac_set_error_handler(test_error_handler, NULL);
        bool failed = setjmp(jb) != 0;
        char *got = failed ? NULL : one_step(sa, opt);
        ac_set_error_handler(NULL, NULL);
        ac_fail_alloc_at(0);
        optim_free(opt);
        if (failed) {
            ck_assert_msg(strstr(test_msg, "not enough memory: you tried to allocate"), "failure %llu: %s",
                          (unsigned long long)n, test_msg);
            ck_assert_msg(torch_is_grad_enabled(), "grad mode restored after failure %llu", (unsigned long long)n);
            failures++;
            ac_arena_release(m2);
            continue;
        }
        ck_assert_str_eq(got, want); /* no failure left: the step is whole again */
        ac_arena_release(m2);
        break;
    }
    ck_assert_int_ge(failures, 5); /* arena blocks and the persistent Adam state: few, but each one tried */
    free(want);
    optim_free(ref_opt);
    nn_free(&ref_sa->module);
    nn_free(&sa->module);
}
END_TEST

/* ---- the programs under allocation failure -------------------------------------------------------------- */

static int run_split(const char *cmd, char **out, char **err_text, const char *errfile) {
    int rc = run_command(cmd, out);
    *err_text = read_text(errfile);
    return rc;
}

/* For every N, the N-th allocation of a 3-step training run (with --save and a
 * sample) and of the article fails: each run ends with exit 1 and the message,
 * or with exit 0 and the normal output; none is killed by a signal. When the
 * trainer saved the last whole step, resuming from it prints the remaining
 * steps exactly as the uninterrupted run. */
START_TEST(test_programs_under_allocation_failure) {
    char *dir = temp_dir(), cmd[1024], errfile[256], ck[256];
    snprintf(errfile, sizeof errfile, "%s/err.txt", dir);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", dir);
    /* a batch large enough that the first forward needs new arena blocks: failures inside training */
    const char *flags = "--steps 3 --context 32 --dim 32 --heads 2 --batch 64 --sample 5";
    char *want, *e;
    snprintf(cmd, sizeof cmd, "%s/train %s 2>%s", build_dir(), flags, errfile);
    ck_assert_int_eq(run_split(cmd, &want, &e, errfile), 0);
    free(e);
    int failed_runs = 0, saved = 0;
    for (int n = 1;; n++) {
        remove(ck);
        snprintf(cmd, sizeof cmd, "AC_FAIL_ALLOC=%d %s/train %s --save %s 2>%s", n, build_dir(), flags, ck, errfile);
        char *out;
        int rc = run_split(cmd, &out, &e, errfile);
        ck_assert_msg(rc == 0 || rc == 1, "train, allocation %d failing: exit %d (a crash?)\n%s", n, rc, e);
        if (rc == 0) {
            ck_assert_msg(strcmp(out, want) == 0, "allocation %d: exit 0 but other output", n);
            free(out), free(e);
            break;
        }
        failed_runs++;
        ck_assert_msg(strstr(e, "train: error: not enough memory: you tried to allocate") ||
                          strstr(e, "train: --save: not enough memory: you tried to allocate"), "allocation %d:\n%s", n, e);
        const char *sv = strstr(e, "saved the model at step ");
        if (sv) { /* resume from it: the rest of the run, exactly */
            int k = atoi(sv + strlen("saved the model at step "));
            char *resumed;
            snprintf(cmd, sizeof cmd, "%s/train --steps %d --context 32 --dim 32 --heads 2 --batch 64 --load %s",
                     build_dir(), 3 - k, ck);
            ck_assert_int_eq(run_command(cmd, &resumed), 0);
            for (int s = k + 1; s <= 3; s++) {
                char line[64];
                snprintf(line, sizeof line, "step %d loss ", s);
                const char *a = strstr(want, line), *b = strstr(resumed, line);
                ck_assert_msg(a && b && strncmp(a, b, strlen(line) + 8) == 0, "resumed from step %d: step %d differs", k, s);
            }
            free(resumed);
            saved++;
        }
        free(out), free(e);
    }
    ck_assert_int_gt(failed_runs, 30);
    ck_assert_int_gt(saved, 0);
    fprintf(stderr, "hostile: train failed cleanly at %d allocation points (%d saved the last whole step)\n", failed_runs,
            saved);
    free(want);
    /* the article */
    snprintf(cmd, sizeof cmd, "%s/article 2>%s", build_dir(), errfile);
    ck_assert_int_eq(run_split(cmd, &want, &e, errfile), 0);
    free(e);
    failed_runs = 0;
    for (int n = 1;; n++) {
        snprintf(cmd, sizeof cmd, "AC_FAIL_ALLOC=%d %s/article 2>%s", n, build_dir(), errfile);
        char *out;
        int rc = run_split(cmd, &out, &e, errfile);
        ck_assert_msg(rc == 0 || rc == 1, "article, allocation %d failing: exit %d\n%s", n, rc, e);
        if (rc == 0) {
            ck_assert_msg(strcmp(out, want) == 0, "allocation %d: exit 0 but other output", n);
            free(out), free(e);
            break;
        }
        ck_assert_msg(strstr(e, "article: error: not enough memory"), "allocation %d:\n%s", n, e);
        failed_runs++;
        free(out), free(e);
    }
    ck_assert_int_gt(failed_runs, 30);
    fprintf(stderr, "hostile: article failed cleanly at %d allocation points\n", failed_runs);
    free(want);
    remove_dir(dir);
}
END_TEST

/* ---- crafted safetensors files ------------------------------------------------------------------------------ */

static void write_st(const char *path, const char *header, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    uint64_t h = strlen(header);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(h >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, h, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

START_TEST(test_strict_safetensors_reader) {
    char *dir = temp_dir(), path[256], err[512];
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    float data[5] = {1, 2, 3, 4, 5};
    struct { const char *header; size_t n; const char *msg; } bad[] = {
        /* a tensor inside another, lengths adding up to the data size */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 20, "overlaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "4 bytes before tensor \"b\" belong to no tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "the tensors cover 4 bytes but the file holds 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, "bad shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0, "bad shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "bad shape"},
        {"{\"__metadata__\":{\"k\":\"\\u00zz\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"\\ud800\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"\\udc00x\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"\\u0000\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"a\tb\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"\\x\"}}", 0, "corrupt __metadata__ entry"},
        {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "__metadata__ has the key \"k\" twice"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ appears twice"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "corrupt __metadata__ entry"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "has the key \"dtype\" twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[4,8]}}", 8, "tensor \"a\" appears twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "lacks dtype, shape or data_offsets"},
        {"{\"\xff\":{}}", 0, "invalid UTF-8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, "trailing bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "do not fit"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 2, "truncated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_st(path, bad[i].header, data, bad[i].n);
        safetensors_File f;
        ck_assert_msg(!safetensors_load(path, &f, err, sizeof err), "accepted: %s", bad[i].header);
        ck_assert_msg(strstr(err, bad[i].msg), "%s\n-> \"%s\", expected \"%s\"", bad[i].header, err, bad[i].msg);
    }
    /* what is valid: ranges in any order, escapes and a surrogate pair, zero-size tensors */
    write_st(path,
             "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},\"__metadata__\":{\"k\":\"\\ud83d\\ude00 \\u00e9\\n\"},"
             "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 8);
    safetensors_File f;
    ck_assert_msg(safetensors_load(path, &f, err, sizeof err), "%s", err);
    ck_assert_str_eq(safetensors_meta(&f, "k"), "\xf0\x9f\x98\x80 \xc3\xa9\n");
    ck_assert(torch_item(safetensors_get(&f, "b")) == 2.0);
    ck_assert_int_eq(torch_numel(safetensors_get(&f, "z")), 0);
    remove_dir(dir);
}
END_TEST

/* ---- checkpoints whose metadata lies or is missing -------------------------------------------------------------- */

/* The checkpoint `src` re-saved with metadata key `drop` left out (or its value
 * replaced by `value`), and without the tensor `drop_tensor`. */
static void variant(const char *src, const char *dst, const char *key, const char *value, const char *drop_tensor) {
    safetensors_File f;
    char err[512];
    ck_assert_msg(safetensors_load(src, &f, err, sizeof err), "%s", err);
    const char *kv[32];
    int n = 0;
    for (int i = 0; i < f.n_meta; i++) {
        if (key && strcmp(f.meta_keys[i], key) == 0 && !value) continue;
        kv[2 * n] = f.meta_keys[i];
        kv[2 * n + 1] = key && strcmp(f.meta_keys[i], key) == 0 ? value : f.meta_values[i];
        n++;
    }
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)f.tensors.n);
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)f.tensors.n);
    int k = 0;
    for (int i = 0; i < f.tensors.n; i++)
        if (!drop_tensor || strcmp(f.tensors.names[i], drop_tensor) != 0) names[k] = f.tensors.names[i], ts[k++] = f.tensors.tensors[i];
    ck_assert_msg(safetensors_save(dst, (nn_TensorList){k, names, ts}, n, kv, err, sizeof err), "%s", err);
}

START_TEST(test_checkpoints_that_lie) {
    char *dir = temp_dir(), good[256], bad[256], cmd[2048], *out;
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    const char *flags = "--context 8 --dim 8 --heads 2 --batch 2";
    snprintf(cmd, sizeof cmd, "%s/train %s --steps 2 --save %s >/dev/null 2>&1", build_dir(), flags, good);
    ck_assert_int_eq(system(cmd), 0);
    struct { const char *key, *value, *drop, *msg; } cases[] = {
        {"format", NULL, NULL, "metadata lacks \"format\""},
        {"format", "something else", NULL, "format is \"something else\""},
        {"step", NULL, NULL, "metadata lacks \"step\""},
        {"step", "99999999999999999999", NULL, "bad step \"99999999999999999999\""},
        {"step", "-1", NULL, "bad step \"-1\""},
        {"step", "1e3", NULL, "bad step \"1e3\""},
        {"step", "9223372036854775807", NULL, "more steps would overflow the step count"},
        {"context dim heads vocab_size", NULL, NULL, "metadata lacks \"context dim heads vocab_size\""},
        {"context dim heads vocab_size", "8 8 2", NULL, "are not four numbers"},
        {"vocab_codepoints", NULL, NULL, "metadata lacks \"vocab_codepoints\""},
        {"vocab_codepoints", "65 66", NULL, "different character vocabulary"},
        {NULL, NULL, "rng_state", "has no rng_state"},
        {NULL, NULL, "optim.state.0.exp_avg", "optim"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        variant(good, bad, cases[i].key, cases[i].value, cases[i].drop);
        snprintf(cmd, sizeof cmd, "%s/train %s --steps 1 --load %s 2>&1", build_dir(), flags, bad);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == 1 && strstr(out, cases[i].msg), "case %zu: rc %d, expected \"%s\" in:\n%s", i, rc,
                      cases[i].msg, out);
        free(out);
    }
    /* texts with a NUL: the vocabulary is compared exactly, NUL included */
    char t1[256], t2[256];
    snprintf(t1, sizeof t1, "%s/nul1.txt", dir);
    snprintf(t2, sizeof t2, "%s/nul2.txt", dir);
    FILE *f1 = fopen(t1, "wb"), *f2 = fopen(t2, "wb");
    for (int i = 0; i < 20; i++) fwrite("ab\0cd ", 1, 6, f1), fwrite("ab\0ce ", 1, 6, f2);
    fclose(f1), fclose(f2);
    snprintf(cmd, sizeof cmd, "%s/train --data %s %s --steps 1 --save %s >/dev/null 2>&1 && "
             "%s/train --data %s %s --steps 1 --load %s 2>&1", build_dir(), t1, flags, good, build_dir(), t2, flags, good);
    ck_assert_int_eq(run_command(cmd, &out), 1);
    ck_assert_msg(strstr(out, "different character vocabulary"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/train --data %s %s --steps 1 --load %s 2>&1", build_dir(), t1, flags, good);
    ck_assert_int_eq(run_command(cmd, &out), 0);
    free(out);
    remove_dir(dir);
}
END_TEST

/* ---- the trainer against hostile flags and signals ----------------------------------------------------------------- */
START_TEST(test_trainer_hostile_flags) {
    struct { const char *flags; int rc; const char *msg; } cases[] = {
        {"--sample 2305843009213693951 --steps 1", 1, "not enough memory: you tried to allocate"},
        {"--batch 2305843009213693952 --steps 1", 1, "not enough memory: you tried to allocate"},
        {"--dim 4611686018427387904 --heads 1 --steps 1", 1, "numel: integer multiplication overflow"},
        {"--steps 99999999999999999999", 2, "--steps expects an integer >= 0"},
        {"--lr 1e30 --steps 3 --sample 0", 0, "step 3 loss nan\n"}, /* Python's spelling, never -nan */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cmd[512], *out;
        snprintf(cmd, sizeof cmd, "%s/train %s 2>&1", build_dir(), cases[i].flags);
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == cases[i].rc && strstr(out, cases[i].msg), "%s: rc %d\n%s", cases[i].flags, rc, out);
        ck_assert_msg(!strstr(out, "-nan"), "%s", out);
        free(out);
    }
    /* seeds: all of torch.manual_seed's range; -1 is 2^64-1 */
    char cmd[512], *a, *b;
    snprintf(cmd, sizeof cmd, "%s/train --seed -1 --steps 2 --sample 0", build_dir());
    ck_assert_int_eq(run_command(cmd, &a), 0);
    snprintf(cmd, sizeof cmd, "%s/train --seed 18446744073709551615 --steps 2 --sample 0", build_dir());
    ck_assert_int_eq(run_command(cmd, &b), 0);
    ck_assert_str_eq(a, b);
    free(a), free(b);
}
END_TEST

/* SIGTERM and SIGHUP save as Ctrl-C does; Ctrl-C stops a sample. */
START_TEST(test_signals) {
    char *dir = temp_dir(), cmd[1024], path[256], err[512], *out;
    static const struct { const char *sig; int num; } sigs[] = {{"TERM", SIGTERM}, {"HUP", SIGHUP}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/ck%d.safetensors", dir, i);
        snprintf(cmd, sizeof cmd, "timeout --preserve-status -s %s 1 %s/train --steps 100000000 --save %s 2>&1",
                 sigs[i].sig, build_dir(), path);
        ck_assert_int_eq(run_command(cmd, &out), 128 + sigs[i].num);
        char want[64];
        snprintf(want, sizeof want, "stopped by signal %d after step ", sigs[i].num);
        const char *at = strstr(out, want);
        ck_assert_msg(at && strstr(out, "; saved to "), "%s", out);
        safetensors_File f;
        ck_assert_msg(safetensors_load(path, &f, err, sizeof err), "%s", err);
        ck_assert_int_eq(atol(safetensors_meta(&f, "step")), atol(at + strlen(want)));
        free(out);
    }
    snprintf(cmd, sizeof cmd, "timeout --preserve-status -s INT 2 %s/train --steps 5 --sample 100000000 2>&1", build_dir());
    ck_assert_int_eq(run_command(cmd, &out), 130);
    ck_assert_msg(strstr(out, "sampling stopped by signal 2"), "%s", out + (strlen(out) > 200 ? strlen(out) - 200 : 0));
    free(out);
    remove_dir(dir);
}
END_TEST

/* kill -9 at random moments of a run that saves every step: the checkpoint
 * on disk always loads, and a resumed run goes on from it. */
START_TEST(test_kill9_never_damages_the_checkpoint) {
    char *dir = temp_dir(), path[256], cmd[1024];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    srand(42);
    int loaded = 0;
    for (int round = 0; round < 6; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            char bin[256];
            snprintf(bin, sizeof bin, "%s/train", build_dir());
            freopen("/dev/null", "w", stdout);
            freopen("/dev/null", "w", stderr);
            execl(bin, bin, "--steps", "100000000", "--save-every", "1", "--save", path, "--context", "8", "--dim", "8",
                  "--heads", "2", "--batch", "2", (char *)NULL);
            _exit(127);
        }
        usleep(150000 + (useconds_t)(rand() % 400000));
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        ck_assert(WIFSIGNALED(st));
        if (access(path, F_OK) != 0) continue; /* killed before its first save */
        safetensors_File f;
        char err[512];
        ck_assert_msg(safetensors_load(path, &f, err, sizeof err), "round %d: %s", round, err);
        snprintf(cmd, sizeof cmd, "%s/train --steps 1 --context 8 --dim 8 --heads 2 --batch 2 --load %s 2>&1",
                 build_dir(), path);
        char *out;
        int rc = run_command(cmd, &out);
        ck_assert_msg(rc == 0, "round %d: resuming failed (%d):\n%s", round, rc, out);
        free(out);
        loaded++;
    }
    ck_assert_int_gt(loaded, 2);
    remove_dir(dir);
}
END_TEST

/* Under AddressSanitizer a read past a tensor inside an arena block, or of a
 * released tensor, is caught (the arena poisons what no tensor owns). */
static void expect_asan_report(void (*bad)(void), const char *what) {
#ifdef AC_ASAN
    char buf[4096];
    int st = child_stderr(bad, buf, sizeof buf);
    ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && strstr(buf, "use-after-poison"),
                  "%s went unnoticed:\n%s", what, buf);
#else
    (void)bad;
    (void)what;
#endif
}
static volatile float sink;
static void read_past_end(void) {
    Tensor *t = torch_zeros(SHAPE(3));
    torch_ones(SHAPE(3)); /* a neighbour in the same block */
    sink = ((volatile float *)t->data)[5];
}
static void read_released(void) {
    ac_mark m = ac_arena_mark();
    Tensor *t = torch_zeros(SHAPE(3));
    ac_arena_release(m);
    sink = ((volatile float *)t->data)[0];
}
START_TEST(test_asan_sees_arena_overruns) {
    expect_asan_report(read_past_end, "a read past the end of a tensor");
    expect_asan_report(read_released, "a read of a released tensor");
}
END_TEST

/* ---- output that is lost, targets that are not files ----------------------------------------------------------------- */

/* The hostile flags of tests/platform/hostile_flags.sh (also run on the 32-bit build by make check-m32),
 * output to /dev/full among them. */
START_TEST(test_hostile_flags_script) {
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, "sh tests/platform/hostile_flags.sh %s 2>&1", build_dir());
    int rc = run_command(cmd, &out);
    ck_assert_msg(rc == 0, "%s", out);
    free(out);
}
END_TEST

static bool is_fifo(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* --save, --plot and --attention-svg at a FIFO, a directory or (as root) a device: refused before
 * training, and the target is left what it was; a symlink to a regular file is fine. */
START_TEST(test_saves_never_replace_devices) {
    char *dir = temp_dir(), cmd[1024], *out, fifo[300], sub[300], dev[300], link[300], real[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sub, sizeof sub, "%s/dir", dir);
    snprintf(dev, sizeof dev, "%s/null", dir);
    snprintf(real, sizeof real, "%s/real.svg", dir);
    snprintf(link, sizeof link, "%s/link.svg", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    bool root = geteuid() == 0 && mknod(dev, S_IFCHR | 0600, makedev(1, 3)) == 0;
    FILE *f = fopen(real, "w");
    fclose(f);
    ck_assert_int_eq(symlink(real, link), 0);
    const char *flags[] = {"--save", "--plot", "--attention-svg"};
    struct { const char *path, *kind; } targets[] = {{fifo, "a FIFO"}, {sub, "a directory"}, {dev, "a character device"}};
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < (root ? 3 : 2); t++) {
            snprintf(cmd, sizeof cmd, "%s/train --steps 2 %s %s 2>&1", build_dir(), flags[k], targets[t].path);
            int rc = run_command(cmd, &out);
            char want[400];
            snprintf(want, sizeof want, "train: %s: %s is %s, not a regular file: it is not replaced", flags[k],
                     targets[t].path, targets[t].kind);
            ck_assert_msg(rc == 1 && strstr(out, want) && !strstr(out, "step 1 loss"), "%s: rc %d: %s", cmd, rc, out);
            free(out);
        }
    ck_assert(is_fifo(fifo));
    struct stat st;
    ck_assert(!root || (stat(dev, &st) == 0 && S_ISCHR(st.st_mode)));
    snprintf(cmd, sizeof cmd, "%s/train --steps 2 --plot %s >/dev/null 2>&1", build_dir(), link);
    ck_assert_int_eq(run_command(cmd, NULL), 0);
    ck_assert(lstat(link, &st) == 0); /* the link was replaced by the file, as any rename does; the plot is there */
    /* the library's writers refuse the same */
    char err[512];
    nn_Linear *l = nn_Linear_new(2, 2, false);
    ck_assert(!safetensors_save(fifo, nn_state_dict(&l->module), 0, NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "is a FIFO, not a regular file"), "%s", err);
    nn_free(&l->module);
    ck_assert(!ac_output_path_check(fifo, false, err, sizeof err));
    ck_assert(ac_output_path_check(real, true, err, sizeof err));
    ck_assert(is_fifo(fifo));
    /* --data on a FIFO says it waits, then reads what a writer sends */
    snprintf(cmd, sizeof cmd, "(sleep 1; printf 'abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcab' > %s) & %s/train --data %s --context 8 --dim 8 "
             "--heads 2 --batch 2 --steps 1 2>&1", fifo, build_dir(), fifo);
    int rc = run_command(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "is a FIFO: waiting for a writer") && strstr(out, "step 1 loss"), "rc %d: %s", rc, out);
    free(out);
    remove_dir(dir);
}
END_TEST

Suite *suite_hostile(void) {
    Suite *s = suite_create("hostile");
    TCase *tc = tcase("hostile");
    tcase_add_test(tc, test_sizes_that_overflow);
    tcase_add_test(tc, test_error_texts);
    tcase_add_test(tc, test_empty_inner_dims);
    tcase_add_test(tc, test_arena_survives_failed_blocks);
    tcase_add_test(tc, test_every_allocation_of_a_step_can_fail);
    tcase_add_test(tc, test_programs_under_allocation_failure);
    tcase_add_test(tc, test_strict_safetensors_reader);
    tcase_add_test(tc, test_checkpoints_that_lie);
    tcase_add_test(tc, test_trainer_hostile_flags);
    tcase_add_test(tc, test_signals);
    tcase_add_test(tc, test_kill9_never_damages_the_checkpoint);
    tcase_add_test(tc, test_asan_sees_arena_overruns);
    tcase_add_test(tc, test_hostile_flags_script);
    tcase_add_test(tc, test_saves_never_replace_devices);
    suite_add_tcase(s, tc);
    return s;
}
