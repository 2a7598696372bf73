/* safetensors reading and writing (format in safetensors.h). The reader is a
 * small strict JSON parser: any surprise is an error message, never a crash,
 * and nothing is copied anywhere until the whole file has been checked. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* safetensors' dtype names for every dtype attention.c stores */
static const struct { ac_dtype dtype; const char *tag; } dtypes[] = {
    {AC_FLOAT32, "F32"}, {AC_FLOAT64, "F64"}, {AC_INT64, "I64"}, {AC_INT32, "I32"}, {AC_BOOL, "BOOL"}};
#define N_DTYPES (sizeof dtypes / sizeof *dtypes)

static const char *dtype_tag(ac_dtype d) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dtype == d) return dtypes[i].tag;
    return "?";
}

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct { char *s; size_t n, cap; bool oom; } Str;
static void sputs(Str *b, const char *s) {
    size_t k = strlen(s);
    if (b->n + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + k + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) { b->oom = true; return; }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, k + 1);
    b->n += k;
}
static void sprintf_(Str *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sputs(b, tmp);
}
static void json_string(Str *b, const char *s) {
    sputs(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sprintf_(b, "\\%c", c);
        else if (c < 0x20) sprintf_(b, "\\u%04x", c);
        else { char one[2] = {(char)c, 0}; sputs(b, one); }
    }
    sputs(b, "\"");
}

bool safetensors_save(const char *path, nn_TensorList ts, int n_meta, const char *const *kv, char *err,
                      size_t errlen) {
    if (!host_little_endian()) { snprintf(err, errlen, "safetensors: big-endian hosts are not supported"); return false; }
    Str h = {0};
    size_t off = 0;
    sputs(&h, "{");
    if (n_meta > 0) {
        sputs(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) sputs(&h, ",");
            json_string(&h, kv[2 * i]);
            sputs(&h, ":");
            json_string(&h, kv[2 * i + 1]);
        }
        sputs(&h, "}");
    }
    for (int i = 0; i < ts.n; i++) {
        const Tensor *t = ts.tensors[i];
        size_t bytes = (size_t)torch_numel(t) * ac_dtype_size(t->dtype);
        if (i || n_meta > 0) sputs(&h, ",");
        json_string(&h, ts.names[i]);
        sprintf_(&h, ":{\"dtype\":\"%s\",\"shape\":[", dtype_tag(t->dtype));
        for (int d = 0; d < t->ndim; d++) sprintf_(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        sprintf_(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + bytes);
        off += bytes;
    }
    sputs(&h, "}");
    while (!h.oom && h.n % 8 != 0) sputs(&h, " "); /* align the data to 8 bytes, as the reference writer does */
    if (h.oom) { free(h.s); snprintf(err, errlen, "safetensors: out of memory"); return false; }

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) { free(h.s); snprintf(err, errlen, "safetensors: out of memory"); return false; }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        free(h.s);
        free(tmp);
        return false;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.s, 1, h.n, f) == h.n;
    for (int i = 0; ok && i < ts.n; i++) {
        Tensor *t = ts.tensors[i];
        ac_mark m = ac_arena_mark();
        Tensor *c = torch_contiguous(torch_detach(t));
        size_t es = ac_dtype_size(t->dtype), bytes = (size_t)torch_numel(t) * es;
        ok = fwrite((const char *)c->data + (size_t)c->offset * es, 1, bytes, f) == bytes;
        ac_arena_release(m);
    }
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    free(h.s);
    if (!ok) {
        snprintf(err, errlen, "writing %s failed: %s", tmp, strerror(errno));
        remove(tmp);
        free(tmp);
        return false;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        remove(tmp);
        free(tmp);
        return false;
    }
    free(tmp);
    return true;
}

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct { const char *p, *end; } Cur;

static void ws(Cur *c) { while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++; }
static bool lit(Cur *c, char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) { c->p++; return true; }
    return false;
}

