/* Qwen3 and Llama 3 in Hugging Face's layout, both ways: config.json by its architectures, and
 * model.safetensors or shards listed by model.safetensors.index.json, F32, BF16 or F16, under the
 * hub's names with the mapping of the book's load_weights_into_qwen / load_weights_into_llama:
 *
 *     model.embed_tokens.weight                        tok_emb.weight
 *     model.layers.L.self_attn.{q,k,v,o}_proj.weight   trf_blocks.L.att.{W_query,W_key,W_value,out_proj}.weight
 *     model.layers.L.self_attn.{q,k}_norm.weight       trf_blocks.L.att.{q,k}_norm.scale     (Qwen3)
 *     model.layers.L.input_layernorm.weight            trf_blocks.L.norm1.scale (Llama: .weight)
 *     model.layers.L.mlp.{gate,up,down}_proj.weight    trf_blocks.L.ff.{fc1,fc2,fc3}.weight
 *     model.layers.L.post_attention_layernorm.weight   trf_blocks.L.norm2.scale
 *     model.norm.weight                                final_norm.scale
 *     lm_head.weight                                   out_head.weight (absent with tie_word_embeddings: tied)
 *
 * Every file, name, dtype, shape and offset is checked before the model is built; a message names
 * the file and the key. The data are read tensor by tensor, widened to float32 (model.to(torch.float32)),
 * or, for generation in default math (llm_from_pretrained_ex), BF16 matrices kept as they are. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "json.h"
#include "llm.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* ---- config.json ------------------------------------------------------------------------------------ */

static const JsonValue *need(const JsonValue *c, const char *key, JsonType type, const char *path, char *err, size_t errlen) {
    const JsonValue *v = json_get(c, key);
    if (!v) snprintf(err, errlen, "%s: missing key \"%s\"", path, key);
    else if (v->type != type) snprintf(err, errlen, "%s: \"%s\" must be a %s", path, key, type == JSON_NUMBER ? "number" : type == JSON_STRING ? "string" : type == JSON_BOOL ? "boolean" : type == JSON_ARRAY ? "list" : "object");
    else return v;
    return NULL;
}

static bool need_int(const JsonValue *c, const char *key, int64_t *out, bool optional, const char *path, char *err, size_t errlen) {
    const JsonValue *v = json_get(c, key);
    if (!v || v->type == JSON_NULL) {
        if (optional) return true;
        snprintf(err, errlen, "%s: missing key \"%s\"", path, key);
        return false;
    }
    if (v->type != JSON_NUMBER || !v->is_int || v->number < 0 || v->number > 1e15) {
        snprintf(err, errlen, "%s: \"%s\" must be a non-negative integer", path, key);
        return false;
    }
    *out = (int64_t)v->number;
    return true;
}

static bool need_num(const JsonValue *c, const char *key, double *out, const char *path, char *err, size_t errlen) {
    const JsonValue *v = need(c, key, JSON_NUMBER, path, err, errlen);
    if (!v) return false;
    if (!(v->number > 0) || !isfinite(v->number)) {
        snprintf(err, errlen, "%s: \"%s\" must be a positive number", path, key);
        return false;
    }
    *out = v->number;
    return true;
}

