/* Sebastian Raschka, "Understanding and Coding Self-Attention, Multi-Head
 * Attention, Causal-Attention, and Cross-Attention in LLMs" (2024), every code
 * block in its order, in C. Each statement carries the Python line it
 * reproduces; ./build/article prints exactly what the article's code prints
 * (../shared/pytorch/article_expected.txt).
 *
 *   ./build/article                 the article's printouts
 *   ./build/article --svg DIR       also its attention weights as heatmaps and the SelfAttention graph
 *   ./build/article --html FILE     the reader's page: the Python beside this C, outputs and pictures
 *
 * The page is built from this file's own text (embedded by make), so it cannot
 * drift from the code: section() starts a block, picture_*() lines draw, and
 * the trailing comment of every other line is the Python it reproduces. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "tensor.h"

/* Pictures and the page (below main); in a plain run they do nothing. */
static void section(const char *title, const char *classes);
static void picture_heatmap(const char *file, const char *caption, Tensor *w, char *const *queries,
                            char *const *keys);
static void picture_graph(const char *file, const char *caption, Tensor *y, nn_Module *m);
static void picture_heads(const char *file, const char *caption, nn_MultiHeadAttentionWrapper *mha,
                          char *const *words);

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void article(void) {
    section("Embedding an input sentence", NULL);
    const char *sentence = "Life is short, eat dessert first";      // sentence = 'Life is short, eat dessert first'
    char words_buf[64], *words[8] = {0};                                // sentence.replace(',', '').split()
    int n_words = 0;
    snprintf(words_buf, sizeof words_buf, "%s", sentence);
    for (char *w = strtok(words_buf, " ,"); w; w = strtok(NULL, " ,")) words[n_words++] = w;
    char *sorted_words[8];                                          // dc = {s: i for i, s in enumerate(sorted(...))}
    memcpy(sorted_words, words, sizeof words);
    qsort(sorted_words, (size_t)n_words, sizeof(char *), cmp_str);
    printf("{");                                                    // print(dc)
    for (int i = 0; i < n_words; i++) printf("%s'%s': %d", i ? ", " : "", sorted_words[i], i);
    printf("}\n");
    int64_t ids[8];                                                 // [dc[s] for s in sentence.replace(',', '').split()]
    for (int i = 0; i < n_words; i++)
        for (int j = 0; j < n_words; j++)
            if (strcmp(words[i], sorted_words[j]) == 0) ids[i] = j;
    Tensor *sentence_int = torch_tensor_long(ids, SHAPE(n_words));  // sentence_int = torch.tensor(...)
    torch_print(sentence_int);                                      // print(sentence_int)
    int64_t vocab_size = 50000;                                     // vocab_size = 50_000
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    nn_Embedding *embed = nn_Embedding_new(vocab_size, 3);          // embed = torch.nn.Embedding(vocab_size, 3)
    Tensor *embedded_sentence =                                     // embedded_sentence =
        torch_detach(nn_Embedding_forward(embed, sentence_int));    //     embed(sentence_int).detach()
    torch_print(embedded_sentence);                                 // print(embedded_sentence)
    torch_print_shape(embedded_sentence);                           // print(embedded_sentence.shape)

    section("Defining the weight matrices", NULL);
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    int64_t d = torch_size(embedded_sentence, 1);                   // d = embedded_sentence.shape[1]
    int64_t d_q = 2, d_k = 2, d_v = 4;                              // d_q, d_k, d_v = 2, 2, 4
    Tensor *W_query = nn_Parameter(torch_rand(SHAPE(d, d_q)));      // W_query = torch.nn.Parameter(torch.rand(d, d_q))
    Tensor *W_key = nn_Parameter(torch_rand(SHAPE(d, d_k)));        // W_key = torch.nn.Parameter(torch.rand(d, d_k))
    Tensor *W_value = nn_Parameter(torch_rand(SHAPE(d, d_v)));      // W_value = torch.nn.Parameter(torch.rand(d, d_v))

    section("Computing the unnormalized attention weights", NULL);
    Tensor *x_2 = torch_select(embedded_sentence, 0, 1);            // x_2 = embedded_sentence[1]
    Tensor *query_2 = torch_matmul(x_2, W_query);                   // query_2 = x_2 @ W_query
    Tensor *key_2 = torch_matmul(x_2, W_key);                       // key_2 = x_2 @ W_key
    Tensor *value_2 = torch_matmul(x_2, W_value);                   // value_2 = x_2 @ W_value
    torch_print_shape(query_2);                                     // print(query_2.shape)
    torch_print_shape(key_2);                                       // print(key_2.shape)
    torch_print_shape(value_2);                                     // print(value_2.shape)
    Tensor *keys = torch_matmul(embedded_sentence, W_key);          // keys = embedded_sentence @ W_key
    Tensor *values = torch_matmul(embedded_sentence, W_value);      // values = embedded_sentence @ W_value
    printf("keys.shape: %s\n", torch_size_str(keys));               // print("keys.shape:", keys.shape)
    printf("values.shape: %s\n", torch_size_str(values));           // print("values.shape:", values.shape)
    Tensor *omega_24 = torch_dot(query_2, torch_select(keys, 0, 4)); // omega_24 = query_2.dot(keys[4])
    torch_print(omega_24);                                          // print(omega_24)
    Tensor *omega_2 = torch_matmul(query_2, torch_T(keys));         // omega_2 = query_2 @ keys.T
    torch_print(omega_2);                                           // print(omega_2)
    picture_heatmap("omega_2", "omega_2: unnormalized scores of the query \"is\"", omega_2, (char *[]){"is"}, words);


    section("Computing the attention weights", NULL);
    Tensor *attention_weights_2 =                                   // attention_weights_2 =
        torch_softmax(torch_div_scalar(omega_2, pow((double)d_k, 0.5)), 0); // F.softmax(omega_2 / d_k**0.5, dim=0)
    torch_print(attention_weights_2);                               // print(attention_weights_2)
    picture_heatmap("attention_weights_2", "attention_weights_2: softmax(omega_2 / sqrt(d_k))", attention_weights_2, (char *[]){"is"}, words);
    Tensor *context_vector_2 = torch_matmul(attention_weights_2, values); // context_vector_2 = attention_weights_2 @ values
    torch_print_shape(context_vector_2);                            // print(context_vector_2.shape)
    torch_print(context_vector_2);                                  // print(context_vector_2)

    section("Self-attention as a class", "nn_SelfAttention_new qkv_params nn_SelfAttention_forward");
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    int64_t d_in = 3, d_out_kq = 2, d_out_v = 4;                    // d_in, d_out_kq, d_out_v = 3, 2, 4
    nn_SelfAttention *sa = nn_SelfAttention_new(d_in, d_out_kq, d_out_v); // sa = SelfAttention(d_in, d_out_kq, d_out_v)
    torch_print(nn_SelfAttention_forward(sa, embedded_sentence));   // print(sa(embedded_sentence))
    picture_heatmap("selfattention_weights", "sa: attention weights (query rows, key columns)", sa->last_attn_weights, words, words);
    picture_graph("selfattention_graph", "the graph backward() walks for sa(embedded_sentence)", nn_SelfAttention_forward(sa, embedded_sentence), &sa->module);

    section("Multi-head attention", "nn_MultiHeadAttentionWrapper_new nn_MultiHeadAttentionWrapper_forward");
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    d_in = 3, d_out_kq = 2, d_out_v = 1;                            // d_in, d_out_kq, d_out_v = 3, 2, 1
    nn_SelfAttention *sa1 = nn_SelfAttention_new(d_in, d_out_kq, d_out_v); // sa = SelfAttention(d_in, d_out_kq, d_out_v)
    torch_print(nn_SelfAttention_forward(sa1, embedded_sentence));  // print(sa(embedded_sentence))
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    nn_MultiHeadAttentionWrapper *mha =                             // mha = MultiHeadAttentionWrapper(
        nn_MultiHeadAttentionWrapper_new(d_in, d_out_kq, d_out_v, 4); //     d_in, d_out_kq, d_out_v, num_heads=4)
    Tensor *context_vecs = nn_MultiHeadAttentionWrapper_forward(mha, embedded_sentence); // context_vecs = mha(embedded_sentence)
    torch_print(context_vecs);                                      // print(context_vecs)
    printf("context_vecs.shape: %s\n", torch_size_str(context_vecs)); // print("context_vecs.shape:", context_vecs.shape)
    picture_heads("mha_heads", "mha: the attention weights of each of the 4 heads", mha, words);

    section("Causal self-attention", NULL);
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    d_in = 3, d_out_kq = 2, d_out_v = 4;                            // d_in, d_out_kq, d_out_v = 3, 2, 4
    Tensor *W_query2 = nn_Parameter(torch_rand(SHAPE(d_in, d_out_kq))); // W_query = nn.Parameter(torch.rand(d_in, d_out_kq))
    Tensor *W_key2 = nn_Parameter(torch_rand(SHAPE(d_in, d_out_kq)));   // W_key = nn.Parameter(torch.rand(d_in, d_out_kq))
    Tensor *W_value2 = nn_Parameter(torch_rand(SHAPE(d_in, d_out_v)));  // W_value = nn.Parameter(torch.rand(d_in, d_out_v))
    Tensor *x = embedded_sentence;                                  // x = embedded_sentence
    keys = torch_matmul(x, W_key2);                                 // keys = x @ W_key
    Tensor *queries = torch_matmul(x, W_query2);                    // queries = x @ W_query
    values = torch_matmul(x, W_value2);                             // values = x @ W_value
    Tensor *attn_scores = torch_matmul(queries, torch_T(keys));     // attn_scores = queries @ keys.T
    torch_print(attn_scores);                                       // print(attn_scores)
    torch_print_shape(attn_scores);                                 // print(attn_scores.shape)
    picture_heatmap("causal_scores", "attn_scores (unnormalized)", attn_scores, words, words);
    Tensor *attn_weights =                                          // attn_weights =
        torch_softmax(torch_div_scalar(attn_scores, pow((double)d_out_kq, 0.5)), 1); // torch.softmax(attn_scores / d_out_kq**0.5, dim=1)
    torch_print(attn_weights);                                      // print(attn_weights)
    picture_heatmap("causal_weights_before_mask", "attn_weights before masking", attn_weights, words, words);
    int64_t block_size = torch_size(attn_scores, 0);                // block_size = attn_scores.shape[0]
    Tensor *mask_simple = torch_tril(torch_ones(SHAPE(block_size, block_size)), 0); // mask_simple = torch.tril(torch.ones(block_size, block_size))
    torch_print(mask_simple);                                       // print(mask_simple)
    Tensor *masked_simple = torch_mul(attn_weights, mask_simple);   // masked_simple = attn_weights*mask_simple
    torch_print(masked_simple);                                     // print(masked_simple)
    Tensor *row_sums = torch_sum_dim(masked_simple, SHAPE(1), true); // row_sums = masked_simple.sum(dim=1, keepdim=True)
    Tensor *masked_simple_norm = torch_div(masked_simple, row_sums); // masked_simple_norm = masked_simple / row_sums
    torch_print(masked_simple_norm);                                // print(masked_simple_norm)
    picture_heatmap("masked_simple_norm", "masked_simple_norm: masked after the softmax, renormalized", masked_simple_norm, words, words);
    Tensor *mask = torch_triu(torch_ones(SHAPE(block_size, block_size)), 1); // mask = torch.triu(torch.ones(block_size, block_size), diagonal=1)
    Tensor *masked = torch_masked_fill(attn_scores, torch_to_bool(mask), -INFINITY); // masked = attn_scores.masked_fill(mask.bool(), -torch.inf)
    torch_print(masked);                                            // print(masked)
    picture_heatmap("causal_masked_scores", "masked: -inf above the diagonal", masked, words, words);
    attn_weights = torch_softmax(torch_div_scalar(masked, pow((double)d_out_kq, 0.5)), 1); // attn_weights = torch.softmax(masked / d_out_kq**0.5, dim=1)
    torch_print(attn_weights);                                      // print(attn_weights)
    picture_heatmap("causal_weights", "causal attn_weights: each word looks only back", attn_weights, words, words);

    section("Cross-attention (the bonus section)", "nn_CrossAttention_new nn_CrossAttention_forward");
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    d_in = 3, d_out_kq = 2, d_out_v = 4;                            // d_in, d_out_kq, d_out_v = 3, 2, 4
    nn_CrossAttention *crossattn = nn_CrossAttention_new(d_in, d_out_kq, d_out_v); // crossattn = CrossAttention(d_in, d_out_kq, d_out_v)
    Tensor *first_input = embedded_sentence;                        // first_input = embedded_sentence
    Tensor *second_input = torch_rand(SHAPE(8, d_in));              // second_input = torch.rand(8, d_in)
    printf("First input shape: %s\n", torch_size_str(first_input)); // print("First input shape:", first_input.shape)
    printf("Second input shape: %s\n", torch_size_str(second_input)); // print("Second input shape:", second_input.shape)
    Tensor *context_vectors =                                       // context_vectors =
        nn_CrossAttention_forward(crossattn, first_input, second_input); // crossattn(first_input, second_input)
    torch_print(context_vectors);                                   // print(context_vectors)
    printf("Output shape: %s\n", torch_size_str(context_vectors));  // print("Output shape:", context_vectors.shape)
    picture_heatmap("cross_attention_weights", "crossattn: queries from first_input, keys from the 8 rows of second_input", crossattn->last_attn_weights, words, NULL);

    section("Cleaning up (C only: Python's garbage collector does this)", NULL);
    nn_free(&embed->module);
    nn_free(&sa->module);
    nn_free(&sa1->module);
    nn_free(&mha->module);
    nn_free(&crossattn->module);
    ac_free(W_query), ac_free(W_key), ac_free(W_value);
    ac_free(W_query2), ac_free(W_key2), ac_free(W_value2);
}


