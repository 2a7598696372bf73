#!/usr/bin/env python3
"""Writes the golden files of tests/test_instruct.c: chapter 7's data path as ../shared/pytorch/finetune.py runs it.

    /usr/bin/python3 tests/tools/gen_instruct_golden.py        (Debian's python3 with python3-torch, PyTorch 1.13)

tests/data/instruct_golden.txt holds records `name n v1 ... vn`:
  - the splits of ../shared/data/instruction-data.json (train, val, test lengths; with --subset 10 too);
  - every training entry's token count and a checksum of its ids (sum of id * (position + 1) mod 2**31),
    entry 0's ids whole;
  - cmd_instruct's loaders: torch.manual_seed(123), batch 8, collate with allowed_max_length=1024; the
    training loader (shuffle, drop_last) batch by batch: each batch's (rows, T), the first batch's first
    input and target and the last batch's; a torch.rand(2) after the epoch (where the generator is); a
    second epoch's shapes; the validation loader's shapes (no shuffle, the last batch short);
  - a shuffled loader over the validation set, batch 4, not drop_last, allowed_max_length=40, seed 7:
    every input and target (rows one after another);
  - custom_collate_fn on hand-made batches (collate<k>_*): items, args (pad, ignore_index, has max, max),
    and the output shape, inputs and targets;
  - F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100) on random (b, T, V) logits
    with targets padded with -100 (ce<k>_*): the logits, targets, loss and d loss / d logits; one batch
    with every target -100 (PyTorch: nan, and a zero gradient).
tests/data/instruct_prompts.txt: JSON, [[i, format_input(data[i])], ...] for entries with and without input.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(ROOT, "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "pytorch"))

import torch  # noqa: E402
from functools import partial  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from finetune import InstructionDataset, custom_collate_fn, format_input  # noqa: E402
from gpt2_tokenizer import GPT2Tokenizer  # noqa: E402

out = []


def rec(name, values):
    values = list(values)
    out.append(f"{name} {len(values)} " + " ".join(str(v) for v in values))


def fl(x):
    """a float32 as Python's repr of it (exact: rounding to float32 recovers it)"""
    return repr(float(x))


def shapes(loader):
    s = []
    for x, y in loader:
        assert x.shape == y.shape
        s += [x.shape[0], x.shape[1]]
    return s


def real_data():
    tokenizer = GPT2Tokenizer(os.path.join(SHARED, "data", "gpt2"))
    with open(os.path.join(SHARED, "data", "instruction-data.json"), encoding="utf-8") as f:
        data = json.load(f)
    train_portion, test_portion = int(len(data) * 0.85), int(len(data) * 0.1)
    train_data = data[:train_portion]
    test_data = data[train_portion:train_portion + test_portion]
    val_data = data[train_portion + test_portion:]
    rec("split_lengths", [len(train_data), len(val_data), len(test_data)])
    rec("subset_lengths", [len(train_data[:10]), len(val_data[:10]), len(test_data[:10])])

    prompts = [[i, format_input(data[i])] for i in (0, 1, 2, 3, 50, 934, 1099)]
    with open(os.path.join(ROOT, "tests", "data", "instruct_prompts.txt"), "w") as f:
        json.dump(prompts, f, indent=1)

    train_ds = InstructionDataset(train_data, tokenizer)
    rec("train_lens", [len(t) for t in train_ds.encoded_texts])
    rec("train_sums", [sum(i * (k + 1) for k, i in enumerate(t)) % 2**31 for t in train_ds.encoded_texts])
    rec("train_ids_0", train_ds.encoded_texts[0])

    collate = partial(custom_collate_fn, allowed_max_length=1024)
    torch.manual_seed(123)
    train_loader = DataLoader(train_ds, batch_size=8, collate_fn=collate, shuffle=True, drop_last=True, num_workers=0)
    val_loader = DataLoader(InstructionDataset(val_data, tokenizer), batch_size=8, collate_fn=collate,
                            shuffle=False, drop_last=False, num_workers=0)
    rec("train_len", [len(train_loader)])
    s, first, last = [], None, None
    for x, y in train_loader:
        s += [x.shape[0], x.shape[1]]
        first = first or (x[0].tolist(), y[0].tolist())
        last = (x[0].tolist(), y[0].tolist())
    rec("train_shapes", s)
    rec("first_input", first[0])
    rec("first_target", first[1])
    rec("last_input", last[0])
    rec("last_target", last[1])
    rec("after_epoch_rand", [fl(v) for v in torch.rand(2)])
    rec("train_shapes_2", shapes(train_loader))
    rec("val_shapes", shapes(val_loader))

    torch.manual_seed(7)
    cut = DataLoader(InstructionDataset(val_data, tokenizer), batch_size=4, shuffle=True, drop_last=False,
                     collate_fn=partial(custom_collate_fn, allowed_max_length=40))
    xs, ys, s = [], [], []
    for x, y in cut:
        s += [x.shape[0], x.shape[1]]
        xs += x.flatten().tolist()
        ys += y.flatten().tolist()
    rec("cut_shapes", s)
    rec("cut_inputs", xs)
    rec("cut_targets", ys)


