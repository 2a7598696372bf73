/* Train the toy next-token attention model of ../shared/pytorch/toy_lm.py, in C.
 *
 * Same flags, meanings and defaults as toy_lm.py (--data --steps --batch
 * --context --dim --heads --lr --seed), and for the same flags the same loss
 * at every step, because the generator, the initialisers, randint, the ops and
 * Adam all follow PyTorch. Plus:
 *   --log FILE          one "step N loss X" line per step (toy_lm.py's format)
 *   --save FILE         checkpoint (safetensors: model, optimizer, step, RNG) at the end
 *                       or on Ctrl-C; --load FILE resumes from one
 *   --sample N          generate N characters after training (--prompt, --temperature, --top-k)
 *   --plot FILE.svg     the loss curve, rewritten every --plot-every steps while it trains
 *   --attention-svg F   the trained model's attention over the --prompt characters, per head
 * Without --data it trains on a short text built into the program (1500
 * steps unless --steps is given) and prints a sample. On a terminal it shows a live progress line; piped, it prints
 * exactly the lines toy_lm.py prints. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#if defined(_WIN32)
#include <io.h>
#define isatty _isatty
#define fileno _fileno
#else
#include <unistd.h>
#endif

#include "nn.h"
#include "cli.h"
#include "longrun.h"
#include "extend.h"
#include "optim.h"
#include "safetensors.h"
#include "tensor.h"
#include "toy_lm.h"
#include "viz.h"

/* Written for attention.c (not from any other work): the built-in training text. */
static const char builtin_text[] =
    "Attention lets every word look at every other word and decide what matters.\n"
    "A query asks a question, a key answers it, and a value is what gets passed on.\n"
    "The scores of queries against keys become weights after a softmax, and the\n"
    "weights mix the values into a context vector for each word of the sentence.\n"
    "In a causal model a word may only look back, never ahead: the scores of the\n"
    "future are set to minus infinity before the softmax, so their weights are zero.\n"
    "Many heads look in many ways at once, and their context vectors are joined\n"
    "side by side, then mixed again by one more linear layer.\n"
    "A small model learns to guess the next letter of a text. At first every\n"
    "letter seems as likely as any other, and the loss is high. Step by step the\n"
    "gradients nudge the weights, the guesses grow sharper, and the loss falls.\n"
    "Read the numbers as they change: the same seed gives the same numbers in C\n"
    "as in Python, digit for digit, because both draw the same random values in\n"
    "the same order and add them up the same way.\n"
    "Life is short, eat dessert first, and then write the attention layer by hand.\n";