/* A JSON string into the arena (escapes \" \\ \/ \b \f \n \r \t \uXXXX for ASCII/BMP). */
static char *jstring(Cur *c) {
    ws(c);
    if (c->p >= c->end || *c->p != '"') return NULL;
    c->p++;
    const char *start = c->p;
    size_t cap = 1;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\') c->p++;
        c->p++;
        cap += 4;
    }
    if (c->p >= c->end) return NULL;
    char *out = ac_arena_alloc(cap), *o = out;
    for (const char *s = start; s < c->p; s++) {
        if (*s != '\\') { *o++ = *s; continue; }
        s++;
        switch (*s) {
        case '"': case '\\': case '/': *o++ = *s; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            if (c->p - s < 5) return NULL;
            unsigned v = 0;
            for (int k = 1; k <= 4; k++) {
                char h = s[k];
                v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
                if (v > 0xFFFF) return NULL;
            }
            s += 4;
            if (v < 0x80) *o++ = (char)v;
            else if (v < 0x800) { *o++ = (char)(0xC0 | (v >> 6)); *o++ = (char)(0x80 | (v & 0x3F)); }
            else { *o++ = (char)(0xE0 | (v >> 12)); *o++ = (char)(0x80 | ((v >> 6) & 0x3F)); *o++ = (char)(0x80 | (v & 0x3F)); }
            break;
        }
        default: return NULL;
        }
    }
    *o = 0;
    c->p++;
    return out;
}

static bool juint(Cur *c, uint64_t *v) {
    ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
    uint64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return false;
        x = x * 10 + (uint64_t)(*c->p++ - '0');
    }
    *v = x;
    return true;
}

