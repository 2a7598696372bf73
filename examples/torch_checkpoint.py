"""Move attention.c checkpoints to and from PyTorch (a hand check; the project never needs PyTorch).

    python3 examples/torch_checkpoint.py continue CKPT --data FILE --steps N [--batch B] [--lr X] [--save OUT]

Loads a checkpoint written by `./build/train --save` (safetensors: the model's state_dict under
PyTorch's names, the Adam state under "optim.state.<i>.<name>", the generator under "rng_state"),
puts all three into ../shared/pytorch/toy_lm.py's ToyLM, torch.optim.Adam and torch's CPU
generator, and trains N more steps, printing toy_lm.py's lines. For the same checkpoint and flags,
`./build/train --load CKPT --steps N` prints the same losses. --save writes the state back in the
same format, for `./build/train --load`.

    python3 examples/torch_checkpoint.py gpt CKPT [--prompt TEXT] [--sample-tokens N]

Loads a checkpoint of `./build/gpt train --save` (the book's GPTModel: the config from its metadata)
into ../shared/pytorch/gpt.py's GPTModel with load_state_dict(strict=True), leaving out the
optimizer, generator and position entries, and prints gpt.py's generate line (greedy), which
`./build/gpt generate --load CKPT` with the same model flags prints too.
Run with Debian's python3-torch and ATEN_CPU_CAPABILITY=default. Reads and writes safetensors with
json + struct (the format is an 8-byte header length, a JSON header, raw little-endian data).
"""
import argparse, json, os, struct, sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'shared', 'pytorch'))
from toy_lm import ToyLM  # noqa: E402

DTYPES = {'F32': (torch.float32, 4), 'F64': (torch.float64, 8), 'I64': (torch.int64, 8), 'I32': (torch.int32, 4),
          'BOOL': (torch.bool, 1)}


def load(path):
    raw = open(path, 'rb').read()
    n = struct.unpack_from('<Q', raw, 0)[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop('__metadata__', {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        dt, _ = DTYPES[e['dtype']]
        b, end = e['data_offsets']
        out[name] = torch.frombuffer(bytearray(data[b:end]), dtype=dt).reshape(e['shape']).clone()
    return out, meta


def save(path, tensors, meta):
    header, chunks, off = {'__metadata__': meta}, [], 0
    for name, t in tensors.items():
        tag = {v[0]: k for k, v in DTYPES.items()}[t.dtype]
        b = t.contiguous().numpy().tobytes()
        header[name] = {'dtype': tag, 'shape': list(t.shape), 'data_offsets': [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path + '.tmp', 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(chunks))
    os.replace(path + '.tmp', path)


# torch's CPU generator state (CPUGeneratorImplState, 5056 bytes): seed, left, seeded, next,
# state[624] (as uint64), normal_x, normal_y (the cached Box-Muller value), normal_rho, normal_is_valid, ...
def rng_to_torch(st):
    st = [int(x) for x in st]
    buf = bytearray(torch.get_rng_state().numpy().tobytes())
    seed = struct.unpack_from('<Q', buf, 0)[0]
    struct.pack_into('<QiiQ', buf, 0, seed, st[624], 1, st[625])
    struct.pack_into('<624Q', buf, 24, *[s & 0xFFFFFFFF for s in st[:624]])
    cached = struct.unpack('<d', struct.pack('<q', st[627]))[0]
    struct.pack_into('<dddi', buf, 24 + 624 * 8, 0.0, cached, 0.0, 1 if st[626] else 0)
    torch.set_rng_state(torch.tensor(list(buf), dtype=torch.uint8))


def rng_from_torch():
    buf = torch.get_rng_state().numpy().tobytes()
    _, left, _, nxt = struct.unpack_from('<QiiQ', buf, 0)
    state = list(struct.unpack_from('<624Q', buf, 24))
    _, cached, _, valid = struct.unpack_from('<dddi', buf, 24 + 624 * 8)
    bits = struct.unpack('<q', struct.pack('<d', cached))[0]
    return torch.tensor(state + [left, nxt, valid, bits], dtype=torch.int64)


def main():
    p = argparse.ArgumentParser()
    p.add_argument('command', choices=['continue', 'gpt'])
    p.add_argument('ckpt')
    p.add_argument('--data')
    p.add_argument('--prompt', default='Hello, I am')          # gpt generate's defaults: the same line
    p.add_argument('--sample-tokens', type=int, default=6)
    p.add_argument('--steps', type=int, default=10)
    p.add_argument('--batch', type=int, default=16)
    p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--save')
    a = p.parse_args()
    torch.set_num_threads(1)
    tensors, meta = load(a.ckpt)
    if a.command == 'gpt':
        return gpt_check(a, tensors, meta)
    context, dim, heads, vocab_size = (int(x) for x in meta['context dim heads vocab_size'].split())
    text = open(a.data, encoding='utf-8').read()
    chars = sorted(set(text))
    assert ''.join(chars) == meta['vocab'], 'the checkpoint was trained on another vocabulary'
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])

    model = ToyLM(vocab_size, context, dim, heads)
    model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith(('optim.', 'rng_state'))})
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    for i, prm in enumerate(model.parameters()):
        if 'optim.state.%d.exp_avg' % i in tensors:
            opt.state[prm] = {'step': tensors['optim.state.%d.step' % i].reshape(()).clone(),
                              'exp_avg': tensors['optim.state.%d.exp_avg' % i],
                              'exp_avg_sq': tensors['optim.state.%d.exp_avg_sq' % i]}
    rng_to_torch(tensors['rng_state'])
    start = int(meta.get('step', 0))
    for step in range(start + 1, start + a.steps + 1):  # the loop of toy_lm.py
        ix = torch.randint(len(data) - context, (a.batch,))
        x = torch.stack([data[i:i + context] for i in ix])
        y = torch.stack([data[i + 1:i + context + 1] for i in ix])
        loss = F.cross_entropy(model(x).view(-1, len(chars)), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
    if a.save:
        out = dict(model.state_dict())
        for i, prm in enumerate(model.parameters()):
            s = opt.state.get(prm)
            if s:
                out['optim.state.%d.step' % i] = s['step'].reshape(()).to(torch.float32)
                out['optim.state.%d.exp_avg' % i] = s['exp_avg']
                out['optim.state.%d.exp_avg_sq' % i] = s['exp_avg_sq']
        out['rng_state'] = rng_from_torch()
        save(a.save, out, dict(meta, step=str(start + a.steps)))


def gpt_check(a, tensors, meta):
    from gpt import GPTModel, generate_text_simple, text_to_token_ids, token_ids_to_text
    from gpt2_tokenizer import GPT2Tokenizer
    v, ctx, e, h, n, drop, bias = meta['config'].split()
    cfg = {"vocab_size": int(v), "context_length": int(ctx), "emb_dim": int(e), "n_heads": int(h), "n_layers": int(n),
           "drop_rate": float(drop), "qkv_bias": bias == '1'}
    model = GPTModel(cfg)
    model.load_state_dict({k: t for k, t in tensors.items()
                           if not k.startswith(('optim.', 'rng_state', 'loader.', 'curve.'))}, strict=True)
    model.eval()
    tok = GPT2Tokenizer(os.path.join(HERE, '..', '..', 'shared', 'data', 'gpt2'))
    ids = generate_text_simple(model, text_to_token_ids(a.prompt, tok), a.sample_tokens, cfg["context_length"])
    print("Output text:", token_ids_to_text(ids, tok))


if __name__ == '__main__':
    main()
