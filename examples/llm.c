/* llm: Qwen3 and Llama 3 (the book's bonus chapters ch05/11_qwen3 and ch05/07_gpt_to_llama) in C,
 * loaded from or built like Hugging Face's layout, generating and trained with chapter 5's loop.
 * tests/tools/llm_ref.py is the PyTorch 1.13 program whose output this reproduces.
 *
 *   llm generate --model DIR --ids "1 2 3" --max-new-tokens 20 --print-ids
 *   llm generate --config config.json --seed 123 --ids "1 2 3" --temperature 0.8 --top-k 40
 *   llm train --config config.json --seed 123 --data the-verdict.txt --tokenizer ../shared/data/gpt2 --save DIR
 *
 * Text prompts (--prompt) and `llm tokenize` need a tokenizer.json tokenizer (Qwen3's, Llama 3's): see
 * no_text_tokenizer below, the one place they join. Until then prompts are --ids. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli.h"
#include "llm.h"
#include "optim.h"
#include "tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: llm COMMAND [flags]   Qwen3 and Llama 3 from the book's bonus chapters, in C.\n"
            "commands:\n"
            "  generate   (--model DIR | --config FILE.json --seed S) --ids \"1 2 3\" [--max-new-tokens N]\n"
            "             greedy unless --temperature T (> 0) / --top-k K; stops at config.json's eos_token_id\n"
            "  train      (--model DIR | --config FILE.json --seed S) --data FILE --tokenizer DIR: chapter 5's loop\n"
            "  tokenize   (needs a tokenizer.json tokenizer: not in this build yet)\n"
            "model:\n"
            "  --model DIR          config.json + model.safetensors (or shards + model.safetensors.index.json)\n"
            "  --config FILE.json   a Hugging Face config.json: the model built as the book's class builds it\n"
            "  --seed S             torch.manual_seed(S) before the model and before sampling (default 123)\n"
            "  --print-model        print(model), then stop\n"
            "  --exact              PyTorch 1.13's float32 results bit for bit (slower)\n"
            "  --threads N          worker threads (results do not depend on it)\n"
            "generate:\n"
            "  --ids \"1 2 3\"        the prompt's token ids\n"
            "  --prompt TEXT        (needs a tokenizer.json tokenizer: use --ids)\n"
            "  --max-new-tokens N   default 25\n"
            "  --temperature T, --top-k K   chapter 5's sampler\n"
            "  --print-ids          print the prompt's ids and the new ones on one line (the default without a tokenizer)\n"
            "  --no-kv-cache        recompute the window for every token (the book's loop without its cache)\n"
            "train (gpt train's flags and lines):\n"
            "  --data FILE --tokenizer DIR (GPT-2's encoder.json + vocab.bpe, or vocab.json + merges.txt)\n"
            "  --context N (default max_position_embeddings) --batch 2 --epochs 10 --lr 0.0004 --weight-decay 0.1\n"
            "  --eval-freq 5 --eval-iter 5 --train-ratio 0.9 --prompt \"Every effort moves you\" --sample-tokens 50\n"
            "  --log FILE (every step's loss)  --save DIR (Hugging Face's layout)  --save-dtype F32|BF16|F16\n");
}

typedef struct {
    int cmd;
    const char *model, *config, *ids, *prompt, *data, *tokenizer, *log, *save, *save_dtype;
    long long seed, max_new_tokens, top_k, context, batch, epochs, eval_freq, eval_iter, sample_tokens, threads;
    double temperature, lr, weight_decay, train_ratio;
    bool print_ids, print_model, no_kv_cache, exact;
} Flags;

enum { GENERATE, TRAIN, TOKENIZE };
static const char *const commands[] = {"generate", "train", "tokenize", NULL};
#define ON(c) (1u << (c))
#define MODEL (ON(GENERATE) | ON(TRAIN))
#define BIG 1000000000000LL

static int fail(const char *fmt, const char *a) {
    fprintf(stderr, "llm: ");
    fprintf(stderr, fmt, a);
    fputc('\n', stderr);
    return 1;
}

static int parse_flags(int argc, char **argv, Flags *a) {
    static char tok_default[4200];
    *a = (Flags){.seed = 123, .max_new_tokens = 25, .top_k = -1, .context = -1, .batch = 2, .epochs = 10, .eval_freq = 5,
                 .eval_iter = 5, .sample_tokens = 50, .lr = 0.0004, .weight_decay = 0.1, .train_ratio = 0.90,
                 .save_dtype = "F32", .tokenizer = cli_default_path("data/gpt2", tok_default, sizeof tok_default)};
    const cli_flag flags[] = {
        CLI_TEXT_FLAG("--model", &a->model, MODEL),
        CLI_TEXT_FLAG("--config", &a->config, MODEL),
        CLI_INT_FLAG("--seed", &a->seed, INT64_MIN, INT64_MAX, MODEL),
        CLI_SWITCH_FLAG("--print-model", &a->print_model, MODEL),
        CLI_SWITCH_FLAG("--exact", &a->exact, CLI_ALL),
        CLI_INT_FLAG("--threads", &a->threads, 1, 1 << 20, CLI_ALL),
        CLI_TEXT_FLAG("--ids", &a->ids, ON(GENERATE)),
        CLI_TEXT_FLAG("--prompt", &a->prompt, MODEL),
        CLI_INT_FLAG("--max-new-tokens", &a->max_new_tokens, 0, BIG, ON(GENERATE)),
        CLI_NUM_FLAG("--temperature", &a->temperature, 0, HUGE_VAL, ON(GENERATE)),
        CLI_INT_FLAG("--top-k", &a->top_k, 1, BIG, ON(GENERATE)),
        CLI_SWITCH_FLAG("--print-ids", &a->print_ids, ON(GENERATE)),
        CLI_SWITCH_FLAG("--no-kv-cache", &a->no_kv_cache, MODEL),
        CLI_TEXT_FLAG("--tokenizer", &a->tokenizer, CLI_ALL),
        CLI_TEXT_FLAG("--data", &a->data, ON(TRAIN)),
        CLI_INT_FLAG("--context", &a->context, 1, BIG, ON(TRAIN)),
        CLI_INT_FLAG("--batch", &a->batch, 1, BIG, ON(TRAIN)),
        CLI_INT_FLAG("--epochs", &a->epochs, 0, BIG, ON(TRAIN)),
        CLI_INT_FLAG("--eval-freq", &a->eval_freq, 1, BIG, ON(TRAIN)),
        CLI_INT_FLAG("--eval-iter", &a->eval_iter, 1, BIG, ON(TRAIN)),
        CLI_INT_FLAG("--sample-tokens", &a->sample_tokens, 1, BIG, ON(TRAIN)),
        CLI_NUM_FLAG("--lr", &a->lr, 0, HUGE_VAL, ON(TRAIN)),
        CLI_NUM_FLAG("--weight-decay", &a->weight_decay, 0, HUGE_VAL, ON(TRAIN)),
        CLI_NUM_FLAG("--train-ratio", &a->train_ratio, 0, 1, ON(TRAIN)),
        CLI_TEXT_FLAG("--log", &a->log, ON(TRAIN)),
        CLI_TEXT_FLAG("--save", &a->save, ON(TRAIN)),
        CLI_TEXT_FLAG("--save-dtype", &a->save_dtype, ON(TRAIN)),
    };
    const cli_spec spec = {"llm", commands, flags, (int)(sizeof flags / sizeof *flags), 0, true};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args, usage);
    if (rc) return rc;
    if (args.command < 0) return fail("%s (llm --help lists the flags)", "give a command: generate, train or tokenize"), 2;
    a->cmd = args.command;
    if (a->cmd == TOKENIZE) return 0;
    if (cli_given(&spec, &args, "--save-dtype") && !a->save) return fail("%s", "--save-dtype goes with --save DIR"), 2;
    if (!a->model == !a->config) return fail("%s (llm --help lists the flags)", "give --model DIR or --config FILE.json (one of them)"), 2;
    if (a->cmd == GENERATE && !a->print_model && !a->ids && !a->prompt) return fail("%s", "generate needs --ids \"1 2 3\" (or --prompt TEXT)"), 2;
    if (a->cmd == TRAIN && !a->print_model && !a->data) return fail("%s", "train needs --data FILE"), 2;
    if (!a->prompt && a->cmd == TRAIN) a->prompt = "Every effort moves you";
    if (a->threads) torch_set_num_threads(a->threads > 256 ? 256 : (int)a->threads);
    ac_set_exact(a->exact);
    return 0;
}

/* The model: --model DIR (its weights), or --config FILE.json drawn after torch.manual_seed(seed). */
static nn_LLMModel *make_model(const Flags *a) {
    char err[1024];
    if (a->model) {
        nn_LLMModel *m = llm_from_pretrained(a->model, err, sizeof err);
        if (!m) fprintf(stderr, "llm: --model %s\n", err);
        return m;
    }
    nn_LLMConfig cfg;
    if (!llm_config_load(a->config, &cfg, err, sizeof err)) {
        fprintf(stderr, "llm: --config %s\n", err);
        return NULL;
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    return nn_LLMModel_new(cfg);                                                  /* model = Qwen3Model(cfg) / Llama3Model(cfg) */
}

/* The place where a tokenizer.json tokenizer (Qwen3's, Llama 3's; nn/text/) will join: --prompt
 * text and `llm tokenize`. GPT-2's tokenizer (--tokenizer DIR) serves `train` now. */
static int no_text_tokenizer(const char *what) {
    fprintf(stderr, "llm: %s needs a tokenizer.json tokenizer, which this build does not have yet: give the ids with --ids\n", what);
    return 1;
}

/* --ids "1 2 3": every id a number below the vocabulary, at most the context */
static Tensor *parse_ids(const char *s, const nn_LLMConfig *cfg) {
    int64_t n = 0, cap = 16, *ids = ac_malloc(sizeof *ids * (size_t)cap);
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || (*end && *end != ' ' && *end != '\t' && *end != ',')) {
            fprintf(stderr, "llm: --ids: '%.24s' is not a token id (a number from 0 to %lld)\n", p, (long long)cfg->vocab_size - 1);
            free(ids);
            return NULL;
        }
        if (v >= cfg->vocab_size) {
            fprintf(stderr, "llm: --ids: id %lld is at or beyond the vocabulary (vocab_size %lld): index out of range in self\n",
                    v, (long long)cfg->vocab_size);
            free(ids);
            return NULL;
        }
        if (n == cap) ids = ac_realloc(ids, sizeof *ids * (size_t)(cap *= 2));
        ids[n++] = v;
        p = end;
    }
    if (n == 0) {
        fprintf(stderr, "llm: --ids holds no id\n");
        free(ids);
        return NULL;
    }
    if (n > cfg->context_length) {
        fprintf(stderr, "llm: --ids: the prompt's %lld tokens are longer than the context (max_position_embeddings %lld)\n",
                (long long)n, (long long)cfg->context_length);
        free(ids);
        return NULL;
    }
    Tensor *t = ac_persist(torch_tensor_long(ids, 2, (int64_t[]){1, n}));
    free(ids);
    return t;
}

