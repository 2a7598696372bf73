/* OpenAI's GPT-2 weights as Hugging Face ships them (config.json + model.safetensors) into the
 * book's GPTModel: load_weights_into_gpt's mapping (chapter 5). Conv1D weights are stored
 * [in, out], so each is transposed into Linear's [out, in]; c_attn holds W_query, W_key and
 * W_value side by side; the output head is tied to wte; the attn.bias/masked_bias buffers are
 * skipped; keys may carry a "transformer." prefix. Every size comes from config.json. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

/* ---- config.json: the five sizes, from a JSON object whose other values are skipped ------------ */

typedef struct { const char *s; size_t n, at; } Json;

static void ws(Json *j) {
    while (j->at < j->n && strchr(" \t\r\n", j->s[j->at])) j->at++;
}

static bool skip_string(Json *j) {
    if (j->at >= j->n || j->s[j->at] != '"') return false;
    for (j->at++; j->at < j->n; j->at++) {
        if (j->s[j->at] == '\\') j->at++;
        else if (j->s[j->at] == '"') return ++j->at, true;
    }
    return false;
}

static bool skip_value(Json *j, int depth) {
    ws(j);
    if (j->at >= j->n || depth > 64) return false;
    char c = j->s[j->at];
    if (c == '"') return skip_string(j);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->at++;
        ws(j);
        if (j->at < j->n && j->s[j->at] == close) return ++j->at, true;
        for (;;) {
            if (c == '{') {
                ws(j);
                if (!skip_string(j)) return false;
                ws(j);
                if (j->at >= j->n || j->s[j->at++] != ':') return false;
            }
            if (!skip_value(j, depth + 1)) return false;
            ws(j);
            if (j->at >= j->n) return false;
            if (j->s[j->at] == ',') { j->at++; continue; }
            if (j->s[j->at] == close) return ++j->at, true;
            return false;
        }
    }
    size_t start = j->at; /* a number or a literal */
    while (j->at < j->n && strchr("+-.0123456789eEtruefalsn", j->s[j->at])) j->at++;
    return j->at > start;
}

typedef struct { const char *key; int64_t *out; } Want;

static bool read_config(const char *path, nn_GPTConfig *cfg, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno)), false;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    bool too_big = buf && n == (1 << 20) - 1 && fgetc(f) != EOF;
    fclose(f);
    if (!buf || too_big) {
        free(buf);
        return snprintf(err, errlen, "%s: %s", path, buf ? "larger than 1 MB: not a config.json" : "not enough memory"), false;
    }
    int64_t n_embd = -1, n_head = -1, n_layer = -1, n_positions = -1, n_ctx = -1, vocab = -1;
    Want want[] = {{"n_embd", &n_embd}, {"n_head", &n_head}, {"n_layer", &n_layer}, {"n_positions", &n_positions},
                   {"n_ctx", &n_ctx}, {"vocab_size", &vocab}};
    Json j = {buf, n, 0};
    bool ok = true;
    ws(&j);
    if (j.at >= n || buf[j.at++] != '{') ok = false;
    while (ok) {
        ws(&j);
        if (j.at < n && buf[j.at] == '}') break;
        size_t k0 = j.at + 1;
        if (!skip_string(&j)) { ok = false; break; }
        size_t klen = j.at - 1 - k0;
        ws(&j);
        if (j.at >= n || buf[j.at++] != ':') { ok = false; break; }
        ws(&j);
        size_t v0 = j.at;
        if (!skip_value(&j, 0)) { ok = false; break; }
        for (size_t w = 0; w < sizeof want / sizeof *want; w++)
            if (strlen(want[w].key) == klen && !memcmp(buf + k0, want[w].key, klen)) {
                char num[32], *end;
                size_t len = j.at - v0 < 31 ? j.at - v0 : 31;
                memcpy(num, buf + v0, len);
                num[len] = 0;
                errno = 0;
                long long v = strtoll(num, &end, 10);
                if (errno || end == num || *end || v < 1) {
                    snprintf(err, errlen, "%s: \"%s\" is %s, not a whole number >= 1", path, want[w].key, num);
                    free(buf);
                    return false;
                }
                *want[w].out = v;
            }
        ws(&j);
        if (j.at < n && buf[j.at] == ',') j.at++;
        else if (!(j.at < n && buf[j.at] == '}')) ok = false;
    }
    free(buf);
    if (!ok) return snprintf(err, errlen, "%s: not a JSON object (byte %zu)", path, j.at), false;
    if (n_positions < 0) n_positions = n_ctx;
    const char *missing = n_embd < 0 ? "n_embd" : n_head < 0 ? "n_head" : n_layer < 0 ? "n_layer" :
                          n_positions < 0 ? "n_positions" : vocab < 0 ? "vocab_size" : NULL;
    if (missing) return snprintf(err, errlen, "%s has no \"%s\"", path, missing), false;
    *cfg = (nn_GPTConfig){.vocab_size = vocab, .context_length = n_positions, .emb_dim = n_embd, .n_heads = n_head,
                          .n_layers = n_layer, .drop_rate = 0.0, .qkv_bias = true};
    return nn_GPTConfig_check(*cfg, err, errlen);
}

