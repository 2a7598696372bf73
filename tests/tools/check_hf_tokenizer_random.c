/* Compares C's ids with the JavaScript encoders' on tests/tools/gen_hf_tokenizer_random.js's
 * random strings (by hand, beyond the suite):
 *
 *   cc -std=c11 -O2 -D_DEFAULT_SOURCE -Itensor -Inn/text tests/tools/check_hf_tokenizer_random.c \
 *       build/libattention.a -lm -lpthread -o build/check_hf_tokenizer_random
 *   ./build/check_hf_tokenizer_random build/hf_random.json ../shared/data/qwen3 build/llama3
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"
#include "text_tokenizer.h"
int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s CASES.json QWEN3_DIR LLAMA3_DIR\n", argv[0]); return 2; }
    char err[1024];
    TextTokenizer *q = text_tokenizer_load(argv[2], err, sizeof err), *l = text_tokenizer_load(argv[3], err, sizeof err);
    JsonValue *c = json_load(argv[1], err, sizeof err);
    if (!q || !l || !c) { fprintf(stderr, "%s\n", err); return 1; }
    int bad[2] = {0, 0}, shown = 0;
    for (size_t i = 0; i < json_len(c); i++) {
        const JsonValue *e = json_at(c, i), *t = json_get(e, "text");
        for (int m = 0; m < 2; m++) {
            const JsonValue *want = json_get(e, m ? "l" : "q");
            ac_mark mk = ac_arena_mark();
            Tensor *ids = text_tokenizer_encode(m ? l : q, t->str, t->len, TEXT_SPECIAL_IN_TEXT, err, sizeof err);
            bool same = ids && (size_t)torch_numel(ids) == json_len(want);
            for (size_t k = 0; same && k < json_len(want); k++) same = ((int64_t *)ids->data)[k] == (int64_t)json_at(want, k)->number;
            if (!same) {
                bad[m]++;
                if (shown++ < 6) {
                    printf("%s mismatch on case %zu: ", m ? "llama3" : "qwen3", i);
                    for (size_t k = 0; k < t->len; k++) printf((unsigned char)t->str[k] < 0x20 || (unsigned char)t->str[k] >= 0x7f ? "\\x%02X" : "%c", (unsigned char)t->str[k]);
                    printf("\n");
                }
            }
            ac_arena_release(mk);
        }
    }
    printf("%zu cases: qwen3 %d mismatches, llama3 %d\n", json_len(c), bad[0], bad[1]);
    json_free(c);
    text_tokenizer_free(q);
    text_tokenizer_free(l);
    return bad[0] || bad[1];
}
