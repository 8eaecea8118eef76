"""oal.windowed_attention (the C++ WindowedAttention as a dispatcher op) against the plain
PyTorch windowed formula in reference.py, with gradients."""
import pytest
import torch

import oal
import reference as ref

CASES = [  # (B, Hq, Hkv, T, d, sinks, window): windows inside, across and past T
    (1, 2, 1, 40, 8, 4, 8),
    (2, 4, 2, 70, 16, 1, 20),
    (1, 2, 2, 30, 8, 0, 1),
    (1, 2, 1, 20, 8, 4, 64),
]


def inputs(B, Hq, Hkv, T, d, dtype=torch.float64):
    g = torch.Generator().manual_seed(B * 1000 + T)
    q = torch.randn(B, Hq, T, d, dtype=dtype, generator=g)
    k = torch.randn(B, Hkv, T, d, dtype=dtype, generator=g)
    v = torch.randn(B, Hkv, T, d, dtype=dtype, generator=g)
    group_of, L = ref.random_kernels(Hq, d, 3, generator=g)
    c = torch.randn(Hq, dtype=torch.float64, generator=g)
    return q, k, v, group_of, L, c


@pytest.mark.parametrize("B,Hq,Hkv,T,d,sinks,window", CASES)
def test_matches_reference_fp64_and_fp32(B, Hq, Hkv, T, d, sinks, window):
    q, k, v, group_of, L, c = inputs(B, Hq, Hkv, T, d)
    want = ref.windowed_attention(q, k, v, group_of, L, 1e-6, c, sinks, window)
    got = oal.windowed_attention(q, k, v, group_of, L, c, sinks, window, chunk=16)
    # fp64 ATen path: the same sums in another order.
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    got32 = oal.windowed_attention(q.float(), k.float(), v.float(), group_of, L.float(), c.float(),
                                   sinks, window, chunk=16)
    # fp32 CPU kernel: fp32 features and sums over <= 70 keys (as test_ops' 2e-4).
    torch.testing.assert_close(got32.double(), want, rtol=1e-4, atol=2e-4)


def test_windowed_only_is_softmax_on_the_window():
    q, k, v, _, _, c = inputs(1, 2, 1, 33, 8)
    want = ref.windowed_attention(q, k, v, None, None, 0.0, c, 2, 5)
    got = oal.windowed_attention(q, k, v, None, None, c, 2, 5)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_gradients_match_reference():
    q, k, v, group_of, L, c = inputs(1, 4, 2, 29, 8)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, L, c)]
    w = torch.randn(1, 4, 29, 8, dtype=torch.float64)
    (oal.windowed_attention(leaves[0], leaves[1], leaves[2], group_of, leaves[3], leaves[4], 2, 6)
     * w).sum().backward()
    got = [t.grad.clone() for t in leaves]
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, L, c)]
    (ref.windowed_attention(ref_leaves[0], ref_leaves[1], ref_leaves[2], group_of, ref_leaves[3],
                            1e-6, ref_leaves[4], 2, 6) * w).sum().backward()
    for name, g, r in zip("qkvLc", got, [t.grad for t in ref_leaves]):
        # Same function in fp64: rounding only.
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-10, msg=name)


def test_bad_arguments_are_oal_errors():
    q, k, v, group_of, L, c = inputs(1, 2, 1, 10, 8)
    with pytest.raises(oal.Error, match="at least 1 token"):
        oal.windowed_attention(q, k, v, None, None, c, 4, 0)
    with pytest.raises(oal.Error, match="go together"):
        oal.windowed_attention(q, k, v, group_of, None, c, 4, 4)
    with pytest.raises(oal.Error, match="query heads"):
        oal.windowed_attention(q, k, v, group_of, L, torch.zeros(3, dtype=torch.float64), 4, 4)
