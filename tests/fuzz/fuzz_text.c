/* The text loader: any bytes are a vocabulary and a token stream or a clear
 * refusal (invalid UTF-8); every token decodes and encodes back to itself. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "toy_lm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    CharText ct;
    char err[128];
    ac_mark m = ac_arena_mark();
    if (chartext_init(&ct, (const char *)data, size, err, sizeof err)) {
        const int64_t *ids = ct.data->data;
        for (int64_t i = 0; i < ct.n; i++)
            if (ids[i] < 0 || ids[i] >= ct.vocab_size) abort();
        for (int64_t v = 0; v < ct.vocab_size; v++) {
            char buf[5];
            int k = chartext_decode(&ct, v, buf);
            uint32_t cp;
            if (k < 1 || chartext_utf8_next(buf, (size_t)k, &cp) != k || chartext_encode_char(&ct, cp) != v) abort();
        }
        chartext_free(&ct);
    } else if (!strstr(err, "invalid UTF-8")) {
        abort();
    }
    ac_arena_release(m);
    return 0;
}