/* ==== pictures and the reader's page ============================================================== */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "article_sources.h" /* article_c_source, attention_c_source: generated by make from the sources */
#include "viz.h"

#define MAX_SECTIONS 16
#define MAX_FIGURES 16
typedef struct {
    const char *title, *classes;
    long out_begin;                          /* offset of its first printed byte in the captured stdout */
    int n_fig;
    char *svg[MAX_FIGURES], *caption[MAX_FIGURES];
} Section;

static struct {
    const char *svg_dir; /* --svg DIR */
    bool html;           /* --html FILE: sections record their output and pictures */
    int n;
    Section s[MAX_SECTIONS];
} pic;

static void section(const char *title, const char *classes) {
    if (!pic.html) return;
    if (pic.n == MAX_SECTIONS) {
        fprintf(stderr, "article: more than %d sections\n", MAX_SECTIONS);
        exit(1);
    }
    fflush(stdout);
    pic.s[pic.n++] = (Section){.title = title, .classes = classes, .out_begin = (long)lseek(1, 0, SEEK_CUR)};
}

typedef struct { Tensor *t; const ac_heatmap_opts *o; nn_TensorList names; bool dot; } Draw;
static bool draw_heatmap(FILE *f, void *u) { return ac_heatmap_svg(f, ((Draw *)u)->t, ((Draw *)u)->o); }
static bool draw_graph(FILE *f, void *u) {
    Draw *d = u;
    return d->dot ? ac_graph_dot(f, d->t, d->names) : ac_graph_svg(f, d->t, d->names);
}