typedef struct {
    const char *data, *log, *save, *load, *prompt, *plot, *attention_svg;
    bool fused; /* --attention fused */
    long long steps, batch, context, dim, heads, sample, top_k, plot_every, save_every;
    double lr, temperature;
    unsigned long long seed;
    bool sample_given, steps_given, exact;
} Args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: train [flags]   Train the toy attention model of ../shared/pytorch/toy_lm.py, in C.\n"
            "The same flags and defaults as toy_lm.py, and for the same flags the same loss at every step:\n"
            "  --data FILE        the training text (UTF-8); default: a short built-in text, 1500 steps\n"
            "  --steps N          training steps (default 200; 1500 on the built-in text);\n"
            "                     after --load, N more steps on top of the checkpoint's\n"
            "  --batch N          sequences per step (default 16)\n"
            "  --context N        characters per sequence, the causal mask's size (default 32)\n"
            "  --dim N            model width d_model (default 64)\n"
            "  --heads N          attention heads; must divide --dim (default 4)\n"
            "  --lr X             Adam's learning rate (default 1e-3)\n"
            "  --seed N           torch.manual_seed (default 123)\n"
            "attention.c's own:\n"
            "  --exact            exact math: every sum in PyTorch's order, the loss within 1e-6 of toy_lm.py's,\n"
            "                     the last printed digit (default: fast math, FMA kernels, within 1e-4 of it)\n"
            "  --threads N        threads inside ops (default: the cores this process may use, or OMP_NUM_THREADS);\n"
            "                     the numbers are the same at any count\n"
            "  --attention KIND   explicit (default: toy_lm.py's masked softmax, step for step) or fused\n"
            "                     (scaled_dot_product_attention: no (T, T) matrices, for long contexts)\n"
            "  --log FILE         one \"step N loss X\" line per step\n"
            "  --save FILE        save model, Adam state, step and generator at the end, on Ctrl-C, SIGTERM,\n"
            "                     SIGHUP or an error (always a whole step); the path is checked before training\n"
            "  --save-every N     also save every N steps (default 0: only at the end)\n"
            "  --load FILE        resume from a --save file: the following steps equal an uninterrupted run\n"
            "  --sample N         after training, generate N characters (default 0; 300 on the built-in text)\n"
            "  --prompt TEXT      what the sample continues from (default \"A\"); characters not in the text are skipped\n"
            "  --temperature X    divides the logits before the softmax; < 1 is bolder, > 1 more random (default 1)\n"
            "  --top-k K          sample only among the K likeliest characters; 0 means all (default 0)\n"
            "  --plot FILE.svg    the loss curve, rewritten every --plot-every steps (default 25), so it can be watched\n"
            "  --attention-svg F  after training, the attention of each head over the --prompt characters (SVG)\n"
            "examples:\n"
            "  train                                         the demo: built-in text, then a sample\n"
            "  train --data ../shared/data/the-verdict.txt --steps 200 --exact    = python3 toy_lm.py, step for step\n"
            "  train --steps 500 --plot loss.svg --attention-svg attn.svg --prompt \"Attention lets\" --sample 200\n");
}

