/* The book's GPT in C: "Build a Large Language Model (From Scratch)", chapters
 * 2-5, as ../shared/pytorch/gpt.py does them in PyTorch.
 *
 *     gpt COMMAND [flags]
 *       train      chapter 5: pretraining on the-verdict, printing the book's lines
 *       generate   chapters 4-5: the greedy line of the untrained model, the sampler
 *       tokenize   chapter 2: text to GPT-2 token ids (or back, --decode)
 *
 *       appendix-d appendix D: warmup, cosine decay, gradient clipping
 *
 * Each command is a function cmd_NAME over the flags it shares with the others
 * (parse_flags, a table of which command takes which flag): gpt.py's flags,
 * with its defaults. cmd_train runs train and appendix-d, whose loops differ
 * in a few lines. Each line carries the line of gpt.py it does. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"
#include "extend.h"
#include "gpt.h"
#include "optim.h"
#include "safetensors.h"
#include "tensor.h"
#include "tokenizer.h"
#include "viz.h"

#include "cli.h"
#include "longrun.h"
#include "gpt_sources.h" /* gpt_example_source, gpt_model_source, gpt_lm_source, gpt_attention_source: this file, nn/models/gpt/gpt.c, nn/models/lm.c, nn/blocks/attention.c */

#define DEFAULT_TOKENIZER "../shared/data/gpt2"
#define DEFAULT_DATA "../shared/data/the-verdict.txt"

static void usage(FILE *f) {
    fprintf(f,
            "usage: gpt COMMAND [flags]   The book's GPT (Build a Large Language Model (From Scratch)) in C.\n"
            "\n"
            "commands (those of ../shared/pytorch/gpt.py, with its flags, and tokenize):\n"
            "  train                chapter 5: pretrain GPTModel on --data, printing what the book prints\n"
            "  generate             chapter 4/5: --prompt and --sample-tokens more, greedy or sampled\n"
            "  appendix-d           appendix D: chapter 5's loop with a linear warmup, cosine decay and gradient\n"
            "                       clipping, 15 epochs, printing what the book prints\n"
            "  tokenize [FILE]      FILE's (stdin's) GPT-2 token ids, separated by single spaces, on one line\n"
            "                       (tiktoken.get_encoding(\"gpt2\").encode(text, allowed_special={\"<|endoftext|>\"}))\n"
            "\n"
            "the model (GPT_CONFIG_124M by default; vocab_size 50257):\n"
            "  --context N          context_length (train: 256, generate: 1024)\n"
            "  --emb-dim N --heads N --layers N   emb_dim (768), n_heads (12), n_layers (12)\n"
            "  --drop X             drop_rate (0.1)          --qkv-bias   qkv_bias=True\n"
            "train and appendix-d:\n"
            "  --data FILE          the text (default " DEFAULT_DATA ")\n"
            "  --train-ratio X      the share of the text's characters for training (0.90)\n"
            "  --batch N --lr X --weight-decay X --epochs N   2, 0.0004, 0.1, 10 (AdamW; appendix-d: --lr 0.001,\n"
            "                                                 the peak, and 15 epochs)\n"
            "  --eval-freq N --eval-iter N                    evaluate every N steps on N batches (5, 5; appendix-d: 5, 1)\n"
            "  --prompt TEXT        (train: \"Every effort moves you\"; generate: \"Hello, I am\"; generate: - reads\n"
            "                       stdin, less one final newline)\n"
            "  --sample-tokens N    tokens per sample (train: 50 per epoch; generate: 6)\n"
            "  --log FILE           every step's batch loss: step N loss X (appendix-d: step N lr LR loss X)\n"
            "  --save FILE          the model, AdamW and the generator as safetensors at the end (and on Ctrl-C,\n"
            "                       the last whole step); --load FILE resumes from it, exactly\n"
            "  --plot FILE.svg      the book's loss figure (train and val loss over epochs, tokens seen on top;\n"
            "                       appendix-d: the learning rate over the steps beside it)\n"
            "  --html FILE          the reader's page: the book's Python beside this C, the run's output and\n"
            "                       pictures (gpt --html FILE trains with the flags given, the book's run by default)\n"
            "appendix-d:\n"
            "  --warmup X           the share of all steps that warm up, in [0, 1) (0.2; at least one step)\n"
            "  --initial-lr X       the warmup's first learning rate (1e-5)\n"
            "  --min-lr X           where the cosine decay ends (1e-5; at most --lr)\n"
            "  --clip X             clip_grad_norm_'s max_norm after the warmup (1.0)\n"
            "generate:\n"
            "  --load FILE          the weights (a --save, or a safetensors state_dict with the book's names)\n"
            "  --gpt2 DIR           OpenAI's GPT-2 from a Hugging Face directory (config.json + model.safetensors):\n"
            "                       every size from config.json (the model flags are not used), qkv_bias, no dropout\n"
            "  --temperature X      0 is greedy (default)      --top-k N   keep the N largest logits\n"
            "  --eos-id N           stop at this token          --seed N   (123) the model's and the sampler's\n"
            "  --no-kv-cache        recompute the whole window for each token, as the book's loop does (the same\n"
            "                       tokens; the cache, the default, keeps each block's keys and values)\n"
            "both:\n"
            "  --tokenizer DIR      GPT-2's encoder.json + vocab.bpe (or vocab.json + merges.txt) (default " DEFAULT_TOKENIZER ")\n"
            "  --tokenizer train:N  instead, learn N BPE merges from --data (GPT-2's pre-tokenizer, minbpe's rule)\n"
            "  --threads N          threads inside ops (default: the cores this process may use); the numbers\n"
            "                       never depend on it\n"
            "  --exact              exact math (sums in PyTorch's order, no fused multiply-add); default: fast\n"
            "tokenize:\n"
            "  --save-tokenizer DIR write the tokenizer's encoder.json and vocab.bpe into DIR (it must exist)\n"
            "  --decode             read ids (separated by white space) and write their text\n"
            "  --special MODE       \"<|endoftext|>\" in the text is the special id (allow, the default),\n"
            "                       ordinary text (text), or an error (raise: tiktoken's default)\n"
            "  -h, --help           this text\n"
            "\n"
            "  gpt train                     the book's chapter 5 run (python3 gpt.py train)\n"
            "  gpt train --layers 2 --emb-dim 64 --heads 4 --context 32 --epochs 2    a small one, seconds\n"
            "  gpt generate --temperature 1.4 --top-k 25 --sample-tokens 15\n"
            "  gpt appendix-d                the book's appendix D run (python3 gpt.py appendix-d)\n"
            "A flag a command does not use is refused, naming the commands that take it.\n");
}

typedef struct {
    const char *command, *file, *tokenizer, *data, *save_tokenizer;
    bool decode;
    tokenizer_special special;
    /* gpt.py's flags; -1 (or NAN) until given, then the command's default */
    long long context, emb_dim, heads, layers, seed, batch, epochs, eval_freq, eval_iter, sample_tokens, top_k, eos_id;
    double drop, train_ratio, lr, weight_decay, temperature;
    bool qkv_bias, exact, no_kv_cache;
    const char *prompt, *log, *save, *load, *plot, *gpt2, *html;
    bool context_given;
    double warmup, initial_lr, min_lr, clip; /* appendix-d */
    int cmd;                                 /* the command's index in commands[] */
    bool given_context, given_emb_dim, given_heads, given_layers, given_drop; /* against a --load file's config */
} Flags;

static int bad_flags(const char *fmt, const char *arg) {
    fprintf(stderr, "gpt: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (gpt --help lists the flags)\n");
    return 2;
}

#define BIG 1000000000000LL /* sizes past this overflow before they could run: nn_GPTConfig_check words them */

enum { TRAIN, GENERATE, TOKENIZE, APPENDIX_D };
static const char *const commands[] = {"train", "generate", "tokenize", "appendix-d", NULL};
#define ON(c) (1u << (c))
#define MODEL (ON(TRAIN) | ON(GENERATE) | ON(APPENDIX_D))
#define TRAINING (ON(TRAIN) | ON(APPENDIX_D))