bool safetensors_load(const char *path, safetensors_File *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    char *hdr = NULL;
    if (!f) { snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno)); return false; }
    uint8_t len8[8];
    if (fread(len8, 1, 8, f) != 8) FAIL("%s: not a safetensors file (shorter than its 8-byte header length)", path);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (fseek(f, 0, SEEK_END) != 0) FAIL("%s: cannot seek", path);
    long fsize = ftell(f);
    if (fsize < 0) FAIL("%s: cannot tell its size", path);
    if (hlen < 2 || hlen > (uint64_t)fsize - 8 || hlen > (100u << 20))
        FAIL("%s: corrupt safetensors header length %llu for a file of %ld bytes", path, (unsigned long long)hlen, fsize);
    hdr = malloc((size_t)hlen);
    if (!hdr) FAIL("%s: out of memory for a %llu-byte header", path, (unsigned long long)hlen);
    if (fseek(f, 8, SEEK_SET) != 0 || fread(hdr, 1, (size_t)hlen, f) != hlen) FAIL("%s: truncated header", path);
    uint64_t data_len = (uint64_t)fsize - 8 - hlen;

    Cur c = {hdr, hdr + hlen};
    int cap = 16, n = 0, mcap = 4;
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)cap);
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)cap);
    out->meta_keys = ac_arena_alloc(sizeof(char *) * (size_t)mcap);
    out->meta_values = ac_arena_alloc(sizeof(char *) * (size_t)mcap);
    uint64_t covered = 0;
    if (!lit(&c, '{')) FAIL("%s: corrupt header (expected a JSON object)", path);
    if (!lit(&c, '}')) {
        do {
            char *name = jstring(&c);
            if (!name || !lit(&c, ':')) FAIL("%s: corrupt header (expected \"name\": {...})", path);
            if (strcmp(name, "__metadata__") == 0) {
                if (!lit(&c, '{')) FAIL("%s: corrupt __metadata__", path);
                if (!lit(&c, '}')) {
                    do {
                        char *k = jstring(&c), *v;
                        if (!k || !lit(&c, ':') || !(v = jstring(&c))) FAIL("%s: corrupt __metadata__ entry", path);
                        if (out->n_meta == mcap) {
                            const char **nk = ac_arena_alloc(sizeof(char *) * (size_t)mcap * 2);
                            const char **nv = ac_arena_alloc(sizeof(char *) * (size_t)mcap * 2);
                            memcpy(nk, out->meta_keys, sizeof(char *) * (size_t)mcap);
                            memcpy(nv, out->meta_values, sizeof(char *) * (size_t)mcap);
                            out->meta_keys = nk;
                            out->meta_values = nv;
                            mcap *= 2;
                        }
                        out->meta_keys[out->n_meta] = k;
                        out->meta_values[out->n_meta++] = v;
                    } while (lit(&c, ','));
                    if (!lit(&c, '}')) FAIL("%s: corrupt __metadata__ (expected '}')", path);
                }
                continue;
            }
            char dtype[8] = "";
            int64_t shape[AC_MAX_DIMS];
            int nd = -1;
            uint64_t begin = 0, endo = 0;
            bool have_off = false;
            if (!lit(&c, '{')) FAIL("%s: corrupt entry for \"%s\"", path, name);
            do {
                char *key = jstring(&c);
                if (!key || !lit(&c, ':')) FAIL("%s: corrupt entry for \"%s\"", path, name);
                if (strcmp(key, "dtype") == 0) {
                    char *v = jstring(&c);
                    if (!v || strlen(v) >= sizeof dtype) FAIL("%s: bad dtype for \"%s\"", path, name);
                    strcpy(dtype, v);
                } else if (strcmp(key, "shape") == 0) {
                    if (!lit(&c, '[')) FAIL("%s: bad shape for \"%s\"", path, name);
                    nd = 0;
                    if (!lit(&c, ']')) {
                        do {
                            uint64_t v;
                            if (nd == AC_MAX_DIMS || !juint(&c, &v) || v > ((uint64_t)1 << 40))
                                FAIL("%s: bad shape for \"%s\"", path, name);
                            shape[nd++] = (int64_t)v;
                        } while (lit(&c, ','));
                        if (!lit(&c, ']')) FAIL("%s: bad shape for \"%s\"", path, name);
                    }
                } else if (strcmp(key, "data_offsets") == 0) {
                    if (!lit(&c, '[') || !juint(&c, &begin) || !lit(&c, ',') || !juint(&c, &endo) || !lit(&c, ']'))
                        FAIL("%s: bad data_offsets for \"%s\"", path, name);
                    have_off = true;
                } else {
                    FAIL("%s: unexpected key \"%s\" in entry \"%s\"", path, key, name);
                }
            } while (lit(&c, ','));
            if (!lit(&c, '}')) FAIL("%s: corrupt entry for \"%s\" (expected '}')", path, name);
            if (nd < 0 || !have_off || !dtype[0]) FAIL("%s: entry \"%s\" lacks dtype, shape or data_offsets", path, name);
            size_t di = 0;
            while (di < N_DTYPES && strcmp(dtype, dtypes[di].tag) != 0) di++;
            if (di == N_DTYPES)
                FAIL("%s: tensor \"%s\" has dtype %s; attention.c reads F32, F64, I64, I32 and BOOL", path, name, dtype);
            ac_dtype dt = dtypes[di].dtype;
            size_t es = ac_dtype_size(dt);
            uint64_t numel = 1;
            for (int d = 0; d < nd; d++) numel *= (uint64_t)shape[d];
            if (numel > ((uint64_t)1 << 40) || endo < begin || endo - begin != numel * es)
                FAIL("%s: tensor \"%s\": data_offsets [%llu, %llu] do not fit its %s shape", path, name,
                     (unsigned long long)begin, (unsigned long long)endo, dtype);
            if (endo > data_len)
                FAIL("%s: truncated: tensor \"%s\" ends at byte %llu of the data, which has %llu bytes", path, name,
                     (unsigned long long)endo, (unsigned long long)data_len);
            for (int k = 0; k < n; k++)
                if (strcmp(names[k], name) == 0) FAIL("%s: tensor \"%s\" appears twice", path, name);
            Tensor *t = torch_empty(nd, shape, dt);
            if (fseek(f, (long)(8 + hlen + begin), SEEK_SET) != 0 || fread(t->data, 1, (size_t)(endo - begin), f) != endo - begin)
                FAIL("%s: truncated data for \"%s\"", path, name);
            if (dt == AC_BOOL)
                for (uint64_t k = 0; k < numel; k++)
                    if (((uint8_t *)t->data)[k] > 1) FAIL("%s: tensor \"%s\" holds a BOOL that is not 0 or 1", path, name);
            if (n == cap) {
                const char **nn = ac_arena_alloc(sizeof(char *) * (size_t)cap * 2);
                Tensor **nt = ac_arena_alloc(sizeof(Tensor *) * (size_t)cap * 2);
                memcpy(nn, names, sizeof(char *) * (size_t)cap);
                memcpy(nt, ts, sizeof(Tensor *) * (size_t)cap);
                names = nn;
                ts = nt;
                cap *= 2;
            }
            names[n] = name;
            ts[n++] = t;
            covered += endo - begin;
        } while (lit(&c, ','));
        if (!lit(&c, '}')) FAIL("%s: corrupt header (expected '}' or ',')", path);
    }
    ws(&c);
    if (c.p != c.end) FAIL("%s: corrupt header (trailing bytes after the JSON object)", path);
    if (covered != data_len)
        FAIL("%s: the tensors cover %llu bytes but the file holds %llu bytes of data", path,
             (unsigned long long)covered, (unsigned long long)data_len);
    free(hdr);
    fclose(f);
    out->tensors = (nn_TensorList){n, names, ts};
    return true;
