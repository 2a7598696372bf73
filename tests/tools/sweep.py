#!/usr/bin/env python3
"""The random-config sweep of issue 40: the C programs with --exact against their PyTorch 1.13 reference
programs (../shared/pytorch/, tests/tools/llm_ref.py), on configs drawn from a seed, each small enough to run
in seconds.

    python3 tests/tools/sweep.py --seed 40 --configs 200                  # the promise: every config identical
    python3 tests/tools/sweep.py --seed 40 --configs 200 --capability avx2
    python3 tests/tools/sweep.py --seed 7 --configs 12 --programs gpt,instruct --keep /tmp/sweep
    python3 tests/tools/sweep.py --seed 40 --configs 30 --programs llm --build build

Five programs, drawn in turn: `gpt train` (gpt.py train: layers, heads, head dims 1-64 odd ones included,
context 2-300, batch 1-8, dropout, qkv bias, the eval settings, on a slice of the-verdict), `finetune classify`
and `finetune instruct` (finetune.py on a random GPT-2 that `finetune.py make-gpt2` writes, LoRA and -100
targets included), `train` (toy_lm.py) and `llm` (llm_ref.py: a Qwen3 or Llama 3 config.json with 1-8 heads,
GQA, MHA or one kv head, an even head_dim 2-32 apart from emb_dim / heads or Llama's emb_dim / heads, 1-3
layers, tied or untied, Llama's rope scaling or none, an eos id or none; two configs in three `generate`
on `llm_ref.py save-random`'s weights (F32, BF16 or F16 files in 1-3 shards; a vocabulary of 2-600, an --ids
prompt within the context, greedy or --temperature/--top-k/--seed), with the KV cache and --no-kv-cache;
the third `train` on a slice of the-verdict with GPT-2's tokenizer, its model drawn from --config --seed).
For each config both sides run; every printed line (stdout) is compared byte for byte, `--log` steps within
1e-5 and instruct's `--responses` JSON byte for byte (llm train's `Training loss:` and `Validation loss:`,
17 digits, within 1e-6 relative, as tests/test_llm.c holds them). One row per config, the first differing
lines of a difference, and a summary; the exit status is 1 when any differs.

llm generate also runs in default math (no --exact), which holds BF16 files' weights as BF16 (another kernel,
tensor/kernels/gemm_bf16.c) and promises only float rounding: ids other than PyTorch's there (a near tie
flipped) make the row DEFMATH, with the command to run it again; such rows are counted apart in the summary
and do not fail the sweep (a DIFFERS in exact math does, and takes precedence). `--weights` also saves llm
train's trained weights on both sides (--save) and compares them bit for bit. On 2026-12-06 every train
config differs there by ulps, and now and then a printed line or a --log step too (seed 40: configs 31 and
37 of --programs llm): nn/blocks/rmsnorm.c's rsqrt is pow(., -0.5), whose backward is not RsqrtBackward0's
-0.5 * grad * result^3 (llm_ref.py with .pow(-0.5) in its two RMSNorms gives C's weights bit for bit on
config 37), and nn/blocks/gqa.c's repeat_interleave is expand + reshape, whose backward sums a group of 5 or more
heads in another order than PyTorch 1.13's IndexSelectBackward0 (index_add_, in index order; config 31,
7 heads on one kv head). Not in CI until those are fixed.

PyTorch runs as the goldens are made: `/usr/bin/python3` with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas
(Debian's reference BLAS, which sums each dot product in order) and ATEN_CPU_CAPABILITY=<--capability>; the C
side gets AC_CPU_CAPABILITY=<--capability>. `--python` and `--blas` change those. A config is drawn from the
seed and its index alone (random.Random(f"{seed}:{index}")), and its program from the index and --programs,
so `--only I` with the same --programs reruns config I of a sweep (`--programs gpt,classify,instruct,train`:
the configs of the sweeps before llm came).
"""
import argparse
import array
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = ("gpt", "classify", "instruct", "train", "llm")
STATUSES = ("identical", "close", "DIFFERS", "NEITHER", "DEFMATH")


# ---- drawing configs ---------------------------------------------------------------------------------------

def draw_heads(r, max_emb):
    """heads 1-8 and a head dim 1-64 (odd ones as likely as even ones) with heads * head_dim <= max_emb"""
    while True:
        heads, hd = r.randint(1, 8), r.randint(1, 64)
        if heads * hd <= max_emb:
            return heads, hd


