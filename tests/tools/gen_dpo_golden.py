#!/usr/bin/env python3
"""Writes the golden files of tests/test_dpo.c, from tests/tools/dpo.py (the book's DPO notebook on PyTorch 1.13).

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_dpo_golden.py

tests/data/dpo_run_golden.txt: records as instruct_run_golden.txt's: `run <flags>` (GPT2DIR: the small GPT-2 that
dpo_gpt2 writes in Hugging Face's layout; tests/test_dpo.c's write_dpo_gpt2 draws the same weights), `out <line>`
for each line dpo.py prints, `log <step> <loss>` for each line of --log, `resp <line>` for each line of the
--responses file, `end`.

tests/data/dpo_golden.txt: records `name n v1 ... vn` (floats as Python's repr of the float32):
  - logsigmoid_x, logsigmoid_y, logsigmoid_grad: F.logsigmoid on values across both tails, and its gradient for
    the weights logsigmoid_w;
  - logprobs<k>_*: compute_logprobs on random logits (b, t, v), labels and a mask (k = 1: with the mask, 2: none):
    the inputs, the output and d sum(w * out) / d logits;
  - dpo_*: compute_dpo_loss on four random (b,) vectors, beta 0.25: the loss, the rewards, and the loss's
    gradients for the policy's two inputs;
  - rowsum<n>_*: x.sum(-1) and x.mean(-1) of (3, n) random rows (ATen's inner sums, whose order compute_logprobs's
    masked sum and the book LayerNorm's mean follow);
  - collate_*: custom_collate_fn on a hand-made dataset (items of prompt/chosen/rejected ids), allowed_max_length
    6 and mask_prompt_tokens False: chosen, rejected and both masks.
tests/data/dpo_pprint.txt: JSON [[entry, pprint.pformat(entry) + "\\n"], ...] for entries whose strings need
pprint's cuts, quotes and escapes.
"""
import json
import os
import pprint
import struct
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from dpo import compute_dpo_loss, compute_logprobs, custom_collate_fn  # noqa: E402

DPO = os.path.join(HERE, "dpo.py")
RUNS = [  # small: the C runs each in exact and the default math, and under ASan
    "--subset 8 --batch 4 --max-new-tokens 6 --eval-freq 1 --eval-iter 1 --lr 1e-3 --show-batches",
    "--gpt2 GPT2DIR --subset 12 --batch 4 --epochs 2 --eval-freq 2 --eval-iter 2 --max-new-tokens 6 "
    "--allowed-max-length 90 --lr 1e-3 --beta 0.3 --seed 9 --weight-decay 0.05",
    "--emb-dim 16 --heads 4 --layers 2 --qkv-bias --context 160 --subset 6 --batch 3 --eval-iter 2 "
    "--max-new-tokens 5 --lr 5e-4 --beta 0.5 --seed 3 --eval-freq 1",
]
V, C, E, H, L = 50257, 128, 8, 2, 1  # dpo_gpt2's sizes: a context the preference texts fit in


