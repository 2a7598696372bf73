#!/usr/bin/env python3
"""PyTorch 1.13 reference for ./build/llm: the book's Qwen3Model and Llama3Model (the bonus chapters
ch05/07_gpt_to_llama and ch05/11_qwen3; pkg/llms_from_scratch/qwen3.py, llama3.py and their kv_cache/
variants in rasbt/LLMs-from-scratch), written again for PyTorch 1.13:

- 1.13 has no nn.RMSNorm (the book's Llama uses it): TorchRMSNorm does what nn.RMSNorm does in float32
  (x * rsqrt(mean(x^2) + eps) * weight, parameter `weight`) and prints as it prints;
- no scaled_dot_product_attention is used (the book's classes do not use it either);
- the classes keep the book's structure, attribute names, parameter registration order (Llama's
  GroupedQueryAttention makes W_key, W_value, then W_query; Qwen3's W_query, W_key, W_value) and so
  the book's random draws; one forward takes an optional KV cache as the kv_cache/ variants do, and
  without one computes what the plain classes compute.

Weights in the Hugging Face layout both ways: config.json (Qwen3ForCausalLM, LlamaForCausalLM) and
model.safetensors or shards with model.safetensors.index.json, F32, BF16 or F16, under the hub's names
(load_weights_into_qwen / load_weights_into_llama's mapping). The safetensors format is read and
written here by hand (the `safetensors` package need not be installed).

    python3 llm_ref.py generate --model DIR --ids "1 2 3" --max-new-tokens 10 [--no-kv-cache]
    python3 llm_ref.py generate --config config.json --seed 123 --ids "1 2 3" --max-new-tokens 10
    python3 llm_ref.py train --config config.json --seed 123 --data FILE --tokenizer ../shared/data/gpt2 ...
    python3 llm_ref.py save-random --config config.json --seed 123 --out DIR [--dtype BF16] [--shards 2]

Goldens: tests/tools/gen_llm_golden.py.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED_PY = os.path.join(ROOT, "..", "shared", "pytorch")


# ---- the shared blocks ----------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    """The book's (Qwen3's) RMSNorm: computed in float32, `scale` (and an optional `shift`)."""

    def __init__(self, emb_dim, eps=1e-6, bias=False, qwen3_compatible=True):
        super().__init__()
        self.eps = eps
        self.qwen3_compatible = qwen3_compatible
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim)) if bias else None

    def forward(self, x):
        input_dtype = x.dtype
        if self.qwen3_compatible:
            x = x.to(torch.float32)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        norm_x = x * torch.rsqrt(variance + self.eps)
        norm_x = norm_x * self.scale
        if self.shift is not None:
            norm_x = norm_x + self.shift
        return norm_x.to(input_dtype)


class TorchRMSNorm(nn.Module):
    """What nn.RMSNorm (PyTorch 2.4+) computes in float32, for the book's Llama: `weight`, eps 1e-5."""

    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.normalized_shape = (normalized_shape,)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine=True"


TorchRMSNorm.__name__ = "RMSNorm"  # print(model) shows nn.RMSNorm's name


