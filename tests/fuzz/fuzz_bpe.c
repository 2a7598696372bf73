/* Encoding any bytes with GPT-2's tokenizer (../shared/data/gpt2, or
 * $AC_GPT2_DIR; a tokenizer trained here where neither is found): text that
 * is not UTF-8 is refused naming its first bad byte; any other text gives ids
 * in range that decode to exactly that text, the same on a second encode
 * (from the word cache), and decoding any ids never fails or writes past its
 * output. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "tokenizer.h"

static Tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[512];
    const char *dir = getenv("AC_GPT2_DIR");
    tok = tokenizer_load(dir ? dir : "../shared/data/gpt2", err, sizeof err);
    if (!tok) {
        const char *text = "the quick brown fox jumps over the lazy dog; it's 12:30, caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87";
        tok = tokenizer_train(text, strlen(text), 40, err, sizeof err);
    }
    return tok ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    char err[512] = "";
    ac_mark m = ac_arena_mark();
    Tensor *ids = tokenizer_encode(tok, s, size, size % 2 ? TOKENIZER_ALLOW_SPECIAL : TOKENIZER_SPECIAL_AS_TEXT, err,
                                   sizeof err);
    if (!ids) {
        if (!strstr(err, "not UTF-8")) abort();
    } else {
        const int64_t *d = ids->data;
        for (int64_t i = 0; i < torch_numel(ids); i++)
            if (d[i] < 0 || d[i] >= tokenizer_n_vocab(tok)) abort();
        size_t n;
        char *back = tokenizer_decode(tok, d, torch_numel(ids), &n, err, sizeof err);
        if (!back || n != size || memcmp(back, s, size) != 0) abort();
        Tensor *again = tokenizer_encode(tok, s, size, size % 2 ? TOKENIZER_ALLOW_SPECIAL : TOKENIZER_SPECIAL_AS_TEXT, err,
                                         sizeof err);
        if (!again || torch_numel(again) != torch_numel(ids) ||
            memcmp(again->data, d, sizeof(int64_t) * (size_t)torch_numel(ids)) != 0)
            abort();
    }
    /* the bytes as ids (two bytes an id), decoded: any ids in range decode */
    int64_t raw[512];
    size_t k = 0;
    for (size_t i = 0; i + 1 < size && k < 512; i += 2) raw[k++] = (data[i] | data[i + 1] << 8) % tokenizer_n_vocab(tok);
    size_t n;
    if (!tokenizer_decode(tok, raw, (int64_t)k, &n, err, sizeof err)) abort();
    ac_arena_release(m);
    return 0;
}
