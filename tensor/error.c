/* Errors: one formatted message, handed to the installed handler. The default
 * handler prints it the way PyTorch's RuntimeError reads and aborts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Per thread: the handler (a longjmp target belongs to one thread) and the last message. */
static _Thread_local ac_error_handler handler;
static _Thread_local void *handler_user;
static _Thread_local char last_message[1024];

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
    ac_rng_recover();      /* or out of a draw from the default generator */
    if (handler) handler(last_message, handler_user);
    /* The default, and what happens if a handler returns: never go on with garbage. */
    fflush(stdout);
    fprintf(stderr, "RuntimeError: %s\n", last_message);
    abort();
}