def dpo_gpt2(d):
    """A GPT-2 in Hugging Face's layout: manual_seed(11), randn(shape) * 0.05 per key in this order (LayerNorm
    weights 1 + randn * 0.1)."""
    torch.manual_seed(11)
    w = {}

    def draw(name, *shape, ln=False):
        t = torch.randn(*shape)
        w[name] = 1 + t * 0.1 if ln else t * 0.05

    draw("wte.weight", V, E)
    draw("wpe.weight", C, E)
    for b in range(L):
        p = f"h.{b}."
        draw(p + "ln_1.weight", E, ln=True)
        draw(p + "ln_1.bias", E)
        draw(p + "attn.c_attn.weight", E, 3 * E)
        draw(p + "attn.c_attn.bias", 3 * E)
        draw(p + "attn.c_proj.weight", E, E)
        draw(p + "attn.c_proj.bias", E)
        draw(p + "ln_2.weight", E, ln=True)
        draw(p + "ln_2.bias", E)
        draw(p + "mlp.c_fc.weight", E, 4 * E)
        draw(p + "mlp.c_fc.bias", 4 * E)
        draw(p + "mlp.c_proj.weight", 4 * E, E)
        draw(p + "mlp.c_proj.bias", E)
    draw("ln_f.weight", E, ln=True)
    draw("ln_f.bias", E)
    hdr, off, blobs = {}, 0, []
    for k in sorted(w):
        b = w[k].contiguous().numpy().tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(w[k].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    json.dump({"n_embd": E, "n_head": H, "n_layer": L, "n_positions": C, "vocab_size": V},
              open(os.path.join(d, "config.json"), "w"))


def runs():
    out = []
    with tempfile.TemporaryDirectory() as d:
        dpo_gpt2(d)
        for flags in RUNS:
            log, resp = os.path.join(d, "log.txt"), os.path.join(d, "responses.json")
            args = flags.replace("GPT2DIR", d).split() + ["--log", log]
            if "GPT2DIR" in flags:
                args += ["--responses", resp]
            p = subprocess.run([sys.executable, DPO] + args, capture_output=True, text=True, check=True)
            out.append("run " + flags)
            out += ["out " + line for line in p.stdout.split("\n")[:-1]]
            for line in open(log):
                _, step, _, loss = line.split()
                out.append(f"log {step} {loss}")
            if "GPT2DIR" in flags:
                out += ["resp " + line for line in open(resp, encoding="ascii").read().split("\n")]
            out.append("end")
    with open(os.path.join(ROOT, "tests", "data", "dpo_run_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


recs = []


def rec(name, values):
    values = [repr(float(v)) if isinstance(v, float) else str(v) for v in values]
    recs.append(f"{name} {len(values)} " + " ".join(values))


def flat(t):
    return [float(v) if t.dtype.is_floating_point else int(v) for v in t.detach().flatten().tolist()]


def numbers():
    x = torch.tensor([-40.0, -20.0, -5.5, -1.0, -0.25, -1e-3, 0.0, 1e-3, 0.3, 1.0, 4.75, 17.0, 30.0, 90.0],
                     requires_grad=True)
    y = F.logsigmoid(x)
    torch.manual_seed(1)
    w = torch.rand(x.shape) * 2 - 1
    (y * w).sum().backward()
    rec("logsigmoid_x", flat(x))
    rec("logsigmoid_w", flat(w))
    rec("logsigmoid_y", flat(y))
    rec("logsigmoid_grad", flat(x.grad))
    for k, masked in ((1, True), (2, False)):
        torch.manual_seed(10 + k)
        b, t, v = 3, 6, 11
        logits = (torch.randn(b, t, v) * 2).requires_grad_(True)
        labels = torch.randint(0, v, (b, t))
        mask = torch.rand(b, t) < 0.6
        mask[:, 3] = True  # every row keeps a token after the shift
        out = compute_logprobs(logits, labels, mask if masked else None)
        w = torch.rand(out.shape) * 2 - 1
        (out * w).sum().backward()
        rec(f"logprobs{k}_shape", [b, t, v])
        rec(f"logprobs{k}_logits", flat(logits))
        rec(f"logprobs{k}_labels", flat(labels))
        rec(f"logprobs{k}_mask", [int(m) for m in mask.flatten().tolist()])
        rec(f"logprobs{k}_w", flat(w))
        rec(f"logprobs{k}_out", flat(out))
        rec(f"logprobs{k}_grad", flat(logits.grad))
    torch.manual_seed(21)
    mc, mr, rc, rr = (torch.randn(5) - 3 for _ in range(4))
    mc.requires_grad_(True)
    mr.requires_grad_(True)
    loss, cr, rj = compute_dpo_loss(mc, mr, rc, rr, beta=0.25)
    loss.backward()
    for n, t in (("mc", mc), ("mr", mr), ("rc", rc), ("rr", rr)):
        rec("dpo_" + n, flat(t))
    rec("dpo_out", [float(loss), float(cr), float(rj)])
    rec("dpo_grad_mc", flat(mc.grad))
    rec("dpo_grad_mr", flat(mr.grad))
    items = [{"prompt": [5, 6, 7], "chosen": [5, 6, 7, 1, 2, 8, 9], "rejected": [5, 6, 7, 1, 2, 3]},
             {"prompt": [4], "chosen": [4, 1, 2, 50256, 3], "rejected": [4, 1, 2, 11, 12, 13, 14, 15, 16]}]
    for i, it in enumerate(items):
        for key in ("prompt", "chosen", "rejected"):
            rec(f"collate_item{i}_{key}", it[key])
    for cut, masked, name in ((6, False, "a"), (None, True, "b")):
        batch = custom_collate_fn(items, pad_token_id=50256, allowed_max_length=cut, mask_prompt_tokens=masked)
        rec(f"collate_{name}_shape", list(batch["chosen"].shape))
        for key in ("chosen", "rejected", "chosen_mask", "rejected_mask"):
            rec(f"collate_{name}_{key}", [int(v) for v in batch[key].flatten().tolist()])
    # x.sum(-1) and x.mean(-1) of (3, n) rows: ATen's inner sums (compute_logprobs's masked sum; LayerNorm's mean)
    for n in (1, 3, 4, 5, 6, 7, 8, 9, 15, 16, 31, 33, 64, 76, 77, 100, 129, 257, 768, 1000):
        torch.manual_seed(100 + n)
        x = torch.randn(3, n) * 3
        rec(f"rowsum{n}_x", flat(x))
        rec(f"rowsum{n}_sum", flat(x.sum(-1)))
        rec(f"rowsum{n}_mean", flat(x.mean(-1)))
    with open(os.path.join(ROOT, "tests", "data", "dpo_golden.txt"), "w") as f:
        f.write("\n".join(recs) + "\n")


def pprints():
    entries = [
        {"instruction": "Short.", "input": "", "output": "x", "chosen": "y", "rejected": "z"},
        {"instruction": "It's a \"mixed\" quote string that is long enough to be cut into two or three pieces here.",
         "input": "tab\there and a newline\nthen a second line that is also fairly long so that it needs a cut too",
         "output": "back\\slash, caf\u00e9 na\u00efve \u4e2d\u6587 words " * 4,
         "rejected": "averyveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryveryverylongword "
                     "and more",
         "chosen": "ends with spaces    " * 5},
        {"instruction": "Control \x01 and \x7f and non-breaking\u00a0space, zero\u200bwidth, line\u2028sep " * 3,
         "input": "only 'single' quotes make double ones: " * 3, "output": "", "chosen": "a", "rejected": "b"},
    ]
    with open(os.path.join(ROOT, "tests", "data", "dpo_pprint.txt"), "w") as f:
        json.dump([[e, pprint.pformat(e, sort_dicts=False) + "\n"] for e in entries], f, indent=1)


if __name__ == "__main__":
    numbers()
    pprints()
    runs()