fail:
    free(hdr);
    fclose(f);
    memset(out, 0, sizeof *out);
    return false;
}

const char *safetensors_meta(const safetensors_File *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

Tensor *safetensors_get(const safetensors_File *f, const char *name) {
    for (int i = 0; i < f->tensors.n; i++)
        if (strcmp(f->tensors.names[i], name) == 0) return f->tensors.tensors[i];
    return NULL;
}

static bool ignored(const char *name, const char *const *prefixes) {
    for (; prefixes && *prefixes; prefixes++)
        if (strncmp(name, *prefixes, strlen(*prefixes)) == 0) return true;
    return false;
}

bool safetensors_copy_into(const safetensors_File *f, nn_TensorList dest, const char *const *ignore_prefixes,
                           bool apply, char *err, size_t errlen) {
    for (int i = 0; i < dest.n; i++) {
        Tensor *src = safetensors_get(f, dest.names[i]), *d = dest.tensors[i];
        if (!src) { snprintf(err, errlen, "missing tensor \"%s\"", dest.names[i]); return false; }
        if (src->dtype != d->dtype || src->ndim != d->ndim ||
            memcmp(src->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim) != 0) {
            snprintf(err, errlen, "tensor \"%s\": the file has %s %s, the model expects %s %s", dest.names[i],
                     dtype_tag(src->dtype), ac_shape_str(src), dtype_tag(d->dtype), ac_shape_str(d));
            return false;
        }
    }
    for (int k = 0; k < f->tensors.n; k++) {
        const char *name = f->tensors.names[k];
        if (ignored(name, ignore_prefixes)) continue;
        bool known = false;
        for (int i = 0; i < dest.n && !known; i++) known = strcmp(dest.names[i], name) == 0;
        if (!known) { snprintf(err, errlen, "unexpected tensor \"%s\"", name); return false; }
    }
    if (!apply) return true;
    bool prev = torch_no_grad_enter();
    for (int i = 0; i < dest.n; i++) torch_copy_(dest.tensors[i], safetensors_get(f, dest.names[i]));
    torch_no_grad_exit(prev);
    return true;
}
