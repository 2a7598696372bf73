/* Shared by the libFuzzer targets (make fuzz): errors of the library are fine
 * (a handler jumps back), crashes and sanitizer reports are not. */
#ifndef ATTENTION_FUZZ_COMMON_H
#define ATTENTION_FUZZ_COMMON_H

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tensor.h"

static jmp_buf fuzz_jump;
static void fuzz_on_error(ac_error_kind kind, const char *msg, void *user) {
    (void)kind, (void)msg, (void)user;
    longjmp(fuzz_jump, 1);
}

/* The input as a file (the loaders read paths), one per process. */
static const char *fuzz_file(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/ac_fuzz_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    return path;
}

#endif
