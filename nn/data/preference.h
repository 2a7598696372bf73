/* The book's DPO notebook's data path (ch07/04_preference-tuning-with-dpo, as tests/tools/dpo.py
 * runs it on PyTorch 1.13): the preference data, PreferenceDataset, its custom_collate_fn and a
 * DataLoader with PyTorch's draws. It builds on instruct.h (format_input, the splits).
 *
 *     Python (the notebook)                              C
 *     data = json.load(f)                                JsonValue *data = preference_load(path, err, sizeof err);
 *                                                        (checked: instruction, input, output, chosen and
 *                                                         rejected, each a str)
 *     pprint.pp(data[50])                                pprint_pp(json_at(data, 50), stdout)
 *     train_data, test_data, val_data                    InstructSplits s = instruct_split(data, 0);
 *     PreferenceDataset(train_data, tokenizer)           PreferenceDataset *ds = PreferenceDataset_new(s.train,
 *                                                                tokenizer, err, sizeof err);
 *     custom_collate_fn(batch, pad_token_id=50256,       preference_collate_fn(ds, rows, n, 50256, 1024, true, &b)
 *         allowed_max_length=1024,
 *         mask_prompt_tokens=True)
 *     DataLoader(ds, batch_size=8, shuffle=True,         PreferenceDataLoader l = PreferenceDataLoader_new(ds, 8,
 *                drop_last=True, collate_fn=...)                 true, true, (PreferenceCollateArgs){50256, 1024, true});
 *     for batch in loader:                               PreferenceDataLoaderIter it = PreferenceDataLoader_iter(&l);
 *                                                        while (PreferenceDataLoaderIter_next(&it, &batch)) {...}
 *                                                        PreferenceDataLoaderIter_free(&it);
 *     batch["chosen"], batch["chosen_mask"], ...         batch.chosen, batch.chosen_mask, ... (batch.prompt[r]:
 *                                                        ids of row r's prompt, batch.prompt_lens[r] of them)
 *
 * custom_collate_fn: chosen and rejected padded with pad_token_id to one length, the longest of
 * both + 1; each mask true on the text's own tokens, then (mask_prompt_tokens) false on the
 * prompt's tokens and the two after them (the "\n\n" before "### Response:"); all four cut to
 * allowed_max_length (COLLATE_NONE: no cut). chosen and rejected (n, T) int64, the masks (n, T)
 * bool, in the arena.
 *
 * Draws: as InstructDataLoader's (one int64 at each iterator; a shuffled loader one more at its
 * first batch, for randperm).
 *
 * Memory: the dataset is long-lived (PreferenceDataset_free), its ids copied; batches live in
 * the arena; prompt pointers point into the dataset. Bad data never calls the error handler:
 * NULL / false with "entry I: ..." in err. */
#ifndef ATTENTION_PREFERENCE_H
#define ATTENTION_PREFERENCE_H

#include <stdio.h>

#include "instruct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* instruct_check's entries, each with str "chosen" and "rejected" too: "entry 7: key 'chosen' is
 * missing", "entry 2: 'rejected' is int, not str" */
bool preference_check(const JsonValue *data, char *err, size_t errlen);
JsonValue *preference_load(const char *path, char *err, size_t errlen); /* "PATH: entry ..." */
/* How many entries' chosen equals their rejected (nothing to learn from them); *first: the
 * first such entry's index (-1: none) */
int64_t preference_count_equal(const JsonValue *data, int64_t *first);

/* pprint.pp(entry): a dict of str as Python's pprint writes it (width 80, the keys in their
 * order, a long str cut into pieces at white space, each piece repr'd) and a newline */
void pprint_pp(const JsonValue *entry, FILE *f);

typedef struct {
    int64_t n;
    int64_t **prompt, **chosen, **rejected; /* malloc'd, one array per entry */
    int64_t *prompt_lens, *chosen_lens, *rejected_lens;
} PreferenceDataset;

/* Entry i: format_input(e) encoded, and format_input(e) + "\n\n### Response:\n" + e[key] for
 * key chosen and rejected. NULL with "entry I: ..." in err. */
PreferenceDataset *PreferenceDataset_new(InstructList data, Tokenizer *tokenizer, char *err, size_t errlen);
int64_t PreferenceDataset_len(const PreferenceDataset *ds);
void PreferenceDataset_free(PreferenceDataset *ds);

typedef struct {
    int64_t n;                       /* rows */
    const int64_t *const *prompt;    /* batch["prompt"]: row r's ids (into the dataset) */
    const int64_t *prompt_lens;
    Tensor *chosen, *rejected;       /* (n, T) int64 */
    Tensor *chosen_mask, *rejected_mask; /* (n, T) bool */
} PreferenceBatch;

/* The batch of dataset rows rows[0..n-1] (n >= 1) */
void preference_collate_fn(const PreferenceDataset *ds, const int64_t *rows, int64_t n, int64_t pad_token_id,
                           int64_t allowed_max_length, bool mask_prompt_tokens, PreferenceBatch *out);
/* The response tokens row i's mask keeps for key chosen (or rejected): min(len, allowed_max_length)
 * less the prompt and its two newlines (mask_prompt_tokens), at least 0. 0 makes compute_logprobs
 * divide by 0: the command refuses such data. */
int64_t preference_response_tokens(const PreferenceDataset *ds, int64_t i, bool chosen, int64_t allowed_max_length);

typedef struct { int64_t pad_token_id, allowed_max_length; bool mask_prompt_tokens; } PreferenceCollateArgs;

typedef struct {
    const PreferenceDataset *dataset;
    int64_t batch_size;
    bool shuffle, drop_last;
    PreferenceCollateArgs collate;
} PreferenceDataLoader;

typedef struct {
    const PreferenceDataLoader *loader;
    int64_t base_seed, next;
    int64_t *order;
    bool started, done;
} PreferenceDataLoaderIter;

PreferenceDataLoader PreferenceDataLoader_new(const PreferenceDataset *dataset, int64_t batch_size, bool shuffle,
                                              bool drop_last, PreferenceCollateArgs collate);
int64_t PreferenceDataLoader_len(const PreferenceDataLoader *loader);
PreferenceDataLoaderIter PreferenceDataLoader_iter(const PreferenceDataLoader *loader);
bool PreferenceDataLoaderIter_next(PreferenceDataLoaderIter *it, PreferenceBatch *batch); /* false after the last */
void PreferenceDataLoaderIter_free(PreferenceDataLoaderIter *it);

#ifdef __cplusplus
}
#endif

#endif
