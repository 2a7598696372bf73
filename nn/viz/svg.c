/* What every picture shares: escaping text for XML, the SVG header, text
 * elements, and writing a file atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "svg.h"
#include "chartext.h" /* chartext_utf8_next / _put: the project's one UTF-8 decoder and encoder */

/* One code point of s at *i (advanced); U+FFFD for a byte that starts no
 * valid sequence, so any bytes give valid UTF-8 out. */
static uint32_t next_cp(const char *s, size_t len, size_t *i) {
    uint32_t cp;
    int k = chartext_utf8_next(s + *i, len - *i, &cp);
    if (k == 0) {
        *i += 1;
        return 0xFFFD;
    }
    *i += (size_t)k;
    return cp;
}

static void put_utf8(FILE *f, uint32_t c) {
    char b[4];
    fwrite(b, 1, (size_t)chartext_utf8_put(c, b), f);
}

void ac_xml_escape(FILE *f, const char *s) {
    if (!s) return;
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        uint32_t c = next_cp(s, len, &i);
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            /* XML 1.0 allows no C0 control but tab, LF and CR (which a parser
             * turns into LF), so the others, and CR, show as their pictures,
             * U+2400 + c (DEL: U+2421). */
            if (c == '\t' || c == '\n') fputc((int)c, f);
            else if (c < 0x20) put_utf8(f, 0x2400 + c);
            else if (c == 0x7F) put_utf8(f, 0x2421);
            else if (c >= 0x80 && c < 0xA0) put_utf8(f, 0xFFFD); /* C1 controls: discouraged in XML */
            else if (c == 0xFFFE || c == 0xFFFF) put_utf8(f, 0xFFFD); /* not XML characters */
            else put_utf8(f, c);
        }
    }
}

int ac_text_columns(const char *s) {
    if (!s) return 0;
    size_t len = strlen(s);
    int n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c = next_cp(s, len, &i);
        /* East Asian wide and emoji ranges take two columns */
        n += (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) || (c >= 0xAC00 && c <= 0xD7A3) ||
                     (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFF00 && c <= 0xFF60) || (c >= 0x1F300 && c <= 0x1FAFF) ||
                     (c >= 0x20000 && c <= 0x3FFFD)
                 ? 2
                 : 1;
    }
    return n;
}

void svg_begin(FILE *f, double w, double h) {
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"%d\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            w, h, w, h, SVG_FONT);
}

void svg_end(FILE *f) { fputs("</svg>\n", f); }

void svg_text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y, anchor, extra ? " " : "", extra ? extra : "");
    ac_xml_escape(f, s);
    fputs("</text>\n", f);
}

/* A number as a short label: 4 significant digits, no trailing zeros, "-0" as "0". */
void svg_number(char *buf, size_t n, double v) {
    if (v == 0) v = 0; /* -0 */
    snprintf(buf, n, "%.4g", v);
}

bool ac_write_file_atomic(const char *path, bool (*draw)(FILE *f, void *user), void *user) {
    size_t n = strlen(path);
    char *tmp = ac_try_malloc(n + 5); /* reports errno, never raises: the caller says which file */
    if (!tmp) {
        errno = ENOMEM;
        return false;
    }
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    char why[64];
    FILE *f = ac_output_path_check(path, false, why, sizeof why) ? fopen(tmp, "wb") : NULL; /* never over a device */
    if (!f) {
        free(tmp);
        return false;
    }
    bool ok = draw(f, user);
    ok = !ferror(f) && ok;
    if (fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        int e = errno;
        remove(tmp);
        errno = e ? e : EIO;
    }
    free(tmp);
    return ok;
}
