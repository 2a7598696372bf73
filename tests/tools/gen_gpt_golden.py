#!/usr/bin/env python3
"""Writes tests/data/gpt_golden.txt: what ../shared/pytorch/gpt.py prints (and logs) for small
configs of the book's GPT, trained on tests/data/tokenizer_corpus.txt (our own text), and what its
`generate` prints; tests/test_gpt.c runs ./build/gpt with the same flags and compares.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_gpt_golden.py   (Debian's python3-torch)

With Debian's reference BLAS (libblas3, the default alternative: each sum over k in order, as exact
math here) and the scalar kernels (ATEN_CPU_CAPABILITY=default: tanh and exp from libm).

A record is `run <gpt.py flags>`, then `out <line>` for each line it prints (stdout; the training time,
on stderr, is not kept), `log <step> <loss>` for each line of --log, and `end`."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT = os.path.join(ROOT, "..", "shared", "pytorch", "gpt.py")
CORPUS = "tests/data/tokenizer_corpus.txt"

RUNS = [
    # dropout 0.1, no qkv bias, batch 2 (the book's defaults, small)
    f"train --data {CORPUS} --layers 2 --emb-dim 32 --heads 4 --context 16 --epochs 1",
    # no dropout, qkv bias, batch 4, a short context, other eval cadence
    f"train --data {CORPUS} --layers 1 --emb-dim 16 --heads 2 --context 8 --batch 4 --drop 0 --qkv-bias "
    f"--epochs 1 --eval-freq 7 --eval-iter 2 --sample-tokens 10",
    # batch 1, more dropout, other ratio, lr, weight decay and prompt; two epochs
    f"train --data {CORPUS} --layers 2 --emb-dim 24 --heads 3 --context 12 --batch 1 --drop 0.2 --qkv-bias "
    f"--epochs 2 --train-ratio 0.3 --lr 0.001 --weight-decay 0.05 --sample-tokens 8 --eval-freq 20 "
    f"--prompt \"The attention\"",
    # batch 3, one head, a context of 5, seed 7
    f"train --data {CORPUS} --layers 1 --emb-dim 8 --heads 1 --context 5 --batch 3 --epochs 1 --seed 7 "
    f"--eval-freq 10 --eval-iter 3 --sample-tokens 12",
    # chapter 4's greedy line and chapter 5's sampler, on small untrained models
    "generate --layers 2 --emb-dim 32 --heads 4 --context 32 --sample-tokens 10",
    "generate --layers 2 --emb-dim 32 --heads 4 --context 32 --temperature 1.4 --top-k 25 --sample-tokens 15",
    "generate --layers 1 --emb-dim 16 --heads 2 --context 64 --temperature 0.8 --sample-tokens 20 --seed 7 "
    "--prompt \"Every effort moves you\" --qkv-bias",
    "generate --layers 1 --emb-dim 16 --heads 2 --context 64 --top-k 1 --sample-tokens 20 --eos-id 49211",
    # a prompt longer than the context: idx[:, -context_size:] slides
    "generate --layers 2 --emb-dim 16 --heads 4 --context 6 --temperature 1.0 --top-k 5 --sample-tokens 12 "
    "--prompt \"A prompt of many more tokens than the context holds\"",
]


def main():
    out = []
    for flags in RUNS:
        import shlex
        argv = shlex.split(flags)
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log.txt")
            if argv[0] == "train":
                argv += ["--log", log]
            r = subprocess.run([sys.executable, GPT] + argv, cwd=ROOT, capture_output=True, text=True, check=True)
            out.append("run " + flags)
            out += ["out " + line for line in r.stdout.split("\n")[:-1]]
            if argv[0] == "train":
                with open(log) as f:
                    out += ["log " + line[len("step "):].replace(" loss ", " ") for line in f.read().split("\n") if line]
        out.append("end")
        print(flags, file=sys.stderr)
    with open(os.path.join(ROOT, "tests", "data", "gpt_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
