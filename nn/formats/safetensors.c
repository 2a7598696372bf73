/* safetensors reading and writing (format in safetensors.h). The reader is a
 * small strict JSON parser: any surprise is an error message, never a crash,
 * and nothing is copied anywhere until the whole file has been checked. */
#include <errno.h>
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "safetensors.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* safetensors' dtype names for every dtype attention.c stores */
static const struct { ac_dtype dtype; const char *tag; } dtypes[] = {
    {AC_FLOAT32, "F32"}, {AC_FLOAT64, "F64"}, {AC_INT64, "I64"}, {AC_INT32, "I32"}, {AC_BOOL, "BOOL"},
    {AC_BFLOAT16, "BF16"}};
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

/* fsync, where there is one: a save survives a power cut once it returns. */
static bool sync_file(FILE *f) {
#if defined(__unix__) || defined(__APPLE__)
    return fsync(fileno(f)) == 0 || errno == EINVAL; /* EINVAL: a file that cannot be synced (a pipe) */
#else
    (void)f;
    return true;
#endif
}

static void sync_dir_of(const char *path) {
#if defined(__unix__) || defined(__APPLE__)
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) + (slash == path), path);
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
#else
    (void)path;
#endif
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct { char *s; size_t n, cap; bool oom; } Str;
static void sputs(Str *b, const char *s) {
    size_t k = strlen(s);
    if (b->n + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + k + 1) cap *= 2;
        char *ns = ac_try_realloc(b->s, cap);
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
    if (h.oom) { free(h.s); snprintf(err, errlen, "not enough memory: you tried to allocate %zu bytes", h.cap * 2); return false; }

    if (!ac_output_path_check(path, false, err, errlen)) { /* never renamed over a device or a FIFO */
        free(h.s);
        return false;
    }
    size_t plen = strlen(path);
    char *tmp = ac_try_malloc(plen + 5);
    if (!tmp) { free(h.s); snprintf(err, errlen, "not enough memory: you tried to allocate %zu bytes", plen + 5); return false; }
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
    ok = sync_file(f) && ok; /* on disk before the rename makes it the checkpoint */
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
    sync_dir_of(path); /* and the rename itself */
    return true;
}

/* ---- reading ---------------------------------------------------------------------------------
 * As the reference implementation validates: the header is strict JSON in
 * UTF-8 (no raw control characters, only valid escapes, no lone surrogates,
 * no duplicate keys), every dtype known, every shape's byte size without
 * overflow and equal to its data_offsets range, and the ranges, sorted,
 * start at 0, touch end to start (no overlap, no gap) and end exactly at the
 * end of the file. Then the data is read. */

typedef struct { const char *p, *end; } Cur;

static void ws(Cur *c) { while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++; }
static bool lit(Cur *c, char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) { c->p++; return true; }
    return false;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char h = s[k];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A JSON string into the arena; NULL for anything JSON does not allow, and for
 * \u0000 (a C string cannot hold it). The header was checked to be UTF-8. */
static char *jstring(Cur *c) {
    ws(c);
    if (c->p >= c->end || *c->p != '"') return NULL;
    const char *s = ++c->p;
    while (c->p < c->end && *c->p != '"') c->p += *c->p == '\\' ? 2 : 1;
    if (c->p >= c->end) return NULL;
    const char *e = c->p++;
    char *out = ac_arena_alloc((size_t)(e - s) + 1), *o = out; /* escapes never grow */
    while (s < e) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20) return NULL; /* raw control characters are not JSON */
        if (ch != '\\') { *o++ = *s++; continue; }
        s++;
        switch (*s++) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            int v = e - s >= 4 ? hex4(s) : -1;
            if (v <= 0) return NULL; /* not 4 hex digits, or NUL */
            s += 4;
            uint32_t cp = (uint32_t)v;
            if (v >= 0xDC00 && v <= 0xDFFF) return NULL; /* a low surrogate alone */
            if (v >= 0xD800 && v <= 0xDBFF) {            /* a high one needs its low one */
                int lo = e - s >= 6 && s[0] == '\\' && s[1] == 'u' ? hex4(s + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return NULL;
                cp = 0x10000 + (((uint32_t)v - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                s += 6;
            }
            o += ac_utf8_put(cp, o);
            break;
        }
        default: return NULL;
        }
    }
    *o = 0;
    return out;
}

