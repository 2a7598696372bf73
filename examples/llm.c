/* llm: Qwen3 and Llama 3 (the book's bonus chapters ch05/11_qwen3 and ch05/07_gpt_to_llama) in C,
 * loaded from or built like Hugging Face's layout, generating and trained with chapter 5's loop.
 * tests/tools/llm_ref.py is the PyTorch 1.13 program whose output this reproduces.
 *
 *   llm generate --model DIR --ids "1 2 3" --max-new-tokens 20 --print-ids
 *   llm generate --config config.json --seed 123 --ids "1 2 3" --temperature 0.8 --top-k 40
 *   llm generate --model Qwen3-0.6B --prompt "Give me a short introduction to large language models." --chat
 *   llm train --config config.json --seed 123 --data the-verdict.txt --tokenizer ../shared/data/gpt2 --save DIR
 *   llm train --config config.json --data the-verdict.txt --html llm.html   (the reader's page of the run)
 *   echo -n "Hello, world!" | llm tokenize --tokenizer ../shared/data/qwen3
 *
 * Text goes in and out through nn/text/text_tokenizer.h: GPT-2's files or a tokenizer.json (Qwen3's,
 * Llama 3's), and the chat formats of the book's Qwen3Tokenizer and Llama 3.2's ChatFormat. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli.h"
#include "longrun.h"
#include "llm.h"
#include "llm_sources.h" /* llm_example_source (this file), llm_model_source, llm_qwen3_source, llm_lm_source, llm_rmsnorm_source, _rope_, _swiglu_, _gqa_source */
#include "optim.h"
#include "safetensors.h"
#include "text_tokenizer.h"
#include "tokenizer.h"
#include "viz.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: llm COMMAND [flags]   Qwen3 and Llama 3 from the book's bonus chapters, in C.\n"
            "commands:\n"
            "  generate   (--model DIR | --config FILE.json --seed S) (--prompt TEXT [--chat] | --ids \"1 2 3\")\n"
            "             [--max-new-tokens N]: greedy unless --temperature T (> 0) / --top-k K; stops at config.json's\n"
            "             eos_token_id, and with --prompt at the tokenizer's end of text (<|endoftext|>, <|end_of_text|>)\n"
            "             or with --chat at the end of the turn (<|im_end|>, <|eot_id|>)\n"
            "  train      (--model DIR | --config FILE.json --seed S) --data FILE --tokenizer DIR: chapter 5's loop\n"
            "  tokenize   --tokenizer DIR [--chat]: standard input's bytes as they are -> the ids on one line\n"
            "             (Hugging Face's tok.encode(text).ids: special tokens written in the text are their ids)\n"
            "model:\n"
            "  --model DIR          config.json + model.safetensors (or shards + model.safetensors.index.json)\n"
            "  --config FILE.json   a Hugging Face config.json: the model built as the book's class builds it\n"
            "  --seed S             torch.manual_seed(S) before the model and before sampling (default 123)\n"
            "  --print-model        print(model), then stop\n"
            "  --html FILE          generate, train: the reader's page of the run: the book's Python beside this C\n"
            "                       (the model, its blocks, the loop), what the run printed, train's loss curve\n"
            "  --exact              PyTorch 1.13's float32 results bit for bit (slower)\n"
            "  --threads N          worker threads (results do not depend on it)\n"
            "generate:\n"
            "  --ids \"1 2 3\"        the prompt's token ids (the ids are printed)\n"
            "  --prompt TEXT        the prompt's text: prints \"Output text: \" and the prompt with what follows, as it comes\n"
            "  --chat               the prompt as a user's turn in the tokenizer's chat format (Qwen3's with\n"
            "                       add_generation_prompt, Llama 3's ChatFormat): prints the answer alone\n"
            "  --think              Qwen3 --chat: leave the thinking to the model (add_thinking; else an empty <think>)\n"
            "  --tokenizer DIR      GPT-2's files or a tokenizer.json (default: --model DIR's tokenizer.json, else GPT-2's)\n"
            "  --max-new-tokens N   default 25\n"
            "  --temperature T, --top-k K   chapter 5's sampler\n"
            "  --print-ids          print the prompt's ids and the new ones on one line (what --ids prints)\n"
            "  --no-kv-cache        recompute the window for every token (the book's loop without its cache)\n"
            "  --float32            hold BF16 files' weights in float32 (model.to(torch.float32)); by default generate\n"
            "                       holds them as they are, half the bytes a token reads (the math is float32 either\n"
            "                       way); --exact always widens them\n"
            "train (gpt train's flags and lines):\n"
            "  --data FILE --tokenizer DIR (GPT-2's encoder.json + vocab.bpe or vocab.json + merges.txt, or a tokenizer.json)\n"
            "  --context N (default max_position_embeddings) --batch 2 --epochs 10 --lr 0.0004 --weight-decay 0.1\n"
            "  --eval-freq 5 --eval-iter 5 --train-ratio 0.9 --prompt \"Every effort moves you\" --sample-tokens 50\n"
            "  --log FILE (every step's loss)  --save DIR (Hugging Face's layout)  --save-dtype F32|BF16|F16\n"
            "  Ctrl-C, SIGTERM or SIGHUP: the step under way ends, --save DIR gets the weights (config.json and\n"
            "  model.safetensors, F32) and DIR/train_state.safetensors (the weights, AdamW's state, the generator,\n"
            "  the epoch, step and the epoch's batch order); one line on stderr; exit 128 + the signal\n"
            "  --resume DIR        go on from such a stopped run's --save DIR with the same flags (and --log FILE,\n"
            "                      appended to): it prints what the uninterrupted run prints after the stopped\n"
            "                      run's last line. (--model DIR starts a new run from finished weights.)\n");
}

