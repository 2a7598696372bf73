/* The tokenizer's file loader against any bytes: the input is encoder.json,
 * then a NUL, then vocab.bpe. It loads, or refuses with a message; what it
 * loads encodes and decodes its own tokens' text back to itself. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t ne = nul ? (size_t)(nul - data) : size;
    const char *merges = nul ? (const char *)nul + 1 : "";
    size_t nm = nul ? size - ne - 1 : 0;
    char err[512] = "";
    ac_mark m = ac_arena_mark();
    Tokenizer *t = tokenizer_load_memory((const char *)data, ne, merges, nm, "encoder.json", "vocab.bpe", err, sizeof err);
    if (!t) {
        if (!strstr(err, "tokenizer: ")) abort(); /* a refusal always says why, naming the file */
    } else {
        const char *text = "Hello, world! It's 12 o'clock\n\tcaf\xc3\xa9 <|endoftext|> \xf0\x9f\x98\x80";
        Tensor *ids = tokenizer_encode(t, text, strlen(text), TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
        if (!ids) abort();
        size_t n;
        char *back = tokenizer_decode(t, ids->data, torch_numel(ids), &n, err, sizeof err);
        if (!back || n != strlen(text) || memcmp(back, text, n) != 0) abort();
        tokenizer_free(t);
    }
    ac_arena_release(m);
    return 0;
}
