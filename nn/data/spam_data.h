/* The book's chapter 6 data pipeline (../shared/pytorch/finetune.py: cmd_classify,
 * create_balanced_dataset, random_split, SpamDataset), giving what pandas 1.5,
 * numpy's legacy RandomState and PyTorch 1.13 give:
 *
 *     Python (the book)                                   C
 *     df = pd.read_csv(path, sep="\t", header=None,       SpamFrame df;
 *              names=["Label", "Text"])                   spam_read_tsv(path, &df, err, sizeof err)
 *     print(df["Label"].value_counts().to_string())       char *s = spam_value_counts(&df, false); puts(s); free(s);
 *     balanced_df = create_balanced_dataset(df, 123)      create_balanced_dataset(&df, 123, &balanced_df, err, sizeof err)
 *     balanced_df["Label"] = balanced_df["Label"].map({"ham": 0, "spam": 1})
 *                                                         (labels are 0/1 already; value_counts' mapped=true prints them so)
 *     train_df, validation_df, test_df = random_split(balanced_df, 0.7, 0.1, 123)
 *                                                         random_split(&balanced_df, 0.7, 0.1, 123, &train_df,
 *                                                                 &validation_df, &test_df, err, sizeof err)
 *     train_df.to_csv("train.csv", index=None)            spam_to_csv(&train_df, "train.csv", err, sizeof err)
 *     pd.read_csv("train.csv")                            spam_read_csv("train.csv", &frame, err, sizeof err)
 *     train_dataset = SpamDataset("train.csv", tokenizer, max_length=None)
 *                                                         SpamDataset *train_dataset = SpamDataset_new("train.csv",
 *                                                                 tokenizer, SPAM_MAX_LENGTH_NONE, 50256, err, sizeof err);
 *     DataLoader(train_dataset, batch_size=8, shuffle=True, drop_last=True)
 *                                                         TensorDataLoader_new(&train_dataset->dataset, 8, true, true)
 *     np.random.RandomState(seed)                         np_RandomState rs; np_RandomState_seed(&rs, seed);
 *     rs.permutation(n)                                   np_permutation(&rs, n, out)
 *
 * Reading (both readers: pandas' C parser with quoting QUOTE_MINIMAL): a field
 * that opens with '"' is quoted: "" inside is one quote, tabs, commas and line
 * ends inside are text, and what follows the closing quote up to the delimiter
 * is appended ("Hi" he said reads Hi he said); a quote inside an unquoted field
 * is literal; \n, \r\n and a lone \r end a line; blank lines and lines of spaces
 * are skipped; a UTF-8 BOM at the start is dropped. Line numbers in messages are
 * pandas': lines as its parser counts them (blank lines count, a line end inside
 * a quoted field does not; "EOF inside string starting at row N" counts from 0,
 * as pandas does). What pandas would read as NaN or shift into a wrong
 * column is refused here, naming the line: a line of other than 2 fields (pandas'
 * words, "Expected 2 fields in line 4, saw 3"; pandas itself fills NaN for fewer,
 * and takes an extra first column of line 1 as the index), an empty text or one
 * of pandas' NaN markers ("NA", "null", "nan", ...), a label other than ham/spam
 * (0/1 in the CSV), text that is not UTF-8 or holds a NUL byte, a TSV without
 * spam or without ham. Every error returns false with "PATH: ..." in err and
 * leaves nothing allocated. Left as pandas would not: a CSV whose every text is a
 * number (pandas makes that column numeric; here they stay text).
 *
 * Writing (DataFrame.to_csv(path, index=None)): "Label,Text", then the label as 0/1 and
 * the text quoted only when it holds ',', '"' or '\n' (Python 3.11's csv module:
 * a tab and a lone '\r' are written bare, and pandas reads that '\r' back as a
 * line end, so such a text comes back as other rows, which spam_read_csv refuses),
 * '"' doubled, lines ended by "\n". Written to PATH.tmp, then renamed.
 *
 * Random draws (numpy's legacy RandomState, which pandas' sample(random_state=s)
 * makes afresh): MT19937 seeded as PyTorch's generator is (the project's);
 * permutation(n) is arange(n), then for i = n-1 down to 1 j = random_interval(i)
 * (32-bit words masked to i's bit length, drawn until <= i) and a[i], a[j] swapped;
 * df.sample(k) takes the first k positions of permutation(len(df)).
 *
 * Memory: a SpamFrame owns its arrays and texts (malloc'd): SpamFrame_free. A
 * frame made from another copies what it takes. A SpamDataset is long-lived
 * (SpamDataset_free): its two tensors are ac_persist'd and its `dataset` holds
 * them (don't ac_free them yourself); the tensors a loader's batches make live in
 * the arena, as every tensor a computation makes. */
