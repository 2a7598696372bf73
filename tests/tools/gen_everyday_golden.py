#!/usr/bin/env python3
"""Writes tests/data/everyday_golden.txt: PyTorch 1.13's values for the everyday calls of
tests/test_calls.c (sin, cos, mse_loss, linspace, in-place add_/sub_/mul_/div_ through autograd).

    ATEN_CPU_CAPABILITY=default /usr/bin/python3 tests/tools/gen_everyday_golden.py   (Debian's python3-torch)

ATEN_CPU_CAPABILITY=default: the scalar kernels, as the rest of the golden data (an AVX2 build of
linspace fuses its multiply-add, as exact math here never does).

Records are `name n v1 ... vn` (float32 values printed with %.9g: exact when read back as float)."""
import os
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = []


def rec(name, t):
    v = t.detach().reshape(-1).tolist() if isinstance(t, torch.Tensor) else list(t)
    out.append(f"{name} {len(v)} " + " ".join("%.9g" % x for x in v))


x = torch.linspace(-3.0, 3.0, 13).reshape(13)
rec("sin_x", x)
rec("sin_out", torch.sin(x))
rec("cos_out", torch.cos(x))
w = torch.arange(1.0, 14.0)
xs = x.clone().requires_grad_()
(torch.sin(xs) * w).sum().backward()
rec("sin_grad", xs.grad)
xc = x.clone().requires_grad_()
(torch.cos(xc) * w).sum().backward()
rec("cos_grad", xc.grad)

torch.manual_seed(0)
a = torch.randn(4, 5, requires_grad=True)
b = torch.randn(4, 5, requires_grad=True)
rec("mse_a", a)
rec("mse_b", b)
loss = torch.nn.functional.mse_loss(a, b)
rec("mse_loss", [loss.item()])
loss.backward()
rec("mse_grad_a", a.grad)
rec("mse_grad_b", b.grad)

for start, end, steps in ((0.0, 1.0, 5), (-2.5, 7.25, 11), (0.0, 1.0, 1), (1.0, 0.0, 7), (0.1, 0.9, 101),
                         (-1.0, 3.0, 1000), (0.0, 1.0, 33)):
    rec(f"linspace_{steps}_{start}_{end}", torch.linspace(start, end, steps))

# in place through autograd: z = (p * 2); z.add_(q); z.mul_(q); z.sub_(1.5); z.div_(q + 3); loss = (z * w).sum()
torch.manual_seed(1)
p = torch.randn(3, 4, requires_grad=True)
q = torch.randn(4, requires_grad=True)
wz = torch.arange(1.0, 13.0).reshape(3, 4)
z = p * 2
z.add_(q)
z.mul_(q)
z.sub_(1.5)
z.div_(q + 3)
z.mul_(0.5)
rec("inplace_p", p)
rec("inplace_q", q)
rec("inplace_z", z)
(z * wz).sum().backward()
rec("inplace_grad_p", p.grad)
rec("inplace_grad_q", q.grad)

with open(os.path.join(ROOT, "tests", "data", "everyday_golden.txt"), "w") as f:
    f.write("\n".join(out) + "\n")