typedef struct {
    int cmd;
    const char *model, *config, *ids, *prompt, *data, *tokenizer, *log, *save, *save_dtype, *resume, *html;
    long long seed, max_new_tokens, top_k, context, batch, epochs, eval_freq, eval_iter, sample_tokens, threads;
    double temperature, lr, weight_decay, train_ratio;
    bool print_ids, print_model, no_kv_cache, exact, chat, think, float32;
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
                 .save_dtype = "F32"};
    const cli_flag flags[] = {
        CLI_TEXT_FLAG("--model", &a->model, MODEL),
        CLI_TEXT_FLAG("--config", &a->config, MODEL),
        CLI_INT_FLAG("--seed", &a->seed, INT64_MIN, INT64_MAX, MODEL),
        CLI_SWITCH_FLAG("--print-model", &a->print_model, MODEL),
        CLI_TEXT_FLAG("--html", &a->html, MODEL),
        CLI_SWITCH_FLAG("--exact", &a->exact, CLI_ALL),
        CLI_INT_FLAG("--threads", &a->threads, 1, 1 << 20, CLI_ALL),
        CLI_TEXT_FLAG("--ids", &a->ids, ON(GENERATE)),
        CLI_TEXT_FLAG("--prompt", &a->prompt, MODEL),
        CLI_INT_FLAG("--max-new-tokens", &a->max_new_tokens, 0, BIG, ON(GENERATE)),
        CLI_NUM_FLAG("--temperature", &a->temperature, 0, HUGE_VAL, ON(GENERATE)),
        CLI_INT_FLAG("--top-k", &a->top_k, 1, BIG, ON(GENERATE)),
        CLI_SWITCH_FLAG("--print-ids", &a->print_ids, ON(GENERATE)),
        CLI_SWITCH_FLAG("--chat", &a->chat, ON(GENERATE) | ON(TOKENIZE)),
        CLI_SWITCH_FLAG("--think", &a->think, ON(GENERATE) | ON(TOKENIZE)),
        CLI_SWITCH_FLAG("--no-kv-cache", &a->no_kv_cache, MODEL),
        CLI_SWITCH_FLAG("--float32", &a->float32, ON(GENERATE)),
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
        CLI_TEXT_FLAG("--resume", &a->resume, ON(TRAIN)),
    };
    const cli_spec spec = {"llm", commands, flags, (int)(sizeof flags / sizeof *flags), 0, true};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args, usage);
    if (rc) return rc;
    if (args.command < 0) return fail("%s (llm --help lists the flags)", "give a command: generate, train or tokenize"), 2;
    a->cmd = args.command;
    if (a->think && !a->chat) return fail("%s", "--think goes with --chat (Qwen3's chat format)"), 2;
    if (!a->tokenizer) { /* the model's own tokenizer.json (or GPT-2's files) beside its weights, else GPT-2's */
        char p[4300];
        snprintf(p, sizeof p, "%s/tokenizer.json", a->model ? a->model : "");
        a->tokenizer = a->model && access(p, R_OK) == 0 ? a->model
                                                                           : cli_default_path("data/gpt2", tok_default, sizeof tok_default);
    }
    if (a->cmd == TOKENIZE) return 0;
    if (a->chat && !a->prompt) return fail("%s", "--chat wraps --prompt TEXT in the chat format: give --prompt"), 2;
    if (a->ids && a->prompt) return fail("%s", "--ids and --prompt both give the prompt: one of them"), 2;
    if (cli_given(&spec, &args, "--save-dtype") && !a->save) return fail("%s", "--save-dtype goes with --save DIR"), 2;
    if (a->html && (a->print_model || a->resume))
        return fail("--html shows a whole run: give it to a run without %s", a->print_model ? "--print-model" : "--resume"), 2;
    if (!a->model == !a->config) return fail("%s (llm --help lists the flags)", "give --model DIR or --config FILE.json (one of them)"), 2;
    if (a->cmd == GENERATE && !a->print_model && !a->ids && !a->prompt) return fail("%s", "generate needs --ids \"1 2 3\" (or --prompt TEXT)"), 2;
    if (a->cmd == TRAIN && !a->print_model && !a->data) return fail("%s", "train needs --data FILE"), 2;
    if (!a->prompt && a->cmd == TRAIN) a->prompt = "Every effort moves you";
    if (a->threads) torch_set_num_threads(a->threads > 256 ? 256 : (int)a->threads);
    ac_set_exact(a->exact);
    return 0;
}

/* The model: --model DIR (its weights), or --config FILE.json drawn after torch.manual_seed(seed).
 * generate holds BF16 files' matrices as BF16 in default math (a token reads every weight once). */
