#!/usr/bin/env python3
"""Writes tests/data/variants_golden.txt: the attention variants of tests/tools/variants_ref.py in PyTorch 1.13,
bit for bit, for tests/test_variants.c.

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_variants_golden.py

A case: torch.manual_seed(seed), the module, x = torch.rand(b, t, d_in) * 2 - 1, out = module(x), w =
torch.rand(out.shape) * 2 - 1 and (out * w).sum().backward() (a weighted loss, never a plain sum). Records:
`case mla SEED B T D_IN D_OUT HEADS LATENT QKV_BIAS PREFILL` (LATENT 0: the default), then `out HASH`, `grad
x HASH`, `grad NAME HASH` for each parameter in registration order, and `cached HASH`: batch row 0 through
the cache, PREFILL tokens at once then one at a time, the outputs concatenated. HASH: FNV-1a of the float32
bits.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from variants_ref import MultiHeadLatentAttention  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MLA = [  # seed, b, t, d_in, d_out, heads, latent (0: default), qkv_bias, prefill
    (1, 2, 5, 8, 8, 2, 4, 0, 2),
    (2, 1, 7, 6, 12, 3, 0, 1, 3),
    (3, 3, 4, 16, 16, 4, 5, 0, 1),
    (4, 1, 9, 10, 8, 1, 3, 0, 9),  # one head: no qkv bias (see tests/test_variants.c)
    (6, 2, 5, 8, 12, 2, 4, 1, 2),
    (5, 2, 6, 24, 32, 8, 7, 0, 4),
]


def fnv(t):
    h = 0x811C9DC5
    for byte in t.detach().contiguous().numpy().astype(np.float32).tobytes():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def main():
    torch.set_num_threads(1)
    lines = []
    for seed, b, t, d_in, d_out, heads, latent, bias, prefill in MLA:
        torch.manual_seed(seed)
        m = MultiHeadLatentAttention(d_in, d_out, 0.0, heads, qkv_bias=bool(bias), latent_dim=latent or None)
        x = (torch.rand(b, t, d_in) * 2 - 1).requires_grad_(True)
        out = m(x)
        w = torch.rand(out.shape) * 2 - 1
        (out * w).sum().backward()
        lines.append(f"case mla {seed} {b} {t} {d_in} {d_out} {heads} {latent} {bias} {prefill}")
        lines.append(f"out {fnv(out)}")
        lines.append(f"grad x {fnv(x.grad)}")
        for name, p in m.named_parameters():
            lines.append(f"grad {name} {fnv(p.grad)}")
        with torch.no_grad():
            cache = {"c_kv": None, "pos": 0}
            x0 = x[:1].detach()
            outs = [m(x0[:, :prefill], cache)] + [m(x0[:, i:i + 1], cache) for i in range(prefill, t)]
            lines.append(f"cached {fnv(torch.cat(outs, dim=1))}")
    with open(os.path.join(ROOT, "tests", "data", "variants_golden.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
