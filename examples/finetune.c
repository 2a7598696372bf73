/* The book's finetuning in C: "Build a Large Language Model (From Scratch)", chapter 6 (a spam
 * classifier from GPT-2) and appendix E (the same with LoRA), as ../shared/pytorch/finetune.py
 * does them in PyTorch, printing what it prints.
 *
 *     finetune classify [flags]    chapter 6; with --lora RANK, appendix E
 *     finetune instruct [flags]    chapter 7: instruction finetuning (--load F --prompt TEXT: an answer)
 *     finetune dpo [flags]         chapter 7's DPO notebook: preference tuning (tests/tools/dpo.py)
 *
 * Each line carries the line of finetune.py (the book's code) it does. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chartext.h"
#include "data.h"
#include "dpo.h"
#include "gpt.h"
#include "instruct.h"
#include "json.h"
#include "optim.h"
#include "preference.h"
#include "spam_data.h"
#include "tensor.h"
#include "tokenizer.h"
#include "viz.h"

#include "cli.h"
#include "longrun.h"
#include "finetune_sources.h" /* finetune_example_source (this file), _classifier_source, _lora_source, _instruct_source, _preference_source, _dpo_source */

static void usage(FILE *f) {
    fprintf(f,
            "usage: finetune COMMAND [flags]   The book's finetuning (Build a Large Language Model (From Scratch)) in C.\n"
            "\n"
            "commands (those of ../shared/pytorch/finetune.py, with its flags and defaults):\n"
            "  classify             chapter 6: GPT-2 finetuned into a spam classifier on --data (the SMS Spam\n"
            "                       Collection's format: label TAB text); with --lora RANK, appendix E\n"
            "  instruct             chapter 7: GPT-2 finetuned to follow instructions (--data: the book's\n"
            "                       instruction-data.json), then the first three test answers\n"
            "  dpo                  chapter 7's DPO notebook: the policy tuned against its frozen copy on --data (the\n"
            "                       book's instruction-data-with-preference.json), as tests/tools/dpo.py does it\n"
            "\n"
            "the model:\n"
            "  --gpt2 DIR           OpenAI's GPT-2 from a Hugging Face directory (config.json + model.safetensors)\n"
            "  (without it, the book's test mode: a random GPTModel drawn after manual_seed(--seed) of these sizes)\n"
            "  --context N (120)  --emb-dim N (12)  --heads N (2)  --layers N (1)  --qkv-bias\n"
            "classify:\n"
            "  --data FILE          the TSV (default ../shared/data/sms_spam_sample.tsv)\n"
            "  --split-dir DIR      where train.csv, validation.csv and test.csv are written (default: a temporary\n"
            "                       directory, removed at the end)\n"
            "  --max-length N       cut the texts here (default: the longest training text)\n"
            "  --lora RANK          appendix E: LoRA of this rank on every Linear, everything else frozen\n"
            "  --lora-alpha X       LoRA's alpha (16)\n"
            "  --print-model        print(model)\n"
            "instruct:\n"
            "  --data FILE          the JSON list of {instruction, input, output} (default\n"
            "                       ../shared/data/instruction-data.json)\n"
            "  --subset N           the first N of each split (0: all; the book's test mode takes 10)\n"
            "  --show-batches       every training batch's shapes, then the last one's first input and target\n"
            "  --allowed-max-length N   the collate function's cut (1024)\n"
            "  --max-new-tokens N   the test answers' length at most (256)\n"
            "  --responses FILE     the test set with each model_response, as json.dump(test_data, f, indent=4)\n"
            "  --prompt TEXT        with --load: answer this instruction (- reads stdin), streamed, and stop\n"
            "dpo (and --subset, --show-batches, --allowed-max-length, --max-new-tokens, --responses as instruct):\n"
            "  --data FILE          the JSON list of {instruction, input, output, chosen, rejected} (default\n"
            "                       ../shared/data/instruction-data-with-preference.json)\n"
            "  --beta X             the DPO loss's beta, above 0 (0.1); here --lr 5e-6, --weight-decay 0.01, --epochs 1\n"
            "  --load FILE          the model to start from (finetune instruct --save's), into the one --gpt2 builds\n"
            "  --plot FILE.svg      the notebook's figures: the loss and the reward margins\n"
            "training:\n"
            "  --seed N (123)  --batch N (8)  --lr X (5e-5; --lora: 8e-4)  --weight-decay X (0.1)\n"
            "  --epochs N (5; instruct: 2)  --eval-freq N (50; instruct: 5)  --eval-iter N (5)\n"
            "  --log FILE           every step's batch loss: step N loss X\n"
            "  --save FILE          the finetuned model's state_dict (the book's names) as safetensors, written as\n"
            "                       soon as training ends; on Ctrl-C, SIGTERM or SIGHUP the run finishes the step\n"
            "                       (or answer) under way and saves there, with AdamW's state, the generator and\n"
            "                       where it stands, then exits 130, 143 or 129\n"
            "  --resume FILE        go on from such a file, printing what the uninterrupted run prints after the\n"
            "                       first run's last line; give the first run's flags (--save defaults to FILE)\n"
            "  --load FILE          a finetuned model's weights instead of training (no resuming: its answers)\n"
            "  --plot FILE.svg      the chapter's figures: the losses (and classify's accuracies) over the epochs\n"
            "  --html FILE          the reader's page: the book's Python beside this C, the run's output and figures\n"
            "both:\n"
            "  --tokenizer DIR      GPT-2's encoder.json + vocab.bpe (default ../shared/data/gpt2, or --gpt2's own)\n"
            "  --threads N          threads inside ops (the numbers never depend on it)\n"
            "  --exact              exact math (sums in PyTorch's order, no fused multiply-add); default: fast\n"
            "  -h, --help           this text\n"
            "\n"
            "  finetune classify                                  the book's test mode on the sample, seconds\n"
            "  finetune classify --gpt2 DIR --data SMSSpamCollection    chapter 6's run\n"
            "  finetune classify --gpt2 DIR --lora 16 --print-model     appendix E's\n"
            "  finetune instruct --gpt2 gpt2-medium --save m.safetensors --responses r.json   chapter 7's\n"
            "  finetune instruct --gpt2 gpt2-medium --load m.safetensors --prompt \"Rewrite the sentence: ...\"\n"
            "  finetune dpo --show-batches --epochs 0             the DPO notebook's data lines and first losses\n"
            "  finetune dpo --gpt2 gpt2-medium --load m.safetensors --responses d.json   the notebook's run after chapter 7\n");
}

typedef struct {
    const char *tokenizer, *data, *gpt2, *split_dir, *log, *save, *load, *resume, *plot, *responses, *prompt, *html;
    long long context, emb_dim, heads, layers, seed, batch, epochs, eval_freq, eval_iter, max_length, lora;
    long long subset, allowed_max_length, max_new_tokens;
    double lr, weight_decay, lora_alpha, beta;
    bool qkv_bias, print_model, exact, show_batches;
    int cmd;
} Flags;

enum { CLASSIFY, INSTRUCT, DPO };
static const char *const commands[] = {"classify", "instruct", "dpo", NULL};
#define ON(c) (1u << (c))
#define BIG 1000000000000LL

static int parse_flags(int argc, char **argv, Flags *a) {
    static char tok_default[4200], data_default[4200];
    *a = (Flags){.tokenizer = cli_default_path("data/gpt2", tok_default, sizeof tok_default),
                 .context = 120, .emb_dim = 12, .heads = 2, .layers = 1, .seed = 123, .batch = 8, .epochs = -1,
                 .eval_freq = -1, .eval_iter = 5, .max_length = -1, .lr = NAN, .weight_decay = 0.1, .lora_alpha = 16,
                 .allowed_max_length = 1024, .max_new_tokens = 256, .beta = 0.1};
    long long threads = 0;
    const cli_flag flags[] = {
        CLI_TEXT_FLAG("--tokenizer", &a->tokenizer, CLI_ALL),
        CLI_TEXT_FLAG("--data", &a->data, CLI_ALL),
        CLI_TEXT_FLAG("--gpt2", &a->gpt2, CLI_ALL),
        CLI_INT_FLAG("--threads", &threads, 1, 1 << 20, CLI_ALL),
        CLI_SWITCH_FLAG("--exact", &a->exact, CLI_ALL),
        CLI_INT_FLAG("--context", &a->context, 1, BIG, CLI_ALL),
        CLI_INT_FLAG("--emb-dim", &a->emb_dim, 1, BIG, CLI_ALL),
        CLI_INT_FLAG("--heads", &a->heads, 1, BIG, CLI_ALL),
        CLI_INT_FLAG("--layers", &a->layers, 1, BIG, CLI_ALL),
        CLI_SWITCH_FLAG("--qkv-bias", &a->qkv_bias, CLI_ALL),
        CLI_INT_FLAG("--seed", &a->seed, 0, 4294967295LL, CLI_ALL), /* numpy's RandomState takes 0 .. 2**32 - 1 */
        CLI_INT_FLAG("--batch", &a->batch, 1, BIG, CLI_ALL),
        CLI_NUM_FLAG("--lr", &a->lr, 0, HUGE_VAL, CLI_ALL),
        CLI_NUM_FLAG("--weight-decay", &a->weight_decay, 0, HUGE_VAL, CLI_ALL),
        CLI_INT_FLAG("--epochs", &a->epochs, 0, BIG, CLI_ALL),
        CLI_INT_FLAG("--eval-freq", &a->eval_freq, 1, BIG, CLI_ALL),
        CLI_INT_FLAG("--eval-iter", &a->eval_iter, 1, BIG, CLI_ALL),
        CLI_INT_FLAG("--max-length", &a->max_length, 1, BIG, ON(CLASSIFY)),
        CLI_TEXT_FLAG("--split-dir", &a->split_dir, ON(CLASSIFY)),
        CLI_INT_FLAG("--lora", &a->lora, 1, BIG, ON(CLASSIFY)),
        CLI_NUM_FLAG("--lora-alpha", &a->lora_alpha, -HUGE_VAL, HUGE_VAL, ON(CLASSIFY)),
        CLI_SWITCH_FLAG("--print-model", &a->print_model, ON(CLASSIFY)),
        CLI_INT_FLAG("--subset", &a->subset, 0, BIG, ON(INSTRUCT) | ON(DPO)),
        CLI_SWITCH_FLAG("--show-batches", &a->show_batches, ON(INSTRUCT) | ON(DPO)),
        CLI_INT_FLAG("--allowed-max-length", &a->allowed_max_length, 1, BIG, ON(INSTRUCT) | ON(DPO)),
        CLI_INT_FLAG("--max-new-tokens", &a->max_new_tokens, 1, BIG, ON(INSTRUCT) | ON(DPO)),
        CLI_TEXT_FLAG("--responses", &a->responses, ON(INSTRUCT) | ON(DPO)),
        CLI_NUM_FLAG("--beta", &a->beta, -HUGE_VAL, HUGE_VAL, ON(DPO)),
        CLI_TEXT_FLAG("--prompt", &a->prompt, ON(INSTRUCT)),
        CLI_TEXT_FLAG("--log", &a->log, CLI_ALL),
        CLI_TEXT_FLAG("--save", &a->save, CLI_ALL),
        CLI_TEXT_FLAG("--load", &a->load, CLI_ALL),
        CLI_TEXT_FLAG("--resume", &a->resume, CLI_ALL),
        CLI_TEXT_FLAG("--plot", &a->plot, CLI_ALL),
        CLI_TEXT_FLAG("--html", &a->html, CLI_ALL),
    };
    const cli_spec spec = {"finetune", commands, flags, (int)(sizeof flags / sizeof *flags), 0, true};
    cli_args args;
    int rc = cli_parse(&spec, argc, argv, &args, usage);
    if (rc) return rc;
    if (args.command < 0) return cli_fail(&spec, "give a command: %s%s", "classify, instruct or dpo", "");
    a->cmd = args.command;
    bool cls = a->cmd == CLASSIFY;
    if (!a->data)                                                                 /* a.data or (sms_spam_sample.tsv if cls else instruction-data.json) */
        a->data = cli_default_path(cls ? "data/sms_spam_sample.tsv" : a->cmd == DPO ? "data/instruction-data-with-preference.json"
                                   : "data/instruction-data.json", data_default, sizeof data_default);
    if (a->epochs < 0) a->epochs = cls ? 5 : a->cmd == DPO ? 1 : 2;               /* a.epochs or (5 if cls else 2); dpo: the notebook's 1 */
    if (a->eval_freq < 0) a->eval_freq = cls ? 50 : 5;                            /* a.eval_freq or (50 if cls else 5) */
    if (a->prompt && !a->load)
        return cli_fail(&spec, "--prompt answers with a finetuned model: give its weights with --load FILE%s%s", "", "");
    if (a->prompt && (a->responses || a->show_batches || a->plot || a->html))
        return cli_fail(&spec, "--prompt only answers: %s goes with a training run%s",
                        a->responses ? "--responses" : a->show_batches ? "--show-batches" : a->plot ? "--plot" : "--html", "");
    if (a->gpt2) {
        static const char *const sizes[] = {"--context", "--emb-dim", "--heads", "--layers", "--qkv-bias", NULL};
        for (int k = 0; sizes[k]; k++)
            if (cli_given(&spec, &args, sizes[k]))
                return cli_fail(&spec, "%s is not used with --gpt2: the model's sizes come from its config.json%s", sizes[k], "");
        static char hf[4200];
        struct stat st;
        snprintf(hf, sizeof hf, "%s/encoder.json", a->gpt2); /* a Hugging Face directory carries its tokenizer */
        if (!cli_given(&spec, &args, "--tokenizer") && stat(hf, &st) == 0) a->tokenizer = a->gpt2;
        snprintf(hf, sizeof hf, "%s/vocab.json", a->gpt2);
        if (!cli_given(&spec, &args, "--tokenizer") && stat(hf, &st) == 0) a->tokenizer = a->gpt2;
    }
    if (a->load && (a->log || a->save) && a->cmd != DPO) /* (dpo's --load: the model it starts from) */
        return cli_fail(&spec, "--load skips training: %s has nothing to write%s", a->log ? "--log" : "--save", "");
    if (a->resume && a->load && a->cmd != DPO) /* (dpo's --load is the model both runs start from) */
        return cli_fail(&spec, "--resume goes on training from a --save; --load answers with finished weights: give one%s%s", "", "");
    if (a->resume && a->html)
        return cli_fail(&spec, "--html shows a whole run's output: give it to a run without --resume%s%s", "", "");
    if (a->resume && !a->save) a->save = a->resume; /* a second stop keeps the work too */
    if (isnan(a->lr)) a->lr = cls && a->lora ? 8e-4 : a->cmd == DPO ? 5e-6 : 5e-5; /* a.lr if given else (8e-4 if cls and a.lora else 5e-5); dpo: 5e-6 */
    if (a->cmd == DPO && !cli_given(&spec, &args, "--weight-decay")) a->weight_decay = 0.01; /* the notebook's AdamW(..., weight_decay=0.01) */
    if (threads) torch_set_num_threads(threads > 256 ? 256 : (int)threads);
    ac_set_exact(a->exact);
    return 0;
}

