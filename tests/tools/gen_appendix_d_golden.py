#!/usr/bin/env python3
"""Writes tests/data/appendix_d_golden.txt: what ../shared/pytorch/gpt.py appendix-d prints (and logs)
for small configs of the book's GPT on tests/data/tokenizer_corpus.txt; tests/test_gpt.c runs
./build/gpt appendix-d with the same flags and compares.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_appendix_d_golden.py   (Debian's python3-torch)

The same records and the same setting as gen_gpt_golden.py (reference BLAS, the scalar kernels), but
`log <step> <lr> <loss>`: appendix D's log has each step's learning rate, as Python's repr writes it."""
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(ROOT, "..", "shared", "pytorch", "gpt.py")
CORPUS = "tests/data/tokenizer_corpus.txt"

RUNS = [
    # the appendix's defaults (warmup 0.2, initial and min lr 1e-5, clip 1.0, peak 0.001), small
    f"appendix-d --data {CORPUS} --layers 2 --emb-dim 32 --heads 4 --context 16 --epochs 2 --eval-freq 3",
    # every schedule flag, no dropout, qkv bias, batch 4, a longer warmup and a min_lr above initial_lr
    f"appendix-d --data {CORPUS} --layers 1 --emb-dim 16 --heads 2 --context 8 --batch 4 --drop 0 --qkv-bias "
    f"--epochs 3 --warmup 0.5 --initial-lr 0.0001 --min-lr 0.0002 --clip 0.5 --lr 0.003 --eval-freq 4 --eval-iter 2 "
    f"--prompt \"The attention\"",
]


def main():
    out = []
    for flags in RUNS:
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log.txt")
            r = subprocess.run([sys.executable, GPT] + shlex.split(flags) + ["--log", log], cwd=ROOT,
                               capture_output=True, text=True, check=True)
            out.append("run " + flags)
            out += ["out " + line for line in r.stdout.split("\n")[:-1]]
            with open(log) as f:  # "step N lr X loss Y" -> "log N X Y"
                out += ["log " + " ".join(line.split()[1::2]) for line in f.read().split("\n") if line]
        out.append("end")
        print(flags, file=sys.stderr)
    with open(os.path.join(ROOT, "tests", "data", "appendix_d_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
