/* A strict well-formedness checker for the XML the project writes (SVG, and
 * the page, which is XHTML-compatible): valid UTF-8 with no characters XML
 * forbids, balanced and matching tags, quoted attributes without duplicates,
 * only known or numeric entity references, one root element. Not a full XML
 * parser (no DTD subset, no namespaces check); enough to catch what an
 * unescaped label or a broken writer would produce. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xml_check.h"
#include "toy_lm.h"

typedef struct { const char *s, *end, *start; char *err; size_t errlen; } P;

static bool fail(P *p, const char *what) {
    snprintf(p->err, p->errlen, "byte %ld: %s near \"%.30s\"", (long)(p->s - p->start), what, p->s);
    return false;
}

static bool name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.')) || ((unsigned char)c >= 0x80);
}

static size_t name_len(const char *s) {
    size_t n = 0;
    while (name_char(s[n], n == 0)) n++;
    return n;
}

static bool entity(P *p) { /* at '&' */
    const char *s = p->s + 1;
    if (*s == '#') {
        s++;
        bool hex = *s == 'x';
        if (hex) s++;
        const char *d = s;
        uint32_t v = 0;
        while ((hex ? strchr("0123456789abcdefABCDEF", *s) : strchr("0123456789", *s)) && *s) {
            v = v * (hex ? 16 : 10) + (uint32_t)(*s <= '9' ? *s - '0' : (*s | 32) - 'a' + 10);
            if (v > 0x10FFFF) return fail(p, "character reference out of range");
            s++;
        }
        if (s == d || *s != ';') return fail(p, "bad character reference");
        if ((v < 0x20 && v != 9 && v != 10 && v != 13) || (v >= 0xD800 && v <= 0xDFFF) || v == 0xFFFE || v == 0xFFFF)
            return fail(p, "character reference to a character XML forbids");
        p->s = s + 1;
        return true;
    }
    static const char *known[] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
    for (int i = 0; i < 5; i++)
        if (strncmp(s, known[i], strlen(known[i])) == 0) {
            p->s = s + strlen(known[i]);
            return true;
        }
    return fail(p, "unknown or unterminated entity");
}

/* Character data up to '<' (or, in an attribute, the closing quote). */
static bool chars(P *p, char stop) {
    while (p->s < p->end && *p->s != '<' && *p->s != stop) {
        if (*p->s == '&') {
            if (!entity(p)) return false;
            continue;
        }
        if (stop == 0 && p->s + 2 < p->end && strncmp(p->s, "]]>", 3) == 0) return fail(p, "]]> in text");
        p->s++;
    }
    return true;
}

static bool skip_until(P *p, const char *what) {
    const char *e = strstr(p->s, what);
    if (!e || e >= p->end) return fail(p, "unterminated construct");
    p->s = e + strlen(what);
    return true;
}

static void spaces(P *p) {
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\t' || *p->s == '\r') p->s++;
}

bool xml_check(const char *text, size_t len, char *err, size_t errlen) {
    P p = {text, text + len, text, err, errlen};
    /* the characters first: UTF-8, no NUL, no C0 controls but tab/LF/CR, no U+FFFE/FFFF */
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = chartext_utf8_next(text + i, len - i, &cp);
        p.s = text + i;
        if (k == 0) return fail(&p, "invalid UTF-8");
        if ((cp < 0x20 && cp != 9 && cp != 10 && cp != 13) || cp == 0xFFFE || cp == 0xFFFF)
            return fail(&p, "a character XML forbids");
        i += (size_t)k;
    }
    p.s = text;
    const char *stack[256];
    size_t stack_len[256];
    int depth = 0, roots = 0;
    while (p.s < p.end) {
        if (*p.s != '<') {
            const char *t = p.s;
            if (!chars(&p, 0)) return false;
            if (depth == 0)
                for (; t < p.s; t++)
                    if (*t != ' ' && *t != '\n' && *t != '\t' && *t != '\r') return fail(&p, "text outside the root");
            continue;
        }
        if (strncmp(p.s, "<!--", 4) == 0) {
            p.s += 4;
            const char *e = strstr(p.s, "--");
            if (!e || e[2] != '>') return fail(&p, "bad comment");
            p.s = e + 3;
        } else if (strncmp(p.s, "<!DOCTYPE", 9) == 0) {
            if (depth || roots) return fail(&p, "DOCTYPE after the root");
            if (!skip_until(&p, ">")) return false;
        } else if (strncmp(p.s, "<![CDATA[", 9) == 0) {
            if (!depth) return fail(&p, "CDATA outside the root");
            if (!skip_until(&p, "]]>")) return false;
        } else if (strncmp(p.s, "<?", 2) == 0) {
            if (!skip_until(&p, "?>")) return false;
        } else if (p.s[1] == '/') {
            p.s += 2;
            size_t n = name_len(p.s);
            if (!depth || n != stack_len[depth - 1] || strncmp(p.s, stack[depth - 1], n) != 0)
                return fail(&p, "end tag does not match the open element");
            depth--;
            p.s += n;
            spaces(&p);
            if (*p.s != '>') return fail(&p, "bad end tag");
            p.s++;
        } else {
            p.s++;
            size_t n = name_len(p.s);
            if (n == 0) return fail(&p, "a raw '<' or a bad element name");
            if (depth == 0 && roots++) return fail(&p, "a second root element");
            const char *name = p.s;
            p.s += n;
            const char *attrs[64];
            size_t alen[64];
            int na = 0;
            for (;;) {
                const char *before = p.s;
                spaces(&p);
                if (*p.s == '>' || strncmp(p.s, "/>", 2) == 0) break;
                if (p.s == before) return fail(&p, "no space before an attribute");
                size_t an = name_len(p.s);
                if (an == 0) return fail(&p, "bad attribute name");
                for (int i = 0; i < na; i++)
                    if (alen[i] == an && strncmp(attrs[i], p.s, an) == 0) return fail(&p, "duplicate attribute");
                if (na < 64) attrs[na] = p.s, alen[na++] = an;
                p.s += an;
                spaces(&p);
                if (*p.s != '=') return fail(&p, "attribute without a value");
                p.s++;
                spaces(&p);
                char q = *p.s;
                if (q != '"' && q != '\'') return fail(&p, "unquoted attribute value");
                p.s++;
                if (!chars(&p, q)) return false;
                if (*p.s != q) return fail(&p, "'<' in an attribute value");
                p.s++;
            }
            if (*p.s == '/') p.s += 2;
            else {
                if (depth == 256) return fail(&p, "nesting too deep");
                stack[depth] = name, stack_len[depth++] = n;
                p.s++;
            }
        }
    }
    if (depth) {
        snprintf(err, errlen, "end of input with <%.*s> open", (int)stack_len[depth - 1], stack[depth - 1]);
        return false;
    }
    if (roots != 1) {
        snprintf(err, errlen, "no root element");
        return false;
    }
    return true;
}