/* torch.Size([8, 25]) */
static void print_size(const char *label, const char *sep, const Tensor *t) {
    printf("%s%storch.Size([", label, sep);
    for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
    printf("])\n");
}

static int fail(const char *fmt, const char *a, const char *b) {
    fflush(stdout);
    fprintf(stderr, "finetune: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

/* model_for: --gpt2 DIR, or (the book's --test_mode) a random GPTModel of the size flags drawn after
 * manual_seed; eval mode. NULL after a message. */
static nn_GPTModel *model_for(const Flags *a) {
    nn_GPTModel *model;
    if (a->gpt2) {
        char err[1024];
        model = nn_GPTModel_from_gpt2(a->gpt2, err, sizeof err);                // model, cfg = load_gpt2(a.gpt2)
        if (!model) return fail("--gpt2 %s", err, ""), NULL;
    } else {
        nn_GPTConfig cfg = {.vocab_size = 50257, .context_length = a->context, .emb_dim = a->emb_dim,  // cfg = {...}
                            .n_heads = a->heads, .n_layers = a->layers, .drop_rate = 0.0, .qkv_bias = a->qkv_bias};
        char err[512];
        if (!nn_GPTConfig_check(cfg, err, sizeof err)) return fail("%s%s", err, ""), NULL;
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed)
        model = nn_GPTModel_new(cfg);                                             // model = GPTModel(cfg)
    }
    nn_eval(&model->module);                                                      // model.eval()
    return model;
}

/* ---- the chapter's figures (--plot) ---------------------------------------------------------------- */

typedef struct { const ac_points *loss, *acc; double examples_per_epoch; } Figures;

static bool page_wanted; /* --html: the run draws its figure for the page too */
static char *page_svg;

/* plot_values(epochs_seen, examples_seen, train_losses, val_losses) and the same of the accuracies,
 * side by side */
static bool draw_figures(FILE *f, void *u) {
    const Figures *p = u;
    ac_series l[2] = {{"Training loss", p->loss->n, p->loss->x, p->loss->a}, {"Validation loss", p->loss->n, p->loss->x, p->loss->b}};
    ac_series c[2] = {{"Training accuracy", p->acc->n, p->acc->x, p->acc->a}, {"Validation accuracy", p->acc->n, p->acc->x, p->acc->b}};
    ac_plot_opts lo = {.title = "The classifier's loss (chapter 6)", .xlabel = "Epochs", .ylabel = "Loss",
                       .x2label = "Examples seen", .x2_per_x = p->examples_per_epoch};
    ac_plot_opts co = {.title = "The classifier's accuracy (chapter 6)", .xlabel = "Epochs", .ylabel = "Accuracy",
                       .x2label = "Examples seen", .x2_per_x = p->examples_per_epoch};
    fputs("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1280\" height=\"400\" viewBox=\"0 0 1280 400\">\n", f);
    bool ok = ac_plot_svg(f, &lo, p->loss->n ? 2 : 0, l);
    fputs("<g transform=\"translate(640,0)\">\n", f);
    ok = ac_plot_svg(f, &co, p->acc->n ? 2 : 0, c) && ok;
    fputs("</g>\n</svg>\n", f);
    return ok && !ferror(f);
}

/* ---- long runs: where a run stands, saved by --save and read by --resume (examples/longrun.h) ------ */

/* Where a finetuning run stands: what --save writes beside the weights so that --resume goes on
 * exactly. Mid-training the file also holds AdamW's state, the generator and this epoch's order;
 * after training, how many of the final items (classify's accuracy lines and reviews, instruct's
 * answers) are done, and instruct's answers so far. */
typedef struct {
    int64_t epoch, batches_done, global_step, seen; /* batches_done: of this epoch's, -1 at its start */
    int64_t *order, n_order;                        /* this epoch's order while batches_done >= 0 (malloc'd) */
    int64_t done;                                   /* the final items done; -1 while training */
    int64_t train_batches, batch;                   /* the run's shape, which --resume checks */
    char **answers;                                 /* instruct: the first `done` answers (malloc'd) */
} Stand;

typedef struct { FILE *log; ac_points loss, acc; Stand at; bool resumed; } Run;

static void run_free(Run *run) {
    if (run->log) fclose(run->log);
    ac_points_free(&run->loss), ac_points_free(&run->acc);
    free(run->at.order);
    for (int64_t i = 0; run->at.answers && i < run->at.done; i++) free(run->at.answers[i]);
    free(run->at.answers);
}

/* An epoch stopped inside: its order and the batches done, kept for the save */
static void stand_in_epoch(Stand *s, int64_t epoch, const int64_t *order, int64_t n, int64_t next) {
    s->epoch = epoch, s->batches_done = next;
    free(s->order);
    s->order = NULL, s->n_order = 0;
    if (!order) return; /* (C: stopped before the epoch's first batch drew its order) */
    s->order = ac_malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    memcpy(s->order, order, sizeof(int64_t) * (size_t)n);
    s->n_order = n;
}

static Tensor *series_tensor(const ac_points *s) { /* (n, 3): x, a, b */
    Tensor *t = torch_zeros_dtype(SHAPE(s->n, 3), AC_FLOAT64);
    double *d = t->data;
    for (int64_t i = 0; i < s->n; i++) d[3 * i] = s->x[i], d[3 * i + 1] = s->a[i], d[3 * i + 2] = s->b[i];
    return t;
}

static bool series_from(ac_points *s, const Tensor *t) {
    if (!t) return true;
    if (t->dtype != AC_FLOAT64 || t->ndim != 2 || t->shape[1] != 3) return false;
    const double *d = t->data;
    for (int64_t i = 0; i < t->shape[0]; i++) ac_points_add(s, d[3 * i], d[3 * i + 1], d[3 * i + 2]);
    return true;
}

/* --save: the weights (with LoRA, as trained) and where the run stands; opt while training (AdamW's
 * state and the generator), else the generator alone. A second signal during it leaves no file. */
static bool save_stand(const Flags *a, nn_GPTModel *model, optim_Optimizer *opt, const Run *run) {
    ac_mark mk = ac_arena_mark();
    const Stand *s = &run->at;
    int64_t answers = s->answers ? s->done : 0;
    const char **meta = ac_arena_alloc(sizeof(char *) * (size_t)(2 * (8 + answers)));
    char *nums = ac_arena_alloc(8 * 32);
    const char *keys[] = {"epoch", "batches_done", "global_step", "seen", "done", "train_batches", "batch"};
    int64_t vals[] = {s->epoch, s->batches_done, s->global_step, s->seen, s->done, s->train_batches, s->batch};
    int n_meta = 0;
    meta[2 * n_meta] = "run", meta[2 * n_meta++ + 1] = commands[a->cmd];
    for (int k = 0; k < 7; k++) {
        snprintf(nums + 32 * k, 32, "%lld", (long long)vals[k]);
        meta[2 * n_meta] = keys[k], meta[2 * n_meta++ + 1] = nums + 32 * k;
    }
    for (int64_t i = 0; i < answers; i++) {
        char *key = ac_arena_alloc(32);
        snprintf(key, 32, "answer.%lld", (long long)i);
        meta[2 * n_meta] = key, meta[2 * n_meta++ + 1] = s->answers[i];
    }
    const char *names[4];
    Tensor *ts[4];
    int n = 0;
    if (opt && s->batches_done >= 0 && s->n_order) names[n] = "loader.order", ts[n++] = torch_tensor_long(s->order, SHAPE(s->n_order));
    if (!opt) names[n] = "rng_state", ts[n++] = torch_get_rng_state(); /* (with opt, AdamW's save holds it) */
    if (run->loss.n) names[n] = "curve.loss", ts[n++] = series_tensor(&run->loss);
    if (run->acc.n) names[n] = "curve.accuracy", ts[n++] = series_tensor(&run->acc);
    char err[1024];
    longrun_save_begin(a->save);
    bool ok = nn_GPTModel_save(a->save, model, opt, (nn_TensorList){n, names, ts}, n_meta, meta, err, sizeof err);
    longrun_save_end();
    ac_arena_release(mk);
    if (!ok) fail("--save %s%s", err, "");
    return ok;
}

static bool meta_int(const safetensors_File *f, const char *path, const char *key, int64_t min, int64_t *out) {
    const char *v = safetensors_meta(f, key);
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < min) {
        fail("--resume %s: the metadata's \"%s\" is missing or not a whole number (not a file of finetune --save?)", path, key);
        return false;
    }
    *out = x;
    return true;
}

/* What a weights file holds that the flags did not build, as a hint after the reason it does not fit:
 * LoRA of some rank, another command's model, another size */
static void weights_hint(const char *path, const Flags *a, char *hint, size_t n) {
    ac_mark mk = ac_arena_mark();
    safetensors_File f;
    char err[512];
    hint[0] = 0;
    if (safetensors_load_header(path, &f, err, sizeof err)) {
        Tensor *A = safetensors_get(&f, "trf_blocks.0.att.W_query.lora.A"), *head = safetensors_get(&f, "out_head.weight");
        const char *run = safetensors_meta(&f, "run");
        long long rank = A && A->ndim == 2 ? (long long)A->shape[1] : 0;
        if (run && strcmp(run, commands[a->cmd]))
            snprintf(hint, n, ": it was saved by finetune %.20s, and this is finetune %s", run, commands[a->cmd]);
        else if (head && head->ndim == 2 && head->shape[0] == 2 && a->cmd == INSTRUCT)
            snprintf(hint, n, ": its out_head has 2 outputs, a spam classifier's (finetune classify)");
        else if (rank && !a->lora)
            snprintf(hint, n, ": it holds LoRA tensors of rank %lld (a --lora %lld run's): add --lora %lld", rank, rank, rank);
        else if (rank && rank != a->lora)
            snprintf(hint, n, ": its LoRA has rank %lld: give --lora %lld, not --lora %lld", rank, rank, a->lora);
        else if (!rank && a->lora && safetensors_get(&f, "trf_blocks.0.att.W_query.weight"))
            snprintf(hint, n, ": it holds no LoRA tensors (a run without --lora): drop --lora %lld", a->lora);
        else if (safetensors_meta(&f, "config"))
            snprintf(hint, n, a->gpt2 ? ": give the --gpt2 model it was finetuned from"
                                      : ": give the model flags (--context, --emb-dim, --heads, --layers, --qkv-bias) of the run that saved it");
    }
    ac_arena_release(mk);
}

/* --load or --resume FILE against the model the flags built (and the optimizer), from its header
 * alone: refused before the first line of output, naming what the file holds and the flag it needs */
static bool check_weights(const Flags *a, const char *flag, const char *path, nn_GPTModel *model, optim_Optimizer *opt) {
    char err[1024], hint[256];
    if (nn_GPTModel_check_file(path, model, opt, err, sizeof err)) return true;
    weights_hint(path, a, hint, sizeof hint);
    fflush(stdout);
    fprintf(stderr, "finetune: %s %s%s\n", flag, err, hint);
    return false;
}

/* --resume FILE's stand, from its header, before any output: the same command, the same batches, a
 * model and optimizer it fits (its weights come later, resume_weights) */
static bool read_stand(const Flags *a, nn_GPTModel *model, optim_Optimizer *opt, int64_t train_batches, Run *run) {
    ac_mark mk = ac_arena_mark();
    safetensors_File f;
    char err[1024];
    Stand *s = &run->at;
    bool ok = safetensors_load_header(a->resume, &f, err, sizeof err);
    if (!ok) fail("--resume %s%s", err, "");
    const char *cmd = ok ? safetensors_meta(&f, "run") : NULL;
    if (ok && (!cmd || strcmp(cmd, commands[a->cmd]))) {
        fflush(stdout);
        if (cmd) fprintf(stderr, "finetune: --resume %s was saved by finetune %.20s; this is finetune %s\n", a->resume, cmd,
                         commands[a->cmd]);
        else fprintf(stderr, "finetune: --resume %s holds no run's stand (weights alone: give them to --load)\n", a->resume);
        ok = false;
    }
    ok = ok && meta_int(&f, a->resume, "epoch", 0, &s->epoch) && meta_int(&f, a->resume, "batches_done", -1, &s->batches_done) &&
         meta_int(&f, a->resume, "global_step", -1, &s->global_step) && meta_int(&f, a->resume, "seen", 0, &s->seen) &&
         meta_int(&f, a->resume, "done", -1, &s->done) && meta_int(&f, a->resume, "train_batches", 0, &s->train_batches) &&
         meta_int(&f, a->resume, "batch", 1, &s->batch);
    if (ok && (s->train_batches != train_batches || s->batch != a->batch)) {
        fflush(stdout);
        fprintf(stderr, "finetune: --resume %s was trained on %lld batches of %lld an epoch; this run has %lld of %lld "
                "(other --data, --subset, --max-length, --allowed-max-length or --batch)\n", a->resume,
                (long long)s->train_batches, (long long)s->batch, (long long)train_batches, (long long)a->batch);
        ok = false;
    }
    ac_arena_release(mk);
    run->resumed = ok;
    return ok && check_weights(a, "--resume", a->resume, model, s->done < 0 ? opt : NULL);
}

/* --resume's weights, and with them AdamW's state and the generator (or, after training, the
 * generator alone), this epoch's order, the curves and the answers so far */
