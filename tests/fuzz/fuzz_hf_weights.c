/* model.safetensors of a tiny Qwen3 (config.json fixed below) against any bytes: llm_from_pretrained
 * loads it, or says why not (a header that lies about its length, offsets, dtypes or shapes). */
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "llm.h"

static const char config[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 4, \"max_position_embeddings\": 8, \"hidden_size\": 4, "
    "\"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"intermediate_size\": 4, \"head_dim\": 2, "
    "\"num_key_value_heads\": 1, \"rope_theta\": 10000, \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": true}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[64], weights[96];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ac_fuzz_hf_%d", (int)getpid());
        mkdir(dir, 0700);
        char cp[96];
        snprintf(cp, sizeof cp, "%s/config.json", dir);
        FILE *c = fopen(cp, "w");
        if (!c) return 0;
        fputs(config, c);
        fclose(c);
        snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    }
    FILE *f = fopen(weights, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    ac_mark m = ac_arena_mark();
    ac_set_error_handler(fuzz_on_error, NULL);
    if (setjmp(fuzz_jump) == 0) {
        char err[512];
        err[0] = 0;
        nn_LLMModel *model = llm_from_pretrained(dir, err, sizeof err);
        if (model) nn_LLMModel_free(model);
        else if (!err[0]) abort(); /* a refusal always says why */
    }
    ac_set_error_handler(NULL, NULL);
    ac_arena_release(m);
    return 0;
}
