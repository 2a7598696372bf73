#!/usr/bin/env python3
"""Writes tests/data/llm/ (small random Qwen3 and Llama 3 models in the Hugging Face layout, made by
tests/tools/llm_ref.py) and tests/data/llm_golden.txt (what llm_ref.py prints for them); tests/test_llm.c
runs ./build/llm with the same flags and compares.

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_llm_golden.py

A record is `run <llm flags>`, then `out <line>` for each line llm_ref.py prints (for train also
`log <step> <loss>`, each step's loss from --log), then `end`; `rope <case>`
records hold compute_rope_params's cos and sin as hex float32 bits."""
import json
import os
import shlex
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import llm_ref  # noqa: E402

DATA = "tests/data/llm"
CORPUS = "tests/data/tokenizer_corpus.txt"


def qwen(vocab, emb, heads, layers, hidden, head_dim, kv, tie, ctx=64, eos=None, dtype="bfloat16"):
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": vocab,
            "max_position_embeddings": ctx, "hidden_size": emb, "num_attention_heads": heads,
            "num_hidden_layers": layers, "intermediate_size": hidden, "head_dim": head_dim,
            "num_key_value_heads": kv, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
            "tie_word_embeddings": tie, "torch_dtype": dtype, "eos_token_id": eos}


def llama(vocab, emb, heads, layers, hidden, kv, tie, ctx=64, eos=None, head_dim=None, scaling=True):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
         "max_position_embeddings": ctx, "hidden_size": emb, "num_attention_heads": heads,
         "num_hidden_layers": layers, "intermediate_size": hidden, "num_key_value_heads": kv,
         "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "tie_word_embeddings": tie, "torch_dtype": "bfloat16",
         "eos_token_id": eos}
    if head_dim is not None:
        c["head_dim"] = head_dim
    if scaling:
        c["rope_scaling"] = {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 16, "rope_type": "llama3"}
    return c


# name: (config, seed, dtype of the files, shards)
MODELS = {
    "qwen_tied_f32": (qwen(97, 32, 4, 2, 48, 12, 2, True), 1, "F32", 1),
    "qwen_untied_bf16_sharded": (qwen(89, 24, 6, 2, 40, 8, 3, False), 2, "BF16", 3),
    "qwen_mha_f16": (qwen(64, 16, 2, 1, 24, 8, 2, False), 3, "F16", 1),
    "llama_gqa_f32": (llama(101, 32, 4, 2, 64, 1, False), 4, "F32", 1),
    "llama_tied_bf16": (llama(83, 24, 4, 2, 32, 2, True, head_dim=8), 5, "BF16", 2),
}
# config files alone, for --config --seed (the book's draws)
CONFIGS = {
    "qwen_config": qwen(120, 32, 4, 2, 48, 16, 2, False),
    "llama_config": llama(110, 32, 8, 2, 56, 2, False),
    "qwen_train": qwen(50257, 16, 2, 1, 24, 8, 1, False, ctx=12),
    "llama_train": llama(50257, 16, 2, 1, 32, 1, True, ctx=8),
}


def ref(args):
    r = subprocess.run([sys.executable, os.path.join(HERE, "llm_ref.py")] + shlex.split(args), cwd=ROOT,
                       capture_output=True, text=True, check=True)
    return r.stdout.split("\n")[:-1]