bool llm_config_load(const char *path, nn_LLMConfig *cfg, char *err, size_t errlen) {
    JsonValue *c = json_load(path, err, errlen);
    if (!c) return false;
    nn_LLMConfig k = {.eos_token_id = -1};
    if (c->type != JSON_OBJECT) FAIL("%s: expected a JSON object", path);
    const JsonValue *arch = need(c, "architectures", JSON_ARRAY, path, err, errlen);
    if (!arch) goto fail;
    const JsonValue *a0 = json_at(arch, 0);
    if (!a0 || a0->type != JSON_STRING) FAIL("%s: \"architectures\" must hold the model's class name", path);
    k.arch = lm_arch_find(a0->str);
    if (!k.arch || (k.arch != &nn_Qwen3Model_arch && k.arch != &nn_Llama3Model_arch))
        FAIL("%s: unknown architecture \"%.64s\" in \"architectures\" (this program reads Qwen3ForCausalLM and LlamaForCausalLM)", path, a0->str);
    if (!need_int(c, "vocab_size", &k.vocab_size, false, path, err, errlen) ||
        !need_int(c, "max_position_embeddings", &k.context_length, false, path, err, errlen) ||
        !need_int(c, "hidden_size", &k.emb_dim, false, path, err, errlen) ||
        !need_int(c, "num_attention_heads", &k.n_heads, false, path, err, errlen) ||
        !need_int(c, "num_hidden_layers", &k.n_layers, false, path, err, errlen) ||
        !need_int(c, "intermediate_size", &k.hidden_dim, false, path, err, errlen) ||
        !need_int(c, "num_key_value_heads", &k.n_kv_groups, false, path, err, errlen) ||
        !need_int(c, "head_dim", &k.head_dim, true, path, err, errlen) ||
        !need_num(c, "rope_theta", &k.rope_base, path, err, errlen) ||
        !need_num(c, "rms_norm_eps", &k.rms_norm_eps, path, err, errlen))
        goto fail;
    const char *zero = k.vocab_size < 1 ? "vocab_size" : k.context_length < 1 ? "max_position_embeddings" : k.emb_dim < 1 ? "hidden_size"
                     : k.n_heads < 1 ? "num_attention_heads" : k.hidden_dim < 1 ? "intermediate_size" : k.n_kv_groups < 1 ? "num_key_value_heads" : NULL;
    if (zero) FAIL("%s: \"%s\" must be at least 1", path, zero);
    if (k.n_heads % k.n_kv_groups != 0)
        FAIL("%s: \"num_attention_heads\" (%lld) must be divisible by \"num_key_value_heads\" (%lld)", path, (long long)k.n_heads, (long long)k.n_kv_groups);
    if (!k.head_dim && k.emb_dim % k.n_heads != 0)
        FAIL("%s: \"hidden_size\" (%lld) must be divisible by \"num_attention_heads\" (%lld) when \"head_dim\" is not given", path, (long long)k.emb_dim, (long long)k.n_heads);
    int64_t hd = k.head_dim ? k.head_dim : k.emb_dim / k.n_heads;
    if (hd % 2) FAIL("%s: the head dimension (%lld) must be even for RoPE (\"head_dim\")", path, (long long)hd);
    bool qwen3 = k.arch == &nn_Qwen3Model_arch;
    if (!k.head_dim && qwen3) k.head_dim = hd; /* Qwen3Config's default */
    k.qk_norm = qwen3; /* Qwen3's q_norm and k_norm */
    const JsonValue *tie = json_get(c, "tie_word_embeddings");
    if (tie && tie->type != JSON_BOOL) FAIL("%s: \"tie_word_embeddings\" must be true or false", path);
    k.tie_word_embeddings = tie && tie->boolean;
    const JsonValue *rs = json_get(c, "rope_scaling");
    if (rs && rs->type != JSON_NULL) {
        if (rs->type != JSON_OBJECT) FAIL("%s: \"rope_scaling\" must be an object or null", path);
        const JsonValue *rt = json_get(rs, "rope_type");
        if (!rt) rt = json_get(rs, "type");
        if (!rt || rt->type != JSON_STRING || strcmp(rt->str, "llama3") != 0)
            FAIL("%s: \"rope_scaling\": only rope_type \"llama3\" is known", path);
        const char *keys[] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
        double *outs[] = {&k.rope_freq.factor, &k.rope_freq.low_freq_factor, &k.rope_freq.high_freq_factor,
                          &k.rope_freq.original_context_length};
        char sub[512];
        snprintf(sub, sizeof sub, "%s: \"rope_scaling\"", path);
        for (int i = 0; i < 4; i++)
            if (!need_num(rs, keys[i], outs[i], sub, err, errlen)) goto fail;
        if (k.rope_freq.high_freq_factor == k.rope_freq.low_freq_factor)
            FAIL("%s: \"rope_scaling\": high_freq_factor must differ from low_freq_factor", path);
        k.has_rope_freq = true;
    }
    const JsonValue *eos = json_get(c, "eos_token_id");
    for (size_t i = 0; eos && eos->type != JSON_NULL && i < (eos->type == JSON_ARRAY ? eos->n : 1); i++) {
        const JsonValue *e = eos->type == JSON_ARRAY ? eos->items[i] : eos;
        if (e->type != JSON_NUMBER || !e->is_int || e->number < 0 || k.n_eos == 8)
            FAIL("%s: \"eos_token_id\" must be a token id or a list of at most 8", path);
        k.eos_token_ids[k.n_eos++] = (int64_t)e->number;
    }
    if (k.n_eos) k.eos_token_id = k.eos_token_ids[0];
    const JsonValue *dt = json_get(c, "torch_dtype");
    snprintf(k.torch_dtype, sizeof k.torch_dtype, "%s", dt && dt->type == JSON_STRING ? dt->str : "float32");
    json_free(c);
    *cfg = k;
    return true;
fail:
    json_free(c);
    return false;
}

