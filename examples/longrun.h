/* Long runs lose nothing: what every trainer of the examples (train, gpt train and appendix-d,
 * finetune classify and instruct) does when it is asked to stop, and how it shows a loop that takes
 * a while. Header-only, as cli.h.
 *
 * Stopping. SIGINT (Ctrl-C), SIGTERM or SIGHUP asks the run to stop: the program finishes the step
 * (or the answer) under way, saves what --save names (the model, AdamW's state, the generator and
 * where the run stands), prints one line on stderr,
 *
 *     finetune: stopped by signal 2 after step 145; saved to run.safetensors
 *
 * and exits 128 + the signal (130, 143, 129), as a shell reports a process that a signal ended. A
 * second signal exits at once (a second Ctrl-C, or another kill; not timeout(1)'s second copy of its
 * one signal, see longrun_repeat); a save it interrupts leaves no file behind (its FILE.tmp is removed,
 * FILE is as it was). --resume FILE (--load for train and gpt) goes on from such a file and prints
 * the lines that the uninterrupted run would have printed after the first run's last one.
 *
 * Progress. On a terminal, stderr shows one live line for a loop that has run more than half a
 * second: the training steps, the library's loops (a loader's batches during evaluation, a model's
 * tensors as they load, through ac_set_progress_handler) and the answers. On a pipe nothing, so
 * stdout keeps the reference programs' lines; AC_NO_LIVE=1 turns it off on a terminal too.
 *
 * For the tests: AC_TEST_SIGNAL="step N" (or "answer N"; "step N 15" for SIGTERM) raises the
 * signal when the run reaches that point, so that a test stops a run exactly there. */
#ifndef AC_EXAMPLES_LONGRUN_H
#define AC_EXAMPLES_LONGRUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli.h"    /* cli_now_seconds */
#include "tensor.h" /* ac_set_progress_handler */

/* ---- stopping -------------------------------------------------------------------------------------- */

static volatile sig_atomic_t longrun_signal;   /* the signal that asked to stop, or 0 */
static volatile sig_atomic_t longrun_saving;   /* a save is writing longrun_tmp */
static char longrun_tmp[4200];                 /* FILE.tmp of the save under way */
static char longrun_msg[200];                  /* what the first signal writes (a handler may only write(2)) */
static volatile sig_atomic_t longrun_msg_len;

static volatile sig_atomic_t longrun_first_pid; /* who sent the first (0: the terminal, the kernel) */
static struct timespec longrun_first_at;

/* timeout(1) sends its signal to the program and then to the program's process group, so one request
 * arrives twice within microseconds: the same signal from the same process within a second is that
 * one request again. Ctrl-C comes from the terminal (no sending process), once a key press. */
static bool longrun_repeat(int sig, const siginfo_t *info, const struct timespec *now) {
    if (sig != longrun_signal || !info || info->si_code != SI_USER || info->si_pid == 0 ||
        (sig_atomic_t)info->si_pid != longrun_first_pid)
        return false;
    double dt = (double)(now->tv_sec - longrun_first_at.tv_sec) + 1e-9 * (double)(now->tv_nsec - longrun_first_at.tv_nsec);
    return dt < 1.0;
}

static void longrun_on_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    struct timespec now = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe (POSIX.1-2008) */
    if (!longrun_signal) {
        ssize_t w = write(2, longrun_msg, (size_t)longrun_msg_len);
        (void)w;
        longrun_first_pid = info && info->si_code == SI_USER ? (sig_atomic_t)info->si_pid : 0;
        longrun_first_at = now;
        longrun_signal = sig;
        return;
    }
    if (longrun_repeat(sig, info, &now)) return;
    if (longrun_saving) unlink(longrun_tmp); /* no half-written file: FILE itself is untouched until the rename */
    _exit(128 + sig);
}

/* What the first signal says: "PROG: stopping after this UNIT (again to quit at once)". The unit
 * changes with the loop under way (a step, an answer). */
static void longrun_unit(const char *prog, const char *unit) {
    longrun_msg_len = 0;
    int n = snprintf(longrun_msg, sizeof longrun_msg, "\n%s: stopping after this %s (again to quit at once)\n", prog, unit);
    longrun_msg_len = n > 0 && (size_t)n < sizeof longrun_msg ? n : 0;
}

static void longrun_catch_signals(const char *prog) {
    longrun_unit(prog, "step");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = longrun_on_signal;
    sa.sa_flags = SA_RESTART | SA_SIGINFO; /* a read or write under way goes on; the loop looks at the flag */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
#ifdef SIGHUP
    sigaction(SIGHUP, &sa, NULL);
#endif
}

static inline bool longrun_stopping(void) { return longrun_signal != 0; }

