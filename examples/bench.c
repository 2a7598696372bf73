/* The benchmark workloads of ../shared/pytorch/workloads.py, in C; one JSON
 * line per workload with the same keys.
 *   article     forward + backward of the article's SelfAttention(3, 2, 4) on its 6x3 input (us/iter)
 *   train-tiny  one Adam step of ToyLM V=65 T=32 B=16 d=64 H=4 (ms/step)
 *   train-base  the same with T=128 B=16 d=256 H=8 (ms/step)
 *   matmul      (a @ b).sum().backward() for square n = 128..2048, GFLOP/s counted as 6 n^3 per step
 *   long-context  one Adam step of ToyLM V=65 T=4096 B=1 d=128 H=4, fused then explicit attention
 *               (ms/step and peak RSS: the explicit path holds several (B, H, T, T) tensors)
 *   tokenize    GPT-2's tokenizer: vocabulary load, encode cold and warm, decode (no PyTorch counterpart)
 *   gpt-124m    one AdamW step of the book's GPTModel (124M config, context 256, dropout 0.1) on 2 x 256 tokens
 *   gpt-generate  greedy generation of 100 tokens after "Every effort moves you" with the untrained 124M
 *               model at context 1024, as generate_text_simple does it (tokens/s)
 *   gpt-classify  one AdamW step of chapter 6's classifier: GPT-2 small's shape (context 1024, qkv_bias,
 *               no dropout), all frozen but the last block, the final norm and a new 768 x 2 head, on
 *               8 x 120 tokens, the loss on the last token's logits (ms/step, peak RSS)
 *   gpt-lora    the same step with appendix E's LoRA (rank 16, alpha 16) on every Linear, the rest frozen
 *   gpt-sft     one AdamW step of chapter 7's instruction finetuning: GPT-2 medium's shape (355M, context
 *               1024, qkv_bias, no dropout), all trainable, on 8 x 64 tokens whose targets end in -100
 *               padding (ms/step, tokens/s, peak RSS)
 *   llm-generate  greedy tokens of a random Qwen3 of Qwen3-0.6B's shape (tied, 28 layers, emb 1024) with
 *               the KV cache, its weights held in float32 and then in bfloat16, against the memory limit:
 *               the weight bytes a token reads (every weight once, as held) over the read bandwidth that
 *               `floor` measures at this thread count (PyTorch's: the book's KV-cache loop in
 *               tests/tools/llm_bench.py, float32 and BF16)
 *   llm-generate-llama  the same at Llama-3.2-1B's shape (16 layers, emb 2048, hidden 8192, tied)
 *   llm-train   one AdamW step of a Qwen3 of GPT-2 small's size (emb 768, 12 layers, 12 heads, 4 kv groups,
 *               hidden 2048, GPT-2's vocab, its own head) on 2 x 256 tokens (ms/step, peak RSS; PyTorch's
 *               in tests/tools/llm_bench.py)
 *   floor       the machine's floor under gpt-124m's step (no PyTorch counterpart): this CPU's FMA peak
 *               (12 independent chains of the widest FMAs, on each thread), its read bandwidth (sums of a
 *               512 MiB array), and the step's FLOPs at that peak plus AdamW's traffic at that bandwidth
 * Usage: bench [--threads N] [--exact] [WORKLOAD ...]   (default: the eleven of workloads.py)
 * AC_CPU_CAPABILITY=avx2 (or default) in the environment times what a machine without AVX-512 (or
 * without AVX2) runs, as ATEN_CPU_CAPABILITY=avx2 with OPENBLAS_CORETYPE=HASWELL does PyTorch's.
 * Peak RSS is getrusage's ru_maxrss, as workloads.py's, but per workload: PyTorch runs one workload per
 * process, so before each workload bench hands the arena back (ac_shutdown) and, on Linux, resets the
 * high-water mark (/proc/self/clear_refs "5") to the RSS it has then. Elsewhere it is process-wide (a
 * workload's figure includes the largest before it): run one workload per process to compare.
 * Timing as workloads.py: warm-up, then the median of `repeat` runs of `iters` steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include <pthread.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

#include "extend.h"
#include "dpo.h"
#include "gpt.h"
#include "llm.h"
#include "nn.h"
#include "optim.h"
#include "tensor.h"
#include "tokenizer.h"
#include "toy_lm.h"

static double now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef void (*StepFn)(void *ctx);

/* timed(step, warmup, iters, repeat): the median seconds per step */
static double timed(StepFn step, void *ctx, int warmup, int iters, int repeat) {
    for (int i = 0; i < warmup; i++) step(ctx);
    double runs[5];
    for (int r = 0; r < repeat; r++) {
        double t = now();
        for (int i = 0; i < iters; i++) step(ctx);
        runs[r] = (now() - t) / iters;
    }
    qsort(runs, (size_t)repeat, sizeof(double), cmp_double);
    return repeat % 2 ? runs[repeat / 2] : (runs[repeat / 2 - 1] + runs[repeat / 2]) / 2; /* statistics.median */
}

static double peak_rss_mb(void) {
#if defined(__unix__) || defined(__APPLE__)
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
#if defined(__APPLE__)
    return (double)ru.ru_maxrss / (1024.0 * 1024.0); /* bytes on macOS */
#else
    return (double)ru.ru_maxrss / 1024.0;            /* kilobytes on Linux */
#endif
#else
    return 0.0;
#endif
}

/* ru_maxrss back to the current RSS (Linux 4.0+), so that the next workload's peak is its own */
static void reset_peak_rss(void) {
#if defined(__linux__)
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
#endif
}

static void print_line(const char *workload, const char *fields) {
    printf("{%s, \"workload\": \"%s\", \"threads\": %d, \"engine\": \"attention.c (%s math, %s kernel)\", "
           "\"peak_rss_mb\": %.1f}\n",
           fields, workload, torch_get_num_threads(), ac_get_exact() ? "exact" : "fast",
           ac_get_exact() ? "reference-order" : ac_gemm_kernel_name(), peak_rss_mb());
    fflush(stdout);
}