static bool resume_weights(const Flags *a, nn_GPTModel *model, optim_Optimizer *opt, Run *run) {
    ac_mark mk = ac_arena_mark();
    safetensors_File f;
    char err[1024];
    Stand *s = &run->at;
    bool training = s->done < 0, ok = nn_GPTModel_load(a->resume, model, training ? opt : NULL, &f, err, sizeof err);
    if (!ok) fail("--resume %s%s", err, "");
    Tensor *rng = ok && !training ? safetensors_get(&f, "rng_state") : NULL;
    if (ok && !training && (!rng || !ac_rng_state_check(rng, err, sizeof err)))
        ok = false, fail("--resume %s: its rng_state is missing or broken", a->resume, "");
    if (rng && ok) torch_set_rng_state(rng);
    Tensor *order = safetensors_get(&f, "loader.order");
    if (ok && training && s->batches_done >= 0 && (order || s->batches_done > 0)) { /* (C: none: the epoch had drawn no order yet) */
        ok = order && order->dtype == AC_INT64 && order->ndim == 1;
        const int64_t *o = ok ? order->data : NULL;
        for (int64_t i = 0; ok && i < order->shape[0]; i++) ok = o[i] >= 0 && o[i] < order->shape[0];
        if (ok) stand_in_epoch(s, s->epoch, o, order->shape[0], s->batches_done);
        else fail("--resume %s: \"loader.order\" is missing or not a permutation%s", a->resume, "");
    }
    if (ok && (!series_from(&run->loss, safetensors_get(&f, "curve.loss")) ||
               !series_from(&run->acc, safetensors_get(&f, "curve.accuracy"))))
        ok = false, fail("--resume %s: its curves are not (n, 3) float64%s", a->resume, "");
    if (ok && a->cmd != CLASSIFY && s->done > 0) { /* (C: instruct's and dpo's answers) */
        s->answers = ac_malloc(sizeof(char *) * (size_t)s->done);
        for (int64_t i = 0; i < s->done; i++) {
            char key[32];
            snprintf(key, sizeof key, "answer.%lld", (long long)i);
            const char *v = safetensors_meta(&f, key);
            s->answers[i] = ac_malloc(v ? strlen(v) + 1 : 1);
            strcpy(s->answers[i], v ? v : "");
            if (!v) ok = false, fail("--resume %s: the metadata has no \"%s\"", a->resume, key);
        }
    }
    ac_arena_release(mk);
    return ok;
}

/* The final items' answers (instruct's, dpo's): room for n_items, a --resume's done ones kept in
 * place (one it has more of than this run asks for is let go); returns the first item to do */
static int64_t answers_start(Run *run, int64_t n_items) {
    int64_t first = run->at.done > 0 ? run->at.done : 0;
    char **answers = ac_malloc(sizeof(char *) * (size_t)(n_items > 0 ? n_items : 1));
    for (int64_t k = 0; k < first; k++)
        if (k < n_items) answers[k] = run->at.answers[k];
        else free(run->at.answers[k]);
    free(run->at.answers);
    run->at.answers = answers, run->at.done = first < n_items ? first : n_items;
    longrun_unit("finetune", "answer");
    return run->at.done;
}

/* A stop asked for by a signal: the save, the one stderr line; the exit status */
static int stop_run(const Flags *a, nn_GPTModel *model, optim_Optimizer *opt, const Run *run, const char *after) {
    bool saved = a->save && save_stand(a, model, opt, run);
    return longrun_stopped("finetune", after, a->save, saved);
}

/* ---- chapter 6: train_classifier_simple -------------------------------------------------------------- */

static int64_t train_classifier_simple(nn_GPTModel *model, TensorDataLoader *train_loader, // def train_classifier_simple(
                                       TensorDataLoader *val_loader, optim_Optimizer *optimizer, //     model, train_loader, val_loader, optimizer,
                                       int64_t num_epochs, int64_t eval_freq,                    //     num_epochs, eval_freq,
                                       int64_t eval_iter, Run *run) {                            //     eval_iter, log):
    Stand *at = &run->at; /* (C: where the run stands; a --resume starts there) */
    int64_t examples_seen = at->seen, global_step = at->global_step;             // examples_seen, global_step = 0, -1
    int64_t per_epoch = TensorDataLoader_len(train_loader);
    longrun_live live;
    longrun_live_start(&live, global_step + 1);
    for (int64_t epoch = at->epoch; epoch < num_epochs; epoch++) {                // for epoch in range(num_epochs):
        nn_train(&model->module, true);                                           //     model.train()
        TensorDataLoaderIter it = {train_loader, 0, 0, NULL, false, false};      //     for x, y in train_loader:
        if (epoch == at->epoch && at->batches_done >= 0)                          /* (C: a resumed epoch: its order, its batches done) */
            it.order = at->order, it.next = at->batches_done, it.started = at->order != NULL, at->order = NULL;
        else
            it = TensorDataLoader_iter(train_loader);
        Tensor *x, *y;
        while (!longrun_stopping() && TensorDataLoaderIter_next(&it, &x, &y)) {
            ac_mark mk = ac_arena_mark();
            optim_zero_grad(optimizer);                                           //         optimizer.zero_grad()
            Tensor *loss = gpt_calc_loss_batch_cls(x, y, model);                  //         loss = calc_loss_batch_cls(x, y, model)
            torch_backward(loss, NULL);                                           //         loss.backward()
            optim_step(optimizer);                                                //         optimizer.step()
            examples_seen += x->shape[0];                                         //         examples_seen += x.shape[0]
            global_step += 1;                                                     //         global_step += 1
            if (run->log) fprintf(run->log, "step %lld loss %.6f\n", (long long)global_step, torch_item(loss)); // log.write(...)
            ac_arena_release(mk);
            if (global_step % eval_freq == 0) {                                   //         if global_step % eval_freq == 0:
                nn_eval(&model->module);                                          //             model.eval()
                bool prev = torch_no_grad_enter();                                //             with torch.no_grad():
                double train_loss = gpt_calc_loss_loader_cls(train_loader, model, eval_iter);
                double val_loss = gpt_calc_loss_loader_cls(val_loader, model, eval_iter);
                torch_no_grad_exit(prev);
                nn_train(&model->module, true);                                   //             model.train()
                longrun_live_clear(&live);
                printf("Ep %lld (Step %06lld): Train loss %.3f, Val loss %.3f\n", (long long)epoch + 1,
                       (long long)global_step, train_loss, val_loss);
                longrun_flush("finetune");
                ac_points_add(&run->loss, (double)(global_step + 1) / (double)per_epoch, train_loss, val_loss);
            }
            char what[64];
            snprintf(what, sizeof what, "epoch %lld/%lld  step", (long long)epoch + 1, (long long)num_epochs);
            longrun_live_show(&live, what, global_step + 1, per_epoch * num_epochs, (double)(examples_seen - at->seen), "examples");
            at->global_step = global_step, at->seen = examples_seen;
            longrun_point("step", global_step);
        }
        if (longrun_stopping() && !it.done) {                                     /* (C: stopped inside the epoch: the save records where) */
            stand_in_epoch(at, epoch, it.order, train_loader->dataset->n, it.next);
            TensorDataLoaderIter_free(&it);
            longrun_live_clear(&live);
            return examples_seen;
        }
        TensorDataLoaderIter_free(&it);
        longrun_live_clear(&live);
        double train_accuracy = gpt_calc_accuracy_loader(train_loader, model, eval_iter); // train_accuracy = calc_accuracy_loader(train_loader, model, eval_iter)
        double val_accuracy = gpt_calc_accuracy_loader(val_loader, model, eval_iter);     // val_accuracy = calc_accuracy_loader(val_loader, model, eval_iter)
        printf("Training accuracy: %.2f%% | Validation accuracy: %.2f%%\n", train_accuracy * 100, val_accuracy * 100);
        longrun_flush("finetune");
        ac_points_add(&run->acc, (double)(epoch + 1), train_accuracy, val_accuracy);
        at->epoch = epoch + 1, at->batches_done = -1;                             /* (C: the next epoch, from its start) */
        if (longrun_stopping()) break;
    }
    return examples_seen;                                                         // return examples_seen
}

/* ---- what both commands do around their training loop ---------------------------------------------- */

/* (the C's --load FILE: a finetuned run's weights, into the model the flags built) */
static bool load_weights(const char *path, nn_GPTModel *model) {
    char err[1024];
    safetensors_File f;
    ac_mark mk = ac_arena_mark();
    bool ok = nn_GPTModel_load(path, model, NULL, &f, err, sizeof err);
    ac_arena_release(mk);
    if (!ok) fail("--load %s%s", err, "");
    return ok;
}

/* (C: AdamW draws nothing: it is made before the first line of output, so that a --resume file is
 * checked against it there) */
static optim_Optimizer *new_optimizer(const Flags *a, nn_GPTModel *model) {
    ac_mark mk = ac_arena_mark();
    optim_Optimizer *optimizer = optim_AdamW(nn_named_parameters(&model->module), a->lr, 0.9, 0.999, 1e-8, // optimizer = torch.optim.AdamW(model.parameters(),
                                             a->weight_decay, false);            //     lr=a.lr, weight_decay=a.weight_decay)
    ac_arena_release(mk);
    return optimizer;
}

/* The seed, --resume's weights and stand, the log opened (appended to by a resumed run), the
 * signals caught; false after a message */
static bool start_training(const Flags *a, nn_GPTModel *model, optim_Optimizer *optimizer, Run *run) {
    torch_manual_seed((uint64_t)a->seed);                                         // torch.manual_seed(a.seed)
    if (run->resumed && !resume_weights(a, model, optimizer, run)) return false;
    if (run->at.done < 0 && a->log && !(run->log = fopen(a->log, run->resumed ? "a" : "w"))) { // log = open(a.log, "w") if a.log else None
        fail("cannot write --log %s: %s", a->log, strerror(errno));
        return false;
    }
    longrun_catch_signals("finetune");
    return true;
}

static bool end_training(const Flags *a, nn_GPTModel *model, Run *run, double t0) {
    if (run->log) {
        FILE *f = run->log;
        run->log = NULL;
        if (!ac_close_output(f)) {                                                // log.close()
            fail("writing --log %s failed: %s", a->log, strerror(errno));
            return false;
        }
    }
    longrun_flush("finetune");
    char n1[32], n2[32];
    fprintf(stderr, "(training took %.1f s; the model has %s parameters, %s trainable)\n", cli_now_seconds() - t0, // print(f"(training took ...)", file=sys.stderr)
            cli_thousands(nn_num_parameters(&model->module), n1), cli_thousands(nn_num_trainable_parameters(&model->module), n2));
    return true;
}

/* The run's figure: for the page (--html) and into --plot */
static bool write_figure(const Flags *a, bool (*draw)(FILE *, void *), Figures *fig) {
    if (page_wanted) page_svg = ac_draw_to_string(draw, fig);
    if (a->plot && !ac_write_file_atomic(a->plot, draw, fig)) {
        fail("cannot write --plot %s: %s", a->plot, strerror(errno));
        return false;
    }
    return true;
}

/* Training, or --resume's rest of it; a stop saves and says so (*rc its status, false returned).
 * Then --save at once, before the final lines (answers can take long). */
static bool train_and_save(const Flags *a, nn_GPTModel *model, optim_Optimizer *optimizer, Run *run,
                           int64_t (*train)(void *ctx), void *ctx, int *rc) {
    double t0 = cli_now_seconds();                                                // t0 = time.time()
    if (!start_training(a, model, optimizer, run)) return false;
    if (run->at.done >= 0) return true;                                           /* (C: a resumed run whose training had ended) */
    train(ctx);
    if (longrun_stopping()) {
        char after[64];
        snprintf(after, sizeof after, "step %lld", (long long)run->at.global_step);
        *rc = stop_run(a, model, optimizer, run, after);
        return false;
    }
    if (!end_training(a, model, run, t0)) return false;
    run->at.done = 0;
    return !a->save || save_stand(a, model, NULL, run);                           // if a.save: torch.save(model.state_dict(), a.save)
}

/* Every output path checked and the tokenizer read, before any work; NULL after a message */
static Tokenizer *start_command(const Flags *a) {
    const char *const flags[] = {"--log", "--save", "--plot", "--responses"};
    const char *paths[] = {a->log, a->save, a->plot, a->responses};
    for (int k = 0; k < 4; k++)
        if (paths[k] && !cli_check_output("finetune", flags[k], paths[k])) return NULL;
    char err[1024];
    Tokenizer *tokenizer = tokenizer_load(a->tokenizer, err, sizeof err);        // tokenizer = GPT2Tokenizer(a.tokenizer)
    if (!tokenizer) fail("--tokenizer %s (give GPT-2's encoder.json and vocab.bpe with --tokenizer DIR)", err, "");
    return tokenizer;
}

/* ---- finetune classify --------------------------------------------------------------------------------- */

typedef struct { char dir[4200], paths[3][4300]; bool temporary; } Splits;