/* The tests' stop at an exact point: AC_TEST_SIGNAL="WHERE N [SIG]" raises SIG (SIGINT) when the
 * run reports reaching WHERE number N. */
static void longrun_point(const char *where, long long n) {
    const char *spec = getenv("AC_TEST_SIGNAL");
    if (!spec || !*spec) return;
    char w[32];
    long long at;
    int sig = SIGINT;
    if (sscanf(spec, "%31s %lld %d", w, &at, &sig) >= 2 && !strcmp(w, where) && at == n) raise(sig);
}

/* Around a save: a second signal during it removes PATH.tmp (the save writes there, then renames) */
static void longrun_save_begin(const char *path) {
    snprintf(longrun_tmp, sizeof longrun_tmp, "%s.tmp", path);
    longrun_saving = strlen(path) + 4 < sizeof longrun_tmp;
}
static void longrun_save_end(void) { longrun_saving = 0; }

/* The one stderr line of a stopped run; returns the exit status, 128 + the signal (1 when a save
 * was asked for and failed: the run's work is then not safe, and the status says so). */
static int longrun_stopped(const char *prog, const char *after, const char *save, bool saved) {
    fflush(stdout);
    if (saved) fprintf(stderr, "%s: stopped by signal %d after %s; saved to %s\n", prog, (int)longrun_signal, after, save);
    else if (save) fprintf(stderr, "%s: stopped by signal %d after %s; saving to %s failed\n", prog, (int)longrun_signal, after, save);
    else fprintf(stderr, "%s: stopped by signal %d after %s (nothing saved: --save FILE keeps a run)\n", prog, (int)longrun_signal, after);
    return save && !saved ? 1 : 128 + (int)longrun_signal;
}

/* ---- progress -------------------------------------------------------------------------------------- */

static inline bool longrun_live_wanted(void) { return isatty(2) && !getenv("AC_NO_LIVE"); }

typedef struct {
    bool on;      /* a terminal */
    bool drawn;   /* the line is on the screen */
    double t0;    /* the loop's start */
    double shown; /* when the line was last drawn */
    int64_t done0;
} longrun_live;

static inline void longrun_live_start(longrun_live *l, int64_t done0) {
    *l = (longrun_live){.on = longrun_live_wanted(), .t0 = cli_now_seconds(), .done0 = done0};
}

static inline void longrun_live_clear(longrun_live *l) {
    if (l->drawn) fputs("\r\033[K", stderr);
    l->drawn = false;
}

/* "WHAT done/total  RATE UNIT/s  N s left", once the loop has run half a second, at most ten
 * times a second; `units` counts what the rate counts (tokens; 0: the items themselves). */
static void longrun_live_show(longrun_live *l, const char *what, int64_t done, int64_t total, double units, const char *unit) {
    if (!l->on) return;
    double now = cli_now_seconds(), el = now - l->t0;
    if (el < 0.5 || (l->drawn && now - l->shown < 0.1 && done < total)) return;
    double n = (double)(done - l->done0), rate = (unit ? units : n) / (el > 0 ? el : 1e-9);
    double left = n > 0 ? el / n * (double)(total - done) : 0;
    char t[32];
    if (left >= 3600) snprintf(t, sizeof t, "%.0f h %02.0f min", left / 3600, fmod(left, 3600) / 60);
    else if (left >= 60) snprintf(t, sizeof t, "%.0f min %02.0f s", floor(left / 60), fmod(left, 60));
    else snprintf(t, sizeof t, "%.0f s", left);
    fprintf(stderr, "\r\033[K%s %lld/%lld  %.*f %s/s  %s left", what, (long long)done, (long long)total,
            rate < 10 ? 1 : 0, rate, unit ? unit : "", t);
    l->drawn = true, l->shown = now;
}

/* The library's loops (ac_set_progress_handler): done 0 starts one, done == total ends it. */
static longrun_live longrun_lib;
static void longrun_on_progress(const char *what, int64_t done, int64_t total, void *user) {
    (void)user;
    if (done == 0) longrun_live_start(&longrun_lib, 0);
    else longrun_live_show(&longrun_lib, what, done, total, 0, NULL);
    if (done >= total) longrun_live_clear(&longrun_lib);
}

static inline void longrun_show_progress(void) {
    if (longrun_live_wanted()) ac_set_progress_handler(longrun_on_progress, NULL);
}

/* ---- stdout ---------------------------------------------------------------------------------------- */

/* The printed lines are the run's result: a write that fails (a full disk, a closed pipe) stops the
 * run at once, with ac_finish_output's message, instead of training on to an end nobody reads. */
static inline void longrun_flush(const char *prog) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    exit(ac_finish_output(prog, 1));
}

#endif
