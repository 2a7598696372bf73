/* The chat formats of text_tokenizer.h: the book's Qwen3Tokenizer
 * (pkg/llms_from_scratch/qwen3.py) and the Llama 3.2 notebook's ChatFormat
 * (ch05/07_gpt_to_llama/standalone-llama32.ipynb), step for step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_tokenizer_impl.h"
#include "unicode.h"

/* Qwen3Tokenizer's _SPECIALS: the parts that become ids when the split finds them. */
static const char *const QWEN3_SPECIALS[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<think>", "</think>"};
#define N_QWEN3_SPECIALS (sizeof QWEN3_SPECIALS / sizeof *QWEN3_SPECIALS)

static int64_t qwen3_special(const TextTokenizer *t, const char *s, size_t n) { /* -1: not one */
    for (size_t i = 0; i < N_QWEN3_SPECIALS; i++)
        if (strlen(QWEN3_SPECIALS[i]) == n && memcmp(QWEN3_SPECIALS[i], s, n) == 0)
            return text_tokenizer_token_to_id(t, QWEN3_SPECIALS[i]);
    return -1;
}

/* Python's str.isspace(): White_Space, and U+001C..U+001F. */
static size_t space_at(const char *s, size_t n, size_t i) { /* its bytes, or 0 */
    int len;
    uint32_t cp = tok_utf8_at((const unsigned char *)s, i, &len);
    (void)n;
    return unicode_class(cp) == UC_SPACE || (cp >= 0x1C && cp <= 0x1F) ? (size_t)len : 0;
}

/* _SPLIT_RE = (<\|[^>]+?\|>|<think>|</think>): the match at s[p], its length or 0. */
static size_t split_match(const char *s, size_t n, size_t p) {
    if (n - p >= 4 && s[p] == '<' && s[p + 1] == '|') { /* the lazy [^>]+? stops at the first '>' */
        const char *gt = memchr(s + p + 2, '>', n - p - 2);
        size_t q = gt ? (size_t)(gt - s) : 0;
        if (gt && q >= p + 4 && s[q - 1] == '|') return q + 1 - p;
    }
    if (n - p >= 7 && memcmp(s + p, "<think>", 7) == 0) return 7;
    if (n - p >= 8 && memcmp(s + p, "</think>", 8) == 0) return 8;
    return 0;
}

/* Appends ids (a tensor of them) to a growing int64 list. */
typedef struct { int64_t *v; size_t n, cap; bool nomem; } ids_list;
static void push(ids_list *l, int64_t id) {
    if (l->nomem) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        int64_t *p = ac_try_realloc(l->v, sizeof(int64_t) * cap);
        if (!p) { l->nomem = true; return; }
        l->v = p, l->cap = cap;
    }
    l->v[l->n++] = id;
}
static bool push_text(ids_list *l, TextTokenizer *t, const char *s, size_t n, int flags, char *err, size_t errlen) {
    Tensor *ids = text_tokenizer_encode(t, s, n, flags, err, errlen);
    if (!ids) return false;
    const int64_t *d = ids->data;
    for (int64_t i = 0; i < torch_numel(ids); i++) push(l, d[i]);
    return true;
}
static Tensor *finish(ids_list *l, bool ok, char *err, size_t errlen) {
    if (ok && l->nomem) {
        snprintf(err, errlen, "chat: not enough memory");
        ok = false;
    }
    Tensor *out = NULL;
    if (ok) {
        out = torch_empty(SHAPE((int64_t)l->n), AC_INT64);
        if (l->n) memcpy(out->data, l->v, sizeof(int64_t) * l->n);
    }
    free(l->v);
    return out;
}