static bool make_split_dir(const Flags *a, Splits *s) {
    static const char *const names[] = {"train.csv", "validation.csv", "test.csv"};
    if (a->split_dir) {                                                           // split_dir = a.split_dir or tempfile.mkdtemp()
        snprintf(s->dir, sizeof s->dir, "%s", a->split_dir);
        if (mkdir(s->dir, 0777) != 0 && errno != EEXIST)                         // os.makedirs(split_dir, exist_ok=True)
            return fail("--split-dir %s: %s", s->dir, strerror(errno)), false;
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(s->dir, sizeof s->dir, "%s/finetune-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(s->dir)) return fail("cannot make a temporary directory %s: %s", s->dir, strerror(errno)), false;
        s->temporary = true;
    }
    for (int k = 0; k < 3; k++) snprintf(s->paths[k], sizeof s->paths[k], "%s/%s", s->dir, names[k]);
    return true;
}

static void remove_split_dir(Splits *s) {
    if (!s->temporary) return;
    for (int k = 0; k < 3; k++) unlink(s->paths[k]);
    rmdir(s->dir);
    s->temporary = false;
}

/* The data, as the chapter's cells make it; false after a message. */
typedef struct { SpamFrame df, balanced, parts[3]; SpamDataset *ds[3]; Splits splits; } Data;

static void data_free(Data *d) {
    SpamFrame_free(&d->df), SpamFrame_free(&d->balanced);
    for (int k = 0; k < 3; k++) SpamFrame_free(&d->parts[k]), SpamDataset_free(d->ds[k]);
    remove_split_dir(&d->splits);
}

static bool load_data(const Flags *a, Tokenizer *tokenizer, Data *d) { // (C: cmd_classify's data lines, gathered)
    char err[1024];
    if (!spam_read_tsv(a->data, &d->df, err, sizeof err)) return fail("%s%s", err, ""), false; // df = pd.read_csv(a.data, sep="\t", header=None, names=["Label", "Text"])
    if (!create_balanced_dataset(&d->df, a->seed, &d->balanced, err, sizeof err))  // balanced_df = create_balanced_dataset(df, a.seed)
        return fail("%s%s", err, ""), false;                                        // balanced_df["Label"] = balanced_df["Label"].map({"ham": 0, "spam": 1})
    if (!random_split(&d->balanced, 0.7, 0.1, a->seed, &d->parts[0], &d->parts[1], &d->parts[2], err, sizeof err)) // train_df, validation_df, test_df = random_split(balanced_df, 0.7, 0.1, a.seed)
        return fail("%s%s", err, ""), false;
    static const char *const what[] = {"training", "validation", "test"};
    for (int k = 0; k < 3; k++) /* (C: refused here: the book's loaders need a batch of each, a smaller split has none) */
        if (d->parts[k].n < (k == 0 ? a->batch : 1)) {
            char n[64];
            snprintf(n, sizeof n, "%lld of %lld balanced texts", (long long)d->parts[k].n, (long long)d->balanced.n);
            fflush(stdout);
            fprintf(stderr, "finetune: the %s split has %s (70%%, 10%%, 20%%), %s; %s has too few spam "
                    "(the set is balanced to their number)\n", what[k], n,
                    k == 0 ? "fewer than one --batch (the training loader drops the last, partial one)" : "none",
                    a->data);
            return false;
        }
    if (!make_split_dir(a, &d->splits)) return false;
    for (int k = 0; k < 3; k++)                                                   // d.to_csv(p, index=None)
        if (!spam_to_csv(&d->parts[k], d->splits.paths[k], err, sizeof err)) return fail("%s%s", err, ""), false;
    int64_t max_length = a->max_length > 0 ? a->max_length : SPAM_MAX_LENGTH_NONE;
    for (int k = 0; k < 3; k++) {                                                 // train_dataset = SpamDataset(paths[0], tokenizer, max_length=a.max_length)
        d->ds[k] = SpamDataset_new(d->splits.paths[k], tokenizer, max_length, 50256, err, sizeof err); // val/test: max_length=train_dataset.max_length
        if (!d->ds[k]) return fail("%s%s", err, ""), false;
        max_length = d->ds[0]->max_length;
    }
    return true;
}

static bool print_counts(const SpamFrame *f, bool mapped) {
    char *s = spam_value_counts(f, mapped);
    if (!s) return false;
    printf("%s\n", s);
    free(s);
    return true;
}

/* appendix E: a new head first, then everything frozen, then LoRA on every Linear;
 * chapter 6: all frozen, a new head, the last block and the final norm trainable */
static void prepare_model(nn_GPTModel *model, const Flags *a, int64_t counts[3]) { // (C: cmd_classify's model lines, gathered; print_model prints them)
    int64_t emb_dim = model->cfg.emb_dim;
    if (a->lora) {                                                                // if a.lora:
        torch_manual_seed((uint64_t)a->seed);                                     //     torch.manual_seed(a.seed)
        model->out_head = (nn_Linear *)nn_setattr(&model->module, "out_head", &nn_Linear_new(emb_dim, 2, true)->module); // model.out_head = torch.nn.Linear(cfg["emb_dim"], 2)
        counts[0] = nn_num_trainable_parameters(&model->module);                  //     print(f"Total trainable parameters before: {count_trainable(model):,}")
        nn_requires_grad_(&model->module, false);                                 //     for p in model.parameters(): p.requires_grad = False
        counts[1] = nn_num_trainable_parameters(&model->module);                  //     print(f"Total trainable parameters after: {count_trainable(model):,}")
        nn_replace_linear_with_lora(&model->module, a->lora, a->lora_alpha);      //     replace_linear_with_lora(model, a.lora, a.lora_alpha)
        counts[2] = nn_num_trainable_parameters(&model->module);                  //     print(f"Total trainable LoRA parameters: {count_trainable(model):,}")
    } else {                                                                      // else:
        nn_requires_grad_(&model->module, false);                                 //     for p in model.parameters(): p.requires_grad = False
        torch_manual_seed((uint64_t)a->seed);                                     //     torch.manual_seed(a.seed)
        model->out_head = (nn_Linear *)nn_setattr(&model->module, "out_head", &nn_Linear_new(emb_dim, 2, true)->module); // model.out_head = torch.nn.Linear(cfg["emb_dim"], 2)
        nn_requires_grad_(nn_Sequential_get(model->trf_blocks, -1), true);        //     for p in model.trf_blocks[-1].parameters(): p.requires_grad = True
        nn_requires_grad_(&model->final_norm->module, true);                      //     for p in model.final_norm.parameters(): p.requires_grad = True
        counts[0] = nn_num_trainable_parameters(&model->module);                  //     print(f"Total trainable parameters: {count_trainable(model):,}")
    }
}

/* (C: the model is made before the first line of output, so that a --gpt2, --load or --resume that
 * does not fit is refused before any; its lines come here, where the chapter prints them) */
static void print_model(nn_GPTModel *model, const Flags *a, const int64_t counts[3]) {
    char n[32];
    if (a->lora) {
        printf("Total trainable parameters before: %s\n", cli_thousands(counts[0], n));
        printf("Total trainable parameters after: %s\n", cli_thousands(counts[1], n));
        printf("Total trainable LoRA parameters: %s\n", cli_thousands(counts[2], n));
    } else {
        printf("Total trainable parameters: %s\n", cli_thousands(counts[0], n));
    }
    if (a->print_model) nn_print(&model->module);                                 // if a.print_model: print(model)
    longrun_flush("finetune");
}

static void print_accuracies(TensorDataLoader *loaders, nn_GPTModel *model, int64_t num_batches) {
    static const char *const names[] = {"Training", "Validation", "Test"};
    for (int k = 0; k < 3; k++)                                                   // print(f"Training accuracy: {calc_accuracy_loader(train_loader, model, 10) * 100:.2f}%")
        printf("%s accuracy: %.2f%%\n", names[k], gpt_calc_accuracy_loader(&loaders[k], model, num_batches) * 100);
}

typedef struct { nn_GPTModel *model; TensorDataLoader *loaders; optim_Optimizer *optimizer; const Flags *a; Run *run; } ClassifyTraining;

static int64_t classify_training(void *ctx) {
    ClassifyTraining *c = ctx;
    return train_classifier_simple(c->model, &c->loaders[0], &c->loaders[1], c->optimizer, c->a->epochs, c->a->eval_freq,
                                   c->a->eval_iter, c->run);
}

static int cmd_classify(const Flags *a) {
    char err[1024];
    Tokenizer *tokenizer = start_command(a);                                      // tokenizer = GPT2Tokenizer(a.tokenizer)
    if (!tokenizer) return 1;
    Data d = {0};
    int rc = 1;
    nn_GPTModel *model = NULL;
    optim_Optimizer *optimizer = NULL;
    Run run = {0};
    int64_t counts[3] = {0};
    if (!load_data(a, tokenizer, &d)) goto out;
    if (!(model = model_for(a))) goto out;                                        // model, cfg = model_for(a)
    if (d.ds[0]->max_length > model->cfg.context_length) {                        // assert train_dataset.max_length <= cfg["context_length"]
        fflush(stdout);
        fprintf(stderr, "finetune: Dataset length %lld exceeds model's context length %lld (--max-length N cuts the texts)\n",
                (long long)d.ds[0]->max_length, (long long)model->cfg.context_length);
        goto out;
    }
    prepare_model(model, a, counts);
    TensorDataLoader loaders[3] = {
        TensorDataLoader_new(&d.ds[0]->dataset, a->batch, true, true),            // train_loader = DataLoader(train_dataset, batch_size=a.batch, shuffle=True, drop_last=True)
        TensorDataLoader_new(&d.ds[1]->dataset, a->batch, false, false),          // val_loader = DataLoader(val_dataset, batch_size=a.batch, drop_last=False)
        TensorDataLoader_new(&d.ds[2]->dataset, a->batch, false, false)};         // test_loader = DataLoader(test_dataset, batch_size=a.batch, drop_last=False)
    if (!a->load) optimizer = new_optimizer(a, model);
    run.at = (Stand){.epoch = 0, .batches_done = -1, .global_step = -1, .seen = 0, .done = -1,
                     .train_batches = TensorDataLoader_len(&loaders[0]), .batch = a->batch};
    if (a->load && !check_weights(a, "--load", a->load, model, NULL)) goto out;
    if (a->resume && !read_stand(a, model, optimizer, run.at.train_batches, &run)) goto out;

    if (!run.resumed) { /* (C: a resumed run printed these lines already) */
        print_counts(&d.df, false);                                               // print(df["Label"].value_counts().to_string())
        print_counts(&d.balanced, true);                                          // print(balanced_df["Label"].value_counts().to_string())
        printf("%lld training, %lld validation, %lld test examples; max_length %lld\n", (long long)d.parts[0].n,
               (long long)d.parts[1].n, (long long)d.parts[2].n, (long long)d.ds[0]->max_length);
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed) (C: before the loaders above)
        ac_mark mk = ac_arena_mark();
        TensorDataLoaderIter it = TensorDataLoader_iter(&loaders[0]);             // for x, y in train_loader: pass
        Tensor *x = NULL, *y = NULL, *bx, *by;
        while (TensorDataLoaderIter_next(&it, &bx, &by)) x = bx, y = by;
        TensorDataLoaderIter_free(&it);
        print_size("Input batch dimensions:", " ", x);                            // print("Input batch dimensions:", x.shape)
        print_size("Label batch dimensions", " ", y);                             // print("Label batch dimensions", y.shape)
        ac_arena_release(mk);
        printf("%lld training batches\n", (long long)TensorDataLoader_len(&loaders[0]));
        printf("%lld validation batches\n", (long long)TensorDataLoader_len(&loaders[1]));
        printf("%lld test batches\n", (long long)TensorDataLoader_len(&loaders[2]));
        print_model(model, a, counts);
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed)
        print_accuracies(loaders, model, 10);
        static const char *const names[] = {"Training", "Validation", "Test"};
        bool prev = torch_no_grad_enter();                                        // with torch.no_grad():
        for (int k = 0; k < 3; k++)                                               //     print(f"Training loss: {calc_loss_loader_cls(train_loader, model, 5):.3f}")
            printf("%s loss: %.3f\n", names[k], gpt_calc_loss_loader_cls(&loaders[k], model, 5));
        torch_no_grad_exit(prev);
        longrun_flush("finetune");
    }

    if (a->load) {                                                                // (the C's --load: the weights of a finetuned run)
        if (!load_weights(a->load, model)) goto out;
    } else {
        ClassifyTraining c = {model, loaders, optimizer, a, &run};                // train_classifier_simple(model, train_loader, val_loader, optimizer, ...)
        if (!train_and_save(a, model, optimizer, &run, classify_training, &c, &rc)) goto out;
    }
    static const char *const names[] = {"Training", "Validation", "Test"};
    static const char *const reviews[] = {
        "You are a winner you have been specially selected to receive $1000 cash or a $2000 award.",
        "Hey, just wanted to check if we're still on for dinner tonight? Let me know!"};
    longrun_unit("finetune", "line");
    for (int64_t k = run.at.done < 0 ? 0 : run.at.done; k < 5; k++) {            /* (C: five lines; a stop may come between two) */
        if (longrun_stopping()) {
            char after[64];
            snprintf(after, sizeof after, "training and %lld of the 5 final lines", (long long)k);
            rc = stop_run(a, model, NULL, &run, after);
            goto out;
        }
        if (k < 3) {                                                              // print(f"Training accuracy: {calc_accuracy_loader(train_loader, model) * 100:.2f}%") ...
            printf("%s accuracy: %.2f%%\n", names[k], gpt_calc_accuracy_loader(&loaders[k], model, -1) * 100);
        } else {                                                                  // for text in (...):
            int label = gpt_classify_review(reviews[k - 3], model, tokenizer, d.ds[0]->max_length, 50256, err, sizeof err);
            printf("%s\n", label == 1 ? "spam" : "not spam");                     //     print(classify_review(text, model, tokenizer, max_length=train_dataset.max_length))
        }
        longrun_flush("finetune");
        run.at.done = k + 1;
        longrun_point("line", k + 1);
    }
    Figures fig = {&run.loss, &run.acc, (double)(TensorDataLoader_len(&loaders[0]) * a->batch)};
    if (!write_figure(a, draw_figures, &fig)) goto out;
    rc = 0;
out:
    run_free(&run);
    optim_free(optimizer);
    if (model) nn_free(&model->module);
    data_free(&d);
    tokenizer_free(tokenizer);
    return rc;
}

/* ---- finetune instruct: chapter 7 ------------------------------------------------------------------ */

/* calc_loss_loader(loader, model, num_batches) over the chapter's loader (chapter 5's function) */
static double calc_loss_loader(InstructDataLoader *loader, nn_GPTModel *model, // def calc_loss_loader(
                               int64_t num_batches) {                          //     loader, model, num_batches=None):
    int64_t len = InstructDataLoader_len(loader);
    if (len == 0) return NAN;                                                     // if len(loader) == 0: return float("nan")
    num_batches = num_batches < 0 ? len : num_batches < len ? num_batches : len; // num_batches = min(num_batches, len(loader))
    double total = 0.0;                                                           // total = 0.0
    InstructDataLoaderIter it = InstructDataLoader_iter(loader);                  // for i, (x, y) in enumerate(loader):
    Tensor *x, *y;
    for (int64_t i = 0; i < num_batches && InstructDataLoaderIter_next(&it, &x, &y); i++) {
        ac_mark mk = ac_arena_mark();
        total += torch_item(gpt_calc_loss_batch(x, y, model));                    //     total += calc_loss_batch(x, y, model).item()
        ac_arena_release(mk);
    }
    InstructDataLoaderIter_free(&it);
    return total / (double)num_batches;                                           // return total / num_batches
}