/* Draws into DIR/file.ext (--svg) and into the current section (--html). */
static void picture(const char *file, const char *ext, const char *caption, bool (*draw)(FILE *, void *), void *u) {
    if (pic.svg_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%s", pic.svg_dir, file, ext);
        if (!ac_write_file_atomic(path, draw, u)) {
            fprintf(stderr, "article: cannot write %s: %s\n", path, strerror(errno));
            exit(1);
        }
    }
    if (pic.html && pic.n > 0 && strcmp(ext, "svg") == 0) {
        Section *s = &pic.s[pic.n - 1];
        char *text = s->n_fig < MAX_FIGURES ? ac_draw_to_string(draw, u) : NULL;
        if (!text) {
            fprintf(stderr, "article: cannot draw %s\n", file);
            exit(1);
        }
        s->svg[s->n_fig] = text;
        s->caption[s->n_fig++] = strdup(caption);
    }
}

static void picture_heatmap(const char *file, const char *caption, Tensor *w, char *const *queries,
                            char *const *keys) {
    if (!pic.svg_dir && !pic.html) return;
    ac_heatmap_opts o = {.title = caption, .row_labels = (const char *const *)queries,
                         .col_labels = (const char *const *)keys, .show_values = -1};
    picture(file, "svg", caption, draw_heatmap, &(Draw){.t = w, .o = &o});
}

