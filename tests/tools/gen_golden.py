"""Generate the golden data under tests/data/ (run once; the tests never need PyTorch).

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_golden.py

Needs Debian's python3-torch (1.13) and ../shared (the spec's rng_reference.py,
print-golden.json, toy_lm.py and the-verdict.txt). Writes:
  tests/data/rng_golden.txt     random streams from rng_reference.py (pure Python, verified against torch)
  tests/data/print_records.txt  every print-golden record's tensor: dtype, shape, flags, exact values
  tests/data/nn_golden.txt      module outputs and gradients, losses, optimizer steps, from PyTorch
  tests/data/toy_lm_losses.txt  toy_lm.py's loss at every step, for two sets of flags
  tests/data/ops_golden.txt     the ops and in-place writes of issue 10: outputs and gradients
Format of every file: one record per line, `name count v1 v2 ...` (floats as %.9g, exact for float32),
except print_records.txt (documented in tests/test_print.c).
"""
import json, math, os, struct, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(ROOT, '..', 'shared')
OUT = os.path.join(ROOT, 'tests', 'data')
sys.path.insert(0, os.path.join(SHARED, 'spec'))
import rng_reference as R  # noqa: E402

assert os.environ.get('ATEN_CPU_CAPABILITY') == 'default', 'run with ATEN_CPU_CAPABILITY=default'
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def fmt(v):
    if isinstance(v, bool):
        return '1' if v else '0'
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return 'nan'
    if math.isinf(v):
        return 'inf' if v > 0 else '-inf'
    return '%.9g' % v


class Writer:
    def __init__(self, path):
        self.f = open(path, 'w')
        self.names = set()

    def put(self, name, values):
        if isinstance(values, torch.Tensor):
            values = values.detach().reshape(-1).tolist()
        assert name not in self.names, name
        self.names.add(name)
        self.f.write('%s %d %s\n' % (name, len(values), ' '.join(fmt(v) for v in values)))


def fnv(values):
    """FNV-1a 64 over the float32 bit patterns (little-endian bytes)."""
    h = 0xcbf29ce484222325
    for v in values:
        for b in struct.pack('<f', v):
            h ^= b
            h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def gen_rng():
    w = Writer(os.path.join(OUT, 'rng_golden.txt'))
    seeds = [0, 1, 42, 123, 2024, 987654321, 2**32 + 5, 2**32 - 1]
    sizes = list(range(1, 41)) + [100]
    for s in seeds:
        for n in sizes if s in (0, 123) else [1, 5, 15, 16, 17, 31, 32, 33, 100]:
            w.put('rand.%d.%d' % (s, n), R.Generator(s).rand(n))
            w.put('randn.%d.%d' % (s, n), R.Generator(s).randn(n, path='scalar'))
    for s in (123, 0):
        v = R.Generator(s).randn(150000, path='scalar')
        w.put('randn150000.%d.head' % s, v[:8])
        w.put('randn150000.%d.tail' % s, v[-8:])
        w.put('randn150000.%d.fnv1a' % s, [fnv(v)])
    # An interleaved sequence on one generator (the C test replays the same calls in order).
    g = R.Generator(123)
    w.put('seq.rand3', g.rand(3))
    w.put('seq.randn5', g.randn(5, path='scalar'))
    w.put('seq.rand2', g.rand(2))
    w.put('seq.randn16', g.randn(16, path='scalar'))
    w.put('seq.randn1', g.randn(1, path='scalar'))  # the cached sine value of randn(5)'s last pair
    w.put('seq.randint', g.randint(0, 10, 8))
    w.put('seq.randint_neg', g.randint(-5, 5, 6))
    w.put('seq.randint_big', g.randint(0, 2**40, 4))
    w.put('seq.randperm10', g.randperm(10))
    for n in (5, 15, 16, 20, 33):
        w.put('seq.normal_%d' % n, g.normal_(n, 0.5, 2.0, path='scalar'))
    w.put('seq.uniform10', g.uniform_(10, -0.7, 1.3, fma=False))
    wt, b = R.linear_init(g, 3, 4, fma=False)
    w.put('seq.linear_w', wt)
    w.put('seq.linear_b', b)
    w.put('seq.bernoulli', g.bernoulli_(12, 0.3))
    w.put('seq.exponential', g.exponential_(5, 1.5))
    w.put('seq.multinomial', g.multinomial([[0.1, 0.2, 0.3, 0.4], [1.0, 0.0, 2.0, 3.0]], 1, False)[0]
          + g.multinomial([[0.1, 0.2, 0.3, 0.4], [1.0, 0.0, 2.0, 3.0]], 1, False)[1])
    w.put('seq.multinomial3', g.multinomial([[0.1, 0.2, 0.3, 0.4, 0.5]], 3, False)[0])
    w.put('seq.multinomial_repl', g.multinomial([[0.1, 0.2, 0.3, 0.4]], 5, True)[0])
    w.put('seq.dropout', g.dropout_mask(8, 0.5))
    w.put('seq.after', g.rand(4))
    w.f.close()