/* The flags, as toy_lm.py's argparse has them, and what each one may be. */
static bool parse_args(int argc, char **argv, Args *a) {
    *a = (Args){.steps = 200, .batch = 16, .context = 32, .dim = 64, .heads = 4, .lr = 1e-3, .seed = 123,
                .temperature = 1.0, .top_k = 0, .prompt = NULL, .plot_every = 25};
    const char *attention = "explicit", *seed = NULL;
    long long threads = 0;
    const cli_flag flags[] = {
        CLI_TEXT_FLAG("--data", &a->data, CLI_ALL),
        CLI_INT_FLAG("--steps", &a->steps, 0, LONG_MAX, CLI_ALL),
        CLI_INT_FLAG("--batch", &a->batch, 1, LONG_MAX, CLI_ALL),
        CLI_INT_FLAG("--context", &a->context, 1, LONG_MAX, CLI_ALL),
        CLI_INT_FLAG("--dim", &a->dim, 1, LONG_MAX, CLI_ALL),
        CLI_INT_FLAG("--heads", &a->heads, 1, LONG_MAX, CLI_ALL),
        CLI_NUM_FLAG("--lr", &a->lr, 0, HUGE_VAL, CLI_ALL),
        CLI_TEXT_FLAG("--seed", &seed, CLI_ALL),
        CLI_SWITCH_FLAG("--exact", &a->exact, CLI_ALL),
        CLI_INT_FLAG("--threads", &threads, 1, LONG_MAX, CLI_ALL),
        CLI_TEXT_FLAG("--attention", &attention, CLI_ALL),
        CLI_TEXT_FLAG("--log", &a->log, CLI_ALL),
        CLI_TEXT_FLAG("--save", &a->save, CLI_ALL),
        CLI_INT_FLAG("--save-every", &a->save_every, 0, LONG_MAX, CLI_ALL),
        CLI_TEXT_FLAG("--load", &a->load, CLI_ALL),
        CLI_INT_FLAG("--sample", &a->sample, 0, LONG_MAX, CLI_ALL),
        CLI_TEXT_FLAG("--prompt", &a->prompt, CLI_ALL),
        CLI_POS_FLAG("--temperature", &a->temperature, 0, HUGE_VAL, CLI_ALL),
        CLI_INT_FLAG("--top-k", &a->top_k, 0, LONG_MAX, CLI_ALL),
        CLI_TEXT_FLAG("--plot", &a->plot, CLI_ALL),
        CLI_INT_FLAG("--plot-every", &a->plot_every, 1, LONG_MAX, CLI_ALL),
        CLI_TEXT_FLAG("--attention-svg", &a->attention_svg, CLI_ALL),
    };
    const cli_spec spec = {"train", NULL, flags, (int)(sizeof flags / sizeof *flags), 0, false}; /* main names --help */
    cli_args args;
    if (cli_parse(&spec, argc, argv, &args, usage)) return false;
    a->steps_given = cli_given(&spec, &args, "--steps");
    a->sample_given = cli_given(&spec, &args, "--sample");
    if (threads) torch_set_num_threads(threads > 256 ? 256 : (int)threads);
    if (strcmp(attention, "fused") && strcmp(attention, "explicit")) {
        fprintf(stderr, "train: --attention expects fused or explicit, got '%s'\n", attention);
        return false;
    }
    a->fused = !strcmp(attention, "fused");
    if (a->lr > FLT_MAX) { /* Adam computes in float32: such an lr is inf there */
        const char *given = NULL;
        for (int i = 1; i + 1 < argc; i++)
            if (!strcmp(argv[i], "--lr")) given = argv[i + 1];
        fprintf(stderr, "train: --lr %s is not finite in float32 (at most %g)\n", given, (double)FLT_MAX);
        return false;
    }
    if (seed) { /* torch.manual_seed takes -2^63 .. 2^64-1; a negative seed wraps modulo 2^64 */
        char *end;
        errno = 0;
        unsigned long long u = 0;
        if (seed[0] == '-') u = (unsigned long long)strtoll(seed, &end, 10);
        else u = seed[0] == '+' ? (errno = EINVAL, 0) : strtoull(seed, &end, 10);
        if (errno || end == seed || *end || seed[0] >= 'a' || seed[0] == ' ') {
            fprintf(stderr, "train: --seed expects an integer from -2^63 to 2^64-1, got '%s'\n", seed);
            return false;
        }
        a->seed = u;
    }
    if (a->save_every > 0 && !a->save) {
        fprintf(stderr, "train: --save-every %lld needs --save FILE (where to save)\n", a->save_every);
        return false;
    }
    if (a->dim % a->heads != 0) {
        fprintf(stderr, "train: --dim (%lld) must be divisible by --heads (%lld)\n", a->dim, a->heads);
        return false;
    }
    return true;
}

/* The whole file, or NULL with a message saying why (a directory, a read error). */
static char *read_file(const char *path, size_t *len) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) /* opening one blocks until something writes to it */
        fprintf(stderr, "train: --data %s is a FIFO: waiting for a writer\n", path);
    char err[1024];
    char *buf = ac_read_file(path, len, err, sizeof err);
    if (!buf) fprintf(stderr, "train: --data: %s\n", err);
    return buf;
}

/* ---- sampling ---------------------------------------------------------------------------------- */

/* The prompt's characters as tokens (in the arena, room for `extra` more);
 * those not in the vocabulary are skipped (check_prompt said so before
 * training); an empty prompt is token 0. */
static int64_t *encode_prompt(const CharText *ct, const char *prompt, int64_t extra, int64_t *len) {
    size_t plen = strlen(prompt);
    int64_t *ids = ac_arena_alloc(ac_size_mul(plen + (size_t)extra + 1, sizeof(int64_t)));
    *len = 0;
    for (size_t at = 0; at < plen;) {
        uint32_t cp;
        int k = chartext_utf8_next(prompt + at, plen - at, &cp);
        if (k == 0) { /* refused before training */
            at++;
            continue;
        }
        int64_t id = chartext_encode_char(ct, cp);
        if (id >= 0) ids[(*len)++] = id;
        at += (size_t)k;
    }
    if (*len == 0) ids[(*len)++] = 0;
    return ids;
}