/* ---- the hub's names ----------------------------------------------------------------------------------- */

typedef struct { char hub[96]; Tensor *t; } Slot; /* a hub name and the parameter it fills */

/* name with "{i}" replaced by the layer's number */
static void layer_name(char *out, size_t n, const char *pattern, int layer) {
    const char *at = strstr(pattern, "{i}");
    if (!at) snprintf(out, n, "%s", pattern);
    else snprintf(out, n, "%.*s%d%s", (int)(at - pattern), pattern, layer, at + 3);
}

/* the model's parameters under the hub's names, in the files' order: its arch's table (qwen3.c,
 * llama3.c), a run of per-layer rows repeated layer by layer; a row the model has no parameter for
 * (q_norm without qk_norm, lm_head when tied) is not one of its slots. NULL s: the count. */
static int slots_of(nn_LLMModel *m, Slot *s) {
    const nn_HFName *names = m->lm.arch->hf_names;
    nn_TensorList params = nn_named_parameters(&m->module);
    int n = 0;
    for (int r = 0; names[r].hf;) {
        int run = 1; /* the rows that share this one's kind: per layer, or not */
        bool per_layer = strstr(names[r].hf, "{i}") != NULL;
        while (names[r + run].hf && (strstr(names[r + run].hf, "{i}") != NULL) == per_layer) run++;
        for (int l = 0; l < (per_layer ? m->cfg.n_layers : 1); l++)
            for (int k = r; k < r + run; k++) {
                char book[128];
                layer_name(book, sizeof book, names[k].book, l);
                for (int p = 0; p < params.n; p++)
                    if (strcmp(params.names[p], book) == 0) {
                        if (s) layer_name(s[n].hub, sizeof s[n].hub, names[k].hf, l), s[n].t = params.tensors[p];
                        n++;
                        break;
                    }
            }
        r += run;
    }
    return n;
}

/* the same names and shapes from the config alone, before anything is built */
typedef struct { char hub[96]; int nd; int64_t shape[2]; } Want;

/* (C: the shapes of a model built without draws or storage, nn_set_skip_init: its head not tied,
 * so lm_head comes last, optional when tied) */
static int wants_of(const nn_LLMConfig *c, Want *w) {
    bool prev = nn_set_skip_init(true);
    nn_LLMModel *m = nn_LLMModel_new(*c);
    nn_set_skip_init(prev);
    int n = slots_of(m, NULL);
    Slot *s = w ? ac_malloc(sizeof *s * (size_t)n) : NULL;
    if (s) {
        slots_of(m, s);
        for (int i = 0; i < n; i++) {
            snprintf(w[i].hub, sizeof w[i].hub, "%s", s[i].hub);
            w[i].nd = s[i].t->ndim;
            for (int d = 0; d < s[i].t->ndim && d < 2; d++) w[i].shape[d] = s[i].t->shape[d];
        }
    }
    free(s);
    nn_LLMModel_free(m);
    return n;
}

