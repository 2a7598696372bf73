/* ToyLM checkpoints: the model's state_dict, Adam's state ("optim."), the
 * generator ("rng_state"), and in the metadata the step, the sizes and the
 * vocabulary, so that a resumed run prints what an uninterrupted one prints.
 * A load checks everything, every key it relies on included, before it
 * changes anything. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extend.h"
#include "optim.h"
#include "safetensors.h"
#include "toy_lm.h"

#define FORMAT "attention.c ToyLM checkpoint"

/* The vocabulary, exactly: its code points in decimal ("10 32 33 ..."), and
 * readable: the characters themselves (a NUL shown as U+2400). */
static char *vocab_codepoints(const CharText *ct) {
    char *s = ac_arena_alloc(ac_size_mul((size_t)ct->vocab_size, 8) + 1), *o = s;
    for (int64_t i = 0; i < ct->vocab_size; i++) o += sprintf(o, "%s%u", i ? " " : "", (unsigned)ct->chars[i]);
    *o = 0;
    return s;
}

static char *vocab_text(const CharText *ct) {
    char *s = ac_arena_alloc(ac_size_mul((size_t)ct->vocab_size, 4) + 1), *o = s;
    for (int64_t i = 0; i < ct->vocab_size; i++) {
        if (ct->chars[i] == 0) o += sprintf(o, "\xe2\x90\x80");
        else o += chartext_decode(ct, i, o);
    }
    *o = 0;
    return s;
}

/* ---- shared by the ToyLM's checkpoints and GPTModel's (gpt_checkpoint.c) ---- */

nn_TensorList nn_checkpoint_tensors(nn_TensorList sd, optim_Optimizer *opt, nn_TensorList extra) {
    nn_TensorList os = opt ? optim_state_dict(opt) : (nn_TensorList){0};
    int n = sd.n + os.n + (opt ? 1 : 0) + extra.n;
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)(n ? n : 1));
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)(n ? n : 1));
    int k = 0;
    for (int i = 0; i < sd.n; i++, k++) names[k] = sd.names[i], ts[k] = sd.tensors[i];
    for (int i = 0; i < os.n; i++, k++) {
        char *nm = ac_arena_alloc(strlen(os.names[i]) + 7);
        sprintf(nm, "optim.%s", os.names[i]);
        names[k] = nm, ts[k] = os.tensors[i];
    }
    if (opt) names[k] = "rng_state", ts[k++] = torch_get_rng_state();
    for (int i = 0; i < extra.n; i++, k++) names[k] = extra.names[i], ts[k] = extra.tensors[i];
    return (nn_TensorList){k, names, ts};
}

nn_TensorList nn_checkpoint_optim_state(const safetensors_File *f) {
    int n = 0;
    const char **names = ac_arena_alloc(sizeof(char *) * (size_t)(f->tensors.n + 1));
    Tensor **ts = ac_arena_alloc(sizeof(Tensor *) * (size_t)(f->tensors.n + 1));
    for (int i = 0; i < f->tensors.n; i++)
        if (strncmp(f->tensors.names[i], "optim.", 6) == 0) {
            names[n] = f->tensors.names[i] + 6;
            ts[n++] = f->tensors.tensors[i];
        }
    return (nn_TensorList){n, names, ts};
}

static int64_t d_model(const nn_ToyLM *m) { return m->tok_emb->embedding_dim; }

bool nn_ToyLM_save_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, int64_t step,
                           char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    nn_TensorList all = nn_checkpoint_tensors(nn_state_dict(&model->module), opt, (nn_TensorList){0});
    char steps[32], dims[128];
    snprintf(steps, sizeof steps, "%lld", (long long)step);
    snprintf(dims, sizeof dims, "%lld %lld %lld %lld", (long long)model->context_length, (long long)d_model(model),
             (long long)model->attn->num_heads, (long long)ct->vocab_size);
    const char *meta[] = {"format", FORMAT, "step", steps, "context dim heads vocab_size", dims,
                          "vocab", vocab_text(ct), "vocab_codepoints", vocab_codepoints(ct)};
    bool ok = safetensors_save(path, all, 5, meta, err, errlen);
    ac_arena_release(m);
    return ok;
}

