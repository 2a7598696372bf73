/* The example programs' flags, as one table each: a flag's name, its kind,
 * where its value goes, its range and the commands that take it. cli_parse
 * reads argv against the table; a flag given to a command that does not use
 * it is refused, naming the commands that do, instead of being dropped
 * without a word. Header-only, since each example is one program file. */
#ifndef AC_EXAMPLES_CLI_H
#define AC_EXAMPLES_CLI_H

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/stat.h>
#include <unistd.h>

#include "extend.h" /* ac_output_path_check */
#include "tensor.h" /* ac_finish_output */

/* Where a default file is, found as a user means it: under $AC_SHARED when that is set; else
 * ../shared from here; else ../shared beside the checkout this program was built in (build/PROGRAM's
 * ../../shared), so that ./build/PROGRAM runs from any directory. rel is under shared/; the result is
 * static storage, or the plain relative path when none of them has it. */
static inline const char *cli_default_path(const char *rel, char *buf, size_t n) {
    struct stat st;
    const char *env = getenv("AC_SHARED");
    if (env && *env) {
        snprintf(buf, n, "%s/%s", env, rel);
        return buf;
    }
    snprintf(buf, n, "../shared/%s", rel);
    if (stat(buf, &st) == 0) return buf;
#ifdef __linux__
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, n, "%s/../../shared/%s", exe, rel);
        if (stat(buf, &st) == 0) return buf;
    }
#endif
    snprintf(buf, n, "../shared/%s", rel);
    return buf;
}

typedef enum { CLI_SWITCH, CLI_TEXT, CLI_INT, CLI_NUM } cli_kind;

typedef struct {
    const char *name;   /* "--lr" */
    cli_kind kind;
    void *out;          /* CLI_SWITCH: bool *; CLI_TEXT: const char **; CLI_INT: long long *; CLI_NUM: double * */
    long long lo, hi;   /* CLI_INT: the range, both ends in (hi LLONG_MAX: no upper end) */
    double min, max;    /* CLI_NUM: the range; min itself is refused where above_min */
    bool above_min;
    unsigned commands;  /* the commands that take it, a bit each (1u << their index); 0: every one */
} cli_flag;

#define CLI_ALL 0u
#define CLI_SWITCH_FLAG(name, out, cmds) {name, CLI_SWITCH, out, 0, 0, 0, 0, false, cmds}
#define CLI_TEXT_FLAG(name, out, cmds) {name, CLI_TEXT, out, 0, 0, 0, 0, false, cmds}
#define CLI_INT_FLAG(name, out, lo, hi, cmds) {name, CLI_INT, out, lo, hi, 0, 0, false, cmds}
#define CLI_NUM_FLAG(name, out, min, max, cmds) {name, CLI_NUM, out, 0, 0, min, max, false, cmds}
#define CLI_POS_FLAG(name, out, min, max, cmds) {name, CLI_NUM, out, 0, 0, min, max, true, cmds} /* > min */

typedef struct {
    const char *prog;              /* "gpt": every message starts with it */
    const char *const *commands;   /* the command names, NULL-terminated; NULL for a program without commands */
    const cli_flag *flags;
    int n_flags;
    int max_positional;            /* after the command */
    bool hint;                     /* end each message with "(PROG --help lists the flags)" */
} cli_spec;

#define CLI_MAX_FLAGS 64

typedef struct {
    int command;                   /* its index, or -1 when none was given */
    const char *positional[4];
    int n_positional;
    bool given[CLI_MAX_FLAGS];     /* by the flag's place in the table */
} cli_args;

static void cli_end(const cli_spec *s) {
    if (s->hint) fprintf(stderr, " (%s --help lists the flags)", s->prog);
    fputc('\n', stderr);
}

static int cli_fail(const cli_spec *s, const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "%s: ", s->prog);
    fprintf(stderr, fmt, a, b);
    cli_end(s);
    return 2;
}

static bool cli_value(const cli_spec *s, const cli_flag *f, const char *v) {
    char *end, range[96];
    errno = 0;
    if (f->kind == CLI_TEXT) {
        *(const char **)f->out = v;
    } else if (f->kind == CLI_INT) {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < f->lo || x > f->hi) {
            if (f->hi == LLONG_MAX || f->hi == LONG_MAX) snprintf(range, sizeof range, ">= %lld", f->lo);
            else snprintf(range, sizeof range, "from %lld to %lld", f->lo, f->hi);
            fprintf(stderr, "%s: %s expects an integer %s, got '%s'", s->prog, f->name, range, v);
            cli_end(s);
            return false;
        }
        *(long long *)f->out = x;
    } else {
        double x = strtod(v, &end);
        bool low = f->above_min ? !(x > f->min) : !(x >= f->min);
        if (errno || end == v || *end || !isfinite(x) || low || x > f->max) {
            if (f->max < HUGE_VAL) snprintf(range, sizeof range, "from %g to %g", f->min, f->max);
            else snprintf(range, sizeof range, "%s %g", f->above_min ? ">" : ">=", f->min);
            fprintf(stderr, "%s: %s expects a number %s, got '%s'", s->prog, f->name, range, v);
            cli_end(s);
            return false;
        }
        *(double *)f->out = x;
    }
    return true;
}

/* One edit apart (a letter added, dropped or changed, or two neighbours swapped), as git's "did you
 * mean" finds a near command: --epoch for --epochs, trian for train */