/* ---- article ------------------------------------------------------------------------------------ */

typedef struct { nn_SelfAttention *sa; Tensor *x; } ArticleCtx;

static void article_step(void *p) {
    ArticleCtx *c = p;
    ac_mark m = ac_arena_mark();
    nn_zero_grad(&c->sa->module);                                      /* sa.zero_grad() */
    torch_backward(torch_sum(nn_SelfAttention_forward(c->sa, c->x)), NULL); /* sa(x).sum().backward() */
    ac_arena_release(m);
}

static void article(void) {
    torch_manual_seed(123);
    nn_Embedding *e = nn_Embedding_new(50000, 3);
    Tensor *x = ac_persist(torch_detach(nn_Embedding_forward(e, torch_tensor_long((const int64_t[]){0, 4, 5, 2, 1, 3}, SHAPE(6)))));
    nn_free(&e->module);
    torch_manual_seed(123);
    ArticleCtx c = {nn_SelfAttention_new(3, 2, 4), x};
    double s = timed(article_step, &c, 200, 2000, 5);
    char f[64];
    snprintf(f, sizeof f, "\"us_per_iter\": %.3f", s * 1e6);
    print_line("article", f);
    nn_free(&c.sa->module);
    ac_free(x);
}

/* ---- train-tiny, train-base ------------------------------------------------------------------------- */

typedef struct { nn_ToyLM *model; optim_Optimizer *opt; Tensor *idx, *tgt; int64_t V; } TrainCtx;

static void train_step(void *p) {
    TrainCtx *c = p;
    ac_mark m = ac_arena_mark();
    optim_zero_grad(c->opt);                                           /* opt.zero_grad() */
    Tensor *logits = nn_ToyLM_forward(c->model, c->idx);               /* logits = model(idx) */
    Tensor *loss = torch_cross_entropy(torch_reshape(logits, SHAPE(-1, c->V)), torch_reshape(c->tgt, SHAPE(-1)), -100);
    torch_backward(loss, NULL);                                        /* loss.backward() */
    optim_step(c->opt);                                                /* opt.step() */
    ac_arena_release(m);
}

static void train(const char *name, int64_t V, int64_t T, int64_t B, int64_t d, int64_t H, int iters, bool fused) {
    torch_manual_seed(0);
    TrainCtx c;
    c.V = V;
    c.model = nn_ToyLM_new(V, T, d, H);
    c.model->attn->fused = fused;
    c.opt = optim_Adam(nn_named_parameters(&c.model->module), 1e-3, 0.9, 0.999, 1e-8, 0.0, false);
    ac_mark m = ac_arena_mark();
    Tensor *data = torch_randint(0, V, SHAPE(B, T + 1));               /* data = torch.randint(0, V, (B, T + 1)) */
    c.idx = ac_persist(torch_slice(data, 1, 0, T));                 /* idx = data[:, :-1] */
    c.tgt = ac_persist(torch_slice(data, 1, 1, T + 1));             /* tgt = data[:, 1:] */
    ac_arena_release(m);
    double s = T <= 128 ? timed(train_step, &c, 5, iters, 5) : timed(train_step, &c, 1, iters, 2);
    char f[96];
    snprintf(f, sizeof f, "\"ms_per_step\": %.3f, \"attention\": \"%s\"", s * 1e3, fused ? "fused" : "explicit");
    print_line(name, f);
    ac_free(c.idx);
    ac_free(c.tgt);
    optim_free(c.opt);
    nn_free(&c.model->module);
    ac_shutdown(); /* the arena's blocks back, so that the next workload's peak RSS is its own */
}

/* ---- gpt-124m, gpt-generate: the book's GPTModel ---------------------------------------------------- */

typedef struct { nn_GPTModel *model; optim_Optimizer *opt; Tensor *x, *y; } GptCtx;

static void gpt_step(void *p) {
    GptCtx *c = p;
    ac_mark m = ac_arena_mark();
    optim_zero_grad(c->opt);                                           /* opt.zero_grad() */
    torch_backward(gpt_calc_loss_batch(c->x, c->y, c->model), NULL);   /* F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward() */
    optim_step(c->opt);                                                /* opt.step() */
    ac_arena_release(m);
}

static nn_GPTConfig gpt_cfg(int64_t context) {
    nn_GPTConfig cfg = GPT_CONFIG_124M;
    cfg.context_length = context;
    return cfg;
}

/* The training steps' batch: 2 x 256 tokens and their targets, drawn as workloads.py draws them */
static void random_tokens(Tensor **x, Tensor **y) {
    torch_manual_seed(0);
    ac_mark m = ac_arena_mark();
    Tensor *data = torch_randint(0, 50257, SHAPE(2, 257));             /* data = torch.randint(0, 50257, (2, 257)) */
    *x = ac_persist(torch_slice(data, 1, 0, 256));                     /* x, y = data[:, :-1], data[:, 1:] */
    *y = ac_persist(torch_slice(data, 1, 1, 257));
    ac_arena_release(m);
}

/* A step on 2 x 256 tokens that took s seconds, as workloads.py prints it */
static void print_step(const char *workload, double s) {
    char f[96];
    snprintf(f, sizeof f, "\"ms_per_step\": %.1f, \"tokens_per_s\": %.1f", s * 1e3, 512 / s);
    print_line(workload, f);
}

static void gpt_124m(void) {
    torch_manual_seed(123);
    GptCtx c;
    c.model = nn_GPTModel_new(gpt_cfg(256));                           /* model = gpt_model(); model.train() */
    c.opt = optim_AdamW(nn_named_parameters(&c.model->module), 4e-4, 0.9, 0.999, 1e-8, 0.1, false);
    random_tokens(&c.x, &c.y);
    print_step("gpt-124m", timed(gpt_step, &c, 1, 1, 3));                      /* timed(step, 1, 1, repeat=3) */
    ac_free(c.x);
    ac_free(c.y);
    optim_free(c.opt);
    nn_free(&c.model->module);
    ac_shutdown();
}

