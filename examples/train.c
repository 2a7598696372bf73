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
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(_WIN32)
#include <io.h>
#define isatty _isatty
#define fileno _fileno
#else
#include <unistd.h>
#endif

#include "nn.h"
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
    long steps, batch, context, dim, heads, sample, top_k, plot_every;
    double lr, temperature;
    unsigned long long seed;
    bool sample_given, steps_given;
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
            "  --log FILE         one \"step N loss X\" line per step\n"
            "  --save FILE        save model, Adam state, step and generator at the end, on Ctrl-C or on an error\n"
            "  --load FILE        resume from a --save file: the following steps equal an uninterrupted run\n"
            "  --sample N         after training, generate N characters (default 0; 300 on the built-in text)\n"
            "  --prompt TEXT      what the sample continues from (default \"A\"); characters not in the text are skipped\n"
            "  --temperature X    divides the logits before the softmax; < 1 is bolder, > 1 more random (default 1)\n"
            "  --top-k K          sample only among the K likeliest characters; 0 means all (default 0)\n"
            "  --plot FILE.svg    the loss curve, rewritten every --plot-every steps (default 25), so it can be watched\n"
            "  --attention-svg F  after training, the attention of each head over the --prompt characters (SVG)\n"
            "examples:\n"
            "  train                                         the demo: built-in text, then a sample\n"
            "  train --data ../shared/data/the-verdict.txt --steps 200    = python3 toy_lm.py, step for step\n"
            "  train --steps 500 --plot loss.svg --attention-svg attn.svg --prompt \"Attention lets\" --sample 200\n");
}

static bool parse_long(const char *flag, const char *s, long min, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min) {
        fprintf(stderr, "train: %s expects an integer >= %ld, got '%s'\n", flag, min, s);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_double(const char *flag, const char *s, double min_excl, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || !(v > min_excl)) {
        fprintf(stderr, "train: %s expects a number > %g, got '%s'\n", flag, min_excl, s);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_args(int argc, char **argv, Args *a) {
    *a = (Args){.steps = 200, .batch = 16, .context = 32, .dim = 64, .heads = 4, .lr = 1e-3, .seed = 123,
                .temperature = 1.0, .top_k = 0, .prompt = NULL, .plot_every = 25};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "train: %s: unknown flag or missing value\n", f);
            return false;
        }
        const char *v = argv[++i];
        bool ok = true;
        if (strcmp(f, "--data") == 0) a->data = v;
        else if (strcmp(f, "--log") == 0) a->log = v;
        else if (strcmp(f, "--save") == 0) a->save = v;
        else if (strcmp(f, "--load") == 0) a->load = v;
        else if (strcmp(f, "--prompt") == 0) a->prompt = v;
        else if (strcmp(f, "--plot") == 0) a->plot = v;
        else if (strcmp(f, "--attention-svg") == 0) a->attention_svg = v;
        else if (strcmp(f, "--plot-every") == 0) ok = parse_long(f, v, 1, &a->plot_every);
        else if (strcmp(f, "--steps") == 0) { ok = parse_long(f, v, 0, &a->steps); a->steps_given = true; }
        else if (strcmp(f, "--batch") == 0) ok = parse_long(f, v, 1, &a->batch);
        else if (strcmp(f, "--context") == 0) ok = parse_long(f, v, 1, &a->context);
        else if (strcmp(f, "--dim") == 0) ok = parse_long(f, v, 1, &a->dim);
        else if (strcmp(f, "--heads") == 0) ok = parse_long(f, v, 1, &a->heads);
        else if (strcmp(f, "--sample") == 0) { ok = parse_long(f, v, 0, &a->sample); a->sample_given = true; }
        else if (strcmp(f, "--top-k") == 0) ok = parse_long(f, v, 0, &a->top_k);
        else if (strcmp(f, "--lr") == 0) ok = parse_double(f, v, -1e-300, &a->lr);
        else if (strcmp(f, "--temperature") == 0) ok = parse_double(f, v, 0.0, &a->temperature);
        else if (strcmp(f, "--seed") == 0) {
            char *end;
            errno = 0;
            long long s = strtoll(v, &end, 10);
            ok = !errno && end != v && !*end;
            if (!ok) fprintf(stderr, "train: --seed expects an integer, got '%s'\n", v);
            a->seed = (unsigned long long)s; /* negative seeds wrap modulo 2^64, as in torch.manual_seed */
        } else {
            fprintf(stderr, "train: unknown flag %s\n", f);
            return false;
        }
        if (!ok) return false;
    }
    if (a->dim % a->heads != 0) {
        fprintf(stderr, "train: --dim (%ld) must be divisible by --heads (%ld)\n", a->dim, a->heads);
        return false;
    }
    return true;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "train: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "train: cannot read %s\n", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static double now_seconds(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- checkpoints ------------------------------------------------------------------------------ */