static bool py_isspace(uint32_t c) { /* str.isspace() */
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

#define RESPONSE_TAG "### Response:"

/* The answer in the generated text so far: .replace("### Response:", "").strip(), holding back what
 * may still change (a tag begun, white space that text may follow) until `final`. Returns its length
 * in out (malloc'd by the caller, len + 1 bytes). */
static size_t answer_of(const char *text, size_t len, bool final, char *out) { // (C: respond's answer, as text streams in)
    size_t o = 0, tag = strlen(RESPONSE_TAG), held = 0; /* (C: held: trailing white space, kept back) */
    bool started = false;
    for (size_t i = 0; i < len;) {
        if (!strncmp(text + i, RESPONSE_TAG, len - i < tag ? len - i : tag)) {
            if (len - i < tag) { /* (C: a tag that may be completing) */
                if (final) memcpy(out + o, text + i, len - i), o += len - i, held = 0;
                break;
            }
            i += tag;                                                             // .replace("### Response:", "")
            continue;
        }
        uint32_t c = 0;
        int n = chartext_utf8_next(text + i, len - i, &c);
        if (n == 0) n = 1, c = 0xFFFD; /* (C: decode's text is UTF-8: not reached) */
        if (py_isspace(c)) {
            if (started) memcpy(out + o, text + i, (size_t)n), o += (size_t)n, held += (size_t)n; // .strip() (C: leading ones dropped)
        } else {
            memcpy(out + o, text + i, (size_t)n), o += (size_t)n, held = 0, started = true;
        }
        i += (size_t)n;
    }
    o -= held;                                                                    // .strip() (C: trailing ones dropped)
    out[o] = 0;
    return o;
}

typedef struct { Tokenizer *tok; int64_t *ids, n, cap; size_t printed; bool stream; } Answer;

static int64_t tokens_generated; /* (C: every answer's new tokens, for the live line) */

static bool on_answer_token(int64_t token, void *ctx) {
    Answer *s = ctx;
    tokens_generated++;
    if (s->n == s->cap) s->ids = ac_realloc(s->ids, ac_size_mul(sizeof(int64_t), (size_t)(s->cap = s->cap ? 2 * s->cap : 256)));
    s->ids[s->n++] = token;
    if (!s->stream) return true;
    ac_mark mk = ac_arena_mark();
    char err[256];
    size_t len;
    char *text = tokenizer_decode(s->tok, s->ids, s->n, &len, err, sizeof err);
    if (!text) ac_error("decode: %s", err);
    if (len >= 3 && !memcmp(text + len - 3, "\xEF\xBF\xBD", 3)) len -= 3; /* a character still arriving */
    char *ans = ac_arena_alloc(len + 1);
    size_t n = answer_of(text, len, false, ans);
    if (n > s->printed) fwrite(ans + s->printed, 1, n - s->printed, stdout), s->printed = n;
    fflush(stdout);
    ac_arena_release(mk);
    return true;
}

/* respond(model, tokenizer, entry, context, max_new_tokens): greedy generate with eos_id=50256, the
 * text after the prompt, "### Response:" taken out, stripped. (Cutting the decoded whole at
 * len(input_text) characters leaves the new tokens' text: the prompt's tokens decode to it exactly.)
 * With stream, printed as it comes. malloc'd; NULL after a message. */
static char *respond(nn_GPTModel *model, Tokenizer *tok,                           // def respond(model, tokenizer,
                     const char *input_text, size_t input_len,                      //     entry, (C: its format_input text)
                     int64_t context, int64_t max_new_tokens, bool stream) {        //     context, max_new_tokens):
    char err[512];
    ac_mark mk = ac_arena_mark();
    Tensor *idx = tokenizer_encode(tok, input_text, input_len, TOKENIZER_ALLOW_SPECIAL, err, sizeof err); // text_to_token_ids(input_text, tokenizer)
    if (!idx) return ac_arena_release(mk), fail("the prompt does not encode: %s%s", err, ""), NULL;
    Answer s = {.tok = tok, .stream = stream};
    gpt_generate_ex(model, torch_unsqueeze(idx, 0), max_new_tokens, context, 0.0, 0, 50256, true, on_answer_token, &s); // generate(model, ..., max_new_tokens, context, eos_id=50256)
    size_t len = 0;
    char *text = tokenizer_decode(tok, s.ids, s.n, &len, err, sizeof err);       // token_ids_to_text(ids, tokenizer)[len(input_text):]
    if (!text) ac_error("decode: %s", err);
    char *ans = ac_malloc(len + 1);
    size_t n = answer_of(text, len, true, ans);                                   // .replace("### Response:", "").strip()
    if (stream && n > s.printed) fwrite(ans + s.printed, 1, n - s.printed, stdout);
    free(s.ids);
    ac_arena_release(mk);
    return ans;
}

/* generate_and_print_sample(model, tokenizer, start_context, 50): chapter 5's, greedy */
static void generate_and_print_sample(nn_GPTModel *model, Tokenizer *tok, const char *start_context, size_t len,
                                      int64_t max_new_tokens) {
    char err[512];
    ac_mark mk = ac_arena_mark();
    nn_eval(&model->module);                                                      // model.eval()
    Tensor *ids = tokenizer_encode(tok, start_context, len, TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    if (!ids) ac_error("the sample's prompt does not encode: %s", err);
    ids = gpt_generate_ex(model, torch_unsqueeze(ids, 0), max_new_tokens,        // generate_text_simple(model, encoded, 50,
                          model->pos_emb->weight->shape[0], 0.0, 0, -1, true, NULL, NULL); //     context_size=model.pos_emb.weight.shape[0])
    Tensor *c = torch_contiguous(ids);
    size_t n;
    char *text = tokenizer_decode(tok, (const int64_t *)c->data + c->offset, torch_numel(c), &n, err, sizeof err);
    if (!text) ac_error("decode: %s", err);
    for (size_t i = 0; i < n; i++)                                                // print(decoded_text.replace("\n", " "))
        if (text[i] == '\n') text[i] = ' ';
    fwrite(text, 1, n, stdout);
    putchar('\n');
    longrun_flush("finetune");
    nn_train(&model->module, true);                                               // model.train()
    ac_arena_release(mk);
}

static int64_t train_model_simple(nn_GPTModel *model, InstructDataLoader *train_loader,     // def train_model_simple(model, train_loader,
                                  InstructDataLoader *val_loader, optim_Optimizer *optimizer, //         val_loader, optimizer,
                                  int64_t num_epochs, int64_t eval_freq, int64_t eval_iter,   //         num_epochs, eval_freq, eval_iter,
                                  const char *start_context, size_t start_len,               //         start_context,
                                  Tokenizer *tok, Run *run) {                                 //         tokenizer, log):
    Stand *at = &run->at; /* (C: where the run stands; a --resume starts there) */
    int64_t tokens_seen = at->seen, global_step = at->global_step;               // tokens_seen, global_step = 0, -1
    int64_t per_epoch = InstructDataLoader_len(train_loader);
    longrun_live live;
    longrun_live_start(&live, global_step + 1);
    for (int64_t epoch = at->epoch; epoch < num_epochs; epoch++) {                // for epoch in range(num_epochs):
        nn_train(&model->module, true);                                           //     model.train()
        InstructDataLoaderIter it = {train_loader, 0, 0, NULL, false, false};    //     for x, y in train_loader:
        if (epoch == at->epoch && at->batches_done >= 0)                          /* (C: a resumed epoch: its order, its batches done) */
            it.order = at->order, it.next = at->batches_done, it.started = at->order != NULL, at->order = NULL;
        else
            it = InstructDataLoader_iter(train_loader);
        Tensor *x, *y;
        while (!longrun_stopping() && InstructDataLoaderIter_next(&it, &x, &y)) {
            ac_mark mk = ac_arena_mark();
            optim_zero_grad(optimizer);                                           //         optimizer.zero_grad()
            Tensor *loss = gpt_calc_loss_batch(x, y, model);                      //         loss = calc_loss_batch(x, y, model)
            torch_backward(loss, NULL);                                           //         loss.backward()
            optim_step(optimizer);                                                //         optimizer.step()
            tokens_seen += torch_numel(x);                                        //         tokens_seen += x.numel()
            global_step += 1;                                                     //         global_step += 1
            if (run->log) fprintf(run->log, "step %lld loss %.6f\n", (long long)global_step, torch_item(loss)); // log.write(...)
            ac_arena_release(mk);
            char what[64];
            snprintf(what, sizeof what, "epoch %lld/%lld  step", (long long)epoch + 1, (long long)num_epochs);
            longrun_live_show(&live, what, global_step + 1, per_epoch * num_epochs, (double)(tokens_seen - at->seen), "tokens");
            if (global_step % eval_freq == 0) {                                   //         if global_step % eval_freq == 0:
                nn_eval(&model->module);                                          //             evaluate_model(model, train_loader, val_loader, eval_iter)
                bool prev = torch_no_grad_enter();
                double train_loss = calc_loss_loader(train_loader, model, eval_iter);
                double val_loss = calc_loss_loader(val_loader, model, eval_iter);
                torch_no_grad_exit(prev);
                nn_train(&model->module, true);
                longrun_live_clear(&live);
                printf("Ep %lld (Step %06lld): Train loss %.3f, Val loss %.3f\n", (long long)epoch + 1,
                       (long long)global_step, train_loss, val_loss);
                longrun_flush("finetune");
                ac_points_add(&run->loss, (double)(global_step + 1) / (double)per_epoch, train_loss, val_loss);
            }
            at->global_step = global_step, at->seen = tokens_seen;
            longrun_point("step", global_step);
        }
        if (longrun_stopping() && !it.done) {                                     /* (C: stopped inside the epoch: the save records where) */
            stand_in_epoch(at, epoch, it.order, InstructionDataset_len(train_loader->dataset), it.next);
            InstructDataLoaderIter_free(&it);
            longrun_live_clear(&live);
            return tokens_seen;
        }
        InstructDataLoaderIter_free(&it);
        longrun_live_clear(&live);
        generate_and_print_sample(model, tok, start_context, start_len, 50);     //     generate_and_print_sample(model, tokenizer, start_context, 50)
        at->epoch = epoch + 1, at->batches_done = -1;                             /* (C: the next epoch, from its start) */
        if (longrun_stopping()) break;
    }
    return tokens_seen;                                                           // return tokens_seen
}

/* plot_losses(epochs_seen, tokens_seen, train_losses, val_losses) */
static bool draw_instruct_losses(FILE *f, void *u) {
    const Figures *p = u;
    ac_series l[2] = {{"Training loss", p->loss->n, p->loss->x, p->loss->a}, {"Validation loss", p->loss->n, p->loss->x, p->loss->b}};
    ac_plot_opts o = {.title = "Instruction finetuning (chapter 7)", .xlabel = "Epochs", .ylabel = "Loss",
                      .x2label = "Tokens seen", .x2_per_x = p->examples_per_epoch};
    return ac_plot_svg(f, &o, p->loss->n ? 2 : 0, l);
}

static void print_shapes(Tensor *a, Tensor *b) {
    printf("torch.Size([%lld, %lld]) torch.Size([%lld, %lld])\n", (long long)a->shape[0], (long long)a->shape[1],
           (long long)b->shape[0], (long long)b->shape[1]);
}

/* The longest input a batch of ds can give the model: min(longest entry, allowed_max_length) */
static bool fits_context(const InstructionDataset *ds, const char *split, int64_t allowed, int64_t context) {
    for (int64_t i = 0; i < InstructionDataset_len(ds); i++) {
        int64_t n;
        InstructionDataset_getitem(ds, i, &n);
        if ((n < allowed ? n : allowed) > context) {
            fflush(stdout);
            fprintf(stderr, "finetune: %s entry %lld has %lld tokens, more than the model's context_length %lld "
                    "(--allowed-max-length %lld cuts the batches)\n", split, (long long)i, (long long)n, (long long)context,
                    (long long)context);
            return false;
        }
    }
    return true;
}

static int answer_prompt(const Flags *a, Tokenizer *tok, nn_GPTModel *model) {
    size_t len;
    char *text;
    if (!strcmp(a->prompt, "-")) {                                                /* - : stdin, less one final newline */
        char err[512];
        text = ac_read_stream(stdin, "stdin", &len, err, sizeof err);
        if (!text) return fail("--prompt -: %s%s", err, "");
        if (len && text[len - 1] == '\n') text[--len] = 0;
    } else {
        len = strlen(a->prompt);
        text = ac_malloc(len + 1);
        memcpy(text, a->prompt, len + 1);
    }
    JsonValue *entry = json_new_object();                                         /* {"instruction": TEXT, "input": ""} */
    json_set_string(entry, "instruction", text, len);
    json_set_string(entry, "input", "", 0);
    size_t plen;
    char *prompt = format_input_len(entry, &plen);                                /* format_input(entry) */
    nn_eval(&model->module);
    torch_manual_seed((uint64_t)a->seed);
    char *ans = respond(model, tok, prompt, plen, model->cfg.context_length, a->max_new_tokens, true);
    if (ans) putchar('\n');
    free(ans), free(prompt), free(text);
    json_free(entry);
    return ans ? 0 : 1;
}

typedef struct {
    nn_GPTModel *model; InstructDataLoader *train_loader, *val_loader; optim_Optimizer *optimizer; const Flags *a; Run *run;
    const char *start; size_t start_len; Tokenizer *tok;
} InstructTraining;

static int64_t instruct_training(void *ctx) {
    InstructTraining *c = ctx;
    return train_model_simple(c->model, c->train_loader, c->val_loader, c->optimizer, c->a->epochs, c->a->eval_freq,
                              c->a->eval_iter, c->start, c->start_len, c->tok, c->run);
}

static int cmd_instruct(const Flags *a) {
    char err[1024];
    Tokenizer *tokenizer = start_command(a);                                      // tokenizer = GPT2Tokenizer(a.tokenizer)
    if (!tokenizer) return 1;
    int rc = 1;
    JsonValue *data = NULL, *test_json = NULL;
    InstructionDataset *train_ds = NULL, *val_ds = NULL;
    nn_GPTModel *model = NULL;
    optim_Optimizer *optimizer = NULL;
    Run run = {0};
    char *start = NULL;
    if (a->prompt) { /* an answer of a finetuned model: no data */
        if (!(model = model_for(a)) || !check_weights(a, "--load", a->load, model, NULL) || !load_weights(a->load, model))
            goto out;
        rc = answer_prompt(a, tokenizer, model);
        goto out;
    }
    if (!(data = instruct_load(a->data, err, sizeof err))) {                      // with open(a.data) as f: data = json.load(f)
        fail("%s%s", err, "");
        goto out;
    }
    InstructSplits sp = instruct_split(data, a->subset);                         // train_data, test_data, val_data = ... ([:a.subset])
    if (sp.train.n < a->batch || sp.val.n < 1) {                                  /* the book's loop needs a batch of each */
        fflush(stdout);
        fprintf(stderr, "finetune: %s: the %s split has %lld entries, %s (85%% training, 10%% test, the rest validation)\n",
                a->data, sp.train.n < a->batch ? "training" : "validation",
                (long long)(sp.train.n < a->batch ? sp.train.n : sp.val.n),
                sp.train.n < a->batch ? "fewer than one --batch (the training loader drops the last, partial one)"
                                      : "none: the sample prompt is the first validation entry's");
        goto out;
    }
    if (!(train_ds = InstructionDataset_new(sp.train, tokenizer, err, sizeof err)) ||
        !(val_ds = InstructionDataset_new(sp.val, tokenizer, err, sizeof err))) {
        fail("%s: %s", a->data, err);
        goto out;
    }
    if (!(model = model_for(a))) goto out;                                        // model, cfg = model_for(a)
    if (!fits_context(train_ds, "training", a->allowed_max_length, model->cfg.context_length) ||
        !fits_context(val_ds, "validation", a->allowed_max_length, model->cfg.context_length))
        goto out;
    CollateArgs collate = {50256, -100, a->allowed_max_length};                   // collate = partial(custom_collate_fn, allowed_max_length=a.allowed_max_length)
    InstructDataLoader train_loader = InstructDataLoader_new(train_ds, a->batch, true, true, collate); // DataLoader(..., shuffle=True, drop_last=True)
    InstructDataLoader val_loader = InstructDataLoader_new(val_ds, a->batch, false, false, collate);   // DataLoader(..., shuffle=False, drop_last=False)
    if (!a->load) optimizer = new_optimizer(a, model);
    run.at = (Stand){.epoch = 0, .batches_done = -1, .global_step = -1, .seen = 0, .done = -1,
                     .train_batches = InstructDataLoader_len(&train_loader), .batch = a->batch};
    if (a->load && !check_weights(a, "--load", a->load, model, NULL)) goto out;
    if (a->resume && !read_stand(a, model, optimizer, run.at.train_batches, &run)) goto out;

    if (!run.resumed) { /* (C: a resumed run printed these lines already) */
        printf("Number of entries: %zu\n", json_len(data));                       // print("Number of entries:", len(data))
        printf("Training set length: %lld\n", (long long)sp.train.n);            // print("Training set length:", len(train_data))
        printf("Validation set length: %lld\n", (long long)sp.val.n);
        printf("Test set length: %lld\n", (long long)sp.test.n);
        longrun_flush("finetune");
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed) (C: before the loaders above)
        if (a->show_batches) {                                                    // if a.show_batches:
            printf("Train loader:\n");                                            //     print("Train loader:")
            ac_mark mk = ac_arena_mark();
            InstructDataLoaderIter it = InstructDataLoader_iter(&train_loader);   //     for inputs, targets in train_loader:
            Tensor *x = NULL, *y = NULL;
            while (InstructDataLoaderIter_next(&it, &x, &y)) print_shapes(x, y); //         print(inputs.shape, targets.shape)
            InstructDataLoaderIter_free(&it);
            torch_print(torch_select(x, 0, 0));                                   //     print(inputs[0])
            torch_print(torch_select(y, 0, 0));                                   //     print(targets[0])
            longrun_flush("finetune");
            ac_arena_release(mk);
        }
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed)
        char b1[32], b2[32];
        bool prev = torch_no_grad_enter();                                        // with torch.no_grad():
        double tl = calc_loss_loader(&train_loader, model, 5), vl = calc_loss_loader(&val_loader, model, 5);
        torch_no_grad_exit(prev);
        printf("Training loss: %s\n", ac_pyfloat(tl, b1));                        //     print("Training loss:", calc_loss_loader(train_loader, model, 5))
        printf("Validation loss: %s\n", ac_pyfloat(vl, b2));                      //     print("Validation loss:", calc_loss_loader(val_loader, model, 5))
        longrun_flush("finetune");
    }
    if (a->load) {                                                                /* (the C's --load: a finetuned run's weights) */
        if (!load_weights(a->load, model)) goto out;
    } else {
        size_t start_len;
        start = format_input_len(sp.val.entries[0], &start_len);                 // format_input(val_data[0])
        InstructTraining c = {model, &train_loader, &val_loader, optimizer, a, &run, start, start_len, tokenizer}; // train_model_simple(...)
        if (!train_and_save(a, model, optimizer, &run, instruct_training, &c, &rc)) goto out;
    }
    nn_eval(&model->module);                                                      // model.eval()
    torch_manual_seed((uint64_t)a->seed);                                         // torch.manual_seed(a.seed)
    test_json = instruct_list_json(sp.test);
    int64_t n_answers = a->responses ? sp.test.n : sp.test.n < 3 ? sp.test.n : 3;
    int64_t first = answers_start(&run, n_answers);                               /* (C: a resumed run's answers done) */
    for (int64_t i = 0; i < first; i++)
        json_set_string(json_at(test_json, (size_t)i), "model_response", run.at.answers[i], strlen(run.at.answers[i]));
    longrun_live live;
    longrun_live_start(&live, first);
    int64_t tokens0 = tokens_generated;
    for (int64_t i = first; i < n_answers; i++) {                                 // for entry in test_data[:3]: (and all of them for --responses)
        if (longrun_stopping()) {
            char after[64];
            snprintf(after, sizeof after, "answer %lld of %lld", (long long)i, (long long)n_answers);
            rc = stop_run(a, model, NULL, &run, after);
            goto out;
        }
        JsonValue *entry = json_at(test_json, (size_t)i);
        size_t plen;
        char *prompt = format_input_len(entry, &plen);
        char *ans = respond(model, tokenizer, prompt, plen, model->cfg.context_length, a->max_new_tokens, false);
        if (!ans) {
            free(prompt);
            goto out;
        }
        longrun_live_clear(&live);
        if (i < 3) {
            fwrite(prompt, 1, plen, stdout);                                      //     print(format_input(entry))
            printf("\n\nCorrect response:\n>> %s\n", instruct_field(entry, "output")); // print(f"\nCorrect response:\n>> {entry['output']}")
            printf("\nModel response:\n>> %s\n", ans);                            //     print(f"\nModel response:\n>> {respond(...)}")
            printf("-------------------------------------\n");
            longrun_flush("finetune");
        }
        json_set_string(entry, "model_response", ans, strlen(ans));               // entry["model_response"] = respond(...)
        free(prompt);
        run.at.answers[i] = ans, run.at.done = i + 1;
        longrun_live_show(&live, "answer", i + 1, n_answers, (double)(tokens_generated - tokens0), "tokens");
        longrun_point("answer", i + 1);
    }
    longrun_live_clear(&live);
    if (a->responses && !json_dump(test_json, a->responses, 4, err, sizeof err)) { // json.dump(test_data, f, indent=4)
        fail("--responses %s%s", err, "");
        goto out;
    }
    Figures fig = {&run.loss, &run.acc, a->epochs ? (double)run.at.seen / (double)a->epochs : 0}; /* (C: batches vary in length: the run's mean) */
    if (!write_figure(a, draw_instruct_losses, &fig)) goto out;
    rc = 0;
out:
    run_free(&run);
    free(start);
    optim_free(optimizer);
    if (model) nn_free(&model->module);
    InstructionDataset_free(train_ds), InstructionDataset_free(val_ds);
    json_free(test_json), json_free(data);
    tokenizer_free(tokenizer);
    return rc;
}

