// Every public header from C++ (extern "C"): built and run by `make installcheck`.
#include <attention/extend.h>
#include <attention/nn.h>
#include <attention/optim.h>
#include <attention/safetensors.h>
#include <attention/tensor.h>
#include <attention/chartext.h>
#include <attention/data.h>
#include <attention/tokenizer.h>
#include <attention/text_tokenizer.h>
#include <attention/toy_lm.h>
#include <attention/viz.h>
#include <attention/blocks.h>
#include <attention/layer_cache.h>
#include <attention/lm.h>
#include <attention/variants.h>
#include <attention/llm.h>

int main() {
    torch_manual_seed(123);
    const int64_t shape[2] = {2, 3};
    Tensor *t = torch_rand(2, shape);
    int ok = torch_numel(t) == 6 && ac_text_columns("abc") == 3;
    ac_shutdown();
    return ok ? 0 : 1;
}
