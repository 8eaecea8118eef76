"""Bad inputs raise oal.Error (a RuntimeError) carrying the C++ core's message: the
operation in brackets and what was expected."""
import pytest
import torch

import oal
import reference as ref


def inputs():
    q, k, v = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    group_of, L = ref.random_kernels(4, 8, 2)
    return q, k, v, group_of, L


def test_kernels_for_other_heads():
    q, k, v, group_of, L = inputs()
    with pytest.raises(oal.Error) as e:
        oal.attention(q[:, :2], k, v, group_of, L)
    assert str(e.value) == "[hd_chunked] kernels are for 4 query heads, q has 2 ([1, 2, 5, 8])"
    assert isinstance(e.value, RuntimeError)


def test_the_raw_op_raises_the_same_message():
    q, k, v, group_of, L = inputs()
    with pytest.raises(oal.Error) as wrapped:
        oal.attention(q, k[..., :4], v, group_of, L)
    with pytest.raises(RuntimeError) as raw:
        torch.ops.oal.attention(q, k[..., :4], v, group_of, L)
    assert str(raw.value) == str(wrapped.value)
    assert str(raw.value).startswith("[")


@pytest.mark.parametrize("mutate,pattern", [
    (lambda a: a.update(group_of=a["group_of"].float()), r"group_of must be int64"),
    (lambda a: a.update(group_of=a["group_of"] + 5), r"head 0 has \d+ groups; expected"),
    (lambda a: a.update(L=a["L"][:, :2, :2]), r"head \d+ has 2 groups; expected 1..1"),
    (lambda a: a.update(L=a["L"] * float("nan")), r"kernel L contains NaN or Inf"),
    (lambda a: a.update(eps=0.0), r"eps must be finite and > 0"),
    (lambda a: a.update(chunk=0), r"chunk must be >= 1"),
    (lambda a: a.update(q=a["q"].double()), r"dtype"),
    (lambda a: a.update(state=torch.zeros(1, 2, 10, 9)), r"state S is \[1, 2, 10, 9\]"),
    (lambda a: a.update(state=torch.zeros(3)), r"state \[B, Hkv, Df, Dv\+1\]: expected 4"),
    (lambda a: a.update(v=a["v"][:, :, :3]), r"\["),
])
def test_bad_attention_inputs(mutate, pattern):
    q, k, v, group_of, L = inputs()
    a = dict(q=q, k=k, v=v, group_of=group_of, L=L, eps=1e-6, chunk=64, state=None)
    mutate(a)
    with pytest.raises(oal.Error, match=pattern):
        oal.attention(**a)


def test_bad_step_inputs():
    q, k, v, group_of, L = inputs()
    S = oal.empty_state(1, 2, 8, 8)
    with pytest.raises(oal.Error, match=r"^\[oal_step\] expected q \[B, Hq, D\]"):
        oal.step(q, k, v, group_of, L, 1e-6, S)
    with pytest.raises(oal.Error, match=r"^\[hd_decode\] state was made for batch 1"):
        oal.step(q[:, :, 0].repeat(2, 1, 1), k[:, :, 0].repeat(2, 1, 1),
                 v[:, :, 0].repeat(2, 1, 1), group_of, L, 1e-6, S)


def test_bad_softmax_inputs():
    q, k, v, _, _ = inputs()
    with pytest.raises(oal.Error, match=r"^\[softmax_attention"):
        oal.softmax_attention(q, k[:, :, :3], v[:, :, :3])  # fewer keys than queries
    with pytest.raises(oal.Error, match=r"^\[softmax_attention"):
        oal.softmax_attention(q[:, :3], k, v)  # 3 query heads for 2 KV heads


def test_reference_kind_is_checked():
    q, k, v, group_of, L = inputs()
    with pytest.raises(oal.Error, match=r"\[oal_reference\] kind must be 'pairwise'"):
        oal.reference(q, k, v, group_of, L, 1e-6, "fast")


def test_a_bad_OAL_SIMD_fails_the_import_clearly():
    import os
    import subprocess
    import sys
    env = dict(os.environ, OAL_SIMD="bogus")
    out = subprocess.run([sys.executable, "-c", "import oal"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0
    assert "oal.errors.Error: [" in out.stderr and "bogus" in out.stderr, out.stderr