static void gpt_generate_workload(void) {
    torch_manual_seed(123);
    nn_GPTModel *model = nn_GPTModel_new(gpt_cfg(1024));
    nn_eval(&model->module);
    ac_mark m = ac_arena_mark();
    Tensor *idx = torch_tensor_long((int64_t[]){6109, 3626, 6100, 345}, SHAPE(1, 4)); /* "Every effort moves you" */
    double t = now();
    gpt_generate_ex(model, idx, 100, 1024, 0.0, 0, -1, false, NULL, NULL); /* generate_text_simple(model, idx, 100, 1024) */
    double s = now() - t;
    t = now();
    gpt_generate_ex(model, idx, 100, 1024, 0.0, 0, -1, true, NULL, NULL);  /* the same tokens with the KV cache */
    double sc = now() - t;
    ac_arena_release(m);
    char f[160];
    snprintf(f, sizeof f, "\"tokens_per_s\": %.2f, \"ms_per_token\": %.1f, \"kv_cache_tokens_per_s\": %.2f, "
             "\"kv_cache_ms_per_token\": %.1f", 100 / s, s * 10, 100 / sc, sc * 10);
    print_line("gpt-generate", f);
    nn_free(&model->module);
    ac_shutdown();
}

/* ---- gpt-classify, gpt-lora, gpt-sft: chapters 6 and 7, appendix E -------------------------------- */

/* finetune_model(emb, heads, layers): context 1024, no dropout, qkv_bias, torch.manual_seed(123) */
static nn_GPTModel *finetune_model(int64_t emb, int64_t heads, int64_t layers) {
    nn_GPTConfig cfg = {.vocab_size = 50257, .context_length = 1024, .emb_dim = emb, .n_heads = heads,
                        .n_layers = layers, .drop_rate = 0.0, .qkv_bias = true};
    torch_manual_seed(123);
    return nn_GPTModel_new(cfg);
}

static void gpt_cls_step(void *p) {
    GptCtx *c = p;
    ac_mark m = ac_arena_mark();
    optim_zero_grad(c->opt);                                           /* opt.zero_grad() */
    torch_backward(gpt_calc_loss_batch_cls(c->x, c->y, c->model), NULL); /* F.cross_entropy(model(x)[:, -1, :], y).backward() */
    optim_step(c->opt);                                                /* opt.step() */
    ac_arena_release(m);
}

static void gpt_classify(bool lora) {
    GptCtx c;
    c.model = finetune_model(768, 12, 12);                             /* model = finetune_model(768, 12, 12) */
    torch_manual_seed(123);
    c.model->out_head = (nn_Linear *)nn_setattr(&c.model->module, "out_head",
                                                &nn_Linear_new(768, 2, true)->module); /* model.out_head = nn.Linear(768, 2) */
    nn_requires_grad_(&c.model->module, false);                        /* for p in model.parameters(): p.requires_grad = False */
    if (lora) {
        nn_replace_linear_with_lora(&c.model->module, 16, 16);         /* replace_linear_with_lora(model, 16, 16) */
    } else {                                                           /* the last block, final_norm, out_head trainable */
        nn_requires_grad_(nn_Sequential_get(c.model->trf_blocks, -1), true);
        nn_requires_grad_(&c.model->final_norm->module, true);
        nn_requires_grad_(&c.model->out_head->module, true);
    }
    nn_train(&c.model->module, true);                                  /* model.train() */
    c.opt = optim_AdamW(nn_named_parameters(&c.model->module), 5e-5, 0.9, 0.999, 1e-8, 0.1, false);
    torch_manual_seed(0);
    ac_mark m = ac_arena_mark();
    c.x = ac_persist(torch_randint(0, 50257, SHAPE(8, 120)));          /* x = torch.randint(0, 50257, (8, 120)) */
    c.y = ac_persist(torch_randint(0, 2, SHAPE(8)));                   /* y = torch.randint(0, 2, (8,)) */
    ac_arena_release(m);
    double s = timed(gpt_cls_step, &c, 1, 1, 3);                       /* timed(step, 1, 1, repeat=3) */
    char f[160];
    snprintf(f, sizeof f, "\"ms_per_step\": %.1f, \"trainable_params\": %lld", s * 1e3,
             (long long)nn_num_trainable_parameters(&c.model->module));
    print_line(lora ? "gpt-lora" : "gpt-classify", f);
    ac_free(c.x);
    ac_free(c.y);
    optim_free(c.opt);
    nn_free(&c.model->module);
    ac_shutdown();
}

static void gpt_sft(void) {
    GptCtx c;
    c.model = finetune_model(1024, 16, 24);                            /* model = finetune_model(1024, 16, 24) */
    nn_train(&c.model->module, true);                                  /* model.train() */
    c.opt = optim_AdamW(nn_named_parameters(&c.model->module), 5e-5, 0.9, 0.999, 1e-8, 0.1, false);
    torch_manual_seed(0);
    ac_mark m = ac_arena_mark();
    Tensor *data = torch_randint(0, 50256, SHAPE(8, 65));              /* data = torch.randint(0, 50256, (8, 65)) */
    c.x = ac_persist(torch_slice(data, 1, 0, 64));                     /* x, y = data[:, :-1].clone(), data[:, 1:].clone() */
    c.y = ac_persist(torch_slice(data, 1, 1, 65));
    ac_arena_release(m);
    int64_t *x = ac_data_long(c.x), *y = ac_data_long(c.y);
    for (int64_t i = 0; i < 8; i++) {                                  /* each example ends at its own length */
        int64_t n = 40 + 3 * i;
        for (int64_t j = n; j < 64; j++) x[i * 64 + j] = 50256;        /* x[i, n:] = 50256 */
        y[i * 64 + n] = 50256;                                         /* y[i, n] = 50256 */
        for (int64_t j = n + 1; j < 64; j++) y[i * 64 + j] = -100;     /* y[i, n + 1:] = -100 */
    }
    double s = timed(gpt_step, &c, 1, 1, 3);                           /* timed(step, 1, 1, repeat=3) */
    char f[96];
    snprintf(f, sizeof f, "\"ms_per_step\": %.1f, \"tokens_per_s\": %.1f", s * 1e3, 512 / s);
    print_line("gpt-sft", f);
    ac_free(c.x);
    ac_free(c.y);
    optim_free(c.opt);
    nn_free(&c.model->module);
    ac_shutdown();
}

