"""Writes tests/data/spam_golden.txt and spam_{train,validation,test}_csv.txt: chapter 6's data pipeline
(../shared/pytorch/finetune.py: cmd_classify, create_balanced_dataset, random_split, SpamDataset) as pandas 1.5,
numpy's legacy RandomState and PyTorch 1.13 run it, for tests/test_spam_data.c. Run once with /usr/bin/python3
from the repository root (the tests never run Python):

    /usr/bin/python3 tests/tools/gen_spam_golden.py

Records, one a line, bytes as hex where they may be anything:
    na V...                        pandas' default NaN markers (hex), each checked to read as NaN
    tsv NAME HEX                   a small TSV read with read_csv(sep="\\t", header=None, names=[...]), then one of
      rows K / row LABEL HEXTEXT     what pandas read (all rows valid), followed by
        csv HEX                      to_csv(index=None) of it with Label mapped to 0/1, and
        back K / text HEX  or  back_refuse   what read_csv reads back (or: pandas reads back other rows)
      error MSG                      pandas' own error (its C parser's words)
      refuse SUBSTRING               pandas reads NaN or a shifted row there; the C reader refuses, naming this
    csvin NAME HEX                 a small CSV read with read_csv(path): rows K + row LABEL HEXTEXT, or refuse/error
    perm SEED N K V...             DataFrame.sample(K, random_state=SEED) of N rows: the positions drawn
    vc NAME HEX                    value_counts().to_string() of the named column
    index NAME V...                a frame's index (positions in the sample file)
    ids NAME N L V... / labels NAME V...   SpamDataset's encoded, padded texts and labels
    batch x/y V...                 the first batch of DataLoader(train, 8, shuffle=True, drop_last=True)
"""
import io
import os
import sys

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, "../shared/pytorch")
from finetune import SpamDataset, create_balanced_dataset, random_split  # noqa: E402
from gpt2_tokenizer import GPT2Tokenizer  # noqa: E402
from pandas._libs.parsers import STR_NA_VALUES  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

OUT = "tests/data"
lines = []


def h(s):
    return (s.encode("utf-8") if isinstance(s, str) else s).hex() or "-"


def read_tsv(b):
    return pd.read_csv(io.BytesIO(b), sep="\t", header=None, names=["Label", "Text"])


def valid(df, labels):
    return (df.index.equals(pd.RangeIndex(len(df))) and all(isinstance(t, str) for t in df["Text"])
            and all(v in labels for v in df["Label"]))


