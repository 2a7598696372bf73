/* The table of models (lm.h): one row a model, each defined in the model's own file. Adding a
 * model is its file and its row here (nn/README.md's checklist). */
#include "gpt.h"
#include "llm.h"

const nn_LMArch *const lm_archs[] = {&nn_GPTModel_arch, &nn_Qwen3Model_arch, &nn_Llama3Model_arch, NULL};
