/* The book's chapter 7 data path (../shared/pytorch/finetune.py: cmd_instruct, format_input,
 * InstructionDataset, custom_collate_fn), with a DataLoader that draws what PyTorch 1.13's does:
 *
 *     Python (the book)                                   C
 *     with open(path, encoding="utf-8") as f:             JsonValue *data = instruct_load(path, err, sizeof err);
 *         data = json.load(f)                             (checked: a list of dicts with str instruction,
 *                                                          input and output; other keys kept)
 *     len(data), data[i]                                  json_len(data), json_at(data, i)
 *     format_input(entry)                                 char *prompt = format_input(entry); ... free(prompt);
 *     train_portion = int(len(data) * 0.85)               InstructSplits s = instruct_split(data, 0);
 *     test_portion = int(len(data) * 0.1)                 s.train, s.test, s.val: InstructList views of data
 *     train_data = data[:train_portion] ...
 *     train_data[:10], ... (the book's --test_mode)       instruct_split(data, 10)
 *     InstructionDataset(train_data, tokenizer)           InstructionDataset *ds = InstructionDataset_new(s.train,
 *                                                                 tokenizer, err, sizeof err);
 *     len(ds), ds[i]                                      InstructionDataset_len(ds), InstructionDataset_getitem(ds, i, &n)
 *     custom_collate_fn(batch, pad_token_id=50256,        custom_collate_fn(items, lens, n, 50256, -100,
 *         ignore_index=-100, allowed_max_length=None)             COLLATE_NONE, &inputs, &targets)
 *     collate = partial(custom_collate_fn,                CollateArgs collate = {50256, -100, 1024};
 *                       allowed_max_length=1024)
 *     DataLoader(ds, batch_size=8, collate_fn=collate,    InstructDataLoader loader = InstructDataLoader_new(ds, 8,
 *                shuffle=True, drop_last=True,                    true, true, collate);
 *                num_workers=0)
 *     len(loader)                                         InstructDataLoader_len(&loader)
 *     for inputs, targets in loader:                      InstructDataLoaderIter it = InstructDataLoader_iter(&loader);
 *                                                         while (InstructDataLoaderIter_next(&it, &inputs, &targets)) {...}
 *     (a loop left with break)                            InstructDataLoaderIter_free(&it);
 *     entry["model_response"] = text                      json_set_string(entry, "model_response", text, len)
 *     json.dump(test_data, f, indent=4)                   JsonValue *t = instruct_list_json(s.test);
 *                                                         json_dump(t, path, 4, err, sizeof err); json_free(t);
 *
 * format_input: "Below is an instruction that describes a task. Write a response that
 * appropriately completes the request.\n\n### Instruction:\n" + instruction, then
 * "\n\n### Input:\n" + input only when input is not empty. A dataset's entry i is the ids of
 * format_input(e) + "\n\n### Response:\n" + output ("<|endoftext|>" in the text is the special
 * id, as finetune.py's tokenizer splits on it).
 *
 * custom_collate_fn: every item padded to the batch's longest + 1 with pad_token_id; inputs
 * drop the last token, targets the first; in each target row every pad_token_id after its
 * first (a real 50256 of the text too, as the book's mask does) becomes ignore_index; then both
 * are cut to allowed_max_length as Python slices [:L] (COLLATE_NONE: no cut; a negative L
 * counts from the end). (b, T) int64 tensors.
 *
 * Draws (as data.h's loaders): InstructDataLoader_iter draws one int64 random_() (the
 * iterator's base seed); a shuffled loader, at its first batch, one more, which seeds a
 * generator of its own for randperm(len(ds)).
 *
 * Memory: instruct_load's tree is the caller's (json_free); InstructList and InstructSplits
 * are views into it (nothing to free; valid while the tree is). format_input returns a
 * malloc'd string (free). instruct_list_json returns a new tree, deep copies of the entries
 * (json_free). An InstructionDataset is long-lived (InstructionDataset_free: its ids are
 * copied, it needs neither the tree nor the tokenizer afterwards). A loader is a plain struct;
 * an iterator holds its order until exhausted or freed (InstructDataLoaderIter_free, which may
 * always be called). Batches live in the arena. Bad files and data never call the error
 * handler: NULL with a message in err naming the entry and the key; misuse of the calls
 * (a batch size < 1, an empty batch, an entry not checked) raises. */