static void picture_heads(const char *file, const char *caption, nn_MultiHeadAttentionWrapper *mha,
                          char *const *words) {
    if (!pic.svg_dir && !pic.html) return;
    int n = nn_ModuleList_len(mha->heads);
    Tensor **w = ac_arena_alloc(sizeof(Tensor *) * (size_t)n);
    for (int h = 0; h < n; h++) w[h] = ((nn_SelfAttention *)nn_ModuleList_get(mha->heads, h))->last_attn_weights;
    picture_heatmap(file, caption, torch_stack(n, w, 0), words, words);
}

static void picture_graph(const char *file, const char *caption, Tensor *y, nn_Module *m) {
    if (!pic.svg_dir && !pic.html) return;
    Draw d = {.t = y, .names = nn_named_parameters(m)};
    picture(file, "svg", caption, draw_graph, &d);
    d.dot = true;
    picture(file, "dot", caption, draw_graph, &d);
}

/* ---- the page: this file's article() split at its section() lines ------------------------------------ */

/* The C of a function of nn/blocks/attention.c, its lines as rows; exits if it is not there. */
static void function_rows(const char *src, const char *name, ac_rows *r) {
    if (ac_rows_function(src, name, r)) return;
    fprintf(stderr, "article: %s not found in nn/blocks/attention.c\n", name);
    exit(1);
}