/* ---- llm generate ---------------------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { interrupted = sig; }

typedef struct { bool live; double t0; int64_t n; } Live;

static bool on_token(int64_t token, void *ctx) {
    Live *l = ctx;
    l->n++;
    if (l->live) {
        double dt = cli_now_seconds() - l->t0;
        fprintf(stderr, "\r\033[K%lld tokens  %.1f tokens/s", (long long)l->n, dt > 0 ? (double)l->n / dt : 0.0);
    }
    return !interrupted;
}

static int cmd_generate(const Flags *a) {
    if (a->prompt) return no_text_tokenizer("--prompt"); /* (the tokenizer.json interface of nn/text/ joins here) */
    nn_LLMModel *model = make_model(a);                                           /* model = Qwen3Model(cfg) (or its weights) */
    if (!model) return 1;
    if (a->print_model) {                                                         /* print(model) */
        nn_print(&model->module);
        nn_LLMModel_free(model);
        return 0;
    }
    Tensor *idx = parse_ids(a->ids, &model->cfg);
    if (!idx) {
        nn_LLMModel_free(model);
        return 1;
    }
    if (a->top_k > model->cfg.vocab_size) {
        fprintf(stderr, "llm: --top-k %lld is larger than the vocabulary (%lld)\n", a->top_k, (long long)model->cfg.vocab_size);
        ac_free(idx);
        nn_LLMModel_free(model);
        return 1;
    }
    signal(SIGINT, on_signal);
    Live live = {isatty(2) && !getenv("AC_NO_LIVE"), cli_now_seconds(), 0};
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    Tensor *out = llm_generate_ex(model, idx, a->max_new_tokens, model->cfg.context_length, a->temperature, /* generate(model, idx, n, ctx, */
                                  a->top_k, model->cfg.eos_token_ids, model->cfg.n_eos, !a->no_kv_cache, on_token, &live); /* temperature, top_k, eos_id) */
    if (live.live) fputs("\r\033[K", stderr);
    const int64_t *d = (const int64_t *)out->data;                                /* print(" ".join(str(i) for i in out[0].tolist())) */
    for (int64_t i = 0; i < out->shape[1]; i++) printf(i ? " %lld" : "%lld", (long long)d[i]);
    putchar('\n');
    ac_free(idx);
    nn_LLMModel_free(model);
    return interrupted ? 128 + (int)interrupted : 0;
}