/* Before training: the prompt the sample and the picture start from. Without
 * --prompt it is "A", or the text's first character where the text has no
 * "A" (into buf). A --prompt that is not UTF-8 or none of whose characters
 * the text has is refused; characters the text lacks are named once and
 * skipped; a picture of more characters than the context shows their end. */
static const char *check_prompt(const Args *a, const CharText *ct, char buf[8]) {
    if (!a->prompt) {
        if (chartext_encode_char(ct, 'A') >= 0) return "A";
        buf[chartext_decode(ct, ((const int64_t *)ct->data->data)[0], buf)] = 0;
        return buf;
    }
    size_t plen = strlen(a->prompt), kept = 0, skipped = 0;
    if (plen == 0) return a->prompt; /* --prompt "": the sample starts from token 0 */
    char missing[200] = "";
    size_t mk = 0;
    for (size_t at = 0; at < plen;) {
        uint32_t cp;
        int k = chartext_utf8_next(a->prompt + at, plen - at, &cp);
        if (k == 0) {
            fprintf(stderr, "train: --prompt is not UTF-8 (byte %zu)\n", at);
            return NULL;
        }
        if (chartext_encode_char(ct, cp) >= 0) kept++;
        else if (skipped++ < 8 && mk + (size_t)k + 5 < sizeof missing)
            mk += (size_t)snprintf(missing + mk, sizeof missing - mk, "%s'%.*s'", skipped > 1 ? ", " : "", k, a->prompt + at);
        at += (size_t)k;
    }
    if (kept == 0) {
        fprintf(stderr, "train: --prompt \"%s\": none of its characters is in the training text\n", a->prompt);
        return NULL;
    }
    if (skipped)
        fprintf(stderr, "train: --prompt: %s%s not in the training text: skipped\n", missing,
                skipped > 8 ? " and more are" : skipped > 1 ? " are" : " is");
    if (a->attention_svg && (long)kept > a->context)
        fprintf(stderr, "train: --attention-svg shows the last %lld of the prompt's %zu characters (--context %lld)\n",
                a->context, kept, a->context);
    return a->prompt;
}

/* Generates n characters; Ctrl-C stops it at the next one. */
static void sample(nn_ToyLM *model, const CharText *ct, const char *prompt, long n, double temperature, long top_k) {
    ac_mark whole = ac_arena_mark();
    int64_t ctx = model->context_length, len = 0;
    int64_t *ids = encode_prompt(ct, prompt, n, &len);
    nn_eval(&model->module);
    bool prev = torch_no_grad_enter();                                     /* with torch.no_grad(): */
    char buf[5];
    for (int64_t i = 0; i < len; i++) fwrite(buf, 1, (size_t)chartext_decode(ct, ids[i], buf), stdout);
    for (long s = 0; s < n && !longrun_signal; s++) {
        ac_mark m = ac_arena_mark();
        int64_t start = len > ctx ? len - ctx : 0, t = len - start;
        Tensor *idx = torch_tensor_long(ids + start, SHAPE(1, t));        /* idx_cond = idx[:, -context:] */
        Tensor *logits = nn_ToyLM_forward(model, idx);
        Tensor *last = torch_div_scalar(torch_select(torch_select(logits, 0, 0), 0, t - 1), temperature); /* logits[:, -1, :] / temperature */
        if (top_k > 0 && top_k < ct->vocab_size) {                         /* v, _ = torch.topk(logits, k); logits[logits < v[-1]] = -inf */
            float *l = ac_data_float(last);
            float *sorted = ac_arena_alloc(sizeof(float) * (size_t)ct->vocab_size);
            memcpy(sorted, l, sizeof(float) * (size_t)ct->vocab_size);
            for (long a = 0; a < top_k; a++) /* partial selection sort: the k largest first */
                for (int64_t b = a + 1; b < ct->vocab_size; b++)
                    if (sorted[b] > sorted[a]) { float tmp = sorted[a]; sorted[a] = sorted[b]; sorted[b] = tmp; }
            for (int64_t j = 0; j < ct->vocab_size; j++)
                if (l[j] < sorted[top_k - 1]) l[j] = -INFINITY;
        }
        Tensor *probs = torch_softmax(last, -1);                          /* probs = F.softmax(logits, dim=-1) */
        int64_t next = ac_data_long(torch_multinomial(probs, 1, false))[0]; /* torch.multinomial(probs, 1) */
        ids[len++] = next;
        fwrite(buf, 1, (size_t)chartext_decode(ct, next, buf), stdout);
        ac_arena_release(m);
    }
    printf("\n");
    torch_no_grad_exit(prev);
    nn_train(&model->module, true);
    ac_arena_release(whole);
}