/* The generator's state as an int64 tensor: 624 words, left, next, cache flag, cache bits. */
static Tensor *rng_state(void) {
    Tensor *t = torch_empty(SHAPE(628), AC_INT64);
    int64_t *p = torch_data_long(t);
    const torch_Generator *g = &torch_default_generator;
    for (int i = 0; i < 624; i++) p[i] = g->st[i];
    p[624] = g->left;
    p[625] = g->next;
    p[626] = g->has_next_double_normal;
    memcpy(&p[627], &g->next_double_normal, sizeof(double));
    return t;
}

static bool rng_restore(Tensor *t, char *err, size_t errlen) {
    if (t->dtype != AC_INT64 || t->ndim != 1 || t->shape[0] != 628) {
        snprintf(err, errlen, "rng_state must be an I64 tensor of 628 values");
        return false;
    }
    const int64_t *p = torch_data_long(t);
    if (p[624] < 1 || p[624] > 624 || p[625] < 0 || p[625] > 623) {
        snprintf(err, errlen, "rng_state holds an invalid generator position");
        return false;
    }
    torch_Generator *g = &torch_default_generator;
    for (int i = 0; i < 624; i++) g->st[i] = (uint32_t)p[i];
    g->left = (int)p[624];
    g->next = (int)p[625];
    g->has_next_double_normal = p[626] != 0;
    memcpy(&g->next_double_normal, &p[627], sizeof(double));
    return true;
}

/* JSON-free text of the vocabulary: the characters themselves, in order. */
static char *vocab_string(const CharText *ct) {
    char *s = ac_arena_alloc((size_t)ct->vocab_size * 4 + 1), *o = s;
    for (int64_t i = 0; i < ct->vocab_size; i++) o += chartext_decode(ct, i, o);
    *o = 0;
    return s;
}

static bool save_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, long step,
                            const Args *a) {
    ac_mark m = ac_arena_mark();
    nn_TensorList sd = nn_state_dict(&model->module), os = optim_state_dict(opt);
    int n = sd.n + os.n + 1;
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)n);
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)n);
    int k = 0;
    for (int i = 0; i < sd.n; i++, k++) names[k] = sd.names[i], ts[k] = sd.tensors[i];
    for (int i = 0; i < os.n; i++, k++) {
        char *nm = ac_arena_alloc(strlen(os.names[i]) + 7);
        sprintf(nm, "optim.%s", os.names[i]);
        names[k] = nm, ts[k] = os.tensors[i];
    }
    names[k] = "rng_state", ts[k++] = rng_state();
    char steps[32], dims[128];
    snprintf(steps, sizeof steps, "%ld", step);
    snprintf(dims, sizeof dims, "%ld %ld %ld %ld", a->context, a->dim, a->heads, (long)ct->vocab_size);
    const char *meta[] = {"format", "attention.c ToyLM checkpoint", "step", steps,
                          "context dim heads vocab_size", dims, "vocab", vocab_string(ct)};
    char err[512];
    bool ok = safetensors_save(path, (nn_TensorList){k, names, ts}, 4, meta, err, sizeof err);
    if (!ok) fprintf(stderr, "train: --save: %s\n", err);
    ac_arena_release(m);
    return ok;
}