def compute_rope_params(head_dim, theta_base=10_000, context_length=4096, freq_config=None, dtype=torch.float32):
    """Qwen3's (freq_config None) and Llama 3's (with its frequency scaling)."""
    assert head_dim % 2 == 0, "Embedding dimension must be even"
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2, dtype=dtype)[: (head_dim // 2)].float() / head_dim))
    if freq_config is not None:
        low_freq_wavelen = freq_config["original_context_length"] / freq_config["low_freq_factor"]
        high_freq_wavelen = freq_config["original_context_length"] / freq_config["high_freq_factor"]
        wavelen = 2 * torch.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / freq_config["factor"], inv_freq)
        smooth_factor = (freq_config["original_context_length"] / wavelen - freq_config["low_freq_factor"]) / (
            freq_config["high_freq_factor"] - freq_config["low_freq_factor"])
        smoothed_inv_freq = (1 - smooth_factor) * (inv_freq / freq_config["factor"]) + smooth_factor * inv_freq
        is_medium_freq = (wavelen <= low_freq_wavelen) & (wavelen >= high_freq_wavelen)
        inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    positions = torch.arange(context_length, dtype=dtype)
    angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0)
    angles = torch.cat([angles, angles], dim=1)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin, offset=0):
    batch_size, num_heads, seq_len, head_dim = x.shape
    assert head_dim % 2 == 0, "Head dimension must be even"
    x1 = x[..., : head_dim // 2]
    x2 = x[..., head_dim // 2:]
    cos = cos[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    sin = sin[offset:offset + seq_len, :].unsqueeze(0).unsqueeze(0)
    rotated = torch.cat((-x2, x1), dim=-1)
    x_rotated = (x * cos) + (rotated * sin)
    return x_rotated.to(dtype=x.dtype)


class FeedForward(nn.Module):
    """SwiGLU: fc3(silu(fc1(x)) * fc2(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], bias=False)
        self.fc2 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], bias=False)
        self.fc3 = nn.Linear(cfg["hidden_dim"], cfg["emb_dim"], bias=False)

    def forward(self, x):
        x_fc1 = self.fc1(x)
        x_fc2 = self.fc2(x)
        x = nn.functional.silu(x_fc1) * x_fc2
        return self.fc3(x)


class GroupedQueryAttention(nn.Module):
    """Qwen3's GroupedQueryAttention (head_dim free, optional q/k RMSNorm) and, with llama_order,
    Llama 3's (W_key and W_value made before W_query, no q/k norm). cache: the kv_cache/ variant's
    (keys, values) of the tokens before, or None."""

    def __init__(self, d_in, num_heads, num_kv_groups, head_dim=None, qk_norm=False, qk_eps=1e-6,
                 llama_order=False):
        super().__init__()
        assert num_heads % num_kv_groups == 0, "num_heads must be divisible by num_kv_groups"
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups
        if head_dim is None:
            assert d_in % num_heads == 0, "`d_in` must be divisible by `num_heads` if `head_dim` is not set"
            head_dim = d_in // num_heads
        self.head_dim = head_dim
        self.d_out = num_heads * head_dim
        if llama_order:
            self.W_key = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
            self.W_value = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
            self.W_query = nn.Linear(d_in, self.d_out, bias=False)
        else:
            self.W_query = nn.Linear(d_in, self.d_out, bias=False)
            self.W_key = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
            self.W_value = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
        self.out_proj = nn.Linear(self.d_out, d_in, bias=False)
        if qk_norm:
            self.q_norm = RMSNorm(head_dim, eps=qk_eps)
            self.k_norm = RMSNorm(head_dim, eps=qk_eps)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x, mask, cos, sin, start_pos=0, cache=None):
        b, num_tokens, _ = x.shape
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys_new = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values_new = values.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        if self.q_norm:
            queries = self.q_norm(queries)
        if self.k_norm:
            keys_new = self.k_norm(keys_new)
        queries = apply_rope(queries, cos, sin, offset=start_pos)
        keys_new = apply_rope(keys_new, cos, sin, offset=start_pos)
        if cache is not None:
            prev_k, prev_v = cache
            keys = torch.cat([prev_k, keys_new], dim=2)
            values = torch.cat([prev_v, values_new], dim=2)
        else:
            keys, values = keys_new, values_new
        next_cache = (keys, values)
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        context = (attn_weights @ values).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(context), next_cache


class TransformerBlock(nn.Module):
    def __init__(self, cfg, llama):
        super().__init__()
        self.att = GroupedQueryAttention(d_in=cfg["emb_dim"], num_heads=cfg["n_heads"], head_dim=cfg["head_dim"],
                                         num_kv_groups=cfg["n_kv_groups"], qk_norm=cfg["qk_norm"],
                                         qk_eps=cfg["rms_norm_eps"], llama_order=llama)
        self.ff = FeedForward(cfg)
        norm = (lambda d: TorchRMSNorm(d, eps=cfg["rms_norm_eps"])) if llama else \
            (lambda d: RMSNorm(d, eps=cfg["rms_norm_eps"]))
        self.norm1 = norm(cfg["emb_dim"])
        self.norm2 = norm(cfg["emb_dim"])

    def forward(self, x, mask, cos, sin, start_pos=0, cache=None):
        shortcut = x
        x = self.norm1(x)
        x, next_cache = self.att(x, mask, cos, sin, start_pos=start_pos, cache=cache)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = x + shortcut
        return x, next_cache


class _Model(nn.Module):
    llama = False

    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg, self.llama) for _ in range(cfg["n_layers"])])
        if self.llama:
            self.final_norm = TorchRMSNorm(cfg["emb_dim"], eps=cfg["rms_norm_eps"])
        else:
            self.final_norm = RMSNorm(cfg["emb_dim"], eps=cfg["rms_norm_eps"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        head_dim = cfg["head_dim"] if cfg["head_dim"] is not None else cfg["emb_dim"] // cfg["n_heads"]
        cos, sin = compute_rope_params(head_dim=head_dim, theta_base=cfg["rope_base"],
                                       context_length=cfg["context_length"], freq_config=cfg.get("rope_freq"))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.cfg = cfg
        self.current_pos = 0

    def forward(self, in_idx, cache=None):
        x = self.tok_emb(in_idx)
        num_tokens = x.shape[1]
        if cache is not None:
            pos_start = self.current_pos
            pos_end = pos_start + num_tokens
            self.current_pos = pos_end
            mask = torch.triu(torch.ones(pos_end, pos_end, dtype=torch.bool), diagonal=1)[pos_start:pos_end, :pos_end]
        else:
            pos_start = 0
            mask = torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)
        mask = mask[None, None, :, :]
        for i, block in enumerate(self.trf_blocks):
            blk_cache = cache[i] if cache is not None else None
            x, new_cache = block(x, mask, self.cos, self.sin, start_pos=pos_start, cache=blk_cache)
            if cache is not None:
                cache[i] = new_cache
        x = self.final_norm(x)
        return self.out_head(x)

    def reset_kv_cache(self):
        self.current_pos = 0


class Qwen3Model(_Model):
    llama = False


class Llama3Model(_Model):
    llama = True


Qwen3Model.__name__ = "Qwen3Model"
Llama3Model.__name__ = "Llama3Model"


# ---- config.json ----------------------------------------------------------------------------------------

def cfg_from_hf(path):
    with open(path) as f:
        c = json.load(f)
    arch = c["architectures"][0]
    llama = arch == "LlamaForCausalLM"
    if arch not in ("Qwen3ForCausalLM", "LlamaForCausalLM"):
        raise ValueError(f"{path}: unknown architecture {arch}")
    cfg = {"vocab_size": c["vocab_size"], "context_length": c["max_position_embeddings"],
           "emb_dim": c["hidden_size"], "n_heads": c["num_attention_heads"], "n_layers": c["num_hidden_layers"],
           "hidden_dim": c["intermediate_size"], "head_dim": c.get("head_dim"), "qk_norm": not llama,
           "n_kv_groups": c["num_key_value_heads"], "rope_base": float(c["rope_theta"]),
           "rms_norm_eps": c["rms_norm_eps"], "tie": c.get("tie_word_embeddings", False), "llama": llama,
           "eos_token_id": c.get("eos_token_id")}
    rs = c.get("rope_scaling")
    if llama and rs:
        cfg["rope_freq"] = {"factor": rs["factor"], "low_freq_factor": rs["low_freq_factor"],
                            "high_freq_factor": rs["high_freq_factor"],
                            "original_context_length": rs["original_max_position_embeddings"]}
    return cfg


def build_model(cfg):
    return (Llama3Model if cfg["llama"] else Qwen3Model)(cfg)


# ---- safetensors by hand --------------------------------------------------------------------------------

def tensor_bytes(t, dtype):
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, named, dtype="F32"):
    header, blobs, at = {}, [], 0
    for name, t in named:
        b = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return at


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[base + b:base + end]
        if e["dtype"] == "F32":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f4").copy())
        elif e["dtype"] == "F16":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f2").copy()).to(torch.float32)
        elif e["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<i2").copy()).view(torch.bfloat16).to(torch.float32)
        else:
            raise ValueError(f"{path}: {name}: dtype {e['dtype']}")
        out[name] = t.reshape(e["shape"])
    return out


def hf_names(cfg):
    """(hub name, the model's parameter name) in the hub's order, as load_weights_into_qwen/llama map them."""
    pairs = [("model.embed_tokens.weight", "tok_emb.weight")]
    for l in range(cfg["n_layers"]):
        p, q = f"model.layers.{l}.", f"trf_blocks.{l}."
        pairs += [(p + "self_attn.q_proj.weight", q + "att.W_query.weight"),
                  (p + "self_attn.k_proj.weight", q + "att.W_key.weight"),
                  (p + "self_attn.v_proj.weight", q + "att.W_value.weight"),
                  (p + "self_attn.o_proj.weight", q + "att.out_proj.weight")]
        if cfg["qk_norm"]:
            pairs += [(p + "self_attn.q_norm.weight", q + "att.q_norm.scale"),
                      (p + "self_attn.k_norm.weight", q + "att.k_norm.scale")]
        n = "weight" if cfg["llama"] else "scale"
        pairs += [(p + "input_layernorm.weight", q + "norm1." + n),
                  (p + "mlp.gate_proj.weight", q + "ff.fc1.weight"),
                  (p + "mlp.up_proj.weight", q + "ff.fc2.weight"),
                  (p + "mlp.down_proj.weight", q + "ff.fc3.weight"),
                  (p + "post_attention_layernorm.weight", q + "norm2." + n)]
    pairs.append(("model.norm.weight", "final_norm." + ("weight" if cfg["llama"] else "scale")))
    if not cfg["tie"]:
        pairs.append(("lm_head.weight", "out_head.weight"))
    return pairs


def load_weights(model, cfg, params):
    sd = dict(model.named_parameters())
    with torch.no_grad():
        for hub, mine in hf_names(cfg):
            if params[hub].shape != sd[mine].shape:
                raise ValueError(f"Shape mismatch in tensor '{hub}'")
            sd[mine].copy_(params[hub])
        if cfg["tie"]:
            if "lm_head.weight" in params:
                model.out_head.weight.copy_(params["lm_head.weight"])
            else:
                model.out_head.weight = model.tok_emb.weight


def load_model(d):
    cfg = cfg_from_hf(os.path.join(d, "config.json"))
    idx = os.path.join(d, "model.safetensors.index.json")
    params = {}
    if os.path.exists(idx):
        with open(idx) as f:
            for shard in sorted(set(json.load(f)["weight_map"].values())):
                params.update(read_safetensors(os.path.join(d, shard)))
    else:
        params = read_safetensors(os.path.join(d, "model.safetensors"))
    model = build_model(cfg)
    load_weights(model, cfg, params)
    return model, cfg


def save_model(model, cfg, d, config_json, dtype="F32", shards=1):
    """config.json as given (torch_dtype set to the files'), then the weights under the hub's names."""
    os.makedirs(d, exist_ok=True)
    c = dict(config_json)
    c["torch_dtype"] = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    sd = dict(model.named_parameters())
    named = [(hub, sd[mine]) for hub, mine in hf_names(cfg)]
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), named, dtype)
        return
    per = math.ceil(len(named) / shards)
    weight_map, total = {}, 0
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = named[s * per:(s + 1) * per]
        total += write_safetensors(os.path.join(d, fn), part, dtype)
        weight_map.update({n: fn for n, _ in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


# ---- generation -----------------------------------------------------------------------------------------

def generate(model, idx, max_new_tokens, context_size, temperature=0.0, top_k=None, eos_id=None, use_cache=True):
    """Chapter 5's generate (top-k, temperature, eos) over the kv_cache/ variant's loop: the prompt once,
    then one token at a time; use_cache=False recomputes the window for every token."""
    model.eval()
    cache = [None] * model.cfg["n_layers"] if use_cache else None
    model.reset_kv_cache()
    with torch.no_grad():
        for step in range(max_new_tokens):
            if use_cache and (step == 0 or idx.shape[1] > context_size):
                # the prompt, or a window that slid past the context: every position moved, so the
                # cache starts again on the window (the book's cached loop stops at the context)
                cache = [None] * model.cfg["n_layers"]
                model.reset_kv_cache()
                logits = model(idx[:, -context_size:], cache=cache)
            elif use_cache:
                logits = model(idx[:, -1:], cache=cache)
            else:
                logits = model(idx[:, -context_size:])
            logits = logits[:, -1, :]
            if top_k is not None:
                top_logits, _ = torch.topk(logits, top_k)
                logits = torch.where(logits < top_logits[:, -1], torch.tensor(float("-inf")), logits)
            if temperature > 0.0:
                idx_next = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1)
            else:
                idx_next = torch.argmax(logits, dim=-1, keepdim=True)
            if eos_id is not None and (idx_next.item() in eos_id if isinstance(eos_id, (set, list)) else idx_next == eos_id):
                break
            idx = torch.cat((idx, idx_next), dim=1)
    return idx


# ---- chapter 5's loop -----------------------------------------------------------------------------------

def cmd_train(a):
    sys.path.insert(0, SHARED_PY)
    import gpt as book  # the data loader and the losses of chapter 5 (../shared/pytorch/gpt.py)
    from gpt2_tokenizer import GPT2Tokenizer
    if a.ids_json:  # a tokenizer.json's ids made by the JavaScript encoder (gen_llm_text_golden.py), decoded by its vocab
        with open(a.ids_json, encoding="utf-8") as f:
            table = json.load(f)
        decode, _ = hf_decoder(a.text)

        class Encoded:  # tokenizer.encode(text) of the texts this run encodes; decode by tokenizer.json
            def encode(self, t, allowed_special=None):
                return table[t]

            def decode(self, ids):
                return decode(ids)
        tokenizer = Encoded()
    else:
        tokenizer = GPT2Tokenizer(a.tokenizer)
    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    cfg = cfg_from_hf(a.config)
    context = a.context or cfg["context_length"]
    torch.manual_seed(a.seed)
    model = build_model(cfg)
    model.eval()
    split = int(a.train_ratio * len(text))
    torch.manual_seed(a.seed)
    train_loader = book.create_dataloader_v1(text[:split], tokenizer, batch_size=a.batch, max_length=context,
                                             stride=context, drop_last=True, shuffle=True, num_workers=0)
    val_loader = book.create_dataloader_v1(text[split:], tokenizer, batch_size=a.batch, max_length=context,
                                           stride=context, drop_last=False, shuffle=False, num_workers=0)
    torch.manual_seed(a.seed)
    with torch.no_grad():
        print("Training loss:", book.calc_loss_loader(train_loader, model))
        print("Validation loss:", book.calc_loss_loader(val_loader, model), flush=True)
    torch.manual_seed(a.seed)
    model = build_model(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    log = open(a.log, "w") if a.log else None
    enc = lambda s: torch.tensor(tokenizer.encode(s)).unsqueeze(0)  # noqa: E731
    dec = lambda ids: tokenizer.decode(ids.squeeze(0).tolist())  # noqa: E731
    tokens_seen, global_step = 0, -1
    for epoch in range(a.epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = book.calc_loss_batch(input_batch, target_batch, model)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            if log:
                log.write(f"step {global_step} loss {loss.item():.6f}\n")
            if global_step % a.eval_freq == 0:
                train_loss, val_loss = book.evaluate_model(model, train_loader, val_loader, a.eval_iter)
                print(f"Ep {epoch + 1} (Step {global_step:06d}): "
                      f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}", flush=True)
        model.eval()
        ids = book.generate_text_simple(model, enc(a.prompt), a.sample_tokens, context)
        print(dec(ids).replace("\n", " "), flush=True)
        model.train()
    if log:
        log.close()
    model.eval()
    ids = book.generate_text_simple(model, enc(a.prompt), 25, context)
    print("Output text:\n", dec(ids))
    torch.manual_seed(a.seed)
    ids = book.generate(model, enc(a.prompt), 15, context, temperature=1.4, top_k=25)
    print("Output text:\n", dec(ids))
    if a.save:
        with open(a.config) as f:
            save_model(model, cfg, a.save, json.load(f))


def model_from_args(a):
    if a.model:
        return load_model(a.model)
    cfg = cfg_from_hf(a.config)
    torch.manual_seed(a.seed)
    return build_model(cfg), cfg


def hf_decoder(path):
    """tokenizer.json's decode (Hugging Face's ByteLevel decoder, skip_special_tokens=False): each id's
    bytes (the vocab's tokens spelled in GPT-2's 256 byte characters; added tokens their content),
    joined and read as UTF-8 with U+FFFD for what is not; ids it does not have decode to nothing.
    Also the added tokens' ids by content. (The prompt's ids come from the JavaScript encoders' goldens.)"""
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_of = {chr(c): b for b, c in zip(bs, cs)}
    id_to = {i: bytes(byte_of[ch] for ch in tok) for tok, i in tj["model"]["vocab"].items()}
    names = {}
    for t in tj["added_tokens"]:
        id_to[t["id"]] = t["content"].encode("utf-8")
        names[t["content"]] = t["id"]
    return (lambda ids: b"".join(id_to.get(i, b"") for i in ids).decode("utf-8", errors="replace")), names


def cmd_generate(a):
    model, cfg = model_from_args(a)
    if a.print_model:
        print(model)
        return
    if a.boost:  # (tests) out_head's row of one token scaled, so that a random model says it
        tid, factor = a.boost.split(":")
        with torch.no_grad():
            model.out_head.weight[int(tid)] *= float(factor)
    ids = [int(t) for t in a.ids.split()]
    eos = cfg["eos_token_id"] if isinstance(cfg["eos_token_id"], int) else None
    if a.text:  # a text prompt: config.json's eos ids and the tokenizer's end of text (with --chat, of the turn)
        decode, names = hf_decoder(a.text)
        e = cfg["eos_token_id"]
        eos = set([e] if isinstance(e, int) else (e or []))
        for name in ["<|endoftext|>", "<|end_of_text|>"] + (["<|im_end|>", "<|eot_id|>"] if a.chat else []):
            if name in names and names[name] < cfg["vocab_size"]:
                eos.add(names[name])
    torch.manual_seed(a.seed)
    out = generate(model, torch.tensor([ids]), a.max_new_tokens, cfg["context_length"], a.temperature,
                   a.top_k, eos, use_cache=not a.no_kv_cache)
    if a.text and not a.print_ids:
        new = out[0].tolist()[len(ids):]
        text = decode(new) if a.chat else "Output text: " + decode(out[0].tolist())
        sys.stdout.buffer.write((text + "\n").encode("utf-8"))
        return
    print(" ".join(str(i) for i in out[0].tolist()))


def cmd_save_random(a):
    with open(a.config) as f:
        config_json = json.load(f)
    cfg = cfg_from_hf(a.config)
    torch.manual_seed(a.seed)
    model = build_model(cfg)
    save_model(model, cfg, a.out, config_json, a.dtype, a.shards)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["generate", "train", "save-random"])
    p.add_argument("--model")
    p.add_argument("--config")
    p.add_argument("--seed", type=int, default=123)
    p.add_argument("--ids", default="1 2 3")
    p.add_argument("--max-new-tokens", type=int, default=10)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--no-kv-cache", action="store_true")
    p.add_argument("--print-model", action="store_true")
    p.add_argument("--out")
    p.add_argument("--dtype", default="F32", choices=["F32", "BF16", "F16"])
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--data")
    p.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "data", "gpt2"))
    p.add_argument("--context", type=int, default=None)
    p.add_argument("--train-ratio", type=float, default=0.90)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.0004)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--eval-freq", type=int, default=5)
    p.add_argument("--eval-iter", type=int, default=5)
    p.add_argument("--prompt", default="Every effort moves you")
    p.add_argument("--sample-tokens", type=int, default=50)
    p.add_argument("--log")
    p.add_argument("--save")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--text", help="generate: print the text (this tokenizer.json decodes it; --ids are the prompt's)")
    p.add_argument("--chat", action="store_true", help="generate --text: the prompt is a chat turn (print the answer)")
    p.add_argument("--ids-json", help="train: {text: ids} of the data's two parts and the prompt (with --text)")
    p.add_argument("--print-ids", action="store_true", help="generate --text: print the ids all the same")
    p.add_argument("--boost", help="generate: ID:F scales out_head's row ID by F (tests: a token a random model says)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    {"generate": cmd_generate, "train": cmd_train, "save-random": cmd_save_random}[a.command](a)


if __name__ == "__main__":
    main()
