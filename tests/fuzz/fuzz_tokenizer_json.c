/* Hugging Face's tokenizer.json reader against any bytes: it loads, or refuses
 * with a message naming the file; what it loads encodes a text (Unicode, digits,
 * CRLF, special tokens written in it); written as text (no added token matched),
 * its ids decode back to it (NFC'd where the file says so; unless an added token
 * shares an id with the vocabulary: decode spells those by their content, as
 * Hugging Face's does); it makes both chat formats or refuses them, and refuses
 * ids out of range. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "text_tokenizer_impl.h"
#include "unicode_nfc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[1024] = "";
    ac_mark m = ac_arena_mark();
    TextTokenizer *t = text_tokenizer_from_json((const char *)data, size, "tokenizer.json", err, sizeof err);
    if (!t) {
        if (!strstr(err, "tokenizer: tokenizer.json: ")) abort(); /* a refusal names the file */
    } else {
        const char *text = "Hello, world! It's 1234 o'CLOCK\r\n\tcafe\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd<|endoftext|> "
                           "\xf0\x9f\x98\x80  <s>x\n\n";
        size_t len = strlen(text), n = 0, want_len = len;
        Tensor *ids = text_tokenizer_encode(t, text, len, TEXT_SPECIAL_IN_TEXT, err, sizeof err);
        if (!ids) abort();
        for (int64_t i = 0; i < torch_numel(ids); i++)
            if (((int64_t *)ids->data)[i] < 0 || ((int64_t *)ids->data)[i] >= text_tokenizer_n_vocab(t)) abort();
        ids = text_tokenizer_encode(t, text, len, 0, err, sizeof err);
        if (!ids) abort();
        const int64_t *d = ids->data;
        bool shared = false;
        for (int64_t i = 0; i < torch_numel(ids); i++) shared = shared || t->added_of_id[d[i]] >= 0;
        char *back = text_tokenizer_decode(t, d, torch_numel(ids), false, &n, err, sizeof err);
        char *norm = unicode_nfc(text, len, &want_len);
        const char *want = t->nfc && norm ? norm : text;
        size_t wn = t->nfc && norm ? want_len : len;
        if (!back || (!shared && (n != wn || memcmp(back, want, n) != 0))) abort();
        free(norm);
        if (!text_tokenizer_encode(t, text, len, TEXT_ADD_SPECIAL_TOKENS, err, sizeof err)) abort();
        text_chat_options o = {.add_generation_prompt = true};
        if (!text_tokenizer_chat_encode(t, "hi", 2, &o, err, sizeof err) && !strstr(err, "chat: ")) abort();
        int64_t bad = text_tokenizer_n_vocab(t);
        if (text_tokenizer_decode(t, &bad, 1, false, NULL, err, sizeof err)) abort();
        text_tokenizer_free(t);
    }
    ac_arena_release(m);
    return 0;
}
