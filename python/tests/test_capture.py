"""spattn.capture without transformers: a stand-in model that routes its attention through a table named like
transformers' (transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS), as Llama does since transformers 4.48. The real
model is checked on the GPU machine (tests/gpu/run_gpu_checks.py: a tiny random Llama)."""
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import spattn  # noqa: E402
import spattn.capture  # noqa: E402


class Attention(torch.nn.Module):
    def __init__(self, layer_idx, config, table):
        super().__init__()
        self.layer_idx, self.config, self.table = layer_idx, config, table

    def forward(self, x):
        q = x[:, None].repeat(1, 4, 1, 1) * (self.layer_idx + 1)  # [B, 4, N, D]: distinct per layer
        k, v = q[:, :2] + 1, q[:, :2] - 1                          # two KV heads
        return self.table[self.config._attn_implementation](self, q, k, v, None)


class Model(torch.nn.Module):
    def __init__(self, table, layers=3):
        super().__init__()
        self.config = types.SimpleNamespace(_attn_implementation="sdpa")
        self.layers = torch.nn.ModuleList(Attention(i, self.config, table) for i in range(layers))

    def forward(self, input_ids, attention_mask=None, use_cache=False):
        x = torch.nn.functional.embedding(input_ids, torch.linspace(-1, 1, 50 * 64).view(50, 64))
        for layer in self.layers:
            layer(x)


@pytest.fixture
def table(monkeypatch):
    table = {"sdpa": lambda module, q, k, v, mask: q}
    modeling_utils = types.ModuleType("transformers.modeling_utils")
    modeling_utils.ALL_ATTENTION_FUNCTIONS = table
    monkeypatch.setitem(sys.modules, "transformers", types.ModuleType("transformers"))
    monkeypatch.setitem(sys.modules, "transformers.modeling_utils", modeling_utils)
    return table


def test_capture_records_the_layers_asked_for(table, tmp_path):
    original = table["sdpa"]
    ids = torch.arange(40).view(1, 40) % 50
    captured = spattn.capture.capture(Model(table), ids, layers=[0, 2])
    assert table["sdpa"] is original  # the table is restored
    assert sorted(captured) == [0, 2]
    q, k, v = captured[2]
    assert q.shape == (1, 4, 40, 64) and k.shape == (1, 2, 40, 64)
    x = torch.nn.functional.embedding(ids, torch.linspace(-1, 1, 50 * 64).view(50, 64))
    assert torch.equal(q, x[:, None].repeat(1, 4, 1, 1) * 3) and torch.equal(v, q[:, :2] - 1)
    paths = spattn.capture.save(captured, tmp_path)
    assert len(paths) == 6
    assert np.array_equal(np.load(tmp_path / "layer2_k.npy"), k.numpy())
    # The saved files are spattn inputs.
    qn, kn, vn = (np.load(tmp_path / f"layer0_{n}.npy") for n in "qkv")
    assert spattn.sparse_attention(qn, kn, vn, method="dense", causal=True).shape == (1, 4, 40, 64)
    # bfloat16 bit patterns (spattn run --bf16).
    spattn.capture.save(captured, tmp_path / "bf16", bf16_bits=True)
    bits = np.load(tmp_path / "bf16" / "layer2_q.npy")
    assert bits.dtype == np.uint16
    assert torch.equal(torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16), q.to(torch.bfloat16))


def test_capture_names_missing_layers(table):
    with pytest.raises(ValueError, match=r"layers \[7\] were not seen \(the model ran 3 attention calls\)"):
        spattn.capture.capture(Model(table), torch.zeros(1, 8, dtype=torch.long), layers=[1, 7])