/* 0, or the exit status for a usage error (after the message). */
static int parse_flags(int argc, char **argv, Flags *a) {
    static char tok_default[4200], data_default[4200];
    *a = (Flags){.tokenizer = cli_default_path("data/gpt2", tok_default, sizeof tok_default),
                 .data = cli_default_path("data/the-verdict.txt", data_default, sizeof data_default), .context = -1, .emb_dim = 768, .heads = 12,
                 .layers = 12, .seed = 123, .batch = 2, .epochs = -1, .eval_freq = 5, .eval_iter = -1,
                 .sample_tokens = -1, .top_k = -1, .eos_id = -1, .drop = 0.1, .train_ratio = 0.90, .lr = NAN,
                 .weight_decay = 0.1, .temperature = 0.0, .warmup = 0.2, .initial_lr = 1e-5, .min_lr = 1e-5, .clip = 1.0};
    const char *special = "allow";
    long long threads = 0;
    const cli_flag flags[] = {
        CLI_TEXT_FLAG("--tokenizer", &a->tokenizer, CLI_ALL),
        CLI_TEXT_FLAG("--data", &a->data, TRAINING | ON(GENERATE) | ON(TOKENIZE)), /* the last two: --tokenizer train:N */
        CLI_INT_FLAG("--threads", &threads, 1, 1 << 20, CLI_ALL),
        CLI_SWITCH_FLAG("--exact", &a->exact, CLI_ALL),
        CLI_TEXT_FLAG("--save-tokenizer", &a->save_tokenizer, CLI_ALL),
        CLI_SWITCH_FLAG("--decode", &a->decode, ON(TOKENIZE)),
        CLI_TEXT_FLAG("--special", &special, ON(TOKENIZE)),
        CLI_INT_FLAG("--context", &a->context, 1, BIG, MODEL),
        CLI_INT_FLAG("--emb-dim", &a->emb_dim, 1, BIG, MODEL),
        CLI_INT_FLAG("--heads", &a->heads, 1, BIG, MODEL),
        CLI_INT_FLAG("--layers", &a->layers, 1, BIG, MODEL),
        CLI_NUM_FLAG("--drop", &a->drop, 0, 1, MODEL),
        CLI_SWITCH_FLAG("--qkv-bias", &a->qkv_bias, MODEL),
        CLI_INT_FLAG("--seed", &a->seed, INT64_MIN, INT64_MAX, MODEL),
        CLI_TEXT_FLAG("--prompt", &a->prompt, MODEL),
        CLI_INT_FLAG("--sample-tokens", &a->sample_tokens, 1, BIG, ON(TRAIN) | ON(GENERATE)),
        CLI_NUM_FLAG("--train-ratio", &a->train_ratio, 0, 1, TRAINING),
        CLI_INT_FLAG("--batch", &a->batch, 1, BIG, TRAINING),
        CLI_NUM_FLAG("--lr", &a->lr, 0, HUGE_VAL, TRAINING),
        CLI_NUM_FLAG("--weight-decay", &a->weight_decay, 0, HUGE_VAL, TRAINING),
        CLI_INT_FLAG("--epochs", &a->epochs, 0, BIG, TRAINING),
        CLI_INT_FLAG("--eval-freq", &a->eval_freq, 1, BIG, TRAINING),
        CLI_INT_FLAG("--eval-iter", &a->eval_iter, 1, BIG, TRAINING),
        CLI_TEXT_FLAG("--log", &a->log, TRAINING),
        CLI_TEXT_FLAG("--save", &a->save, TRAINING),
        CLI_TEXT_FLAG("--load", &a->load, MODEL),
        CLI_TEXT_FLAG("--plot", &a->plot, TRAINING),
        CLI_TEXT_FLAG("--html", &a->html, ON(TRAIN)),
        CLI_TEXT_FLAG("--gpt2", &a->gpt2, ON(GENERATE)),
        CLI_NUM_FLAG("--temperature", &a->temperature, 0, HUGE_VAL, ON(GENERATE)),
        CLI_INT_FLAG("--top-k", &a->top_k, 1, BIG, ON(GENERATE)),
        CLI_INT_FLAG("--eos-id", &a->eos_id, 0, BIG, ON(GENERATE)),
        CLI_SWITCH_FLAG("--no-kv-cache", &a->no_kv_cache, MODEL),
        CLI_NUM_FLAG("--warmup", &a->warmup, 0, 1, ON(APPENDIX_D)), /* [0, 1): 1 is refused below */
        CLI_NUM_FLAG("--initial-lr", &a->initial_lr, 0, HUGE_VAL, ON(APPENDIX_D)),
        CLI_NUM_FLAG("--min-lr", &a->min_lr, 0, HUGE_VAL, ON(APPENDIX_D)),
        CLI_NUM_FLAG("--clip", &a->clip, 0, HUGE_VAL, ON(APPENDIX_D)),
    };
    const cli_spec spec = {"gpt", commands, flags, (int)(sizeof flags / sizeof *flags), 1, true};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args, usage);
    if (rc) return rc;
    if (args.command < 0 && a->html) { /* gpt --html FILE [flags]: the page of a training run */
        char **with_train = ac_malloc(sizeof(char *) * ((size_t)argc + 2));
        with_train[0] = argv[0], with_train[1] = "train";
        memcpy(with_train + 2, argv + 1, sizeof(char *) * (size_t)argc);
        rc = cli_parse(&spec, argc + 1, with_train, &args, usage);
        free(with_train);
        if (rc) return rc;
    }
    if (args.command < 0) return bad_flags("%s", "give a command: train, generate, tokenize or appendix-d");
    a->command = commands[args.command];
    a->cmd = args.command;
    a->file = args.n_positional ? args.positional[0] : NULL;
    if (a->file && a->cmd != TOKENIZE) return bad_flags("%s takes no input file: --data FILE gives the text", a->command);
    if (!strcmp(special, "allow")) a->special = TOKENIZER_ALLOW_SPECIAL;
    else if (!strcmp(special, "text")) a->special = TOKENIZER_SPECIAL_AS_TEXT;
    else if (!strcmp(special, "raise")) a->special = TOKENIZER_DISALLOW_SPECIAL;
    else return bad_flags("--special takes allow, text or raise, not '%s'", special);
    bool trains_tokenizer = !strncmp(a->tokenizer, "train:", 6);
    if (cli_given(&spec, &args, "--data") && !(TRAINING & ON(a->cmd)) && !trains_tokenizer)
        return bad_flags("--data goes with train and appendix-d (or with --tokenizer train:N, which learns from it), not %s",
                         a->command);
    if (a->gpt2) {
        static const char *const sizes[] = {"--emb-dim", "--heads", "--layers", "--drop", "--qkv-bias", NULL};
        for (int k = 0; sizes[k]; k++)
            if (cli_given(&spec, &args, sizes[k]))
                return bad_flags("%s is not used with --gpt2: the model's sizes come from its config.json", sizes[k]);
    }
    if (a->gpt2 && !cli_given(&spec, &args, "--tokenizer")) { /* a Hugging Face directory carries its tokenizer */
        static char hf[4200];
        struct stat st;
        snprintf(hf, sizeof hf, "%s/vocab.json", a->gpt2);
        if (stat(hf, &st) == 0) a->tokenizer = a->gpt2;
        snprintf(hf, sizeof hf, "%s/encoder.json", a->gpt2);
        if (stat(hf, &st) == 0) a->tokenizer = a->gpt2;
    }
    a->context_given = a->given_context = cli_given(&spec, &args, "--context");
    a->given_emb_dim = cli_given(&spec, &args, "--emb-dim"), a->given_heads = cli_given(&spec, &args, "--heads");
    a->given_layers = cli_given(&spec, &args, "--layers"), a->given_drop = cli_given(&spec, &args, "--drop");
    if (threads) torch_set_num_threads(threads > 256 ? 256 : (int)threads);
    bool train = a->cmd == TRAIN, appd = a->cmd == APPENDIX_D;
    if (a->context < 0) a->context = train || appd ? 256 : 1024;               /* a.context or (256 if train else 1024) */
    if (!a->prompt) a->prompt = train || appd ? "Every effort moves you" : "Hello, I am";
    if (a->sample_tokens < 0) a->sample_tokens = train || appd ? 50 : 6;
    if (isnan(a->lr)) a->lr = appd ? 0.001 : 0.0004;                            /* a.lr if given else (0.001 if appd else 0.0004) */
    if (a->epochs < 0) a->epochs = appd ? 15 : 10;
    if (appd && a->warmup >= 1) {
        char w[32];
        snprintf(w, sizeof w, "%g", a->warmup);
        return bad_flags("--warmup %s is the share of all steps spent warming up: a number from 0 to below 1", w);
    }
    if (appd && a->min_lr > a->lr) {
        fprintf(stderr, "gpt: --min-lr %g is above the peak learning rate --lr %g: the cosine decay goes down to it "
                "(gpt --help lists the flags)\n", a->min_lr, a->lr);
        return 2;
    }
    if (a->eval_iter < 0) a->eval_iter = appd ? 1 : 5;
    ac_set_exact(a->exact);
    return 0;
}

