#!/usr/bin/env python3
"""The random-config sweep of issue 40: the C programs with --exact against their PyTorch 1.13 reference
programs (../shared/pytorch/), on configs drawn from a seed, each small enough to run in seconds.

    python3 tests/tools/sweep.py --seed 40 --configs 200                  # the promise: every config identical
    python3 tests/tools/sweep.py --seed 40 --configs 200 --capability avx2
    python3 tests/tools/sweep.py --seed 7 --configs 12 --programs gpt,instruct --keep /tmp/sweep

Four programs, drawn in turn: `gpt train` (gpt.py train: layers, heads, head dims 1-64 odd ones included,
context 2-300, batch 1-8, dropout, qkv bias, the eval settings, on a slice of the-verdict), `finetune classify`
and `finetune instruct` (finetune.py on a random GPT-2 that `finetune.py make-gpt2` writes, LoRA and -100
targets included), and `train` (toy_lm.py). For each config both sides run; every printed line (stdout) is
compared byte for byte, `--log` steps within 1e-5 and instruct's `--responses` JSON byte for byte. One row per
config, the first differing lines of a difference, and a summary; the exit status is 1 when any differs.

PyTorch runs as the goldens are made: `/usr/bin/python3` with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas
(Debian's reference BLAS, which sums each dot product in order) and ATEN_CPU_CAPABILITY=<--capability>; the C
side gets AC_CPU_CAPABILITY=<--capability>. `--python` and `--blas` change those. A config is drawn from the
seed and its index alone (random.Random(f"{seed}:{index}")), so `--only I` reruns config I of a sweep.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = ("gpt", "classify", "instruct", "train")


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


def draw(seed, index, programs, verdict_len):
    r = random.Random(f"{seed}:{index}")
    prog = programs[index % len(programs)]
    return {"gpt": lambda: draw_gpt(r, verdict_len), "classify": lambda: draw_classify(r),
            "instruct": lambda: draw_instruct(r), "train": lambda: draw_train(r, verdict_len)}[prog]()


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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--configs", type=int, default=200)
    p.add_argument("--first", type=int, default=0, help="start at config index N")
    p.add_argument("--only", type=int, action="append", help="run config I only (may repeat)")
    p.add_argument("--programs", default=",".join(PROGRAMS), help="drawn in turn: gpt,classify,instruct,train")
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
    a = p.parse_args()
    a.build, a.shared = os.path.abspath(a.build), os.path.abspath(a.shared)
    programs = [x for x in a.programs.split(",") if x]
    for x in programs:
        if x not in PROGRAMS:
            p.error(f"--programs: unknown program {x!r} (gpt, classify, instruct, train)")
    for x in ("gpt", "finetune", "train"):
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
    counts = {x: {"identical": 0, "close": 0, "DIFFERS": 0, "NEITHER": 0} for x in programs}
    failed, t_start = [], time.time()
    for i in indices:
        cfg = draw(a.seed, i, programs, len(verdict))
        work = os.path.join(a.keep, f"{i:04d}") if a.keep else tempfile.mkdtemp(prefix="sweep-")
        os.makedirs(work, exist_ok=True)
        try:
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
        finally:
            if not a.keep:
                shutil.rmtree(work, ignore_errors=True)
        what = " ".join(cfg.get("gpt2", []) + cfg["args"])
        if "slice" in cfg:
            what = f"the-verdict[{cfg['slice'][0]}:+{cfg['slice'][1]}] " + what
        counts[cfg["program"]][status] += 1
        print(f"{i:4d} {cfg['program']:8s} {status:9s} {py[3]:5.1f}s {c[3]:5.1f}s  {what}", flush=True)
        for d in diffs:
            print("     " + d, flush=True)
        if status != "identical":
            failed.append(i)
    total = {k: sum(v[k] for v in counts.values()) for k in ("identical", "close", "DIFFERS", "NEITHER")}
    print(f"summary (seed {a.seed}, capability {a.capability}, PyTorch LD_LIBRARY_PATH={a.blas or '(unset)'}): "
          f"{total['identical']} of {len(indices)} identical" +
          (f", {total['close']} the same text with numbers within {a.rtol:g}" if a.rtol > 0 else "") +
          f", {total['DIFFERS']} differing, {total['NEITHER']} run by neither side; " +
          ", ".join(f"{k} {v['identical']}/{sum(v.values())}" for k, v in counts.items()) +
          f"; {time.time() - t_start:.0f} s" + (f"; not identical: {' '.join(map(str, failed))}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