def main():
    os.makedirs(os.path.join(ROOT, DATA), exist_ok=True)
    for name, (cfg, seed, dtype, shards) in MODELS.items():
        d = os.path.join(ROOT, DATA, name)
        for f in os.listdir(d) if os.path.isdir(d) else []:
            os.remove(os.path.join(d, f))
        cfgpath = os.path.join(ROOT, DATA, name + ".json")
        with open(cfgpath, "w") as f:
            json.dump(cfg, f, indent=2)
        subprocess.run([sys.executable, os.path.join(HERE, "llm_ref.py"), "save-random", "--config", cfgpath,
                        "--seed", str(seed), "--out", d, "--dtype", dtype, "--shards", str(shards)], check=True)
        os.remove(cfgpath)
    for name, cfg in CONFIGS.items():
        with open(os.path.join(ROOT, DATA, name + ".json"), "w") as f:
            json.dump(cfg, f, indent=2)
    runs = []
    for name in MODELS:
        m = f"--model {DATA}/{name}"
        runs += [f"generate {m} --ids \"5 6 7\" --max-new-tokens 12",
                 f"generate {m} --ids \"3 1 4 1 5 9 2 6\" --max-new-tokens 20 --temperature 0.9 --top-k 8 --seed 7"]
    for name in ("qwen_config", "llama_config"):
        c = f"--config {DATA}/{name}.json"
        runs += [f"generate {c} --seed 123 --ids \"1 2 3\" --max-new-tokens 15",
                 f"generate {c} --seed 5 --ids \"10 20 30 40\" --max-new-tokens 15 --temperature 1.2 --top-k 20",
                 f"generate {c} --seed 123 --print-model"]
    # a prompt of 60 tokens and 10 new ones: the window (64) slides
    long_ids = " ".join(str((7 * i + 3) % 101) for i in range(60))
    runs.append(f"generate --model {DATA}/llama_gqa_f32 --ids \"{long_ids}\" --max-new-tokens 10")
    # an eos id: the fourth token this greedy run makes, so it stops there
    probe = ref(f"generate --model {DATA}/llama_gqa_f32 --ids \"8 9\" --max-new-tokens 8")[0].split()
    eos_cfg = dict(MODELS["llama_gqa_f32"][0], eos_token_id=int(probe[2 + 3]))
    with open(os.path.join(ROOT, DATA, "llama_eos.json"), "w") as f:
        json.dump(eos_cfg, f, indent=2)
    runs.append(f"generate --config {DATA}/llama_eos.json --seed 4 --ids \"8 9\" --max-new-tokens 8")
    runs += [f"train --config {DATA}/qwen_train.json --seed 123 --data {CORPUS} --epochs 1 --batch 2 "
             f"--eval-freq 5 --eval-iter 2 --sample-tokens 6",
             f"train --config {DATA}/llama_train.json --seed 9 --data {CORPUS} --epochs 2 --batch 3 "
             f"--eval-freq 7 --eval-iter 1 --sample-tokens 5 --lr 0.001 --prompt \"The attention\""]
    out = []
    for flags in runs:
        for no_cache in ([False, True] if flags.startswith("generate") and "--print-model" not in flags else [False]):
            f = flags + (" --no-kv-cache" if no_cache else "")
            out.append("run " + f)
            if flags.startswith("train"):  # and every step's loss (--log), as `log <step> <loss>`
                log = os.path.join(ROOT, "build", "llm_ref_log.txt")
                os.makedirs(os.path.dirname(log), exist_ok=True)
                out += ["out " + line for line in ref(f + " --log " + log)]
                with open(log) as lf:
                    out += ["log " + line[len("step "):].replace(" loss ", " ") for line in lf.read().split("\n") if line]
                os.remove(log)
            else:
                out += ["out " + line for line in ref(f)]
            out.append("end")
            print(f, file=sys.stderr)
    # compute_rope_params, bit for bit
    for name, (hd, theta, ctx, fc) in {
            "qwen": (12, 1000000.0, 40, None),
            "llama": (16, 500000.0, 40, {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_context_length": 16}),
            "llama8192": (64, 500000.0, 3, {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_context_length": 8192})}.items():
        cos, sin = llm_ref.compute_rope_params(hd, theta, ctx, fc)
        out.append(f"rope {name} {hd} {theta!r} {ctx} " + (
            "none" if fc is None else f"{fc['factor']!r} {fc['low_freq_factor']!r} {fc['high_freq_factor']!r} "
                                      f"{fc['original_context_length']}"))
        out.append("cos " + " ".join("%08x" % (v & 0xffffffff) for v in cos.view(torch.int32).flatten().tolist()))
        out.append("sin " + " ".join("%08x" % (v & 0xffffffff) for v in sin.view(torch.int32).flatten().tolist()))
    with open(os.path.join(ROOT, "tests", "data", "llm_golden.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
