#!/usr/bin/env python3
"""Writes tests/data/tokenizer_golden.txt: what the C tokenizer, BPE trainer and data loaders must give.

    /usr/bin/python3 tests/tools/gen_tokenizer_golden.py        (Debian's python3 with python3-torch, PyTorch 1.13)

Records are `name n v1 ... vn`, read by the Check suite (tests/test_tokenizer.c):
  - ids of tests/data/tokenizer_corpus.txt by ../shared/pytorch/gpt2_tokenizer.py (what tiktoken's "gpt2"
    encoding gives), and of the-verdict.txt its count, first 64 and a hash (the text is not ours to copy in);
    the files are read as bytes, so CR LF stays CR LF;
  - decode cases: ids that split UTF-8 sequences and Python's bytes.decode("utf-8", errors="replace");
  - the BPE trainer: merges learnt by a small reference written here (minbpe's RegexTokenizer.train, over
    every occurrence of every word, not over distinct words as the C code counts), and the corpus's ids
    with those merges, encoded by gpt2_tokenizer.py from the files the reference writes;
  - the book's chapter 5 loaders (batch 2, max_length = stride = 256, 90/10 split of the-verdict by
    characters, torch.manual_seed(123)): each batch's windows over two epochs, with evaluate_model's
    extra passes in between and torch.rand draws after each epoch to pin the generator's position.
The Python 3.11 reference classifies characters with Unicode 14.0 (unicodedata); the C tables are 15.0.0:
the corpus holds no character new in 15.0."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(ROOT, "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "pytorch"))
from gpt2_tokenizer import EOT, GPT2Tokenizer, bytes_to_unicode, pretokenize  # noqa: E402

import torch  # noqa: E402
from gpt import create_dataloader_v1  # noqa: E402

out = []


def rec(name, values):
    values = list(values)
    out.append(f"{name} {len(values)} " + " ".join(str(int(v)) for v in values))


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


tok = GPT2Tokenizer(os.path.join(SHARED, "data", "gpt2"))
verdict = read(os.path.join(SHARED, "data", "the-verdict.txt"))
corpus = read(os.path.join(ROOT, "tests", "data", "tokenizer_corpus.txt"))
def fnv(ids):
    """FNV-1a (64 bits) over each id's 4 little-endian bytes: the-verdict is not ours to copy in, even as
    ids, so its record is the count, the first 64 ids and this hash of them all."""
    h = 0xcbf29ce484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return [h >> 32, h & 0xFFFFFFFF]


verdict_ids = tok.encode(verdict)
rec("verdict_ids_head", verdict_ids[:64])
rec("verdict_ids_hash", [len(verdict_ids)] + fnv(verdict_ids))
rec("corpus_ids", tok.encode(corpus))

# ---- the pre-tokenizer on the classes C's isspace and old tables get wrong: each word's UTF-8 length
PRETOK = ["a\x1cb", "a\x85b", "x\xa0\xa0y", "x \xa0y", "\u2028", "\u2028\u2028z", "\u200b", "\u200bq",
          "\u0660\u0661 12", "\u00bd\u2167x", "caf\u00e9 na\u0303o", "e\u0301\u0301", "\t\tword", "a  \t\tb",
          "it's IT'S 's", "x'll'd", "\r\n\r\nA", "  ", "\U0001f469\u200d\U0001f469 ok", "\u3000\u3000\u4e2d"]
for k, text in enumerate(PRETOK):
    rec(f"pretok_{k}_text", text.encode("utf-8"))
    rec(f"pretok_{k}_words", [len(w.encode("utf-8")) for w in pretokenize(text)])

# ---- decode: ids that cut characters -----------------------------------------------------------
byte_id = {b: tok.encoder[c] for b, c in bytes_to_unicode().items()}
cases = [
    [byte_id[0xE2], byte_id[0x82]],                      # the first two bytes of a 3-byte character
    [byte_id[0xE2], byte_id[0x82], tok.encoder["A"]],    # ... then ASCII
    [byte_id[0xF0], byte_id[0x9F], byte_id[0x98]],       # three bytes of a 4-byte emoji
    [byte_id[0xF0], byte_id[0x80], byte_id[0x80]],       # F0 80: not a valid second byte
    [byte_id[0xED], byte_id[0xA0], byte_id[0x80]],       # a surrogate, encoded
    [byte_id[0xC0], byte_id[0xAF]],                      # an overlong '/'
    [byte_id[0x80], byte_id[0xBF], byte_id[0xFF], byte_id[0xFE]],  # stray bytes
    [byte_id[0xC3]] + tok.encode(" world") + [byte_id[0xA9]],      # a lead, text, a continuation
    tok.encode("😀")[:1] + tok.encode("😀")[1:],                   # whole again
    [byte_id[0xF4], byte_id[0x90], byte_id[0x80], byte_id[0x80]],  # past U+10FFFF
    [byte_id[0xE0], byte_id[0x9F], byte_id[0xBF]],       # an overlong 3-byte form
    [byte_id[0xE1], byte_id[0x80]],                      # cut at the end
]
for k, ids in enumerate(cases):
    data = b"".join(bytes(tok.char_byte[c] for c in tok.decoder[i]) for i in ids)
    rec(f"decode_{k}_ids", ids)
    rec(f"decode_{k}_text", data.decode("utf-8", errors="replace").encode("utf-8"))


# ---- the BPE trainer's reference -----------------------------------------------------------------
def gpt2_byte_order():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    return keep + [b for b in range(256) if b not in keep]


def train(text, num_merges):
    """minbpe's RegexTokenizer.train over every occurrence of every word; ids 0-255 in GPT-2's byte order;
    a pair whose bytes are already a token merges into that token."""
    order = gpt2_byte_order()
    bid = {b: i for i, b in enumerate(order)}
    words = [w for piece in text.split(EOT) for w in pretokenize(piece)]
    ids = [[bid[b] for b in w.encode("utf-8")] for w in words]
    vocab = {i: bytes([b]) for i, b in enumerate(order)}
    merges = []
    for _ in range(num_merges):
        stats = {}
        for ch in ids:
            for pair in zip(ch, ch[1:]):
                stats[pair] = stats.get(pair, 0) + 1
        if not stats:
            break
        pair = max(stats, key=stats.get)  # the first of the most frequent, in the order first seen
        new = vocab[pair[0]] + vocab[pair[1]]
        same = [k for k, v in vocab.items() if v == new]
        idx = same[0] if same else len(vocab)
        vocab[idx] = new
        merges.append(pair)
        merged = []
        for ch in ids:
            m, k = [], 0
            while k < len(ch):
                if k + 1 < len(ch) and (ch[k], ch[k + 1]) == pair:
                    m.append(idx)
                    k += 2
                else:
                    m.append(ch[k])
                    k += 1
            merged.append(m)
        ids = merged
    vocab[len(vocab)] = EOT.encode()
    return merges, vocab


def save(merges, vocab, d):
    spell = bytes_to_unicode()
    s = {i: "".join(spell[b] for b in v) for i, v in vocab.items()}
    with open(os.path.join(d, "encoder.json"), "w", encoding="utf-8") as f:
        json.dump({s[i]: i for i in sorted(s)}, f)
    with open(os.path.join(d, "vocab.bpe"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{s[a]} {s[b]}\n" for a, b in merges))


for name, text, n in (("train_verdict_300", verdict, 300), ("train_corpus_200", corpus, 200),
                      ("train_tiny_50", "aaaa abab abab aaaa<|endoftext|>baba aaab", 50)):
    merges, vocab = train(text, n)
    rec(name + "_merges", [x for pair in merges for x in pair])
    rec(name + "_nvocab", [len(vocab)])
    with tempfile.TemporaryDirectory() as d:
        save(merges, vocab, d)
        trained = GPT2Tokenizer(d)
        eot = len(vocab) - 1  # gpt2_tokenizer.py writes GPT-2's 50256 for "<|endoftext|>"
        rec(name + "_corpus_ids", [eot if i == 50256 else i for i in trained.encode(corpus)])

# ---- random_(): the seeds a DataLoader draws (int64 as two 32-bit halves), and float32's
torch.manual_seed(123)
v = torch.empty(3, dtype=torch.int64).random_().tolist()
rec("random_int64", [x for a in v for x in (a >> 32, a & 0xFFFFFFFF)])
rec("random_float32", torch.empty(3).random_().tolist())
rec("random_float64", torch.empty(2, dtype=torch.float64).random_().tolist())

# ---- the chapter 5 loaders -------------------------------------------------------------------------
split = int(0.90 * len(verdict))
torch.manual_seed(123)
train_loader = create_dataloader_v1(verdict[:split], tok, batch_size=2, max_length=256, stride=256,
                                    drop_last=True, shuffle=True, num_workers=0)
val_loader = create_dataloader_v1(verdict[split:], tok, batch_size=2, max_length=256, stride=256,
                                  drop_last=False, shuffle=False, num_workers=0)
rec("loader_sizes", [split, len(train_loader.dataset), len(val_loader.dataset), len(train_loader), len(val_loader)])


def windows(ds, x):
    """The dataset indices of a batch's rows."""
    return [next(i for i in range(len(ds)) if torch.equal(ds[i][0], row)) for row in x]


def first_batches(loader, n):
    got = []
    for i, (x, _) in enumerate(loader):
        if i >= n:
            break
        got += windows(loader.dataset, x)
    return got


for epoch in range(2):
    rows = []
    for step, (x, y) in enumerate(train_loader):
        rows += windows(train_loader.dataset, x)
        if step % 3 == 0:  # evaluate_model: the first 2 batches of each loader
            rec(f"loader_e{epoch}_s{step}_eval_train", first_batches(train_loader, 2))
            rec(f"loader_e{epoch}_s{step}_eval_val", first_batches(val_loader, 2))
    rec(f"loader_e{epoch}_train", rows)
    rows, shapes = [], []
    for x, y in val_loader:
        rows += windows(val_loader.dataset, x)
        shapes.append(x.shape[0])
    rec(f"loader_e{epoch}_val", rows)
    rec(f"loader_e{epoch}_val_rows", shapes)
    rec(f"loader_e{epoch}_rand", (torch.rand(4) * 2**24).tolist())

with open(os.path.join(ROOT, "tests", "data", "tokenizer_golden.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
print(f"wrote {len(out)} records", file=sys.stderr)
