/* Errors: one formatted message, handed to the installed handler. The default
 * handler prints it the way PyTorch's RuntimeError reads and aborts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static ac_error_handler handler;
static void *handler_user;
static char last_message[1024];

void ac_set_error_handler(ac_error_handler fn, void *user) {
    handler = fn;
    handler_user = user;
}

const char *ac_last_error(void) { return last_message; }

void ac_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    ac_autograd_recover(); /* a handler may longjmp out of a no-grad section */
    if (handler) handler(last_message, handler_user);
    /* The default, and what happens if a handler returns: never go on with garbage. */
    fflush(stdout);
    fprintf(stderr, "RuntimeError: %s\n", last_message);
    abort();
}
