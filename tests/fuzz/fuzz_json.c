/* Any bytes through chapter 7's JSON reader: refused with a message, or read into a tree that
 * json.dump's writer (indent 4) writes, whose text reads back into a tree that writes the same
 * bytes again; the chapter's check of the entries never crashes on it. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "instruct.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    JsonValue *v = json_loads((const char *)data, size, err, sizeof err);
    if (!v) {
        if (!err[0]) abort(); /* a refusal says why */
        return 0;
    }
    size_t n1, n2;
    char *t1 = json_dumps(v, 4, &n1, err, sizeof err);
    if (t1) { /* (a string that is not UTF-8 is refused by the writer, as Python's encoder would) */
        JsonValue *w = json_loads(t1, n1, err, sizeof err);
        if (!w) abort();
        char *t2 = json_dumps(w, 4, &n2, err, sizeof err);
        if (!t2 || n2 != n1 || memcmp(t1, t2, n1) != 0) abort();
        free(t2);
        json_free(w);
        free(t1);
    }
    instruct_check(v, err, sizeof err);
    json_free(v);
    return 0;
}
