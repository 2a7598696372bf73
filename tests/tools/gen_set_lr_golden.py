#!/usr/bin/env python3
"""Writes tests/data/set_lr_golden.txt: SGD (momentum), Adam and AdamW whose learning rate is set
between steps, as appendix D does (`for param_group in optimizer.param_groups: param_group["lr"] = lr`),
for tests/test_optim.c. Each step's gradient is torch.rand(6) - 0.5 after torch.manual_seed(11).

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_set_lr_golden.py   (the scalar kernels: add_ with alpha unfused)

A record: `opt NAME`, then `param <6 floats as %a>` after each of the 4 steps."""
import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LRS = [0.1, 0.05, 0.2, 0.001]
OPTS = [
    ("sgd", lambda p: torch.optim.SGD([p], lr=1.0, momentum=0.9)),
    ("adam", lambda p: torch.optim.Adam([p], lr=1.0)),
    ("adamw", lambda p: torch.optim.AdamW([p], lr=1.0, weight_decay=0.1)),
]


def main():
    out = []
    for name, make in OPTS:
        torch.manual_seed(11)
        p = torch.nn.Parameter(torch.rand(6))
        opt = make(p)
        out.append(f"opt {name}")
        for lr in LRS:
            p.grad = torch.rand(6) - 0.5
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            out.append("param " + " ".join(float(v).hex() for v in p.detach()))
    with open(os.path.join(ROOT, "tests", "data", "set_lr_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
