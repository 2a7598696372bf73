#!/usr/bin/env python3
"""Writes tests/data/clip_grad_golden.txt: torch.nn.utils.clip_grad_norm_ of PyTorch 1.13 on gradients
drawn with torch.rand after torch.manual_seed (which the C generator draws too), for tests/test_nn.c.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_clip_grad_golden.py   (Debian's python3-torch)

The scalar kernels, as for every golden file of exact math (the AVX2 build fuses the norm's multiply-adds).

A record: `case NAME max_norm norm_type`, `total <float as %a>`, then `grad <k> <FNV-1a of its float32 bits>`
for each parameter (`grad <k> none` for one without .grad)."""
import math
import os

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name, seed, shapes (None: a parameter without .grad), scale, max_norm, norm_type, (k, index, value) to plant
CASES = [
    ("small", 1, [(3, 5), (17,), (8, 8), (1,)], 2.0, 1.0, 2.0, None),
    ("unclipped", 2, [(3, 5), (17,), (8, 8)], 0.01, 100.0, 2.0, None),
    ("max_norm_0.3", 3, [(7, 9), (31,)], 1.0, 0.3, 2.0, None),
    ("big", 4, [(1000, 1001), (768,), (3, 50257)], 1.0, 1.0, 2.0, None),
    ("inf_norm", 5, [(3, 5), (17,), (8, 8)], 3.0, 1.0, math.inf, None),
    ("one_inf_norm", 6, [(40,)], 3.0, 0.5, math.inf, None),
    ("a_nan", 7, [(3, 5), (17,)], 1.0, 1.0, 2.0, (1, 4, math.nan)),
    ("an_inf", 8, [(3, 5), (17,)], 1.0, 1.0, 2.0, (0, 2, math.inf)),
    ("some_without_grad", 9, [(3, 5), None, (9,), None], 5.0, 1.0, 2.0, None),
    ("none_with_grad", 10, [None, None], 1.0, 1.0, 2.0, None),
]


def fnv(t):
    h = 0x811C9DC5
    for b in t.detach().contiguous().numpy().astype(np.float32).tobytes():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def main():
    out = []
    for name, seed, shapes, scale, max_norm, norm_type, plant in CASES:
        torch.manual_seed(seed)
        params = []
        for shape in shapes:
            p = torch.zeros(shape if shape else (2,), requires_grad=True)
            if shape:
                p.grad = (torch.rand(shape) - 0.5) * scale  # rand: the same draws on every CPU kernel
            params.append(p)
        if plant:
            params[plant[0]].grad.view(-1)[plant[1]] = plant[2]
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
        out.append(f"case {name} {max_norm!r} {norm_type!r}")
        out.append(f"total {float(total).hex()}")
        for k, p in enumerate(params):
            out.append(f"grad {k} {fnv(p.grad) if p.grad is not None else 'none'}")
    with open(os.path.join(ROOT, "tests", "data", "clip_grad_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