/* ---- finetune dpo: the book's DPO notebook (ch07/04_preference-tuning-with-dpo), after chapter 7 ---------- */

/* print(tokenizer.decode(ids)) */
static void print_decoded(Tokenizer *tok, const int64_t *ids, int64_t n) {
    char err[256];
    size_t len;
    ac_mark mk = ac_arena_mark();
    char *text = tokenizer_decode(tok, ids, n, &len, err, sizeof err);
    if (!text) ac_error("decode: %s", err);
    fwrite(text, 1, len, stdout);
    putchar('\n');
    ac_arena_release(mk);
}

/* print(decode_tokens_from_batch(row[mask], tokenizer)): the ids the mask keeps */
static void print_masked(Tokenizer *tok, Tensor *row, Tensor *mask) {
    int64_t n = row->shape[0], k = 0;
    int64_t *ids = ac_arena_alloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    const int64_t *x = (const int64_t *)row->data + row->offset;
    const bool *m = (const bool *)mask->data + mask->offset;
    for (int64_t t = 0; t < n; t++)
        if (m[t]) ids[k++] = x[t];
    print_decoded(tok, ids, k);
}

/* The notebook's cells before the split: pprint.pp(data[50]), pprint.pp(data[999]), format_input(data[50])
 * and its two responses */
static void show_data(const JsonValue *data) { // (C: the notebook's data cells)
    static const size_t at[] = {50, 999};
    for (int k = 0; k < 2; k++)
        if (at[k] < json_len(data)) pprint_pp(json_at(data, at[k]), stdout);     // pprint.pp(data[50])
    if (json_len(data) <= 50) return;
    const JsonValue *e = json_at(data, 50);
    size_t len;
    char *model_input = format_input_len(e, &len);                              // model_input = format_input(data[50])
    fwrite(model_input, 1, len, stdout);                                          // print(model_input)
    printf("\n### Response:\n%s\n", instruct_field(e, "chosen"));                // print(f"### Response:\n{data[50]['chosen']}")
    printf("### Response:\n%s\n", instruct_field(e, "rejected"));                // print(f"### Response:\n{data[50]['rejected']}")
    free(model_input);
}

/* The two-entry example of custom_collate_fn */
static bool show_example(const JsonValue *data, Tokenizer *tok, const Flags *a) { // (C: the notebook's collate cells)
    char err[1024];
    InstructList example_data = {data->items, json_len(data) < 2 ? (int64_t)json_len(data) : 2}; // example_data = data[:2]
    for (int64_t i = 0; i < example_data.n; i++) {                               // for i in example_data:
        putchar('\n');                                                            //     print()
        pprint_pp(example_data.entries[i], stdout);                               //     pprint.pp(i)
    }
    PreferenceDataset *ds = PreferenceDataset_new(example_data, tok, err, sizeof err); // example_dataset = PreferenceDataset(example_data, tokenizer)
    if (!ds) return fail("%s: %s", a->data, err), false;
    ac_mark mk = ac_arena_mark();
    PreferenceBatch batch;                                                        // for batch in example_dataloader: break
    preference_collate_fn(ds, (const int64_t[]){0, 1}, example_data.n, 50256, a->allowed_max_length, true, &batch);
    printf("batch.keys: dict_keys(['prompt', 'chosen', 'rejected', 'rejected_mask', 'chosen_mask'])\n");
    printf("[");                                                                  // batch["prompt"] (a list of tensors, as the notebook shows it)
    for (int64_t r = 0; r < batch.n; r++) {
        const char *s = torch_repr(torch_tensor_long(batch.prompt[r], SHAPE(batch.prompt_lens[r])));
        if (r) printf(",\n ");
        for (; *s; s++) *s == '\n' ? (void)fputs("\n ", stdout) : (void)putchar(*s);
    }
    printf("]\n");
    torch_print(batch.chosen);                                                    // batch["chosen"]
    print_decoded(tok, batch.prompt[0], batch.prompt_lens[0]);                    // print(decode_tokens_from_batch(batch["prompt"][0], tokenizer))
    Tensor *chosen0 = torch_select(batch.chosen, 0, 0), *rejected0 = torch_select(batch.rejected, 0, 0);
    print_decoded(tok, (const int64_t *)chosen0->data + chosen0->offset, chosen0->shape[0]); // ... batch["chosen"][0]
    print_decoded(tok, (const int64_t *)rejected0->data + rejected0->offset, rejected0->shape[0]); // ... batch["rejected"][0]
    Tensor *chosen_mask0 = torch_select(batch.chosen_mask, 0, 0);
    print_size("chosen inputs:", " ", chosen0);                                   // print("chosen inputs:", batch["chosen"][0].shape)
    print_size("chosen mask:  ", " ", chosen_mask0);                              // print("chosen mask:  ", batch["chosen_mask"][0].shape)
    torch_print(chosen_mask0);                                                    // batch["chosen_mask"][0]
    print_masked(tok, chosen0, chosen_mask0);                                     // ... batch["chosen"][0][batch["chosen_mask"][0]]
    print_masked(tok, rejected0, torch_select(batch.rejected_mask, 0, 0));        // ... batch["rejected"][0][batch["rejected_mask"][0]]
    ac_arena_release(mk);
    PreferenceDataset_free(ds);
    return true;
}

/* The notebook's two demonstrations of gather */
static void show_gather(void) { // (C: the notebook's gather cells)
    ac_mark mk = ac_arena_mark();
    Tensor *logits = torch_tensor((const float[]){2.0f, 1.0f, 0.1f, 0.5f, 2.5f, 0.3f}, SHAPE(2, 3)); // logits = torch.tensor(...)
    Tensor *targets = torch_tensor_long((const int64_t[]){0, 2}, SHAPE(2));      // targets = torch.tensor([0, 2])
    Tensor *log_softmax_logits = torch_log_softmax(logits, 1);                    // log_softmax_logits = F.log_softmax(logits, dim=1)
    Tensor *selected_log_probs = torch_reshape(                                   // selected_log_probs = torch.gather(input=log_softmax_logits,
        torch_gather(log_softmax_logits, 1, torch_unsqueeze(targets, 1)), SHAPE(2)); //     dim=1, index=targets.unsqueeze(1)).squeeze(1)
    Tensor *manual_loss = torch_neg(torch_mean(selected_log_probs));              // manual_loss = -selected_log_probs.mean()
    Tensor *cross_entropy_loss = torch_cross_entropy(logits, targets, -100);     // cross_entropy_loss = F.cross_entropy(logits, targets)
    printf("%s %s\n", torch_repr(manual_loss), torch_repr(cross_entropy_loss));  // print(manual_loss, cross_entropy_loss)
    Tensor *t = torch_tensor((const float[]){1, 2, 3, 4}, SHAPE(2, 2));           // t = torch.tensor([[1., 2.,], [3., 4.]])
    Tensor *m = torch_tensor_long((const int64_t[]){1, 1, 0, 1}, SHAPE(2, 2));    // m = torch.tensor([[1, 1], [0, 1]])
    torch_print(torch_gather(t, -1, m));                                          // torch.gather(input=t, dim=-1, index=m)
    ac_arena_release(mk);
}

/* (C: refused before any work) every training and validation entry keeps a response token of each kind
 * under --allowed-max-length: compute_logprobs divides by their count */
static bool check_response_tokens(const PreferenceDataset *ds, const char *split, int64_t first, const Flags *a) {
    for (int64_t i = 0; i < ds->n; i++)
        for (int key = 0; key < 2; key++)
            if (preference_response_tokens(ds, i, key == 0, a->allowed_max_length) == 0) {
                fflush(stdout);
                fprintf(stderr, "finetune: %s: entry %lld (%s entry %lld), key '%s': its prompt's %lld tokens and the two "
                        "newlines after them leave no response token under --allowed-max-length %lld (%lld tokens in all): "
                        "the mean log-probability would divide by zero\n", a->data, (long long)(first + i), split, (long long)i,
                        key == 0 ? "chosen" : "rejected", (long long)ds->prompt_lens[i], (long long)a->allowed_max_length,
                        (long long)(key == 0 ? ds->chosen_lens[i] : ds->rejected_lens[i]));
                return false;
            }
    return true;
}