/* ---- safetensors headers (F32, BF16, F16) --------------------------------------------------------------- */

typedef enum { ST_F32, ST_BF16, ST_F16 } StDtype;
static const char *const st_names[] = {"F32", "BF16", "F16"};
typedef struct { char *name; StDtype dtype; int nd; int64_t shape[8]; uint64_t begin, end; int file; } Entry;
typedef struct { char *path; uint64_t data_start; } StFile;
typedef struct { StFile *files; int n_files; Entry *e; int n; } Index;

static void index_free(Index *x) {
    for (int i = 0; i < x->n; i++) free(x->e[i].name);
    for (int i = 0; i < x->n_files; i++) free(x->files[i].path);
    free(x->e);
    free(x->files);
    memset(x, 0, sizeof *x);
}

static int cmp_begin(const void *a, const void *b) {
    const Entry *x = *(Entry *const *)a, *y = *(Entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* One file's header: its length within the file, every entry's dtype known, shape and offsets
 * inside the data, agreeing with each other and not overlapping. */
static bool read_header(const char *path, Index *x, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return false;
    }
    char *text = NULL;
    JsonValue *h = NULL;
    Entry **sorted = NULL;
    unsigned char len8[8];
    if (fseek(f, 0, SEEK_END) != 0) FAIL("%s: cannot seek", path);
    long fsize = ftell(f);
    rewind(f);
    if (fsize < 8 || fread(len8, 1, 8, f) != 8) FAIL("%s: not a safetensors file (shorter than its 8-byte header length)", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > (uint64_t)fsize - 8 || hlen > 100000000)
        FAIL("%s: the header length %llu runs past the end of the file (%ld bytes)", path, (unsigned long long)hlen, fsize);
    text = ac_malloc(hlen + 1);
    if (fread(text, 1, hlen, f) != hlen) FAIL("%s: cannot read the header", path);
    h = json_loads(text, hlen, err, errlen);
    if (!h) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", err);
        FAIL("%s: the header is not JSON: %s", path, inner);
    }
    if (h->type != JSON_OBJECT) FAIL("%s: the header is not a JSON object", path);
    uint64_t data_len = (uint64_t)fsize - 8 - hlen;
    int file = x->n_files;
    x->files = ac_realloc(x->files, sizeof *x->files * (size_t)(file + 1));
    x->files[file] = (StFile){strdup(path), 8 + hlen};
    x->n_files++;
    int first = x->n;
    for (size_t i = 0; i < h->n; i++) {
        const char *name = h->members[i].key;
        const JsonValue *v = h->members[i].value;
        if (strcmp(name, "__metadata__") == 0) continue;
        const JsonValue *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
        if (!dt || dt->type != JSON_STRING || !sh || sh->type != JSON_ARRAY || !off || off->type != JSON_ARRAY || off->n != 2)
            FAIL("%s: tensor \"%.96s\" lacks dtype, shape or data_offsets", path, name);
        Entry e = {.file = file};
        int d = 0;
        while (d < 3 && strcmp(dt->str, st_names[d]) != 0) d++;
        if (d == 3) FAIL("%s: tensor \"%.96s\" has dtype %.16s; this program reads F32, BF16 and F16", path, name, dt->str);
        e.dtype = (StDtype)d;
        if (sh->n > 8) FAIL("%s: tensor \"%.96s\" has %zu dimensions", path, name, sh->n);
        uint64_t numel = 1;
        for (size_t j = 0; j < sh->n; j++) {
            const JsonValue *s = sh->items[j];
            if (s->type != JSON_NUMBER || !s->is_int || s->number < 0 || s->number > 1e12)
                FAIL("%s: tensor \"%.96s\": shape entries must be non-negative integers", path, name);
            e.shape[j] = (int64_t)s->number;
            numel *= (uint64_t)e.shape[j];
            if (numel > (uint64_t)1 << 40) FAIL("%s: tensor \"%.96s\": shape too large", path, name);
        }
        e.nd = (int)sh->n;
        for (int j = 0; j < 2; j++) {
            const JsonValue *o = off->items[j];
            if (o->type != JSON_NUMBER || !o->is_int || o->number < 0)
                FAIL("%s: tensor \"%.96s\": data_offsets must be non-negative integers", path, name);
        }
        e.begin = (uint64_t)off->items[0]->number;
        e.end = (uint64_t)off->items[1]->number;
        if (e.begin > e.end || e.end > data_len)
            FAIL("%s: tensor \"%.96s\": data_offsets [%llu, %llu] lie outside the data (%llu bytes)", path, name,
                 (unsigned long long)e.begin, (unsigned long long)e.end, (unsigned long long)data_len);
        uint64_t es = e.dtype == ST_F32 ? 4 : 2;
        if (e.end - e.begin != numel * es)
            FAIL("%s: tensor \"%.96s\": data_offsets [%llu, %llu] hold %llu bytes, its shape and %s need %llu", path, name,
                 (unsigned long long)e.begin, (unsigned long long)e.end, (unsigned long long)(e.end - e.begin),
                 st_names[e.dtype], (unsigned long long)(numel * es));
        for (int j = 0; j < x->n; j++)
            if (strcmp(x->e[j].name, name) == 0) FAIL("%s: tensor \"%.96s\" appears twice (also in %s)", path, name, x->files[x->e[j].file].path);
        e.name = strdup(name);
        x->e = ac_realloc(x->e, sizeof *x->e * (size_t)(x->n + 1));
        x->e[x->n++] = e;
    }
    int n = x->n - first;
    sorted = ac_malloc(sizeof *sorted * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) sorted[i] = &x->e[first + i];
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_begin);
    for (int i = 1; i < n; i++)
        if (sorted[i]->begin < sorted[i - 1]->end)
            FAIL("%s: tensors \"%.96s\" and \"%.96s\" overlap in the data", path, sorted[i - 1]->name, sorted[i]->name);
    free(sorted);
    json_free(h);
    free(text);
    fclose(f);
    return true;