#ifndef ATTENTION_INSTRUCT_H
#define ATTENTION_INSTRUCT_H

#include "json.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The data file, as json.load reads it, checked with instruct_check. "PATH: ..." messages. */
JsonValue *instruct_load(const char *path, char *err, size_t errlen);
/* Is data a list of dicts, each with str "instruction", "input" and "output"? If not, why:
 * "entry 3: key 'input' is missing", "entry 0: 'output' is int, not str", ... */
bool instruct_check(const JsonValue *data, char *err, size_t errlen);
/* The str of entry[key]; raises if absent or not a string (use checked entries). */
const char *instruct_field(const JsonValue *entry, const char *key);
char *format_input(const JsonValue *entry);
/* The same with its length (*len may be NULL): a string of the data may hold a NUL ("\u0000"). */
char *format_input_len(const JsonValue *entry, size_t *len);

typedef struct {
    JsonValue *const *entries; /* into the list's items */
    int64_t n;
} InstructList;
typedef struct { InstructList train, test, val; } InstructSplits;
/* The book's 85% / 10% / the rest; subset > 0: the first subset of each (as --subset). */
InstructSplits instruct_split(const JsonValue *data, int64_t subset);
JsonValue *instruct_list_json(InstructList list); /* a new list of copies of the entries */

typedef struct {
    int64_t n;
    int64_t **ids;   /* malloc'd, one array per entry */
    int64_t *lens;
} InstructionDataset;

/* NULL with "entry I: ..." in err where an entry is not a checked dict or its text does not
 * encode (a lone surrogate from a "\udXXX"; Python's encode refuses it too). */
InstructionDataset *InstructionDataset_new(InstructList data, Tokenizer *tokenizer, char *err, size_t errlen);
int64_t InstructionDataset_len(const InstructionDataset *ds);
const int64_t *InstructionDataset_getitem(const InstructionDataset *ds, int64_t i, int64_t *len); /* its ids */
void InstructionDataset_free(InstructionDataset *ds);

#define COLLATE_NONE INT64_MAX /* allowed_max_length=None */
typedef struct { int64_t pad_token_id, ignore_index, allowed_max_length; } CollateArgs;
#define COLLATE_DEFAULTS ((CollateArgs){50256, -100, COLLATE_NONE})

/* A batch of n items (item k: lens[k] ids) into *inputs and *targets, (n, T) int64 in the arena.
 * n < 1 raises Python's "max() arg is an empty sequence". */
void custom_collate_fn(const int64_t *const *items, const int64_t *lens, int64_t n, int64_t pad_token_id,
                       int64_t ignore_index, int64_t allowed_max_length, Tensor **inputs, Tensor **targets);
/* A collate function of your own: ctx is InstructDataLoader's collate_ctx. */
typedef void (*CollateFn)(const int64_t *const *items, const int64_t *lens, int64_t n, void *ctx, Tensor **inputs,
                          Tensor **targets);

typedef struct {
    const InstructionDataset *dataset;
    int64_t batch_size;
    bool shuffle, drop_last;
    CollateArgs collate;  /* partial(custom_collate_fn, ...) */
    CollateFn collate_fn; /* NULL: custom_collate_fn with `collate`; else this with collate_ctx */
    void *collate_ctx;
} InstructDataLoader;

typedef struct {
    const InstructDataLoader *loader;
    int64_t base_seed, next;
    int64_t *order;
    bool started, done;
} InstructDataLoaderIter;

InstructDataLoader InstructDataLoader_new(const InstructionDataset *dataset, int64_t batch_size, bool shuffle,
                                          bool drop_last, CollateArgs collate);
int64_t InstructDataLoader_len(const InstructDataLoader *loader);
InstructDataLoaderIter InstructDataLoader_iter(const InstructDataLoader *loader);
bool InstructDataLoaderIter_next(InstructDataLoaderIter *it, Tensor **inputs, Tensor **targets); /* false after the last */
void InstructDataLoaderIter_free(InstructDataLoaderIter *it);

#ifdef __cplusplus
}
#endif

#endif