/* The longest batch row fits the model: min(longest text, allowed_max_length) <= context_length */
static bool preference_fits(const PreferenceDataset *ds, const char *split, const Flags *a, int64_t context) {
    for (int64_t i = 0; i < ds->n; i++) {
        int64_t n = ds->chosen_lens[i] > ds->rejected_lens[i] ? ds->chosen_lens[i] : ds->rejected_lens[i];
        if (n + 1 > a->allowed_max_length) n = a->allowed_max_length - 1; /* a batch is the longest + 1, then cut */
        if (n + 1 > context) {
            fflush(stdout);
            fprintf(stderr, "finetune: %s entry %lld makes batches of %lld tokens, more than the model's context_length "
                    "%lld (--allowed-max-length %lld cuts them)\n", split, (long long)i, (long long)(n + 1),
                    (long long)context, (long long)context);
            return false;
        }
    }
    return true;
}

typedef struct { const ac_points *loss, *margin; double epochs; } DpoTracking; /* x: tokens seen */

static void train_model_dpo_simple(nn_GPTModel *policy_model, nn_GPTModel *reference_model,   // def train_model_dpo_simple(policy_model, reference_model,
                                   PreferenceDataLoader *train_loader, PreferenceDataLoader *val_loader, //     train_loader, val_loader,
                                   optim_Optimizer *optimizer, int64_t num_epochs, double beta,  //     optimizer, num_epochs, beta,
                                   int64_t eval_freq, int64_t eval_iter,                        //     eval_freq, eval_iter,
                                   const char *start_context, size_t start_len, Tokenizer *tok, //     start_context, tokenizer):
                                   Run *run) {                                                  /* (C: the log; run->loss and run->acc track the losses and margins) */
    Stand *at = &run->at; /* (C: where the run stands; a --resume starts there) */
    int64_t tokens_seen = at->seen, global_step = at->global_step;               // tokens_seen, global_step = 0, -1
    int64_t per_epoch = PreferenceDataLoader_len(train_loader);
    longrun_live live;
    longrun_live_start(&live, global_step + 1);
    for (int64_t epoch = at->epoch; epoch < num_epochs; epoch++) {                // for epoch in range(num_epochs):
        nn_train(&policy_model->module, true);                                    //     policy_model.train()
        PreferenceDataLoaderIter it = {train_loader, 0, 0, NULL, false, false};  //     for batch in train_loader:
        if (epoch == at->epoch && at->batches_done >= 0)                          /* (C: a resumed epoch: its order, its batches done) */
            it.order = at->order, it.next = at->batches_done, it.started = at->order != NULL, at->order = NULL;
        else
            it = PreferenceDataLoader_iter(train_loader);
        PreferenceBatch batch;
        while (!longrun_stopping()) {
            ac_mark mk = ac_arena_mark();
            if (!PreferenceDataLoaderIter_next(&it, &batch)) {
                ac_arena_release(mk);
                break;
            }
            optim_zero_grad(optimizer);                                           //         optimizer.zero_grad()
            gpt_DPOLoss l = gpt_compute_dpo_loss_batch(&batch, policy_model, reference_model, beta); // loss, chosen_rewards, rejected_rewards = compute_dpo_loss_batch(...)
            torch_backward(l.loss, NULL);                                         //         loss.backward()
            optim_step(optimizer);                                                //         optimizer.step()
            tokens_seen += torch_numel(batch.chosen);                             //         tokens_seen += batch["chosen"].numel()
            global_step += 1;                                                     //         global_step += 1
            if (run->log) fprintf(run->log, "step %lld loss %.6f\n", (long long)global_step, torch_item(l.loss)); // log.write(...)
            ac_arena_release(mk);
            char what[64];
            snprintf(what, sizeof what, "epoch %lld/%lld  step", (long long)epoch + 1, (long long)num_epochs);
            longrun_live_show(&live, what, global_step + 1, per_epoch * num_epochs, (double)(tokens_seen - at->seen), "tokens");
            if (global_step % eval_freq == 0) {                                   //         if global_step % eval_freq == 0:
                gpt_DPOEval res = gpt_evaluate_dpo_loss_loader(policy_model, reference_model, train_loader, val_loader, // res = evaluate_dpo_loss_loader(...)
                                                               beta, eval_iter);
                double train_reward_margin = res.train_chosen_reward - res.train_rejected_reward; // train_reward_margin = ...
                double val_reward_margin = res.val_chosen_reward - res.val_rejected_reward;
                ac_points_add(&run->loss, (double)tokens_seen, res.train_loss, res.val_loss); // tracking["train_losses"].append(res["train_loss"]) ...
                ac_points_add(&run->acc, (double)tokens_seen, train_reward_margin, val_reward_margin);
                longrun_live_clear(&live);
                printf("Ep %lld (Step %06lld): Train loss %.3f, Val loss %.3f, Train reward margins %.3f, "
                       "Val reward margins %.3f\n", (long long)epoch + 1, (long long)global_step, res.train_loss, // print(f"Ep {epoch+1} (Step {global_step:06d}): "
                       res.val_loss, train_reward_margin, val_reward_margin);
                longrun_flush("finetune");
            }
            at->global_step = global_step, at->seen = tokens_seen;
            longrun_point("step", global_step);
        }
        if (longrun_stopping() && !it.done) {                                     /* (C: stopped inside the epoch: the save records where) */
            stand_in_epoch(at, epoch, it.order, PreferenceDataset_len(train_loader->dataset), it.next);
            PreferenceDataLoaderIter_free(&it);
            longrun_live_clear(&live);
            return;
        }
        PreferenceDataLoaderIter_free(&it);
        longrun_live_clear(&live);
        generate_and_print_sample(policy_model, tok, start_context, start_len, 50); // generate_and_print_sample(model, tokenizer, start_context)
        at->epoch = epoch + 1, at->batches_done = -1;                             /* (C: the next epoch, from its start) */
        if (longrun_stopping()) break;
    }
}

typedef struct {
    nn_GPTModel *policy, *reference; PreferenceDataLoader *train_loader, *val_loader; optim_Optimizer *optimizer;
    const Flags *a; Run *run; const char *start; size_t start_len; Tokenizer *tok;
} DpoTraining;

static int64_t dpo_training(void *ctx) {
    DpoTraining *c = ctx;
    train_model_dpo_simple(c->policy, c->reference, c->train_loader, c->val_loader, c->optimizer, c->a->epochs, c->a->beta,
                           c->a->eval_freq, c->a->eval_iter, c->start, c->start_len, c->tok, c->run);
    return c->run->at.seen;
}

/* plot_losses(epochs_seen, tokens_seen, train_losses, val_losses, label="loss"), and the same of the reward
 * margins, side by side; epochs_seen = torch.linspace(0, num_epochs, len(train_losses)) */
static bool draw_dpo_figures(FILE *f, void *u) {
    const DpoTracking *t = u;
    int64_t n = t->loss->n;
    double *x = ac_malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = n > 1 ? t->epochs * (double)i / (double)(n - 1) : 0.0;
    double per_epoch = n > 1 && t->epochs > 0 ? t->loss->x[n - 1] / t->epochs : 0;
    ac_series l[2] = {{"Training loss", n, x, t->loss->a}, {"Validation loss", n, x, t->loss->b}};
    ac_series m[2] = {{"Training reward margins", n, x, t->margin->a}, {"Validation reward margins", n, x, t->margin->b}};
    ac_plot_opts lo = {.title = "DPO: the loss", .xlabel = "Epochs", .ylabel = "loss", .x2label = "Tokens seen",
                       .x2_per_x = per_epoch};
    ac_plot_opts mo = {.title = "DPO: the reward margins", .xlabel = "Epochs", .ylabel = "reward margins",
                       .x2label = "Tokens seen", .x2_per_x = per_epoch};
    fputs("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1280\" height=\"400\" viewBox=\"0 0 1280 400\">\n", f);
    bool ok = ac_plot_svg(f, &lo, n ? 2 : 0, l);
    fputs("<g transform=\"translate(640,0)\">\n", f);
    ok = ac_plot_svg(f, &mo, n ? 2 : 0, m) && ok;
    fputs("</g>\n</svg>\n", f);
    free(x);
    return ok && !ferror(f);
}

static int cmd_dpo(const Flags *a) {
    char err[1024];
    if (!(a->beta > 0)) { /* (C: refused: -logsigmoid(beta * logits) has no slope to follow at beta 0) */
        char b[32];
        return fail("--beta %s: beta must be greater than 0 (the notebook takes 0.1 to 0.5; as beta goes to 0 the "
                    "reference model is ignored)%s", ac_pyfloat(a->beta, b), "");
    }
    Tokenizer *tokenizer = start_command(a);                                      // tokenizer = GPT2Tokenizer(a.tokenizer)
    if (!tokenizer) return 1;
    int rc = 1;
    JsonValue *data = NULL, *test_json = NULL;
    PreferenceDataset *train_ds = NULL, *val_ds = NULL;
    nn_GPTModel *policy_model = NULL, *reference_model = NULL;
    optim_Optimizer *optimizer = NULL;
    Run run = {0};
    char *start = NULL;
    /* (C: the data, the datasets and the model first: every refusal comes before the first line) */
    if (!(data = preference_load(a->data, err, sizeof err))) {                    // with open(a.data) as f: data = json.load(f)
        fail("%s%s", err, "");
        goto out;
    }
    int64_t first_equal, n_equal = preference_count_equal(data, &first_equal);
    if (n_equal && n_equal == (int64_t)json_len(data)) {
        fail("%s: every entry's 'chosen' equals its 'rejected': there is no preference to learn%s", a->data, "");
        goto out;
    }
    if (n_equal)
        fprintf(stderr, "finetune: warning: %s: %lld of %zu entries (entry %lld first) have 'chosen' equal to 'rejected': "
                "no preference to learn from them\n", a->data, (long long)n_equal, json_len(data), (long long)first_equal);
    InstructSplits sp = instruct_split(data, a->subset);                         // train_data, test_data, val_data = ... ([:a.subset])
    int64_t val_first = (int64_t)(sp.val.entries - data->items), test_first = (int64_t)(sp.test.entries - data->items);
    if (sp.train.n < a->batch || sp.val.n < 3) {
        fflush(stdout);
        fprintf(stderr, "finetune: %s: the %s split has %lld entries, %s (85%% training, 10%% test, the rest validation)\n",
                a->data, sp.train.n < a->batch ? "training" : "validation",
                (long long)(sp.train.n < a->batch ? sp.train.n : sp.val.n),
                sp.train.n < a->batch ? "fewer than one --batch (the training loader drops the last, partial one)"
                                      : "fewer than 3: the sample's prompt is the third's (format_input(val_data[2]))");
        goto out;
    }
    if (!(train_ds = PreferenceDataset_new(sp.train, tokenizer, err, sizeof err)) || // PreferenceDataset(train_data, tokenizer)
        !(val_ds = PreferenceDataset_new(sp.val, tokenizer, err, sizeof err))) {    // PreferenceDataset(val_data, tokenizer)
        fail("%s: %s", a->data, err);
        goto out;
    }
    if (!check_response_tokens(train_ds, "training", 0, a) || !check_response_tokens(val_ds, "validation", val_first, a))
        goto out;
    if (!(policy_model = model_for(a))) goto out;                                 // policy_model, cfg = model_for(a)
    if (policy_model->cfg.vocab_size < tokenizer_n_vocab(tokenizer)) {            /* (C: refused: ids past the embedding) */
        fflush(stdout);
        fprintf(stderr, "finetune: --gpt2 %s: the model's vocab_size %lld is smaller than the tokenizer's %lld tokens (%s): "
                "give the model's own tokenizer with --tokenizer DIR\n", a->gpt2 ? a->gpt2 : "(none)",
                (long long)policy_model->cfg.vocab_size, (long long)tokenizer_n_vocab(tokenizer), a->tokenizer);
        goto out;
    }
    if (a->load && !load_weights(a->load, policy_model)) goto out;                /* (C: --load FILE: the SFT model of finetune instruct --save) */
    if (!preference_fits(train_ds, "training", a, policy_model->cfg.context_length) ||
        !preference_fits(val_ds, "validation", a, policy_model->cfg.context_length))
        goto out;

    PreferenceCollateArgs collate = {50256, a->allowed_max_length, true};        // collate = partial(custom_collate_fn, mask_prompt_tokens=True, allowed_max_length=...)
    PreferenceDataLoader train_loader = PreferenceDataLoader_new(train_ds, a->batch, true, true, collate); // DataLoader(..., shuffle=True, drop_last=True)
    PreferenceDataLoader val_loader = PreferenceDataLoader_new(val_ds, a->batch, false, false, collate);   // DataLoader(..., shuffle=False, drop_last=False)
    reference_model = gpt_reference_model(policy_model);                          // reference_model = copy.deepcopy(policy_model); .eval()
    optimizer = new_optimizer(a, policy_model);
    run.at = (Stand){.epoch = 0, .batches_done = -1, .global_step = -1, .seen = 0, .done = -1,
                     .train_batches = PreferenceDataLoader_len(&train_loader), .batch = a->batch};
    if (a->resume && !read_stand(a, policy_model, optimizer, run.at.train_batches, &run)) goto out;

    if (!run.resumed) { /* (C: a resumed run printed these lines already) */
        printf("Number of entries: %zu\n", json_len(data));                       // print("Number of entries:", len(data))
        if (a->show_batches) show_data(data);                                     // if a.show_batches: show_data(...)
        printf("Training set length: %lld\n", (long long)sp.train.n);            // print("Training set length:", len(train_data))
        printf("Validation set length: %lld\n", (long long)sp.val.n);
        printf("Test set length: %lld\n", (long long)sp.test.n);
        longrun_flush("finetune");
        if (a->show_batches && !show_example(data, tokenizer, a)) goto out;      // if a.show_batches: show_example(...)
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed) (C: before the loaders above)
        if (a->show_batches) {                                                    // if a.show_batches:
            printf("Train loader:\n");                                            //     print("Train loader:")
            ac_mark mk = ac_arena_mark();
            PreferenceDataLoaderIter it = PreferenceDataLoader_iter(&train_loader); //   for batch in train_loader:
            PreferenceBatch batch, last = {0};
            while (PreferenceDataLoaderIter_next(&it, &batch)) {
                print_shapes(batch.chosen, batch.rejected);                       //         print(batch["chosen"].shape, batch["rejected"].shape)
                last = batch;
            }
            show_gather();                                                        //     show_gather()
            bool prev = torch_no_grad_enter();                                    // with torch.no_grad():
            gpt_DPOLoss l = gpt_compute_dpo_loss_batch(&last, policy_model, reference_model, a->beta); // loss = compute_dpo_loss_batch(batch, ...)
            torch_no_grad_exit(prev);
            printf("(%s, %s, %s)\n", torch_repr(l.loss), torch_repr(l.chosen_rewards), torch_repr(l.rejected_rewards)); // print(loss)
            longrun_flush("finetune");
            ac_arena_release(mk);
        }
        torch_manual_seed((uint64_t)a->seed);                                     // torch.manual_seed(a.seed)
        char b[4][32];
        gpt_DPOEval res = gpt_evaluate_dpo_loss_loader(policy_model, reference_model, &train_loader, &val_loader, a->beta,
                                                       a->eval_iter);            // res = evaluate_dpo_loss_loader(...)
        printf("Training loss: %s\n", ac_pyfloat(res.train_loss, b[0]));         // print("Training loss:", res["train_loss"])
        printf("Validation loss: %s\n", ac_pyfloat(res.val_loss, b[1]));         // print("Validation loss:", res["val_loss"])
        printf("Train reward margin: %s\n", ac_pyfloat(res.train_chosen_reward - res.train_rejected_reward, b[2])); // print("Train reward margin:", ...)
        printf("Val reward margin: %s\n", ac_pyfloat(res.val_chosen_reward - res.val_rejected_reward, b[3])); // print("Val reward margin:", ...)
        longrun_flush("finetune");
    }
    size_t start_len;
    start = format_input_len(sp.val.entries[2], &start_len);                      // format_input(val_data[2])
    DpoTraining c = {policy_model, reference_model, &train_loader, &val_loader, optimizer, a, &run, start, start_len, tokenizer};
    if (!train_and_save(a, policy_model, optimizer, &run, dpo_training, &c, &rc)) goto out; // train_model_dpo_simple(...)

    nn_eval(&policy_model->module);                                               // policy_model.eval()
    torch_manual_seed((uint64_t)a->seed);                                         // torch.manual_seed(a.seed)
    int64_t context = policy_model->cfg.context_length;
    test_json = instruct_list_json(sp.test);
    /* (C: the final items: the three printed pairs, then each --responses answer; a stop may come between two) */
    int64_t n_shown = sp.test.n < 3 ? sp.test.n : 3, n_items = n_shown + (a->responses ? sp.test.n : 0);
    int64_t first = answers_start(&run, n_items);
    for (int64_t k = n_shown; k < first; k++)
        json_set_string(json_at(test_json, (size_t)(k - n_shown)), "model_response", run.at.answers[k], strlen(run.at.answers[k]));
    longrun_live live;
    longrun_live_start(&live, first);
    int64_t tokens0 = tokens_generated;
    for (int64_t k = first; k < n_items; k++) {
        if (longrun_stopping()) {
            char after[64];
            snprintf(after, sizeof after, "answer %lld of %lld", (long long)k, (long long)n_items);
            rc = stop_run(a, policy_model, NULL, &run, after);
            goto out;
        }
        JsonValue *entry = json_at(test_json, (size_t)(k < n_shown ? k : k - n_shown));
        size_t plen;
        char *input_text = format_input_len(entry, &plen);                        // input_text = format_input(entry)
        char *ans = NULL;
        if (k < n_shown) {                                                        // for entry in test_data[:3]:
            char *ref = respond(reference_model, tokenizer, input_text, plen, context, a->max_new_tokens, false); // reference_response_text = respond(reference_model, ...)
            char *pol = ref ? respond(policy_model, tokenizer, input_text, plen, context, a->max_new_tokens, false) : NULL; // policy_response_text = respond(policy_model, ...)
            if (pol) {
                longrun_live_clear(&live);
                fwrite(input_text, 1, plen, stdout);                              //     print(input_text)
                printf("\n\nCorrect response:\n>> %s\n", instruct_field(entry, "output")); // print(f"\nCorrect response:\n>> {entry['output']}")
                printf("\nReference model response:\n>> %s\n", ref);              //     print(f"\nReference model response:\n>> {reference_response_text.strip()}")
                printf("\nPolicy model response:\n>> %s\n", pol);                 //     print(f"\nPolicy model response:\n>> {policy_response_text.strip()}")
                printf("\n-------------------------------------\n\n");           //     print("\n-------------------------------------\n")
                longrun_flush("finetune");
                ans = ac_malloc(1), ans[0] = 0; /* (C: nothing to keep: its lines are printed) */
            }
            free(ref), free(pol);
        } else {                                                                  // for entry in test_data:
            ans = respond(policy_model, tokenizer, input_text, plen, context, a->max_new_tokens, false);
            if (ans) json_set_string(entry, "model_response", ans, strlen(ans));  //     entry["model_response"] = respond(policy_model, ...)
        }
        free(input_text);
        if (!ans) goto out;
        run.at.answers[k] = ans, run.at.done = k + 1;
        longrun_live_show(&live, "answer", k + 1, n_items, (double)(tokens_generated - tokens0), "tokens");
        longrun_point("answer", k + 1);
    }
    longrun_live_clear(&live);
    if (a->responses && !json_dump(test_json, a->responses, 4, err, sizeof err)) { // json.dump(test_data, f, indent=4)
        fail("--responses %s%s", err, "");
        goto out;
    }
    DpoTracking tracking = {&run.loss, &run.acc, (double)a->epochs};
    if (page_wanted) page_svg = ac_draw_to_string(draw_dpo_figures, &tracking);
    if (a->plot && !ac_write_file_atomic(a->plot, draw_dpo_figures, &tracking)) {
        fail("cannot write --plot %s: %s", a->plot, strerror(errno));
        goto out;
    }
    rc = 0;
    (void)test_first;