fail:
    free(sorted);
    json_free(h);
    free(text);
    fclose(f);
    return false;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = ac_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* DIR/model.safetensors, or every shard model.safetensors.index.json names */
static bool read_index(const char *dir, Index *x, char *err, size_t errlen) {
    char *ip = join(dir, "model.safetensors.index.json");
    JsonValue *idx = NULL;
    bool ok = false;
    if (!file_exists(ip)) {
        char *p = join(dir, "model.safetensors");
        ok = read_header(p, x, err, errlen);
        free(p);
        free(ip);
        return ok;
    }
    idx = json_load(ip, err, errlen);
    if (!idx) goto done;
    const JsonValue *wm = json_get(idx, "weight_map");
    if (!wm || wm->type != JSON_OBJECT) {
        snprintf(err, errlen, "%s: missing key \"weight_map\"", ip);
        goto done;
    }
    /* each shard once, in the order the map first names it */
    for (size_t i = 0; i < wm->n; i++) {
        const JsonValue *fn = wm->members[i].value;
        if (fn->type != JSON_STRING || strchr(fn->str, '/') || fn->len == 0) {
            snprintf(err, errlen, "%s: \"weight_map\": \"%.96s\" must name a file in the directory", ip, wm->members[i].key);
            goto done;
        }
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = strcmp(wm->members[j].value->str, fn->str) == 0;
        if (seen) continue;
        char *p = join(dir, fn->str);
        if (!file_exists(p)) {
            snprintf(err, errlen, "%s: shard %s (of \"%.96s\") is missing: %s", ip, fn->str, wm->members[i].key, strerror(errno));
            free(p);
            goto done;
        }
        bool hok = read_header(p, x, err, errlen);
        free(p);
        if (!hok) goto done;
    }
    /* every tensor the map names is in the shard it names */
    for (size_t i = 0; i < wm->n; i++) {
        const char *name = wm->members[i].key, *fn = wm->members[i].value->str;
        int j = 0;
        while (j < x->n && strcmp(x->e[j].name, name) != 0) j++;
        const char *at = j < x->n ? strrchr(x->files[x->e[j].file].path, '/') + 1 : NULL;
        if (!at || strcmp(at, fn) != 0) {
            snprintf(err, errlen, "%s: \"weight_map\" puts \"%.96s\" in %s, which does not hold it", ip, name, fn);
            goto done;
        }
    }
    ok = true;
done:
    json_free(idx);
    free(ip);
    return ok;
}

