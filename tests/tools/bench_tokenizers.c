/* Encoding speed of the tokenizers of nn/text, in ./build/bench tokenize's style (median of 5):
 * GPT-2's files (tokenizer_encode) against tokenizer.json's Qwen3 and Llama 3 (text_tokenizer_encode)
 * on 1 MB of text, cold (a fresh tokenizer: every word new to its cache) and warm, and decode, timed
 * as the thread's CPU time (the machine this was written on is shared).
 *
 *   make all && cc -std=c11 -O2 -D_DEFAULT_SOURCE -Itensor -Inn/text tests/tools/bench_tokenizers.c \
 *       build/libattention.a -lm -lpthread -o build/bench_tokenizers
 *   ./build/bench_tokenizers [LLAMA3_TOKENIZER_JSON]      (run from the repository root; ../shared as AC_SHARED)
 *
 * Texts: "english" is the-verdict.txt repeated to 1 MB; "multilingual" the texts of
 * tests/data/hf_tokenizer_corpus.json (CJK, emoji, combining marks, RTL, digits, CRLF ...) repeated to 1 MB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extend.h"
#include "json.h"
#include "text_tokenizer.h"
#include "tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: steadier on a shared machine */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp(const void *a, const void *b) { return *(const double *)a < *(const double *)b ? -1 : *(const double *)a > *(const double *)b; }
static double median(double *v) { qsort(v, 5, sizeof *v, cmp); return v[2]; }

static char *repeat(const char *s, size_t n, size_t want, size_t *len) {
    char *out = malloc(want + n);
    size_t k = 0;
    while (k < want) memcpy(out + k, s, n), k += n;
    *len = k;
    return out;
}

/* kind 0: GPT-2's Tokenizer; else a TextTokenizer at path */
static void bench(const char *label, const char *path, int gpt2, const char *tname, const char *text, size_t len) {
    char err[1024];
    double load[5], cold[5], warm[5], dec[5];
    int64_t n = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        Tokenizer *g = gpt2 ? tokenizer_load(path, err, sizeof err) : NULL;
        TextTokenizer *t = gpt2 ? NULL : text_tokenizer_load(path, err, sizeof err);
        if (!g && !t) { fprintf(stderr, "%s\n", err); exit(1); }
        load[r] = now() - t0;
        for (int pass = 0; pass < 2; pass++) {
            ac_mark m = ac_arena_mark();
            t0 = now();
            Tensor *ids = g ? tokenizer_encode(g, text, len, TOKENIZER_ALLOW_SPECIAL, err, sizeof err)
                            : text_tokenizer_encode(t, text, len, TEXT_SPECIAL_IN_TEXT, err, sizeof err);
            double dt = now() - t0;
            if (!ids) { fprintf(stderr, "%s\n", err); exit(1); }
            *(pass ? &warm[r] : &cold[r]) = dt;
            n = torch_numel(ids);
            if (pass) {
                t0 = now();
                char *s = g ? tokenizer_decode(g, ids->data, n, NULL, err, sizeof err)
                            : text_tokenizer_decode(t, ids->data, n, false, NULL, err, sizeof err);
                dec[r] = now() - t0;
                if (!s) { fprintf(stderr, "%s\n", err); exit(1); }
            }
            ac_arena_release(m);
        }
        tokenizer_free(g);
        text_tokenizer_free(t);
    }
    printf("{\"tokenizer\": \"%s\", \"text\": \"%s\", \"mb\": %.2f, \"ids\": %lld, \"load_ms\": %.0f, \"cold_mb_s\": %.1f, "
           "\"warm_mb_s\": %.1f, \"decode_mb_s\": %.1f}\n", label, tname, (double)len / 1e6, (long long)n,
           median(load) * 1e3, (double)len / median(cold) / 1e6, (double)len / median(warm) / 1e6,
           (double)len / median(dec) / 1e6);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *root = getenv("AC_SHARED") ? getenv("AC_SHARED") : "../shared";
    char p[1024], err[1024], gpt2[1024], qwen3[1024];
    size_t vn, en, mn;
    snprintf(p, sizeof p, "%s/data/the-verdict.txt", root);
    char *verdict = ac_read_file(p, &vn, err, sizeof err);
    JsonValue *c = json_load("tests/data/hf_tokenizer_corpus.json", err, sizeof err);
    if (!verdict || !c) { fprintf(stderr, "%s\n", err); return 1; }
    char *mixed = malloc(1 << 20);
    size_t k = 0;
    for (size_t i = 0; i < json_len(json_get(c, "texts")); i++) {
        const JsonValue *t = json_get(json_at(json_get(c, "texts"), i), "text");
        if (strstr(t->str, "<|") || strstr(t->str, "<think") || strstr(t->str, "<tool")) continue; /* text only */
        memcpy(mixed + k, t->str, t->len), k += t->len, mixed[k++] = '\n';
    }
    char *english = repeat(verdict, vn, 1000000, &en), *multi = repeat(mixed, k, 1000000, &mn);
    snprintf(gpt2, sizeof gpt2, "%s/data/gpt2", root);
    snprintf(qwen3, sizeof qwen3, "%s/data/qwen3", root);
    const char *texts[2] = {english, multi}, *names[2] = {"english", "multilingual"};
    size_t lens[2] = {en, mn};
    for (int i = 0; i < 2; i++) {
        bench("gpt2 (tokenizer_encode)", gpt2, 1, names[i], texts[i], lens[i]);
        bench("gpt2 (text_tokenizer)", gpt2, 0, names[i], texts[i], lens[i]);
        bench("qwen3 tokenizer.json", qwen3, 0, names[i], texts[i], lens[i]);
        if (argc > 1) bench("llama3 tokenizer.json", argv[1], 0, names[i], texts[i], lens[i]);
    }
    json_free(c);
    free(verdict), free(mixed), free(english), free(multi);
    ac_shutdown();
    return 0;
}
