/* safetensors files: an 8-byte little-endian header length, a JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {"key": "value"}}, then the raw little-endian data.
 * Names are PyTorch's (tok_emb.weight, attn.W_query.weight, ...), so files
 * move between attention.c and PyTorch (safetensors.torch.load_file). */
#ifndef ATTENTION_SAFETENSORS_H
#define ATTENTION_SAFETENSORS_H

#include "nn.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes to PATH.tmp, then renames it over PATH: a crash mid-save leaves the
 * old file whole. metadata: n_meta "key", "value" pairs (may be 0).
 * Returns false with a message in err (the file is then untouched). */
bool safetensors_save(const char *path, nn_TensorList tensors, int n_meta, const char *const *meta_kv,
                      char *err, size_t errlen);

/* Reads and checks the whole file: tensors come back in the arena, in file
 * order. Returns false with a message in err for a missing, truncated or
 * corrupt file, never crashes. Metadata values are returned in the arena. */
typedef struct {
    nn_TensorList tensors;
    int n_meta;
    const char **meta_keys, **meta_values;
} safetensors_File;
bool safetensors_load(const char *path, safetensors_File *out, char *err, size_t errlen);
/* The same checks of the whole header, its metadata read, no tensor's data: out->tensors has each
 * entry's name, dtype and shape as a broadcast of one zero (every stride 0; a check of names and
 * shapes, such as safetensors_copy_into(..., apply=false), reads nothing else): what a file holds,
 * before anything is built for it. */
bool safetensors_load_header(const char *path, safetensors_File *out, char *err, size_t errlen);
const char *safetensors_meta(const safetensors_File *f, const char *key); /* NULL if absent */
Tensor *safetensors_get(const safetensors_File *f, const char *name);     /* NULL if absent */

/* Copies the file's tensors into `dest` (e.g. nn_state_dict(model)): every
 * name must be present with the same dtype and shape, and no extra name
 * (other than those starting with one of `ignore_prefixes`, a NULL-ended
 * list, may be NULL) may appear. On any mismatch returns false with a message
 * and changes nothing. apply=false only checks. */
bool safetensors_copy_into(const safetensors_File *f, nn_TensorList dest, const char *const *ignore_prefixes,
                           bool apply, char *err, size_t errlen);

/* Checkpoints (ToyLM's and GPTModel's): the state_dict's tensors, then, when opt is given, its
 * state as "optim.<name>" and the generator as "rng_state", then extra (names in the arena); and
 * back: a file's "optim.*" tensors without the prefix, as optim_load_state_dict takes them. */
nn_TensorList nn_checkpoint_tensors(nn_TensorList state_dict, optim_Optimizer *opt, nn_TensorList extra);
nn_TensorList nn_checkpoint_optim_state(const safetensors_File *f);

#ifdef __cplusplus
}
#endif

#endif
