/* The safetensors reader against any bytes: it loads, or says why not. What it
 * loads is then consistent: every tensor readable and as large as its shape. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    if (!path) return 0;
    ac_mark m = ac_arena_mark();
    ac_set_error_handler(fuzz_on_error, NULL);
    if (setjmp(fuzz_jump) == 0) {
        safetensors_File f;
        char err[512];
        if (safetensors_load(path, &f, err, sizeof err)) {
            uint64_t sum = 0;
            for (int i = 0; i < f.tensors.n; i++) {
                Tensor *t = f.tensors.tensors[i];
                size_t bytes = (size_t)torch_numel(t) * ac_dtype_size(t->dtype);
                for (size_t k = 0; k < bytes; k++) sum += ((const uint8_t *)t->data)[k]; /* ASan checks each byte */
                if (safetensors_get(&f, f.tensors.names[i]) == NULL) abort();
            }
            for (int i = 0; i < f.n_meta; i++) sum += strlen(f.meta_keys[i]) + strlen(f.meta_values[i]);
            (void)sum;
        } else if (!err[0]) {
            abort(); /* a refusal always says why */
        }
    }
    ac_set_error_handler(NULL, NULL);
    ac_arena_release(m);
    return 0;
}
