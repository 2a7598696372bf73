/* Sebastian Raschka, "Understanding and Coding Self-Attention, Multi-Head
 * Attention, Causal-Attention, and Cross-Attention in LLMs" (2024), every code
 * block in its order, in C. Each statement carries the Python line it
 * reproduces; ./build/article prints exactly what the article's code prints
 * (../shared/pytorch/article_expected.txt). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "tensor.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    /* ---- Embedding an input sentence ------------------------------------------------------ */
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

    /* ---- Defining the weight matrices ------------------------------------------------------ */
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    int64_t d = torch_size(embedded_sentence, 1);                   // d = embedded_sentence.shape[1]
    int64_t d_q = 2, d_k = 2, d_v = 4;                              // d_q, d_k, d_v = 2, 2, 4
    Tensor *W_query = nn_Parameter(torch_rand(SHAPE(d, d_q)));      // W_query = torch.nn.Parameter(torch.rand(d, d_q))
    Tensor *W_key = nn_Parameter(torch_rand(SHAPE(d, d_k)));        // W_key = torch.nn.Parameter(torch.rand(d, d_k))
    Tensor *W_value = nn_Parameter(torch_rand(SHAPE(d, d_v)));      // W_value = torch.nn.Parameter(torch.rand(d, d_v))

    /* ---- Computing the unnormalized attention weights ---------------------------------------- */
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

    /* ---- Computing the attention weights ------------------------------------------------------ */
    Tensor *attention_weights_2 =                                   // attention_weights_2 =
        torch_softmax(torch_div_scalar(omega_2, pow((double)d_k, 0.5)), 0); // F.softmax(omega_2 / d_k**0.5, dim=0)
    torch_print(attention_weights_2);                               // print(attention_weights_2)
    Tensor *context_vector_2 = torch_matmul(attention_weights_2, values); // context_vector_2 = attention_weights_2 @ values
    torch_print_shape(context_vector_2);                            // print(context_vector_2.shape)
    torch_print(context_vector_2);                                  // print(context_vector_2)

    /* ---- Self-attention as a class ------------------------------------------------------------ */
    torch_manual_seed(123);                                         // torch.manual_seed(123)
    int64_t d_in = 3, d_out_kq = 2, d_out_v = 4;                    // d_in, d_out_kq, d_out_v = 3, 2, 4
    nn_SelfAttention *sa = nn_SelfAttention_new(d_in, d_out_kq, d_out_v); // sa = SelfAttention(d_in, d_out_kq, d_out_v)
    torch_print(nn_SelfAttention_forward(sa, embedded_sentence));   // print(sa(embedded_sentence))

    /* ---- Multi-head attention --------------------------------------------------------------- */
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

    /* ---- Causal self-attention ------------------------------------------------------------------ */
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
    Tensor *attn_weights =                                          // attn_weights =
        torch_softmax(torch_div_scalar(attn_scores, pow((double)d_out_kq, 0.5)), 1); // torch.softmax(attn_scores / d_out_kq**0.5, dim=1)
    torch_print(attn_weights);                                      // print(attn_weights)
    int64_t block_size = torch_size(attn_scores, 0);                // block_size = attn_scores.shape[0]
    Tensor *mask_simple = torch_tril(torch_ones(SHAPE(block_size, block_size)), 0); // mask_simple = torch.tril(torch.ones(block_size, block_size))
    torch_print(mask_simple);                                       // print(mask_simple)
    Tensor *masked_simple = torch_mul(attn_weights, mask_simple);   // masked_simple = attn_weights*mask_simple
    torch_print(masked_simple);                                     // print(masked_simple)
    Tensor *row_sums = torch_sum_dim(masked_simple, SHAPE(1), true); // row_sums = masked_simple.sum(dim=1, keepdim=True)
    Tensor *masked_simple_norm = torch_div(masked_simple, row_sums); // masked_simple_norm = masked_simple / row_sums
    torch_print(masked_simple_norm);                                // print(masked_simple_norm)
    Tensor *mask = torch_triu(torch_ones(SHAPE(block_size, block_size)), 1); // mask = torch.triu(torch.ones(block_size, block_size), diagonal=1)
    Tensor *masked = torch_masked_fill(attn_scores, torch_to_bool(mask), -INFINITY); // masked = attn_scores.masked_fill(mask.bool(), -torch.inf)
    torch_print(masked);                                            // print(masked)
    attn_weights = torch_softmax(torch_div_scalar(masked, pow((double)d_out_kq, 0.5)), 1); // attn_weights = torch.softmax(masked / d_out_kq**0.5, dim=1)
    torch_print(attn_weights);                                      // print(attn_weights)

    /* ---- Cross-attention (the bonus section) ---------------------------------------------------- */
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

    /* Long-lived objects are freed by their owners; the arena in one call. */
    nn_free(&embed->module);
    nn_free(&sa->module);
    nn_free(&sa1->module);
    nn_free(&mha->module);
    nn_free(&crossattn->module);
    torch_free(W_query), torch_free(W_key), torch_free(W_value);
    torch_free(W_query2), torch_free(W_key2), torch_free(W_value2);
    ac_shutdown();
    return 0;
}