/* ---- llm train ------------------------------------------------------------------------------------- */

/* print(x) of a Python float: the shortest digits that read back; fixed notation for exponents -4..15 */
static const char *py_float(double x, char buf[48]) {
    if (isnan(x)) return "nan";
    if (isinf(x)) return x > 0 ? "inf" : "-inf";
    char e[48];
    int p = 1;
    while (p < 17 && (snprintf(e, sizeof e, "%.*e", p - 1, x), strtod(e, NULL) != x)) p++;
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    char digits[24];
    int nd = 0;
    const char *m = e + (e[0] == '-');
    for (; *m && *m != 'e'; m++)
        if (*m != '.') digits[nd++] = *m;
    digits[nd] = 0;
    int ex = atoi(m + 1);
    char *b = buf;
    if (x < 0) *b++ = '-';
    if (ex < -4 || ex >= 16) {
        b += sprintf(b, "%c", digits[0]);
        if (nd > 1) b += sprintf(b, ".%s", digits + 1);
        sprintf(b, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    } else if (ex < 0) {
        b += sprintf(b, "0.");
        for (int i = -1; i > ex; i--) *b++ = '0';
        sprintf(b, "%s", digits);
    } else {
        for (int i = 0; i <= ex; i++) *b++ = i < nd ? digits[i] : '0';
        if (nd > ex + 1) sprintf(b, ".%s", digits + ex + 1);
        else sprintf(b, ".0");
    }
    return buf;
}

static const char *py_3f(double x, char buf[48]) { /* f"{x:.3f}" */
    if (isnan(x)) return "nan";
    snprintf(buf, 48, "%.3f", x);
    return buf;
}

/* open(path, encoding="utf-8").read(): "\r\n" and "\r" read as "\n" */
static size_t universal_newlines(char *t, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        t[o++] = c == '\r' ? '\n' : c;
        if (c == '\r' && i + 1 < len && t[i + 1] == '\n') i++;
    }
    t[o] = 0;
    return o;
}