out:
    run_free(&run);
    free(start);
    optim_free(optimizer);
    if (reference_model) nn_free(&reference_model->module);
    if (policy_model) nn_free(&policy_model->module);
    PreferenceDataset_free(train_ds), PreferenceDataset_free(val_ds);
    json_free(test_json), json_free(data);
    tokenizer_free(tokenizer);
    return rc;
}

/* ---- the reader's page (--html) ---------------------------------------------------------------------- */

/* The page's tables and the run's output in its sections, the figure after entry figure_at's table */
static void write_sections(FILE *f, const ac_page_table *s, int n, const char *const *cuts, const char *figure_caption,
                           int figure_at) {
    ac_page_tables(f, "Python (the book, as finetune.py)", n, s, cuts, figure_at, page_svg, figure_caption);
}

static bool page_lora;

static void write_classify_page(FILE *f, const char *out, size_t len) {
    const char *end = out + len;
    ac_page_begin(f, "The book's chapter 6 (and appendix E): a spam classifier, Python beside C",
                  "<p>Chapter 6 of Sebastian Raschka's <i>Build a Large Language Model (From Scratch)</i>, and appendix E's "
                  "LoRA, as <code>../shared/pytorch/finetune.py</code> writes them: the Python on the left, <b>attention.c</b> "
                  "on the right, row for row (each C line carries the Python it does), and what this run printed and drew. "
                  "Made by <code>./build/finetune classify --html FILE</code>; no script, no network.</p>");
    const char *model_at = ac_page_line_at(out, end, "Total trainable", end);
    const char *eval_at = ac_page_line_at(model_at, end, "Training accuracy: ", end);
    const char *train_at = ac_page_line_at(eval_at, end, "Ep ", end);
    const char *use_at = end; /* the last accuracy line without a " | " */
    for (const char *p = train_at; (p = ac_page_line_at(p, end, "Training accuracy: ", NULL)); p++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!memchr(p, '|', (size_t)((nl ? nl : end) - p))) use_at = p;
        if (!nl) break;
        p = nl;
    }
    const char *cuts[] = {out, model_at, model_at, eval_at, train_at, use_at, end};
    ac_page_table s[] = {
        {"data", "The data: pandas' TSV, a balanced set, three splits, the loaders", finetune_example_source,
         "examples/finetune.c", "load_data", NULL},
        {"model", "A new head; the rest frozen (chapter 6) or LoRA on every Linear (appendix E)", finetune_example_source,
         "examples/finetune.c", "prepare_model print_model", NULL},
        {"model", NULL, finetune_lora_source, "nn/lora.c",
         page_lora ? "nn_LoRALayer_new nn_LoRALayer_forward nn_LinearWithLoRA_forward nn_replace_linear_with_lora"
                   : "nn_replace_linear_with_lora", "Appendix E: LoRALayer, LinearWithLoRA, replace_linear_with_lora"},
        {"loss", "The last token's logits: loss and accuracy", finetune_classifier_source, "nn/models/gpt/classifier.c",
         "gpt_last_token_logits gpt_calc_loss_batch_cls gpt_calc_accuracy_loader", NULL},
        {"train", "Finetuning: train_classifier_simple", finetune_example_source, "examples/finetune.c",
         "train_classifier_simple", NULL},
        {"use", "Using the classifier", finetune_classifier_source, "nn/models/gpt/classifier.c", "gpt_classify_review", NULL},
    };
    write_sections(f, s, 6, cuts, "Loss and accuracy over the epochs (the chapter's figures)", 4);
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The Check suite runs this command against finetune.py "
                   "and compares every line.</p>");
}

static void write_instruct_page(FILE *f, const char *out, size_t len) {
    const char *end = out + len;
    ac_page_begin(f, "The book's chapter 7: instruction finetuning, Python beside C",
                  "<p>Chapter 7 of Sebastian Raschka's <i>Build a Large Language Model (From Scratch)</i> as "
                  "<code>../shared/pytorch/finetune.py</code> writes it: the Python on the left, <b>attention.c</b> on the "
                  "right, and what this run printed and drew. Made by <code>./build/finetune instruct --html FILE</code>; "
                  "no script, no network.</p>");
    const char *train_at = ac_page_line_at(out, end, "Training loss: ", end);
    const char *answers_at = ac_page_line_at(train_at, end, "Below is an instruction that describes a task. Write a response that "
                                                            "appropriately completes the request.\n", end);
    const char *cuts[] = {out, out, train_at, train_at, answers_at, answers_at, end};
    ac_page_table s[] = {
        {"data", "The data: the Alpaca prompt, padding and -100 targets, the loaders", finetune_instruct_source,
         "nn/data/instruct.c", "format_input_len custom_collate_fn", NULL},
        {"train", "Finetuning: chapter 5's loop on the instruction batches", finetune_example_source, "examples/finetune.c",
         "calc_loss_loader train_model_simple", NULL},
        {"answers", "The model's answers", finetune_example_source, "examples/finetune.c", "respond answer_of", NULL},
    };
    const char *cuts3[] = {cuts[0], cuts[2], cuts[4], cuts[6]};
    write_sections(f, s, 3, cuts3, "Training and validation loss (the chapter's figure)", 1);
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The Check suite runs this command against finetune.py "
                   "and compares every line and the responses file.</p>");
}

static void write_dpo_page(FILE *f, const char *out, size_t len) {
    const char *end = out + len;
    ac_page_begin(f, "The book's DPO notebook: preference tuning after chapter 7, Python beside C",
                  "<p>The DPO notebook of Sebastian Raschka's <i>Build a Large Language Model (From Scratch)</i> "
                  "(<code>ch07/04_preference-tuning-with-dpo</code>) as <code>tests/tools/dpo.py</code> runs it: the Python on "
                  "the left, <b>attention.c</b> on the right, and what this run printed and drew. Made by "
                  "<code>./build/finetune dpo --html FILE</code>; no script, no network.</p>");
    const char *loss_at = ac_page_line_at(out, end, "Training loss: ", end);
    const char *train_at = ac_page_line_at(loss_at, end, "Ep ", end);
    const char *answers_at = ac_page_line_at(train_at, end, "Below is an instruction that describes a task. Write a response that "
                                                            "appropriately completes the request.\n", end);
    const char *cuts[] = {out, out, loss_at, train_at, answers_at, end};
    ac_page_table s[] = {
        {"data", "The data: PreferenceDataset, the masks of custom_collate_fn, the loaders", finetune_preference_source,
         "nn/data/preference.c", "PreferenceDataset_new preference_collate_fn", NULL},
        {"data", NULL, finetune_example_source, "examples/finetune.c", "show_example show_gather",
         "The notebook's collate example and its gather demonstrations"},
        {"loss", "The DPO loss: compute_logprobs, compute_dpo_loss, a batch, the loaders", finetune_dpo_source,
         "nn/models/gpt/dpo.c", "gpt_compute_logprobs gpt_compute_dpo_loss gpt_compute_dpo_loss_batch gpt_compute_dpo_loss_loader "
         "gpt_evaluate_dpo_loss_loader", NULL},
        {"train", "Training: train_model_dpo_simple", finetune_example_source, "examples/finetune.c",
         "train_model_dpo_simple", NULL},
        {"answers", "The reference's and the policy's answers", finetune_example_source, "examples/finetune.c", "respond", NULL},
    };
    write_sections(f, s, 5, cuts, "The loss and the reward margins (the notebook's figures)", 3);
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The Check suite runs this command against tests/tools/dpo.py "
                   "and compares every line and the responses file.</p>");
}

static int run_for_page(void *flags) {
    const Flags *a = flags;
    page_wanted = true;
    page_lora = a->lora > 0;
    return a->cmd == CLASSIFY ? cmd_classify(a) : a->cmd == INSTRUCT ? cmd_instruct(a) : cmd_dpo(a);
}

static int run_with_page(const Flags *a) {
    int rc = ac_page_of_run("finetune", a->html, run_for_page, (void *)a,
                            a->cmd == CLASSIFY ? write_classify_page : a->cmd == INSTRUCT ? write_instruct_page : write_dpo_page);
    free(page_svg);
    return rc;
}

static void on_error(ac_error_kind kind, const char *msg, void *user) {
    fflush(stdout);
    fprintf(stderr, "finetune: %s: %s\n", ac_error_kind_name(kind), msg);
    exit(1);
}

int main(int argc, char **argv) {
    ac_set_error_handler(on_error, NULL);
    Flags a;
    int rc = parse_flags(argc, argv, &a);
    if (rc) return rc;
    longrun_show_progress(); /* a live line for the library's long loops (loading, evaluating), on a terminal */
    rc = a.html ? run_with_page(&a) : a.cmd == CLASSIFY ? cmd_classify(&a) : a.cmd == INSTRUCT ? cmd_instruct(&a) : cmd_dpo(&a);
    ac_shutdown();
    return ac_finish_output("finetune", rc);
}