# (name, bytes, what the C reader refuses with when pandas reads NaN or shifts a row; None: pandas' rows or error)
TSV = [
    ("plain", b"ham\thello\nspam\tWIN now\n", None),
    ("crlf", b"ham\thello\r\nspam\tWIN now\r\n", None),
    ("no_last_newline", b"ham\thello\nspam\tWIN", None),
    ("blank_lines", b"\n\nham\ta\n\n\r\n\nspam\tb\n\n", None),
    ("space_lines", b"   \nham\ta\n  \r\nspam\tb\n \n", None),
    ("quoted", b'ham\t"a, ""b"" c"\nspam\t"x"\n', None),
    ("quote_then_text", b'ham\t"Hi" he said\nspam\t"a"b"c"d\n', None),
    ("mid_quote", b'ham\tshe said "no"\nspam\ta"b\n', None),
    ("multiline", b'ham\t"line one\nline two\r\nthree"\nspam\tb\n', None),
    ("quoted_tab", b'ham\t"a\tb"\nspam\tc\n', None),
    ("quoted_cr", b'ham\t"a\rb"\nspam\tc\n', None),
    ("lone_cr", b"ham\ta\rspam\tb\r", None),
    ("spaces", b"ham\t  lead and trail  \nspam\t NA\n", None),
    ("commas", b"ham\ta,b,c\nspam\t,\n", None),
    ("non_ascii", "ham\tcaf\u00e9 \u00a31000 \u2013 \U0001f600\nspam\t\u00fcber\n".encode(), None),
    ("bom", b"\xef\xbb\xbfham\ta\nspam\tb\n", None),
    ("eot", b"ham\tend<|endoftext|>here\nspam\tb\n", None),
    ("extra_field", b"ham\ta\nspam\tb\tc\nham\td\n", None),
    ("extra_after_blank", b"ham\ta\n\n\nspam\tb\tc\n", None),
    ("extra_after_multiline", b'ham\t"x\ny\nz"\nspam\tb\tc\n', None),
    ("eof_in_quote", b'ham\ta\nspam\t"b\n', None),
    ("eof_in_quote_blank", b'\n\nham\ta\n\nspam\t"b\nc\n', None),
    ("blank_cr_tab", b"ham\ta\n\r\tspam\tb\n", None),
    ("blank_cr_then_quote", b'ham\ta\r\r"spam"\t"b"\r', None),
    ("space_tab_line", b"ham\ta\n  \t \nspam\tb\n", 'line 2: label "  " is not ham or spam'),
    ("first_extra", b"ham\ta\tb\nspam\tc\n", "Expected 2 fields in line 1, saw 3"),
    ("one_field", b"ham\ta\nspam\n", "Expected 2 fields in line 2, saw 1"),
    ("one_field_blank", b"ham\ta\n\n\nspam\n", "Expected 2 fields in line 4, saw 1"),
    ("cr_tab", b"ham\ta\r\tx\nspam\tb\n", "line 2: label \"\" is not ham or spam"),
    ("empty_text", b"ham\ta\nspam\t\n", "line 2: empty text"),
    ("quoted_empty", b'ham\ta\nspam\t""\n', "line 2: empty text"),
    ("na_text", b"ham\ta\n\nspam\tNA\n", "line 3: text \"NA\""),
    ("quoted_na", b'ham\ta\nspam\t"null"\n', "line 2: text \"null\""),
    ("bad_label", b"ham\ta\nSpam\tb\n", "line 2: label \"Spam\" is not ham or spam"),
    ("no_spam", b"ham\ta\nham\tb\n", "no spam"),
    ("no_ham", b"spam\ta\n", "no ham"),
    ("empty_file", b"", "no rows"),
    ("only_blank", b"\n \r\n", "no rows"),
    ("not_utf8", b"ham\ta\nspam\tb\xff\n", "line 2: not UTF-8"),
    # what Python's strict decoder (and so pandas) refuses too: an overlong form, a surrogate, past U+10FFFF
    ("overlong", b"ham\ta\nspam\tb\xc0\xaf\n", "line 2: not UTF-8"),
    ("surrogate", b"ham\ta\nspam\tb\xed\xa0\x80\n", "line 2: not UTF-8"),
    ("past_max", b"ham\ta\nspam\tb\xf4\x90\x80\x80\n", "line 2: not UTF-8"),
]

for v in sorted(STR_NA_VALUES):
    assert read_tsv(b"ham\t" + v.encode() + b"\n")["Text"].isna().all(), v
lines.append("na " + " ".join(h(v) for v in sorted(STR_NA_VALUES)))


def csv_bytes(df):
    out = io.StringIO()
    df.to_csv(out, index=None)
    return out.getvalue().encode()


for name, b, refuse in TSV:
    lines.append(f"tsv {name} {h(b)}")
    if refuse:
        try:  # what pandas does there: NaN, a shifted row, or no row
            df = read_tsv(b)
            assert not (valid(df, ("ham", "spam")) and set(df["Label"]) == {"ham", "spam"}), name
        except UnicodeDecodeError:
            pass
        lines.append(f"refuse {refuse}")
        continue
    try:
        df = read_tsv(b)
    except pd.errors.ParserError as e:
        lines.append("error " + str(e).replace("Error tokenizing data. C error: ", "").strip())
        continue
    assert valid(df, ("ham", "spam")), name
    lines.append(f"rows {len(df)}")
    lines += [f"row {lab} {h(t)}" for lab, t in zip(df["Label"], df["Text"])]
    mapped = df.copy()
    mapped["Label"] = mapped["Label"].map({"ham": 0, "spam": 1})
    c = csv_bytes(mapped)
    lines.append(f"csv {h(c)}")
    back = pd.read_csv(io.BytesIO(c))
    if list(back.columns) == ["Label", "Text"] and valid(back, (0, 1)) and len(back) == len(df):
        lines.append(f"back {len(back)}")
        lines += [f"text {h(t)}" for t in back["Text"]]
    else:
        lines.append("back_refuse")