def gen_print_records():
    """For every golden record: evaluate its code with torch and keep the exact tensor."""
    recs = json.load(open(os.path.join(SHARED, 'spec', 'print-golden.json')))
    out = open(os.path.join(OUT, 'print_records.txt'), 'w')
    for i, r in enumerate(recs):
        ns = {'torch': torch, 'F': F, 'nn': nn}
        lines = r['code'].split('\n')
        exec('\n'.join(lines[:-1]), ns)
        v = eval(lines[-1], ns)
        if isinstance(v, torch.Size):
            out.write('%d size %d %s\n' % (i, len(v), ' '.join(str(x) for x in v)))
            continue
        t = v
        dt = {torch.float32: 'f32', torch.float64: 'f64', torch.int64: 'i64', torch.int32: 'i32',
              torch.bool: 'bool'}[t.dtype]
        gf = type(t.grad_fn).__name__ if t.grad_fn is not None else '-'
        flags = '%d %d %s' % (int(isinstance(t, nn.Parameter)), int(t.requires_grad), gf)
        vals = t.detach().reshape(-1).tolist()
        shown = shown_mask(list(t.shape)) if t.numel() > 1000 else None
        if dt == 'f32':
            vals = ['%08x' % struct.unpack('<I', struct.pack('<f', x))[0] for x in vals]
        elif dt == 'f64':
            vals = [repr(float(x)) for x in vals]
        else:
            vals = [str(int(x)) for x in vals]
        if shown is not None:  # summarised: hidden elements become runs 'xN' (the test fills them with 1e30)
            toks, run = [], 0
            for val, keep in zip(vals, shown):
                if keep:
                    if run:
                        toks.append('x%d' % run)
                        run = 0
                    toks.append(val)
                else:
                    run += 1
            if run:
                toks.append('x%d' % run)
            vals_txt = ' '.join(toks)
        else:
            vals_txt = ' '.join(vals)
        out.write('%d tensor %s %s %d %s %d %s\n' % (i, dt, flags, t.dim(), ' '.join(str(x) for x in t.shape),
                                                     len(vals), vals_txt))
        assert repr(v) == r['printed'], (i, repr(v), r['printed'])
    out.close()


def shown_mask(shape):
    """Which elements a summarised print shows: the first and last 3 of every dim longer than 6."""
    if not shape:
        return [True]
    inner = shown_mask(shape[1:])
    out = []
    for i in range(shape[0]):
        keep = shape[0] <= 6 or i < 3 or i >= shape[0] - 3
        out += [keep and k for k in inner]
    return out


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v):
        super().__init__()
        self.d_out_kq = d_out_kq
        self.W_query = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out_v))

    def forward(self, x):
        keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
        return torch.softmax(queries @ keys.T / self.d_out_kq**0.5, dim=-1) @ values


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v, num_heads):
        super().__init__()
        self.heads = nn.ModuleList([SelfAttention(d_in, d_out_kq, d_out_v) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out_kq, d_out_v, context_length, dropout):
        super().__init__()
        self.d_out_kq = d_out_kq
        self.W_query = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out_kq))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out_v))
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        t = x.shape[-2]
        keys, queries, values = x @ self.W_key, x @ self.W_query, x @ self.W_value
        s = (queries @ keys.transpose(-2, -1)).masked_fill(self.mask.bool()[:t, :t], -torch.inf)
        return self.dropout(torch.softmax(s / self.d_out_kq**0.5, dim=-1)) @ values


class CrossAttention(SelfAttention):
    """The article's CrossAttention: SelfAttention's parameters, queries from x_1, keys and values from x_2."""

    def forward(self, x_1, x_2):
        s = (x_1 @ self.W_query) @ (x_2 @ self.W_key).T
        return torch.softmax(s / self.d_out_kq**0.5, dim=-1) @ (x_2 @ self.W_value)