COLLATE = [  # (batch, pad_token_id, ignore_index, allowed_max_length)
    ([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]], 50256, -100, None),          # the book's example
    ([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]], 50256, -100, 2),
    ([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]], 50256, -100, 0),
    ([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]], 50256, -100, -2),
    ([[0, 1, 2, 3, 4], [5, 6], [7, 8, 9]], 50256, -100, 100),
    ([[11, 50256, 12, 50256], [13], [50256, 50256]], 50256, -100, None),  # real 50256s: all but the first go too
    ([[3, 0, 4], [0], [5, 6, 7, 8]], 0, -1, None),                        # another pad and ignore_index
    ([[42]], 50256, -100, None),
    ([[], [1, 2]], 50256, -100, None),
    ([[9, 8, 7, 6, 5, 4, 3]], 50256, -100, 4),
]


def collate_cases():
    for k, (batch, pad, ignore, allowed) in enumerate(COLLATE):
        x, y = custom_collate_fn(batch, pad, ignore, allowed)
        rec(f"collate{k}_lens", [len(b) for b in batch])
        rec(f"collate{k}_ids", [i for b in batch for i in b])
        rec(f"collate{k}_args", [pad, ignore, int(allowed is not None), allowed or 0])
        rec(f"collate{k}_shape", list(x.shape))
        rec(f"collate{k}_inputs", x.flatten().tolist())
        rec(f"collate{k}_targets", y.flatten().tolist())


def cross_entropy_cases():
    torch.manual_seed(2024)
    cases = [(2, 5, 7, [[], []]), (3, 6, 11, [[4, 5], [1, 2, 3, 4, 5], []]), (2, 4, 50, [[0, 1, 2, 3], [0, 1, 2, 3]]),
             (4, 8, 9, [[7], [5, 6, 7], [], [2, 3, 4, 5, 6, 7]])]
    for k, (b, T, V, pads) in enumerate(cases):
        logits = (torch.randn(b, T, V) * 3).requires_grad_()
        targets = torch.randint(0, V, (b, T))
        for r, cols in enumerate(pads):
            for c in cols:
                targets[r, c] = -100
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        loss.backward()
        rec(f"ce{k}_shape", [b, T, V])
        rec(f"ce{k}_logits", [fl(v) for v in logits.detach().flatten()])
        rec(f"ce{k}_targets", targets.flatten().tolist())
        rec(f"ce{k}_loss", [fl(loss.item())])
        rec(f"ce{k}_grad", [fl(v) for v in logits.grad.flatten()])


def main():
    real_data()
    collate_cases()
    cross_entropy_cases()
    with open(os.path.join(ROOT, "tests", "data", "instruct_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
