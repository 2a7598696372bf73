/* Any bytes as chapter 6's SMS TSV and as a split's CSV: refused with a message naming the file, or
 * read into rows of a label and a non-empty UTF-8 text; a read TSV written as pandas' CSV reads back
 * the same rows (where pandas would, it refuses a text with a bare CR or a tab's row shift). */
#include <stdlib.h>

#include "fuzz_common.h"
#include "spam_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    if (!path) return 0;
    char err[1024] = "", csv[96];
    SpamFrame f = {0}, g = {0};
    if (!spam_read_tsv(path, &f, err, sizeof err)) {
        if (!strstr(err, path)) abort(); /* the message names the file */
    } else {
        for (int64_t i = 0; i < f.n; i++)
            if ((f.labels[i] != 0 && f.labels[i] != 1) || !f.texts[i][0]) abort();
        snprintf(csv, sizeof csv, "%s.csv", path);
        if (spam_to_csv(&f, csv, err, sizeof err) && spam_read_csv(csv, &g, err, sizeof err)) {
            if (g.n != f.n) abort();
            for (int64_t i = 0; i < f.n; i++)
                if (g.labels[i] != f.labels[i] || strcmp(g.texts[i], f.texts[i]) != 0) abort();
        }
        unlink(csv);
    }
    SpamFrame_free(&f), SpamFrame_free(&g);
    if (spam_read_csv(path, &f, err, sizeof err)) SpamFrame_free(&f);
    return 0;
}