static const Entry *find(const Index *x, const char *name) {
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->e[i].name, name) == 0) return &x->e[i];
    return NULL;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
    else if (exp) u = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) u = sign;
    else { /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static bool read_tensor(const Index *x, const Entry *e, Tensor *dst, char *err, size_t errlen) {
    const StFile *sf = &x->files[e->file];
    FILE *f = fopen(sf->path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", sf->path, strerror(errno));
        return false;
    }
    size_t n = (size_t)torch_numel(dst), bytes = (size_t)(e->end - e->begin);
    const uint16_t one = 1;
    /* the file's bytes are already the tensor's (a little-endian host, the same dtype): read in place */
    bool in_place = *(const uint8_t *)&one == 1 && ((dst->dtype == AC_BFLOAT16 && e->dtype == ST_BF16) ||
                                                    (dst->dtype == AC_FLOAT32 && e->dtype == ST_F32));
    unsigned char *buf = in_place ? (unsigned char *)dst->data + (size_t)dst->offset * (dst->dtype == AC_FLOAT32 ? 4 : 2)
                                  : ac_malloc(bytes ? bytes : 1);
    bool ok = fseek(f, (long)(sf->data_start + e->begin), SEEK_SET) == 0 && fread(buf, 1, bytes, f) == bytes;
    fclose(f);
    if (!ok) snprintf(err, errlen, "%s: cannot read tensor \"%s\"", sf->path, e->name);
    if (!ok || in_place) {
        if (!in_place) free(buf);
        return ok;
    }
    float *o = dst->data;
    uint16_t *o16 = dst->data; /* a weight held as bfloat16 (its file's BF16, bit for bit) */
    for (size_t i = 0; i < n; i++) { /* little-endian, whatever the host */
        if (dst->dtype == AC_BFLOAT16) {
            o16[i] = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
        } else if (e->dtype == ST_F32) {
            uint32_t u = (uint32_t)buf[4 * i] | (uint32_t)buf[4 * i + 1] << 8 | (uint32_t)buf[4 * i + 2] << 16 | (uint32_t)buf[4 * i + 3] << 24;
            memcpy(&o[i], &u, 4);
        } else {
            uint16_t h = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
            o[i] = e->dtype == ST_BF16 ? ac_bf16_to_f32(h) : f16_to_f32(h);
        }
    }
    free(buf);
    return true;
}

static const char *index_path(const char *dir, const Index *x) {
    return x->n_files == 1 ? x->files[0].path : dir;
}

nn_LLMModel *llm_from_pretrained(const char *dir, char *err, size_t errlen) {
    return llm_from_pretrained_ex(dir, (llm_load_options){0}, err, errlen);
}

nn_LLMModel *llm_from_pretrained_ex(const char *dir, llm_load_options o, char *err, size_t errlen) {
    bool hold_bf16 = o.hold_bf16;
    nn_LLMConfig cfg;
    char *cp = join(dir, "config.json");
    bool ok = llm_config_load(cp, &cfg, err, errlen);
    free(cp);
    if (!ok) return NULL;
    Index x = {0};
    nn_LLMModel *model = NULL;
    Want *w = NULL;
    if (!read_index(dir, &x, err, errlen)) goto fail;
    int nw = wants_of(&cfg, NULL);
    w = ac_malloc(sizeof *w * (size_t)nw);
    wants_of(&cfg, w);
    bool has_head = find(&x, "lm_head.weight") != NULL;
    for (int i = 0; i < nw; i++) { /* every name and shape, before anything is built */
        const Entry *e = find(&x, w[i].hub);
        if (!e) {
            if (i == nw - 1 && cfg.tie_word_embeddings) continue; /* tied: out_head is tok_emb */
            FAIL("%s: missing tensor \"%s\"%s", index_path(dir, &x), w[i].hub,
                 i == nw - 1 ? " (config.json's tie_word_embeddings is false)" : "");
        }
        bool same = e->nd == w[i].nd;
        for (int d = 0; same && d < e->nd; d++) same = e->shape[d] == w[i].shape[d];
        if (!same) {
            char got[128] = "[", want[64];
            for (int d = 0; d < e->nd; d++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)e->shape[d]);
            strcat(got, "]");
            if (w[i].nd == 1) snprintf(want, sizeof want, "[%lld]", (long long)w[i].shape[0]);
            else snprintf(want, sizeof want, "[%lld, %lld]", (long long)w[i].shape[0], (long long)w[i].shape[1]);
            FAIL("%s: tensor \"%s\" has shape %s; config.json makes it %s", x.files[e->file].path, w[i].hub, got, want);
        }
    }
    for (int i = 0; hold_bf16 && i < nw; i++) { /* held as BF16 only when every matrix is BF16 in the files */
        const Entry *e = find(&x, w[i].hub);
        if (e && w[i].nd == 2 && e->dtype != ST_BF16) hold_bf16 = false;
    }
    bool prev_skip = nn_set_skip_init(o.skip_init);
    model = nn_LLMModel_new(cfg);
    nn_set_skip_init(prev_skip);
    if (cfg.tie_word_embeddings && !has_head) nn_LLMModel_tie_weights(model); /* model.out_head.weight = model.tok_emb.weight */
    if (o.skip_init) nn_LLMModel_fresh_weights(model, hold_bf16 ? AC_BFLOAT16 : AC_FLOAT32); /* storage, read in below */
    else if (hold_bf16) nn_LLMModel_hold_bf16(model); /* the matrices then read bit for bit from the files */
    int ns = slots_of(model, NULL);
    Slot *s = ac_malloc(sizeof *s * (size_t)ns);
    slots_of(model, s);
    bool prev = torch_no_grad_enter();
    for (int i = 0; i < ns && ok; i++) ok = read_tensor(&x, find(&x, s[i].hub), s[i].t, err, errlen);
    torch_no_grad_exit(prev);
    free(s);
    if (!ok) goto fail;
    free(w);
    index_free(&x);
    return model;
fail:
    nn_LLMModel_free(model);
    free(w);
    index_free(&x);
    return NULL;
}