/* Loads into model and optimizer only if everything in the file fits. */
static bool load_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, long *step,
                            const Args *a) {
    ac_mark m = ac_arena_mark();
    safetensors_File f;
    char err[512];
    bool ok = safetensors_load(path, &f, err, sizeof err);
    const char *vocab = ok ? safetensors_meta(&f, "vocab") : NULL;
    if (ok && vocab && strcmp(vocab, vocab_string(ct)) != 0) {
        snprintf(err, sizeof err, "the checkpoint was trained on a different character vocabulary");
        ok = false;
    }
    /* the sizes it was trained with (--heads changes no shape, so the shapes alone cannot tell) */
    const char *sizes = ok ? safetensors_meta(&f, "context dim heads vocab_size") : NULL;
    long ctx = 0, dim = 0, heads = 0, vs = 0;
    if (ok && sizes && sscanf(sizes, "%ld %ld %ld %ld", &ctx, &dim, &heads, &vs) == 4 &&
        (ctx != a->context || dim != a->dim || heads != a->heads)) {
        snprintf(err, sizeof err, "the checkpoint was trained with --context %ld --dim %ld --heads %ld; this run has "
                 "--context %ld --dim %ld --heads %ld", ctx, dim, heads, a->context, a->dim, a->heads);
        ok = false;
    }
    const char *const ignore[] = {"optim.", "rng_state", NULL};
    if (ok) ok = safetensors_copy_into(&f, nn_state_dict(&model->module), ignore, false, err, sizeof err);
    /* the optimizer's part, without the "optim." prefix */
    int n_opt = 0;
    const char **onames = ac_arena_alloc(sizeof(char *) * (size_t)(f.tensors.n + 1));
    Tensor **ots = ac_arena_alloc(sizeof(Tensor *) * (size_t)(f.tensors.n + 1));
    for (int i = 0; ok && i < f.tensors.n; i++)
        if (strncmp(f.tensors.names[i], "optim.", 6) == 0) {
            onames[n_opt] = f.tensors.names[i] + 6;
            ots[n_opt++] = f.tensors.tensors[i];
        }
    nn_TensorList ostate = {n_opt, onames, ots};
    if (ok) ok = optim_load_state_dict(opt, ostate, false, err, sizeof err);
    Tensor *rng = ok ? safetensors_get(&f, "rng_state") : NULL;
    torch_Generator saved = torch_default_generator;
    if (ok && rng) ok = rng_restore(rng, err, sizeof err);
    long s = 0;
    const char *st = ok ? safetensors_meta(&f, "step") : NULL;
    if (ok && st) {
        char *end;
        s = strtol(st, &end, 10);
        if (*end || s < 0) {
            snprintf(err, sizeof err, "bad step \"%s\" in the metadata", st);
            ok = false;
        }
    }
    if (!ok) {
        torch_default_generator = saved;
        fprintf(stderr, "train: --load %s: %s\n", path, err);
        ac_arena_release(m);
        return false;
    }
    safetensors_copy_into(&f, nn_state_dict(&model->module), ignore, true, err, sizeof err);
    optim_load_state_dict(opt, ostate, true, err, sizeof err);
    *step = s;
    ac_arena_release(m);
    return true;
}

/* ---- sampling ---------------------------------------------------------------------------------- */

/* The prompt's characters as tokens (malloc'd, room for `extra` more); those
 * not in the vocabulary are skipped with a message; an empty prompt is token 0. */
static int64_t *encode_prompt(const CharText *ct, const char *prompt, int64_t extra, int64_t *len) {
    size_t plen = strlen(prompt);
    int64_t *ids = malloc(sizeof(int64_t) * ((size_t)plen + (size_t)extra + 1));
    if (!ids) return NULL;
    *len = 0;
    for (size_t at = 0; at < plen;) {
        uint32_t cp;
        int k = chartext_utf8_next(prompt + at, plen - at, &cp);
        if (k == 0) {
            fprintf(stderr, "train: --prompt: invalid UTF-8 at byte %zu, skipped\n", at);
            at++;
            continue;
        }
        int64_t id = chartext_encode_char(ct, cp);
        if (id >= 0) ids[(*len)++] = id;
        else fprintf(stderr, "train: --prompt: '%.*s' is not in the training text's vocabulary, skipped\n", k, prompt + at);
        at += (size_t)k;
    }
    if (*len == 0) ids[(*len)++] = 0;
    return ids;
}