/* The whole of FILE (stdin for NULL or "-"), NUL-terminated; NULL after a message. */
static char *read_input(const char *path, size_t *len) {
    bool std_in = !path || !strcmp(path, "-");
    struct stat st;
    if (!std_in && stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) /* opening one blocks until something writes */
        fprintf(stderr, "gpt: %s is a FIFO: waiting for a writer\n", path);
    char err[1024];
    char *buf = std_in ? ac_read_stream(stdin, "standard input", len, err, sizeof err) : ac_read_file(path, len, err, sizeof err);
    if (!buf) fprintf(stderr, "gpt: %s\n", err);
    return buf;
}

/* --tokenizer DIR, or train:N on --data. */
static Tokenizer *make_tokenizer(const Flags *a) {
    char err[512];
    Tokenizer *tok = NULL;
    if (!strncmp(a->tokenizer, "train:", 6)) {
        char *end;
        errno = 0;
        long long n = strtoll(a->tokenizer + 6, &end, 10);
        if (end == a->tokenizer + 6 || *end || errno || n < 0) {
            fprintf(stderr, "gpt: --tokenizer train:N needs a number of merges N >= 0, not '%s'\n", a->tokenizer + 6);
            return NULL;
        }
        size_t len;
        char *text = read_input(a->data, &len);
        if (!text) return NULL;
        tok = tokenizer_train(text, len, n, err, sizeof err);
        free(text);
        if (tok && tokenizer_n_merges(tok) < n)
            fprintf(stderr, "gpt: %s has room for %lld merges only: the tokenizer has %lld tokens\n", a->data,
                    (long long)tokenizer_n_merges(tok), (long long)tokenizer_n_vocab(tok));
    } else {
        tok = tokenizer_load(a->tokenizer, err, sizeof err);
        if (!tok && strstr(err, "are needed")) { /* say which flag names the directory */
            size_t k = strlen(err);
            snprintf(err + k, sizeof err - k, " (--tokenizer DIR names another)");
        }
    }
    if (!tok) fprintf(stderr, "gpt: %s\n", err);
    else if (a->save_tokenizer && !tokenizer_save(tok, a->save_tokenizer, err, sizeof err)) {
        fprintf(stderr, "gpt: %s\n", err);
        tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

/* ---- gpt tokenize ------------------------------------------------------------------------------ */

/* ids = tokenizer.encode(text, allowed_special={"<|endoftext|>"}); print(" ".join(map(str, ids))) */
static int encode_text(Tokenizer *tok, const Flags *a, const char *text, size_t len) {
    char err[512];
    Tensor *ids = tokenizer_encode(tok, text, len, a->special, err, sizeof err);
    if (!ids) {
        fprintf(stderr, "gpt: %s%s%s\n", a->file ? a->file : "standard input", ": ", err);
        return 1;
    }
    const int64_t *d = ids->data;
    for (int64_t i = 0, n = torch_numel(ids); i < n; i++) printf(i ? " %lld" : "%lld", (long long)d[i]);
    putchar('\n');
    return 0;
}

/* text = tokenizer.decode(ids) */
static int decode_ids(Tokenizer *tok, const Flags *a, const char *in, size_t len) {
    size_t n = 0, cap = 1024;
    int64_t *ids = malloc(sizeof *ids * cap);
    const char *name = a->file ? a->file : "standard input";
    for (size_t i = 0; ids && i < len;) {
        if (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r' || in[i] == ',') { i++; continue; }
        size_t j = i;
        long long v = 0;
        while (j < len && in[j] >= '0' && in[j] <= '9' && v <= (long long)INT32_MAX) v = v * 10 + (in[j++] - '0');
        bool sep = j == len || strchr(" \t\n\r,", in[j]);
        if (j == i || !sep || v > INT32_MAX) {
            size_t k = j;
            while (k < len && !strchr(" \t\n\r,", in[k]) && k - i < 24) k++;
            fprintf(stderr, "gpt: %s: '%.*s' at byte %zu is not a token id (a number from 0 to %lld)\n", name,
                    (int)(k - i + (k < len && !strchr(" \t\n\r,", in[k]))), in + i, i, (long long)tokenizer_n_vocab(tok) - 1);
            free(ids);
            return 1;
        }
        if (n == cap) {
            int64_t *p = realloc(ids, sizeof *ids * (cap *= 2));
            if (!p) free(ids);
            ids = p;
            if (!ids) break;
        }
        ids[n++] = v;
        i = j;
    }
    if (!ids) {
        fprintf(stderr, "gpt: not enough memory for the ids\n");
        return 1;
    }
    char err[512];
    size_t out_len;
    char *text = tokenizer_decode(tok, ids, (int64_t)n, &out_len, err, sizeof err);
    free(ids);
    if (!text) {
        fprintf(stderr, "gpt: %s: %s\n", name, err);
        return 1;
    }
    fwrite(text, 1, out_len, stdout);
    return 0;
}

static int cmd_tokenize(const Flags *a) {
    Tokenizer *tok = make_tokenizer(a);
    if (!tok) return 1;
    size_t len;
    char *in = read_input(a->file, &len);
    int rc = 1;
    if (in) rc = a->decode ? decode_ids(tok, a, in, len) : encode_text(tok, a, in, len);
    free(in);
    tokenizer_free(tok);
    return rc;
}

/* ---- what the two commands share ------------------------------------------------------------------ */

/* print(x) of a Python float: the shortest digits that read back as x; fixed notation for decimal
 * exponents from -4 to 15 (with ".0" when whole), else 1.5e-05 / 1e+16. */
static const char *py_float(double x, char buf[40]) {
    if (isnan(x)) return "nan";
    if (isinf(x)) return x > 0 ? "inf" : "-inf";
    char e[40];
    int p = 1;
    for (; p < 17; p++) { /* the shortest %.{p-1}e that round-trips */
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    char digits[24], *m = e, *o = digits;
    bool neg = *m == '-';
    if (neg) m++;
    for (; *m && *m != 'e'; m++)
        if (*m != '.') *o++ = *m;
    *o = 0;
    int exp10 = atoi(m + 1), nd = (int)strlen(digits);
    char *b = buf;
    if (neg) *b++ = '-';
    if (exp10 < -4 || exp10 >= 16) {
        b += sprintf(b, "%c", digits[0]);
        if (nd > 1) b += sprintf(b, ".%s", digits + 1);
        sprintf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        b += sprintf(b, "0.");
        for (int i = -1; i > exp10; i--) *b++ = '0';
        sprintf(b, "%s", digits);
    } else {
        for (int i = 0; i <= exp10 || i < nd; i++) {
            if (i == exp10 + 1) *b++ = '.';
            *b++ = i < nd ? digits[i] : '0';
        }
        if (nd <= exp10 + 1) b += sprintf(b, ".0");
        *b = 0;
    }
    return buf;
}

/* f"{x:.3f}", nan as Python writes it */
static const char *py_3f(double x, char buf[40]) {
    if (isnan(x)) return "nan";
    snprintf(buf, 40, "%.3f", x);
    return buf;
}

static nn_GPTConfig config(const Flags *a) {
    return (nn_GPTConfig){.vocab_size = 50257, .context_length = a->context, .emb_dim = a->emb_dim,
                          .n_heads = a->heads, .n_layers = a->layers, .drop_rate = a->drop, .qkv_bias = a->qkv_bias};
}

/* config(a); with --load FILE, the config FILE records (read from its header before anything is built),
 * a model flag that says otherwise an error naming both. A file without one (a state_dict saved
 * elsewhere) takes the flags. */
static bool model_config(const Flags *a, nn_GPTConfig *cfg) {
    *cfg = config(a);
    if (!a->load) return true;
    nn_GPTConfig f;
    bool has;
    char err[768];
    if (!nn_GPTModel_config_of(a->load, &f, &has, err, sizeof err)) {
        fprintf(stderr, "gpt: --load %s\n", err);
        return false;
    }
    if (!has) return true;
    const struct { const char *flag, *name; bool given; double mine, file; } k[] = {
        {"--context", "context_length", a->given_context, (double)cfg->context_length, (double)f.context_length},
        {"--emb-dim", "emb_dim", a->given_emb_dim, (double)cfg->emb_dim, (double)f.emb_dim},
        {"--heads", "n_heads", a->given_heads, (double)cfg->n_heads, (double)f.n_heads},
        {"--layers", "n_layers", a->given_layers, (double)cfg->n_layers, (double)f.n_layers},
        {"--drop", "drop_rate", a->given_drop, cfg->drop_rate, f.drop_rate},
        {"--qkv-bias", "qkv_bias", a->qkv_bias, (double)cfg->qkv_bias, (double)f.qkv_bias},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (k[i].given && k[i].mine != k[i].file) {
            fprintf(stderr, "gpt: %s %g contradicts --load %s, whose model has %s %g\n", k[i].flag, k[i].mine, a->load,
                    k[i].name, k[i].file);
            return false;
        }
    *cfg = f;
    return true;
}

static bool check_config(nn_GPTConfig cfg) {
    char err[512];
    if (nn_GPTConfig_check(cfg, err, sizeof err)) return true;
    fprintf(stderr, "gpt: %s\n", err);
    return false;
}

static bool check_output(const char *flag, const char *path) { return cli_check_output("gpt", flag, path); }

/* text_to_token_ids(text, tokenizer): (1, n) int64, NULL after a message */
static Tensor *text_to_token_ids(const char *text, Tokenizer *tok, const char *what) {
    char err[512];
    Tensor *ids = tokenizer_encode(tok, text, strlen(text), TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    if (!ids) {
        fprintf(stderr, "gpt: %s: %s\n", what, err);
        return NULL;
    }
    if (torch_numel(ids) == 0) {
        fprintf(stderr, "gpt: %s is empty: the model needs at least one token to go on from\n", what);
        return NULL;
    }
    return torch_unsqueeze(ids, 0);                                               /* .unsqueeze(0) */
}

/* token_ids_to_text(ids, tokenizer) (arena) */
static char *token_ids_to_text(Tensor *ids, Tokenizer *tok, size_t *len) {
    char err[512];
    Tensor *c = torch_contiguous(ids); /* a contiguous view may start past its storage's first element */
    char *text = tokenizer_decode(tok, (const int64_t *)c->data + c->offset, torch_numel(c), len, err, sizeof err);
    if (!text) ac_error("decode: %s", err);
    return text;
}

/* ---- gpt train: chapter 5 --------------------------------------------------------------------------- */

/* Appendix D's schedule: a linear warmup from initial_lr to the peak, then a cosine decay to min_lr. */
typedef struct { double peak_lr, initial_lr, min_lr; int64_t warmup_steps, total_steps; } Schedule;

/* The learning rate of step global_step (train_model's lines, in their order and in doubles). */
static double schedule_lr(const Schedule *s, int64_t global_step) {
    double lr_increment = (s->peak_lr - s->initial_lr) / (double)s->warmup_steps; /* lr_increment = (peak_lr - initial_lr) / warmup_steps */
    if (global_step < s->warmup_steps)                                           /* if global_step < warmup_steps: */
        return s->initial_lr + (double)global_step * lr_increment;               /*     lr = initial_lr + global_step * lr_increment */
    double progress = (double)(global_step - s->warmup_steps) /                  /* progress = ((global_step - warmup_steps) / */
                      (double)(s->total_steps - s->warmup_steps);                /*     (total_training_steps - warmup_steps)) */
    return s->min_lr + (s->peak_lr - s->min_lr) * 0.5 * (1 + cos(M_PI * progress)); /* lr = min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress)) */
}

typedef struct { const ac_points *c; double tokens_per_epoch; const Schedule *lr; } CurvePlot;

/* plot_losses(epochs_seen, tokens_seen, train_losses, val_losses) */
static bool draw_losses(FILE *f, void *u) {
    const CurvePlot *p = u;
    ac_series s[2] = {{"Training loss", p->c->n, p->c->x, p->c->a},
                      {"Validation loss", p->c->n, p->c->x, p->c->b}};
    ac_plot_opts o = {.title = "GPTModel on the text (chapter 5)", .xlabel = "Epochs", .ylabel = "Loss",
                      .x2label = "Tokens seen", .x2_per_x = p->tokens_per_epoch};
    if (!p->lr) return ac_plot_svg(f, &o, p->c->n ? 2 : 0, s);
    /* appendix D: the learning rate over the steps (the appendix's figure), right of the losses */
    int64_t n = p->lr->total_steps;
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!x || !y) return free(x), free(y), false;
    for (int64_t i = 0; i < n; i++) x[i] = (double)i, y[i] = schedule_lr(p->lr, i); /* track_lrs.append(lr) */
    ac_series lr = {NULL, n, x, y};
    ac_plot_opts lo = {.title = "The learning rate (appendix D)", .xlabel = "Steps", .ylabel = "lr"};
    fputs("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1280\" height=\"400\" viewBox=\"0 0 1280 400\">\n", f);
    bool ok = ac_plot_svg(f, &o, p->c->n ? 2 : 0, s);
    fputs("<g transform=\"translate(640,0)\">\n", f);
    ok = ac_plot_svg(f, &lo, 1, &lr) && ok;
    fputs("</g>\n</svg>\n", f);
    free(x), free(y);
    return ok && !ferror(f);
}

static bool write_losses(const char *path, const ac_points *c, double tokens_per_epoch, const Schedule *lr) {
    CurvePlot p = {c, tokens_per_epoch, lr};
    if (ac_write_file_atomic(path, draw_losses, &p)) return true;
    fprintf(stderr, "gpt: cannot write --plot %s: %s\n", path, strerror(errno));
    return false;
}

/* ---- the reader's page (--html): what the run leaves for it ---- */

typedef struct { char *loss_svg, *attn_svg, *topk_svg; } PagePictures;
static PagePictures page_pics;
static bool page_wanted;

typedef struct { Tensor *w; ac_heatmap_opts o; } Heat;
static bool draw_heat(FILE *f, void *u) { return ac_heatmap_svg(f, ((Heat *)u)->w, &((Heat *)u)->o); }

/* The trained model on the prompt: block 0's heads, and the sampler's top 25 after temperature 1.4 */
static void page_pictures(nn_GPTModel *model, Tokenizer *tok, Tensor *start, const ac_points *curve, double tokens_per_epoch) {
    CurvePlot cp = {curve, tokens_per_epoch, NULL};
    page_pics.loss_svg = ac_draw_to_string(draw_losses, &cp);
    ac_mark m = ac_arena_mark();
    nn_eval(&model->module);
    bool prev = torch_no_grad_enter();
    int64_t t = start->shape[1] < model->cfg.context_length ? start->shape[1] : model->cfg.context_length;
    Tensor *ids = torch_slice(start, 1, 0, t);
    Tensor *logits = nn_GPTModel_forward(model, ids);
    Tensor *w = nn_GPTModel_block(model, 0)->att->last_attn_weights;
    const char **labels = ac_arena_alloc(sizeof(char *) * (size_t)t);
    for (int64_t i = 0; i < t; i++) {
        size_t len;
        labels[i] = token_ids_to_text(torch_slice(ids, 1, i, i + 1), tok, &len);
    }
    int64_t heads = w->shape[1] < 4 ? w->shape[1] : 4;
    Heat h = {torch_slice(torch_select(w, 0, 0), 0, 0, heads), {.title = "trf_blocks[0].att: the first heads' weights",
              .row_labels = labels, .col_labels = labels, .show_values = 0}};
    page_pics.attn_svg = ac_draw_to_string(draw_heat, &h);
    int64_t k = 25 < model->cfg.vocab_size ? 25 : model->cfg.vocab_size;
    torch_return_types top = torch_topk(torch_select(logits, 1, -1), k, -1, true, true); /* top_logits, top_pos = torch.topk(logits, 25) */
    Tensor *probs = torch_softmax(torch_div_scalar(torch_select(top.values, 0, 0), 1.4), -1); /* softmax(top_logits / 1.4) */
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)k);
    for (int64_t i = 0; i < k; i++) {
        size_t len;
        names[i] = token_ids_to_text(torch_slice(torch_select(top.indices, 0, 0), 0, i, i + 1), tok, &len);
    }
    Heat p = {probs, {.title = "the sampler: the next token's top 25 after temperature 1.4", .col_labels = names,
              .show_values = 1}};
    page_pics.topk_svg = ac_draw_to_string(draw_heat, &p);
    torch_no_grad_exit(prev);
    ac_arena_release(m);
}

/* The rows of functions of a source text, one table */
static void code_table(FILE *f, const char *caption, const char *src, const char *src_name, const char *names) {
    ac_page_functions(f, caption, "Python (the book, as gpt.py)", src, src_name, names);
}

static void write_page(FILE *f, const char *out, size_t len) {
    ac_page_begin(f, "The book's GPT: chapters 4 and 5 in Python beside C",
                  "<p>Chapters 4 and 5 of Sebastian Raschka's <i>Build a Large Language Model (From Scratch)</i> as "
                  "<code>../shared/pytorch/gpt.py</code> writes them: the Python on the left, <b>attention.c</b> on the "
                  "right, row for row (each C line carries the Python it does), and what this run printed and drew. The C "
                  "column is <code>nn/models/gpt/gpt.c</code>, <code>nn/blocks/attention.c</code> and <code>examples/gpt.c</code> themselves. "
                  "Made by <code>./build/gpt --html FILE</code>; no script, no network.</p>");
    static const char *ids[] = {"model", "layers", "block", "loss", "train", "sample"};
    static const char *titles[] = {"Chapter 4: GPTModel", "Chapter 4: LayerNorm and GELU",
                                   "Chapters 3-4: attention, feed forward, the transformer block",
                                   "Chapter 5: the loss of a batch and of a loader", "Chapter 5: pretraining",
                                   "Chapter 5: sampling: temperature and top-k"};
    ac_page_toc(f, 6, ids, titles);
    /* the run's output: the two initial losses, the training's lines, the two outputs */
    const char *train_at = out, *sample_at = out + len;
    for (int i = 0; i < 2 && train_at < out + len; i++) train_at = strchr(train_at, '\n') ? strchr(train_at, '\n') + 1 : out + len;
    const char *o = strstr(train_at, "Output text:\n");
    if (o) sample_at = o;
    for (int s = 0; s < 6; s++) {
        ac_page_section_begin(f, ids[s], titles[s]);
        const char *figs[1], *caps[1];
        int nf = 0;
        switch (s) {
        case 0: code_table(f, NULL, gpt_model_source, "nn/models/gpt/gpt.c", "nn_GPTModel_new gpt_forward"); break;
        case 1:
            code_table(f, NULL, gpt_model_source, "nn/models/gpt/gpt.c", "nn_GPTLayerNorm_new nn_GPTLayerNorm_forward nn_GPTGELU_forward");
            break;
        case 2:
            code_table(f, "MultiHeadAttention (chapter 3)", gpt_attention_source, "nn/blocks/attention.c",
                       "nn_MultiHeadAttention_new_ex nn_MultiHeadAttention_forward_cached");
            code_table(f, "FeedForward and TransformerBlock", gpt_model_source, "nn/models/gpt/gpt.c",
                       "nn_FeedForward_new nn_TransformerBlock_new nn_TransformerBlock_forward_cached");
            if (page_pics.attn_svg) figs[nf] = page_pics.attn_svg, caps[nf++] = "The trained model's first block on the prompt";
            break;
        case 3:
            code_table(f, NULL, gpt_lm_source, "nn/models/lm.c", "lm_calc_loss_batch lm_calc_loss_loader lm_evaluate_model");
            ac_page_output(f, out, (size_t)(train_at - out));
            break;
        case 4:
            code_table(f, NULL, gpt_example_source, "examples/gpt.c", "cmd_train");
            ac_page_output(f, train_at, (size_t)(sample_at - train_at));
            if (page_pics.loss_svg) figs[nf] = page_pics.loss_svg, caps[nf++] = "Training and validation loss (the book's figure)";
            break;
        case 5:
            code_table(f, NULL, gpt_lm_source, "nn/models/lm.c", "lm_generate next_logits");
            ac_page_output(f, sample_at, (size_t)(out + len - sample_at));
            if (page_pics.topk_svg) figs[nf] = page_pics.topk_svg, caps[nf++] = "The probabilities the sampler draws the next token from";
            break;
        }
        ac_page_figures(f, nf, figs, caps);
        ac_page_section_end(f);
    }
    ac_page_end(f, "<p>attention.c: same seed, same numbers. With gpt.py's defaults this run prints the book's own chapter 5 "
                   "lines (<code>make chapter5</code> checks them).</p>");
}

/* Where a run stands: what --save writes beside the weights, AdamW and the generator. */
typedef struct {
    int64_t epoch, batches_done, global_step, tokens_seen; /* batches_done: of this epoch's, -1 at its start */
    DataLoaderIter *it;                                   /* this epoch's order, when batches_done >= 0 */
    int64_t train_windows, batch;
    const ac_points *curve;
} Position;

static bool save_run(const char *path, nn_GPTModel *model, optim_Optimizer *opt, const Position *p) {
    ac_mark m = ac_arena_mark();
    char ep[32], bd[32], gs[32], ts[32], tw[32], bt[32], err[512];
    snprintf(ep, sizeof ep, "%lld", (long long)p->epoch);
    snprintf(bd, sizeof bd, "%lld", (long long)p->batches_done);
    snprintf(gs, sizeof gs, "%lld", (long long)p->global_step);
    snprintf(ts, sizeof ts, "%lld", (long long)p->tokens_seen);
    snprintf(tw, sizeof tw, "%lld", (long long)p->train_windows);
    snprintf(bt, sizeof bt, "%lld", (long long)p->batch);
    const char *meta[] = {"epoch", ep, "batches_done", bd, "global_step", gs, "tokens_seen", ts,
                          "train_windows", tw, "batch", bt};
    const char *names[4];
    Tensor *tens[4];
    int n = 0;
    if (p->batches_done >= 0 && p->it && p->it->order)
        names[n] = "loader.order", tens[n++] = torch_tensor_long(p->it->order, SHAPE(p->train_windows));
    int64_t k = p->curve->n;
    if (k > 0) {
        names[n] = "curve.epochs", tens[n++] = torch_tensor_double(p->curve->x, SHAPE(k));
        names[n] = "curve.train", tens[n++] = torch_tensor_double(p->curve->a, SHAPE(k));
        names[n] = "curve.val", tens[n++] = torch_tensor_double(p->curve->b, SHAPE(k));
    }
    longrun_save_begin(path);
    bool ok = nn_GPTModel_save(path, model, opt, (nn_TensorList){n, names, tens}, 6, meta, err, sizeof err);
    longrun_save_end();
    if (!ok) fprintf(stderr, "gpt: --save: %s\n", err);
    ac_arena_release(m);
    return ok;
}

static bool meta_int(const safetensors_File *f, const char *key, int64_t min, int64_t *out, const char *path) {
    const char *v = safetensors_meta(f, key);
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < min) {
        fprintf(stderr, "gpt: --load %s: the metadata's \"%s\" is %s (not a checkpoint of gpt train --save?)\n", path, key,
                v ? "not a whole number" : "missing");
        return false;
    }
    *out = x;
    return true;
}

/* --load: the weights, AdamW, the generator and the position; false after a message */
static bool load_run(const char *path, nn_GPTModel *model, optim_Optimizer *opt, Position *p, DataLoaderIter *it,
                     ac_points *curve) {
    char err[768];
    safetensors_File f;
    if (!nn_GPTModel_load(path, model, opt, &f, err, sizeof err)) {
        fprintf(stderr, "gpt: --load %s\n", err);
        return false;
    }
    int64_t tw, bt;
    if (!meta_int(&f, "epoch", 0, &p->epoch, path) || !meta_int(&f, "batches_done", -1, &p->batches_done, path) ||
        !meta_int(&f, "global_step", -1, &p->global_step, path) || !meta_int(&f, "tokens_seen", 0, &p->tokens_seen, path) ||
        !meta_int(&f, "train_windows", 0, &tw, path) || !meta_int(&f, "batch", 1, &bt, path))
        return false;
    if (tw != p->train_windows || bt != p->batch) {
        fprintf(stderr, "gpt: --load %s: it was trained on %lld windows in batches of %lld; this run has %lld windows "
                "in batches of %lld (other --data, --train-ratio, --context or --batch)\n", path, (long long)tw,
                (long long)bt, (long long)p->train_windows, (long long)p->batch);
        return false;
    }
    if (p->batches_done >= 0) { /* the epoch's order, to go on with it */
        Tensor *order = safetensors_get(&f, "loader.order");
        if (!order || order->dtype != AC_INT64 || order->ndim != 1 || order->shape[0] != tw) {
            fprintf(stderr, "gpt: --load %s: \"loader.order\" is missing or not %lld int64 indices\n", path, (long long)tw);
            return false;
        }
        it->order = ac_malloc(sizeof(int64_t) * (size_t)(tw ? tw : 1));
        const int64_t *o = order->data;
        for (int64_t i = 0; i < tw; i++) {
            if (o[i] < 0 || o[i] >= tw) {
                free(it->order);
                it->order = NULL;
                fprintf(stderr, "gpt: --load %s: \"loader.order\" has index %lld, out of 0..%lld\n", path, (long long)o[i],
                        (long long)tw - 1);
                return false;
            }
            it->order[i] = o[i];
        }
        it->started = true;
        it->next = p->batches_done;
    }
    Tensor *ce = safetensors_get(&f, "curve.epochs"), *ct = safetensors_get(&f, "curve.train"),
           *cv = safetensors_get(&f, "curve.val");
    if (ce && ct && cv && ce->dtype == AC_FLOAT64 && ct->dtype == AC_FLOAT64 && cv->dtype == AC_FLOAT64 &&
        ce->ndim == 1 && torch_numel(ct) == torch_numel(ce) && torch_numel(cv) == torch_numel(ce))
        for (int64_t i = 0; i < torch_numel(ce); i++)
            ac_points_add(curve, ((double *)ce->data)[i], ((double *)ct->data)[i], ((double *)cv->data)[i]);
    return true;
}

/* open(path, encoding="utf-8").read(): Python's text mode reads "\r\n" and a lone "\r" as "\n"
 * (universal newlines), so the windows, the split and every loss are those of gpt.py. */
static size_t universal_newlines(char *text, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            text[o++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            text[o++] = text[i];
        }
    }
    text[o] = 0;
    return o;
}

/* The byte where the text's first n characters (code points, as Python's str counts) end. */
static size_t char_offset(const char *text, size_t len, int64_t n) {
    size_t i = 0;
    for (int64_t c = 0; i < len && c < n; c++)
        do i++;
        while (i < len && ((unsigned char)text[i] & 0xC0) == 0x80);
    return i;
}

static int64_t count_chars(const char *text, size_t len) {
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

/* generate_and_print_sample(model, tokenizer, start_context, max_new_tokens) */
static void generate_and_print_sample(nn_GPTModel *model, Tokenizer *tok, Tensor *start, int64_t max_new_tokens,
                                      bool kv_cache) {
    ac_mark m = ac_arena_mark();
    nn_eval(&model->module);                                                      /* model.eval() */
    Tensor *ids = gpt_generate_ex(model, start, max_new_tokens,                  /* ids = generate_text_simple(model, */
                                  model->pos_emb->weight->shape[0], 0.0, 0, -1, kv_cache, NULL, NULL); /* ..., model.pos_emb.weight.shape[0]) */
    size_t len;
    char *text = token_ids_to_text(ids, tok, &len);
    for (size_t i = 0; i < len; i++)                                              /* .replace("\n", " ") */
        if (text[i] == '\n') text[i] = ' ';
    fwrite(text, 1, len, stdout);                                                 /* print(..., flush=True) */
    putchar('\n');
    longrun_flush("gpt");
    nn_train(&model->module, true);                                               /* model.train() */
    ac_arena_release(m);
}

typedef struct { bool on; double t0; int64_t steps_total, step0; } Live;

static void live_clear(const Live *l) {
    if (l->on) fputs("\r\033[K", stderr);
}

static void live_show(const Live *l, int64_t epoch, int64_t epochs, int64_t step, int64_t tokens_per_step) {
    if (!l->on) return;
    double el = cli_now_seconds() - l->t0, done = (double)(step + 1 - l->step0); /* steps done in this run */
    double left = done > 0 ? el / done * (double)(l->steps_total - step) : 0;
    fprintf(stderr, "\r\033[Kepoch %lld/%lld  step %lld/%lld  %.0f tokens/s  %.0f s left", (long long)epoch + 1,
            (long long)epochs, (long long)step + 1, (long long)l->steps_total,
            done * (double)tokens_per_step / (el > 0 ? el : 1e-9), left);
}

/* find_highest_gradient(model): the largest element of any .grad */
static Tensor *find_highest_gradient(nn_TensorList params) {
    Tensor *max_grad = NULL;                                                      /* max_grad = None */
    for (int k = 0; k < params.n; k++) {                                          /* for param in model.parameters(): */
        if (!params.tensors[k]->grad) continue;                                   /*     if param.grad is not None: */
        Tensor *g = torch_max(torch_flatten(params.tensors[k]->grad, 0, -1));     /*         g = param.grad.data.flatten().max() */
        if (!max_grad || torch_item(g) > torch_item(max_grad)) max_grad = g;      /*         if max_grad is None or g > max_grad: max_grad = g */
    }
    return max_grad;
}

/* Appendix D's cells between the loaders and train_model: the two learning-rate plots walk the train
 * loader (each walk's iter() draws), then a new model's gradients on the last batch, before and after
 * clip_grad_norm_. model is the first GPTModel(cfg), untouched: the same seed makes the same weights,
 * so the generator is set to where that construction leaves it (after_init). */
static void appendix_d_gradients(nn_GPTModel *model, const DataLoader *train_loader, const Flags *a,
                                 torch_Generator after_init) {
    ac_mark m = ac_arena_mark();
    Tensor *input_batch = NULL, *target_batch = NULL;
    for (int plot = 0; plot < 2; plot++)                                          /* (the two learning-rate plots' loops) */
        for (int64_t epoch = 0; epoch < a->epochs; epoch++) {                     /* for epoch in range(n_epochs): */
            DataLoaderIter it = DataLoader_iter(train_loader);                    /*     for input_batch, target_batch in train_loader: */
            while (DataLoaderIter_next(&it, &input_batch, &target_batch)) {}      /*         pass */
            DataLoaderIter_free(&it);
        }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(123) */
    torch_default_generator = after_init;                                         /* model = GPTModel(GPT_CONFIG_124M) */
    nn_train(&model->module, true);                                               /* (a new module is in training mode) */
    torch_backward(gpt_calc_loss_batch(input_batch, target_batch, model), NULL);  /* loss = calc_loss_batch(...); loss.backward() */
    nn_TensorList params = nn_named_parameters(&model->module);
    bool prev = torch_no_grad_enter();
    torch_print(find_highest_gradient(params));                                   /* print(find_highest_gradient(model)) */
    nn_clip_grad_norm_(params, a->clip, 2.0);                                     /* torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0) */
    torch_print(find_highest_gradient(params));                                   /* print(find_highest_gradient(model)) */
    torch_no_grad_exit(prev);
    fflush(stdout);
    for (int k = 0; k < params.n; k++) ac_free(torch_grad_take(params.tensors[k])); /* (C: the next GPTModel(cfg) has no .grad) */
    ac_arena_release(m);
}

/* Chapter 5's train_model_simple, and with appendix-d appendix D's train_model: one loop, the
 * appendix's lines (the schedule, the clipping) where a->cmd says so. */
static int cmd_train(const Flags *a) { // def cmd_train(a): (C: and cmd_appendix_d, the same loop)
    bool appd = a->cmd == APPENDIX_D;
    nn_GPTConfig cfg;                                                             /* cfg = config(a) */
    if (!model_config(a, &cfg) || !check_config(cfg) || !check_output("--save", a->save) || !check_output("--plot", a->plot))
        return 1;
    FILE *log = NULL; /* (C: written line by line, opened before any work: a bad path fails now) */
    if (a->log && !(log = fopen(a->log, a->load ? "a" : "w"))) {                 /* log = open(a.log, "w") */
        fprintf(stderr, "gpt: cannot open --log %s: %s\n", a->log, strerror(errno));
        return 1;
    }
    Tokenizer *tok = make_tokenizer(a);                                           /* tokenizer = GPT2Tokenizer(a.tokenizer) */
    size_t len;
    char *text = tok ? read_input(a->data, &len) : NULL;                          /* with open(a.data, encoding="utf-8") as f: */
    if (!text) {
        if (log) fclose(log);
        tokenizer_free(tok);
        return 1;
    }
    len = universal_newlines(text, len);                                          /*     text = f.read() */
    int rc = 1;
    char err[768], fb[40];
    nn_GPTModel *model = NULL;
    optim_Optimizer *opt = NULL;
    ac_points curve = {0}; /* x: epochs seen, a: train loss, b: val loss */
    DataLoader train_loader = {0}, val_loader = {0};
    DataLoaderIter it = {0};
    Tensor *start = text_to_token_ids(a->prompt, tok, "--prompt");
    start = start ? ac_persist(start) : NULL;
    if (!start) goto done;
    /* what the chapter's cells do, in their order (each manual_seed is the book's) */
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    model = nn_GPTModel_new(cfg);                                                 /* model = GPTModel(cfg) */
    torch_Generator after_init = torch_default_generator;
    nn_eval(&model->module);                                                      /* model.eval() */
    size_t split = char_offset(text, len, (int64_t)(a->train_ratio * (double)count_chars(text, len))); /* split = int(a.train_ratio * len(text)) */
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    train_loader = create_dataloader_v1(text, split, tok, a->batch, a->context,   /* train_loader = create_dataloader_v1(text[:split], */
                                        a->context, true, true, 0, err, sizeof err); /* ..., shuffle=True, drop_last=True) */
    if (!train_loader.dataset) {
        fprintf(stderr, "gpt: --data %s: %s\n", a->data, err);
        goto done;
    }
    val_loader = create_dataloader_v1(text + split, len - split, tok, a->batch,   /* val_loader = create_dataloader_v1(text[split:], */
                                      a->context, a->context, false, false, 0, err, sizeof err); /* shuffle=False, drop_last=False */
    if (!val_loader.dataset) {
        fprintf(stderr, "gpt: --data %s: %s\n", a->data, err);
        goto done;
    }
    int64_t n_train = DataLoader_len(&train_loader);
    if (n_train == 0) {
        fprintf(stderr, "gpt: the training part of %s (%lld tokens) holds no batch of %lld windows of %lld+1 tokens: "
                "the loader yields nothing (a longer text, a smaller --context or --batch, or a larger --train-ratio)\n",
                a->data, (long long)train_loader.dataset->n_ids, (long long)a->batch, (long long)a->context);
        goto done;
    }
    if (DataLoader_len(&val_loader) == 0)
        fprintf(stderr, "gpt: warning: the validation part of %s (%lld tokens) is shorter than one window of %lld+1 tokens: "
                "its loss is nan, as in the book's code\n", a->data, (long long)val_loader.dataset->n_ids, (long long)a->context);
    Schedule sched = {.peak_lr = a->lr, .initial_lr = a->initial_lr, .min_lr = a->min_lr,  /* peak_lr = optimizer.param_groups[0]["lr"] */
                      .total_steps = n_train * a->epochs};                        /* total_training_steps = len(train_loader) * n_epochs */
    sched.warmup_steps = (int64_t)(a->warmup * (double)sched.total_steps);        /* warmup_steps = int(0.2 * total_steps) */
    if (appd && sched.warmup_steps == 0) {
        fprintf(stderr, "gpt: --warmup %g of %lld steps (%lld batches x %lld epochs) is no whole step: train_model divides "
                "by warmup_steps; give a larger --warmup or more --epochs\n", a->warmup, (long long)sched.total_steps,
                (long long)n_train, (long long)a->epochs);
        rc = 2;
        goto done;
    }
    Position pos = {.epoch = 0, .batches_done = -1, .global_step = -1, .tokens_seen = 0, .it = &it,
                    .train_windows = train_loader.dataset->n, .batch = a->batch, .curve = &curve};
    if (appd && !a->load) {
        printf("%lld\n", (long long)sched.warmup_steps);                          /* print(warmup_steps) */
        appendix_d_gradients(model, &train_loader, a, after_init);
    } else if (!a->load) {
        torch_manual_seed((uint64_t)a->seed);                                     /* torch.manual_seed(a.seed) */
        bool prev = torch_no_grad_enter();                                        /* with torch.no_grad(): */
        printf("Training loss: %s\n", py_float(gpt_calc_loss_loader(&train_loader, model, -1), fb));
        printf("Validation loss: %s\n", py_float(gpt_calc_loss_loader(&val_loader, model, -1), fb));
        fflush(stdout);
        torch_no_grad_exit(prev);
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    torch_default_generator = after_init; /* (C: model = GPTModel(cfg) after the same seed made the same weights, */
    nn_train(&model->module, true);       /* still untouched: the generator goes where that left it) */
    opt = optim_AdamW(nn_named_parameters(&model->module), a->lr, 0.9, 0.999, 1e-8, a->weight_decay, false);
    if (a->load && !load_run(a->load, model, opt, &pos, &it, &curve)) goto done; /* AdamW(model.parameters(), lr, weight_decay) */
    longrun_catch_signals("gpt");
    double tokens_per_epoch = (double)(n_train * a->batch * a->context);
    Live live = {isatty(2) && !getenv("AC_NO_LIVE"), cli_now_seconds(), n_train * a->epochs, pos.global_step + 1};
    double t0 = cli_now_seconds();                                                /* t0 = time.time() */
    int64_t tokens_seen = pos.tokens_seen, global_step = pos.global_step;        /* tokens_seen, global_step = 0, -1 */
    rc = 0;
    for (int64_t epoch = pos.epoch; epoch < a->epochs && !longrun_signal; epoch++) { /* for epoch in range(num_epochs): */
        nn_train(&model->module, true);                                           /*     model.train() */
        if (!(epoch == pos.epoch && pos.batches_done >= 0)) it = DataLoader_iter(&train_loader);
        it.loader = &train_loader;
        Tensor *input_batch, *target_batch;
        for (;;) {                                                                /*     for input_batch, target_batch in train_loader: */
            if (longrun_signal) break;
            ac_mark m = ac_arena_mark();
            if (!DataLoaderIter_next(&it, &input_batch, &target_batch)) break;
            optim_zero_grad(opt);                                                 /*         optimizer.zero_grad() */
            if (appd) opt->lr = schedule_lr(&sched, global_step + 1);             /*         global_step += 1; lr = ...; param_group["lr"] = lr */
            Tensor *loss = gpt_calc_loss_batch(input_batch, target_batch, model); /*         loss = calc_loss_batch(...) */
            torch_backward(loss, NULL);                                           /*         loss.backward() */
            if (appd && global_step + 1 > sched.warmup_steps)                     /*         if global_step > warmup_steps: */
                nn_clip_grad_norm_(nn_named_parameters(&model->module), a->clip, 2.0); /*     clip_grad_norm_(model.parameters(), max_norm=1.0) */
            optim_step(opt);                                                      /*         optimizer.step() */
            tokens_seen += torch_numel(input_batch);                              /*         tokens_seen += input_batch.numel() */
            global_step += 1;                                                     /*         global_step += 1 */
            double l = torch_item(loss);
            char lb[40];
            if (log && appd) fprintf(log, "step %lld lr %s loss ", (long long)global_step, py_float(opt->lr, lb));
            else if (log) fprintf(log, "step %lld loss ", (long long)global_step);
            if (log) fprintf(log, "%s\n", isnan(l) ? "nan" : (snprintf(fb, 40, "%.6f", l), fb));
            if (global_step % a->eval_freq == 0) {                                /*         if global_step % eval_freq == 0: */
                double train_loss, val_loss;
                gpt_evaluate_model(model, &train_loader, &val_loader, a->eval_iter, &train_loss, &val_loss);
                char b1[40], b2[40];
                live_clear(&live);
                printf("Ep %lld (%s %06lld): Train loss %s, Val loss %s\n", (long long)epoch + 1, appd ? "Iter" : "Step", (long long)global_step,
                       py_3f(train_loss, b1), py_3f(val_loss, b2));
                longrun_flush("gpt");
                ac_points_add(&curve, (double)tokens_seen / tokens_per_epoch, train_loss, val_loss);
                if (a->plot && !write_losses(a->plot, &curve, tokens_per_epoch, appd ? &sched : NULL)) rc = 1;
            }
            ac_arena_release(m);
            live_show(&live, epoch, a->epochs, global_step, a->batch * a->context);
            longrun_point("step", global_step);
        }
        pos.epoch = epoch, pos.batches_done = it.next, pos.global_step = global_step, pos.tokens_seen = tokens_seen;
        if (longrun_signal && !it.done) break; /* (C: stopped inside the epoch: the save records where) */
        live_clear(&live);
        generate_and_print_sample(model, tok, start, a->sample_tokens, !a->no_kv_cache); /* generate_and_print_sample(...) */
        DataLoaderIter_free(&it);
        pos.epoch = epoch + 1, pos.batches_done = -1; /* (C: the next epoch, from its start) */
    }
    live_clear(&live);
    if (log && !ac_close_output(log)) {           /* log.close() */
        fprintf(stderr, "gpt: writing --log %s failed: %s\n", a->log, strerror(errno));
        rc = 1;
    }
    log = NULL;
    if (a->plot && curve.n && !write_losses(a->plot, &curve, tokens_per_epoch, appd ? &sched : NULL)) rc = 1;
    if (longrun_signal) {
        bool saved = a->save && save_run(a->save, model, opt, &pos);
        char after[48];
        snprintf(after, sizeof after, "step %lld", (long long)global_step);
        rc = longrun_stopped("gpt", after, a->save, saved);
        goto done;
    }
    torch_Generator at_end = torch_default_generator; /* (C: where a --load of the --save goes on from) */
    if (page_wanted) page_pictures(model, tok, start, &curve, tokens_per_epoch);
    char np[32];
    fprintf(stderr, "(training took %.1f s; the model has %s parameters)\n", cli_now_seconds() - t0, /* print(f"(training took ...)", file=sys.stderr) */
            cli_thousands(nn_num_parameters(&model->module), np));
    if (appd) goto save;
    nn_eval(&model->module);                                                      /* model.eval() */
    size_t tl;
    Tensor *ids = gpt_generate_ex(model, start, 25, cfg.context_length, 0.0, 0, -1, !a->no_kv_cache, NULL, NULL); /* generate_text_simple(model, ..., 25, ctx) */
    printf("Output text:\n %s\n", token_ids_to_text(ids, tok, &tl));              /* print("Output text:\n", token_ids_to_text(ids, tokenizer)) */
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    ids = gpt_generate_ex(model, start, 15, cfg.context_length, 1.4, 25, -1, !a->no_kv_cache, NULL, NULL); /* ids = generate(model, ..., 15, ctx, temperature=1.4, top_k=25) */
    printf("Output text:\n %s\n", token_ids_to_text(ids, tok, &tl));
save:
    if (a->save) {                                                                /* if a.save: torch.save(model.state_dict(), a.save) */
        torch_Generator now = torch_default_generator;
        torch_default_generator = at_end; /* (C: the state after the last epoch, not after the samples) */
        if (!save_run(a->save, model, opt, &pos)) rc = 1;
        torch_default_generator = now;
    }
done:
    if (log) fclose(log);
    DataLoaderIter_free(&it);
    ac_points_free(&curve);
    if (train_loader.dataset) GPTDatasetV1_free((GPTDatasetV1 *)train_loader.dataset);
    if (val_loader.dataset) GPTDatasetV1_free((GPTDatasetV1 *)val_loader.dataset);
    optim_free(opt);
    if (model) nn_free(&model->module);
    if (start) ac_free(start);
    free(text);
    tokenizer_free(tok);
    return rc;
}

/* ---- gpt generate: chapter 4's greedy line, chapter 5's sampler -------------------------------------- */

/* Prints the text as tokens come: what decode gives so far, less a trailing U+FFFD that the next token
 * may still complete into a character; the rest when it ends. */
typedef struct { Tokenizer *tok; int64_t *ids, n, cap; size_t printed; } Stream;

static void stream_print(Stream *s, bool final) {
    ac_mark m = ac_arena_mark();
    char err[256];
    size_t len;
    char *text = tokenizer_decode(s->tok, s->ids, s->n, &len, err, sizeof err);
    if (!text) ac_error("decode: %s", err);
    size_t stable = len;
    if (!final && len >= 3 && !memcmp(text + len - 3, "\xEF\xBF\xBD", 3)) stable = len - 3;
    if (stable > s->printed) {
        fwrite(text + s->printed, 1, stable - s->printed, stdout);
        s->printed = stable;
    }
    fflush(stdout);
    ac_arena_release(m);
}

static bool on_token(int64_t token, void *ctx) {
    Stream *s = ctx;
    if (s->n == s->cap) s->ids = ac_realloc(s->ids, ac_size_mul(sizeof(int64_t), (size_t)(s->cap *= 2)));
    s->ids[s->n++] = token;
    stream_print(s, false);
    return !longrun_signal;
}

static int cmd_generate(const Flags *a) {
    nn_GPTConfig cfg;
    if (!a->gpt2 && (!model_config(a, &cfg) || !check_config(cfg))) return 1;
    if (a->gpt2 && a->load) {
        fprintf(stderr, "gpt: --gpt2 and --load both give the weights: one of them\n");
        return 1;
    }
    Tokenizer *tok = make_tokenizer(a);                                           /* tokenizer = GPT2Tokenizer(a.tokenizer) */
    if (!tok) return 1;
    int rc = 1;
    char *prompt_in = NULL;
    const char *prompt = a->prompt;
    if (!strcmp(prompt, "-")) { /* --prompt -: the prompt from stdin */
        size_t len;
        prompt_in = read_input(NULL, &len);
        if (!prompt_in) goto out;
        if (strlen(prompt_in) != len) {
            fprintf(stderr, "gpt: the prompt on standard input holds a NUL byte\n");
            goto out;
        }
        if (len && prompt_in[len - 1] == '\n') prompt_in[--len] = 0; /* echo's newline is not part of the prompt */
        if (len && prompt_in[len - 1] == '\r') prompt_in[--len] = 0;
        prompt = prompt_in;
    }
    torch_manual_seed((uint64_t)a->seed);                                         /* torch.manual_seed(a.seed) */
    int64_t context = a->gpt2 ? a->context : cfg.context_length; /* a --load file's, when it records one */
    nn_GPTModel *model;
    if (a->gpt2) {                                                                /* model = GPTModel(cfg); load_weights_into_gpt(model, params) */
        char err[768];
        if (!(model = nn_GPTModel_from_gpt2(a->gpt2, err, sizeof err))) {
            fprintf(stderr, "gpt: --gpt2 %s: %s\n", a->gpt2, err);
            goto out;
        }
        if (!a->context_given) context = model->cfg.context_length;
        if (context > model->cfg.context_length) {
            fprintf(stderr, "gpt: --context %lld is larger than the model's context_length (%lld, from %s/config.json)\n",
                    (long long)context, (long long)model->cfg.context_length, a->gpt2);
            nn_free(&model->module);
            goto out;
        }
    } else {
        model = nn_GPTModel_new(cfg);                                             /* model = GPTModel(config(a)) */
    }
    if (a->load) {                                                                /* if a.load: model.load_state_dict(torch.load(a.load)) */
        char err[768];
        safetensors_File f;
        ac_mark m = ac_arena_mark();
        bool ok = nn_GPTModel_load(a->load, model, NULL, &f, err, sizeof err);
        ac_arena_release(m);
        if (!ok) {
            fprintf(stderr, "gpt: --load %s\n", err);
            nn_free(&model->module);
            goto out;
        }
    }
    nn_eval(&model->module);                                                      /* model.eval() */
    if (a->top_k > model->cfg.vocab_size) { /* (C: refused before the first token, as torch.topk would fail at it) */
        fprintf(stderr, "gpt: --top-k: top_k (%lld) is larger than the vocabulary (%lld): selected index k out of range "
                "(give at most %lld)\n", a->top_k, (long long)model->cfg.vocab_size, (long long)model->cfg.vocab_size);
        nn_free(&model->module);
        goto out;
    }
    Tensor *idx = text_to_token_ids(prompt, tok, "--prompt");                    /* idx = text_to_token_ids(a.prompt, tokenizer) */
    if (idx) {
        int64_t n0 = idx->shape[1];
        Stream s = {tok, ac_malloc(sizeof(int64_t) * (size_t)n0), 0, n0, 0}; /* grows as tokens come */
        Tensor *ci = torch_contiguous(idx);
        memcpy(s.ids, (const int64_t *)ci->data + ci->offset, sizeof(int64_t) * (size_t)n0);
        s.n = n0;
        longrun_catch_signals("gpt");
        longrun_unit("gpt", "token");
        fputs("Output text: ", stdout);                                           /* print("Output text:", token_ids_to_text(ids, tokenizer)) */
        stream_print(&s, false);
        if (a->temperature == 0 && a->top_k < 0 && a->eos_id < 0)                 /* if a.temperature == 0 and a.top_k is None and a.eos_id is None: */
            gpt_generate_ex(model, idx, a->sample_tokens, context, 0.0, 0, -1, !a->no_kv_cache, on_token, &s); /* generate_text_simple */
        else {
            torch_manual_seed((uint64_t)a->seed);                                 /*     torch.manual_seed(a.seed) */
            gpt_generate_ex(model, idx, a->sample_tokens, context, a->temperature, a->top_k, a->eos_id, !a->no_kv_cache,
                            on_token, &s);
        }
        stream_print(&s, true);
        putchar('\n');
        free(s.ids);
        rc = longrun_signal ? 128 + (int)longrun_signal : 0;
        if (longrun_signal) fprintf(stderr, "gpt: stopped by signal %d after %lld tokens\n", (int)longrun_signal, (long long)(s.n - n0));
    }
    nn_free(&model->module);
out:
    free(prompt_in);
    tokenizer_free(tok);
    return rc;
}

/* gpt train --html FILE: the run with stdout going to a temporary file, so that the page can show it,
 * then printed as usual, then the page. */
static int train_for_page(void *flags) {
    page_wanted = true;
    return cmd_train(flags);
}

static int train_with_page(const Flags *a) {
    int rc = ac_page_of_run("gpt", a->html, train_for_page, (void *)a, write_page);
    free(page_pics.loss_svg), free(page_pics.attn_svg), free(page_pics.topk_svg);
    return rc;
}

static void on_error(ac_error_kind kind, const char *msg, void *user) {
    fflush(stdout);
    fprintf(stderr, "gpt: %s: %s\n", ac_error_kind_name(kind), msg);
    exit(1);
}

int main(int argc, char **argv) {
    ac_set_error_handler(on_error, NULL);
    Flags a;
    int rc = parse_flags(argc, argv, &a);
    if (rc) return rc;
    longrun_show_progress(); /* a live line for the library's long loops, on a terminal */
    if (a.cmd == TOKENIZE) rc = cmd_tokenize(&a);
    else if (a.cmd == TRAIN && a.html) rc = train_with_page(&a);
    else if (a.cmd == TRAIN) rc = cmd_train(&a);
    else if (a.cmd == GENERATE) rc = cmd_generate(&a);
    else rc = cmd_train(&a); /* appendix-d */
    ac_shutdown();
    return ac_finish_output("gpt", rc); /* output that could not be written is an error, as in coreutils */
}
