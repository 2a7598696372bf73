#!/usr/bin/env python3
"""Writes tests/data/instruct_run_golden.txt: what ../shared/pytorch/finetune.py instruct prints, logs
and writes with --responses, on ../shared/data/instruction-data.json, for the book's test-mode model
and for the small GPT-2 of tests/tools/gen_gpt2_golden.py (in Hugging Face's layout; tests/test_gpt.c's
write_gpt2 draws the same weights). tests/test_finetune.c runs ./build/finetune instruct with the same
flags and compares.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_instruct_run_golden.py   (Debian's python3-torch)

A record is `run <flags>` (GPT2DIR: that model's directory), then `out <line>` for each line printed,
`log <step> <loss>` for each line of --log, `resp <line>` for each line of the --responses file (it
ends without a newline, as json.dump writes it), and `end`."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from gen_classify_golden import write_gpt2  # noqa: E402

FINETUNE = os.path.join(ROOT, "..", "shared", "pytorch", "finetune.py")
RUNS = [  # small: the C runs each twice (exact and fast math), under ASan too
    "--subset 8 --batch 4 --allowed-max-length 24 --epochs 1 --eval-freq 1 --eval-iter 1 --max-new-tokens 12 "
    "--show-batches",
    "--gpt2 GPT2DIR --subset 12 --batch 4 --epochs 2 --eval-freq 2 --eval-iter 2 --max-new-tokens 10 "
    "--allowed-max-length 30 --lr 1e-3 --seed 9",
]


def main():
    out = []
    with tempfile.TemporaryDirectory() as d:
        write_gpt2(d)
        for flags in RUNS:
            log, resp = os.path.join(d, "log.txt"), os.path.join(d, "responses.json")
            args = flags.replace("GPT2DIR", d).split() + ["--log", log, "--responses", resp]
            p = subprocess.run([sys.executable, FINETUNE, "instruct"] + args, capture_output=True, text=True, check=True)
            out.append("run " + flags)
            out += ["out " + line for line in p.stdout.split("\n")[:-1]]
            for line in open(log):
                _, step, _, loss = line.split()
                out.append(f"log {step} {loss}")
            out += ["resp " + line for line in open(resp, encoding="ascii").read().split("\n")]
            out.append("end")
    with open(os.path.join(ROOT, "tests", "data", "instruct_run_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
