/* Errors: a kind (the Python exception PyTorch raises) and one formatted
 * message, handed to the installed handler. The default handler prints them
 * the way Python's traceback ends ("IndexError: ...") and aborts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Per thread: the handler (a longjmp target belongs to one thread) and the last error. */
static _Thread_local ac_error_handler handler;
static _Thread_local void *handler_user;
static _Thread_local char last_message[1024];
static _Thread_local ac_error_kind last_kind;

void ac_set_error_handler(ac_error_handler fn, void *user) {
    handler = fn;
    handler_user = user;
}

const char *ac_last_error(void) { return last_message; }
ac_error_kind ac_last_error_kind(void) { return last_kind; }

const char *ac_error_kind_name(ac_error_kind kind) {
    switch (kind) {
    case AC_INDEX_ERROR: return "IndexError";
    case AC_VALUE_ERROR: return "ValueError";
    case AC_TYPE_ERROR: return "TypeError";
    case AC_RUNTIME_ERROR: break;
    }
    return "RuntimeError";
}

static _Noreturn void raise_v(ac_error_kind kind, const char *fmt, va_list ap) {
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    last_kind = kind;
    ac_autograd_recover(); /* a handler may longjmp out of a no-grad section */
    ac_rng_recover();      /* or out of a draw from the default generator */
    if (handler) handler(kind, last_message, handler_user);
    /* The default, and what happens if a handler returns: never go on with garbage. */
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", ac_error_kind_name(kind), last_message);
    abort();
}

void ac_raise(ac_error_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    raise_v(kind, fmt, ap);
}

void ac_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    raise_v(AC_RUNTIME_ERROR, fmt, ap);
}
