/* Errors: a kind (the Python exception PyTorch raises) and one formatted
 * message, handed to the installed handler. The default handler prints them
 * the way Python's traceback ends ("IndexError: ...") and aborts. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "internal.h"

int ac_finish_output(const char *program, int rc) {
    bool out_ok = fflush(stdout) == 0 && !ferror(stdout);
    int e = errno;
    if (!out_ok) fprintf(stderr, "%s: cannot write the output: %s\n", program, strerror(e ? e : EIO));
    bool err_ok = fflush(stderr) == 0 && !ferror(stderr);
    return out_ok && err_ok ? rc : rc ? rc : 1;
}

/* Per thread: the handler (a longjmp target belongs to one thread) and the last error. */
static _Thread_local ac_error_handler handler;
static _Thread_local void *handler_user;
static _Thread_local char last_message[1024];
static _Thread_local ac_error_kind last_kind;

/* Whoever holds state an error must not leave behind (grad mode, the default
 * generator's lock) registers a hook; error.c knows nothing of them. */
#define MAX_HOOKS 8
static void (*hooks[MAX_HOOKS])(void);
static int nhooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;

void ac_on_error(void (*hook)(void)) {
    pthread_mutex_lock(&hooks_lock);
    bool known = false;
    for (int i = 0; i < nhooks; i++) known = known || hooks[i] == hook;
    if (!known && nhooks < MAX_HOOKS) hooks[nhooks++] = hook;
    pthread_mutex_unlock(&hooks_lock);
}

void ac_set_error_handler(ac_error_handler fn, void *user) {
    handler = fn;
    handler_user = user;
}

const char *ac_last_error(void) { return last_message; }
ac_error_kind ac_last_error_kind(void) { return last_kind; }

/* Python's repr of a float: the shortest digits that read back, positional
 * for exponents from -4 to 15 ("1.0", "100000.0", "0.0001"), else "1e-08". */
const char *ac_pyfloat(double v, char buf[32]) {
    if (isnan(v)) return "nan";
    if (isinf(v)) return v > 0 ? "inf" : "-inf";
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, 32, "%.*e", prec - 1, v);
        if (strtod(buf, NULL) == v) break;
    }
    snprintf(buf, 32, "%.*e", prec - 1, v);
    int e = atoi(strchr(buf, 'e') + 1);
    if (e < -4 || e >= 16) return buf; /* C's exponent has two digits at least, as Python's */
    snprintf(buf, 32, "%.*f", prec - 1 - e > 0 ? prec - 1 - e : 0, v);
    if (!strchr(buf, '.')) strcat(buf, ".0");
    return buf;
}

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
    /* a handler may longjmp out of a no-grad section, or out of a draw from the default generator */
    pthread_mutex_lock(&hooks_lock);
    int n = nhooks;
    pthread_mutex_unlock(&hooks_lock);
    for (int i = 0; i < n; i++) hooks[i]();
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
