/* Where a program writes a file by renaming a finished temporary over it:
 * that must never replace what is not a regular file (as root, a rename
 * over /dev/null turns the device into a file). See extend.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "extend.h"

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO";
#ifdef S_ISSOCK
    if (S_ISSOCK(m)) return "a socket";
#endif
    return "not a regular file";
}

bool ac_output_path_check(const char *path, bool try_write, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* stat follows a symlink: one to a file is fine */
        snprintf(err, errlen, "%s is %s, not a regular file: it is not replaced", path, kind_of(st.st_mode));
        errno = EINVAL;
        return false;
    }
    if (!try_write) return true;
    size_t n = strlen(path);
    char *tmp = ac_try_malloc(n + 5);
    if (!tmp) {
        snprintf(err, errlen, "not enough memory: you tried to allocate %zu bytes", n + 5);
        return false;
    }
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    FILE *f = stat(tmp, &st) == 0 && !S_ISREG(st.st_mode) ? NULL : fopen(tmp, "wb");
    int e = f ? 0 : errno ? errno : EINVAL;
    if (f) {
        fclose(f), remove(tmp);
    } else { /* the cause, in the words of the place: a missing directory, or one that takes no new file */
        char *slash = strrchr(tmp, '/');
        if (slash == tmp) slash[1] = 0;
        else if (slash) *slash = 0;
        const char *dir = slash ? tmp : ".";
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            snprintf(err, errlen, "cannot write %s: the directory %s does not exist", path, dir);
        else
            snprintf(err, errlen, "cannot write %s: cannot create a file in %s (%s)", path, dir, strerror(e));
    }
    free(tmp);
    errno = e;
    return f != NULL;
}

bool ac_close_output(FILE *f) {
    bool ok = fflush(f) == 0;
    int e = errno;
    ok = !ferror(f) && ok;
    if (fclose(f) != 0) ok = false, e = errno;
    errno = ok ? 0 : e ? e : EIO;
    return ok;
}