static int64_t count_chars(const char *t, size_t len) { /* len(text): code points */
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)t[i] & 0xC0) != 0x80;
    return n;
}

static size_t char_offset(const char *t, size_t len, int64_t n) { /* the byte where n code points end */
    size_t i = 0;
    for (int64_t c = 0; i < len && c < n; c++)
        do i++;
        while (i < len && ((unsigned char)t[i] & 0xC0) == 0x80);
    return i;
}

static Tensor *encode(Tokenizer *tok, const char *text) { /* torch.tensor(tokenizer.encode(text)).unsqueeze(0) */
    char err[512];
    Tensor *ids = tokenizer_encode(tok, text, strlen(text), TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    if (!ids) {
        fprintf(stderr, "llm: --prompt: %s\n", err);
        return NULL;
    }
    return ac_persist(torch_unsqueeze(ids, 0));
}

static char *decode(Tokenizer *tok, Tensor *ids, size_t *len) { /* tokenizer.decode(ids.squeeze(0).tolist()) */
    char err[512];
    char *text = tokenizer_decode(tok, (const int64_t *)ids->data, ids->shape[1], len, err, sizeof err);
    if (!text) fprintf(stderr, "llm: %s\n", err);
    return text;
}

static int cmd_train(const Flags *a) {
    if (a->save) { /* save_pretrained's directory: made if absent, checked before any work */
        struct stat st;
        if (stat(a->save, &st) != 0 && mkdir(a->save, 0777) != 0)
            return fprintf(stderr, "llm: --save %s: cannot make the directory: %s\n", a->save, strerror(errno)), 1;
        if (stat(a->save, &st) != 0 || !S_ISDIR(st.st_mode) || access(a->save, W_OK) != 0)
            return fprintf(stderr, "llm: --save %s: not a directory this program can write in\n", a->save), 1;
    }
    nn_LLMConfig cfg;
    char err[1024], fb[48], fb2[48];
    if (a->config && !llm_config_load(a->config, &cfg, err, sizeof err)) return fprintf(stderr, "llm: --config %s\n", err), 1;
    int rc = 1;
    FILE *log = NULL;
    Tokenizer *tok = NULL;
    char *text = NULL;
    nn_LLMModel *model = NULL;
    optim_Optimizer *opt = NULL;
    Tensor *start = NULL;
    DataLoader train_loader = {0}, val_loader = {0};
    if (a->print_model) {
        if ((model = make_model(a))) nn_print(&model->module), rc = 0;
        goto done;
    }
    tok = tokenizer_load(a->tokenizer, err, sizeof err);                          /* tokenizer = GPT2Tokenizer(a.tokenizer) */
    if (!tok) {
        fprintf(stderr, "llm: --tokenizer %s\n", err);
        goto done;
    }
    size_t len;
    text = ac_read_file(a->data, &len, err, sizeof err);                          /* with open(a.data, encoding="utf-8") as f: text = f.read() */
    if (!text) {
        fprintf(stderr, "llm: --data %s\n", err);
        goto done;
    }
    len = universal_newlines(text, len);
    if (a->log && !(log = fopen(a->log, "w"))) {
        fprintf(stderr, "llm: cannot open --log %s: %s\n", a->log, strerror(errno));
        goto done;
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    model = make_model(a);                                                        /* model = Qwen3Model(cfg) */
    if (!model) goto done;
    cfg = model->cfg;
    if (tokenizer_n_vocab(tok) > cfg.vocab_size) {
        fprintf(stderr, "llm: --tokenizer %s has %lld tokens; the model's vocab_size is %lld\n", a->tokenizer,
                (long long)tokenizer_n_vocab(tok), (long long)cfg.vocab_size);
        goto done;
    }
    int64_t context = a->context > 0 ? a->context : cfg.context_length;          /* context = a.context or cfg["context_length"] */
    if (context > cfg.context_length) {
        fprintf(stderr, "llm: --context %lld is larger than the model's max_position_embeddings (%lld)\n", (long long)context,
                (long long)cfg.context_length);
        goto done;
    }
    torch_Generator after_init = torch_default_generator;
    nn_eval(&model->module);                                                      /* model.eval() */
    if (!(start = encode(tok, a->prompt))) goto done;
    size_t split = char_offset(text, len, (int64_t)(a->train_ratio * (double)count_chars(text, len))); /* split = int(a.train_ratio * len(text)) */
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    train_loader = create_dataloader_v1(text, split, tok, a->batch, context, context, true, true, 0, err, sizeof err);
    if (!train_loader.dataset) {
        fprintf(stderr, "llm: --data %s: %s\n", a->data, err);
        goto done;
    }
    val_loader = create_dataloader_v1(text + split, len - split, tok, a->batch, context, context, false, false, 0, err, sizeof err);
    if (!val_loader.dataset) {
        fprintf(stderr, "llm: --data %s: %s\n", a->data, err);
        goto done;
    }
    if (DataLoader_len(&train_loader) == 0) {
        fprintf(stderr, "llm: the training part of %s holds no batch of %lld windows of %lld+1 tokens\n", a->data,
                (long long)a->batch, (long long)context);
        goto done;
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    bool prev = torch_no_grad_enter();                                            /* with torch.no_grad(): */
    printf("Training loss: %s\n", py_float(llm_calc_loss_loader(&train_loader, model, -1), fb));
    printf("Validation loss: %s\n", py_float(llm_calc_loss_loader(&val_loader, model, -1), fb));
    fflush(stdout);
    torch_no_grad_exit(prev);
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    if (a->config) torch_default_generator = after_init; /* model = Qwen3Model(cfg): the same draws as the one still untouched */
    opt = optim_AdamW(nn_named_parameters(&model->module), a->lr, 0.9, 0.999, 1e-8, a->weight_decay, false); /* AdamW(model.parameters(), lr, weight_decay) */
    signal(SIGINT, on_signal);
    double t0 = cli_now_seconds();
    int64_t global_step = -1;                                                     /* tokens_seen, global_step = 0, -1 (C: tokens_seen not kept: nothing prints it) */
    for (int64_t epoch = 0; epoch < a->epochs && !interrupted; epoch++) {         /* for epoch in range(a.epochs): */
        nn_train(&model->module, true);                                           /*     model.train() */
        DataLoaderIter it = DataLoader_iter(&train_loader);                       /*     for input_batch, target_batch in train_loader: */
        Tensor *x, *y;
        for (;;) {
            ac_mark mk = ac_arena_mark();
            if (interrupted || !DataLoaderIter_next(&it, &x, &y)) {
                ac_arena_release(mk);
                break;
            }
            optim_zero_grad(opt);                                                 /*         optimizer.zero_grad() */
            Tensor *loss = llm_calc_loss_batch(x, y, model);                      /*         loss = calc_loss_batch(input_batch, target_batch, model) */
            torch_backward(loss, NULL);                                           /*         loss.backward() */
            optim_step(opt);                                                      /*         optimizer.step() */
            global_step += 1;                                                     /*         global_step += 1 */
            if (log) fprintf(log, "step %lld loss %.6f\n", (long long)global_step, torch_item(loss)); /* log.write(f"step {global_step} loss {loss.item():.6f}\n") */
            if (global_step % a->eval_freq == 0) {                                /*         if global_step % eval_freq == 0: */
                double tl, vl;
                llm_evaluate_model(model, &train_loader, &val_loader, a->eval_iter, &tl, &vl);
                printf("Ep %lld (Step %06lld): Train loss %s, Val loss %s\n", (long long)epoch + 1, (long long)global_step,
                       py_3f(tl, fb), py_3f(vl, fb2));
                fflush(stdout);
            }
            ac_arena_release(mk);
        }
        DataLoaderIter_free(&it);
        ac_mark mk = ac_arena_mark();                                             /*     model.eval() */
        Tensor *ids = llm_generate(model, start, a->sample_tokens, context, 0.0, -1, -1, !a->no_kv_cache, NULL, NULL); /* generate_text_simple(model, enc(prompt), sample_tokens, context) */
        size_t tl;
        char *s = decode(tok, ids, &tl);
        if (s) {
            for (size_t i = 0; i < tl; i++) if (s[i] == '\n') s[i] = ' ';         /*     print(dec(ids).replace("\n", " ")) */
            fwrite(s, 1, tl, stdout);
            putchar('\n');
            fflush(stdout);
        }
        ac_arena_release(mk);
    }
    if (interrupted) {
        fprintf(stderr, "llm: stopped by signal %d after step %lld\n", (int)interrupted, (long long)global_step);
        rc = 128 + (int)interrupted;
        goto done;
    }
    fprintf(stderr, "(training took %.1f s)\n", cli_now_seconds() - t0);
    nn_eval(&model->module);                                                      /* model.eval() */
    for (int k = 0; k < 2; k++) {
        ac_mark mk = ac_arena_mark();
        if (k) torch_manual_seed((uint64_t)a->seed);                              /* torch.manual_seed(a.seed) */
        Tensor *ids = k ? llm_generate(model, start, 15, context, 1.4, 25, -1, !a->no_kv_cache, NULL, NULL) /* generate(..., 15, context, temperature=1.4, top_k=25) */
                        : llm_generate(model, start, 25, context, 0.0, -1, -1, !a->no_kv_cache, NULL, NULL); /* generate_text_simple(..., 25, context) */
        size_t tl;
        char *s = decode(tok, ids, &tl);
        if (s) printf("Output text:\n %.*s\n", (int)tl, s);                       /* print("Output text:\n", dec(ids)) */
        ac_arena_release(mk);
    }
    rc = 0;
    if (a->save && !llm_save_pretrained(model, a->save, a->save_dtype, err, sizeof err)) { /* save_model(model, cfg, a.save, ...) */
        fprintf(stderr, "llm: --save %s\n", err);
        rc = 1;
    }
done:
    if (log && fclose(log) != 0) rc = 1;
    if (train_loader.dataset) GPTDatasetV1_free((GPTDatasetV1 *)train_loader.dataset);
    if (val_loader.dataset) GPTDatasetV1_free((GPTDatasetV1 *)val_loader.dataset);
    if (opt) optim_free(opt);
    if (start) ac_free(start);
    nn_LLMModel_free(model);
    free(text);
    tokenizer_free(tok);
    return rc;
}

static void on_error(ac_error_kind kind, const char *msg, void *user) {
    fflush(stdout);
    fprintf(stderr, "llm: %s: %s\n", ac_error_kind_name(kind), msg);
    exit(1);
}

int main(int argc, char **argv) {
    ac_set_error_handler(on_error, NULL);
    Flags a;
    int rc = parse_flags(argc, argv, &a);
    if (rc) return rc;
    if (a.cmd == TOKENIZE) rc = no_text_tokenizer("tokenize");
    else if (a.cmd == GENERATE) rc = cmd_generate(&a);
    else rc = cmd_train(&a);
    ac_shutdown();
    return ac_finish_output("llm", rc);
}