/* ---- pictures -------------------------------------------------------------------------------------------- */

/* The loss curve: every step's loss and the mean of the last 50. */
typedef struct { int64_t n, cap; double *step, *loss, *mean; } Curve;

static bool curve_add(Curve *c, long step, double loss) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 1024;
        double *s = realloc(c->step, sizeof(double) * (size_t)cap), *l = s ? realloc(c->loss, sizeof(double) * (size_t)cap) : NULL;
        double *m = l ? realloc(c->mean, sizeof(double) * (size_t)cap) : NULL;
        if (s) c->step = s;
        if (l) c->loss = l;
        if (m) c->mean = m;
        if (!m) return false;
        c->cap = cap;
    }
    c->step[c->n] = (double)step, c->loss[c->n] = loss;
    int64_t w = c->n + 1 < 50 ? c->n + 1 : 50;
    double sum = 0;
    for (int64_t i = c->n + 1 - w; i <= c->n; i++) sum += c->loss[i];
    c->mean[c->n++] = sum / (double)w;
    return true;
}

static bool draw_curve(FILE *f, void *u) {
    const Curve *c = u;
    ac_series s[2] = {{"loss", c->n, c->step, c->loss}, {"mean of the last 50 steps", c->n, c->step, c->mean}};
    ac_plot_opts o = {.title = "training loss (cross-entropy)", .xlabel = "step", .ylabel = "loss"};
    return ac_plot_svg(f, &o, c->n ? 2 : 0, s);
}

static bool write_curve(const char *path, Curve *c) {
    if (ac_write_file_atomic(path, draw_curve, c)) return true;
    fprintf(stderr, "train: cannot write --plot %s: %s\n", path, strerror(errno));
    return false;
}

typedef struct { Tensor *w; ac_heatmap_opts o; } HeatmapArgs;
static bool draw_heatmap(FILE *f, void *u) { return ac_heatmap_svg(f, ((HeatmapArgs *)u)->w, &((HeatmapArgs *)u)->o); }