def draw_gpt(r, verdict_len):
    heads, hd = draw_heads(r, 64)
    layers = r.randint(1, 3)
    context = r.choice([r.randint(2, 16), r.randint(2, 64), r.randint(2, 300)])
    batch = r.randint(1, max(1, min(8, 600 // context)))  # the vocabulary's head makes tokens dear: 600 a batch
    # a slice of the-verdict with room for 1-2 training batches and some validation windows
    # (about 4.4 characters a token; the split is 90/10); now and then a validation part with no window
    want_tokens = (r.randint(1, 2) * batch + 1) * (context + 1) / 0.9 + r.randint(0, 40)
    chars = min(verdict_len, int(want_tokens * 4.6) + 50)
    start = r.randint(0, verdict_len - chars)
    a = ["--layers", layers, "--emb-dim", heads * hd, "--heads", heads, "--context", context, "--batch", batch,
         "--drop", r.choice([0.0, 0.1, 0.2, 0.5]), "--epochs", r.choice([1, 1, 2]), "--eval-freq", r.randint(1, 5),
         "--eval-iter", r.randint(1, 4), "--sample-tokens", r.randint(1, 8), "--seed", r.randint(0, 10000),
         "--lr", r.choice([0.0004, 0.001, 0.004]), "--train-ratio", r.choice([0.9, 0.9, 0.75])]
    if r.random() < 0.5:
        a.append("--qkv-bias")
    return {"program": "gpt", "slice": [start, chars], "args": [str(x) for x in a]}


def draw_gpt2(r, max_emb, max_context):
    # (make-gpt2 reads --heads 2, --emb-dim 12, --layers 1 and --seed 123, finetune.py's defaults, as "not
    # given" and takes its own: they are not drawn)
    while True:
        heads, hd = draw_heads(r, max_emb)
        if heads != 2 and heads * hd != 12:
            break
    return ["--emb-dim", str(heads * hd), "--heads", str(heads), "--layers", str(r.randint(2, 3)),
            "--context", str(r.randint(max_context // 2, max_context)), "--seed", str(r.choice([r.randint(0, 122), r.randint(124, 10000)]))]


def draw_classify(r):
    max_length = r.choice([None, r.randint(1, 8), r.randint(8, 64)])
    gpt2 = draw_gpt2(r, 64, 300)
    if max_length is None:  # the longest training text (at most 209 tokens in the sample): a context above it
        gpt2[gpt2.index("--context") + 1] = str(r.randint(210, 300))
    else:
        gpt2[gpt2.index("--context") + 1] = str(r.randint(max_length, 300))
    a = ["--batch", r.randint(1, 8), "--epochs", r.randint(1, 2), "--eval-freq", r.randint(1, 8),
         "--eval-iter", r.randint(1, 3), "--seed", r.randint(0, 10000), "--lr", r.choice([5e-5, 5e-4, 2e-3])]
    if max_length is not None:
        a += ["--max-length", max_length]
    if r.random() < 0.3:
        a += ["--lora", r.randint(1, 8), "--lora-alpha", r.choice([1, 8, 16])]
    return {"program": "classify", "gpt2": gpt2, "args": [str(x) for x in a]}


def draw_instruct(r):
    gpt2 = draw_gpt2(r, 32, 300)
    batch = r.randint(1, 4)
    a = ["--batch", batch, "--subset", r.randint(batch, 4), "--epochs", 1, "--eval-freq", r.randint(1, 3),
         "--eval-iter", r.randint(1, 3), "--seed", r.randint(0, 10000), "--max-new-tokens", r.randint(1, 8),
         "--allowed-max-length", r.choice([1024, r.randint(8, 120)]), "--lr", r.choice([5e-5, 5e-4])]
    return {"program": "instruct", "gpt2": gpt2, "args": [str(x) for x in a]}


def draw_train(r, verdict_len):
    heads, hd = draw_heads(r, 128)
    context = r.randint(2, 64)
    chars = r.randint(context + 200, min(verdict_len, 6000))
    start = r.randint(0, verdict_len - chars)
    a = ["--steps", r.randint(5, 40), "--batch", r.randint(1, 8), "--context", context, "--dim", heads * hd,
         "--heads", heads, "--lr", r.choice([1e-3, 3e-3, 1e-2]), "--seed", r.randint(0, 10000)]
    return {"program": "train", "slice": [start, chars], "args": [str(x) for x in a]}


def draw_llm(r, verdict_len, train):
    """A Qwen3 or Llama 3 config.json (GQA, MHA or one kv head; a head_dim apart from emb_dim / heads; tied or
    not; Llama's rope scaling or none) and what runs on it: `generate` on its random weights (save-random: F32,
    BF16 or F16, 1-3 shards) with the KV cache and without, or with train `train` on a slice of the-verdict
    with GPT-2's tokenizer (so a vocabulary of 50257 or more), the model drawn from --config --seed"""
    llama = r.random() < 0.5
    heads = r.randint(1, 8)
    divisors = [d for d in range(1, heads + 1) if heads % d == 0]
    kv = r.choice([1, heads, r.choice(divisors)])
    head_dim = 2 * r.randint(1, 16)  # rope needs an even head_dim
    if llama and r.random() < 0.5:  # no head_dim key: emb_dim / heads
        emb, head_dim = heads * head_dim, None
    else:  # emb_dim anything (and heads * head_dim apart from it)
        emb = r.randint(1, 64)
    ctx = r.randint(2, 40)
    c = {"architectures": ["LlamaForCausalLM" if llama else "Qwen3ForCausalLM"], "model_type": "llama" if llama else "qwen3",
         "vocab_size": r.choice([50257, 50257, 50304]) if train else r.choice([r.randint(2, 64), r.randint(2, 600)]),
         "max_position_embeddings": ctx, "hidden_size": emb, "num_attention_heads": heads,
         "num_hidden_layers": r.randint(1, 3), "intermediate_size": r.randint(1, 96), "num_key_value_heads": kv,
         "rope_theta": r.choice([500000.0, 10000.0] if llama else [1000000.0, 10000.0]),
         "rms_norm_eps": r.choice([1e-5, 1e-6]), "tie_word_embeddings": r.random() < 0.5, "torch_dtype": "float32",
         "eos_token_id": None}
    if head_dim is not None:
        c["head_dim"] = head_dim
    if llama and r.random() < 0.6:
        c["rope_scaling"] = {"factor": r.choice([2.0, 8.0, 32.0]), "low_freq_factor": 1.0,
                             "high_freq_factor": r.choice([2.0, 4.0]),
                             "original_max_position_embeddings": r.randint(1, 64), "rope_type": "llama3"}
    cfg = {"program": "llm", "config": c}
    if train:
        # (a context of 2-16 and a slice for 1-3 batches: the 50257-wide head makes a step dear)
        context, batch = r.randint(2, 16), r.randint(1, 3)
        c["max_position_embeddings"] = r.choice([context, r.randint(context, 40)])
        want_tokens = (r.randint(1, 3) * batch + 1) * (context + 1) / 0.9 + r.randint(0, 30)
        chars = min(verdict_len, int(want_tokens * 4.6) + 50)
        cfg["slice"] = [r.randint(0, verdict_len - chars), chars]
        a = ["--seed", r.randint(0, 10000), "--batch", batch, "--epochs", r.choice([1, 1, 2]),
             "--eval-freq", r.randint(1, 6), "--eval-iter", r.randint(1, 2), "--sample-tokens", r.randint(1, 6),
             "--lr", r.choice([0.0004, 0.001, 0.004]), "--weight-decay", r.choice([0.1, 0.0]),
             "--train-ratio", r.choice([0.9, 0.9, 0.75])]
        if context != c["max_position_embeddings"]:
            a += ["--context", context]
        if r.random() < 0.3:
            a += ["--prompt", r.choice(["The attention", "I HAD always thought", "x"])]
        if r.random() < 0.3:
            a.append("--no-kv-cache")  # (train's samples: the cache off)
        cfg["args"] = ["train"] + [str(x) for x in a]
        return cfg
    vocab = c["vocab_size"]
    if r.random() < 0.25:
        c["eos_token_id"] = r.randrange(vocab)
    cfg["save"] = {"seed": r.randint(0, 10000), "dtype": r.choice(["F32", "BF16", "F16"]), "shards": r.randint(1, 3)}
    # a prompt within the context (PyTorch's generate crops a longer one; llm refuses it, naming the context)
    ids = [r.randrange(vocab) for _ in range(min(ctx, r.choice([r.randint(1, 4), r.randint(1, 24)])))]
    a = ["--ids", " ".join(map(str, ids)), "--max-new-tokens", r.randint(1, 8) if r.random() < 0.5 else r.randint(0, 24)]
    if r.random() < 0.5:
        a += ["--temperature", r.choice([0.5, 0.9, 1.0, 1.4]), "--seed", r.randint(0, 10000)]
        if r.random() < 0.6:
            a += ["--top-k", r.randint(1, vocab)]
    elif r.random() < 0.2:
        a += ["--top-k", r.randint(1, vocab)]  # (greedy after the top k: the same argmax)
    cfg["args"] = ["generate"] + [str(x) for x in a]
    return cfg


def draw(seed, index, programs, verdict_len):
    r = random.Random(f"{seed}:{index}")
    prog = programs[index % len(programs)]
    return {"gpt": lambda: draw_gpt(r, verdict_len), "classify": lambda: draw_classify(r),
            "instruct": lambda: draw_instruct(r), "train": lambda: draw_train(r, verdict_len),
            # llm: every third of its configs trains (the second of each three: CI's 16 hold one)
            "llm": lambda: draw_llm(r, verdict_len, (index // len(programs)) % 3 == 1)}[prog]()


# ---- running both sides ------------------------------------------------------------------------------------

def run(cmd, env, cwd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), time.time() - t0
    except subprocess.TimeoutExpired:
        return "timeout", "", "", time.time() - t0


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def log_steps(text):
    out = []
    for line in (text or "").splitlines():
        w = line.split()
        if len(w) >= 4 and w[0] == "step" and w[-2] == "loss":
            out.append((w[1], float(w[-1])))
    return out


def first_diff(a, b):
    la, lb = a.splitlines(), b.splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "<no line>"
        y = lb[i] if i < len(lb) else "<no line>"
        if x != y:
            return i + 1, x, y
    return None


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


def close(x, y, rtol):
    """the two texts the same but for numbers within rtol of each other (relative, or absolute below 1)"""
    if NUMBER.sub("#", x) != NUMBER.sub("#", y):
        return False
    for a, b in zip(NUMBER.findall(x), NUMBER.findall(y)):
        if a == b:  # nan too
            continue
        fa, fb = float(a), float(b)
        if not (fa == fb or abs(fa - fb) <= rtol * max(1.0, abs(fa), abs(fb))):
            return False
    return True


def compare(cfg, py, c, work, rtol):
    """(status, what differs): "identical" (every line byte for byte, --log within 1e-5, --responses byte
    for byte), "close" (the same text, the numbers within rtol: only with rtol > 0), "DIFFERS", or "NEITHER"
    (a config neither side runs: drawn badly, counted apart)"""
    if py[0] != 0 and c[0] != 0:
        return "NEITHER", [f"both sides refused it: {c[2].strip()[-300:]!r}"]
    if py[0] != c[0]:
        return "DIFFERS", [f"exit status: PyTorch {py[0]}, C {c[0]} (C's stderr: {c[2].strip()[-300:]!r}; "
                           f"PyTorch's: {py[2].strip()[-300:]!r})"]
    diffs, near = [], True
    d = first_diff(py[1], c[1])
    if d:
        near = len(py[1].splitlines()) == len(c[1].splitlines()) and all(
            close(x, y, rtol) for x, y in zip(py[1].splitlines(), c[1].splitlines()))
        diffs.append(f"stdout line {d[0]}:\n      PyTorch: {d[1]}\n      C:       {d[2]}")
    if cfg["program"] != "train":
        lp, lc = log_steps(read(os.path.join(work, "py.log"))), log_steps(read(os.path.join(work, "c.log")))
        if len(lp) != len(lc):
            diffs.append(f"--log: {len(lp)} steps in PyTorch's, {len(lc)} in C's")
            near = False
        else:
            for (sp, vp), (sc, vc) in zip(lp, lc):
                if sp != sc or not abs(vp - vc) <= 1e-5:
                    diffs.append(f"--log step {sp}: PyTorch {vp}, C {vc} (more than 1e-5 apart)")
                    near = near and sp == sc and abs(vp - vc) <= rtol * max(1.0, abs(vp))
                    break
    if cfg["program"] == "instruct":
        rp, rc = read(os.path.join(work, "py.json")), read(os.path.join(work, "c.json"))
        if rp != rc:
            d = first_diff(rp or "", rc or "")
            diffs.append(f"--responses line {d[0]}:\n      PyTorch: {d[1]}\n      C:       {d[2]}" if d
                         else "--responses: one file missing")
            near = False
    if not diffs:
        return "identical", []
    return ("close" if rtol > 0 and near else "DIFFERS"), diffs


def commands(cfg, a, work, verdict):
    """(PyTorch's argv, C's argv), the data slice and random GPT-2 written into work"""
    pyt = os.path.join(a.shared, "pytorch")
    prog = cfg["program"]
    if "slice" in cfg:
        s, n = cfg["slice"]
        with open(os.path.join(work, "data.txt"), "w", encoding="utf-8") as f:
            f.write(verdict[s:s + n])
    if prog == "gpt":
        common = ["train", "--data", "data.txt", "--tokenizer", os.path.join(a.shared, "data", "gpt2")] + cfg["args"]
        return ([a.python, os.path.join(pyt, "gpt.py")] + common + ["--log", "py.log"],
                [os.path.join(a.build, "gpt")] + common + ["--log", "c.log", "--exact", "--threads", "1"])
    if prog == "train":
        common = ["--data", "data.txt"] + cfg["args"]
        return ([a.python, os.path.join(pyt, "toy_lm.py")] + common,
                [os.path.join(a.build, "train")] + common + ["--exact", "--threads", "1"])
    data = os.path.join(a.shared, "data", "sms_spam_sample.tsv" if prog == "classify" else "instruction-data.json")
    common = [prog, "--gpt2", "gpt2", "--data", data, "--tokenizer", os.path.join(a.shared, "data", "gpt2")] + cfg["args"]
    extra_py, extra_c = ["--log", "py.log"], ["--log", "c.log", "--exact", "--threads", "1"]
    if prog == "instruct":
        extra_py += ["--responses", "py.json"]
        extra_c += ["--responses", "c.json"]
    return ([a.python, os.path.join(pyt, "finetune.py")] + common + extra_py,
            [os.path.join(a.build, "finetune")] + common + extra_c)


def llm_runs(cfg, a, work, verdict):
    """llm's runs: (label, PyTorch's argv, C's argv in exact math, C's argv in default math or None). The model
    (generate: save-random's files in work/model) or config.json (train: work/llm.json) and the slice are
    written into work; save-random's argv comes first, as a run of its own with no C side."""
    ref = os.path.join(ROOT, "tests", "tools", "llm_ref.py")
    llm = os.path.join(a.build, "llm")
    tok = ["--tokenizer", os.path.join(a.shared, "data", "gpt2")]
    exact = ["--exact", "--threads", "1"]
    if cfg["args"][0] == "train":
        s, n = cfg["slice"]
        with open(os.path.join(work, "data.txt"), "w", encoding="utf-8") as f:
            f.write(verdict[s:s + n])
        with open(os.path.join(work, "llm.json"), "w") as f:
            json.dump(cfg["config"], f, indent=1)
        common = ["train", "--config", "llm.json", "--data", "data.txt"] + tok + cfg["args"][1:]
        save_py, save_c = (["--save", "py.save"], ["--save", "c.save"]) if a.weights else ([], [])
        return [("train", [a.python, ref] + common + ["--log", "py.log"] + save_py,
                 [llm] + common + ["--log", "c.log"] + save_c + exact, None)]
    with open(os.path.join(work, "llm.json"), "w") as f:
        json.dump(cfg["config"], f, indent=1)
    sv = cfg["save"]
    runs = [("save", [a.python, ref, "save-random", "--config", "llm.json", "--seed", str(sv["seed"]), "--out", "model",
                      "--dtype", sv["dtype"], "--shards", str(sv["shards"])], None, None)]
    for label, extra in (("cached", []), ("no-cache", ["--no-kv-cache"])):
        common = ["generate", "--model", "model"] + tok + cfg["args"][1:] + extra
        runs.append((label, [a.python, ref] + common, [llm] + common + exact, [llm] + common + ["--threads", "1"]))
    return runs


def safetensors_f32(d):
    """{name: (shape, raw bytes)} of the F32 tensors in d/model.safetensors (one file: train --save's)"""
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return {k: (e["shape"], data[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]])
            for k, e in header.items() if k != "__metadata__" and e["dtype"] == "F32"}


def compare_weights(work):
    """--weights: train --save's tensors, PyTorch's against C's, bit for bit: what differs"""
    try:
        wp, wc = safetensors_f32(os.path.join(work, "py.save")), safetensors_f32(os.path.join(work, "c.save"))
    except (OSError, ValueError) as e:
        return [f"--weights: {e}"]
    out = []
    for k, (shape, b) in wp.items():  # (C's has lm_head.weight when tied as well; PyTorch's names are compared)
        if k not in wc or wc[k][0] != shape:
            out.append(f"{k}: {'missing' if k not in wc else 'shape ' + str(wc[k][0])} in C's, {shape} in PyTorch's")
        elif wc[k][1] != b:
            x, y = array.array("f", b), array.array("f", wc[k][1])
            bad = [i for i in range(len(x)) if x[i] != y[i] or (x[i] != x[i]) != (y[i] != y[i])]
            ulp = max(abs(x[i] - y[i]) for i in bad) if bad else 0.0
            out.append(f"{k}: {len(bad)} of {len(x)} elements differ (at most {ulp:.3g} apart)")
    if out:
        return [f"--weights: the trained weights differ in {len(out)} of {len(wp)} tensors (bit for bit): " + out[0]]
    return []


def llm_initial_loss(x, y):
    """train's `Training loss:` and `Validation loss:` lines (17 digits), within 1e-6 relative as tests/test_llm.c
    holds them: PyTorch's exp, even at ATEN_CPU_CAPABILITY=default, is a few ulps from libm's (about 1e-8)"""
    for head in ("Training loss: ", "Validation loss: "):
        if x.startswith(head) and y.startswith(head):
            try:
                fx, fy = float(x[len(head):]), float(y[len(head):])
            except ValueError:
                return False
            return fx == fy or abs(fx - fy) <= 1e-6 * abs(fx) or (math.isnan(fx) and math.isnan(fy))
    return False


def compare_llm(runs, results, work, rtol):
    """(status, what differs) over llm's runs: "identical" when every exact-math run prints PyTorch's lines (train:
    the two initial losses within 1e-6 relative, --log within 1e-5), "DIFFERS" when one does not, "DEFMATH" when
    exact math is identical but default math printed other ids than PyTorch (a tie flipped by rounding: not a
    failure, counted apart), "NEITHER" when PyTorch refused the config and so did C"""
    diffs, status = [], "identical"
    for label, cmd_py, cmd_c, cmd_d in runs:
        py, c, d = results[label]
        if cmd_c is None:
            if py[0] != 0:
                return "DIFFERS", [f"{label}: PyTorch failed (exit {py[0]}): {py[2].strip()[-500:]!r}"]
            continue
        if py[0] != 0 and c[0] != 0:
            return "NEITHER", [f"{label}: both sides refused it: {c[2].strip()[-300:]!r}"]
        if py[0] != c[0]:
            diffs.append(f"{label}: exit status: PyTorch {py[0]}, C {c[0]} (C's stderr: {c[2].strip()[-300:]!r}; "
                         f"PyTorch's: {py[2].strip()[-300:]!r})")
            status = "DIFFERS"
            continue
        lp, lc = py[1].splitlines(), c[1].splitlines()
        bad = [i for i in range(max(len(lp), len(lc)))
               if i >= len(lp) or i >= len(lc) or (lp[i] != lc[i] and not llm_initial_loss(lp[i], lc[i]))]
        if bad:
            i = bad[0]
            x, y = (lp[i] if i < len(lp) else "<no line>"), (lc[i] if i < len(lc) else "<no line>")
            near = rtol > 0 and len(lp) == len(lc) and all(close(lp[j], lc[j], rtol) for j in bad)
            diffs.append(f"{label}: stdout line {i + 1}:\n      PyTorch: {x}\n      C:       {y}")
            status = "DIFFERS" if status == "DIFFERS" or not near else "close"
        if label == "train":
            sp, sc = log_steps(read(os.path.join(work, "py.log"))), log_steps(read(os.path.join(work, "c.log")))
            if len(sp) != len(sc):
                diffs.append(f"--log: {len(sp)} steps in PyTorch's, {len(sc)} in C's")
                status = "DIFFERS"
            for (kp, vp), (kc, vc) in zip(sp, sc):
                if kp != kc or not abs(vp - vc) <= 1e-5:
                    diffs.append(f"--log step {kp}: PyTorch {vp}, C {vc} (more than 1e-5 apart)")
                    status = "DIFFERS"
                    break
            if cmd_c and "--save" in cmd_c and py[0] == 0:
                w = compare_weights(work)
                if w:
                    diffs += w
                    status = "DIFFERS"
    if status != "identical":
        return status, diffs
    for label, cmd_py, cmd_c, cmd_d in runs:
        if cmd_d is None:
            continue
        py, c, d = results[label]
        if (d[0], d[1]) != (py[0], py[1]):
            fd = first_diff(py[1], d[1])
            diffs.append(f"{label}, default math (not --exact): " + (
                f"exit status {d[0]} (stderr {d[2].strip()[-300:]!r})" if d[0] != py[0] else
                f"stdout line {fd[0]}:\n      PyTorch:      {fd[1]}\n      C (default): {fd[2]}"))
            diffs.append(f"  again: cd DIR && {' '.join(map(shlex.quote, cmd_d))}   (DIR: --keep's, after save-random)")
            status = "DEFMATH"
    return status, diffs


def run_llm(cfg, a, work, verdict, env_py, env_c):
    """llm's runs one after another: (status, diffs, PyTorch's seconds, C's seconds, the argvs)"""
    runs = llm_runs(cfg, a, work, verdict)
    results, t_py, t_c = {}, 0.0, 0.0
    for label, cmd_py, cmd_c, cmd_d in runs:
        py = run(cmd_py, env_py, work, a.timeout)
        t_py += py[3]
        if cmd_c is None:
            results[label] = (py, None, None)
            if py[0] != 0:
                break
            continue
        c = run(cmd_c, env_c, work, a.timeout)
        d = run(cmd_d, env_c, work, a.timeout) if cmd_d else None
        t_c += c[3] + (d[3] if d else 0)
        results[label] = (py, c, d)
        for side, r in (("py", py), ("c", c), ("c-default", d)):
            if r is None:
                continue
            for k, text in (("out", r[1]), ("err", r[2]), ("rc", f"{r[0]}\n")):
                with open(os.path.join(work, f"{side}.{label}.{k}"), "w", encoding="utf-8") as f:
                    f.write(text)
    runs = [x for x in runs if x[0] in results]
    status, diffs = compare_llm(runs, results, work, a.rtol)
    return status, diffs, t_py, t_c, {x[0]: {"python": x[1], "c": x[2], "c_default": x[3]} for x in runs}


def describe_llm(cfg):
    c = cfg["config"]
    what = ("llama" if c["model_type"] == "llama" else "qwen3") + \
        f" emb {c['hidden_size']} heads {c['num_attention_heads']} kv {c['num_key_value_heads']} " \
        f"head_dim {c.get('head_dim', '-')} layers {c['num_hidden_layers']} hidden {c['intermediate_size']} " \
        f"vocab {c['vocab_size']} ctx {c['max_position_embeddings']} " + ("tied" if c["tie_word_embeddings"] else "untied") + \
        f" theta {c['rope_theta']:g} eps {c['rms_norm_eps']:g}"
    if "rope_scaling" in c:
        rs = c["rope_scaling"]
        what += f" scaling {rs['factor']:g}/{rs['low_freq_factor']:g}/{rs['high_freq_factor']:g}/{rs['original_max_position_embeddings']}"
    if c["eos_token_id"] is not None:
        what += f" eos {c['eos_token_id']}"
    if "save" in cfg:
        what += f" {cfg['save']['dtype']} shards {cfg['save']['shards']} seed {cfg['save']['seed']}"
    else:
        what = f"the-verdict[{cfg['slice'][0]}:+{cfg['slice'][1]}] " + what
    return what + " | " + " ".join(shlex.quote(x) for x in cfg["args"])


def run_pair(cfg, a, work, verdict, env_py, env_c, i):
    """the other programs' one run a side: (status, diffs, PyTorch's seconds, C's seconds)"""
    if "gpt2" in cfg:
        rc, out, err, _ = run([a.python, os.path.join(a.shared, "pytorch", "finetune.py"), "make-gpt2", "gpt2"]
                              + cfg["gpt2"], env_py, work, a.timeout)
        if rc != 0:
            sys.exit(f"sweep: make-gpt2 failed for config {i}: {err.strip()[-500:]}")
    cmd_py, cmd_c = commands(cfg, a, work, verdict)
    py = run(cmd_py, env_py, work, a.timeout)
    c = run(cmd_c, env_c, work, a.timeout)
    status, diffs = compare(cfg, py, c, work, a.rtol)
    for side, r in (("py", py), ("c", c)):
        for k, text in (("out", r[1]), ("err", r[2]), ("rc", f"{r[0]}\n")):
            with open(os.path.join(work, f"{side}.{k}"), "w", encoding="utf-8") as f:
                f.write(text)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(dict(cfg, index=i, seed=a.seed, capability=a.capability, python=cmd_py, c=cmd_c), f, indent=1)
    return status, diffs, py[3], c[3]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--configs", type=int, default=200)
    p.add_argument("--first", type=int, default=0, help="start at config index N")
    p.add_argument("--only", type=int, action="append", help="run config I only (may repeat)")
    p.add_argument("--programs", default=",".join(PROGRAMS), help="drawn in turn: gpt,classify,instruct,train,llm (the first four: the configs of the "
                   "sweeps before llm came)")
    p.add_argument("--capability", default="default", choices=["default", "avx2", "avx512", "native"],
                   help="ATEN_CPU_CAPABILITY and AC_CPU_CAPABILITY; native: neither set (each side's best)")
    p.add_argument("--rtol", type=float, default=0.0,
                   help="also count configs whose lines differ only in numbers within this relative tolerance")
    p.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3")
    p.add_argument("--blas", default="/usr/lib/x86_64-linux-gnu/blas",
                   help="LD_LIBRARY_PATH for PyTorch: the reference BLAS ('' for the machine's own)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    p.add_argument("--timeout", type=int, default=300, help="seconds per side of a config")
    p.add_argument("--keep", help="keep each config's files under this directory")
    p.add_argument("--weights", action="store_true",
                   help="llm train: also --save both sides' trained weights and compare them bit for bit")
    a = p.parse_args()
    a.build, a.shared = os.path.abspath(a.build), os.path.abspath(a.shared)
    programs = [x for x in a.programs.split(",") if x]
    for x in programs:
        if x not in PROGRAMS:
            p.error(f"--programs: unknown program {x!r} (gpt, classify, instruct, train, llm)")
    binary = {"gpt": "gpt", "classify": "finetune", "instruct": "finetune", "train": "train", "llm": "llm"}
    for x in sorted({binary[x] for x in programs}):
        if not os.access(os.path.join(a.build, x), os.X_OK):
            sys.exit(f"sweep: {os.path.join(a.build, x)} is missing: run make first")
    with open(os.path.join(a.shared, "data", "the-verdict.txt"), encoding="utf-8") as f:
        verdict = f.read()
    env_py = dict(os.environ, ATEN_CPU_CAPABILITY=a.capability, OMP_NUM_THREADS="1")
    env_py.pop("LD_LIBRARY_PATH", None)
    if a.blas:
        env_py["LD_LIBRARY_PATH"] = a.blas
    env_c = dict(os.environ, AC_CPU_CAPABILITY=a.capability, AC_NO_LIVE="1")
    for k in ("AC_FAIL_ALLOC", "AC_DEBUG"):
        env_c.pop(k, None)
    if a.capability == "native":
        env_py.pop("ATEN_CPU_CAPABILITY")
        env_c.pop("AC_CPU_CAPABILITY")
    indices = a.only or list(range(a.first, a.first + a.configs))
    print(f"sweep: seed {a.seed}, {len(indices)} configs ({','.join(programs)}), capability {a.capability}, "
          f"PyTorch LD_LIBRARY_PATH={a.blas or '(unset)'}", flush=True)
    counts = {x: dict.fromkeys(STATUSES, 0) for x in programs}
    failed, defmath, t_start = [], [], time.time()
    for i in indices:
        cfg = draw(a.seed, i, programs, len(verdict))
        work = os.path.join(a.keep, f"{i:04d}") if a.keep else tempfile.mkdtemp(prefix="sweep-")
        os.makedirs(work, exist_ok=True)
        try:
            if cfg["program"] == "llm":
                status, diffs, t_py, t_c, cmds = run_llm(cfg, a, work, verdict, env_py, env_c)
                with open(os.path.join(work, "config.json"), "w") as f:
                    json.dump(dict(cfg, index=i, seed=a.seed, capability=a.capability, runs=cmds), f, indent=1)
            else:
                status, diffs, t_py, t_c = run_pair(cfg, a, work, verdict, env_py, env_c, i)
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
        if cfg["program"] == "llm":
            what = describe_llm(cfg)
        else:
            what = " ".join(cfg.get("gpt2", []) + cfg["args"])
            if "slice" in cfg:
                what = f"the-verdict[{cfg['slice'][0]}:+{cfg['slice'][1]}] " + what
        counts[cfg["program"]][status] += 1
        print(f"{i:4d} {cfg['program']:8s} {status:9s} {t_py:5.1f}s {t_c:5.1f}s  {what}", flush=True)
        for d in diffs:
            print("     " + d, flush=True)
        if status == "DEFMATH":
            defmath.append(i)
        elif status != "identical":
            failed.append(i)
    total = {k: sum(v[k] for v in counts.values()) for k in STATUSES}
    print(f"summary (seed {a.seed}, capability {a.capability}, PyTorch LD_LIBRARY_PATH={a.blas or '(unset)'}): "
          f"{total['identical']} of {len(indices)} identical" +
          (f", {total['close']} the same text with numbers within {a.rtol:g}" if a.rtol > 0 else "") +
          f", {total['DIFFERS']} differing, {total['NEITHER']} run by neither side" +
          (f", {total['DEFMATH']} identical in exact math whose default math printed other ids (not a failure" +
           (f": {' '.join(map(str, defmath))})" if defmath else ")") if "llm" in programs else "") + "; " +
          ", ".join(f"{k} {v['identical']}/{sum(v.values())}" for k, v in counts.items()) +
          f"; {time.time() - t_start:.0f} s" + (f"; not identical: {' '.join(map(str, failed))}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