static bool juint(Cur *c, uint64_t *v) {
    ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
    if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9') return false; /* no leading zeros */
    uint64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return false;
        x = x * 10 + (uint64_t)(*c->p++ - '0');
    }
    *v = x;
    return true;
}

typedef struct {
    const char *name;
    ac_dtype dtype;
    int nd;
    int64_t shape[AC_MAX_DIMS];
    uint64_t begin, end;
} Entry;

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}: each key once, all three. */
static bool parse_entry(Cur *c, Entry *en, char *err, size_t errlen) {
    const char *name = en->name;
    bool seen[3] = {false, false, false};
    char *dtype = NULL;
    if (!lit(c, '{')) goto bad;
    do {
        char *key = jstring(c);
        if (!key || !lit(c, ':')) goto bad;
        int k = strcmp(key, "dtype") == 0 ? 0 : strcmp(key, "shape") == 0 ? 1 : strcmp(key, "data_offsets") == 0 ? 2 : -1;
        if (k < 0) { snprintf(err, errlen, "unexpected key \"%s\" in entry \"%s\"", key, name); return false; }
        if (seen[k]) { snprintf(err, errlen, "entry \"%s\" has the key \"%s\" twice", name, key); return false; }
        seen[k] = true;
        if (k == 0 && !(dtype = jstring(c))) goto bad;
        if (k == 1) {
            if (!lit(c, '[')) goto bad;
            en->nd = 0;
            if (!lit(c, ']')) {
                do {
                    uint64_t v;
                    if (en->nd == AC_MAX_DIMS || !juint(c, &v) || v > (uint64_t)INT64_MAX) goto bad_shape;
                    en->shape[en->nd++] = (int64_t)v;
                } while (lit(c, ','));
                if (!lit(c, ']')) goto bad_shape;
            }
        }
        if (k == 2 && (!lit(c, '[') || !juint(c, &en->begin) || !lit(c, ',') || !juint(c, &en->end) || !lit(c, ']')))
            goto bad;
    } while (lit(c, ','));
    if (!lit(c, '}')) goto bad;
    if (!seen[0] || !seen[1] || !seen[2]) {
        snprintf(err, errlen, "entry \"%s\" lacks dtype, shape or data_offsets", name);
        return false;
    }
    size_t di = 0;
    while (di < N_DTYPES && strcmp(dtype, dtypes[di].tag) != 0) di++;
    if (di == N_DTYPES) {
        snprintf(err, errlen, "tensor \"%s\" has dtype %.16s; attention.c reads F32, F64, I64, I32 and BOOL", name, dtype);
        return false;
    }
    en->dtype = dtypes[di].dtype;
    /* its size in bytes, without overflow, must be its range's */
    uint64_t bytes = ac_dtype_size(en->dtype);
    bool zero = false;
    for (int d = 0; d < en->nd; d++) zero = zero || en->shape[d] == 0;
    for (int d = 0; d < en->nd && !zero; d++) {
        if (bytes > UINT64_MAX / (uint64_t)en->shape[d]) goto bad_shape;
        bytes *= (uint64_t)en->shape[d];
    }
    if (zero) bytes = 0;
    if (en->end < en->begin || en->end - en->begin != bytes) {
        snprintf(err, errlen, "tensor \"%s\": data_offsets [%llu, %llu] do not fit its %s shape", name,
                 (unsigned long long)en->begin, (unsigned long long)en->end, dtypes[di].tag);
        return false;
    }
    return true;
bad_shape:
    snprintf(err, errlen, "bad shape for \"%s\" (at most %d dims, a byte size that fits 64 bits)", name, AC_MAX_DIMS);
    return false;
bad:
    snprintf(err, errlen, "corrupt entry for \"%s\"", name);
    return false;
}

static int cmp_range(const void *a, const void *b) {
    const Entry *x = *(const Entry *const *)a, *y = *(const Entry *const *)b;
    return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end > y->end) - (x->end < y->end);
}