def gen_nn():
    sys.path.insert(0, os.path.join(SHARED, 'pytorch'))
    from toy_lm import MultiHeadAttention, ToyLM
    w = Writer(os.path.join(OUT, 'nn_golden.txt'))

    def record(name, out, params, inputs=()):
        """out, then d(loss)/d(param) for loss = (out * weights).sum(), weights = rand(out.shape) seeded 7."""
        g = torch.Generator().manual_seed(7)
        wts = torch.rand(out.shape, generator=g)
        w.put(name + '.out', out)
        (out * wts).sum().backward()
        for pn, p in params:
            w.put('%s.grad.%s' % (name, pn), p.grad)
        for xn, x in inputs:
            w.put('%s.grad.%s' % (name, xn), x.grad)

    torch.manual_seed(123)
    emb = nn.Embedding(50000, 3)(torch.tensor([0, 4, 5, 2, 1, 3])).detach()
    torch.manual_seed(123)
    sa = SelfAttention(3, 2, 4)
    x = emb.clone().requires_grad_(True)
    record('sa', sa(x), sa.named_parameters(), [('x', x)])

    torch.manual_seed(123)
    mw = MultiHeadAttentionWrapper(3, 2, 1, 4)
    record('mhw', mw(emb), mw.named_parameters())

    torch.manual_seed(5)
    ca = CausalAttention(3, 2, 4, 6, 0.0)
    xb = torch.randn(2, 5, 3, requires_grad=True)
    record('causal', ca(xb), ca.named_parameters(), [('x', xb)])

    torch.manual_seed(123)
    cr = CrossAttention(3, 2, 4)
    x2 = torch.rand(8, 3, requires_grad=True)
    record('cross', cr(emb, x2), cr.named_parameters(), [('x_2', x2)])

    torch.manual_seed(11)
    mha = MultiHeadAttention(8, 8, 6, 2)
    xm = torch.randn(2, 5, 8, requires_grad=True)
    record('mha', mha(xm), mha.named_parameters(), [('x', xm)])

    torch.manual_seed(3)
    lin = nn.Linear(5, 3)
    xl = torch.randn(4, 5, requires_grad=True)
    record('linear2d', lin(xl), lin.named_parameters(), [('x', xl)])
    lin.zero_grad()
    xl3 = torch.randn(2, 3, 5, requires_grad=True)
    record('linear3d', lin(xl3), lin.named_parameters(), [('x', xl3)])

    torch.manual_seed(4)
    e = nn.Embedding(10, 4, padding_idx=2)
    record('embedding', e(torch.tensor([[1, 2, 3], [3, 3, 9]])), e.named_parameters())

    torch.manual_seed(6)
    ln = nn.LayerNorm(6)
    with torch.no_grad():
        ln.weight.copy_(torch.rand(6) + 0.5)
        ln.bias.copy_(torch.rand(6) - 0.5)
    xn = torch.randn(3, 6, requires_grad=True)
    record('layernorm', ln(xn), ln.named_parameters(), [('x', xn)])

    torch.manual_seed(8)
    xg = torch.randn(10, requires_grad=True)
    record('gelu', F.gelu(xg), [], [('x', xg)])

    torch.manual_seed(9)
    xd = torch.randn(4, 5, requires_grad=True)
    record('dropout', F.dropout(xd, 0.3, training=True), [], [('x', xd)])

    torch.manual_seed(10)
    logits = torch.randn(6, 5, requires_grad=True)
    tgt = torch.tensor([1, 0, 4, -100, 2, 2])
    loss = F.cross_entropy(logits, tgt, ignore_index=-100)
    w.put('ce.loss', [loss.item()])
    loss.backward()
    w.put('ce.grad', logits.grad)
    logits.grad = None
    ls = F.log_softmax(logits, dim=-1)
    record('logsoftmax', ls, [], [('x', logits)])

    # the batched MultiHeadAttention equals a wrapper of causal heads holding its weights
    # (checked in C against the C wrapper; here only the MHA side is recorded above)

    # optimizers: 5 steps on one parameter with gradients from a fixed quadratic loss
    def opt_run(name, make):
        torch.manual_seed(12)
        p = nn.Parameter(torch.randn(7))
        t = torch.randn(7)
        opt = make([p])
        for _ in range(5):
            opt.zero_grad()
            ((p - t) ** 2 * torch.arange(1., 8.)).sum().backward()
            opt.step()
        w.put('optim.%s' % name, p)

    opt_run('sgd', lambda ps: torch.optim.SGD(ps, lr=0.01))
    opt_run('sgd_mom', lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9, dampening=0.1, weight_decay=0.01))
    opt_run('sgd_nesterov', lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9, nesterov=True))
    opt_run('adam', lambda ps: torch.optim.Adam(ps, lr=0.01))
    opt_run('adam_wd_ams', lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True))
    opt_run('adamw', lambda ps: torch.optim.AdamW(ps, lr=0.01))
    opt_run('adamw_b', lambda ps: torch.optim.AdamW(ps, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05))

    # ToyLM: initial weights (init order) and the first logits
    torch.manual_seed(123)
    m = ToyLM(65, 8, 16, 4)
    for n_, p in m.state_dict().items():
        w.put('toylm.init.%s' % n_, p)
    w.f.close()


