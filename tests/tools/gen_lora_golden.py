#!/usr/bin/env python3
"""Writes tests/data/lora_golden.txt and tests/data/lora_repr_expected.txt: chapter 6's frozen model and
appendix E's LoRA on a small GPTModel, as ../shared/pytorch/finetune.py builds them (its classes, the
book's), for tests/test_finetune.c: the trainable counts, LoRA's A draws, the last token's logits, the
gradients that reach the trainable parameters, and three AdamW steps' losses; print(model) of the LoRA
model.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_lora_golden.py

A record is `name n v1 ... vn` (tests/tests.h's golden())."""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "..", "shared", "pytorch"))
from gpt import GPTModel  # noqa: E402
from finetune import replace_linear_with_lora, trainable  # noqa: E402

CFG = {"vocab_size": 97, "context_length": 16, "emb_dim": 12, "n_heads": 2, "n_layers": 2, "drop_rate": 0.0,
       "qkv_bias": True}
X = torch.tensor([[5, 17, 3, 90, 42, 8, 61], [1, 2, 3, 4, 5, 6, 7]])
Y = torch.tensor([0, 1])
out = []


def rec(name, t):
    v = t.detach().flatten().tolist() if torch.is_tensor(t) else list(t)
    out.append(f"{name} {len(v)} " + " ".join(repr(float(x)) for x in v))


def train3(model, prefix):
    torch.manual_seed(123)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    losses = []
    for step in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(X)[:, -1, :], Y)
        loss.backward()
        if step == 0:
            for n, p in model.named_parameters():
                if p.grad is not None and n in GRADS:
                    rec(prefix + "grad." + n, p.grad)
        opt.step()
        losses.append(loss.item())
    rec(prefix + "losses", losses)


GRADS = {"out_head.weight", "out_head.bias", "trf_blocks.1.ff.layers.0.weight", "final_norm.scale",
         "trf_blocks.1.att.W_query.bias", "trf_blocks.0.att.W_query.lora.B", "trf_blocks.1.ff.layers.2.lora.A",
         "out_head.lora.B"}

# chapter 6: all frozen, a new head, the last block and the final norm trainable
torch.manual_seed(123)
model = GPTModel(CFG)
model.eval()
for p in model.parameters():
    p.requires_grad = False
torch.manual_seed(123)
model.out_head = torch.nn.Linear(CFG["emb_dim"], 2)
for p in model.trf_blocks[-1].parameters():
    p.requires_grad = True
for p in model.final_norm.parameters():
    p.requires_grad = True
rec("cls.trainable", [trainable(model)])
with torch.no_grad():
    rec("cls.logits", model(X)[:, -1, :])
train3(model, "cls.")

# appendix E: a new head, everything frozen, LoRA on every Linear
torch.manual_seed(123)
model = GPTModel(CFG)
model.eval()
torch.manual_seed(123)
model.out_head = torch.nn.Linear(CFG["emb_dim"], 2)
rec("lora.trainable_before", [trainable(model)])
for p in model.parameters():
    p.requires_grad = False
rec("lora.trainable_after", [trainable(model)])
replace_linear_with_lora(model, 2, 4)
rec("lora.trainable_lora", [trainable(model)])
rec("lora.A0", model.trf_blocks[0].att.W_query.lora.A)
rec("lora.A_last", model.out_head.lora.A)
with torch.no_grad():
    model.trf_blocks[0].att.W_query.lora.B.fill_(0.25)  # B = 0 would hide the LoRA path from the logits
    rec("lora.logits", model(X)[:, -1, :])
    model.trf_blocks[0].att.W_query.lora.B.zero_()
train3(model, "lora.")
rec("lora.state_dict_len", [len(model.state_dict())])

with open(os.path.join(ROOT, "tests", "data", "lora_golden.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
with open(os.path.join(ROOT, "tests", "data", "lora_repr_expected.txt"), "w") as f:
    f.write(repr(model) + "\n")