Tensor *qwen3_chat_encode(TextTokenizer *t, const char *text, size_t len, const text_chat_options *opts, char *err,
                          size_t errlen) {
    text_chat_options none = {0};
    if (!opts) opts = &none;
    size_t bad = tok_utf8_check(text, len);
    if (bad < len) {
        snprintf(err, errlen, "encode: the text is not UTF-8: byte %zu is 0x%02X", bad, (unsigned char)text[bad]);
        return NULL;
    }
    ids_list l = {0};
    /* stripped = text.strip(): a lone special token is its id */
    size_t a = 0, b = len, k;
    while (a < b && (k = space_at(text, len, a))) a += k;
    while (b > a) {
        size_t c = b - 1;
        while (c > a && ((unsigned char)text[c] & 0xC0) == 0x80) c--;
        if (!space_at(text, len, c)) break;
        b = c;
    }
    int64_t sp = qwen3_special(t, text + a, b - a);
    if (sp >= 0 && !memchr(text + a, '\n', b - a)) {
        push(&l, sp);
        return finish(&l, true, err, errlen);
    }
    const char *s = text;
    size_t n = len;
    char *wrapped = NULL;
    if (!opts->plain) { /* _wrap_chat */
        const char *gen = !opts->add_generation_prompt ? ""
                          : opts->add_thinking         ? "<|im_start|>assistant\n"
                                                       : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
        size_t m = len + strlen(gen) + 64;
        if (!(wrapped = ac_try_malloc(m))) {
            snprintf(err, errlen, "chat: not enough memory");
            return NULL;
        }
        n = (size_t)snprintf(wrapped, m, "<|im_start|>user\n");
        memcpy(wrapped + n, text, len), n += len;
        n += (size_t)snprintf(wrapped + n, m - n, "<|im_end|>\n%s", gen);
        s = wrapped;
    }
    bool ok = true;
    size_t start = 0; /* _SPLIT_RE.split: the text between matches, and the matches; empty parts dropped */
    for (size_t p = 0; ok && p <= n; p++) {
        size_t m = p < n ? split_match(s, n, p) : 0;
        if (p < n && !m) continue;
        if (p > start) ok = push_text(&l, t, s + start, p - start, TEXT_SPECIAL_IN_TEXT | TEXT_ADD_SPECIAL_TOKENS, err, errlen);
        if (!m) break;
        int64_t id = qwen3_special(t, s + p, m);
        if (id >= 0) push(&l, id);
        else if (ok) ok = push_text(&l, t, s + p, m, TEXT_SPECIAL_IN_TEXT | TEXT_ADD_SPECIAL_TOKENS, err, errlen);
        start = p + m;
        p = start - 1;
    }
    free(wrapped);
    return finish(&l, ok, err, errlen);
}

/* tiktoken's encode() allows no special token in the text. */
static bool no_special(const TextTokenizer *t, const char *s, size_t n, const char *what, char *err, size_t errlen) {
    for (size_t p = 0; p < n; p++)
        for (int32_t k = t->first_added[(unsigned char)s[p]]; k < t->first_added[(unsigned char)s[p] + 1]; k++) {
            const text_added *a = &t->added[k];
            if (a->special && a->len <= n - p && memcmp(s + p, a->content, a->len) == 0) {
                snprintf(err, errlen, "chat: Encountered text corresponding to disallowed special token '%s' "
                         "(in the %s message, at byte %zu)", a->content, what, p);
                return false;
            }
        }
    return true;
}

static bool llama3_id(const TextTokenizer *t, const char *name, int64_t *id, char *err, size_t errlen) {
    if ((*id = text_tokenizer_token_to_id(t, name)) >= 0) return true;
    snprintf(err, errlen, "chat: the tokenizer has no %s: Llama 3's chat format needs it", name);
    return false;
}

Tensor *llama3_chat_encode(TextTokenizer *t, const char *user, size_t len, const text_chat_options *opts, char *err,
                           size_t errlen) {
    const char *sys = opts && opts->system ? opts->system : "You are a helpful assistant.";
    int64_t bot, sh, eh, eot;
    if (!llama3_id(t, "<|begin_of_text|>", &bot, err, errlen) || !llama3_id(t, "<|start_header_id|>", &sh, err, errlen) ||
        !llama3_id(t, "<|end_header_id|>", &eh, err, errlen) || !llama3_id(t, "<|eot_id|>", &eot, err, errlen))
        return NULL;
    if (!no_special(t, sys, strlen(sys), "system", err, errlen) || !no_special(t, user, len, "user", err, errlen))
        return NULL;
    ids_list l = {0};
    push(&l, bot);
    const char *roles[3] = {"system", "user", "assistant"};
    const char *msg[2] = {sys, user};
    size_t mlen[2] = {strlen(sys), len};
    bool ok = true;
    for (int r = 0; ok && r < 3; r++) { /* _header(role), then the message and <|eot_id|> */
        push(&l, sh);
        ok = push_text(&l, t, roles[r], strlen(roles[r]), 0, err, errlen);
        push(&l, eh);
        ok = ok && push_text(&l, t, "\n\n", 2, 0, err, errlen);
        if (r < 2) {
            ok = ok && push_text(&l, t, msg[r], mlen[r], 0, err, errlen);
            push(&l, eot);
        }
    }
    return finish(&l, ok, err, errlen);
}

const char *text_tokenizer_chat_format(const TextTokenizer *t) {
    if (text_tokenizer_token_to_id(t, "<|im_start|>") >= 0) return "qwen3";
    if (text_tokenizer_token_to_id(t, "<|start_header_id|>") >= 0) return "llama3";
    return NULL;
}

Tensor *text_tokenizer_chat_encode(TextTokenizer *t, const char *user, size_t len, const text_chat_options *opts,
                                   char *err, size_t errlen) {
    const char *f = text_tokenizer_chat_format(t);
    if (!f) {
        snprintf(err, errlen, "chat: this tokenizer (%s) has no chat format: Qwen3's needs <|im_start|>, Llama 3's "
                 "<|start_header_id|>", text_tokenizer_kind(t));
        return NULL;
    }
    return f[0] == 'q' ? qwen3_chat_encode(t, user, len, opts, err, errlen) : llama3_chat_encode(t, user, len, opts, err, errlen);
}