static void sample(nn_ToyLM *model, const CharText *ct, const char *prompt, long n, double temperature, long top_k) {
    int64_t ctx = model->context_length, len = 0;
    int64_t *ids = encode_prompt(ct, prompt, n, &len);
    if (!ids) return;
    nn_eval(&model->module);
    bool prev = torch_no_grad_enter();                                     /* with torch.no_grad(): */
    char buf[5];
    for (int64_t i = 0; i < len; i++) fwrite(buf, 1, (size_t)chartext_decode(ct, ids[i], buf), stdout);
    for (long s = 0; s < n; s++) {
        ac_mark m = ac_arena_mark();
        int64_t start = len > ctx ? len - ctx : 0, t = len - start;
        Tensor *idx = torch_tensor_long(ids + start, SHAPE(1, t));        /* idx_cond = idx[:, -context:] */
        Tensor *logits = nn_ToyLM_forward(model, idx);
        Tensor *last = torch_div_scalar(torch_select(torch_select(logits, 0, 0), 0, t - 1), temperature); /* logits[:, -1, :] / temperature */
        if (top_k > 0 && top_k < ct->vocab_size) {                         /* v, _ = torch.topk(logits, k); logits[logits < v[-1]] = -inf */
            float *l = torch_data_float(last);
            float *sorted = ac_arena_alloc(sizeof(float) * (size_t)ct->vocab_size);
            memcpy(sorted, l, sizeof(float) * (size_t)ct->vocab_size);
            for (long a = 0; a < top_k; a++) /* partial selection sort: the k largest first */
                for (int64_t b = a + 1; b < ct->vocab_size; b++)
                    if (sorted[b] > sorted[a]) { float tmp = sorted[a]; sorted[a] = sorted[b]; sorted[b] = tmp; }
            for (int64_t j = 0; j < ct->vocab_size; j++)
                if (l[j] < sorted[top_k - 1]) l[j] = -INFINITY;
        }
        Tensor *probs = torch_softmax(last, -1);                          /* probs = F.softmax(logits, dim=-1) */
        int64_t next = torch_data_long(torch_multinomial(probs, 1, false))[0]; /* torch.multinomial(probs, 1) */
        ids[len++] = next;
        fwrite(buf, 1, (size_t)chartext_decode(ct, next, buf), stdout);
        ac_arena_release(m);
    }
    printf("\n");
    torch_no_grad_exit(prev);
    nn_train(&model->module, true);
    free(ids);
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
    ac_plot_opts o = {"training loss (cross-entropy)", "step", "loss"};
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
    if (!ids) return false;
    int64_t start = len > model->context_length ? len - model->context_length : 0, t = len - start;
    nn_eval(&model->module);
    bool prev = torch_no_grad_enter();
    nn_ToyLM_forward(model, torch_tensor_long(ids + start, SHAPE(1, t)));
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
    free(ids);
    ac_arena_release(m);
    return ok;
}

/* ---- errors and Ctrl-C: save the work first ---------------------------------------------------------- */

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { interrupted = 1; }

static jmp_buf on_error;
static void error_handler(const char *msg, void *user) {
    fprintf(stderr, "train: error: %s\n", msg);
    longjmp(on_error, 1);
}

