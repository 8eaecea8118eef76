"""The dispatcher ops (torch.ops.oal.*) against plain PyTorch references and the C++
references, over the shape sweep of DESIGN.md §4."""
import pytest
import torch

import oal
import reference as ref


def make_inputs(B, Hq, Hkv, T, d, dv, dtype, max_groups=3, scale=1.0):
    q = torch.randn(B, Hq, T, d, dtype=dtype) * scale
    k = torch.randn(B, Hkv, T, d, dtype=dtype) * scale
    v = torch.randn(B, Hkv, T, dv, dtype=dtype)
    group_of, L = ref.random_kernels(Hq, d, max_groups)
    return q, k, v, group_of, L


SHAPES = [  # (B, Hq, Hkv, T, d, dv, chunk): GQA ratios 1/2/7, T around the chunk size
    (1, 2, 2, 1, 8, 8, 64),
    (2, 4, 2, 2, 8, 6, 64),
    (1, 7, 1, 63, 16, 16, 64),
    (1, 4, 2, 65, 16, 16, 64),
    (2, 2, 1, 37, 8, 8, 8),
    (1, 2, 1, 50, 64, 16, 16),
]


@pytest.mark.parametrize("B,Hq,Hkv,T,d,dv,chunk", SHAPES)
def test_prefill_fp32_kernel_matches_references(B, Hq, Hkv, T, d, dv, chunk):
    q, k, v, group_of, L = make_inputs(B, Hq, Hkv, T, d, dv, torch.float64)
    want = ref.oal_attention(q, k, v, group_of, L, 1e-6)
    # The C++ fp64 references compute the same formula in the same precision: they agree
    # with the Python one to rounding (1e-10 leaves room for summation order).
    for kind in ("pairwise", "recurrent", "aten"):
        got = oal.reference(q, k, v, group_of, L, 1e-6, kind)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    assert oal.simd_path(q, k, v).startswith("reference (dtype Double")
    qf, kf, vf = q.float(), k.float(), v.float()
    # The forward never records a graph (backward rebuilds it): training inputs that
    # require gradients take the kernel too.
    assert oal.simd_path(qf.requires_grad_(), kf, vf).startswith("simd (")
    # The 0.1.0 name still answers, with a DeprecationWarning.
    with pytest.warns(DeprecationWarning, match="simd_path"):
        assert oal.kernel_path(qf, kf, vf) == oal.simd_path(qf, kf, vf)
    y, state = oal.attention(qf, kf, vf, group_of, L, chunk=chunk)
    assert y.dtype == torch.float32 and y.shape == (B, Hq, T, dv)
    assert state.shape == (B, Hkv, oal.feature_dim(d), dv + 1) and state.dtype == torch.float32
    # fp32 kernel (fp32 features, fp32 GEMM accumulation over <= T * Df terms, outputs
    # O(1)) against the fp64 reference: a few 1e-6 relative; 2e-4 absolute covers d = 64.
    torch.testing.assert_close(y.double(), want, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_extend_continues_a_prefill(dtype):
    q, k, v, group_of, L = make_inputs(2, 4, 2, 50, 8, 8, dtype)
    y_all, s_all = oal.attention(q, k, v, group_of, L, chunk=16)
    y1, s1 = oal.attention(q[:, :, :20], k[:, :, :20], v[:, :, :20], group_of, L, chunk=16)
    s1_before = s1.clone()
    y2, s2 = oal.attention(q[:, :, 20:], k[:, :, 20:], v[:, :, 20:], group_of, L, chunk=16,
                           state=s1)
    assert torch.equal(s1, s1_before), "the state passed in must not be modified"
    # Same function, different chunk boundaries: summation order only (fp32: ~1e-6).
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(torch.cat([y1, y2], 2), y_all, rtol=tol, atol=tol)
    torch.testing.assert_close(s2, s_all, rtol=tol, atol=tol * 100)  # state entries O(T)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_steps_equal_the_prefill(dtype):
    q, k, v, group_of, L = make_inputs(1, 4, 2, 12, 8, 8, dtype)
    y_all, s_all = oal.attention(q, k, v, group_of, L)
    state = oal.empty_state(1, 2, 8, 8, dtype=torch.float64 if dtype == torch.float64
                            else torch.float32)
    ys = []
    for t in range(12):
        before = state.clone()
        y, state_new = oal.step(q[:, :, t], k[:, :, t], v[:, :, t], group_of, L, 1e-6, state)
        assert torch.equal(state, before)
        state = state_new
        ys.append(y)
    # fp32: the fused decode kernel against the chunked kernel; different summation
    # order (state readout vs intra-chunk sum), errors ~1e-6 relative.
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(torch.stack(ys, 2), y_all, rtol=tol, atol=tol)
    torch.testing.assert_close(state, s_all, rtol=tol, atol=tol * 10)


def test_bf16_inputs_run_the_kernel():
    q, k, v, group_of, L = make_inputs(1, 2, 1, 30, 8, 8, torch.float64)
    want = ref.oal_attention(q, k, v, group_of, L, 1e-6)
    qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()
    assert oal.simd_path(qb, kb, vb).startswith("simd (")
    y, state = oal.attention(qb, kb, vb, group_of, L)
    assert y.dtype == torch.bfloat16 and state.dtype == torch.float32
    # bf16 keeps 8 bits of mantissa: inputs and the output are rounded to ~4e-3 relative.
    torch.testing.assert_close(y.double(), want, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("Hq,Hkv,T,S", [(2, 2, 33, 33), (4, 2, 5, 40), (7, 1, 70, 70)])
def test_softmax_flash_matches_reference(Hq, Hkv, T, S):
    q = torch.randn(2, Hq, T, 16, dtype=torch.float64)
    k = torch.randn(2, Hkv, S, 16, dtype=torch.float64)
    v = torch.randn(2, Hkv, S, 12, dtype=torch.float64)
    want = ref.softmax_attention(q, k, v)
    torch.testing.assert_close(oal.softmax_attention(q, k, v), want, rtol=1e-10, atol=1e-10)
    # fp32 flash kernel with online max-shifted softmax: fp32 rounding, ~1e-6.
    got = oal.softmax_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)
    got = oal.softmax_attention(q.float(), k.float(), v.float(), scale=0.3)
    torch.testing.assert_close(got.double(), ref.softmax_attention(q, k, v, 0.3),
                               rtol=1e-4, atol=1e-5)


def test_ops_are_registered_with_the_dispatcher():
    for name in ("attention", "step", "softmax_attention", "simd_path", "reference",
                 "read_kernels"):
        assert hasattr(torch.ops.oal, name)
    q, k, v, group_of, L = make_inputs(1, 2, 1, 4, 8, 8, torch.float32)
    y, _ = torch.ops.oal.attention(q, k, v, group_of, L)  # default eps, chunk, state
    torch.testing.assert_close(y, oal.attention(q, k, v, group_of, L)[0])