/* The attention of each head over the prompt's characters (its last context_length). */
static bool attention_svg(const char *path, nn_ToyLM *model, const CharText *ct, const char *prompt, long step) {
    ac_mark m = ac_arena_mark();
    int64_t len = 0, *ids = encode_prompt(ct, prompt, 0, &len);
    int64_t start = len > model->context_length ? len - model->context_length : 0, t = len - start;
    nn_eval(&model->module);
    bool prev = torch_no_grad_enter(), fused = model->attn->fused;
    model->attn->fused = false; /* the picture needs the weights, which only the explicit path makes */
    nn_ToyLM_forward(model, torch_tensor_long(ids + start, SHAPE(1, t)));
    model->attn->fused = fused;
    torch_no_grad_exit(prev);
    nn_train(&model->module, true);
    const char **labels = ac_arena_alloc(sizeof(char *) * (size_t)t);
    for (int64_t i = 0; i < t; i++) {
        char *l = ac_arena_alloc(5);
        int k = chartext_decode(ct, ids[start + i], l);
        l[k] = 0;
        if (strcmp(l, " ") == 0) labels[i] = "\xe2\x90\xa3";       /* a space shows as U+2423 */
        else if (strcmp(l, "\n") == 0) labels[i] = "\xe2\x90\xa4"; /* a newline as U+2424 */
        else labels[i] = l;
    }
    char title[128];
    snprintf(title, sizeof title, "attention of each head after %ld steps (rows: queries, columns: keys)", step);
    HeatmapArgs h = {torch_select(model->attn->last_attn_weights, 0, 0),
                     {.title = title, .row_labels = labels, .col_labels = labels, .show_values = -1}};
    bool ok = ac_write_file_atomic(path, draw_heatmap, &h);
    if (!ok) fprintf(stderr, "train: cannot write --attention-svg %s: %s\n", path, strerror(errno));
    ac_arena_release(m);
    return ok;
}

/* ---- errors and signals: save the work first ------------------------------------------------------------- */

/* What the error handler and the signals need to see. */
static struct {
    enum { SETUP, TRAINING, UPDATING, SAMPLING } phase;
    const Args *a;
    nn_ToyLM *model;
    optim_Optimizer *opt;
    const CharText *ct;
    long step;                /* the last whole step */
    torch_Generator gen_step; /* the generator as that step left it */
} run;


static bool save(const char *path) {
    char err[512];
    torch_Generator now = torch_default_generator;
    torch_default_generator = run.gen_step; /* the generator of the last whole step */
    longrun_save_begin(path);
    bool ok = nn_ToyLM_save_checkpoint(path, run.model, run.opt, run.ct, run.step, err, sizeof err);
    longrun_save_end();
    torch_default_generator = now;
    if (!ok) fprintf(stderr, "train: --save: %s\n", err);
    return ok;
}

/* An error anywhere (a bad size, out of memory, ...): say it, save the last
 * whole step when there is one and --save asks for it, exit 1. It exits from
 * here rather than jumping back, so nothing half-built is left behind. */
static void error_handler(ac_error_kind kind, const char *msg, void *user) {
    static int depth;
    if (depth++) { /* an error while saving after an error */
        fprintf(stderr, "train: error while saving: %s\n", msg);
        exit(1);
    }
    if (run.phase == SAMPLING) putchar('\n'); /* end the half-written sample line */
    fflush(stdout);
    fprintf(stderr, "train: error: %s\n", msg);
    const char *path = run.a ? run.a->save : NULL;
    if (path && run.phase == UPDATING)
        fprintf(stderr, "train: not saved: the error came in the middle of step %ld's update; %s is left as it was\n",
                run.step + 1, path);
    else if (path && run.phase == TRAINING && save(path))
        fprintf(stderr, "train: saved the model at step %ld to %s\n", run.step, path);
    exit(1);
}

/* --save, --plot and --attention-svg must be writable before hours of
 * training: FILE.tmp (where a file goes first; a stale one from a killed run
 * is replaced) is created and removed, and FILE must not be a device, a FIFO
 * or a directory, which the rename would replace. */
static bool check_output(const char *flag, const char *path) {
    char err[1200];
    if (!path || ac_output_path_check(path, true, err, sizeof err)) return true;
    fprintf(stderr, "train: %s: %s\n", flag, err);
    return false;
}