int main(int argc, char **argv) {
    Args a;
    if (!parse_args(argc, argv, &a)) {
        usage(stderr);
        return 2;
    }
    size_t len = 0;
    char *text = NULL;
    if (a.data) {
        if (!(text = read_file(a.data, &len))) return 1;
    } else {
        len = sizeof builtin_text - 1;
        text = malloc(len);
        if (!text) return 1;
        memcpy(text, builtin_text, len);
        if (!a.sample_given) a.sample = 300;
        if (!a.steps_given) a.steps = 1500; /* the demo: enough steps for a sample that reads like words (~3 s) */
    }
    CharText ct;
    char err[128];
    bool ok = chartext_init(&ct, text, len, err, sizeof err);
    free(text);
    if (!ok) {
        fprintf(stderr, "train: %s: %s\n", a.data ? a.data : "built-in text", err);
        return 1;
    }
    if (ct.n <= a.context) {
        fprintf(stderr, "train: the text has %lld characters; --context %ld needs at least %ld\n", (long long)ct.n,
                a.context, a.context + 1);
        chartext_free(&ct);
        return 1;
    }
    FILE *log = NULL;
    if (a.log && !(log = fopen(a.log, "w"))) {
        fprintf(stderr, "train: cannot write --log %s: %s\n", a.log, strerror(errno));
        chartext_free(&ct);
        return 1;
    }

    static Curve curve; /* static: intact after a longjmp from the error handler */
    if (a.plot && !write_curve(a.plot, &curve)) { /* a path that cannot be written fails now, not after training */
        if (log) fclose(log);
        chartext_free(&ct);
        return 1;
    }

    torch_manual_seed(a.seed);                                         /* torch.manual_seed(a.seed) */
    nn_ToyLM *model = nn_ToyLM_new(ct.vocab_size, a.context, a.dim, a.heads); /* model = ToyLM(len(chars), ...) */
    optim_Optimizer *opt = optim_Adam(nn_named_parameters(&model->module), a.lr, 0.9, 0.999, 1e-8, 0.0, false);
    long step0 = 0;
    int rc = 0;
    if (a.load && !load_checkpoint(a.load, model, opt, &ct, &step0, &a)) {
        rc = 1;
        goto done;
    }
    bool tty = isatty(fileno(stdout));
    signal(SIGINT, on_sigint);
    ac_set_error_handler(error_handler, NULL);
    volatile long step = step0; /* read after a longjmp from the error handler */
    long last_step = step0 + a.steps;
    if (setjmp(on_error)) { /* an error inside a step: the weights are those of the last whole step */
        rc = 1;
        if (a.save && save_checkpoint(a.save, model, opt, &ct, step, &a))
            fprintf(stderr, "train: saved the model at step %ld to %s\n", step, a.save);
        goto done;
    }
    double t0 = now_seconds(), last_loss = NAN;
    for (long s = step0 + 1; s <= last_step && !interrupted; s++) {   /* for step in range(1, a.steps + 1): */
        ac_mark m = ac_arena_mark();
        Tensor *x, *y;
        toylm_get_batch(&ct, a.batch, a.context, &x, &y);              /* ix = torch.randint(...); x, y = ... */
        Tensor *logits = nn_ToyLM_forward(model, x);                   /* logits = model(x) */
        Tensor *loss = torch_cross_entropy(                            /* loss = F.cross_entropy( */
            torch_view(logits, SHAPE(-1, ct.vocab_size)), torch_view(y, SHAPE(-1)), -100); /* logits.view(-1, len(chars)), y.view(-1)) */
        optim_zero_grad(opt);                                          /* opt.zero_grad() */
        torch_backward(loss, NULL);                                    /* loss.backward() */
        optim_step(opt);                                               /* opt.step() */
        double l = torch_item(loss);
        last_loss = l;
        step = s;
        if (log) fprintf(log, "step %ld loss %.6f\n", s, l);
        if (a.plot && curve_add(&curve, s, l) && (s - step0) % a.plot_every == 0) write_curve(a.plot, &curve);
        if (tty) {
            double el = now_seconds() - t0, done_steps = (double)(s - step0);
            double tps = done_steps * (double)(a.batch * a.context) / (el > 0 ? el : 1e-9);
            double left = el / done_steps * (double)(last_step - s);
            printf("\rstep %ld/%ld  loss %.6f  %.0f tokens/s  %.1f s left   ", s, last_step, l, tps, left);
            fflush(stdout);
        } else {
            printf("step %ld loss %.6f\n", s, l);                      /* print(f"step {step} loss {loss.item():.6f}") */
        }
        ac_arena_release(m);
    }
    if (tty && step > step0) { /* the progress line gives way to a summary that keeps the last loss */
        double el = now_seconds() - t0;
        printf("\rtrained steps %ld..%ld in %.2f s (%.2f ms/step), final loss %.6f%s\n", step0 + 1, step, el,
               1e3 * el / (double)(step - step0), curve.n ? curve.loss[curve.n - 1] : last_loss,
               interrupted ? ", stopped by Ctrl-C" : "          ");
    }
    if (a.plot && step > step0 && !write_curve(a.plot, &curve)) rc = 1;
    if (a.save && !save_checkpoint(a.save, model, opt, &ct, step, &a)) rc = 1;
    if (interrupted)
        fprintf(stderr, "train: interrupted after step %ld%s%s\n", (long)step, a.save && rc == 0 ? "; saved to " : "",
                a.save && rc == 0 ? a.save : "");
    if (a.attention_svg && !interrupted && !attention_svg(a.attention_svg, model, &ct, a.prompt ? a.prompt : "A", step))
        rc = 1;
    if (a.sample > 0 && !interrupted) {
        if (a.sample_given || !a.data) printf("--- sample ---\n");
        sample(model, &ct, a.prompt ? a.prompt : "A", a.sample, a.temperature, a.top_k);
    }
done:
    ac_set_error_handler(NULL, NULL);
    if (log && fclose(log) != 0) {
        fprintf(stderr, "train: writing --log %s failed\n", a.log);
        rc = 1;
    }
    free(curve.step), free(curve.loss), free(curve.mean);
    optim_free(opt);
    nn_free(&model->module);
    chartext_free(&ct);
    ac_shutdown();
    return rc;
}
