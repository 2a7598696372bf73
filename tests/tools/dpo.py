"""Reference program: the book's DPO notebook (rasbt/LLMs-from-scratch,
ch07/04_preference-tuning-with-dpo/dpo-from-scratch.ipynb) in PyTorch 1.13, on ../shared/pytorch/gpt.py's
GPTModel, as ../shared/pytorch/finetune.py adapts chapters 6 and 7: the same flags, the same draws, the
notebook's printed lines in its order. It is the specification of `./build/finetune dpo`.

    python3 tests/tools/dpo.py --show-batches                        # the book's test-mode model, the book's data
    python3 ../shared/pytorch/finetune.py make-gpt2 tiny-gpt2        # a small random GPT-2 (Hugging Face's layout)
    python3 tests/tools/dpo.py --gpt2 tiny-gpt2 --subset 8 --batch 4 --allowed-max-length 40

Always printed: `Number of entries`, the split lengths, the pre-training evaluation (four lines), the
`Ep ...` lines, one sample after each epoch, and the test set's first three answers of the reference and the
policy (the notebook's cell after training). --show-batches adds the notebook's data cells (the pprints,
format_input and the two responses, the two-entry collate example, every training batch's shapes), the
gather demonstrations and one batch's loss, in the notebook's order. The device lines are left out.
--log FILE writes every step's loss ("step N loss X"); --responses FILE the test set with each policy
answer (json.dump(test_data, f, indent=4)); `(training took X s)` goes to stderr.
"""
import argparse
import copy
import json
import os
import pprint
import sys
import time
from functools import partial

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "pytorch"))
from finetune import format_input, model_for, respond  # noqa: E402
from gpt import generate, generate_and_print_sample, text_to_token_ids, token_ids_to_text  # noqa: E402
from gpt2_tokenizer import GPT2Tokenizer  # noqa: E402

DATA = os.path.join(SHARED, "data")


class PreferenceDataset(Dataset):
    """Each entry's prompt, and the prompt with each response, encoded."""

    def __init__(self, data, tokenizer):
        self.data = data
        self.encoded_texts = []
        for entry in data:
            prompt = format_input(entry)
            chosen_full_text = f"{prompt}\n\n### Response:\n{entry['chosen']}"
            rejected_full_text = f"{prompt}\n\n### Response:\n{entry['rejected']}"
            self.encoded_texts.append({"prompt": tokenizer.encode(prompt),
                                       "chosen": tokenizer.encode(chosen_full_text),
                                       "rejected": tokenizer.encode(rejected_full_text)})

    def __getitem__(self, index):
        return self.encoded_texts[index]

    def __len__(self):
        return len(self.data)


def custom_collate_fn(batch, pad_token_id=50256, allowed_max_length=None, mask_prompt_tokens=True):
    """chosen and rejected padded to one length (the longest of both + 1); each mask True on the response
    tokens only (not the padding; with mask_prompt_tokens not the prompt and the two newlines after it);
    all four cut to allowed_max_length. The prompts stay a list of tensors."""
    batch_data = {"prompt": [], "chosen": [], "rejected": [], "rejected_mask": [], "chosen_mask": []}
    max_length_common = 0
    if batch:
        for key in ["chosen", "rejected"]:
            max_length_common = max(max_length_common, max(len(item[key]) + 1 for item in batch))
    for item in batch:
        prompt = torch.tensor(item["prompt"])
        batch_data["prompt"].append(prompt)
        for key in ["chosen", "rejected"]:
            sequence = item[key]
            padded = sequence + [pad_token_id] * (max_length_common - len(sequence))
            mask = torch.ones(len(padded)).bool()
            mask[len(sequence):] = False
            if mask_prompt_tokens:
                mask[:prompt.shape[0] + 2] = False
            batch_data[key].append(torch.tensor(padded))
            batch_data[f"{key}_mask"].append(mask)
    for key in ["chosen", "rejected", "chosen_mask", "rejected_mask"]:
        tensor_stack = torch.stack(batch_data[key])
        if allowed_max_length is not None:
            tensor_stack = tensor_stack[:, :allowed_max_length]
        batch_data[key] = tensor_stack
    return batch_data