/* ---- saving ----------------------------------------------------------------------------------------------- */

static uint16_t f32_to_f16(float f) { /* round to nearest even */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xff, man = u & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | (uint32_t)e << 10 | man >> 13, rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)h;
}

static bool write_config(const nn_LLMModel *m, const char *path, const char *torch_dtype, char *err, size_t errlen) {
    const nn_LLMConfig *c = &m->cfg;
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return false;
    }
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", m->lm.arch->hf_architecture,
            m->lm.arch->model_type);
    fprintf(f, "  \"vocab_size\": %lld,\n  \"max_position_embeddings\": %lld,\n  \"hidden_size\": %lld,\n",
            (long long)c->vocab_size, (long long)c->context_length, (long long)c->emb_dim);
    fprintf(f, "  \"num_attention_heads\": %lld,\n  \"num_hidden_layers\": %lld,\n  \"intermediate_size\": %lld,\n",
            (long long)c->n_heads, (long long)c->n_layers, (long long)c->hidden_dim);
    if (c->head_dim) fprintf(f, "  \"head_dim\": %lld,\n", (long long)c->head_dim);
    fprintf(f, "  \"num_key_value_heads\": %lld,\n  \"rope_theta\": %.17g,\n  \"rms_norm_eps\": %.17g,\n",
            (long long)c->n_kv_groups, c->rope_base, c->rms_norm_eps);
    if (c->has_rope_freq)
        fprintf(f, "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g, \"low_freq_factor\": %.17g, "
                   "\"high_freq_factor\": %.17g, \"original_max_position_embeddings\": %.17g},\n",
                c->rope_freq.factor, c->rope_freq.low_freq_factor, c->rope_freq.high_freq_factor, c->rope_freq.original_context_length);
    if (c->n_eos == 1) fprintf(f, "  \"eos_token_id\": %lld,\n", (long long)c->eos_token_ids[0]);
    if (c->n_eos > 1) {
        fprintf(f, "  \"eos_token_id\": [");
        for (int i = 0; i < c->n_eos; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)c->eos_token_ids[i]);
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n", m->tied ? "true" : "false", torch_dtype);
    bool ok = fclose(f) == 0;
    if (!ok) snprintf(err, errlen, "%s: write failed", path);
    return ok;
}