int main(int argc, char **argv) {
    ac_set_error_handler(error_handler, NULL); /* from the start: every failure gets a message and exit 1 */
    Args a;
    if (!parse_args(argc, argv, &a)) {
        fprintf(stderr, "train: train --help lists the flags\n");
        return 2;
    }
    run.a = &a;
    ac_set_exact(a.exact);
    size_t len = 0;
    char *text = NULL;
    bool demo = false; /* the built-in text with the demo's step count */
    if (a.data) {
        if (!(text = read_file(a.data, &len))) return 1;
    } else {
        len = sizeof builtin_text - 1;
        text = ac_malloc(len);
        memcpy(text, builtin_text, len);
        if (!a.sample_given) a.sample = 300;
        if (!a.steps_given) a.steps = 1500, demo = true; /* the demo: enough steps for a sample that reads like words (~3 s) */
    }
    CharText ct;
    char err[512];
    bool ok = chartext_init(&ct, text, len, err, sizeof err);
    free(text);
    if (!ok) {
        fprintf(stderr, "train: %s: %s\n", a.data ? a.data : "built-in text", err);
        return 1;
    }
    run.ct = &ct;
    if (ct.n <= a.context) {
        fprintf(stderr, "train: the text has %lld character%s; --context %lld needs more than that\n", (long long)ct.n,
                ct.n == 1 ? "" : "s", a.context);
        chartext_free(&ct);
        return 1;
    }
    char first[8];
    const char *prompt = check_prompt(&a, &ct, first);
    if (!prompt) {
        chartext_free(&ct);
        return 2;
    }
    FILE *log = NULL;
    if (a.log && !(log = fopen(a.log, a.load ? "a" : "w"))) { /* a resumed run's steps go on after the first run's */
        fprintf(stderr, "train: cannot write --log %s: %s\n", a.log, strerror(errno));
        chartext_free(&ct);
        return 1;
    }
    static Curve curve;
    if (!check_output("--save", a.save) || !check_output("--plot", a.plot) ||
        !check_output("--attention-svg", a.attention_svg) || (a.plot && !write_curve(a.plot, &curve))) {
        /* a path that cannot be written fails now, not after training */
        if (log) fclose(log);
        chartext_free(&ct);
        return 1;
    }

    torch_manual_seed(a.seed);                                         /* torch.manual_seed(a.seed) */
    nn_ToyLM *model = nn_ToyLM_new(ct.vocab_size, a.context, a.dim, a.heads); /* model = ToyLM(len(chars), ...) */
    model->attn->fused = a.fused;
    optim_Optimizer *opt = optim_Adam(nn_named_parameters(&model->module), a.lr, 0.9, 0.999, 1e-8, 0.0, false);
    run.model = model, run.opt = opt;
    int64_t step0 = 0;
    int rc = 0;
    if (a.load && !nn_ToyLM_load_checkpoint(a.load, model, opt, &ct, &step0, err, sizeof err)) {
        if (strncmp(err, a.load, strlen(a.load)) == 0 || strstr(err, a.load)) /* the message names the file */
            fprintf(stderr, "train: --load: %s\n", err);
        else
            fprintf(stderr, "train: --load %s: %s\n", a.load, err);
        if (!a.data && strstr(err, "different character vocabulary"))
            fprintf(stderr, "train: --data was not given, so this run has the built-in text; give the --data the "
                            "checkpoint was trained on\n");
        rc = 1;
        goto done;
    }
    if (step0 > LONG_MAX - a.steps) {
        fprintf(stderr, "train: the checkpoint is at step %lld; %lld more steps would overflow the step count\n",
                (long long)step0, a.steps);
        rc = 1;
        goto done;
    }
    bool tty = isatty(fileno(stdout));
    longrun_catch_signals("train");
    long step = (long)step0, last_step = (long)step0 + a.steps;
    run.step = step;
    run.gen_step = torch_default_generator;
    run.phase = TRAINING;
    double t0 = cli_now_seconds(), last_loss = NAN;
    for (long s = step + 1; s <= last_step && !longrun_signal; s++) {     /* for step in range(1, a.steps + 1): */
        ac_mark m = ac_arena_mark();
        Tensor *x, *y;
        nn_ToyLM_get_batch(&ct, a.batch, a.context, &x, &y);              /* ix = torch.randint(...); x, y = ... */
        Tensor *logits = nn_ToyLM_forward(model, x);                   /* logits = model(x) */
        Tensor *loss = torch_cross_entropy(                            /* loss = F.cross_entropy( */
            torch_view(logits, SHAPE(-1, ct.vocab_size)), torch_view(y, SHAPE(-1)), -100); /* logits.view(-1, len(chars)), y.view(-1)) */
        optim_zero_grad(opt);                                          /* opt.zero_grad() */
        torch_backward(loss, NULL);                                    /* loss.backward() */
        run.phase = UPDATING;
        optim_step(opt);                                               /* opt.step() */
        run.phase = TRAINING;
        double l = torch_item(loss);
        last_loss = l;
        step = run.step = s;
        run.gen_step = torch_default_generator;
        char ls[32];
        snprintf(ls, sizeof ls, isnan(l) ? "nan" : "%.6f", l);         /* Python prints nan, never -nan */
        if (log) fprintf(log, "step %ld loss %s\n", s, ls);
        if (a.plot && curve_add(&curve, s, l) && (s - step0) % a.plot_every == 0) write_curve(a.plot, &curve);
        if (tty) {
            double el = cli_now_seconds() - t0, done_steps = (double)(s - step0);
            double tps = done_steps * (double)(a.batch * a.context) / (el > 0 ? el : 1e-9);
            double left = el / done_steps * (double)(last_step - s);
            printf("\rstep %ld/%ld  loss %s  %.0f tokens/s  %.1f s left   ", s, last_step, ls, tps, left);
            fflush(stdout);
        } else if (!demo || s % 100 == 0 || s == last_step) { /* the demo (make run): every 100th step */
            printf("step %ld loss %s\n", s, ls);                       /* print(f"step {step} loss {loss.item():.6f}") */
        }
        ac_arena_release(m);
        longrun_point("step", s);
        if (a.save && a.save_every > 0 && (s - step0) % a.save_every == 0 && s < last_step && !save(a.save)) rc = 1;
    }
    run.phase = SETUP;
    if (tty && step > step0) { /* the progress line gives way to a summary that keeps the last loss */
        double el = cli_now_seconds() - t0;
        printf("\rtrained steps %lld..%ld in %.2f s (%.2f ms/step), final loss %.6f%s\n", (long long)step0 + 1, step,
               el, 1e3 * el / (double)(step - step0), last_loss, longrun_signal ? ", stopped" : "          ");
    }
    if (a.plot && step > step0 && !write_curve(a.plot, &curve)) rc = 1;
    if (a.save && !save(a.save)) rc = 1;
    if (longrun_signal) {
        char after[48];
        snprintf(after, sizeof after, "step %ld", step);
        rc = longrun_stopped("train", after, a.save, a.save && rc == 0);
    }
    if (a.attention_svg && !longrun_signal && !attention_svg(a.attention_svg, model, &ct, prompt, step))
        rc = 1;
    if (a.sample > 0 && !longrun_signal) {
        if (a.sample_given || !a.data) printf("--- sample ---\n");
        run.phase = SAMPLING;
        sample(model, &ct, prompt, a.sample, a.temperature, a.top_k);
        run.phase = SETUP;
        if (longrun_signal) {
            fprintf(stderr, "train: sampling stopped by signal %d\n", (int)longrun_signal);
            rc = 128 + (int)longrun_signal;
        }
    }
done:
    if (log && !ac_close_output(log)) {
        fprintf(stderr, "train: writing --log %s failed: %s\n", a.log, strerror(errno));
        rc = 1;
    }
    free(curve.step), free(curve.loss), free(curve.mean);
    optim_free(opt);
    nn_free(&model->module);
    chartext_free(&ct);
    ac_shutdown();
    return ac_finish_output("train", rc);
}