CSVIN = [
    ("plain", b"Label,Text\n0,a\n1,\"b,c\"\n", None),
    ("crlf_quotes", b"Label,Text\r\n1,\"say \"\"hi\"\"\"\r\n0,x\"y\r\n", None),
    ("tabs", b"Label,Text\n0,a\tb\n1, c \n", None),
    ("extra", b"Label,Text\n0,a\n1,b,c\n", None),
    ("tab_line", b"Label,Text\n\t \t\n0,a\n", None),
    ("quoted_header", b'"Label","Text"\n0,"a\rb"\n', None),
    ("bom_blank", b"\xef\xbb\xbf\nLabel,Text\n1,x\n", None),
    ("short", b"Label,Text\n0,a\n1\n", "Expected 2 fields in line 3, saw 1"),
    ("bad_label", b"Label,Text\n0,a\n2,b\n", "line 3: label \"2\" is not 0 or 1"),
    ("nan_text", b"Label,Text\n0,a\n1,\n", "line 3: empty text"),
    ("header", b"Label,Texts\n0,a\n", "header"),
]
for name, b, refuse in CSVIN:
    lines.append(f"csvin {name} {h(b)}")
    try:
        df = pd.read_csv(io.BytesIO(b))
    except pd.errors.ParserError as e:
        assert not refuse
        lines.append("error " + str(e).replace("Error tokenizing data. C error: ", "").strip())
        continue
    if refuse:
        assert not (list(df.columns) == ["Label", "Text"] and valid(df, (0, 1))), name
        lines.append(f"refuse {refuse}")
        continue
    assert valid(df, (0, 1)), name
    lines.append(f"rows {len(df)}")
    lines += [f"row {lab} {h(t)}" for lab, t in zip(df["Label"], df["Text"])]

# numpy's legacy RandomState through pandas' sample: the positions drawn
for seed in (0, 1, 123, 2024, 4294967295):
    for n, k in ((1, 1), (2, 2), (5, 3), (17, 17), (100, 7), (1000, 1000), (65537, 20)):
        pos = pd.Series(np.arange(n)).sample(k, random_state=seed).index
        assert list(pos) == list(np.random.RandomState(seed).permutation(n)[:k])
        lines.append(f"perm {seed} {n} {k} " + " ".join(map(str, pos)))

# value_counts: order (ties keep the first seen first) and widths
for name, vals in (("ham_first", ["ham"] * 5 + ["spam"] * 3 + ["ham"]), ("tie_spam_first", ["spam", "ham", "ham", "spam"]),
                   ("tie_ham_first", ["ham", "spam"]), ("wide", ["spam"] * 3 + ["ham"] * 1234),
                   ("int_tie", [1, 0, 0, 1]), ("int_wide", [0] * 12 + [1] * 3), ("int_tie0", [0, 1])):
    lines.append(f"vc {name} {h(pd.Series(vals).value_counts().to_string())}")

# the sample file, as cmd_classify runs it
SEED = 123
df = pd.read_csv("../shared/data/sms_spam_sample.tsv", sep="\t", header=None, names=["Label", "Text"])
balanced_df = create_balanced_dataset(df, SEED)
lines.append(f"vc df {h(df['Label'].value_counts().to_string())}")
lines.append("index balanced " + " ".join(map(str, balanced_df.index)))
balanced_df["Label"] = balanced_df["Label"].map({"ham": 0, "spam": 1})
lines.append(f"vc balanced {h(balanced_df['Label'].value_counts().to_string())}")
shuffled = balanced_df.sample(frac=1, random_state=SEED)
lines.append("index shuffled " + " ".join(map(str, shuffled.index)))
parts = random_split(balanced_df, 0.7, 0.1, SEED)
lines.append("split " + " ".join(str(len(p)) for p in parts))
names = ("train", "validation", "test")
for nm, p in zip(names, parts):
    with open(f"{OUT}/spam_{nm}_csv.txt", "wb") as f:
        f.write(csv_bytes(p))
tok = GPT2Tokenizer("../shared/data/gpt2")
train = SpamDataset(f"{OUT}/spam_train_csv.txt", tok)
sets = {"train": train, "validation": SpamDataset(f"{OUT}/spam_validation_csv.txt", tok, max_length=train.max_length),
        "test8": SpamDataset(f"{OUT}/spam_test_csv.txt", tok, max_length=8)}
for nm, ds in sets.items():
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.stack([ds[i][1] for i in range(len(ds))])
    lines.append(f"ids {nm} {x.shape[0]} {x.shape[1]} " + " ".join(map(str, x.flatten().tolist())))
    lines.append(f"labels {nm} " + " ".join(map(str, y.tolist())))
torch.manual_seed(SEED)
x, y = next(iter(DataLoader(train, batch_size=8, shuffle=True, num_workers=0, drop_last=True)))
lines.append("batch x " + " ".join(map(str, x.flatten().tolist())))
lines.append("batch y " + " ".join(map(str, y.tolist())))

with open(f"{OUT}/spam_golden.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{len(lines)} records", file=sys.stderr)
os.sys.exit(0)