/* ---- the weights --------------------------------------------------------------------------------- */

typedef struct { const safetensors_File *f; const char *prefix; char *err; size_t errlen; } Src;

/* params[name], with the shape it must have (rows x cols; cols 0: a vector) */
static Tensor *param(const Src *s, const char *name, int64_t rows, int64_t cols) {
    char full[160];
    snprintf(full, sizeof full, "%s%s", s->prefix, name);
    Tensor *t = safetensors_get(s->f, full);
    if (!t) return snprintf(s->err, s->errlen, "model.safetensors has no \"%s\"", full), NULL;
    bool ok = t->dtype == AC_FLOAT32 && (cols ? t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols
                                              : t->ndim == 1 && t->shape[0] == rows);
    if (!ok) {
        char want[64];
        if (cols) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        else snprintf(want, sizeof want, "[%lld]", (long long)rows);
        snprintf(s->err, s->errlen, "\"%s\" is %s %s; config.json makes it float32 %s", full,
                 t->dtype == AC_FLOAT32 ? "float32" : "not float32", ac_shape_str(t), want);
        return NULL;
    }
    return t;
}

/* dst = src (or src.T), columns c0.. of it when a slice of c_attn */
static void put(Tensor *dst, Tensor *src, bool transpose, int64_t c0) {
    Tensor *v = src;
    if (dst->ndim == 2) v = torch_slice(src, 1, c0, c0 + (transpose ? dst->shape[0] : dst->shape[1]));
    else if (c0 || torch_numel(src) != torch_numel(dst)) v = torch_slice(src, 0, c0, c0 + dst->shape[0]);
    if (transpose) v = torch_t(v);
    torch_copy_(dst, v);
}

