"""oal.QuadraticAttention and its DecodeState."""
import math

import pytest
import torch

import oal
import reference as ref


def qkv(B=2, Hq=4, Hkv=2, T=20, d=8, dv=8, dtype=torch.float32):
    return (torch.randn(B, Hq, T, d, dtype=dtype), torch.randn(B, Hkv, T, d, dtype=dtype),
            torch.randn(B, Hkv, T, dv, dtype=dtype))


def test_default_is_the_taylor_kernel():
    groups = [[0, 1, 2, 3, 4, 5], [6], [7]]
    attn = oal.QuadraticAttention(groups, heads=4, dtype=torch.float64)
    q, k, v = qkv(dtype=torch.float64)
    s = ref.repeat_kv(k, 4)
    scores = q @ s.transpose(-1, -2) / math.sqrt(8)
    w = (1 + scores + scores ** 2 / 2).masked_fill(~ref.causal_mask(20, 20), 0)
    want = (w @ ref.repeat_kv(v, 4)) / w.sum(-1, keepdim=True)
    # a = eps + M00 = 1 exactly; fp64 throughout.
    torch.testing.assert_close(attn(q, k, v), want, rtol=1e-10, atol=1e-10)


def test_forward_prefill_and_decode_agree():
    group_of, L = ref.random_kernels(4, 8, 3)
    attn = oal.QuadraticAttention.from_kernels(oal.LayerKernels(group_of, L), chunk=8)
    q, k, v = qkv()
    with torch.no_grad():
        y = attn(q, k, v)
        y1, state = attn.prefill(q[:, :, :13], k[:, :, :13], v[:, :, :13])
        assert state.tokens == 13
        assert state.state_bytes == 2 * 2 * oal.feature_dim(8) * 9 * 4
        ys = [state.step(q[:, :, t], k[:, :, t], v[:, :, t]) for t in range(13, 17)]
        y_ext = state.extend(q[:, :, 17:], k[:, :, 17:], v[:, :, 17:])
        assert state.tokens == 20
    got = torch.cat([y1, torch.stack(ys, 2), y_ext], 2)
    # fp32 kernels (chunked, fused step) with different summation orders: ~1e-6.
    torch.testing.assert_close(got, y, rtol=1e-4, atol=1e-4)
    empty = attn.decode_state()
    with torch.no_grad():
        torch.testing.assert_close(empty.step(q[:, :, 0], k[:, :, 0], v[:, :, 0]), y[:, :, 0],
                                   rtol=1e-4, atol=1e-4)


def test_inference_steps_keep_one_decoder_and_match_the_functional_op():
    group_of, L = ref.random_kernels(4, 8, 3)
    attn = oal.QuadraticAttention.from_kernels(oal.LayerKernels(group_of, L), chunk=8)
    q, k, v = qkv()
    with torch.no_grad():
        _, state = attn.prefill(q[:, :, :5], k[:, :, :5], v[:, :, :5])
        S = state.tensor.clone()
        decoders = set()
        for t in range(5, 12):
            y = state.step(q[:, :, t], k[:, :, t], v[:, :, t])
            decoders.add(id(state._decoder[0]))
            # The functional op on the same inputs: the same fused kernel on a copy, so
            # the same bits.
            want, S = oal.step(q[:, :, t], k[:, :, t], v[:, :, t], attn.group_of, attn.L,
                               attn.eps, S)
            assert torch.equal(y, want) and torch.equal(state.tensor, S)
        assert len(decoders) == 1
        # A new L (not an in-place edit) gets a new decoder with it.
        attn.L = torch.nn.Parameter(attn.L.detach() * 1.5)
        y = state.step(q[:, :, 12], k[:, :, 12], v[:, :, 12])
        want, _ = oal.step(q[:, :, 12], k[:, :, 12], v[:, :, 12], attn.group_of, attn.L,
                           attn.eps, S)
        assert torch.equal(y, want) and id(state._decoder[0]) not in decoders
        # A state tensor set from outside is the one the next step continues.
        state.tensor = S.clone()
        y = state.step(q[:, :, 13], k[:, :, 13], v[:, :, 13])
        want, _ = oal.step(q[:, :, 13], k[:, :, 13], v[:, :, 13], attn.group_of, attn.L,
                           attn.eps, S)
        assert torch.equal(y, want)
    # Recording gradients: the functional op, so L gets its gradient through the steps.
    state = attn.decode_state()
    state.step(q[:, :, 0], k[:, :, 0], v[:, :, 0]).sum().backward()
    assert state._decoder is None and attn.L.grad is not None


def test_L_is_a_trainable_parameter():
    group_of, L = ref.random_kernels(4, 8, 2)
    attn = oal.QuadraticAttention.from_kernels(oal.LayerKernels(group_of, L))
    assert [n for n, _ in attn.named_parameters()] == ["L"]
    assert "group_of" in dict(attn.named_buffers())
    q, k, v = qkv()
    attn(q, k, v).square().mean().backward()
    assert attn.L.grad is not None and attn.L.grad.abs().sum() > 0
    assert "heads=4" in repr(attn)


def test_per_head_groups_and_explicit_L():
    groups = [[[0, 1, 2], [3]], [[0], [1, 2, 3]]]
    L = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    attn = oal.QuadraticAttention(groups, L=L, eps=1e-3)
    assert attn.group_of.tolist() == [[0, 0, 0, 1], [0, 1, 1, 1]]
    assert attn.eps == 1e-3


def test_bad_construction_raises_clearly():
    with pytest.raises(oal.Error, match=r"\[QuadraticAttention\] one list of groups"):
        oal.QuadraticAttention([[0, 1], [2, 3]])
    with pytest.raises(oal.Error, match=r"dimension 1 is in two groups"):
        oal.QuadraticAttention([[0, 1], [1, 2]], heads=2)
    with pytest.raises(oal.Error, match=r"dimension 3 not in 0..2"):
        oal.QuadraticAttention([[0, 1], [3]], heads=2)
    with pytest.raises(oal.Error, match=r"L must be \[Hq = 2"):
        oal.QuadraticAttention([[0, 1], [2, 3]], heads=2, L=torch.eye(3))
    with pytest.raises(oal.Error, match=r"Taylor initialisation needs 0 < eps < 1/2"):
        oal.QuadraticAttention([[0, 1], [2, 3]], heads=2, eps=0.0)


def test_taylor_lower_is_the_cores_taylor_kernel():
    # L L^T must be the Taylor kernel's M: M00 = 1 - eps, M0g = Mg0 = 1/2, Mgh = 1/2 (App. D),
    # computed here by hand; G = 1 and G = 4.
    for groups in (1, 4):
        eps = 1e-6
        L = oal.taylor_lower(groups, eps)
        assert L.shape == (groups + 1, groups + 1) and L.dtype == torch.float64
        assert torch.equal(L, torch.tril(L))
        M = torch.full((groups + 1, groups + 1), 0.5, dtype=torch.float64)
        M[0, 0] = 1.0 - eps
        assert torch.allclose(L @ L.T, M, atol=1e-12)
    with pytest.raises(oal.Error, match=r"num_groups must be >= 1"):
        oal.taylor_lower(0)