/* The header's JSON object: metadata and entries, every key once. */
static bool parse_header(Cur *c, safetensors_File *out, Entry **entries, int *n_entries, char *err, size_t errlen) {
    int n = 0;
    size_t cap = 0, kcap = 0, vcap = 0;
    Entry *es = NULL;
    bool have_meta = false;
    if (!lit(c, '{')) { snprintf(err, errlen, "corrupt header (expected a JSON object)"); return false; }
    if (!lit(c, '}')) {
        do {
            char *name = jstring(c);
            if (!name || !lit(c, ':')) { snprintf(err, errlen, "corrupt header (expected \"name\": {...})"); return false; }
            if (strcmp(name, "__metadata__") == 0) {
                if (have_meta) { snprintf(err, errlen, "__metadata__ appears twice"); return false; }
                have_meta = true;
                if (!lit(c, '{')) { snprintf(err, errlen, "corrupt __metadata__"); return false; }
                if (lit(c, '}')) continue;
                do {
                    char *k = jstring(c), *v;
                    if (!k || !lit(c, ':') || !(v = jstring(c))) {
                        snprintf(err, errlen, "corrupt __metadata__ entry (keys and values are JSON strings)");
                        return false;
                    }
                    for (int i = 0; i < out->n_meta; i++)
                        if (strcmp(out->meta_keys[i], k) == 0) {
                            snprintf(err, errlen, "__metadata__ has the key \"%s\" twice", k);
                            return false;
                        }
                    size_t nm = (size_t)out->n_meta;
                    out->meta_keys = ac_arena_grow(out->meta_keys, nm, &kcap, nm + 1, sizeof(char *));
                    out->meta_values = ac_arena_grow(out->meta_values, nm, &vcap, nm + 1, sizeof(char *));
                    out->meta_keys[out->n_meta] = k;
                    out->meta_values[out->n_meta++] = v;
                } while (lit(c, ','));
                if (!lit(c, '}')) { snprintf(err, errlen, "corrupt __metadata__ (expected '}')"); return false; }
                continue;
            }
            for (int k = 0; k < n; k++)
                if (strcmp(es[k].name, name) == 0) { snprintf(err, errlen, "tensor \"%s\" appears twice", name); return false; }
            es = ac_arena_grow(es, (size_t)n, &cap, (size_t)n + 1, sizeof(Entry));
            memset(&es[n], 0, sizeof es[n]);
            es[n].name = name;
            if (!parse_entry(c, &es[n], err, errlen)) return false;
            n++;
        } while (lit(c, ','));
        if (!lit(c, '}')) { snprintf(err, errlen, "corrupt header (expected '}' or ',')"); return false; }
    }
    ws(c);
    if (c->p != c->end) { snprintf(err, errlen, "corrupt header (trailing bytes after the JSON object)"); return false; }
    *entries = es;
    *n_entries = n;
    return true;
}

/* Sorted by offset, the ranges must tile [0, data_len) exactly. */
static bool check_ranges(Entry *es, int n, uint64_t data_len, char *err, size_t errlen) {
    Entry **by = ac_arena_alloc(sizeof(Entry *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) by[i] = &es[i];
    qsort(by, (size_t)n, sizeof *by, cmp_range);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (by[i]->begin < at) {
            snprintf(err, errlen, "tensor \"%s\" (bytes %llu..%llu) overlaps \"%s\"", by[i]->name,
                     (unsigned long long)by[i]->begin, (unsigned long long)by[i]->end, by[i - 1]->name);
            return false;
        }
        if (by[i]->begin > at) {
            snprintf(err, errlen, "%llu bytes before tensor \"%s\" belong to no tensor",
                     (unsigned long long)(by[i]->begin - at), by[i]->name);
            return false;
        }
        at = by[i]->end;
    }
    if (at > data_len) {
        snprintf(err, errlen, "truncated: the tensors need %llu bytes of data, the file holds %llu",
                 (unsigned long long)at, (unsigned long long)data_len);
        return false;
    }
    if (at != data_len) {
        snprintf(err, errlen, "the tensors cover %llu bytes but the file holds %llu bytes of data",
                 (unsigned long long)at, (unsigned long long)data_len);
        return false;
    }
    return true;
}

/* Step 1: the 8-byte length, then the header's bytes (checked as UTF-8);
 * *data_len: the bytes after it. The header is malloc'd into *hdr. */