/* ---- gpt-dpo: the DPO notebook's step (tests/tools/dpo_bench.py is its PyTorch side) --------------- */

typedef struct { nn_GPTModel *policy, *reference; optim_Optimizer *opt; PreferenceBatch batch; } DpoCtx;

static void dpo_step(void *p) {
    DpoCtx *c = p;
    ac_mark m = ac_arena_mark();
    optim_zero_grad(c->opt);                                                          /* opt.zero_grad() */
    gpt_DPOLoss l = gpt_compute_dpo_loss_batch(&c->batch, c->policy, c->reference, 0.1); /* loss, _, _ = compute_dpo_loss_batch(...) */
    torch_backward(l.loss, NULL);                                                     /* loss.backward() */
    optim_step(c->opt);                                                               /* opt.step() */
    ac_arena_release(m);
}

/* the reference's share of a step: its two forwards and log-probabilities under no_grad */
static void dpo_reference_step(void *p) {
    DpoCtx *c = p;
    ac_mark m = ac_arena_mark();
    bool prev = torch_no_grad_enter();
    gpt_compute_logprobs(nn_GPTModel_forward(c->reference, c->batch.chosen), c->batch.chosen, c->batch.chosen_mask);
    gpt_compute_logprobs(nn_GPTModel_forward(c->reference, c->batch.rejected), c->batch.rejected, c->batch.rejected_mask);
    torch_no_grad_exit(prev);
    ac_arena_release(m);
}

/* the resident set now (Linux's /proc; 0 elsewhere) */
static double rss_mb(void) {
#if defined(__unix__) || defined(__APPLE__)
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
#else
    return 0;
#endif
}

static void gpt_dpo(void) {
    DpoCtx c;
    c.policy = finetune_model(1024, 16, 24);                                          /* policy = finetune_model(1024, 16, 24) */
    double before = rss_mb();
    c.reference = gpt_reference_model(c.policy);                                      /* reference = copy.deepcopy(policy), frozen, eval */
    double reference_mb = rss_mb() - before;
    nn_train(&c.policy->module, true);                                                /* policy.train() */
    c.opt = optim_AdamW(nn_named_parameters(&c.policy->module), 5e-6, 0.9, 0.999, 1e-8, 0.01, false);
    torch_manual_seed(0);
    const int64_t B = 8, T = 77;
    Tensor *t[4];
    ac_mark m = ac_arena_mark();
    Tensor *chosen = torch_randint(0, 50256, SHAPE(B, T)), *rejected = torch_randint(0, 50256, SHAPE(B, T));
    Tensor *cm = torch_zeros_dtype(SHAPE(B, T), AC_BOOL), *rm = torch_zeros_dtype(SHAPE(B, T), AC_BOOL);
    for (int64_t i = 0; i < B; i++) {                                                 /* row i: a prompt of 40 + i, texts of 60 + 2i and 58 + 2i */
        int64_t p = 40 + i, cl = 60 + 2 * i, rl = 58 + 2 * i;
        for (int64_t j = 0; j < T; j++) {
            if (j >= cl) ac_data_long(chosen)[i * T + j] = 50256;
            if (j >= rl) ac_data_long(rejected)[i * T + j] = 50256;
            ((bool *)cm->data)[i * T + j] = j >= p + 2 && j < cl;
            ((bool *)rm->data)[i * T + j] = j >= p + 2 && j < rl;
        }
    }
    t[0] = ac_persist(chosen), t[1] = ac_persist(rejected), t[2] = ac_persist(cm), t[3] = ac_persist(rm);
    ac_arena_release(m);
    c.batch = (PreferenceBatch){B, NULL, NULL, t[0], t[1], t[2], t[3]};
    double s = timed(dpo_step, &c, 1, 1, 3);                                          /* timed(step, 1, 1, repeat=3) */
    double r = timed(dpo_reference_step, &c, 0, 1, 3);
    char f[200];
    snprintf(f, sizeof f, "\"ms_per_step\": %.1f, \"reference_forwards_ms\": %.1f, \"reference_mb\": %.1f", s * 1e3, r * 1e3,
             reference_mb);
    print_line("gpt-dpo", f);
    for (int k = 0; k < 4; k++) ac_free(t[k]);
    optim_free(c.opt);
    nn_free(&c.reference->module), nn_free(&c.policy->module);
    ac_shutdown();
}

/* ---- matmul ------------------------------------------------------------------------------------------- */

typedef struct { Tensor *a, *b; } MatCtx;

static void matmul_step(void *p) {
    MatCtx *c = p;
    ac_mark m = ac_arena_mark();
    c->a->grad = c->b->grad = NULL;                                    /* a.grad = b.grad = None */
    torch_backward(torch_sum(torch_matmul(c->a, c->b)), NULL);         /* (a @ b).sum().backward() */
    ac_arena_release(m);
}

static void matmul(void) {
    char f[256];
    int k = 0;
    for (int64_t n = 128; n <= 2048; n *= 2) {
        torch_manual_seed(0);
        MatCtx c;
        c.a = torch_requires_grad_(ac_persist(torch_rand(SHAPE(n, n))), true);
        c.b = torch_requires_grad_(ac_persist(torch_rand(SHAPE(n, n))), true);
        double flops = 6.0 * (double)n * (double)n * (double)n;
        int iters = (int)(2e8 / flops);
        if (iters < 1) iters = 1;
        double s = timed(matmul_step, &c, 2, iters, 5);
        k += snprintf(f + k, sizeof f - (size_t)k, "%s\"gflops_%lld\": %.2f", k ? ", " : "", (long long)n, flops / s / 1e9);
        ac_free(c.a);
        ac_free(c.b);
    }
    print_line("matmul", f);
}

