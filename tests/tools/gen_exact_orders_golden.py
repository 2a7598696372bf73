#!/usr/bin/env python3
"""Writes tests/data/exact_orders_golden.txt: PyTorch 1.13's results, bit for bit, for the ops whose summation
order the sweep of issue 40 (tests/tools/sweep.py) found the C getting wrong, at lengths that are not a
multiple of the vector width, for tests/test_exact_orders.c.

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_exact_orders_golden.py

Each case's inputs are torch.rand draws after torch.manual_seed(seed) (the C generator draws the same), scaled
as INPUTS says; a loss weighted by another draw (never a plain sum) gives the gradients. A record:
`case OP SEED D0 D1 ...`, then `OUTPUT <FNV-1a of its float32 bits>` for each output, in order (for a model:
its loss, then every parameter's gradient after one backward, by name).
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(ROOT), "shared", "pytorch"))
from gpt import GPTModel, LayerNorm  # noqa: E402  (the book's, op by op)
from toy_lm import ToyLM  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_ref import RMSNorm, build_model  # noqa: E402  (the bonus chapters' classes, for PyTorch 1.13)

# the row lengths: below, at and around the 8-wide vectors, the ilp-4 groups and the 16-element cascade steps
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 96, 97, 127, 255, 257, 1000, 4099]


def fnv(t):
    h = 0x811C9DC5
    for b in t.detach().contiguous().numpy().astype(np.float32).tobytes():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def rand(*shape, scale=4.0, shift=-2.0):
    return torch.rand(*shape) * scale + shift


def case_sum_last(r, n):
    x = rand(r, n)
    return [("sum", x.sum(-1)), ("mean", x.mean(-1)), ("sum_all", x.sum())]


def case_sum_dim0(n, c):
    x = rand(n, c)
    return [("sum0", x.sum(0))]


def case_var_last(r, n):
    x = rand(r, n).requires_grad_(True)
    w = rand(r)
    y = x.var(-1, unbiased=False)
    (y * w).sum().backward()
    return [("var", y), ("grad", x.grad)]


def case_softmax(r, n, log):
    x = rand(r, n, scale=8.0, shift=-4.0).requires_grad_(True)
    w = rand(r, n)
    y = torch.log_softmax(x, -1) if log else torch.softmax(x, -1)
    (y * w).sum().backward()
    return [("y", y), ("grad", x.grad)]


def case_div_other(r, n):
    a = rand(r, n).requires_grad_(True)
    b = (torch.rand(r, 1) + 0.5).requires_grad_(True)
    w = rand(r, n)
    (a / b * w).sum().backward()
    return [("grad_a", a.grad), ("grad_b", b.grad)]


def case_linear(b, t, k, n):
    x = rand(b, t, k).requires_grad_(True)
    weight = rand(n, k, scale=1.0, shift=-0.5).requires_grad_(True)
    bias = rand(n, scale=1.0, shift=-0.5).requires_grad_(True)
    w = rand(b, t, n)
    y = F.linear(x, weight, bias)
    (y * w).sum().backward()
    return [("y", y), ("grad_x", x.grad), ("grad_weight", weight.grad), ("grad_bias", bias.grad)]


def case_layer_norm(b, t, e):
    x = rand(b, t, e, scale=3.0, shift=-1.0).requires_grad_(True)
    ln = LayerNorm(e)
    with torch.no_grad():
        ln.scale.copy_(torch.rand(e) * 0.2 + 0.9)
        ln.shift.copy_(torch.rand(e) * 0.2 - 0.1)
    w = rand(b, t, e)
    y = ln(x)
    (y * w).sum().backward()
    return [("y", y), ("grad_x", x.grad), ("grad_scale", ln.scale.grad), ("grad_shift", ln.shift.grad)]


def case_cross_entropy(n, c):
    logits = rand(n, c).requires_grad_(True)
    pick, keep = torch.rand(n), torch.rand(n)
    target = (pick * c).long()  # truncation: the C converts the same floats
    target[keep < 0.3] = -100  # some targets ignored, unevenly
    if (target != -100).sum() == 0:
        target[0] = 0
    loss = F.cross_entropy(logits, target)
    (loss * 1.5).backward()
    return [("loss", loss), ("grad", logits.grad)]


def ids(b, t, vocab):
    return (torch.rand(b, t) * vocab).long()  # truncation: the C converts the same floats


def model_grads(model, x, y):
    """one backward of the cross-entropy: the loss and every parameter's gradient, in named_parameters order
    (the engine's order decides how a tensor's gradients are summed: q, k and v's into norm1's output)"""
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    return [("loss", loss)] + [(n, p.grad) for n, p in model.named_parameters()]


def case_gpt_grads(b, t, emb, heads, layers, vocab):
    model = GPTModel({"vocab_size": vocab, "context_length": t, "emb_dim": emb, "n_heads": heads, "n_layers": layers,
                      "drop_rate": 0.0, "qkv_bias": True})
    return model_grads(model, ids(b, t, vocab), ids(b, t, vocab))


def case_toylm_grads(b, t, d, heads, vocab):
    model = ToyLM(vocab, t, d, heads)
    return model_grads(model, ids(b, t, vocab), ids(b, t, vocab))


def case_rsqrt(r, n):
    x = rand(r, n, scale=4.0, shift=0.01).requires_grad_()
    w = rand(r, n)
    y = torch.rsqrt(x)
    (y * w).sum().backward()
    return [("y", y), ("grad", x.grad)]


def case_rms_norm(b, t, e):
    x = rand(b, t, e, scale=3.0, shift=-1.0).requires_grad_()
    norm = RMSNorm(e, eps=1e-6)
    with torch.no_grad():
        norm.scale.copy_(rand(e, scale=0.2, shift=0.9))
    w = rand(b, t, e)
    y = norm(x)
    (y * w).sum().backward()
    return [("y", y), ("grad_x", x.grad), ("grad_scale", norm.scale.grad)]


def case_llm_grads(b, t, emb, heads, kv, hd, vocab, llama):
    """Qwen3 (q/k norm) or Llama 3 with heads / kv heads in a group: RMSNorm's rsqrt, GQA's repeat_interleave"""
    cfg = {"vocab_size": vocab, "context_length": t, "emb_dim": emb, "n_heads": heads, "n_layers": 2,
           "hidden_dim": 2 * emb + 1, "head_dim": hd, "qk_norm": not llama, "n_kv_groups": kv,
           "rope_base": 10000.0, "rms_norm_eps": 1e-5 if llama else 1e-6, "llama": bool(llama), "tie": False}
    model = build_model(cfg)
    return model_grads(model, ids(b, t, vocab), ids(b, t, vocab))


def cases():
    seed = 0
    for n in LENGTHS:
        yield "sum_last", (3, n), lambda n=n: case_sum_last(3, n)
    for n in (5, 17, 33, 100, 300, 1000):
        for c in (1, 3, 4, 5, 7, 8, 9, 31, 32, 33, 37, 70):
            yield "sum_dim0", (n, c), lambda n=n, c=c: case_sum_dim0(n, c)
    for n in LENGTHS:
        yield "var_last", (3, n), lambda n=n: case_var_last(3, n)
        yield "softmax_last", (3, n), lambda n=n: case_softmax(3, n, False)
        yield "log_softmax_last", (3, n), lambda n=n: case_softmax(3, n, True)
        yield "div_other", (3, n), lambda n=n: case_div_other(3, n)
    for b, t, k, n in ((2, 5, 7, 9), (1, 17, 33, 40), (3, 10, 16, 100), (1, 1, 5, 3), (2, 33, 8, 31)):
        yield "linear", (b, t, k, n), lambda b=b, t=t, k=k, n=n: case_linear(b, t, k, n)
    for b, t, e in ((1, 1, 1), (1, 1, 5), (2, 3, 7), (1, 5, 8), (3, 7, 9), (2, 48, 96), (1, 17, 33), (2, 33, 257),
                    (1, 130, 24), (5, 9, 3)):
        yield "layer_norm", (b, t, e), lambda b=b, t=t, e=e: case_layer_norm(b, t, e)
    for n, c in ((1, 5), (3, 11), (17, 50257 // 1000), (40, 9), (100, 33), (300, 7), (7, 300)):
        yield "cross_entropy", (n, c), lambda n=n, c=c: case_cross_entropy(n, c)
    for b, t, emb, heads, layers, vocab in ((2, 9, 24, 3, 2, 37), (1, 5, 10, 5, 1, 11), (3, 17, 33, 3, 3, 50)):
        yield "gpt_grads", (b, t, emb, heads, layers, vocab), \
            lambda b=b, t=t, e=emb, h=heads, n=layers, v=vocab: case_gpt_grads(b, t, e, h, n, v)
    for b, t, d, heads, vocab in ((4, 8, 16, 4, 29), (2, 13, 9, 3, 40)):
        yield "toylm_grads", (b, t, d, heads, vocab), lambda b=b, t=t, d=d, h=heads, v=vocab: case_toylm_grads(b, t, d, h, v)
    # the sweep's llm findings: RMSNorm's rsqrt (its backward is RsqrtBackward0's, not pow's) and GQA's
    # repeat_interleave (an index_select: groups of 5, 7 and 8 summed in index order)
    for n in LENGTHS:
        yield "rsqrt", (3, n), lambda n=n: case_rsqrt(3, n)
    for b, t, e in ((1, 1, 1), (2, 3, 7), (3, 7, 9), (2, 48, 96), (1, 17, 33), (2, 5, 257)):
        yield "rms_norm", (b, t, e), lambda b=b, t=t, e=e: case_rms_norm(b, t, e)
    for d in ((2, 6, 20, 7, 1, 6, 31, 1), (1, 9, 16, 8, 1, 4, 23, 0), (2, 5, 30, 5, 1, 6, 17, 1), (2, 7, 24, 8, 2, 6, 29, 0),
              (1, 8, 12, 4, 4, 4, 13, 1), (2, 4, 18, 6, 3, 8, 19, 0)):
        yield "llm_grads", d, lambda d=d: case_llm_grads(*d)


def main():
    torch.set_num_threads(1)
    out = []
    for seed, (op, dims, fn) in enumerate(cases(), start=1):
        torch.manual_seed(seed)
        out.append(f"case {op} {seed} " + " ".join(map(str, dims)))
        for name, t in fn():
            out.append(f"{name} {fnv(t)}")
    path = os.path.join(ROOT, "tests", "data", "exact_orders_golden.txt")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}: {sum(1 for x in out if x.startswith('case'))} cases")


if __name__ == "__main__":
    main()