static nn_LLMModel *make_model(const Flags *a) {
    char err[1024];
    if (a->model) {
        /* generate: no draws before loading (the generator is seeded again before sampling) */
        llm_load_options o = {.hold_bf16 = a->cmd == GENERATE && !a->exact && !a->float32 && !a->print_model,
                              .skip_init = a->cmd == GENERATE};
        nn_LLMModel *m = llm_from_pretrained_ex(a->model, o, err, sizeof err);
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

/* --tokenizer DIR: GPT-2's files or a tokenizer.json, behind nn/text/text_tokenizer.h's one interface */
static TextTokenizer *load_tokenizer(const Flags *a) {
    char err[1024];
    TextTokenizer *tok = text_tokenizer_load(a->tokenizer, err, sizeof err);
    if (!tok) fprintf(stderr, "llm: --tokenizer %s\n", err);
    return tok;
}

/* The prompt's ids: the text as Hugging Face's tok.encode(text) makes them (special tokens written in
 * it are their ids; Llama 3's <|begin_of_text|> first), or with --chat the user's turn in the
 * tokenizer's chat format (the book's Qwen3Tokenizer with add_generation_prompt, or Llama 3.2's
 * ChatFormat). (n,) in the arena; NULL after a message. */
static Tensor *encode_text(TextTokenizer *tok, const Flags *a, const char *what, const char *text, size_t len) {
    char err[1024];
    text_chat_options o = {.add_generation_prompt = true, .add_thinking = a->think};
    if (a->chat && !text_tokenizer_chat_format(tok)) {
        fprintf(stderr, "llm: --chat: --tokenizer %s has no chat format (Qwen3's <|im_start|> or Llama 3's <|start_header_id|>)\n",
                a->tokenizer);
        return NULL;
    }
    if (a->think && strcmp(text_tokenizer_chat_format(tok), "qwen3")) {
        fprintf(stderr, "llm: --think is Qwen3's chat format's; --tokenizer %s has Llama 3's\n", a->tokenizer);
        return NULL;
    }
    Tensor *ids = a->chat ? text_tokenizer_chat_encode(tok, text, len, &o, err, sizeof err)
                          : text_tokenizer_encode(tok, text, len, TEXT_SPECIAL_IN_TEXT | TEXT_ADD_SPECIAL_TOKENS, err, sizeof err);
    if (!ids) fprintf(stderr, "llm: %s: %s\n", what, err);
    return ids;
}

/* ---- llm tokenize ---------------------------------------------------------------------------------- */

static int cmd_tokenize(const Flags *a) {
    TextTokenizer *tok = load_tokenizer(a);
    if (!tok) return 1;
    char err[1024];
    size_t len;
    char *text = ac_read_stream(stdin, "standard input", &len, err, sizeof err); /* text = sys.stdin.read() (its bytes) */
    int rc = 1;
    if (!text) fprintf(stderr, "llm: %s\n", err);
    Tensor *ids = text ? encode_text(tok, a, "standard input", text, len) : NULL;
    if (ids) {                                                                    /* print(" ".join(str(i) for i in ids)) */
        const int64_t *d = (const int64_t *)ids->data;
        for (int64_t i = 0; i < ids->shape[0]; i++) printf(i ? " %lld" : "%lld", (long long)d[i]);
        putchar('\n');
        rc = 0;
    }
    free(text);
    text_tokenizer_free(tok);
    return rc;
}

/* The prompt's ids as (1, n): every id below the vocabulary, at most the context; NULL after a message
 * naming `what` (--ids, --prompt) */
static Tensor *prompt_tensor(const int64_t *ids, int64_t n, const nn_LLMConfig *cfg, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= cfg->vocab_size) {
            fprintf(stderr, "llm: %s: id %lld is at or beyond the vocabulary (vocab_size %lld): index out of range in self\n",
                    what, (long long)ids[i], (long long)cfg->vocab_size);
            return NULL;
        }
    if (n == 0) {
        fprintf(stderr, "llm: %s holds no token\n", what);
        return NULL;
    }
    if (n > cfg->context_length) {
        fprintf(stderr, "llm: %s: the prompt's %lld tokens are longer than the context (max_position_embeddings %lld)\n", what,
                (long long)n, (long long)cfg->context_length);
        return NULL;
    }
    return ac_persist(torch_tensor_long(ids, 2, (int64_t[]){1, n}));
}

/* --ids "1 2 3": numbers */
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
        if (n == cap) ids = ac_realloc(ids, sizeof *ids * (size_t)(cap *= 2));
        ids[n++] = v;
        p = end;
    }
    Tensor *t = prompt_tensor(ids, n, cfg, "--ids");
    free(ids);
    return t;
}

/* ---- llm generate ---------------------------------------------------------------------------------- */

/* The text as tokens come: what decode gives so far, less a trailing U+FFFD that the next token may
 * still complete into a character; the rest at the end. Ids past the tokenizer's vocabulary (Qwen3's
 * padding rows 151669..151935) decode to nothing, as Hugging Face's decode skips them. */
typedef struct {
    TextTokenizer *tok;
    int64_t *ids, n, cap, n_vocab;
    size_t printed;
    bool live;
    double t0;
    int64_t new_tokens;
} Stream;

static void stream_print(Stream *s, bool final) {
    if (!s->tok) return;
    ac_mark m = ac_arena_mark();
    char err[256];
    size_t len;
    char *text = text_tokenizer_decode(s->tok, s->ids, s->n, false, &len, err, sizeof err);
    if (!text) ac_error("decode: %s", err);
    size_t stable = len;
    if (!final && len >= 3 && !memcmp(text + len - 3, "\xEF\xBF\xBD", 3)) stable = len - 3;
    if (stable > s->printed) {
        if (s->live) fputs("\r\033[K", stderr);
        fwrite(text + s->printed, 1, stable - s->printed, stdout);
        s->printed = stable;
    }
    longrun_flush("llm");
    ac_arena_release(m);
}

static bool on_token(int64_t token, void *ctx) {
    Stream *s = ctx;
    s->new_tokens++;
    if (s->tok && token < s->n_vocab) {
        if (s->n == s->cap) s->ids = ac_realloc(s->ids, ac_size_mul(sizeof(int64_t), (size_t)(s->cap *= 2)));
        s->ids[s->n++] = token;
        stream_print(s, false);
    }
    if (s->live) {
        double dt = cli_now_seconds() - s->t0;
        fprintf(stderr, "\r\033[K%lld tokens  %.1f tokens/s", (long long)s->new_tokens, dt > 0 ? (double)s->new_tokens / dt : 0.0);
    }
    return !longrun_stopping();
}