/* GPT-2's tokenizer (no PyTorch counterpart: the book uses tiktoken): loading
 * the vocabulary, encoding the-verdict with a fresh tokenizer (every word new
 * to its cache), encoding 10 MB of it (the cache warm), decoding those ids. */

static void tokenize(void) {
    const char *root = getenv("AC_SHARED") ? getenv("AC_SHARED") : "../shared";
    char dir[1024], path[1024], err[512], f[256];
    snprintf(dir, sizeof dir, "%s/data/gpt2", root);
    snprintf(path, sizeof path, "%s/data/the-verdict.txt", root);
    size_t len;
    char *verdict = ac_read_file(path, &len, err, sizeof err);
    Tokenizer *tok = verdict ? tokenizer_load(dir, err, sizeof err) : NULL;
    if (!tok) {
        printf("{\"workload\": \"tokenize\", \"skipped\": \"needs %s and %s\"}\n", dir, path);
        free(verdict);
        return;
    }
    double loads[5], cold[5];
    for (int r = 0; r < 5; r++) {
        tokenizer_free(tok);
        double t0 = now();
        tok = tokenizer_load(dir, err, sizeof err);
        loads[r] = now() - t0;
        ac_mark m = ac_arena_mark();
        t0 = now();
        tokenizer_encode(tok, verdict, len, TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
        cold[r] = now() - t0;
        ac_arena_release(m);
    }
    qsort(loads, 5, sizeof(double), cmp_double);
    qsort(cold, 5, sizeof(double), cmp_double);
    size_t reps = 500, big_len = len * reps;
    char *big = malloc(big_len);
    for (size_t r = 0; r < reps; r++) memcpy(big + r * len, verdict, len);
    double warm[5], dec[5];
    for (int r = 0; r < 5; r++) {
        ac_mark m = ac_arena_mark();
        double t0 = now();
        Tensor *ids = tokenizer_encode(tok, big, big_len, TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
        warm[r] = now() - t0;
        t0 = now();
        tokenizer_decode(tok, ids->data, torch_numel(ids), NULL, err, sizeof err);
        dec[r] = now() - t0;
        ac_arena_release(m);
    }
    qsort(warm, 5, sizeof(double), cmp_double);
    qsort(dec, 5, sizeof(double), cmp_double);
    snprintf(f, sizeof f, "\"load_ms\": %.1f, \"cold_mb_s\": %.1f, \"warm_mb_s\": %.1f, \"decode_mb_s\": %.1f", loads[2] * 1e3,
             (double)len / cold[2] / 1e6, (double)big_len / warm[2] / 1e6, (double)big_len / dec[2] / 1e6);
    print_line("tokenize", f);
    free(big);
    free(verdict);
    tokenizer_free(tok);
}


/* ---- the machine's floor ---------------------------------------------------------------------------- */

/* 12 independent chains of FMAs as wide as the kernel's (the widest this CPU has, or what
 * AC_CPU_CAPABILITY allows): enough in flight to cover an FMA's latency on two ports, so the loop
 * runs at the core's peak. Returns the FLOPs done (2 per lane per FMA). */
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#ifdef BENCH_X86
__attribute__((target("avx512f"))) static double fma_chains_avx512(int64_t iters, float *sink) {
    __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, a, b);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    CHAINS(DECL)
    for (int64_t k = 0; k < iters; k++) { CHAINS(STEP) }
    __m512 s = _mm512_setzero_ps();
    CHAINS(SUM)
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * 12 * 16 * 2;
#undef DECL
#undef STEP
#undef SUM
}
__attribute__((target("avx2,fma"))) static double fma_chains_avx2(int64_t iters, float *sink) {
    __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 c##i = _mm256_set1_ps((float)(i));
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, a, b);
#define SUM(i) s = _mm256_add_ps(s, c##i);
    CHAINS(DECL)
    for (int64_t k = 0; k < iters; k++) { CHAINS(STEP) }
    __m256 s = _mm256_setzero_ps();
    CHAINS(SUM)
    float t[8];
    _mm256_storeu_ps(t, s);
    *sink = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
    return (double)iters * 12 * 8 * 2;
#undef DECL
#undef STEP
#undef SUM
}
#endif
static double fma_chains_scalar(int64_t iters, float *sink) {
#define DECL(i) float c##i = (float)(i);
#define STEP(i) c##i = fmaf(c##i, 0.999f, 1e-7f);
#define SUM(i) s += c##i;
    CHAINS(DECL)
    for (int64_t k = 0; k < iters; k++) { CHAINS(STEP) }
    float s = 0;
    CHAINS(SUM)
    *sink = s;
    return (double)iters * 12 * 2;
#undef DECL
#undef STEP
#undef SUM
}
#undef CHAINS

typedef struct { int64_t iters; double flops; float sink; const uint64_t *words; size_t n; uint64_t sum; } ProbeJob;

/* The width of the kernel's own FMAs (AC_CPU_CAPABILITY caps both alike). */
static const char *fma_width(void) {
    const char *k = ac_gemm_kernel_name();
    return strcmp(k, "avx512") == 0 || strcmp(k, "avx2+fma") == 0 ? k : "scalar";
}

static void *fma_job(void *p) {
    ProbeJob *j = p;
    const char *w = fma_width();
#ifdef BENCH_X86
    if (!strcmp(w, "avx512")) j->flops = fma_chains_avx512(j->iters, &j->sink);
    else if (!strcmp(w, "avx2+fma")) j->flops = fma_chains_avx2(j->iters, &j->sink);
    else
#endif
        j->flops = fma_chains_scalar(j->iters, &j->sink);
    return NULL;
}

/* A pass over this thread's share of the array, summed as 64-bit words (the adds vectorise and keep
 * up with memory; a float sum in order would not). */
