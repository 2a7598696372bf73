/* Reading a whole file into memory, for every program and loader that takes
 * one in (a text to train on, a tokenizer's files, a prompt from stdin). It
 * reads to the end rather than trusting a size, so a pipe, a FIFO or a file
 * in /proc read whole too. See extend.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"

char *ac_read_stream(FILE *f, const char *name, size_t *len, char *err, size_t errlen) {
    size_t cap = 1 << 16, n = 0;
    char *buf = ac_try_malloc(cap);
    for (size_t got; buf; n += got) {
        if (n + 1 >= cap) { /* room for the NUL */
            char *p = cap <= SIZE_MAX / 2 ? ac_try_realloc(buf, cap * 2) : NULL;
            if (!p) free(buf);
            buf = p, cap *= 2;
            if (!buf) break;
        }
        if ((got = fread(buf + n, 1, cap - n - 1, f)) == 0) break;
    }
    int e = buf && ferror(f) ? (errno ? errno : EIO) : 0;
    if (!buf || e) {
        snprintf(err, errlen, "cannot read %s: %s", name, buf ? strerror(e) : "not enough memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

char *ac_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    errno = 0;
    char *buf = ac_read_stream(f, path, len, err, errlen);
    fclose(f);
    return buf;
}