static bool load_weights_into_gpt(nn_GPTModel *gpt, const safetensors_File *f, char *err, size_t errlen) {
    Src s = {f, safetensors_get(f, "transformer.wte.weight") ? "transformer." : "", err, errlen};
    nn_GPTConfig c = gpt->cfg;
    int64_t e = c.emb_dim;
    Tensor *wte = param(&s, "wte.weight", c.vocab_size, e), *wpe = param(&s, "wpe.weight", c.context_length, e);
    Tensor *lnf_w = param(&s, "ln_f.weight", e, 0), *lnf_b = param(&s, "ln_f.bias", e, 0);
    if (!wte || !wpe || !lnf_w || !lnf_b) return false;
    struct { const char *name; int64_t rows, cols; } per_block[] = {
        {"ln_1.weight", e, 0}, {"ln_1.bias", e, 0}, {"attn.c_attn.weight", e, 3 * e}, {"attn.c_attn.bias", 3 * e, 0},
        {"attn.c_proj.weight", e, e}, {"attn.c_proj.bias", e, 0}, {"ln_2.weight", e, 0}, {"ln_2.bias", e, 0},
        {"mlp.c_fc.weight", e, 4 * e}, {"mlp.c_fc.bias", 4 * e, 0}, {"mlp.c_proj.weight", 4 * e, e},
        {"mlp.c_proj.bias", e, 0}};
    enum { N = sizeof per_block / sizeof *per_block };
    Tensor **blk = ac_arena_alloc(sizeof(Tensor *) * (size_t)(c.n_layers * N));
    for (int64_t b = 0; b < c.n_layers; b++) /* everything checked before anything changes */
        for (int k = 0; k < N; k++) {
            char name[96];
            snprintf(name, sizeof name, "h.%lld.%s", (long long)b, per_block[k].name);
            if (!(blk[b * N + k] = param(&s, name, per_block[k].rows, per_block[k].cols))) return false;
        }
    bool prev = torch_no_grad_enter();
    put(gpt->pos_emb->weight, wpe, false, 0);                                     /* gpt.pos_emb.weight = params["wpe"] */
    put(gpt->tok_emb->weight, wte, false, 0);                                     /* gpt.tok_emb.weight = params["wte"] */
    for (int64_t b = 0; b < c.n_layers; b++) {
        nn_TransformerBlock *t = nn_GPTModel_block(gpt, (int)b);
        Tensor **p = blk + b * N;
        put(t->att->W_query->weight, p[2], true, 0);                              /* q_w, k_w, v_w = np.split(c_attn.w, 3, axis=-1) */
        put(t->att->W_key->weight, p[2], true, e);                                /* W_query.weight = q_w.T, ... */
        put(t->att->W_value->weight, p[2], true, 2 * e);
        put(t->att->W_query->bias, p[3], false, 0);                               /* q_b, k_b, v_b = np.split(c_attn.b, 3) */
        put(t->att->W_key->bias, p[3], false, e);
        put(t->att->W_value->bias, p[3], false, 2 * e);
        put(t->att->out_proj->weight, p[4], true, 0);                             /* out_proj.weight = c_proj.w.T */
        put(t->att->out_proj->bias, p[5], false, 0);
        nn_Linear *fc = (nn_Linear *)t->ff->layers->module.children[0].m, *proj = (nn_Linear *)t->ff->layers->module.children[2].m;
        put(fc->weight, p[8], true, 0);                                           /* ff.layers[0].weight = mlp.c_fc.w.T */
        put(fc->bias, p[9], false, 0);
        put(proj->weight, p[10], true, 0);                                        /* ff.layers[2].weight = mlp.c_proj.w.T */
        put(proj->bias, p[11], false, 0);
        put(t->norm1->scale, p[0], false, 0);                                     /* norm1.scale = ln_1.g; shift = ln_1.b */
        put(t->norm1->shift, p[1], false, 0);
        put(t->norm2->scale, p[6], false, 0);
        put(t->norm2->shift, p[7], false, 0);
    }
    put(gpt->final_norm->scale, lnf_w, false, 0);                                 /* final_norm.scale = params["g"] */
    put(gpt->final_norm->shift, lnf_b, false, 0);
    put(gpt->out_head->weight, wte, false, 0);                                    /* gpt.out_head.weight = params["wte"] (tied) */
    torch_no_grad_exit(prev);
    return true;
}

nn_GPTModel *nn_GPTModel_from_gpt2(const char *dir, char *err, size_t errlen) {
    char path[4096];
    nn_GPTConfig cfg;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!read_config(path, &cfg, err, errlen)) return NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ac_mark m = ac_arena_mark();
    safetensors_File f;
    if (!safetensors_load(path, &f, err, errlen)) {
        ac_arena_release(m);
        return NULL;
    }
    nn_GPTModel *model = nn_GPTModel_new(cfg);
    bool ok = load_weights_into_gpt(model, &f, err, errlen);
    ac_arena_release(m);
    if (!ok) {
        nn_free(&model->module);
        return NULL;
    }
    return model;
}
