/* The library's long loops tell a program how far they are (tensor.h: ac_set_progress_handler);
 * the library itself never draws anything. */
#include "internal.h"

static ac_progress_handler handler;
static void *handler_user;

void ac_set_progress_handler(ac_progress_handler fn, void *user) {
    handler = fn;
    handler_user = user;
}

void ac_progress(const char *what, int64_t done, int64_t total) {
    if (handler) handler(what, done, total, handler_user);
}