static bool read_header(FILE *f, const char *path, char **hdr, uint64_t *hlen_out, uint64_t *data_len, char *err,
                        size_t errlen) {
    uint8_t len8[8];
    if (fread(len8, 1, 8, f) != 8) FAIL("%s: not a safetensors file (shorter than its 8-byte header length)", path);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (fseek(f, 0, SEEK_END) != 0) FAIL("%s: cannot seek (%s)", path, strerror(errno));
    long fsize = ftell(f);
    if (fsize < 0) FAIL("%s: cannot tell its size", path);
    if (hlen < 2 || hlen > (uint64_t)fsize - 8 || hlen > (100u << 20))
        FAIL("%s: corrupt safetensors header length %llu for a file of %ld bytes", path, (unsigned long long)hlen, fsize);
    if (!(*hdr = ac_try_malloc((size_t)hlen)))
        FAIL("%s: not enough memory: you tried to allocate %llu bytes", path, (unsigned long long)hlen);
    if (fseek(f, 8, SEEK_SET) != 0 || fread(*hdr, 1, (size_t)hlen, f) != hlen) FAIL("%s: truncated header", path);
    for (size_t i = 0; i < hlen;) { /* the header is UTF-8 text */
        uint32_t cp;
        int k = ac_utf8_next(*hdr + i, (size_t)hlen - i, &cp);
        if (k == 0) FAIL("%s: corrupt header (invalid UTF-8 at byte %zu)", path, i);
        i += (size_t)k;
    }
    *hlen_out = hlen;
    *data_len = (uint64_t)fsize - 8 - hlen;
    return true;
fail:
    return false;
}

/* Step 3: each entry's bytes into a new tensor (BOOLs must be 0 or 1). */
static bool read_tensors(FILE *f, const char *path, uint64_t data_at, Entry *es, int n, nn_TensorList *out,
                         char *err, size_t errlen) {
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)(n ? n : 1));
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)(n ? n : 1));
    ac_progress("loading tensor", 0, n); /* GPT-2 medium's 1.4 GB take seconds */
    for (int i = 0; i < n; i++) {
        Entry *e = &es[i];
        Tensor *t = torch_empty(e->nd, e->shape, e->dtype); /* at most the file's size: the ranges fit in it */
        size_t bytes = (size_t)(e->end - e->begin);
        if (fseek(f, (long)(data_at + e->begin), SEEK_SET) != 0 || fread(t->data, 1, bytes, f) != bytes)
            FAIL("%s: truncated data for \"%s\"", path, e->name);
        if (e->dtype == AC_BOOL)
            for (size_t k = 0; k < bytes; k++)
                if (((uint8_t *)t->data)[k] > 1) FAIL("%s: tensor \"%s\" holds a BOOL that is not 0 or 1", path, e->name);
        names[i] = e->name;
        ts[i] = t;
        ac_progress("loading tensor", i + 1, n);
    }
    *out = (nn_TensorList){n, names, ts};
    return true;
fail:
    ac_progress("loading tensor", n, n);
    return false;
}

/* Read the header, parse it (step 2: parse_header, check_ranges), read the tensors. */
static bool load(const char *path, bool tensors, safetensors_File *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    char why[400];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is a directory, not a safetensors file", path);
        return false;
    }
    FILE *f = fopen(path, "rb");
    char *hdr = NULL;
    if (!f) { snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno)); return false; }
    uint64_t hlen, data_len;
    Entry *es;
    int n;
    if (!read_header(f, path, &hdr, &hlen, &data_len, err, errlen)) goto failed;
    Cur c = {hdr, hdr + hlen};
    if (!parse_header(&c, out, &es, &n, why, sizeof why)) FAIL("%s: %s", path, why);
    if (!check_ranges(es, n, data_len, why, sizeof why)) FAIL("%s: %s", path, why);
    if (tensors && !read_tensors(f, path, 8 + hlen, es, n, &out->tensors, err, errlen)) goto failed;
    if (!tensors) { /* each entry's dtype and shape, no data: one zero broadcast (every stride 0) */
        const char **names = ac_arena_alloc(sizeof(char *) * (size_t)(n ? n : 1));
        Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)(n ? n : 1));
        for (int i = 0; i < n; i++)
            names[i] = es[i].name, ts[i] = torch_expand(torch_empty(0, NULL, es[i].dtype), es[i].nd, es[i].shape);
        out->tensors = (nn_TensorList){n, names, ts};
    }
    free(hdr);
    fclose(f);
    return true;
fail:
failed:
    free(hdr);
    fclose(f);
    memset(out, 0, sizeof *out);
    return false;
}

bool safetensors_load(const char *path, safetensors_File *out, char *err, size_t errlen) {
    return load(path, true, out, err, errlen);
}

bool safetensors_load_header(const char *path, safetensors_File *out, char *err, size_t errlen) {
    return load(path, false, out, err, errlen);
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