def gen_losses():
    out = open(os.path.join(OUT, 'toy_lm_losses.txt'), 'w')
    runs = [('default', []),
            ('custom', ['--steps', '40', '--batch', '4', '--context', '16', '--dim', '32', '--heads', '2',
                        '--lr', '3e-3', '--seed', '7'])]
    for name, flags in runs:
        r = subprocess.run([sys.executable, os.path.join(SHARED, 'pytorch', 'toy_lm.py'), '--data',
                            os.path.join(SHARED, 'data', 'the-verdict.txt')] + flags,
                           check=True, capture_output=True, text=True, env=dict(os.environ, ATEN_CPU_CAPABILITY='default'))
        losses = [l.split()[3] for l in r.stdout.strip().split('\n')]
        out.write('%s %s | %d %s\n' % (name, ' '.join(flags), len(losses), ' '.join(losses)))
    out.close()


def gen_minimal():
    """What examples/minimal.c prints, from PyTorch: the article's SelfAttention, forward and backward."""
    import contextlib, io
    torch.manual_seed(123)
    sa = SelfAttention(3, 2, 4)
    x = torch.rand(6, 3)
    context = sa(x)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print(context)
        context.sum().backward()
        print(sa.W_query.grad)
    open(os.path.join(OUT, 'minimal_expected.txt'), 'w').write(buf.getvalue())