static void *read_job(void *p) {
    ProbeJob *j = p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= j->n; i += 4) s0 += j->words[i], s1 += j->words[i + 1], s2 += j->words[i + 2], s3 += j->words[i + 3];
    j->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* Runs fn on `threads` threads at once (the first on this one); the best wall time of `repeat`. */
static double on_threads(void *(*fn)(void *), ProbeJob *jobs, int threads, int repeat) {
    double best = 1e30;
    for (int r = 0; r < repeat; r++) {
        pthread_t tid[256];
        double t = now();
        for (int i = 1; i < threads; i++)
            if (pthread_create(&tid[i], NULL, fn, &jobs[i])) ac_error("bench: cannot start a thread");
        fn(&jobs[0]);
        for (int i = 1; i < threads; i++) pthread_join(tid[i], NULL);
        t = now() - t;
        if (t < best) best = t;
    }
    return best;
}

/* FLOPs of gpt-124m's step (GPT_CONFIG_124M, 2 x 256 tokens): every Linear's product forward and
 * twice that backward (6 x tokens x weights), and attention's QK^T and PV likewise; bytes of AdamW:
 * per parameter (162,419,712 of them), read param, grad, m, v and write param, m, v. */
static void gpt_124m_work(double *flops, double *adam_bytes) {
    double e = 768, L = 12, V = 50257, T = 256, B = 2, ctx = 256, tok = B * T;
    double linear_weights = L * (4 * e * e + 2 * e * 4 * e) + e * V;
    double attention = L * B * 2 * (2 * T * T * e); /* QK^T and PV over all heads */
    *flops = 6 * tok * linear_weights + 3 * attention;
    double block = 4 * e * e + e + (e * 4 * e + 4 * e) + (4 * e * e + e) + 2 * 2 * e; /* att (no qkv bias), ff, 2 norms */
    double params = V * e + ctx * e + L * block + 2 * e + e * V;                      /* embeddings, blocks, final norm, head */
    *adam_bytes = params * 4 * 7;
}

/* The read bandwidth of this many threads (bytes/s): sums of a 512 MiB array; *check against dead code */
static double read_bandwidth(int threads, uint64_t *check_out) {
    ProbeJob jobs[256] = {{0}};
    size_t n = (size_t)512 << 17; /* 512 MiB of 64-bit words: far past any cache */
    uint64_t *words = ac_malloc(n * sizeof *words);
    for (size_t i = 0; i < n; i++) words[i] = i;
    for (int i = 0; i < threads; i++) {
        size_t a = n / (size_t)threads * (size_t)i, b = i == threads - 1 ? n : n / (size_t)threads * (size_t)(i + 1);
        jobs[i].words = words + a, jobs[i].n = b - a;
    }
    double t = on_threads(read_job, jobs, threads, 5), bw = (double)(n * sizeof *words) / t;
    uint64_t check = 0;
    for (int i = 0; i < threads; i++) check += jobs[i].sum;
    free(words);
    *check_out = check;
    return bw;
}

/* ---- llm-generate: Qwen3-0.6B's shape, greedy with the KV cache, against the memory limit ------------ */

/* The tokens/s of 24 greedy tokens after a 4-token prompt (its pass taken off), and the line. */
static void llm_generate_timed(const char *workload, const char *shape, nn_LLMModel *model, const int64_t prompt[4],
                               double bw, uint64_t check) {
    double weights = 0; /* what a token reads: every parameter but the embedding rows it does not look up */
    nn_TensorList ps = nn_named_parameters(&model->module);
    for (int i = 0; i < ps.n; i++) weights += (double)torch_numel(ps.tensors[i]);
    bool bf16 = nn_LLMModel_holds_bf16(model);
    ac_mark m = ac_arena_mark();
    Tensor *idx = torch_tensor_long(prompt, SHAPE(1, 4));
    llm_generate(model, idx, 2, 64, 0.0, -1, -1, true, NULL, NULL); /* warm-up */
    const int N = 24;
    double t = now();
    Tensor *out = llm_generate(model, idx, N + 1, 64, 0.0, -1, -1, true, NULL, NULL); /* the prompt, then N tokens one at a time */
    double s = now() - t;
    t = now();
    llm_generate(model, idx, 1, 64, 0.0, -1, -1, true, NULL, NULL); /* the prompt's pass alone, taken off */
    s -= now() - t;
    /* the first new token's id: the same model held either way gives the same greedy tokens */
    int64_t first = ((const int64_t *)out->data)[out->offset + 4];
    ac_arena_release(m);
    double tps = N / s, held = weights * (bf16 ? 2 : 4), f32 = weights * 4, b16 = weights * 2;
    char f[560];
    snprintf(f, sizeof f, "\"shape\": \"%s\", \"held\": \"%s\", \"params\": %.0f, \"tokens_per_s\": %.2f, \"ms_per_token\": %.1f, "
             "\"read_gb_per_s\": %.2f, \"gb_per_token\": %.3f, \"limit_tokens_per_s\": %.2f, \"of_limit\": %.2f, "
             "\"of_f32_limit\": %.2f, \"of_bf16_limit\": %.2f, \"first_token\": %lld, \"checksum\": %llu",
             shape, bf16 ? "bfloat16" : "float32", weights, tps, 1e3 / tps, bw / 1e9, held / 1e9, bw / held, tps / (bw / held),
             tps / (bw / f32), tps / (bw / b16), (long long)first, (unsigned long long)((check + (uint64_t)out->shape[1]) & 1));
    print_line(workload, f);
}

/* Greedy generation of a random model of a released model's shape (its head tied, as theirs is), its
 * weights held in float32 and then in bfloat16, against the memory limit at this thread count. */
