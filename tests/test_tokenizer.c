/* GPT-2's tokenizer, the BPE trainer and the book's loaders, against
 * tests/data/tokenizer_golden.txt (tests/tools/gen_tokenizer_golden.py: the
 * reference ../shared/pytorch/gpt2_tokenizer.py and PyTorch 1.13's DataLoader),
 * a naive BPE written here, and hostile files. */
#include <stdlib.h>

#include "data.h"
#include "tests.h"
#include "tokenizer.h"

#define GOLDEN "tokenizer_golden.txt"

static Tokenizer *gpt2(void) {
    char err[512];
    Tokenizer *t = tokenizer_load(shared_path("data/gpt2"), err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    return t;
}

static void assert_ids(const Tensor *ids, const char *name) {
    Golden g = golden(GOLDEN, name);
    ck_assert_msg(torch_numel(ids) == g.n, "%s: %lld ids, the reference has %d", name, (long long)torch_numel(ids), g.n);
    const int64_t *d = ids->data;
    for (int i = 0; i < g.n; i++)
        ck_assert_msg(d[i] == (int64_t)g.v[i], "%s: id %d is %lld, the reference's %lld", name, i, (long long)d[i],
                      (long long)g.v[i]);
}

/* the-verdict is not ours to copy in, even as ids: its record is the count, the first 64 and a hash */
static void assert_verdict_ids(const Tensor *ids) {
    Golden head = golden(GOLDEN, "verdict_ids_head"), hash = golden(GOLDEN, "verdict_ids_hash");
    const int64_t *d = ids->data;
    ck_assert_int_eq(torch_numel(ids), (int64_t)hash.v[0]);
    for (int i = 0; i < head.n; i++) ck_assert_msg(d[i] == (int64_t)head.v[i], "verdict id %d", i);
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over each id's 4 little-endian bytes */
    for (int64_t i = 0; i < torch_numel(ids); i++)
        for (int b = 0; b < 4; b++) h = (h ^ ((uint64_t)d[i] >> (8 * b) & 0xFF)) * 0x100000001b3ULL;
    ck_assert_msg(h == ((uint64_t)hash.v[1] << 32 | (uint64_t)hash.v[2]), "the-verdict's ids differ from the reference's");
}

static Tensor *encode(Tokenizer *t, const char *s, size_t n) {
    char err[256];
    Tensor *ids = tokenizer_encode(t, s, n, TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    ck_assert_msg(ids != NULL, "%s", err);
    return ids;
}

static void assert_round_trip(const Tokenizer *t, const Tensor *ids, const char *text, size_t len) {
    char err[256];
    size_t n;
    char *back = tokenizer_decode(t, ids->data, torch_numel(ids), &n, err, sizeof err);
    ck_assert_msg(back != NULL, "%s", err);
    ck_assert_uint_eq(n, len);
    ck_assert(memcmp(back, text, len) == 0);
}

START_TEST(test_verdict_and_corpus) {
    Tokenizer *t = gpt2();
    ck_assert_int_eq(tokenizer_n_vocab(t), 50257);
    ck_assert_int_eq(tokenizer_n_merges(t), 50000);
    ck_assert_int_eq(tokenizer_eot_id(t), 50256);
    const char *files[] = {shared_path("data/the-verdict.txt"), data_path("tokenizer_corpus.txt")};
    const char *names[] = {NULL, "corpus_ids"};
    for (int k = 0; k < 2; k++) {
        char *text = read_text(files[k]);
        Tensor *ids = encode(t, text, strlen(text));
        if (k == 0) ck_assert_int_eq(torch_numel(ids), 5145); /* the book's count */
        if (k == 0) assert_verdict_ids(ids);
        else assert_ids(ids, names[k]);
        assert_round_trip(t, ids, text, strlen(text));
        /* a second time, every word from the cache */
        if (k == 0) assert_verdict_ids(encode(t, text, strlen(text)));
        else assert_ids(encode(t, text, strlen(text)), names[k]);
        free(text);
    }
    tokenizer_free(t);
}
END_TEST

START_TEST(test_decode_replaces_broken_utf8) {
    Tokenizer *t = gpt2();
    for (int k = 0; k < 12; k++) {
        char name[64], tname[64], err[256];
        snprintf(name, sizeof name, "decode_%d_ids", k);
        snprintf(tname, sizeof tname, "decode_%d_text", k);
        Golden gi = golden(GOLDEN, name), gt = golden(GOLDEN, tname);
        int64_t ids[16];
        for (int i = 0; i < gi.n; i++) ids[i] = (int64_t)gi.v[i];
        size_t n;
        char *s = tokenizer_decode(t, ids, gi.n, &n, err, sizeof err);
        ck_assert_msg(s != NULL, "%s", err);
        ck_assert_msg(n == (size_t)gt.n, "decode case %d: %zu bytes, Python's %d", k, n, gt.n);
        for (int i = 0; i < gt.n; i++) ck_assert_msg((unsigned char)s[i] == (int)gt.v[i], "decode case %d, byte %d", k, i);
    }
    int64_t bad[] = {464, 50257};
    char err[256];
    ck_assert(tokenizer_decode(t, bad, 2, NULL, err, sizeof err) == NULL);
    ck_assert_str_eq(err, "decode: id 50257 (position 1) is out of range: the vocabulary has 50257 tokens");
    bad[1] = -1;
    ck_assert(tokenizer_decode(t, bad, 2, NULL, err, sizeof err) == NULL);
    tokenizer_free(t);
}
END_TEST

START_TEST(test_special_token_modes) {
    Tokenizer *t = gpt2();
    const char *s = "Hello<|endoftext|> world";
    char err[256];
    Tensor *a = tokenizer_encode(t, s, strlen(s), TOKENIZER_ALLOW_SPECIAL, err, sizeof err);
    ck_assert_int_eq(torch_numel(a), 3); /* Hello, <|endoftext|>, " world" */
    ck_assert_int_eq(((int64_t *)a->data)[1], 50256);
    Tensor *b = tokenizer_encode(t, s, strlen(s), TOKENIZER_SPECIAL_AS_TEXT, err, sizeof err);
    ck_assert_int_gt(torch_numel(b), 3);
    for (int64_t i = 0; i < torch_numel(b); i++) ck_assert_int_ne(((int64_t *)b->data)[i], 50256);
    assert_round_trip(t, b, s, strlen(s));
    ck_assert(tokenizer_encode(t, s, strlen(s), TOKENIZER_DISALLOW_SPECIAL, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "disallowed special token '<|endoftext|>' (at byte 5)"), "%s", err);
    /* empty text, text that is only the marker, text cut inside the marker */
    ck_assert_int_eq(torch_numel(encode(t, "", 0)), 0);
    Tensor *e = encode(t, "<|endoftext|>", 13);
    ck_assert(torch_numel(e) == 1 && ((int64_t *)e->data)[0] == 50256);
    ck_assert_int_gt(torch_numel(encode(t, "<|endoftext|", 12)), 1);
    tokenizer_free(t);
}
END_TEST

START_TEST(test_text_not_utf8) {
    Tokenizer *t = gpt2();
    const char *cases[] = {"ab\xff", "caf\xc3", "\xed\xa0\x80", "ok \xc0\xaf", "\xf4\x90\x80\x80"};
    const size_t at[] = {2, 3, 0, 3, 0};
    for (int k = 0; k < 5; k++) {
        char err[256], want[64];
        ck_assert(tokenizer_encode(t, cases[k], strlen(cases[k]), TOKENIZER_ALLOW_SPECIAL, err, sizeof err) == NULL);
        snprintf(want, sizeof want, "not UTF-8: byte %zu is 0x", at[k]);
        ck_assert_msg(strstr(err, want), "case %d: %s", k, err);
    }
    tokenizer_free(t);
}
END_TEST

/* The pre-tokenizer where C's isspace and older tables go wrong (U+001C..U+001F
 * are not White_Space, U+0085 and NBSP are; U+200B is neither; digits of other
 * scripts are \p{N}), against the reference's words. */
START_TEST(test_pretokenizer) {
    for (int k = 0; k < 20; k++) {
        char r1[64], r2[64];
        snprintf(r1, sizeof r1, "pretok_%d_text", k);
        snprintf(r2, sizeof r2, "pretok_%d_words", k);
        Golden gt = golden(GOLDEN, r1), gw = golden(GOLDEN, r2);
        char text[128];
        for (int i = 0; i < gt.n; i++) text[i] = (char)(int)gt.v[i];
        size_t at = 0;
        for (int w = 0; w < gw.n; w++) {
            ck_assert_msg(at < (size_t)gt.n, "case %d: the text ended before word %d", k, w);
            size_t end = tokenizer_next_word(text, (size_t)gt.n, at);
            ck_assert_msg(end - at == (size_t)gw.v[w], "case %d, word %d: %zu bytes, the reference's %d", k, w, end - at,
                          (int)gw.v[w]);
            at = end;
        }
        ck_assert_msg(at == (size_t)gt.n, "case %d: more words than the reference's %d", k, gw.n);
    }
    /* Unicode 15.0's CJK Extension H (U+31350) is \p{L}: one word with the letters around it
     * (Python 3.11's unicodedata, Unicode 14.0, does not know it yet) */
    const char *h = "ab\xf0\xb1\x8d\x90" "cd";
    ck_assert_uint_eq(tokenizer_next_word(h, strlen(h), 0), strlen(h));
    ck_assert_str_eq(tokenizer_unicode_version(), "15.0.0");
}
END_TEST

/* Hugging Face's file names, same content, same ids. */
START_TEST(test_hugging_face_names) {
    char *dir = temp_dir(), cmd[2048], err[512];
    snprintf(cmd, sizeof cmd, "cp %s/encoder.json %s/vocab.json && cp %s/vocab.bpe %s/merges.txt", shared_path("data/gpt2"),
             dir, shared_path("data/gpt2"), dir);
    ck_assert_int_eq(system(cmd), 0);
    Tokenizer *t = tokenizer_load(dir, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    char *text = read_text(data_path("tokenizer_corpus.txt"));
    assert_ids(encode(t, text, strlen(text)), "corpus_ids");
    free(text);
    tokenizer_free(t);
    snprintf(cmd, sizeof cmd, "%s/none", dir);
    ck_assert(tokenizer_load(cmd, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "has no encoder.json and vocab.bpe") && strstr(err, "vocab.json"), "%s", err);
    remove_dir(dir);
}
END_TEST

/* The reference's BPE, naively: the pair of lowest rank, every occurrence, again. */
static int64_t naive_rank(const Tokenizer *t, int64_t a, int64_t b, int64_t *merged) {
    static int64_t *table; /* (a, b) -> rank by linear probing over the merges */
    static int64_t cap;
    static const Tokenizer *of;
    if (of != t) {
        free(table);
        cap = 1 << 17;
        table = malloc(sizeof(int64_t) * (size_t)cap * 3);
        for (int64_t i = 0; i < cap; i++) table[3 * i] = -1;
        for (int64_t r = 0, l, rr; tokenizer_merge(t, r, &l, &rr) >= 0; r++) {
            int64_t h = (l * 50261 + rr) & (cap - 1);
            while (table[3 * h] >= 0) h = (h + 1) & (cap - 1);
            table[3 * h] = l, table[3 * h + 1] = rr, table[3 * h + 2] = r;
        }
        of = t;
    }
    for (int64_t h = (a * 50261 + b) & (cap - 1); table[3 * h] >= 0; h = (h + 1) & (cap - 1))
        if (table[3 * h] == a && table[3 * h + 1] == b) {
            int64_t l, r;
            *merged = tokenizer_merge(t, table[3 * h + 2], &l, &r);
            return table[3 * h + 2];
        }
    return -1;
}

START_TEST(test_bpe_against_naive) {
    Tokenizer *t = gpt2();
    uint64_t s = 12345;
    for (int trial = 0; trial < 3000; trial++) {
        /* a word of 1-40 letters from a small alphabet, so that merges chain */
        char w[48];
        int m = 1;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        m += (int)((s >> 33) % 40);
        const char *alpha = trial % 3 ? "etaoinshrd" : "ab";
        for (int i = 0; i < m; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            w[i] = alpha[(s >> 33) % strlen(alpha)];
        }
        int64_t sym[48];
        int n = m;
        for (int i = 0; i < m; i++) {
            Tensor *one = encode(t, w + i, 1);
            sym[i] = ((int64_t *)one->data)[0];
        }
        for (;;) {
            int64_t best = -1, merged = -1, id;
            for (int i = 0; i + 1 < n; i++) {
                int64_t r = naive_rank(t, sym[i], sym[i + 1], &id);
                if (r >= 0 && (best < 0 || r < best)) best = r, merged = id;
            }
            if (best < 0) break;
            int64_t l, r;
            tokenizer_merge(t, best, &l, &r);
            int k = 0;
            for (int i = 0; i < n; i++) {
                if (i + 1 < n && sym[i] == l && sym[i + 1] == r) sym[k++] = merged, i++;
                else sym[k++] = sym[i];
            }
            n = k;
        }
        Tensor *ids = encode(t, w, (size_t)m); /* letters only: one word */
        ck_assert_msg(torch_numel(ids) == n, "word %.*s: %lld ids, the naive BPE %d", m, w, (long long)torch_numel(ids), n);
        for (int i = 0; i < n; i++) ck_assert_int_eq(((int64_t *)ids->data)[i], sym[i]);
    }
    tokenizer_free(t);
}
END_TEST

/* A 256 KB word (no cache, the heap BPE), long white-space runs, many distinct words (the cache refills). */
START_TEST(test_long_words_and_cache_refill) {
    Tokenizer *t = gpt2();
    size_t n = 256 * 1024;
    char *w = malloc(n);
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        w[i] = "abcdefghijklmnopqrstuvwxyz"[(s >> 33) % 26];
    }
    Tensor *ids = encode(t, w, n);
    ck_assert_int_gt(torch_numel(ids), 1000);
    assert_round_trip(t, ids, w, n);
    memset(w, ' ', n);
    w[n - 1] = 'x';
    ids = encode(t, w, n);
    assert_round_trip(t, ids, w, n);
    /* 200,000 distinct words: more than the cache holds; the second pass must give the same ids */
    size_t len = 0, cap = 200000 * 9;
    char *text = malloc(cap);
    for (int k = 0; k < 200000; k++) { /* " " and k * 7919 in base-26 letters */
        text[len++] = ' ';
        for (int64_t v = (int64_t)k * 7919 + 1; v; v /= 26) text[len++] = (char)('a' + v % 26);
    }
    Tensor *a = encode(t, text, len);
    Tensor *b = encode(t, text, len);
    ck_assert_int_eq(torch_numel(a), torch_numel(b));
    ck_assert(memcmp(a->data, b->data, sizeof(int64_t) * (size_t)torch_numel(a)) == 0);
    assert_round_trip(t, a, text, len);
    free(text);
    free(w);
    tokenizer_free(t);
}
END_TEST

/* ---- the BPE trainer ------------------------------------------------------------------------------ */
static void check_trained(const char *name, const char *text, size_t len, int64_t n) {
    char err[512], rec[96];
    Tokenizer *t = tokenizer_train(text, len, n, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    snprintf(rec, sizeof rec, "%s_merges", name);
    Golden gm = golden(GOLDEN, rec);
    ck_assert_msg(tokenizer_n_merges(t) * 2 == gm.n, "%s: %lld merges, the reference %d", name,
                  (long long)tokenizer_n_merges(t), gm.n / 2);
    for (int64_t r = 0; r < tokenizer_n_merges(t); r++) {
        int64_t a, b;
        tokenizer_merge(t, r, &a, &b);
        ck_assert_msg(a == (int64_t)gm.v[2 * r] && b == (int64_t)gm.v[2 * r + 1],
                      "%s: merge %lld is (%lld, %lld), the reference's (%.0f, %.0f)", name, (long long)r, (long long)a,
                      (long long)b, gm.v[2 * r], gm.v[2 * r + 1]);
    }
    snprintf(rec, sizeof rec, "%s_nvocab", name);
    ck_assert_int_eq(tokenizer_n_vocab(t), (int64_t)golden(GOLDEN, rec).v[0]);
    ck_assert_int_eq(tokenizer_eot_id(t), tokenizer_n_vocab(t) - 1);
    char *corpus = read_text(data_path("tokenizer_corpus.txt"));
    snprintf(rec, sizeof rec, "%s_corpus_ids", name);
    assert_ids(encode(t, corpus, strlen(corpus)), rec);
    /* saved in GPT-2's format and loaded back: the same tokenizer */
    char *dir = temp_dir();
    ck_assert_msg(tokenizer_save(t, dir, err, sizeof err), "%s", err);
    Tokenizer *back = tokenizer_load(dir, err, sizeof err);
    ck_assert_msg(back != NULL, "%s", err);
    ck_assert_int_eq(tokenizer_n_vocab(back), tokenizer_n_vocab(t));
    assert_ids(encode(back, corpus, strlen(corpus)), rec);
    tokenizer_free(back);
    remove_dir(dir);
    free(corpus);
    tokenizer_free(t);
}

START_TEST(test_bpe_trainer) {
    char *verdict = read_text(shared_path("data/the-verdict.txt"));
    check_trained("train_verdict_300", verdict, strlen(verdict), 300);
    free(verdict);
    char *corpus = read_text(data_path("tokenizer_corpus.txt"));
    check_trained("train_corpus_200", corpus, strlen(corpus), 200);
    free(corpus);
    const char *tiny = "aaaa abab abab aaaa<|endoftext|>baba aaab";
    check_trained("train_tiny_50", tiny, strlen(tiny), 50); /* runs out of pairs early */
    /* the same text, the same merges (deterministic); 0 merges: bytes and <|endoftext|> */
    char err[256];
    Tokenizer *z = tokenizer_train("hello", 5, 0, err, sizeof err);
    ck_assert_int_eq(tokenizer_n_vocab(z), 257);
    ck_assert_int_eq(tokenizer_n_merges(z), 0);
    tokenizer_free(z);
    ck_assert(tokenizer_train("\xff", 1, 3, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "not UTF-8"), "%s", err);
    ck_assert(tokenizer_train("ab", 2, -1, err, sizeof err) == NULL);
}
END_TEST

/* ---- hostile files ---------------------------------------------------------------------------------
 * A small vocabulary in GPT-2's format: the 256 bytes, "ab", "abc" and the special token. */
static char *small_encoder(const char *extra) {
    size_t cap = 8192, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "{");
    for (int i = 0; i < 256; i++) {
        int b = i; /* ids in byte order here: any order is allowed */
        unsigned cp = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? (unsigned)b : 0;
        if (!cp) cp = b <= 0x20 ? 0x100u + (unsigned)b : b <= 0xA0 ? 0x121u + (unsigned)(b - 0x7F) : 0x143u;
        if (cp == '"' || cp == '\\') n += (size_t)snprintf(s + n, cap - n, "\"\\%c\": %d, ", (char)cp, i);
        else n += (size_t)snprintf(s + n, cap - n, "\"\\u%04x\": %d, ", cp, i);
    }
    n += (size_t)snprintf(s + n, cap - n, "\"ab\": 256, \"abc\": 257, \"<|endoftext|>\": 258%s}", extra);
    return s;
}

static void expect_refused(const char *enc, const char *merges, const char *needle) {
    char err[512];
    Tokenizer *t = tokenizer_load_memory(enc, strlen(enc), merges, strlen(merges), "encoder.json", "vocab.bpe", err, sizeof err);
    ck_assert_msg(t == NULL, "accepted, expected \"%s\"", needle);
    ck_assert_msg(strstr(err, needle) != NULL, "\"%s\" does not say \"%s\"", err, needle);
}

START_TEST(test_hostile_vocabularies) {
    char *good = small_encoder("");
    const char *merges = "#version: 0.2\na b\nab c\n";
    char err[512];
    Tokenizer *t = tokenizer_load_memory(good, strlen(good), merges, strlen(merges), "e", "m", err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    Tensor *ids = encode(t, "abc ab", 6);
    ck_assert_int_eq(torch_numel(ids), 3); /* abc, " " (no merge), ab */
    ck_assert_int_eq(((int64_t *)ids->data)[0], 257);
    tokenizer_free(t);

    /* encoder.json */
    expect_refused("", merges, "encoder.json:1:1: the file is empty");
    expect_refused("[1, 2]", merges, "encoder.json:1:1: expected a JSON object");
    expect_refused("{\"a\": 0", merges, "the file ends inside the object");
    expect_refused("{\"a\": 0,\n \"b\" 1}", merges, "encoder.json:2:6: expected ':'");
    expect_refused("{\"a\": -1}", merges, "expected the token's id");
    expect_refused("{\"a\": 1.5}", merges, "not an integer");
    expect_refused("{\"a\": 99999999999}", merges, "too large");
    expect_refused("{\"a\": 0} x", merges, "text after the object");
    expect_refused("{\"a\\q\": 0}", merges, "unknown escape");
    expect_refused("{\"\\ud800\": 0}", merges, "without its low half");
    expect_refused("{\"a\n\": 0}", merges, "a control character");
    expect_refused("{\"\xe4\xb8\xad\": 0}", merges, "U+4E2D is not one of the 256 characters");
    expect_refused("{\"\xff\": 0}", merges, "encoder.json:1:3: not UTF-8");
    expect_refused("{}", merges, "no tokens");
    expect_refused("{\"\": 0}", merges, "encoder.json:1:2: the token is empty");
    char *e = small_encoder(", \"ab\": 259"); /* a duplicate key */
    expect_refused(e, merges, "the token is given twice (first at id 256)");
    free(e);
    e = small_encoder(", \"zz\": 258"); /* a duplicate id */
    expect_refused(e, merges, "id 258 is given twice");
    free(e);
    e = small_encoder(", \"zz\": 9999"); /* out of range */
    expect_refused(e, merges, "id 9999 is out of range: the file has 260 tokens");
    free(e);
    expect_refused("{\"a\": 0, \"b\": 1}", merges, "byte 0x00 (spelled U+0100) has no token");

    /* vocab.bpe */
    expect_refused(good, "#version: 0.2\na b c\n", "vocab.bpe:2: expected two tokens separated by one space");
    expect_refused(good, "#version: 0.2\nab\n", "vocab.bpe:2: expected two tokens");
    expect_refused(good, "#version: 0.2\na  b\n", "expected two tokens");
    expect_refused(good, "#version: 0.2\na b\nb c\n", "vocab.bpe:3: \"b\" + \"c\" is not a token of encoder.json");
    expect_refused(good, "#version: 0.2\na b\nxy c\n", "vocab.bpe:3: \"xy\" is not a token of encoder.json");
    expect_refused(good, "#version: 0.2\na b\na b\n", "vocab.bpe:3: the merge \"a b\" is given twice (first as merge 0)");
    expect_refused(good, "#version: 0.2\n\xe4\xb8\xad b\n", "has a character that spells no byte");
    expect_refused(good, "#version: 0.2\na \xff\n", "vocab.bpe:2:3: not UTF-8");
    /* CR LF, a missing last newline, blank lines and no header are fine */
    t = tokenizer_load_memory(good, strlen(good), "#version: 0.2\r\na b\r\n\r\nab c", 26, "e", "m", err, sizeof err);
    ck_assert_msg(t != NULL && tokenizer_n_merges(t) == 2, "%s", err);
    tokenizer_free(t);
    /* a 10 MB line: refused with its start shown, quickly */
    size_t big = 10 * 1024 * 1024;
    char *line = malloc(big + 32);
    ck_assert(line != NULL);
    memcpy(line, "#version: 0.2\n", 14);
    memset(line + 14, 'a', big);
    strcpy(line + 14 + big, " b\n");
    expect_refused(good, line, "vocab.bpe:2: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\" is not a token");
    /* and a 10 MB token in encoder.json */
    memcpy(line, "{\"", 2);
    memset(line + 2, 'a', big);
    strcpy(line + 2 + big - 16, "\": 0}");
    expect_refused(line, merges, "byte 0x00 (spelled U+0100) has no token");
    free(line);
    /* every truncation of a good pair of files is refused or loads; never a crash */
    for (size_t cut = 0; cut < strlen(good); cut += 7) {
        t = tokenizer_load_memory(good, cut, merges, strlen(merges), "e", "m", err, sizeof err);
        ck_assert(t == NULL);
    }
    for (size_t cut = 0; cut <= strlen(merges); cut++) {
        t = tokenizer_load_memory(good, strlen(good), merges, cut, "e", "m", err, sizeof err);
        tokenizer_free(t);
    }
    free(good);
}
END_TEST

/* ---- the book's loaders ----------------------------------------------------------------------------- */
static void assert_windows(const DataLoader *l, Tensor *x, Tensor *y, const Golden *g, int *at, const char *what) {
    const GPTDatasetV1 *ds = l->dataset;
    for (int64_t r = 0; r < x->shape[0]; r++) {
        ck_assert_msg(*at < g->n, "%s: more rows than PyTorch's loader gave", what);
        int64_t w = (int64_t)g->v[(*at)++];
        const int64_t *xr = (int64_t *)x->data + r * x->shape[1], *yr = (int64_t *)y->data + r * y->shape[1];
        ck_assert_msg(memcmp(xr, ds->ids + w * ds->stride, sizeof(int64_t) * (size_t)ds->max_length) == 0,
                      "%s: row %d is not window %lld", what, *at - 1, (long long)w);
        ck_assert(memcmp(yr, ds->ids + w * ds->stride + 1, sizeof(int64_t) * (size_t)ds->max_length) == 0);
    }
}

/* calc_loss_loader's loop over the first n batches, then break */
static void first_batches(const DataLoader *l, int n, const char *rec) {
    Golden g = golden(GOLDEN, rec);
    int at = 0, i = 0;
    Tensor *x, *y;
    DataLoaderIter it = DataLoader_iter(l);
    while (DataLoaderIter_next(&it, &x, &y)) {
        if (i++ >= n) break;
        assert_windows(l, x, y, &g, &at, rec);
    }
    DataLoaderIter_free(&it);
    ck_assert_int_eq(at, g.n);
}

START_TEST(test_chapter5_loaders) {
    Tokenizer *t = gpt2();
    char *text = read_text(shared_path("data/the-verdict.txt"));
    size_t chars = 0, n = strlen(text);
    for (size_t i = 0; i < n; i++) chars += ((unsigned char)text[i] & 0xC0) != 0x80;
    int64_t split_chars = (int64_t)(0.90 * (double)chars); /* int(train_ratio * len(text)) */
    size_t split = 0; /* text[:split] is by characters: the byte where character split_chars starts */
    for (int64_t c = 0; split < n && c < split_chars; c++)
        for (split++; split < n && ((unsigned char)text[split] & 0xC0) == 0x80;) split++;
    char err[256];
    torch_manual_seed(123);
    DataLoader train = create_dataloader_v1(text, split, t, 2, 256, 256, true, true, 0, err, sizeof err);
    DataLoader val = create_dataloader_v1(text + split, n - split, t, 2, 256, 256, false, false, 0, err, sizeof err);
    ck_assert_msg(train.dataset && val.dataset, "%s", err);
    Golden sizes = golden(GOLDEN, "loader_sizes");
    ck_assert_int_eq(split_chars, (int64_t)sizes.v[0]);
    ck_assert_int_eq(GPTDatasetV1_len(train.dataset), (int64_t)sizes.v[1]);
    ck_assert_int_eq(GPTDatasetV1_len(val.dataset), (int64_t)sizes.v[2]);
    ck_assert_int_eq(DataLoader_len(&train), (int64_t)sizes.v[3]);
    ck_assert_int_eq(DataLoader_len(&val), (int64_t)sizes.v[4]);
    for (int epoch = 0; epoch < 2; epoch++) {
        char rec[64];
        snprintf(rec, sizeof rec, "loader_e%d_train", epoch);
        Golden g = golden(GOLDEN, rec);
        int at = 0, step = 0;
        Tensor *x, *y;
        DataLoaderIter it = DataLoader_iter(&train);
        while (DataLoaderIter_next(&it, &x, &y)) {
            ck_assert_int_eq(x->shape[0], 2);
            ck_assert_int_eq(x->shape[1], 256);
            assert_windows(&train, x, y, &g, &at, rec);
            if (step % 3 == 0) { /* evaluate_model inside the loop, as train_model_simple does */
                char r1[64], r2[64];
                snprintf(r1, sizeof r1, "loader_e%d_s%d_eval_train", epoch, step);
                snprintf(r2, sizeof r2, "loader_e%d_s%d_eval_val", epoch, step);
                first_batches(&train, 2, r1);
                first_batches(&val, 2, r2);
            }
            step++;
        }
        ck_assert_int_eq(at, g.n);
        snprintf(rec, sizeof rec, "loader_e%d_val", epoch);
        g = golden(GOLDEN, rec);
        at = 0;
        it = DataLoader_iter(&val);
        while (DataLoaderIter_next(&it, &x, &y)) assert_windows(&val, x, y, &g, &at, rec);
        ck_assert_int_eq(at, g.n);
        snprintf(rec, sizeof rec, "loader_e%d_rand", epoch); /* the generator is where PyTorch's is */
        g = golden(GOLDEN, rec);
        Tensor *r = torch_rand(SHAPE(4));
        for (int k = 0; k < 4; k++) ck_assert_int_eq((int64_t)(((float *)r->data)[k] * 16777216.0f), (int64_t)g.v[k]);
    }
    GPTDatasetV1_free((GPTDatasetV1 *)train.dataset);
    GPTDatasetV1_free((GPTDatasetV1 *)val.dataset);
    free(text);
    tokenizer_free(t);
}
END_TEST

/* Windows at the edges of range(0, len(ids) - max_length, stride); a text shorter than one window. */
START_TEST(test_dataset_edges) {
    int64_t ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    char err[256];
    struct { int64_t n, max_length, stride, windows; } cases[] = {
        {10, 4, 1, 6}, {10, 4, 4, 2}, {10, 4, 5, 2}, {10, 4, 6, 1}, {10, 9, 1, 1}, {10, 10, 1, 0}, {10, 11, 2, 0}, {0, 1, 1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        GPTDatasetV1 *ds = GPTDatasetV1_from_ids(ids, cases[k].n, cases[k].max_length, cases[k].stride, err, sizeof err);
        ck_assert_msg(ds != NULL, "%s", err);
        ck_assert_msg(GPTDatasetV1_len(ds) == cases[k].windows, "case %zu: %lld windows", k, (long long)GPTDatasetV1_len(ds));
        if (ds->n) {
            Tensor *x, *y;
            GPTDatasetV1_getitem(ds, ds->n - 1, &x, &y);
            ck_assert_int_eq(((int64_t *)y->data)[cases[k].max_length - 1], (ds->n - 1) * cases[k].stride + cases[k].max_length);
        }
        DataLoader l = DataLoader_new(ds, 4, true, false);
        DataLoaderIter it = DataLoader_iter(&l);
        Tensor *x, *y;
        int64_t rows = 0;
        while (DataLoaderIter_next(&it, &x, &y)) rows += x->shape[0];
        ck_assert_int_eq(rows, cases[k].windows);
        ck_assert(!DataLoaderIter_next(&it, &x, &y)); /* exhausted stays exhausted */
        DataLoaderIter_free(&it);                      /* and may be freed again */
        GPTDatasetV1_free(ds);
    }
    ck_assert(GPTDatasetV1_from_ids(ids, 10, 0, 1, err, sizeof err) == NULL);
    ck_assert_msg(strstr(err, "max_length and stride must be at least 1"), "%s", err);
    GPTDatasetV1 *ds = GPTDatasetV1_from_ids(ids, 10, 4, 4, err, sizeof err);
    Tensor *x, *y;
    EXPECT_ERROR("list index out of range", GPTDatasetV1_getitem(ds, 2, &x, &y));
    EXPECT_ERROR("batch_size should be a positive integer value", DataLoader_new(ds, 0, false, false));
    GPTDatasetV1_free(ds);
}
END_TEST

/* torch.empty(..., dtype).random_(): each dtype's draws against PyTorch 1.13's for seed 123 */
START_TEST(test_random_) {
    torch_manual_seed(123);
    Tensor *t = torch_random_(torch_empty(SHAPE(3), AC_INT64));
    Golden g = golden(GOLDEN, "random_int64");
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(((int64_t *)t->data)[i], (int64_t)((uint64_t)g.v[2 * i] << 32 | (uint64_t)g.v[2 * i + 1]));
    t = torch_random_(torch_empty(SHAPE(3), AC_FLOAT32));
    g = golden(GOLDEN, "random_float32");
    for (int i = 0; i < 3; i++) ck_assert(((float *)t->data)[i] == (float)g.v[i]);
    t = torch_random_(torch_empty(SHAPE(2), AC_FLOAT64));
    g = golden(GOLDEN, "random_float64");
    for (int i = 0; i < 2; i++) ck_assert(((double *)t->data)[i] == g.v[i]);
}
END_TEST

/* ---- ./build/gpt tokenize ------------------------------------------------------------------------------ */
START_TEST(test_gpt_tokenize_command) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s/gpt tokenize --tokenizer %s %s", build_dir(), shared_path("data/gpt2"),
             data_path("tokenizer_corpus.txt"));
    ck_assert_int_eq(run_command(cmd, &out), 0);
    Golden g = golden(GOLDEN, "corpus_ids");
    char *p = out;
    for (int i = 0; i < g.n; i++) {
        char *end;
        long long v = strtoll(p, &end, 10);
        ck_assert_msg(end != p && v == (long long)g.v[i], "id %d", i);
        ck_assert(*end == (i + 1 < g.n ? ' ' : '\n')); /* single spaces, one line */
        p = end + 1;
    }
    ck_assert(*p == 0);
    free(out);
    /* ids back to text through a pipe, byte for byte */
    char *dir = temp_dir();
    snprintf(cmd, sizeof cmd, "%s/gpt tokenize --tokenizer %s < %s | %s/gpt tokenize --decode --tokenizer %s > %s/back.txt && cmp %s %s/back.txt",
             build_dir(), shared_path("data/gpt2"), data_path("tokenizer_corpus.txt"), build_dir(), shared_path("data/gpt2"), dir,
             data_path("tokenizer_corpus.txt"), dir);
    ck_assert_int_eq(run_command(cmd, NULL), 0);
    /* a trained tokenizer, saved, then loaded by the same command */
    snprintf(cmd, sizeof cmd, "%s/gpt tokenize --tokenizer train:300 --data %s --save-tokenizer %s %s > %s/a.txt && "
             "%s/gpt tokenize --tokenizer %s %s > %s/b.txt && cmp %s/a.txt %s/b.txt",
             build_dir(), shared_path("data/the-verdict.txt"), dir, data_path("tokenizer_corpus.txt"), dir, build_dir(), dir,
             data_path("tokenizer_corpus.txt"), dir, dir, dir);
    ck_assert_int_eq(run_command(cmd, NULL), 0);
    remove_dir(dir);
    /* mistakes: a message on stderr, a non-zero exit, never a crash */
    struct { const char *in, *args; bool dir; int status; const char *needle; } bad[] = {
        {"1 2 12x", "tokenize --decode", true, 1, "'12x' at byte 4 is not a token id"},
        {"99999", "tokenize --decode", true, 1, "id 99999 (position 0) is out of range"},
        {"a<|endoftext|>", "tokenize --special raise", true, 1, "disallowed special token"},
        {"caf\\303", "tokenize", true, 1, "standard input: encode: the text is not UTF-8: byte 3 is 0xC3"},
        {"", "tokenize /nonexistent/file", true, 1, "cannot open /nonexistent/file"},
        {"", "tokenize --tokenizer /nonexistent", false, 1, "/nonexistent has no encoder.json"},
        {"", "tokenize --tokenizer train:x", false, 1, "train:N needs a number of merges"},
        {"", "tokenize --tokenizer", false, 2, "--tokenizer needs a value"},
        {"", "tokenize --frobnicate", true, 2, "unknown flag --frobnicate (gpt --help lists the flags)"},
        {"", "tokenize --special maybe", true, 2, "--special takes allow, text or raise"},
        {"", "", true, 2, "give a command"},
        {"", "detokenize", true, 2, "unknown command 'detokenize'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(cmd, sizeof cmd, "printf '%s' | %s/gpt %s%s%s 2>&1", bad[k].in, build_dir(), bad[k].args,
                 bad[k].dir ? " --tokenizer " : "", bad[k].dir ? shared_path("data/gpt2") : "");
        int st = run_command(cmd, &out);
        ck_assert_msg(st == bad[k].status, "gpt %s: status %d", bad[k].args, st);
        ck_assert_msg(strstr(out, bad[k].needle), "gpt %s said \"%s\"", bad[k].args, out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s/gpt --help", build_dir());
    ck_assert_int_eq(run_command(cmd, &out), 0);
    ck_assert(strstr(out, "usage: gpt COMMAND") && strstr(out, "tokenize"));
    free(out);
    snprintf(cmd, sizeof cmd, "echo hi | %s/gpt tokenize --tokenizer %s > /dev/full 2>/dev/null", build_dir(), shared_path("data/gpt2"));
    ck_assert_int_ne(run_command(cmd, NULL), 0); /* output that cannot be written is an error */
}
END_TEST

Suite *suite_tokenizer(void) {
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase("tokenizer");
    tcase_add_test(tc, test_verdict_and_corpus);
    tcase_add_test(tc, test_decode_replaces_broken_utf8);
    tcase_add_test(tc, test_special_token_modes);
    tcase_add_test(tc, test_text_not_utf8);
    tcase_add_test(tc, test_pretokenizer);
    tcase_add_test(tc, test_hugging_face_names);
    tcase_add_test(tc, test_bpe_against_naive);
    tcase_add_test(tc, test_long_words_and_cache_refill);
    tcase_add_test(tc, test_bpe_trainer);
    tcase_add_test(tc, test_hostile_vocabularies);
    tcase_add_test(tc, test_chapter5_loaders);
    tcase_add_test(tc, test_dataset_edges);
    tcase_add_test(tc, test_random_);
    tcase_add_test(tc, test_gpt_tokenize_command);
    suite_add_tcase(s, tc);
    return s;
}
