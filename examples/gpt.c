/* The book's GPT in C: "Build a Large Language Model (From Scratch)", chapters
 * 2-5, as ../shared/pytorch/gpt.py does them in PyTorch.
 *
 *     gpt COMMAND [flags]
 *       tokenize   chapter 2: text to GPT-2 token ids (or back, --decode)
 *
 * Each command is a function cmd_NAME over the flags it shares with the others
 * (parse_flags); chapter 4's model and chapter 5's `train` and `generate`
 * (gpt.py's two commands, with its flags) join them here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "tensor.h"
#include "tokenizer.h"

#define DEFAULT_TOKENIZER "../shared/data/gpt2"
#define DEFAULT_DATA "../shared/data/the-verdict.txt"

static void usage(FILE *f) {
    fprintf(f,
            "usage: gpt COMMAND [flags]   The book's GPT (Build a Large Language Model (From Scratch)) in C.\n"
            "\n"
            "commands:\n"
            "  tokenize [FILE]      FILE's (stdin's) GPT-2 token ids, separated by single spaces, on one line\n"
            "                       (tiktoken.get_encoding(\"gpt2\").encode(text, allowed_special={\"<|endoftext|>\"}))\n"
            "\n"
            "flags:\n"
            "  --tokenizer DIR      GPT-2's encoder.json + vocab.bpe (or vocab.json + merges.txt) (default " DEFAULT_TOKENIZER ")\n"
            "  --tokenizer train:N  instead, learn N BPE merges from --data (GPT-2's pre-tokenizer, minbpe's rule)\n"
            "  --data FILE          the text train:N learns from (default " DEFAULT_DATA ")\n"
            "  --save-tokenizer DIR write the tokenizer's encoder.json and vocab.bpe into DIR (it must exist)\n"
            "  --decode             tokenize: read ids (separated by white space) and write their text\n"
            "  --special MODE       tokenize: \"<|endoftext|>\" in the text is the special id (allow, the default),\n"
            "                       ordinary text (text), or an error (raise: tiktoken's default)\n"
            "  -h, --help           this text\n");
}

typedef struct {
    const char *command, *file, *tokenizer, *data, *save_tokenizer;
    bool decode;
    tokenizer_special special;
} Flags;

static int bad_flags(const char *fmt, const char *arg) {
    fprintf(stderr, "gpt: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (gpt --help lists the flags)\n");
    return 2;
}

/* 0, or the exit status for a usage error (after the message). */
static int parse_flags(int argc, char **argv, Flags *a) {
    *a = (Flags){.tokenizer = DEFAULT_TOKENIZER, .data = DEFAULT_DATA, .special = TOKENIZER_ALLOW_SPECIAL};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            exit(ac_finish_output("gpt", 0));
        }
        bool takes = !strcmp(f, "--tokenizer") || !strcmp(f, "--data") || !strcmp(f, "--save-tokenizer") ||
                     !strcmp(f, "--special");
        if (takes && i + 1 >= argc) return bad_flags("%s needs a value", f);
        if (!strcmp(f, "--tokenizer")) a->tokenizer = argv[++i];
        else if (!strcmp(f, "--data")) a->data = argv[++i];
        else if (!strcmp(f, "--save-tokenizer")) a->save_tokenizer = argv[++i];
        else if (!strcmp(f, "--special")) {
            const char *m = argv[++i];
            if (!strcmp(m, "allow")) a->special = TOKENIZER_ALLOW_SPECIAL;
            else if (!strcmp(m, "text")) a->special = TOKENIZER_SPECIAL_AS_TEXT;
            else if (!strcmp(m, "raise")) a->special = TOKENIZER_DISALLOW_SPECIAL;
            else return bad_flags("--special takes allow, text or raise, not '%s'", m);
        } else if (!strcmp(f, "--decode")) a->decode = true;
        else if (f[0] == '-' && f[1]) return bad_flags("unknown flag %s", f);
        else if (!a->command) a->command = f;
        else if (!a->file) a->file = f;
        else return bad_flags("one input file at most (got another: %s)", f);
    }
    if (!a->command) return bad_flags("%s", "give a command: tokenize");
    return 0;
}

/* The whole of FILE (stdin for NULL or "-"), NUL-terminated; NULL after a message. */
static char *read_input(const char *path, size_t *len) {
    bool std_in = !path || !strcmp(path, "-");
    struct stat st;
    if (!std_in && stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) /* opening one blocks until something writes */
        fprintf(stderr, "gpt: %s is a FIFO: waiting for a writer\n", path);
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "gpt: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf; n += got) {
        if (n + 1 >= cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) free(buf);
            buf = p;
            if (!buf) break;
        }
        if ((got = fread(buf + n, 1, cap - n - 1, f)) == 0) break;
    }
    bool bad = !buf || ferror(f);
    if (!std_in) fclose(f);
    if (bad) {
        fprintf(stderr, "gpt: cannot read %s: %s\n", std_in ? "standard input" : path, buf ? strerror(errno) : "not enough memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
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

static void on_error(ac_error_kind kind, const char *msg, void *user) {
    fprintf(stderr, "gpt: %s: %s\n", ac_error_kind_name(kind), msg);
    exit(1);
}

int main(int argc, char **argv) {
    ac_set_error_handler(on_error, NULL);
    Flags a;
    int rc = parse_flags(argc, argv, &a);
    if (rc) return rc;
    if (!strcmp(a.command, "tokenize")) rc = cmd_tokenize(&a);
    else return bad_flags("unknown command '%s': the commands are tokenize", a.command);
    ac_shutdown();
    return ac_finish_output("gpt", rc); /* output that could not be written is an error, as in coreutils */
}