static void write_page(FILE *f, const char *out, size_t out_len) {
    ac_page_begin(f, "Self-attention, multi-head, causal and cross-attention: the article's Python beside C",
                  "<p>Every code block of Sebastian Raschka's article <a "
                  "href=\"https://magazine.sebastianraschka.com/p/understanding-and-coding-self-attention\"><i>Understanding "
                  "and Coding Self-Attention, Multi-Head Attention, Causal-Attention, and Cross-Attention in LLMs</i></a> "
                  "in its order: the Python on the left, <b>attention.c</b> on the right, row for row, and below them what "
                  "both print, byte for byte the same. The C column is <code>examples/article.c</code> itself (and "
                  "<code>nn/blocks/attention.c</code> for the classes), so it cannot drift from the code. Made by "
                  "<code>./build/article --html FILE</code>; no script, no network.</p>");
    const char *ids[MAX_SECTIONS], *titles[MAX_SECTIONS];
    char idbuf[MAX_SECTIONS][16];
    for (int i = 0; i < pic.n; i++) {
        snprintf(idbuf[i], sizeof idbuf[i], "s%d", i + 1);
        ids[i] = idbuf[i], titles[i] = pic.s[i].title;
    }
    ac_page_toc(f, pic.n, ids, titles);
    const char *body = strstr(article_c_source, "\nstatic void article(void) {\n");
    if (!body) {
        fprintf(stderr, "article: article() not found in its own source\n");
        exit(1);
    }
    const char *p = strstr(body, "section(");
    for (int i = 0; i < pic.n; i++) {
        Section *s = &pic.s[i];
        char title[160];
        snprintf(title, sizeof title, "%d. %s", i + 1, s->title);
        ac_page_section_begin(f, ids[i], title);
        ac_rows r = {0};
        p = ac_rows_collect(strchr(p, '\n') + 1, "section(", &r);
        ac_rows_dedent(&r);
        ac_page_code(f, NULL, "Python (the article)", "C (examples/article.c)", r.n, r.rows);
        ac_code_rows_free(r.n, r.rows);
        if (s->classes) { /* the classes the section defines, from nn/blocks/attention.c */
            char names[256];
            snprintf(names, sizeof names, "%s", s->classes);
            ac_rows cr = {0};
            for (char *nm = strtok(names, " "); nm; nm = strtok(NULL, " ")) function_rows(attention_c_source, nm, &cr);
            char cap[160];
            snprintf(cap, sizeof cap, "The class in nn/blocks/attention.c (%s)", s->classes);
            ac_page_code(f, cap, "Python (the article's class)", "C (nn/blocks/attention.c)", cr.n, cr.rows);
            ac_code_rows_free(cr.n, cr.rows);
        }
        long end = i + 1 < pic.n ? pic.s[i + 1].out_begin : (long)out_len;
        if (end > s->out_begin) ac_page_output(f, out + s->out_begin, (size_t)(end - s->out_begin));
        ac_page_figures(f, s->n_fig, (const char *const *)s->svg, (const char *const *)s->caption);
        for (int k = 0; k < s->n_fig; k++) free(s->svg[k]), free(s->caption[k]);
        ac_page_section_end(f);
        if (*p == '}') break;
    }
    ac_page_end(f, "<p>attention.c: same seed, same numbers. The outputs above come from running the C; "
                   "<code>../shared/pytorch/article_expected.txt</code> is PyTorch's, and a test checks they are identical.</p>");
}