static void llm_generate_workload(bool llama) {
    nn_LLMConfig qwen = {.arch = &nn_Qwen3Model_arch, .vocab_size = 151936, .context_length = 40960, .emb_dim = 1024, .n_heads = 16,
                         .n_layers = 28, .hidden_dim = 3072, .head_dim = 128, .qk_norm = true, .n_kv_groups = 8,
                         .rope_base = 1000000.0, .rms_norm_eps = 1e-6, .tie_word_embeddings = true, .eos_token_id = -1};
    nn_LLMConfig llama3 = {.arch = &nn_Llama3Model_arch, .vocab_size = 128256, .context_length = 131072, .emb_dim = 2048, .n_heads = 32,
                           .n_layers = 16, .hidden_dim = 8192, .head_dim = 64, .n_kv_groups = 8, .rope_base = 500000.0,
                           .rms_norm_eps = 1e-5, .has_rope_freq = true,
                           .rope_freq = {.factor = 32.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                                         .original_context_length = 8192},
                           .tie_word_embeddings = true, .eos_token_id = -1};
    const int64_t qwen_ids[4] = {9707, 11, 1879, 0}, llama_ids[4] = {9906, 11, 1917, 0}; /* "Hello, world!" */
    torch_manual_seed(123);
    nn_LLMModel *model = nn_LLMModel_new(llama ? llama3 : qwen);
    nn_LLMModel_tie_weights(model);
    nn_eval(&model->module);
    uint64_t check;
    double bw = read_bandwidth(torch_get_num_threads(), &check);
    const char *name = llama ? "llm-generate-llama" : "llm-generate", *shape = llama ? "Llama-3.2-1B" : "Qwen3-0.6B";
    llm_generate_timed(name, shape, model, llama ? llama_ids : qwen_ids, bw, check);
    nn_LLMModel_hold_bf16(model); /* random BF16 weights, as model.to(torch.bfloat16) rounds them */
    llm_generate_timed(name, shape, model, llama ? llama_ids : qwen_ids, bw, check);
    nn_LLMModel_free(model);
    ac_shutdown();
}

/* ---- llm-train: one AdamW step of a Qwen3 of GPT-2 small's size -------------------------------------- */

typedef struct { nn_LLMModel *model; optim_Optimizer *opt; Tensor *x, *y; } LlmCtx;

static void llm_step(void *p) {
    LlmCtx *c = p;
    ac_mark m = ac_arena_mark();
    optim_zero_grad(c->opt);                                           /* opt.zero_grad() */
    torch_backward(llm_calc_loss_batch(c->x, c->y, c->model), NULL);   /* calc_loss_batch(x, y, model).backward() */
    optim_step(c->opt);                                                /* opt.step() */
    ac_arena_release(m);
}

static void llm_train_workload(void) {
    nn_LLMConfig cfg = {.arch = &nn_Qwen3Model_arch, .vocab_size = 50257, .context_length = 256, .emb_dim = 768, .n_heads = 12,
                        .n_layers = 12, .hidden_dim = 2048, .head_dim = 64, .qk_norm = true, .n_kv_groups = 4,
                        .rope_base = 1000000.0, .rms_norm_eps = 1e-6, .tie_word_embeddings = false, .eos_token_id = -1};
    torch_manual_seed(123);
    LlmCtx c;
    c.model = nn_LLMModel_new(cfg);                                    /* model = Qwen3Model(cfg); model.train() */
    c.opt = optim_AdamW(nn_named_parameters(&c.model->module), 4e-4, 0.9, 0.999, 1e-8, 0.1, false);
    random_tokens(&c.x, &c.y);
    print_step("llm-train", timed(llm_step, &c, 1, 1, 3));                      /* timed(step, 1, 1, repeat=3) */
    ac_free(c.x);
    ac_free(c.y);
    optim_free(c.opt);
    nn_LLMModel_free(c.model);
    ac_shutdown();
}

