"""The PyTorch side of bench's gpt-dpo workload (examples/bench.c runs the same work):

    python3 tests/tools/dpo_bench.py [--threads N]    prints one JSON line, as ../shared/pytorch/workloads.py

gpt-dpo: one step of the DPO notebook's train_model_dpo_simple at GPT-2 medium's shape (355M, 24 layers, 1024
wide, context 1024, qkv_bias, no dropout; workloads.py's finetune_model): the policy trainable under AdamW
(lr 5e-6, weight decay 0.01), its reference a frozen deep copy in eval mode; a batch of 8 chosen and 8
rejected texts of 77 tokens (the notebook's first batch's length), row i a prompt of 40 + i tokens, a chosen
text of 60 + 2i and a rejected one of 58 + 2i, padded with 50256, masks as the notebook's collate makes them.
A step: zero_grad, compute_dpo_loss_batch (two forwards of the policy with their graph, two of the reference
under no_grad), backward, step (ms/step, peak RSS)."""
import argparse
import copy
import json
import os
import resource
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "shared", "pytorch"))
sys.path.insert(0, HERE)
from dpo import compute_dpo_loss_batch  # noqa: E402
from workloads import finetune_model, timed  # noqa: E402


def dpo_batch():
    torch.manual_seed(0)
    B, T = 8, 77
    chosen = torch.randint(0, 50256, (B, T))
    rejected = torch.randint(0, 50256, (B, T))
    chosen_mask = torch.zeros(B, T, dtype=torch.bool)
    rejected_mask = torch.zeros(B, T, dtype=torch.bool)
    for i in range(B):
        p, c, r = 40 + i, 60 + 2 * i, 58 + 2 * i
        chosen[i, c:] = 50256
        rejected[i, r:] = 50256
        chosen_mask[i, p + 2:c] = True
        rejected_mask[i, p + 2:r] = True
    return {"chosen": chosen, "rejected": rejected, "chosen_mask": chosen_mask, "rejected_mask": rejected_mask}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    policy = finetune_model(1024, 16, 24)
    reference = copy.deepcopy(policy)
    reference.eval()
    for prm in reference.parameters():
        prm.requires_grad = False
    policy.train()
    opt = torch.optim.AdamW(policy.parameters(), lr=5e-6, weight_decay=0.01)
    batch = dpo_batch()

    def step():
        opt.zero_grad()
        loss, _, _ = compute_dpo_loss_batch(batch, policy, reference, 0.1)
        loss.backward()
        opt.step()

    s = timed(step, 1, 1, repeat=3)
    print(json.dumps({"ms_per_step": s * 1e3, "workload": "gpt-dpo", "threads": a.threads,
                      "engine": f"torch {torch.__version__}",
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
