"""PyTorch 1.13's error for each misuse in tests/test_error_table.c (run once; the tests never need PyTorch).

    /usr/bin/python3 tools/gen_errors.py

Writes tests/data/error_table.txt: one line per case, `name<TAB>Kind<TAB>first line of the message`.
The C test makes the same call and expects `op: ` + that line (+ any detail of ours after it) and the same kind.
"""
import os
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
o = torch.ones
L = lambda *v: torch.tensor(v)
CASES = [
    ('matmul_2d', lambda: o(6, 3) @ o(2, 4)),
    ('matmul_1d_2d', lambda: o(3) @ o(2, 4)),
    ('matmul_mv', lambda: o(6, 3) @ o(2)),
    ('matmul_0d', lambda: torch.matmul(torch.tensor(1.), o(2, 2))),
    ('matmul_batch', lambda: o(2, 3, 4) @ o(3, 4, 5)),
    ('dot_size', lambda: torch.dot(o(3), o(4))),
    ('dot_dims', lambda: torch.dot(o(1, 3), o(3))),
    ('add_broadcast', lambda: o(2, 3) + o(2)),
    ('mul_broadcast', lambda: o(2, 4) * o(3, 1, 3)),
    ('view_size', lambda: o(2, 3).view(5)),
    ('view_infer_two', lambda: o(2, 3).view(-1, -1)),
    ('view_negative', lambda: o(2, 3).view(-2, 3)),
    ('view_stride', lambda: o(2, 3).t().view(6)),
    ('reshape_size', lambda: o(2, 3).reshape(4, -1)),
    ('cat_sizes', lambda: torch.cat([o(1, 3), o(1, 2)], 0)),
    ('cat_dims', lambda: torch.cat([o(1, 3), o(3)], 0)),
    ('cat_empty', lambda: torch.cat([], 0)),
    ('cat_0d', lambda: torch.cat([torch.tensor(1.), torch.tensor(2.)], 0)),
    ('stack_sizes', lambda: torch.stack([o(2), o(3)], 0)),
    ('tril_1d', lambda: torch.tril(o(3))),
    ('softmax_dim', lambda: torch.softmax(o(2, 3), 2)),
    ('transpose_dim', lambda: o(2, 3).transpose(-3, 0)),
    ('sum_repeat_dim', lambda: o(2, 3).sum((1, -1))),
    ('select_index', lambda: o(6, 3).select(0, 6)),
    ('select_0d', lambda: torch.tensor(1.).select(0, 0)),
    ('t_3d', lambda: o(2, 3, 4).t()),
    ('unsqueeze_dim', lambda: o(2, 3).unsqueeze(3)),
    ('embedding_index', lambda: F.embedding(L(0, 5), o(5, 2))),
    ('index_select_index', lambda: o(5, 2).index_select(0, L(-1))),
    ('index_select_dims', lambda: o(5, 2).index_select(0, L([0]))),
    ('index_bounds', lambda: o(3, 2)[L(3)]),
    ('index_0d', lambda: torch.tensor(1.)[L(0)]),
    ('linear_shapes', lambda: F.linear(o(4, 3), o(2, 5))),
    ('layer_norm_shape', lambda: F.layer_norm(o(2, 3), (4,))),
    ('masked_fill_shape', lambda: o(2, 3).masked_fill(o(3, 3).bool(), 0.0)),
    ('cross_entropy_target', lambda: F.cross_entropy(o(2, 3), L(0, 3))),
    ('cross_entropy_batch', lambda: F.cross_entropy(o(2, 3), L(0, 1, 2))),
    ('nll_loss_target', lambda: F.nll_loss(o(2, 3), L(0, -2))),
    ('argmax_empty', lambda: torch.empty(0, 3).argmax(0)),
    ('dropout_p', lambda: F.dropout(o(2), 1.5)),
    ('backward_no_grad', lambda: o(2).sum().backward()),
    ('backward_nonscalar', lambda: o(2, requires_grad=True).mul(2).backward()),
    ('backward_shape', lambda: o(2, requires_grad=True).mul(2).backward(o(3))),
    ('backward_twice', lambda: (lambda y: (y.backward(), y.backward()))((o(2, requires_grad=True) * o(2, requires_grad=True)).sum())),
    ('requires_grad_long', lambda: L(1, 2).requires_grad_()),
    ('requires_grad_nonleaf', lambda: (o(2, requires_grad=True) * 2).requires_grad_(False)),
    ('retain_grad_no_grad', lambda: o(2).retain_grad()),
    ('item_many', lambda: o(2).item()),
    ('zeros_negative', lambda: torch.zeros(2, -1)),
    ('randint_range', lambda: torch.randint(5, 5, (2,))),
    ('randperm_negative', lambda: torch.randperm(-1)),
    ('uniform_range', lambda: torch.empty(2).uniform_(1, 0)),
    ('normal_std', lambda: torch.empty(2).normal_(0, -1)),
    ('bernoulli_p', lambda: torch.zeros(2).bernoulli_(2)),
    ('multinomial_dims', lambda: torch.multinomial(o(2, 2, 2), 1)),
    ('multinomial_too_many', lambda: torch.multinomial(o(3), 4)),
    ('multinomial_negative', lambda: torch.multinomial(L(1., -1.), 1)),
    ('multinomial_zero_sum', lambda: torch.multinomial(L(0., 0.), 1)),
    ('leaf_inplace', lambda: o(2, requires_grad=True).fill_(1)),
    ('view_of_leaf_inplace', lambda: o(2, 2, requires_grad=True)[0].fill_(1)),
    ('copy_broadcast', lambda: o(2).copy_(o(3))),
    ('index_put_bounds', lambda: o(3, 2).index_put_((L(3),), o(2))),
    ('index_put_shape', lambda: o(3, 4).index_put_((L(1),), o(3, 4))),
    ('index_put_dtype', lambda: o(3, 4).index_put_((L(1),), L(1, 2, 3, 4))),
    ('where_dtype', lambda: torch.where(o(2), o(2), o(2))),
    ('where_broadcast', lambda: torch.where(o(2).bool(), o(3), o(3))),
    ('clamp_none', lambda: o(2).clamp()),
    ('max_dim_empty', lambda: torch.empty(2, 0).max(1)),
    ('max_all_empty', lambda: torch.empty(0).max()),
    ('amax_empty', lambda: torch.empty(2, 0).amax(1)),
    ('amax_repeat', lambda: o(2, 3).amax((1, 1))),
    ('topk_k', lambda: o(3).topk(4)),
    ('repeat_fewer', lambda: o(2, 3).repeat(2)),
    ('repeat_negative', lambda: o(2).repeat(-1)),
    ('expand_size', lambda: o(3).expand(2, 4)),
    ('expand_fewer', lambda: o(3, 4).expand(4)),
    ('expand_leading_negative', lambda: o(3).expand(-1, 3)),
    ('permute_len', lambda: o(2, 3).permute(0)),
    ('permute_repeat', lambda: o(2, 3).permute(0, 0)),
    ('flatten_order', lambda: o(2, 3, 4).flatten(2, 1)),
    ('chunk_zero', lambda: o(4).chunk(0)),
    ('chunk_0d', lambda: torch.tensor(1.).chunk(2)),
    ('split_zero', lambda: o(4).split(0)),
    ('split_sizes_sum', lambda: o(4).split([1, 2])),
    ('gather_dims', lambda: o(3, 4).gather(1, L(0, 1))),
    ('gather_bounds', lambda: o(3, 4).gather(1, L([4]))),
    ('gather_dtype', lambda: o(3, 4).gather(1, L([1.]))),
    ('gather_size', lambda: o(3, 4).gather(1, torch.zeros(4, 1, dtype=torch.long))),
    ('scatter_add_bounds', lambda: o(3, 4).scatter_add(0, L([3]), o(1, 1))),
    ('optim_lr', lambda: torch.optim.Adam([o(2, requires_grad=True)], lr=-1.0)),
    ('optim_weight_decay', lambda: torch.optim.AdamW([o(2, requires_grad=True)], weight_decay=-1.0)),
    ('optim_empty', lambda: torch.optim.SGD([], lr=0.1)),
    ('optim_nonleaf', lambda: torch.optim.SGD([o(2, requires_grad=True) * 2], lr=0.1)),
    ('sgd_momentum', lambda: torch.optim.SGD([o(2, requires_grad=True)], lr=0.1, momentum=-1.0)),
    ('sgd_nesterov', lambda: torch.optim.SGD([o(2, requires_grad=True)], lr=0.1, nesterov=True)),
    ('adam_eps', lambda: torch.optim.Adam([o(2, requires_grad=True)], eps=-1.0)),
    ('adam_beta1', lambda: torch.optim.Adam([o(2, requires_grad=True)], betas=(1.0, 0.999))),
    ('adam_beta2', lambda: torch.optim.Adam([o(2, requires_grad=True)], betas=(0.9, -0.5))),
    ('linear_negative', lambda: torch.nn.Linear(-1, 2)),
    ('dropout_module_p', lambda: torch.nn.Dropout(1.5)),
    ('modulelist_index', lambda: torch.nn.ModuleList([torch.nn.GELU()])[5]),
    ('embedding_indices_dtype', lambda: F.embedding(o(2), o(5, 2))),
    ('getitem_bounds', lambda: o(3, 2)[5, 0]),
    ('arange_negative', lambda: torch.arange(-1)),
    ('arange_step', lambda: torch.arange(0., 1., 0.)),
]

with open(os.path.join(ROOT, 'tests', 'data', 'error_table.txt'), 'w') as f:
    for name, fn in CASES:
        try:
            fn()
        except Exception as e:
            msg = str(e).split('\n')[0]
            f.write('%s\t%s\t%s\n' % (name, type(e).__name__, msg))
            continue
        f.write('%s\tnone\t\n' % name)