static bool cli_one_edit(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b), i = 0;
    if (n > m) { const char *t = a; a = b; b = t; size_t k = n; n = m; m = k; }
    if (m - n > 1) return false;
    while (i < n && a[i] == b[i]) i++;
    if (i == n) return m - n == 1;             /* b is a with one more letter at the end */
    if (n == m) return !strcmp(a + i + 1, b + i + 1) ||     /* one changed */
                       (i + 1 < n && a[i] == b[i + 1] && a[i + 1] == b[i] && !strcmp(a + i + 2, b + i + 2)); /* swapped */
    return !strcmp(a + i, b + i + 1);          /* one added in b */
}

/* " (did you mean --epochs?)" for the one name of names (or flags) one edit from arg, else "" */
static const char *cli_did_you_mean(const cli_spec *s, const char *arg, bool commands, char *out, size_t n) {
    const char *found = NULL;
    int count = 0;
    if (commands) {
        for (int k = 0; s->commands[k]; k++)
            if (cli_one_edit(arg, s->commands[k])) found = s->commands[k], count++;
    } else {
        for (int k = 0; k < s->n_flags; k++)
            if (cli_one_edit(arg, s->flags[k].name)) found = s->flags[k].name, count++;
    }
    out[0] = 0;
    if (count == 1) snprintf(out, n, " (did you mean %s?)", found);
    return out;
}

/* "train, generate and appendix-d": the commands in mask */
static void cli_command_list(const cli_spec *s, unsigned mask, char *out, size_t n) {
    int count = 0, total = 0;
    for (int k = 0; s->commands[k]; k++) total += (mask >> k) & 1;
    out[0] = 0;
    for (int k = 0; s->commands[k]; k++) {
        if (!((mask >> k) & 1)) continue;
        size_t at = strlen(out);
        snprintf(out + at, n - at, "%s%s", count == 0 ? "" : count == total - 1 ? " and " : ", ", s->commands[k]);
        count++;
    }
}

/* 0, or the exit status of a usage error (2) after its message. -h and --help call usage. */
static int cli_parse(const cli_spec *s, int argc, char **argv, cli_args *a, void (*usage)(FILE *)) {
    *a = (cli_args){.command = -1};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            exit(ac_finish_output(s->prog, 0));
        }
        int k = 0;
        while (k < s->n_flags && strcmp(arg, s->flags[k].name)) k++;
        if (k == s->n_flags) {
            char hint[96];
            if (arg[0] == '-' && arg[1]) return cli_fail(s, "unknown flag %s%s", arg, cli_did_you_mean(s, arg, false, hint, sizeof hint));
            if (s->commands && a->command < 0) {
                int c = 0;
                while (s->commands[c] && strcmp(s->commands[c], arg)) c++;
                a->command = c;
                if (!s->commands[c]) {
                    char all[256], both[400];
                    cli_command_list(s, ~0u, all, sizeof all);
                    snprintf(both, sizeof both, "%s%s", all, cli_did_you_mean(s, arg, true, hint, sizeof hint));
                    return cli_fail(s, "unknown command '%s': the commands are %s", arg, both);
                }
            } else if (a->n_positional < s->max_positional && (unsigned)a->n_positional < 4u) {
                a->positional[(unsigned)a->n_positional++] = arg;
            } else {
                return cli_fail(s, "%s is not a flag, and no more inputs are taken%s", arg, "");
            }
            continue;
        }
        const cli_flag *f = &s->flags[k];
        a->given[k] = true;
        if (f->kind == CLI_SWITCH) {
            *(bool *)f->out = true;
            continue;
        }
        if (i + 1 >= argc) return cli_fail(s, "%s needs a value%s", arg, "");
        if (!cli_value(s, f, argv[++i])) return 2;
    }
    if (!s->commands || a->command < 0) return 0;
    for (int k = 0; k < s->n_flags; k++) {
        unsigned m = s->flags[k].commands;
        if (!a->given[k] || !m || ((m >> a->command) & 1)) continue;
        char takers[256];
        cli_command_list(s, m, takers, sizeof takers);
        fprintf(stderr, "%s: %s goes with %s, not %s", s->prog, s->flags[k].name, takers, s->commands[a->command]);
        cli_end(s);
        return 2;
    }
    return 0;
}

/* An output flag's path can be written (checked before any work); false after PROG's message. */
static inline bool cli_check_output(const char *prog, const char *flag, const char *path) {
    char err[512];
    if (!path || ac_output_path_check(path, true, err, sizeof err)) return true;
    fprintf(stderr, "%s: %s %s\n", prog, flag, err);
    return false;
}

/* Seconds on the wall clock, for the programs' "(training took X s)" and live lines */
static inline double cli_now_seconds(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* f"{n:,}": 163,009,536 */
static inline const char *cli_thousands(long long n, char buf[32]) {
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%lld", n < 0 ? -n : n), k = 0;
    if (n < 0) buf[k++] = '-';
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = 0;
    return buf;
}

/* Was the flag of this name given? */
static bool cli_given(const cli_spec *s, const cli_args *a, const char *name) {
    for (int k = 0; k < s->n_flags; k++)
        if (!strcmp(s->flags[k].name, name)) return a->given[k];
    return false;
}

#endif
