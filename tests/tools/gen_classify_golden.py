#!/usr/bin/env python3
"""Writes tests/data/classify_golden.txt: what ../shared/pytorch/finetune.py classify prints (and logs)
on ../shared/data/sms_spam_sample.tsv, for the book's test-mode models and for the small GPT-2 of
tests/tools/gen_gpt2_golden.py (written in Hugging Face's layout; tests/test_gpt.c's write_gpt2 draws
the same weights with attention.c's generator), with and without LoRA. tests/test_finetune.c runs
./build/finetune classify with the same flags and compares.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_classify_golden.py   (Debian's python3-torch)

A record is `run <flags>` (GPT2DIR: that model's directory), then `out <line>` for each line it prints,
`log <step> <loss>` for each line of --log, and `end`."""
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from gen_gpt2_golden import C, E, H, L, V, hf_weights  # noqa: E402

FINETUNE = os.path.join(ROOT, "..", "shared", "pytorch", "finetune.py")
RUNS = [
    "--epochs 2 --eval-freq 5",
    "--lora 4 --lora-alpha 8 --print-model --emb-dim 16 --heads 4 --layers 2 --qkv-bias --batch 4 --epochs 1 "
    "--eval-freq 7 --max-length 20 --seed 7",
    "--gpt2 GPT2DIR --epochs 1 --eval-freq 3 --lr 1e-3",
    "--gpt2 GPT2DIR --lora 2 --print-model --epochs 1 --eval-freq 4 --weight-decay 0.05",
]


def write_gpt2(d):
    w = {k: v.contiguous() for k, v in hf_weights().items()}
    hdr, off, blobs = {}, 0, []
    for k in sorted(w):
        b = w[k].numpy().tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(w[k].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    json.dump({"n_embd": E, "n_head": H, "n_layer": L, "n_positions": C, "vocab_size": V},
              open(os.path.join(d, "config.json"), "w"))


def main():
    out = []
    with tempfile.TemporaryDirectory() as d:
        write_gpt2(d)
        for flags in RUNS:
            log = os.path.join(d, "log.txt")
            args = flags.replace("GPT2DIR", d).split() + ["--log", log]
            p = subprocess.run([sys.executable, FINETUNE, "classify"] + args, capture_output=True, text=True, check=True)
            out.append("run " + flags)
            out += ["out " + line for line in p.stdout.splitlines()]
            for line in open(log):
                _, step, _, loss = line.split()
                out.append(f"log {step} {loss}")
            out.append("end")
    with open(os.path.join(ROOT, "tests", "data", "classify_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
