#!/usr/bin/env python3
"""The PyTorch side of bench's llm-generate and llm-train workloads (examples/bench.c runs the same work
with the same shapes), on llm_ref.py's Qwen3Model (the book's class, for PyTorch 1.13):

    python3 tests/tools/llm_bench.py llm-generate [--threads N] [--dtype F32|BF16] [--shape Qwen3-0.6B|Llama-3.2-1B]
    python3 tests/tools/llm_bench.py llm-train [--threads N]

Each prints one JSON line, as ../shared/pytorch/workloads.py does.

llm-generate: a random Qwen3 of Qwen3-0.6B's shape (28 layers, emb 1024, 16 heads of 128, 8 kv groups,
hidden 3072, vocab 151,936, the head tied to the embedding), in float32 or, as the book runs it, in
bfloat16 (model.to(torch.bfloat16)); the book's KV-cache loop (llm_ref.generate: the prompt once, then one
token at a time, greedy) on a 4-token prompt: 24 new tokens, the prompt's pass taken off (tokens/s).
--shape Llama-3.2-1B: a random Llama3Model of Llama-3.2-1B's shape instead (16 layers, emb 2048, 32 heads
of 64, 8 kv groups, hidden 8192, vocab 128,256, Llama 3's RoPE scaling, tied), as bench's llm-generate-llama.

llm-train: one AdamW step (lr 4e-4, weight decay 0.1) of a Qwen3 of GPT-2 small's size (emb 768, 12
layers, 12 heads of 64, 4 kv groups, hidden 2048, GPT-2's vocab, its own out_head, context 256) on
2 x 256 tokens of torch.randint after manual_seed(0): zero_grad, calc_loss_batch, backward, step (ms/step,
peak RSS)."""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "shared", "pytorch"))
sys.path.insert(0, HERE)
from llm_ref import Llama3Model, Qwen3Model, generate  # noqa: E402
from workloads import timed  # noqa: E402

QWEN3_06B = {"vocab_size": 151936, "context_length": 40960, "emb_dim": 1024, "n_heads": 16, "n_layers": 28,
             "hidden_dim": 3072, "head_dim": 128, "qk_norm": True, "n_kv_groups": 8, "rope_base": 1000000.0,
             "rms_norm_eps": 1e-6, "tie": True, "llama": False, "eos_token_id": None}
LLAMA32_1B = {"vocab_size": 128256, "context_length": 131072, "emb_dim": 2048, "n_heads": 32, "n_layers": 16,
              "hidden_dim": 8192, "head_dim": 64, "qk_norm": False, "n_kv_groups": 8, "rope_base": 500000.0,
              "rms_norm_eps": 1e-5, "tie": True, "llama": True, "eos_token_id": None,
              "rope_freq": {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_context_length": 8192}}
QWEN3_GPT2_SMALL = {"vocab_size": 50257, "context_length": 256, "emb_dim": 768, "n_heads": 12, "n_layers": 12,
                    "hidden_dim": 2048, "head_dim": 64, "qk_norm": True, "n_kv_groups": 4, "rope_base": 1000000.0,
                    "rms_norm_eps": 1e-6, "tie": False, "llama": False, "eos_token_id": None}


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def llm_generate(a):
    torch.manual_seed(123)
    llama = a.shape == "Llama-3.2-1B"
    model = Llama3Model(LLAMA32_1B) if llama else Qwen3Model(QWEN3_06B)
    model.out_head.weight = model.tok_emb.weight  # the released models' tied head
    if a.dtype == "BF16":
        model = model.to(torch.bfloat16)
    model.eval()
    idx = torch.tensor([[9906, 11, 1917, 0]] if llama else [[9707, 11, 1879, 0]])  # "Hello, world!" in its ids
    n = 24
    generate(model, idx, 2, 64)  # warm-up
    t = time.perf_counter()
    out = generate(model, idx, n + 1, 64)  # the prompt, then n tokens one at a time
    s = time.perf_counter() - t
    t = time.perf_counter()
    generate(model, idx, 1, 64)  # the prompt's pass alone, taken off
    s -= time.perf_counter() - t
    params = sum(p.numel() for p in model.parameters())
    return {"shape": a.shape, "tokens_per_s": n / s, "ms_per_token": 1e3 * s / n, "dtype": a.dtype, "params": params,
            "new_tokens": out.shape[1] - idx.shape[1]}


def llm_train(a):
    torch.manual_seed(123)
    model = Qwen3Model(QWEN3_GPT2_SMALL)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=0.1)
    torch.manual_seed(0)
    data = torch.randint(0, 50257, (2, 257))
    x, y = data[:, :-1], data[:, 1:]

    def step():
        opt.zero_grad()
        logits = model(x)
        F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
        opt.step()

    s = timed(step, 1, 1, repeat=3)
    return {"ms_per_step": s * 1e3, "tokens_per_s": 512 / s}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=["llm-generate", "llm-train"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="F32", choices=["F32", "BF16"])
    p.add_argument("--shape", default="Qwen3-0.6B", choices=["Qwen3-0.6B", "Llama-3.2-1B"])
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    fields = llm_generate(a) if a.workload == "llm-generate" else llm_train(a)
    line = {**fields, "workload": a.workload, "threads": a.threads, "engine": f"torch {torch.__version__}",
            "peak_rss_mb": peak_rss_mb()}
    print(json.dumps(line))


if __name__ == "__main__":
    main()