bool llm_save_pretrained(nn_LLMModel *model, const char *dir, const char *dtype, char *err, size_t errlen) {
    int d = 0;
    while (d < 3 && strcmp(dtype, st_names[d]) != 0) d++;
    if (d == 3) {
        snprintf(err, errlen, "save: dtype %s; F32, BF16 or F16", dtype);
        return false;
    }
    const char *tdt = d == ST_F32 ? "float32" : d == ST_BF16 ? "bfloat16" : "float16";
    size_t es = d == ST_F32 ? 4 : 2;
    int ns = slots_of(model, NULL);
    Slot *s = ac_malloc(sizeof *s * (size_t)ns);
    slots_of(model, s);
    /* the header: {"name": {"dtype", "shape", "data_offsets"}, ..., "__metadata__": {"format": "pt"}}, padded to 8 */
    size_t cap = 256 + (size_t)ns * 200, len = 0, at = 0;
    char *h = ac_malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < ns; i++) {
        Tensor *t = s[i].t;
        size_t bytes = (size_t)torch_numel(t) * es;
        len += (size_t)snprintf(h + len, cap - len, "\"%s\":{\"dtype\":\"%s\",\"shape\":[", s[i].hub, st_names[d]);
        for (int k = 0; k < t->ndim; k++) len += (size_t)snprintf(h + len, cap - len, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%zu,%zu]},", at, at + bytes);
        at += bytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "\"__metadata__\":{\"format\":\"pt\"}}");
    while (len % 8) h[len++] = ' ';
    char *cp = join(dir, "config.json"), *wp = join(dir, "model.safetensors");
    bool ok = false;
    FILE *f = fopen(wp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", wp, strerror(errno));
        goto done;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)len >> (8 * i));
    ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len;
    for (int i = 0; i < ns && ok; i++) {
        Tensor *t = torch_contiguous(s[i].t);
        size_t n = (size_t)torch_numel(t);
        const float *src = (const float *)t->data + t->offset;
        const uint16_t *src16 = (const uint16_t *)t->data + t->offset; /* a weight held as bfloat16 */
        unsigned char *buf = ac_malloc(n * es + 1);
        for (size_t j = 0; j < n; j++) {
            float v = t->dtype == AC_BFLOAT16 ? ac_bf16_to_f32(src16[j]) : src[j];
            uint32_t u;
            if (d == ST_F32) memcpy(&u, &v, 4);
            else u = d == ST_BF16 ? ac_f32_to_bf16(v) : f32_to_f16(v);
            for (size_t b = 0; b < es; b++) buf[j * es + b] = (unsigned char)(u >> (8 * b));
        }
        ok = fwrite(buf, 1, n * es, f) == n * es;
        free(buf);
    }
    if (fclose(f) != 0) ok = false;
    if (!ok) snprintf(err, errlen, "%s: write failed", wp);
    else ok = write_config(model, cp, tdt, err, errlen);
done:
    free(cp);
    free(wp);
    free(h);
    free(s);
    return ok;
}
