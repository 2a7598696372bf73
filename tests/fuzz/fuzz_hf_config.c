/* config.json of a Qwen3 or Llama 3 model (llm_config_load) against any bytes: it reads, or says why
 * not; what it reads can be built (every size positive, heads divisible, head_dim even). */
#include <stdlib.h>

#include "fuzz_common.h"
#include "llm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    if (!path) return 0;
    ac_set_error_handler(fuzz_on_error, NULL);
    if (setjmp(fuzz_jump) == 0) {
        nn_LLMConfig cfg;
        char err[512];
        err[0] = 0;
        if (llm_config_load(path, &cfg, err, sizeof err)) {
            int64_t hd = cfg.head_dim ? cfg.head_dim : cfg.emb_dim / cfg.n_heads;
            if (cfg.vocab_size < 1 || cfg.emb_dim < 1 || cfg.n_heads < 1 || cfg.n_kv_groups < 1 ||
                cfg.n_heads % cfg.n_kv_groups || hd % 2 || hd < 2 || cfg.n_eos > 8)
                abort(); /* accepted what cannot be built */
        } else if (!err[0]) {
            abort(); /* a refusal always says why */
        }
    }
    ac_set_error_handler(NULL, NULL);
    return 0;
}