static void floor_probe(void) {
    int threads = torch_get_num_threads();
    ProbeJob jobs[256] = {{0}};
    for (int i = 0; i < threads; i++) jobs[i].iters = 100000000 / 4;
    double s = on_threads(fma_job, jobs, threads, 3), flops = 0;
    for (int i = 0; i < threads; i++) flops += jobs[i].flops;
    double peak = flops / s;
    size_t n = (size_t)512 << 17; /* 512 MiB of 64-bit words: far past any cache */
    uint64_t *words = ac_malloc(n * sizeof *words);
    for (size_t i = 0; i < n; i++) words[i] = i;
    for (int i = 0; i < threads; i++) {
        size_t a = n / (size_t)threads * (size_t)i, b = i == threads - 1 ? n : n / (size_t)threads * (size_t)(i + 1);
        jobs[i].words = words + a, jobs[i].n = b - a;
    }
    double t = on_threads(read_job, jobs, threads, 5), bw = (double)(n * sizeof *words) / t;
    uint64_t check = 0;
    for (int i = 0; i < threads; i++) check += jobs[i].sum;
    free(words);
    double step_flops, adam_bytes;
    gpt_124m_work(&step_flops, &adam_bytes);
    char f[400];
    snprintf(f, sizeof f, "\"fma\": \"%s\", \"peak_gflops\": %.1f, \"read_gb_per_s\": %.2f, \"gpt_124m_gflop\": %.1f, "
             "\"adamw_gb\": %.2f, \"gpt_124m_floor_ms\": %.1f, \"checksum\": %llu", fma_width(), peak / 1e9, bw / 1e9,
             step_flops / 1e9, adam_bytes / 1e9, (step_flops / peak + adam_bytes / bw) * 1e3, (unsigned long long)(check & 1));
    print_line("floor", f);
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench [--threads N] [--exact] [WORKLOAD ...]   (default: the eleven of workloads.py)\n"
               "The workloads of ../shared/pytorch/workloads.py, one JSON line each with the same keys:\n"
               "  article       forward + backward of the article's SelfAttention(3, 2, 4) on its 6x3 input (us/iter)\n"
               "  train-tiny    one Adam step of ToyLM V=65 T=32 B=16 d=64 H=4 (ms/step)\n"
               "  train-base    the same with T=128 B=16 d=256 H=8 (ms/step)\n"
               "  matmul        (a @ b).sum().backward() for square n = 128..2048 (GFLOP/s, 6 n^3 per step)\n"
               "  long-context  the same step with T=4096 B=1 d=128 H=4, fused then explicit attention (ms/step,\n"
               "                peak RSS)\n"
               "  gpt-124m      one AdamW step of the book's GPTModel (124M, context 256) on 2 x 256 tokens (ms/step)\n"
               "  gpt-generate  100 greedy tokens of the untrained 124M model at context 1024 (tokens/s)\n"
               "  gpt-classify  one AdamW step of chapter 6's classifier (GPT-2 small's shape, context 1024,\n"
               "                qkv_bias, no dropout; all frozen but the last block, final norm and a new 768 x 2\n"
               "                head) on 8 x 120 tokens, loss on the last token (ms/step, peak RSS)\n"
               "  gpt-lora      the same with appendix E's LoRA (rank 16, alpha 16) on every Linear, the rest frozen\n"
               "  gpt-sft       one AdamW step of chapter 7's instruction finetuning (GPT-2 medium's shape, 355M,\n"
               "                all trainable) on 8 x 64 tokens with -100 padded targets (ms/step, tokens/s; 9.3 GB peak)\n"
               "  gpt-dpo       one step of the DPO notebook at GPT-2 medium's shape: the policy's two forwards and\n"
               "                backward, the frozen reference's two forwards, AdamW; 8 chosen and 8 rejected texts of\n"
               "                77 tokens (ms/step, the reference's share, its MB; not in workloads.py: tests/tools/dpo_bench.py)\n"
               "  tokenize      GPT-2's tokenizer on ../shared/data (or $AC_SHARED/data): vocabulary load (ms),\n"
               "                the-verdict encoded cold and 10 MB of it warm, decoding (MB/s; not in workloads.py)\n"
               "  llm-generate  24 greedy tokens of a random Qwen3 of Qwen3-0.6B's shape, KV cache (not in workloads.py),\n"
               "                its weights held in float32, then in bfloat16: tokens/s against the memory limit, the\n"
               "                weight bytes a token reads over the read bandwidth at this thread count, as `floor`\n"
               "                measures it\n"
               "  llm-generate-llama  the same at Llama-3.2-1B's shape (16 layers, emb 2048, 32 heads of 64, hidden 8192)\n"
               "  llm-train     one AdamW step of a Qwen3 of GPT-2 small's size (emb 768, 12 layers, 12 heads, 4 kv\n"
               "                groups, hidden 2048, GPT-2's vocab, its own head) on 2 x 256 tokens (ms/step, peak RSS;\n"
               "                not in workloads.py: tests/tools/llm_bench.py)\n"
               "  floor         the machine's floor under gpt-124m's step (not in workloads.py): the FMA peak (12\n"
               "                chains of the widest FMAs a thread), the read bandwidth (a 512 MiB array), and the\n"
               "                step's FLOPs at that peak plus AdamW's bytes at that bandwidth (ms)\n"
               "  --threads N   threads inside ops (default: the cores this process may use, or OMP_NUM_THREADS)\n"
               "  --exact       exact math (reference BLAS's order) instead of the fast kernels\n"
               "AC_CPU_CAPABILITY=avx2 (or default) caps the kernels, as PyTorch's ATEN_CPU_CAPABILITY does its own.\n"
               "Compare with PyTorch in the same sitting (ratios, not absolute times), for example:\n"
               "  ./build/bench --threads 1 train-base; python3 ../shared/pytorch/workloads.py train-base --threads 1\n");
}

int main(int argc, char **argv) {
    const char *all[] = {"article", "train-tiny", "train-base", "matmul", "long-context", "tokenize", "gpt-124m", "gpt-generate",
                        "gpt-classify", "gpt-lora", "gpt-sft"}, *chosen[16];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return ac_finish_output("bench", 0);
        } else if (strcmp(argv[i], "--exact") == 0) {
            ac_set_exact(true);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1 || t > 256) {
                fprintf(stderr, "bench: --threads expects 1 to 256, got '%s'\n", argv[i]);
                return 2;
            }
            torch_set_num_threads((int)t);
        } else if (n < 16) {
            chosen[n++] = argv[i];
        }
    }
    if (n == 0)
        for (int i = 0; i < (int)(sizeof all / sizeof *all); i++) chosen[n++] = all[i];
    for (int i = 0; i < n; i++) {
        const char *w = chosen[i];
        if (i > 0) ac_shutdown(); /* the last workload's arena back (the gpt ones have done it already) */
        reset_peak_rss();
        if (strcmp(w, "article") == 0) article();
        else if (strcmp(w, "train-tiny") == 0) train("train-tiny", 65, 32, 16, 64, 4, 50, false);
        else if (strcmp(w, "train-base") == 0) train("train-base", 65, 128, 16, 256, 8, 10, false);
        else if (strcmp(w, "matmul") == 0) matmul();
        else if (strcmp(w, "tokenize") == 0) tokenize();
        else if (strcmp(w, "gpt-124m") == 0) gpt_124m();
        else if (strcmp(w, "gpt-generate") == 0) gpt_generate_workload();
        else if (strcmp(w, "gpt-classify") == 0) gpt_classify(false);
        else if (strcmp(w, "gpt-lora") == 0) gpt_classify(true);
        else if (strcmp(w, "gpt-sft") == 0) gpt_sft();
        else if (strcmp(w, "gpt-dpo") == 0) gpt_dpo();
        else if (strcmp(w, "floor") == 0) floor_probe();
        else if (strcmp(w, "llm-generate") == 0) llm_generate_workload(false);
        else if (strcmp(w, "llm-generate-llama") == 0) llm_generate_workload(true);
        else if (strcmp(w, "llm-train") == 0) llm_train_workload();
        else if (strcmp(w, "long-context") == 0) { /* fused first: peak RSS only grows */
            train("long-context", 65, 4096, 1, 128, 4, 2, true);
            train("long-context", 65, 4096, 1, 128, 4, 2, false);
        } else {
            fprintf(stderr, "bench: unknown workload '%s'\n", w);
            usage(stderr);
            return 2;
        }
    }
    ac_shutdown();
    return ac_finish_output("bench", 0);
}