static void usage(FILE *f) {
    fprintf(f, "usage: article [--svg DIR] [--html FILE]\n"
               "Runs every code block of the article in C and prints what the article's Python prints.\n"
               "  --svg DIR     also write the attention weights as heatmaps and the SelfAttention graph\n"
               "                (DIR/*.svg, and DIR/selfattention_graph.dot for Graphviz); DIR is created\n"
               "  --html FILE   write the reader's page: each code block's Python beside this C, its output\n"
               "                and its pictures, one self-contained HTML file (no script, no network)\n"
               "  --help        this text\n"
               "example: ./build/article --html article.html && chromium article.html\n");
}

/* An error (out of memory, say): a message and exit 1, never a core dump. */
static void article_error(ac_error_kind kind, const char *msg, void *user) {
    fflush(stdout);
    fprintf(stderr, "article: error: %s\n", msg);
    exit(1);
}

static int run_article(void *unused) {
    (void)unused;
    article();
    return 0;
}

int main(int argc, char **argv) {
    ac_set_error_handler(article_error, NULL);
    ac_set_exact(true); /* the article's numbers digit for digit: reference BLAS's sums (see tensor.h) */
    const char *html = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return ac_finish_output("article", 0);
        } else if (strcmp(argv[i], "--svg") == 0 && i + 1 < argc) {
            pic.svg_dir = argv[++i];
        } else if (strcmp(argv[i], "--html") == 0 && i + 1 < argc) {
            html = argv[++i];
        } else {
            fprintf(stderr, "article: %s: unknown flag or missing value\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (pic.svg_dir && mkdir(pic.svg_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "article: cannot create %s: %s\n", pic.svg_dir, strerror(errno));
        return 1;
    }
    if (!html) {
        article();
        ac_shutdown();
        return ac_finish_output("article", 0);
    }
    pic.html = true;
    int rc = ac_page_of_run("article", html, run_article, NULL, write_page); /* the run's output, section by section, on the page */
    if (rc) return rc;
    ac_shutdown();
    return ac_finish_output("article", 0);
}
