/* The book's GPTModel to and from safetensors (gpt.h): the weights under the
 * state_dict's names, optionally AdamW's state and the generator, so that a
 * run can resume where it stopped. */
#include <stdio.h>
#include <string.h>

#include "extend.h"
#include "gpt.h"

#define FORMAT "attention.c GPTModel"

/* What a checkpoint holds beside the state_dict: AdamW, the generator, and the caller's extra
 * tensors (where a run stands: "loader.*", "curve.*", "run.*") */
static const char *const checkpoint_extras[] = {"optim.", "rng_state", "loader.", "curve.", "run.", NULL};

static void config_str(nn_GPTConfig c, char *buf, size_t len) {
    snprintf(buf, len, "%lld %lld %lld %lld %lld %.17g %d", (long long)c.vocab_size, (long long)c.context_length,
             (long long)c.emb_dim, (long long)c.n_heads, (long long)c.n_layers, c.drop_rate, c.qkv_bias ? 1 : 0);
}

static void config_words(nn_GPTConfig c, char *buf, size_t len) {
    snprintf(buf, len, "vocab_size %lld, context_length %lld, emb_dim %lld, n_heads %lld, n_layers %lld, qkv_bias %s",
             (long long)c.vocab_size, (long long)c.context_length, (long long)c.emb_dim, (long long)c.n_heads,
             (long long)c.n_layers, c.qkv_bias ? "True" : "False");
}

bool nn_GPTModel_save(const char *path, nn_GPTModel *model, optim_Optimizer *opt, nn_TensorList extra, int n_meta,
                      const char *const *meta_kv, char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    nn_TensorList all = nn_checkpoint_tensors(nn_state_dict(&model->module), opt, extra);
    char cfg[256];
    config_str(model->cfg, cfg, sizeof cfg);
    const char **meta = ac_arena_alloc(sizeof(char *) * (size_t)(4 + 2 * n_meta));
    meta[0] = "format", meta[1] = FORMAT, meta[2] = "config", meta[3] = cfg;
    for (int i = 0; i < 2 * n_meta; i++) meta[4 + i] = meta_kv[i];
    bool ok = safetensors_save(path, all, 2 + n_meta, meta, err, errlen);
    ac_arena_release(m);
    return ok;
}

static bool parse_config(const char *s, nn_GPTConfig *c) {
    long long v, ctx, e, h, l;
    int bias, used = 0;
    double drop;
    if (sscanf(s, "%lld %lld %lld %lld %lld %lf %d%n", &v, &ctx, &e, &h, &l, &drop, &bias, &used) != 7 || s[used])
        return false;
    *c = (nn_GPTConfig){v, ctx, e, h, l, drop, bias != 0};
    return true;
}

bool nn_GPTModel_config_of(const char *path, nn_GPTConfig *cfg, bool *has_config, char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    safetensors_File f;
    bool ok = safetensors_load_header(path, &f, err, errlen);
    const char *format = ok ? safetensors_meta(&f, "format") : NULL, *cs = ok ? safetensors_meta(&f, "config") : NULL;
    *has_config = false;
    if (ok && format && strcmp(format, FORMAT) != 0) {
        snprintf(err, errlen, "%s is a checkpoint of \"%.60s\", not of the book's GPTModel", path, format);
        ok = false;
    } else if (ok && format) {
        ok = cs && parse_config(cs, cfg);
        if (!ok) snprintf(err, errlen, "%s: the metadata's \"config\" is missing or not 7 numbers", path);
        *has_config = ok;
    }
    ac_arena_release(m);
    return ok;
}

/* Does f (a whole file, or its header alone: no value is read then) fit model (and opt)? */
static bool fits(const char *path, const safetensors_File *f, nn_GPTModel *model, optim_Optimizer *opt, bool header_only,
                 char *err, size_t errlen) {
    const char *format = safetensors_meta(f, "format");
    if (format && strcmp(format, FORMAT) != 0) {
        snprintf(err, errlen, "%s is a checkpoint of \"%.60s\", not of the book's GPTModel", path, format);
        return false;
    }
    if (format) {
        const char *cs = safetensors_meta(f, "config");
        nn_GPTConfig c;
        if (!cs || !parse_config(cs, &c)) {
            snprintf(err, errlen, "%s: the metadata's \"config\" is missing or not 7 numbers", path);
            return false;
        }
        nn_GPTConfig me = model->cfg;
        if (c.vocab_size != me.vocab_size || c.context_length != me.context_length || c.emb_dim != me.emb_dim ||
            c.n_heads != me.n_heads || c.n_layers != me.n_layers || c.qkv_bias != me.qkv_bias) {
            char a[200], b[200];
            config_words(c, a, sizeof a);
            config_words(me, b, sizeof b);
            snprintf(err, errlen, "%s holds a model of another config (%s); this one has %s", path, a, b);
            return false;
        }
    } else if (opt) {
        snprintf(err, errlen, "%s has no \"format\" in its metadata: weights alone (no optimizer state) cannot resume training",
                 path);
        return false;
    }
    if (!safetensors_copy_into(f, nn_state_dict(&model->module), checkpoint_extras, false, err, errlen)) return false;
    if (opt) {
        if (!optim_load_state_dict(opt, nn_checkpoint_optim_state(f), false, err, errlen)) return false;
        Tensor *rng = safetensors_get(f, "rng_state");
        if (!rng) {
            snprintf(err, errlen, "%s has no rng_state (without it a resumed run draws other batches and dropout)", path);
            return false;
        }
        if (!header_only && !ac_rng_state_check(rng, err, errlen)) return false;
    }
    return true;
}

bool nn_GPTModel_check_file(const char *path, nn_GPTModel *model, optim_Optimizer *opt, char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    safetensors_File f;
    bool ok = safetensors_load_header(path, &f, err, errlen) && fits(path, &f, model, opt, true, err, errlen);
    ac_arena_release(m);
    return ok;
}

bool nn_GPTModel_load(const char *path, nn_GPTModel *model, optim_Optimizer *opt, safetensors_File *f, char *err,
                      size_t errlen) {
    if (!safetensors_load(path, f, err, errlen) || !fits(path, f, model, opt, false, err, errlen)) return false;
    nn_TensorList sd = nn_state_dict(&model->module), ostate = nn_checkpoint_optim_state(f);
    Tensor *rng = safetensors_get(f, "rng_state");
    safetensors_copy_into(f, sd, checkpoint_extras, true, err, errlen); /* all checked: now change things */
    if (opt) {
        optim_load_state_dict(opt, ostate, true, err, errlen);
        torch_set_rng_state(rng);
    }
    return true;
}
