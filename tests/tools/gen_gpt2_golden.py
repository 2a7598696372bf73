#!/usr/bin/env python3
"""Writes tests/data/gpt2_golden.txt: a small GPT-2 in Hugging Face's layout with random weights,
mapped into ../shared/pytorch/gpt.py's GPTModel by the book's load_weights_into_gpt, and what it
gives: the logits of a prompt's last token and gpt.py's generate lines. tests/test_gpt.c draws the
same weights with attention.c's generator (the same draws), writes them as config.json +
model.safetensors, loads them with `gpt generate --gpt2 DIR` and compares.

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_gpt2_golden.py   (Debian's python3-torch)

The weights: torch.manual_seed(5), then for each key in the order below torch.randn(shape) * 0.02
(the LayerNorm weights 1 + randn * 0.1). Records: `logits n v1 ... vn` (%.9g), `run <gpt flags>`,
`out <line>`, `end`."""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "..", "shared", "pytorch"))
from gpt import GPTModel, generate, text_to_token_ids, token_ids_to_text  # noqa: E402
from gpt2_tokenizer import GPT2Tokenizer  # noqa: E402

V, C, E, H, L = 50257, 32, 16, 2, 2


def hf_weights():
    torch.manual_seed(5)
    w = {}
    def draw(name, *shape, ln=False):
        t = torch.randn(*shape)
        w[name] = 1 + t * 0.1 if ln else t * 0.02
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
    return w


def load_weights_into_gpt(gpt, w):
    """The book's mapping (chapter 5), over Hugging Face's key names."""
    with torch.no_grad():
        gpt.pos_emb.weight.copy_(w["wpe.weight"])
        gpt.tok_emb.weight.copy_(w["wte.weight"])
        for b, blk in enumerate(gpt.trf_blocks):
            p = f"h.{b}."
            q_w, k_w, v_w = torch.split(w[p + "attn.c_attn.weight"], E, dim=-1)
            blk.att.W_query.weight.copy_(q_w.T)
            blk.att.W_key.weight.copy_(k_w.T)
            blk.att.W_value.weight.copy_(v_w.T)
            q_b, k_b, v_b = torch.split(w[p + "attn.c_attn.bias"], E, dim=-1)
            blk.att.W_query.bias.copy_(q_b)
            blk.att.W_key.bias.copy_(k_b)
            blk.att.W_value.bias.copy_(v_b)
            blk.att.out_proj.weight.copy_(w[p + "attn.c_proj.weight"].T)
            blk.att.out_proj.bias.copy_(w[p + "attn.c_proj.bias"])
            blk.ff.layers[0].weight.copy_(w[p + "mlp.c_fc.weight"].T)
            blk.ff.layers[0].bias.copy_(w[p + "mlp.c_fc.bias"])
            blk.ff.layers[2].weight.copy_(w[p + "mlp.c_proj.weight"].T)
            blk.ff.layers[2].bias.copy_(w[p + "mlp.c_proj.bias"])
            blk.norm1.scale.copy_(w[p + "ln_1.weight"])
            blk.norm1.shift.copy_(w[p + "ln_1.bias"])
            blk.norm2.scale.copy_(w[p + "ln_2.weight"])
            blk.norm2.shift.copy_(w[p + "ln_2.bias"])
        gpt.final_norm.scale.copy_(w["ln_f.weight"])
        gpt.final_norm.shift.copy_(w["ln_f.bias"])
        gpt.out_head.weight.copy_(w["wte.weight"])


def main():
    tok = GPT2Tokenizer(os.path.join(ROOT, "..", "shared", "data", "gpt2"))
    cfg = {"vocab_size": V, "context_length": C, "emb_dim": E, "n_heads": H, "n_layers": L, "drop_rate": 0.0,
           "qkv_bias": True}
    out = []
    w = hf_weights()
    runs = [("Hello, I am", 10, 0.0, None), ("Every effort moves you", 12, 1.4, 25),
            ("A prompt that the window of thirty-two tokens will slide past soon enough, and then", 20, 1.0, 40)]
    for prompt, n, temp, top_k in runs:
        torch.manual_seed(123)
        model = GPTModel(cfg)
        load_weights_into_gpt(model, w)
        model.eval()
        idx = text_to_token_ids(prompt, tok)
        if prompt == runs[0][0]:
            with torch.no_grad():
                logits = model(idx)[0, -1, :64]
            out.append("logits 64 " + " ".join("%.9g" % x for x in logits.tolist()))
        torch.manual_seed(123)
        ids = generate(model, idx, n, C, temp, top_k)
        flags = f'--sample-tokens {n} --prompt "{prompt}"'
        if temp:
            flags += f" --temperature {temp} --top-k {top_k}"
        out.append("run " + flags)
        out.append("out Output text: " + token_ids_to_text(ids, tok))
        out.append("end")
    with open(os.path.join(ROOT, "tests", "data", "gpt2_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
