"""oal.load_kernels on the authors' released Qwen2.5-0.5B coefficients and on our own
format; QuadraticAttention built from them."""
import collections
import json

import pytest
import torch

import oal
from conftest import shared_file


def test_official_qwen_coefficients_load_and_match_their_expanded_matrices():
    path = shared_file("official-oal-qwen2.5-0.5b.json")
    kernels = oal.load_kernels(path)
    raw = json.loads(path.read_text())
    assert kernels.head_dim == 64
    assert sorted(kernels.layers) == list(range(24))
    counts = collections.Counter(len(h.groups) for heads in kernels.layers.values()
                                 for h in heads)
    assert counts == {2: 178, 3: 125, 4: 28, 5: 5}  # the histogram in shared/data/README.md
    for layer, heads in kernels.layers.items():
        assert len(heads) == 14
        for h, head in enumerate(heads):
            want = torch.tensor(raw["layers"][str(layer)]["heads"][str(h)]
                                ["expanded_quadratic_matrix"], dtype=torch.float64)
            n = len(head.groups) + 1
            M = head.L @ head.L.T
            # The file's matrices are L Lᵀ rounded by the authors' fp32 code: ~1e-6
            # relative (shared/data/README.md); 1e-5 of the largest entry.
            scale = want.abs().max()
            torch.testing.assert_close(M, want[:n, :n], rtol=0, atol=1e-5 * scale)
            assert head.eps == pytest.approx(1e-6)
    layer0 = kernels.layer(0)
    assert layer0.group_of.shape == (14, 64) and layer0.L.shape[0] == 14


def test_our_format_round_trips(tmp_path):
    doc = {"format": "oal-kernels", "version": 1, "head_dim": 4,
           "layers": {"3": [{"groups": [[0, 1], [2, 3]], "L": [1.0, 0.5, 0.25, 0.1, 0.0, 2.0],
                             "epsilon": 1e-6},
                            {"groups": [[0, 1, 2, 3]], "L": [1.0, 0.5, 0.7], "epsilon": 1e-6}]}}
    path = tmp_path / "k.json"
    path.write_text(json.dumps(doc))
    kernels = oal.load_kernels(path)
    heads = kernels.layers[3]
    assert heads[0].groups == [[0, 1], [2, 3]]
    torch.testing.assert_close(heads[0].L, torch.tensor([[1.0, 0, 0], [0.5, 0.25, 0],
                                                         [0.1, 0.0, 2.0]], dtype=torch.float64))
    lk = kernels.layer(3)
    assert lk.group_of.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0]]
    assert lk.L.shape == (2, 3, 3) and lk.L[1, 2].abs().sum() == 0  # padded group
    back = lk.head(1)
    assert back.groups == [[0, 1, 2, 3]]
    attn = oal.QuadraticAttention.from_kernels(lk)
    q, k, v = torch.randn(1, 2, 5, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 3)
    assert attn(q, k, v).shape == (1, 2, 5, 3)


def test_kernel_file_errors_keep_the_cpp_message(tmp_path):
    with pytest.raises(oal.Error, match=r"^\[kernel_json\]|^\[read") as e:
        oal.load_kernels(tmp_path / "missing.json")
    assert isinstance(e.value, RuntimeError)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "oal-kernels", "version": 1, "head_dim": 4,
                               "layers": {"0": [{"groups": [[0, 1], [2]], "L": [1, 0, 1, 0, 0, 1],
                                                 "epsilon": 1e-6}]}}))
    with pytest.raises(oal.Error, match=r"^\[.*layer 0.*head 0"):
        oal.load_kernels(bad)
    kernels = oal.load_kernels(shared_file("official-oal-qwen2.5-0.5b.json"))
    with pytest.raises(oal.Error, match=r"no kernels for layer 30"):
        kernels.layer(30)