/* Where generation stops: config.json's eos_token_id, and with a text prompt the tokenizer's end of
 * text by name (Qwen3's <|endoftext|>, Llama 3's <|end_of_text|>), with --chat also the end of the
 * turn (<|im_end|>, <|eot_id|>), as the book's chat loops stop at them. */
static int stop_ids(const nn_LLMModel *model, TextTokenizer *tok, bool chat, int64_t out[16]) {
    int n = 0;
    for (int k = 0; k < model->cfg.n_eos && n < 12; k++) out[n++] = model->cfg.eos_token_ids[k];
    if (!tok) return n;
    const char *names[] = {"<|endoftext|>", "<|end_of_text|>", chat ? "<|im_end|>" : NULL, chat ? "<|eot_id|>" : NULL};
    for (int k = 0; k < 4; k++) {
        int64_t id = names[k] ? text_tokenizer_token_to_id(tok, names[k]) : -1;
        bool have = id < 0 || id >= model->cfg.vocab_size;
        for (int j = 0; j < n && !have; j++) have = out[j] == id;
        if (!have) out[n++] = id;
    }
    return n;
}

static int cmd_generate(const Flags *a) {
    TextTokenizer *tok = NULL;
    Tensor *prompt_ids = NULL;
    if (a->prompt && !a->print_model) {                                          /* tokenizer = Qwen3Tokenizer(...) / Llama3Tokenizer(...) */
        if (!(tok = load_tokenizer(a))) return 1;
        if (!(prompt_ids = encode_text(tok, a, "--prompt", a->prompt, strlen(a->prompt)))) {
            text_tokenizer_free(tok);
            return 1;
        }
        prompt_ids = ac_persist(prompt_ids);
    }
    nn_LLMModel *model = make_model(a);                                           /* model = Qwen3Model(cfg) (or its weights) */
    if (!model) {
        if (prompt_ids) ac_free(prompt_ids);
        text_tokenizer_free(tok);
        return 1;
    }
    if (a->print_model) {                                                         /* print(model) */
        nn_print(&model->module);
        nn_LLMModel_free(model);
        return 0;
    }
    Tensor *idx = prompt_ids ? prompt_tensor((const int64_t *)prompt_ids->data, prompt_ids->shape[0], &model->cfg, "--prompt") /* idx = torch.tensor([ids]) */
                             : parse_ids(a->ids, &model->cfg);
    int rc = 1;
    if (!idx) goto out;
    if (a->top_k > model->cfg.vocab_size) {
        fprintf(stderr, "llm: --top-k %lld is larger than the vocabulary (%lld)\n", a->top_k, (long long)model->cfg.vocab_size);
        goto out;
    }
    int64_t stops[16];
    int n_stop = stop_ids(model, tok, a->chat, stops);                           /* eos = cfg["eos_token_id"] (and the tokenizer's end of text) */
    longrun_catch_signals("llm");
    longrun_unit("llm", "token");
    int64_t n0 = idx->shape[1];
    Stream s = {a->print_ids ? NULL : tok, NULL, 0, 0, tok ? text_tokenizer_n_vocab(tok) : 0, 0, longrun_live_wanted(),
                cli_now_seconds(), 0};
    if (s.tok) { /* (C: the text: "Output text: " and the prompt's (gpt generate's line), or with --chat the answer alone) */
        s.cap = n0 + 16;
        s.ids = ac_malloc(sizeof(int64_t) * (size_t)s.cap);
        if (!a->chat)
            for (int64_t i = 0; i < n0; i++)
                if (((const int64_t *)idx->data)[i] < s.n_vocab) s.ids[s.n++] = ((const int64_t *)idx->data)[i];
        fputs(a->chat ? "" : "Output text: ", stdout);                            /* print("Output text:", tokenizer.decode(ids)) */
        stream_print(&s, false);
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    Tensor *out = llm_generate_ex(model, idx, a->max_new_tokens, model->cfg.context_length, a->temperature, /* out = generate(model, idx, a.max_new_tokens, cfg["context_length"], a.temperature, */
                                  a->top_k, stops, n_stop, !a->no_kv_cache, on_token, &s); /*     a.top_k, eos, use_cache=not a.no_kv_cache) */
    if (s.live) fputs("\r\033[K", stderr);
    if (s.tok) {                                                                  /* if a.text and not a.print_ids: */
        stream_print(&s, true);                                                   /*     print("Output text: " + decode(out[0].tolist())) (C: as it came) */
        putchar('\n');
    } else {
        const int64_t *d = (const int64_t *)out->data;                            /* print(" ".join(str(i) for i in out[0].tolist())) */
        for (int64_t i = 0; i < out->shape[1]; i++) printf(i ? " %lld" : "%lld", (long long)d[i]);
        putchar('\n');
    }
    longrun_flush("llm");
    free(s.ids);
    rc = 0;
    if (longrun_stopping()) {
        fprintf(stderr, "llm: stopped by signal %d after %lld tokens\n", (int)longrun_signal, (long long)s.new_tokens);
        rc = 128 + (int)longrun_signal;
    }
out:
    if (idx) ac_free(idx);
    if (prompt_ids) ac_free(prompt_ids);
    nn_LLMModel_free(model);
    text_tokenizer_free(tok);
    return rc;
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

static Tensor *encode(TextTokenizer *tok, const char *text) { /* torch.tensor(tokenizer.encode(text)).unsqueeze(0) */
    char err[512];
    Tensor *ids = text_tokenizer_encode(tok, text, strlen(text), TEXT_SPECIAL_IN_TEXT, err, sizeof err);
    if (!ids) {
        fprintf(stderr, "llm: --prompt: %s\n", err);
        return NULL;
    }
    return ac_persist(torch_unsqueeze(ids, 0));
}

static char *decode(TextTokenizer *tok, Tensor *ids, size_t *len) { /* tokenizer.decode(ids.squeeze(0).tolist()) */
    char err[512];
    char *text = text_tokenizer_decode(tok, (const int64_t *)ids->data, ids->shape[1], false, len, err, sizeof err);
    if (!text) fprintf(stderr, "llm: %s\n", err);
    return text;
}

/* create_dataloader_v1(txt, tokenizer, ...): the text's ids as the book's GPTDatasetV1 makes them
 * (tokenizer.encode(txt, allowed_special={"<|endoftext|>"}): special tokens in the text are their ids) */
static DataLoader make_loader(TextTokenizer *tok, const char *txt, size_t len, int64_t batch, int64_t context, bool shuffle,
                              bool drop_last, char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    Tensor *ids = text_tokenizer_encode(tok, txt, len, TEXT_SPECIAL_IN_TEXT, err, errlen);
    GPTDatasetV1 *ds = ids ? GPTDatasetV1_from_ids((const int64_t *)ids->data, ids->shape[0], context, context, err, errlen) : NULL;
    ac_arena_release(m);
    return ds ? DataLoader_new(ds, batch, shuffle, drop_last) : (DataLoader){0};
}

/* ---- long runs: where a training run stands (examples/longrun.h) --------------------------------- */

/* What a stopped run saves beside its weights (DIR/train_state.safetensors) so that --resume DIR goes
 * on exactly: the epoch; the batches of it done and its order (-1: from the epoch's start); the step. */
typedef struct { int64_t epoch, batches_done, global_step, train_batches, batch, *order, n_order; } Stand;

static const char *const state_extras[] = {"optim.", "rng_state", "loader.", NULL};

static void state_path(const char *dir, char *out, size_t n) { snprintf(out, n, "%s/train_state.safetensors", dir); }

/* The stop's save: Hugging Face's layout (F32: what a resumed run goes on from) and the run's state */
static bool save_stand(const Flags *a, nn_LLMModel *model, optim_Optimizer *opt, const Stand *s) {
    char err[1024], path[4150], nums[5][32];
    if (!llm_save_pretrained(model, a->save, "F32", err, sizeof err)) {
        fprintf(stderr, "llm: --save %s\n", err);
        return false;
    }
    state_path(a->save, path, sizeof path);
    ac_mark mk = ac_arena_mark();
    const char *keys[] = {"epoch", "batches_done", "global_step", "train_batches", "batch"};
    int64_t vals[] = {s->epoch, s->batches_done, s->global_step, s->train_batches, s->batch};
    const char *meta[12] = {"run", "llm train"};
    for (int k = 0; k < 5; k++) {
        snprintf(nums[k], sizeof nums[k], "%lld", (long long)vals[k]);
        meta[2 + 2 * k] = keys[k], meta[3 + 2 * k] = nums[k];
    }
    const char *names[1] = {"loader.order"};
    Tensor *ts[1] = {s->n_order ? torch_tensor_long(s->order, SHAPE(s->n_order)) : NULL};
    nn_TensorList all = nn_checkpoint_tensors(nn_state_dict(&model->module), opt, (nn_TensorList){s->n_order ? 1 : 0, names, ts});
    longrun_save_begin(path);
    bool ok = safetensors_save(path, all, 6, meta, err, sizeof err);
    longrun_save_end();
    ac_arena_release(mk);
    if (!ok) fprintf(stderr, "llm: --save %s\n", err);
    return ok;
}

static bool meta_int(const safetensors_File *f, const char *path, const char *key, int64_t min, int64_t *out) {
    const char *v = safetensors_meta(f, key);
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < min) {
        fprintf(stderr, "llm: --resume %s: the metadata's \"%s\" is missing or not a whole number (not a stopped llm train's --save?)\n",
                path, key);
        return false;
    }
    *out = x;
    return true;
}

/* --resume DIR: its state read and checked against this run (the same batches, a model and AdamW it
 * fits) before the first line of output; apply: then the weights, AdamW's state, the generator and
 * the epoch's order taken. */
static bool read_stand(const Flags *a, nn_LLMModel *model, optim_Optimizer *opt, int64_t train_batches, Stand *s, bool apply) {
    char path[4300], err[1024];
    state_path(a->resume, path, sizeof path);
    ac_mark mk = ac_arena_mark();
    safetensors_File f;
    bool ok = apply ? safetensors_load(path, &f, err, sizeof err) : safetensors_load_header(path, &f, err, sizeof err);
    if (!ok) fprintf(stderr, "llm: --resume %s (the --save DIR of a stopped llm train)\n", err);
    const char *run = ok ? safetensors_meta(&f, "run") : NULL;
    if (ok && (!run || strcmp(run, "llm train"))) {
        fprintf(stderr, "llm: --resume %s is not the state of a stopped llm train\n", path);
        ok = false;
    }
    ok = ok && meta_int(&f, path, "epoch", 0, &s->epoch) && meta_int(&f, path, "batches_done", -1, &s->batches_done) &&
         meta_int(&f, path, "global_step", -1, &s->global_step) && meta_int(&f, path, "train_batches", 0, &s->train_batches) &&
         meta_int(&f, path, "batch", 1, &s->batch);
    if (ok && (s->train_batches != train_batches || s->batch != a->batch)) {
        fprintf(stderr, "llm: --resume %s was trained on %lld batches of %lld an epoch; this run has %lld of %lld (other --data, "
                "--context, --train-ratio or --batch)\n", path, (long long)s->train_batches, (long long)s->batch,
                (long long)train_batches, (long long)a->batch);
        ok = false;
    }
    if (ok && (!safetensors_copy_into(&f, nn_state_dict(&model->module), state_extras, apply, err, sizeof err) ||
               !optim_load_state_dict(opt, nn_checkpoint_optim_state(&f), apply, err, sizeof err))) {
        fprintf(stderr, "llm: --resume %s: %s (the model flags of the stopped run: --config/--model, the same)\n", path, err);
        ok = false;
    }
    Tensor *rng = ok ? safetensors_get(&f, "rng_state") : NULL, *order = ok ? safetensors_get(&f, "loader.order") : NULL;
    if (ok && (!rng || (apply && !ac_rng_state_check(rng, err, sizeof err)))) {
        fprintf(stderr, "llm: --resume %s: its rng_state is missing or broken\n", path);
        ok = false;
    }
    if (ok && s->batches_done >= 0 && (!order || order->dtype != AC_INT64 || order->ndim != 1)) {
        fprintf(stderr, "llm: --resume %s: \"loader.order\" is missing or not int64 (n,)\n", path);
        ok = false;
    }
    if (ok && apply) {
        torch_set_rng_state(rng);
        if (s->batches_done >= 0) {
            s->n_order = order->shape[0];
            s->order = ac_malloc(sizeof(int64_t) * (size_t)(s->n_order ? s->n_order : 1));
            memcpy(s->order, order->data, sizeof(int64_t) * (size_t)s->n_order);
            for (int64_t i = 0; i < s->n_order && ok; i++) ok = s->order[i] >= 0 && s->order[i] < s->n_order;
            if (!ok) fprintf(stderr, "llm: --resume %s: \"loader.order\" is not a permutation\n", path);
        }
    }
    ac_arena_release(mk);
    return ok;
}

/* The Ep lines' losses over the epochs seen: the loss curve of --html's page */
static ac_points curve; /* x: epochs seen, a: train loss, b: val loss */
static double curve_tokens_per_epoch;

static int cmd_train(const Flags *a) {
    if (a->save) { /* (C: save_pretrained's directory: made if absent, checked before any work) */
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
    TextTokenizer *tok = NULL;
    char *text = NULL;
    nn_LLMModel *model = NULL;
    optim_Optimizer *opt = NULL;
    Tensor *start = NULL;
    DataLoader train_loader = {0}, val_loader = {0};
    if (a->print_model) {
        if ((model = make_model(a))) nn_print(&model->module), rc = 0;
        goto done;
    }
    tok = load_tokenizer(a);                                                      /* tokenizer = GPT2Tokenizer(a.tokenizer) (or tokenizer.json's) */
    if (!tok) goto done;
    size_t len;
    text = ac_read_file(a->data, &len, err, sizeof err);                          /* with open(a.data, encoding="utf-8") as f: text = f.read() */
    if (!text) {
        fprintf(stderr, "llm: --data %s\n", err);
        goto done;
    }
    len = universal_newlines(text, len);
    if (a->log && !(log = fopen(a->log, a->resume ? "a" : "w"))) {                 /* log = open(a.log, "w") (C: appended to by --resume) */
        fprintf(stderr, "llm: cannot open --log %s: %s\n", a->log, strerror(errno));
        goto done;
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    model = make_model(a);                                                        /* model = Qwen3Model(cfg) */
    if (!model) goto done;
    cfg = model->cfg;
    if (text_tokenizer_n_vocab(tok) > cfg.vocab_size) {
        fprintf(stderr, "llm: --tokenizer %s has %lld tokens; the model's vocab_size is %lld\n", a->tokenizer,
                (long long)text_tokenizer_n_vocab(tok), (long long)cfg.vocab_size);
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
    if (!(start = encode(tok, a->prompt))) goto done;                             /* enc(a.prompt) (C: once, for every sample) */
    size_t split = char_offset(text, len, (int64_t)(a->train_ratio * (double)count_chars(text, len))); /* split = int(a.train_ratio * len(text)) */
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    train_loader = make_loader(tok, text, split, a->batch, context, true, true, err, sizeof err); /* train_loader = create_dataloader_v1(text[:split], ..., drop_last=True, shuffle=True) */
    if (!train_loader.dataset) {
        fprintf(stderr, "llm: --data %s: %s\n", a->data, err);
        goto done;
    }
    val_loader = make_loader(tok, text + split, len - split, a->batch, context, false, false, err, sizeof err); /* val_loader = create_dataloader_v1(text[split:], ..., drop_last=False, shuffle=False) */
    if (!val_loader.dataset) {
        fprintf(stderr, "llm: --data %s: %s\n", a->data, err);
        goto done;
    }
    if (DataLoader_len(&train_loader) == 0) {
        fprintf(stderr, "llm: the training part of %s holds no batch of %lld windows of %lld+1 tokens\n", a->data,
                (long long)a->batch, (long long)context);
        goto done;
    }
    /* (C: AdamW draws nothing: made here, so that --resume is checked against it before any output) */
    opt = optim_AdamW(nn_named_parameters(&model->module), a->lr, 0.9, 0.999, 1e-8, a->weight_decay, false); /* AdamW(model.parameters(), lr, weight_decay) */
    Stand at = {0, -1, -1, DataLoader_len(&train_loader), a->batch, NULL, 0};
    if (a->resume && !read_stand(a, model, opt, at.train_batches, &at, false)) goto done;
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    if (!a->resume) {                                                             /* (C: printed by the stopped run) */
        bool prev = torch_no_grad_enter();                                        /* with torch.no_grad(): */
        printf("Training loss: %s\n", py_float(llm_calc_loss_loader(&train_loader, model, -1), fb)); /* print("Training loss:", calc_loss_loader(train_loader, model)) */
        printf("Validation loss: %s\n", py_float(llm_calc_loss_loader(&val_loader, model, -1), fb)); /* print("Validation loss:", calc_loss_loader(val_loader, model)) */
        longrun_flush("llm");
        torch_no_grad_exit(prev);
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    if (a->config) torch_default_generator = after_init; /* model = Qwen3Model(cfg) (C: the same draws: the one still untouched) */
    if (a->resume && !read_stand(a, model, opt, at.train_batches, &at, true)) goto done; /* (C: where the stopped run stood) */
    longrun_catch_signals("llm");
    longrun_show_progress();
    double t0 = cli_now_seconds();
    int64_t global_step = at.global_step, per_epoch = DataLoader_len(&train_loader); /* tokens_seen, global_step = 0, -1 (C: tokens_seen not kept: nothing prints it) */
    curve_tokens_per_epoch = (double)(per_epoch * a->batch * context);          /* (C: every batch is whole: drop_last=True) */
    longrun_live live;
    longrun_live_start(&live, global_step + 1);
    int64_t epoch = at.epoch;
    for (; epoch < a->epochs && !longrun_stopping(); epoch++) {                   /* for epoch in range(a.epochs): */
        nn_train(&model->module, true);                                           /*     model.train() */
        DataLoaderIter it;                                                        /*     for input_batch, target_batch in train_loader: */
        if (epoch == at.epoch && at.batches_done >= 0)                            /* (C: a resumed epoch: its order, its batches done) */
            it = (DataLoaderIter){&train_loader, 0, at.batches_done, at.order, true, false}, at.order = NULL, at.n_order = 0;
        else
            it = DataLoader_iter(&train_loader);
        Tensor *x, *y;
        for (;;) {
            ac_mark mk = ac_arena_mark();
            if (longrun_stopping() || !DataLoaderIter_next(&it, &x, &y)) {
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
                llm_evaluate_model(model, &train_loader, &val_loader, a->eval_iter, &tl, &vl); /* train_loss, val_loss = evaluate_model(model, train_loader, val_loader, eval_iter) */
                longrun_live_clear(&live);
                printf("Ep %lld (Step %06lld): Train loss %s, Val loss %s\n", (long long)epoch + 1, (long long)global_step, /* print(f"Ep {epoch + 1} (Step {global_step:06d}): " */
                       py_3f(tl, fb), py_3f(vl, fb2));                            /*       f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}") */
                longrun_flush("llm");
                ac_points_add(&curve, (double)(global_step + 1) / (double)per_epoch, tl, vl); /* train_losses.append(train_loss); val_losses.append(val_loss) */
            }
            ac_arena_release(mk);
            char what[64];
            snprintf(what, sizeof what, "epoch %lld/%lld  step", (long long)epoch + 1, (long long)a->epochs);
            longrun_live_show(&live, what, global_step + 1, per_epoch * a->epochs, (double)((global_step - at.global_step) * a->batch * context), "tokens");
            longrun_point("step", global_step);
        }
        longrun_live_clear(&live);
        if (longrun_stopping() && !it.done) { /* (C: stopped inside the epoch: the save records where) */
            at.epoch = epoch, at.batches_done = it.started ? it.next : -1;
            at.order = it.order, at.n_order = it.started ? train_loader.dataset->n : 0;
            it.order = NULL;
            DataLoaderIter_free(&it);
            break;
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
            longrun_flush("llm");
        }
        ac_arena_release(mk);
        at.epoch = epoch + 1, at.batches_done = -1;                               /* (C: the next epoch, from its start) */
    }
    if (longrun_stopping()) {
        at.global_step = global_step;
        char after[64];
        snprintf(after, sizeof after, "step %lld", (long long)global_step);
        if (log && fclose(log) != 0) fprintf(stderr, "llm: writing --log %s failed: %s\n", a->log, strerror(errno));
        log = NULL;
        rc = longrun_stopped("llm", after, a->save, a->save && save_stand(a, model, opt, &at));
        free(at.order);
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
    text_tokenizer_free(tok);
    return rc;
}

/* ---- the reader's page (--html) ------------------------------------------------------------------- */

static const char python_head[] = "Python (the book's qwen3.py and llama3.py, as tests/tools/llm_ref.py)";

/* plot_losses(epochs_seen, tokens_seen, train_losses, val_losses) */
static bool draw_losses(FILE *f, void *u) {
    const ac_points *c = u;
    ac_series s[2] = {{"Training loss", c->n, c->x, c->a}, {"Validation loss", c->n, c->x, c->b}};
    ac_plot_opts o = {.title = "The model on the text (chapter 5's loop)", .xlabel = "Epochs", .ylabel = "Loss",
                      .x2label = "Tokens seen", .x2_per_x = curve_tokens_per_epoch};
    return ac_plot_svg(f, &o, c->n ? 2 : 0, s);
}

/* The tables both pages open with: the models and the blocks they are made of */
#define MODEL_TABLES                                                                                                      \
    {"model", "Qwen3Model and Llama3Model, and their TransformerBlock", llm_model_source, "nn/models/llm_model.c",         \
     "llm_model_build llm_forward", NULL},                                                                                 \
    {"model", NULL, llm_qwen3_source, "nn/models/qwen3.c", "qwen3_block_new", "TransformerBlock"},                       \
    {"model", NULL, llm_model_source, "nn/models/llm_model.c", "block_forward", "TransformerBlock.forward"},             \
    {"blocks", "The blocks: RMSNorm, RoPE, the SwiGLU FeedForward, GroupedQueryAttention", llm_rmsnorm_source,           \
     "nn/blocks/rmsnorm.c", "rmsnorm_new nn_RMSNorm_forward", "RMSNorm"},                                                         \
    {"blocks", NULL, llm_rope_source, "nn/blocks/rope.c", "nn_compute_rope_params nn_apply_rope", "RoPE"},                     \
    {"blocks", NULL, llm_swiglu_source, "nn/blocks/swiglu.c", "nn_SwiGLUFeedForward_new nn_SwiGLUFeedForward_forward",           \
     "FeedForward"},                                                                                                       \
    {"blocks", NULL, llm_gqa_source, "nn/blocks/gqa.c", "nn_GroupedQueryAttention_new nn_GroupedQueryAttention_forward",        \
     "GroupedQueryAttention"}
#define N_MODEL_TABLES 7

static void page_begin(FILE *f, const char *title, const char *command) {
    char intro[1400];
    snprintf(intro, sizeof intro,
             "<p>The bonus chapters of Sebastian Raschka's <i>Build a Large Language Model (From Scratch)</i>, Qwen3 "
             "(<code>ch05/11_qwen3</code>) and Llama 3 (<code>ch05/07_gpt_to_llama</code>), as "
             "<code>pkg/llms_from_scratch/qwen3.py</code> and <code>llama3.py</code> write them and "
             "<code>tests/tools/llm_ref.py</code> runs them: the Python on the left, <b>attention.c</b> on the right, row "
             "for row (each C line carries the Python it does), and what this run printed%s. The C column is "
             "<code>nn/models/llm_model.c</code>, the blocks of <code>nn/</code> and <code>examples/llm.c</code> themselves. "
             "Made by <code>./build/llm %s --html FILE</code>; no script, no network.</p>",
             strcmp(command, "train") ? "" : " and drew", command);
    ac_page_begin(f, title, intro);
}

/* llm train --html: the model, its blocks, the losses, the loop and its curve, the samples */
static void write_train_page(FILE *f, const char *out, size_t len) {
    const char *end = out + len;
    page_begin(f, "The book's Qwen3 and Llama 3, trained with chapter 5's loop: Python beside C", "train");
    const char *train_at = out; /* after the two initial losses */
    for (int i = 0; i < 2 && train_at < end; i++) {
        const char *nl = memchr(train_at, '\n', (size_t)(end - train_at));
        train_at = nl ? nl + 1 : end;
    }
    const char *sample_at = ac_page_line_at(train_at, end, "Output text:", end);
    const ac_page_table t[] = {
        MODEL_TABLES,
        {"loss", "Chapter 5: the loss of a batch and of a loader", llm_lm_source, "nn/models/lm.c",
         "lm_calc_loss_batch lm_calc_loss_loader lm_evaluate_model", NULL},
        {"train", "Chapter 5: pretraining", llm_example_source, "examples/llm.c", "cmd_train", NULL},
        {"sample", "Generating: greedy, or temperature and top-k", llm_lm_source, "nn/models/lm.c",
         "lm_generate", NULL},
    };
    const char *cuts[N_MODEL_TABLES + 4];
    for (int i = 0; i < N_MODEL_TABLES; i++) cuts[i] = out; /* the model's sections print nothing */
    cuts[N_MODEL_TABLES] = out, cuts[N_MODEL_TABLES + 1] = train_at, cuts[N_MODEL_TABLES + 2] = sample_at;
    cuts[N_MODEL_TABLES + 3] = end;
    char *svg = ac_draw_to_string(draw_losses, &curve);
    ac_page_tables(f, python_head, N_MODEL_TABLES + 3, t, cuts, N_MODEL_TABLES + 1, svg,
                   "Training and validation loss (the book's figure)");
    free(svg);
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The Check suite runs <code>llm train</code> against "
                   "<code>tests/tools/llm_ref.py</code> and compares every line.</p>");
}

/* llm generate --html: the model, its blocks, the generating loop and what it printed */
static void write_generate_page(FILE *f, const char *out, size_t len) {
    page_begin(f, "The book's Qwen3 and Llama 3, generating: Python beside C", "generate");
    const ac_page_table t[] = {
        MODEL_TABLES,
        {"generate", "Generating: the KV cache, greedy, or temperature and top-k", llm_example_source, "examples/llm.c",
         "cmd_generate", NULL},
        {"generate", NULL, llm_lm_source, "nn/models/lm.c", "lm_generate next_logits lm_forward_cached",
         "generate and the model's forward with the cache"},
    };
    const char *cuts[N_MODEL_TABLES + 3];
    for (int i = 0; i < N_MODEL_TABLES + 2; i++) cuts[i] = out;
    cuts[N_MODEL_TABLES + 2] = out + len;
    ac_page_tables(f, python_head, N_MODEL_TABLES + 2, t, cuts, -1, NULL, NULL);
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The Check suite runs <code>llm generate</code> against "
                   "<code>tests/tools/llm_ref.py</code> and compares the ids.</p>");
}

/* llm train/generate --html FILE: the run with stdout going to a temporary file, so that the page can
 * show it, then printed as usual, then the page */
static int run_for_page(void *flags) {
    const Flags *a = flags;
    return a->cmd == TRAIN ? cmd_train(a) : cmd_generate(a);
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
    if (a.html) rc = ac_page_of_run("llm", a.html, run_for_page, &a, a.cmd == TRAIN ? write_train_page : write_generate_page);
    else if (a.cmd == TOKENIZE) rc = cmd_tokenize(&a);
    else if (a.cmd == GENERATE) rc = cmd_generate(&a);
    else rc = cmd_train(&a);
    ac_points_free(&curve);
    ac_shutdown();
    return ac_finish_output("llm", rc);
}
