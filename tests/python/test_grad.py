"""Gradients of the ops: autograd (backward re-evaluates the ATen code) against finite
differences in fp64 (torch.autograd.gradcheck), and the fp32 kernel path's gradients
against the fp64 ones."""
import pytest
import torch
from torch.autograd import gradcheck

import oal
import reference as ref


def small(dtype=torch.float64, T=6, d=8, dv=5):
    q = torch.randn(1, 4, T, d, dtype=dtype) * 0.7
    k = torch.randn(1, 2, T, d, dtype=dtype) * 0.7
    v = torch.randn(1, 2, T, dv, dtype=dtype)
    group_of, L = ref.random_kernels(4, d, 3)
    return q, k, v, group_of, L.to(dtype)


# gradcheck perturbs every input entry: the shapes below keep it to a few hundred
# (d = 4: Df = 15, so a state has 2 * 15 * (Dv + 1) entries).


# gradcheck's default tolerances (atol 1e-5, rtol 1e-3 on central differences with
# eps 1e-6) hold for fp64 functions whose outputs are O(1), as these are.

def test_attention_gradcheck_q_k_v_L():
    q, k, v, group_of, L = small(T=7, d=4, dv=3)

    def f(q, k, v, L):
        return oal.attention(q, k, v, group_of, L, 1e-6, 3)[0]

    args = [t.clone().requires_grad_(True) for t in (q, k, v, L)]
    assert gradcheck(f, args)


def test_attention_gradcheck_through_the_state():
    q, k, v, group_of, L = small(T=5, d=4, dv=3)
    _, S0 = oal.attention(q, k, v, group_of, L)
    q2, k2, v2 = (torch.randn_like(t) * 0.7 for t in (q, k, v))

    def f(S, q, k, v, L):
        y, S1 = oal.attention(q, k, v, group_of, L, 1e-6, 2, S)
        return y, S1 * 1e-2  # the state's entries grow with T; keep them O(1)

    args = [t.clone().requires_grad_(True) for t in (S0, q2, k2, v2, L)]
    assert gradcheck(f, args)


def test_step_gradcheck():
    q, k, v, group_of, L = small(T=4, d=4, dv=3)
    _, S0 = oal.attention(q, k, v, group_of, L)

    def f(q, k, v, L, S):
        return oal.step(q, k, v, group_of, L, 1e-6, S)[0]

    args = [t.clone().requires_grad_(True)
            for t in (q[:, :, 0] * 0.5, k[:, :, 0], v[:, :, 0], L, S0)]
    assert gradcheck(f, args)


def test_softmax_gradcheck_with_a_longer_key_sequence():
    q = torch.randn(1, 4, 3, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 6, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, 6, 5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda q, k, v: oal.softmax_attention(q, k, v), [q, k, v])


def test_fp32_kernel_forward_gives_the_fp64_gradients():
    q, k, v, group_of, L = small(T=40)
    w = torch.randn(1, 4, 40, 5, dtype=torch.float64)

    def grads(dtype):
        args = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
        Lp = L.clone().requires_grad_(True)  # L stays fp64 (the module keeps it so)
        y, S = oal.attention(*args, group_of, Lp, 1e-6, 16)
        ((y.double() * w).sum() + S.double().sum() * 1e-3).backward()
        return [a.grad.double() for a in args] + [Lp.grad]

    # fp32 recomputation in backward: gradients are sums over T of fp32 products,
    # ~1e-5 relative; 1e-3 absolute on O(1)-O(10) entries.
    for g32, g64 in zip(grads(torch.float32), grads(torch.float64)):
        torch.testing.assert_close(g32, g64, rtol=1e-3, atol=1e-3)
    # The upper triangle of L is not part of the kernel: zero gradient.
    assert torch.count_nonzero(grads(torch.float64)[3].triu(1)) == 0


def test_unused_state_output_needs_no_gradient():
    q, k, v, group_of, L = small()
    q.requires_grad_(True)
    y, S = oal.attention(q, k, v, group_of, L)
    y.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_double_backward_is_refused():
    q, k, v, group_of, L = small()
    q.requires_grad_(True)
    y, _ = oal.attention(q, k, v, group_of, L)
    with pytest.raises(RuntimeError, match=r"\[oal_attention\] double backward"):
        torch.autograd.grad(y.sum(), q, create_graph=True)
    y = oal.softmax_attention(q, k, v)
    with pytest.raises(RuntimeError, match=r"\[softmax_attention\] double backward"):
        torch.autograd.grad(y.sum(), q, create_graph=True)
