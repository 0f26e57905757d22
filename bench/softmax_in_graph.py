#!/usr/bin/python3
# Probe behind docs/benchmarks.md "Cross-shape validation" (2026-12-01): softmax over [64, 197, 197] scores
# (a width-64, 2-head, 224 px ViT's attention at micro-batch 32), timed alone, after a bmm, and inside an
# autograd graph, in ns per element. Debian's python3-torch 1.13.1 (the same ATen kernels as libtorch-dev).
# usage: /usr/bin/python3 bench/softmax_in_graph.py [THREADS]   (docs/benchmarks.md ran it with 1 thread)
import ctypes
import sys
import time

# As vitsim train and calibrate keep freed memory (real::keep_freed_memory): M_MMAP_THRESHOLD,
# M_TRIM_THRESHOLD and M_TOP_PAD at 1 GiB, before torch allocates anything.
libc = ctypes.CDLL("libc.so.6")
for key in (-3, -1, -2):
    libc.mallopt(key, 1 << 30)
import torch  # noqa: E402

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
BH, T, HD = 64, 197, 32
E = BH * T * T
s = torch.randn(BH, T, T)
g = torch.randn(BH, T, T)
q = torch.randn(T, BH, HD).transpose(0, 1)
k = torch.randn(T, BH, HD).transpose(0, 1)


def ns_per_elem(f, n=9):
    ts = []
    for _ in range(n):
        a = time.perf_counter()
        f()
        ts.append(time.perf_counter() - a)
    ts.sort()
    return ts[n // 2] * 1e9 / E


def in_graph():  # forward and backward of softmax in autograd
    x = s.detach().requires_grad_()
    torch.softmax(x, -1).backward(g)


y = torch.softmax(s, -1)
print(f"softmax alone            {ns_per_elem(lambda: torch.softmax(s, -1)):.2f} ns/element")
print(f"softmax backward alone   {ns_per_elem(lambda: torch._softmax_backward_data(g, y, -1, torch.float32)):.2f}")
print(f"bmm then softmax         {ns_per_elem(lambda: torch.softmax(torch.bmm(q, k.transpose(1, 2)), -1)):.2f}")
print(f"softmax fwd+bwd in graph {ns_per_elem(in_graph):.2f}")