#ifndef ATTENTION_SPAM_DATA_H
#define ATTENTION_SPAM_DATA_H

#include "data.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t n;
    int64_t *labels; /* 0 ham, 1 spam (what .map({"ham": 0, "spam": 1}) makes) */
    char **texts;    /* NUL-terminated UTF-8 */
    int64_t *index;  /* pandas' index: the row's position in the file read (random_split's parts: in the shuffled whole) */
} SpamFrame;

void SpamFrame_free(SpamFrame *f); /* and zeroes it; a zeroed frame may be freed */

bool spam_read_tsv(const char *path, SpamFrame *out, char *err, size_t errlen);
bool spam_read_csv(const char *path, SpamFrame *out, char *err, size_t errlen);
bool spam_to_csv(const SpamFrame *f, const char *path, char *err, size_t errlen);

/* df["Label"].value_counts().to_string(): the commoner label first (on a tie, the
 * one seen first), labels left-justified, counts right-justified, 4 spaces apart,
 * no final newline. mapped: the labels as 0/1, else as ham/spam. malloc'd (NULL
 * without memory); "" for no rows (pandas prints "Series([], )" there). */
char *spam_value_counts(const SpamFrame *f, bool mapped);

/* numpy's np.random.RandomState(seed) (seed 0 .. 2**32 - 1). */
typedef struct { torch_Generator g; } np_RandomState;
void np_RandomState_seed(np_RandomState *rs, uint32_t seed);
uint32_t np_random_interval(np_RandomState *rs, uint32_t max); /* uniform in 0..max */
void np_permutation(np_RandomState *rs, int64_t n, int64_t *out); /* out: n values; n < 2**32 */

/* df.sample(k, random_state=seed): rows at a fresh RandomState(seed).permutation(n)[:k];
 * false (pandas' ValueError) for k > n or a seed outside 0 .. 2**32 - 1. */
bool spam_sample(const SpamFrame *df, int64_t k, int64_t seed, SpamFrame *out, char *err, size_t errlen);
bool create_balanced_dataset(const SpamFrame *df, int64_t seed, SpamFrame *out, char *err, size_t errlen);
/* Fractions in [0, 1] with train + validation <= 1; the cuts are int(n * frac). */
bool random_split(const SpamFrame *df, double train_frac, double validation_frac, int64_t seed, SpamFrame *train,
                  SpamFrame *validation, SpamFrame *test, char *err, size_t errlen);

#define SPAM_MAX_LENGTH_NONE (-1) /* max_length=None: the longest encoded text (any negative value) */
typedef struct {
    int64_t n, max_length;
    Tensor *input_ids;     /* (n, max_length) int64, ac_persist'd */
    Tensor *labels;        /* (n,) int64, ac_persist'd */
    TensorDataset dataset; /* over the two: what TensorDataLoader_new takes */
} SpamDataset;

/* SpamDataset(csv_file, tokenizer, max_length, pad_token_id): each text encoded
 * (<|endoftext|> as its id, as the book's tokenizer), cut to max_length, padded
 * with pad_token_id. NULL with err on a bad file, or max_length None over no rows. */
SpamDataset *SpamDataset_new(const char *csv_file, Tokenizer *tokenizer, int64_t max_length, int64_t pad_token_id,
                             char *err, size_t errlen);
SpamDataset *SpamDataset_from_frame(const SpamFrame *f, Tokenizer *tokenizer, int64_t max_length,
                                    int64_t pad_token_id, char *err, size_t errlen);
void SpamDataset_free(SpamDataset *ds);

#ifdef __cplusplus
}
#endif

#endif