def compute_dpo_loss(model_chosen_logprobs, model_rejected_logprobs, reference_chosen_logprobs,
                     reference_rejected_logprobs, beta=0.1):
    model_logratios = model_chosen_logprobs - model_rejected_logprobs
    reference_logratios = reference_chosen_logprobs - reference_rejected_logprobs
    logits = model_logratios - reference_logratios
    losses = -F.logsigmoid(beta * logits)
    chosen_rewards = (model_chosen_logprobs - reference_chosen_logprobs).detach()
    rejected_rewards = (model_rejected_logprobs - reference_rejected_logprobs).detach()
    return losses.mean(), chosen_rewards.mean(), rejected_rewards.mean()


def compute_logprobs(logits, labels, selection_mask=None):
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    log_probs = F.log_softmax(logits, dim=-1)
    selected_log_probs = torch.gather(input=log_probs, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
    if selection_mask is not None:
        mask = selection_mask[:, 1:].clone()
        selected_log_probs = selected_log_probs * mask
        return selected_log_probs.sum(-1) / mask.sum(-1)
    return selected_log_probs.mean(-1)


def compute_dpo_loss_batch(batch, policy_model, reference_model, beta):
    policy_chosen_log_probas = compute_logprobs(policy_model(batch["chosen"]), batch["chosen"], batch["chosen_mask"])
    policy_rejected_log_probas = compute_logprobs(policy_model(batch["rejected"]), batch["rejected"],
                                                  batch["rejected_mask"])
    with torch.no_grad():
        ref_chosen_log_probas = compute_logprobs(reference_model(batch["chosen"]), batch["chosen"],
                                                 batch["chosen_mask"])
        ref_rejected_log_probas = compute_logprobs(reference_model(batch["rejected"]), batch["rejected"],
                                                   batch["rejected_mask"])
    return compute_dpo_loss(policy_chosen_log_probas, policy_rejected_log_probas, ref_chosen_log_probas,
                            ref_rejected_log_probas, beta)


def compute_dpo_loss_loader(data_loader, policy_model, reference_model, beta, num_batches=None):
    total_loss, total_chosen_rewards, total_rejected_rewards = 0., 0., 0.
    if len(data_loader) == 0:
        return float("nan")
    elif num_batches is None:
        num_batches = len(data_loader)
    else:
        num_batches = min(num_batches, len(data_loader))
    for i, batch in enumerate(data_loader):
        if i < num_batches:
            loss, chosen_rewards, rejected_rewards = compute_dpo_loss_batch(batch, policy_model, reference_model, beta)
            total_loss += loss.item()
            total_chosen_rewards += chosen_rewards.item()
            total_rejected_rewards += rejected_rewards.item()
        else:
            break
    return total_loss / num_batches, total_chosen_rewards / num_batches, total_rejected_rewards / num_batches


def evaluate_dpo_loss_loader(policy_model, reference_model, train_loader, val_loader, beta, eval_iter):
    policy_model.eval()
    with torch.no_grad():
        train_loss, train_chosen, train_rejected = compute_dpo_loss_loader(train_loader, policy_model,
                                                                           reference_model, beta, eval_iter)
        val_loss, val_chosen, val_rejected = compute_dpo_loss_loader(val_loader, policy_model, reference_model,
                                                                     beta, eval_iter)
    policy_model.train()
    return {"train_loss": train_loss, "train_chosen_reward": train_chosen, "train_rejected_reward": train_rejected,
            "val_loss": val_loss, "val_chosen_reward": val_chosen, "val_rejected_reward": val_rejected}


def train_model_dpo_simple(policy_model, reference_model, train_loader, val_loader, optimizer, num_epochs, beta,
                           eval_freq, eval_iter, start_context, tokenizer, log):
    tracking = {k: [] for k in ("train_losses", "train_chosen_rewards", "train_rejected_rewards", "val_losses",
                                "val_chosen_rewards", "val_rejected_rewards", "tokens_seen")}
    tokens_seen, global_step = 0, -1
    for epoch in range(num_epochs):
        policy_model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            loss, chosen_rewards, rejected_rewards = compute_dpo_loss_batch(batch, policy_model, reference_model, beta)
            loss.backward()
            optimizer.step()
            tokens_seen += batch["chosen"].numel()
            global_step += 1
            if log:
                log.write(f"step {global_step} loss {loss.item():.6f}\n")
            if global_step % eval_freq == 0:
                res = evaluate_dpo_loss_loader(policy_model, reference_model, train_loader, val_loader, beta,
                                               eval_iter)
                for k, r in (("train_losses", "train_loss"), ("train_chosen_rewards", "train_chosen_reward"),
                             ("train_rejected_rewards", "train_rejected_reward"), ("val_losses", "val_loss"),
                             ("val_chosen_rewards", "val_chosen_reward"),
                             ("val_rejected_rewards", "val_rejected_reward")):
                    tracking[k].append(res[r])
                tracking["tokens_seen"].append(tokens_seen)
                train_reward_margin = res["train_chosen_reward"] - res["train_rejected_reward"]
                val_reward_margin = res["val_chosen_reward"] - res["val_rejected_reward"]
                print(f"Ep {epoch+1} (Step {global_step:06d}): "
                      f"Train loss {res['train_loss']:.3f}, Val loss {res['val_loss']:.3f}, "
                      f"Train reward margins {train_reward_margin:.3f}, "
                      f"Val reward margins {val_reward_margin:.3f}", flush=True)
        generate_and_print_sample(policy_model, tokenizer, start_context, 50)
    return tracking


def decode_tokens_from_batch(token_ids, tokenizer):
    return tokenizer.decode(token_ids.flatten().tolist())


def show_list(tensors):
    """What the notebook's cell shows for a list of tensors (IPython's pretty printer: one per line, each
    line of a tensor's repr indented by one)."""
    print("[" + ",\n ".join(repr(t).replace("\n", "\n ") for t in tensors) + "]")


def show_data(data, tokenizer, collate):
    """The notebook's data cells before the splits"""
    for i in (50, 999):
        if i < len(data):
            pprint.pp(data[i])
    if len(data) > 50:
        print(format_input(data[50]))
        print(f"### Response:\n{data[50]['chosen']}")
        print(f"### Response:\n{data[50]['rejected']}")


def show_example(data, tokenizer, collate):
    """The two-entry collate example"""
    example_data = data[:2]
    for i in example_data:
        print()
        pprint.pp(i)
    example_dataloader = DataLoader(PreferenceDataset(example_data, tokenizer), batch_size=2, collate_fn=collate,
                                    shuffle=False)
    for batch in example_dataloader:
        break
    print("batch.keys:", batch.keys())
    show_list(batch["prompt"])
    print(repr(batch["chosen"]))
    for key in ("prompt", "chosen", "rejected"):
        print(decode_tokens_from_batch(batch[key][0], tokenizer))
    print("chosen inputs:", batch["chosen"][0].shape)
    print("chosen mask:  ", batch["chosen_mask"][0].shape)
    print(repr(batch["chosen_mask"][0]))
    print(decode_tokens_from_batch(batch["chosen"][0][batch["chosen_mask"][0]], tokenizer))
    print(decode_tokens_from_batch(batch["rejected"][0][batch["rejected_mask"][0]], tokenizer))


def show_gather():
    """The notebook's two demonstrations of gather"""
    logits = torch.tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    targets = torch.tensor([0, 2])
    log_softmax_logits = F.log_softmax(logits, dim=1)
    selected_log_probs = torch.gather(input=log_softmax_logits, dim=1, index=targets.unsqueeze(1)).squeeze(1)
    manual_loss = -selected_log_probs.mean()
    cross_entropy_loss = F.cross_entropy(logits, targets)
    print(manual_loss, cross_entropy_loss)
    t = torch.tensor([[1., 2.], [3., 4.]])
    m = torch.tensor([[1, 1], [0, 1]])
    print(repr(torch.gather(input=t, dim=-1, index=m)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(DATA, "instruction-data-with-preference.json"))
    p.add_argument("--tokenizer", default=os.path.join(DATA, "gpt2"))
    p.add_argument("--gpt2", help="a Hugging Face GPT-2 directory (config.json + model.safetensors)")
    p.add_argument("--context", type=int, default=120)
    p.add_argument("--emb-dim", type=int, default=12)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--qkv-bias", action="store_true")
    p.add_argument("--seed", type=int, default=123)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-6)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--eval-freq", type=int, default=5)
    p.add_argument("--eval-iter", type=int, default=5)
    p.add_argument("--subset", type=int, default=0)
    p.add_argument("--allowed-max-length", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--show-batches", action="store_true")
    p.add_argument("--responses")
    p.add_argument("--log")
    p.add_argument("--save")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    tokenizer = GPT2Tokenizer(a.tokenizer)
    with open(a.data, encoding="utf-8") as f:
        data = json.load(f)
    print("Number of entries:", len(data))
    collate = partial(custom_collate_fn, mask_prompt_tokens=True, allowed_max_length=a.allowed_max_length)
    if a.show_batches:
        show_data(data, tokenizer, collate)
    train_portion = int(len(data) * 0.85)
    test_portion = int(len(data) * 0.1)
    train_data = data[:train_portion]
    test_data = data[train_portion:train_portion + test_portion]
    val_data = data[train_portion + test_portion:]
    if a.subset:
        train_data, val_data, test_data = train_data[:a.subset], val_data[:a.subset], test_data[:a.subset]
    print("Training set length:", len(train_data))
    print("Validation set length:", len(val_data))
    print("Test set length:", len(test_data), flush=True)
    if a.show_batches:
        show_example(data, tokenizer, collate)

    torch.manual_seed(a.seed)
    train_loader = DataLoader(PreferenceDataset(train_data, tokenizer), batch_size=a.batch, collate_fn=collate,
                              shuffle=True, drop_last=True, num_workers=0)
    val_loader = DataLoader(PreferenceDataset(val_data, tokenizer), batch_size=a.batch, collate_fn=collate,
                            shuffle=False, drop_last=False, num_workers=0)
    batch = None
    if a.show_batches:
        print("Train loader:")
        for batch in train_loader:
            print(batch["chosen"].shape, batch["rejected"].shape)
        show_gather()
        sys.stdout.flush()

    policy_model, cfg = model_for(a)
    reference_model = copy.deepcopy(policy_model)  # the notebook loads the same weights a second time
    reference_model.eval()
    for prm in reference_model.parameters():
        prm.requires_grad = False
    if batch is not None:
        with torch.no_grad():
            loss = compute_dpo_loss_batch(batch, policy_model, reference_model, beta=a.beta)
        print(loss)

    torch.manual_seed(a.seed)
    res = evaluate_dpo_loss_loader(policy_model, reference_model, train_loader, val_loader, a.beta, a.eval_iter)
    print("Training loss:", res["train_loss"])
    print("Validation loss:", res["val_loss"])
    print("Train reward margin:", res["train_chosen_reward"] - res["train_rejected_reward"])
    print("Val reward margin:", res["val_chosen_reward"] - res["val_rejected_reward"], flush=True)

    t0 = time.time()
    torch.manual_seed(a.seed)
    optimizer = torch.optim.AdamW(policy_model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    log = open(a.log, "w") if a.log else None
    train_model_dpo_simple(policy_model, reference_model, train_loader, val_loader, optimizer, a.epochs, a.beta,
                           a.eval_freq, a.eval_iter, format_input(val_data[2]), tokenizer, log)
    if log:
        log.close()
    print(f"(training took {time.time() - t0:.1f} s)", file=sys.stderr)

    policy_model.eval()
    torch.manual_seed(a.seed)
    context = cfg["context_length"]
    for entry in test_data[:3]:
        input_text = format_input(entry)
        reference_response_text = respond(reference_model, tokenizer, entry, context, a.max_new_tokens)
        policy_response_text = respond(policy_model, tokenizer, entry, context, a.max_new_tokens)
        print(input_text)
        print(f"\nCorrect response:\n>> {entry['output']}")
        print(f"\nReference model response:\n>> {reference_response_text.strip()}")
        print(f"\nPolicy model response:\n>> {policy_response_text.strip()}")
        print("\n-------------------------------------\n", flush=True)
    if a.responses:
        for entry in test_data:
            entry["model_response"] = respond(policy_model, tokenizer, entry, context, a.max_new_tokens)
        with open(a.responses, "w") as f:
            json.dump(test_data, f, indent=4)
    if a.save:
        torch.save(policy_model.state_dict(), a.save)


if __name__ == "__main__":
    main()
