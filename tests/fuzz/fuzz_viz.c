/* The picture writers with labels made of any bytes: the output must stay
 * well-formed XML (tests/xml_check.c is the oracle). */
#include <stdlib.h>

#include "fuzz_common.h"
#include "viz.h"
#include "xml_check.h"

static void check(FILE *f) {
    long n = ftell(f);
    char *buf = malloc((size_t)n + 1), err[256];
    rewind(f);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) abort();
    buf[n] = 0; /* xml_check reads a NUL-terminated text */
    if (!xml_check(buf, (size_t)n, err, sizeof err)) {
        fprintf(stderr, "not well-formed: %s\n", err);
        abort();
    }
    free(buf);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the input split at NUL bytes into up to 8 labels */
    char *copy = malloc(size + 1);
    memcpy(copy, data, size);
    copy[size] = 0;
    const char *labels[8] = {"", "", "", "", "", "", "", ""};
    int n = 0;
    for (size_t i = 0; i <= size && n < 8; i++)
        if (i == 0 || copy[i - 1] == 0) labels[n++] = copy + i;
    ac_mark m = ac_arena_mark();
    torch_manual_seed(size);
    Tensor *w = torch_rand(SHAPE(2, 3, 3));
    ac_heatmap_opts o = {labels[0], labels + 1, labels + 4, labels + 6, -1, AC_MASK_AUTO};
    FILE *f = tmpfile();
    if (!f) abort();
    ac_heatmap_svg(f, w, &o);
    check(f);
    Tensor *p = torch_requires_grad_(torch_rand(SHAPE(3)), true);
    Tensor *y = torch_sum(torch_mul(p, torch_rand(SHAPE(3))));
    const char *names[1] = {labels[1]};
    f = tmpfile();
    ac_graph_svg(f, y, (nn_TensorList){1, names, &p});
    check(f);
    double x[3] = {1, 2, 3};
    ac_series s = {labels[2], 3, x, x};
    ac_plot_opts po = {labels[3], labels[4], labels[5]};
    f = tmpfile();
    ac_plot_svg(f, &po, 1, &s);
    check(f);
    ac_arena_release(m);
    free(copy);
    return 0;
}