/* A decimal integer in [0, max], the whole string, no sign, no spaces. */
static bool parse_count(const char *s, int64_t max, int64_t *out) {
    if (!s || !*s) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (max - (*s - '0')) / 10) return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

static const char *require(const safetensors_File *f, const char *key, char *err, size_t errlen) {
    const char *v = safetensors_meta(f, key);
    if (!v) snprintf(err, errlen, "the checkpoint's metadata lacks \"%s\" (not a checkpoint of ./build/train?)", key);
    return v;
}

bool nn_ToyLM_load_checkpoint(const char *path, nn_ToyLM *model, optim_Optimizer *opt, const CharText *ct, int64_t *step,
                           char *err, size_t errlen) {
    ac_mark m = ac_arena_mark();
    safetensors_File f;
    bool ok = safetensors_load(path, &f, err, errlen);
    const char *format = ok ? require(&f, "format", err, errlen) : NULL;
    if (ok && (!format || strcmp(format, FORMAT) != 0)) {
        if (format) snprintf(err, errlen, "the metadata's format is \"%.60s\", not \"" FORMAT "\"", format);
        ok = false;
    }
    /* the sizes it was trained with (--heads changes no shape, so the shapes alone cannot tell) */
    const char *sizes = ok ? require(&f, "context dim heads vocab_size", err, errlen) : NULL;
    long long ctx, dim, heads, vs;
    char extra;
    if (ok && (!sizes || sscanf(sizes, "%lld %lld %lld %lld %c", &ctx, &dim, &heads, &vs, &extra) != 4)) {
        if (sizes) snprintf(err, errlen, "the metadata's sizes \"%.60s\" are not four numbers", sizes);
        ok = false;
    }
    if (ok && (ctx != model->context_length || dim != d_model(model) || heads != model->attn->num_heads)) {
        snprintf(err, errlen, "the checkpoint was trained with --context %lld --dim %lld --heads %lld; this run has "
                 "--context %lld --dim %lld --heads %lld", ctx, dim, heads, (long long)model->context_length,
                 (long long)d_model(model), (long long)model->attn->num_heads);
        ok = false;
    }
    const char *vocab = ok ? require(&f, "vocab_codepoints", err, errlen) : NULL;
    if (ok && (!vocab || vs != ct->vocab_size || strcmp(vocab, vocab_codepoints(ct)) != 0)) {
        if (vocab) snprintf(err, errlen, "the checkpoint was trained on a different character vocabulary");
        ok = false;
    }
    const char *st = ok ? require(&f, "step", err, errlen) : NULL;
    int64_t s = 0;
    if (ok && (!st || !parse_count(st, INT64_MAX, &s))) {
        if (st) snprintf(err, errlen, "bad step \"%.40s\" in the metadata (a whole number from 0 to %lld)", st,
                         (long long)INT64_MAX);
        ok = false;
    }
    const char *const ignore[] = {"optim.", "rng_state", NULL};
    if (ok) ok = safetensors_copy_into(&f, nn_state_dict(&model->module), ignore, false, err, errlen);
    nn_TensorList ostate = ok ? nn_checkpoint_optim_state(&f) : (nn_TensorList){0}; /* without the "optim." prefix */
    if (ok) ok = optim_load_state_dict(opt, ostate, false, err, errlen);
    Tensor *rng = ok ? safetensors_get(&f, "rng_state") : NULL;
    if (ok && !rng) {
        snprintf(err, errlen, "the checkpoint has no rng_state (without it a resumed run draws other batches)");
        ok = false;
    }
    if (ok) ok = ac_rng_state_check(rng, err, errlen);
    if (ok) { /* everything checked: now change the model, the optimizer and the generator */
        safetensors_copy_into(&f, nn_state_dict(&model->module), ignore, true, err, errlen);
        optim_load_state_dict(opt, ostate, true, err, errlen);
        torch_set_rng_state(rng);
        *step = s;
    }
    ac_arena_release(m);
    return ok;
}
