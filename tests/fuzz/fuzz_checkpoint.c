/* The trainer's checkpoint loading (nn_ToyLM_load_checkpoint) against any bytes,
 * into a small model: it loads, or refuses and changes nothing. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "toy_lm.h"

/* The model and text the seed corpus was made with. */
static const char text[] = "attention is all you need, said the query to the key.\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static CharText ct;
    static nn_ToyLM *model;
    static optim_Optimizer *opt;
    if (!model) {
        char err[128];
        if (!chartext_init(&ct, text, sizeof text - 1, err, sizeof err)) abort();
        torch_manual_seed(123);
        model = nn_ToyLM_new(ct.vocab_size, 4, 4, 2);
        opt = optim_Adam(nn_named_parameters(&model->module), 1e-3, 0.9, 0.999, 1e-8, 0.0, false);
    }
    const char *path = fuzz_file(data, size);
    if (!path) return 0;
    ac_mark m = ac_arena_mark();
    nn_TensorList sd = nn_state_dict(&model->module);
    float before = ((float *)sd.tensors[0]->data)[0];
    torch_Generator gen = torch_default_generator;
    ac_set_error_handler(fuzz_on_error, NULL);
    if (setjmp(fuzz_jump) == 0) {
        char err[512];
        int64_t step = -1;
        if (nn_ToyLM_load_checkpoint(path, model, opt, &ct, &step, err, sizeof err)) {
            if (step < 0) abort();
        } else {
            /* refused: nothing changed */
            if (!err[0] || ((float *)sd.tensors[0]->data)[0] != before ||
                memcmp(&gen, &torch_default_generator, sizeof gen) != 0)
                abort();
        }
    }
    ac_set_error_handler(NULL, NULL);
    ac_arena_release(m);
    return 0;
}