def gen_ops():
    """The ops and in-place writes of issue 10, from PyTorch: each case's output and the
    gradients of its inputs for loss = (out * weights).sum(), weights = rand(out.shape) seeded 7.
    Inputs: torch.manual_seed(seed); torch.rand(shape) * 4 + (-2) (tests/test_ops_more.c builds the same)."""
    w = Writer(os.path.join(OUT, 'ops_golden.txt'))

    def inp(seed, *shape):
        torch.manual_seed(seed)
        return (torch.rand(*shape) * 4 + (-2)).requires_grad_(True)

    def record(name, out, inputs):
        g = torch.Generator().manual_seed(7)
        wts = torch.rand(out.shape, generator=g)
        w.put(name + '.out', out)
        (out * wts).sum().backward()
        for i, x in enumerate(inputs):
            w.put('%s.grad%d' % (name, i), x.grad if x.grad is not None else torch.zeros_like(x))

    def one(name, f, *xs):
        record(name, f(*xs), xs)

    one('sigmoid', torch.sigmoid, inp(1, 3, 4))
    one('silu', F.silu, inp(1, 3, 4))
    one('softplus', F.softplus, inp(1, 3, 4))
    one('softplus_b2t1', lambda x: F.softplus(x, beta=2, threshold=1), inp(1, 3, 4))
    one('abs', torch.abs, inp(2, 3, 4))
    one('clamp', lambda x: x.clamp(-0.5, 0.7), inp(3, 3, 4))
    one('clamp_min', lambda x: x.clamp(min=0.1), inp(3, 3, 4))
    one('clamp_max', lambda x: x.clamp(max=-0.3), inp(3, 3, 4))
    cond = torch.tensor([[True], [False], [True]])
    one('where', lambda x, y: torch.where(cond, x, y * 2), inp(4, 3, 4), inp(5, 4))
    one('max_dim', lambda x: x.max(1).values, inp(6, 3, 4))
    one('min_dim_keep', lambda x: x.min(0, keepdim=True).values, inp(6, 3, 4))
    one('max_all', lambda x: x.max(), inp(6, 3, 4))
    one('min_all', lambda x: x.min(), inp(6, 3, 4))
    one('amax', lambda x: x.amax((0, 2)), inp(7, 2, 3, 4))
    one('amin_keep', lambda x: x.amin(-1, keepdim=True), inp(7, 2, 3, 4))
    ties = lambda: torch.tensor([[1., 3., 3.], [2., 2., 0.]], requires_grad=True)
    one('ties_max_all', lambda x: x.max(), ties())
    one('ties_amax', lambda x: x.amax(1), ties())
    one('ties_max_dim', lambda x: x.max(1).values, ties())
    x = inp(6, 3, 4)
    w.put('max_dim.indices', x.max(1).indices)
    w.put('topk.indices', x.topk(2, 1).indices)
    w.put('topk_small.indices', x.topk(3, 0, largest=False).indices)
    one('topk', lambda x: x.topk(2, 1).values, inp(6, 3, 4))
    one('topk_small', lambda x: x.topk(3, 0, largest=False).values, inp(6, 3, 4))
    one('repeat', lambda x: x.repeat(2, 1, 2), inp(8, 2, 3))
    one('expand', lambda x: x.expand(2, 3, 4), inp(9, 3, 1))
    one('permute', lambda x: x.permute(2, 0, 1) * 1, inp(10, 2, 3, 4))
    one('flatten', lambda x: x.flatten(1, 2) * 1, inp(10, 2, 3, 4))
    one('flatten_t', lambda x: x.transpose(0, 2).flatten() * 1, inp(10, 2, 3, 4))
    one('chunk', lambda x: torch.cat([c.exp() for c in x.chunk(2, 0)], 1), inp(11, 4, 3))
    one('split', lambda x: torch.cat([c * (i + 1) for i, c in enumerate(x.split(3, 1))], 1), inp(11, 2, 5))
    one('split_sizes', lambda x: torch.cat([c.exp() for c in x.split([1, 3], 1)], 1), inp(11, 2, 4))
    gi = torch.tensor([[3, 0], [1, 1], [0, 2]])
    one('gather', lambda x: x.gather(1, gi), inp(12, 3, 4))
    si = torch.tensor([[0, 2, 2, 1], [2, 2, 0, 1]])
    one('scatter_add', lambda a, s: a.scatter_add(0, si, s), inp(13, 3, 4), inp(14, 2, 4))

    # in-place writes, through autograd
    def setitem(a):
        x = a * 2
        x[1] = 5.0
        return x * x
    one('inplace_setitem', setitem, inp(20, 3, 4))

    def into_zeros(v):
        z = torch.zeros(3, 4)
        z[1] = v * 3
        return z.exp()
    one('inplace_into_zeros', into_zeros, inp(21, 4))

    mask = torch.tensor([[True, False, False, True]])
    def mfill(a):
        x = a * 1
        x.masked_fill_(mask, 0.5)
        return x.tanh()
    one('inplace_masked_fill', mfill, inp(22, 3, 4))

    pi = torch.tensor([2, 0, 2])
    def iput(a, v):
        x = a * 1
        x.index_put_((pi,), v)
        return x.exp()
    one('inplace_index_put', iput, inp(23, 3, 4), inp(24, 3, 4))
    def iput_acc(a, v):
        x = a * 1
        x.index_put_((pi,), v, accumulate=True)
        return x.exp()
    one('inplace_index_put_acc', iput_acc, inp(23, 3, 4), inp(24, 3, 4))

    def slice_copy(a, b):
        x = a * 1
        x[:, 1:3] = b
        return x.exp()
    one('inplace_slice_copy', slice_copy, inp(25, 3, 4), inp(26, 3, 2))

    def view_fill(a):
        x = a * 1
        v = x[1]
        v.fill_(2.0)
        return torch.cat([v * v, (x * x).reshape(-1)])
    one('inplace_view_fill', view_fill, inp(27, 3, 4))

    def copy_bcast(a, b):
        x = a * 1
        x.copy_(b)
        return x * a
    one('inplace_copy_bcast', copy_bcast, inp(28, 3, 4), inp(29, 4))

    def zero(a):
        x = a * 3
        x.zero_()
        return x + a
    one('inplace_zero', zero, inp(30, 3, 4))

    a = inp(31, 3, 4)
    y = a * 2
    y.retain_grad()
    z = (y * y).sum()
    z.backward(retain_graph=True)
    z.backward()
    w.put('retain_grad.y', y.grad)
    w.put('retain_grad.a', a.grad)


if __name__ == '__main__':
    os.makedirs(OUT, exist_ok=True)
    what = sys.argv[1:] or ['rng', 'print', 'nn', 'losses', 'minimal', 'ops']
    if 'minimal' in what: gen_minimal()
    if 'rng' in what: gen_rng()
    if 'print' in what: gen_print_records()
    if 'nn' in what: gen_nn()
    if 'losses' in what: gen_losses()
    if 'ops' in what: gen_ops()
