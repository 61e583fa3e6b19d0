"""spattn.transformers on the CPU: the attention function in transformers' calling convention (a module with
is_causal / layer_idx, query [B, Hq, L, D], key and value [B, Hkv, S, D], result [B, L, Hq, Dv]) against an fp64
softmax attention written here, for prefill, decode (L = 1), chunked prefill (L < S), GQA and non-causal layers; the
mask function's refusals; and per-layer params. transformers itself is not needed (CI has none); register() is
checked where it is installed (python/tests/gpu/run_gpu_checks.py: a Llama under torch.compile)."""
import random
import types

import pytest

torch = pytest.importorskip("torch")
import spattn  # noqa: E402
import spattn.transformers as st  # noqa: E402

SEED = random.randrange(1 << 30)
print(f"test_transformers_attention seed {SEED}")


def attention_fp64(q, k, v, causal, scale):
    """softmax(q·kᵀ·scale)·v in fp64, K/V heads repeated to the query heads, causal aligned bottom-right."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        L, S = q.shape[2], k.shape[2]
        visible = torch.arange(S)[None, :] <= torch.arange(L)[:, None] + (S - L)
        s = s.masked_fill(~visible, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def module(**attrs):
    return types.SimpleNamespace(**{"is_causal": True, "training": False, "layer_idx": 0, **attrs})


def inputs(b, hq, hkv, L, S, d, g):
    q = torch.randn(b, hq, L, d, generator=g)
    k = torch.randn(b, hkv, S, d, generator=g)
    v = torch.randn(b, hkv, S, d, generator=g)
    return q, k, v


@pytest.mark.parametrize("L,S,causal", [(37, 37, True), (1, 50, True), (5, 33, True), (29, 29, False)])
def test_dense_matches_softmax_attention_in_transformers_layout(L, S, causal):
    g = torch.Generator().manual_seed(SEED + L)
    q, k, v = inputs(2, 4, 2, L, S, 64, g)
    scale = 0.125 + 0.05 * (SEED % 7)
    forward = st.attention_forward("dense")
    out, weights = forward(module(is_causal=causal), q, k, v, None, scaling=scale)
    assert weights is None
    assert tuple(out.shape) == (2, L, 4, 64)
    want = attention_fp64(q, k, v, causal, scale).transpose(1, 2)
    err = (out.double() - want).abs().max().item()
    assert err < 1e-4, f"max abs {err}"


def test_decode_steps_are_dense():
    """One query over the cache (L = 1) runs dense attention whatever the method (the methods are prefill methods)."""
    g = torch.Generator().manual_seed(SEED)
    q, k, v = inputs(1, 4, 2, 1, 700, 64, g)
    out, _ = st.attention_forward("fgattn", top_p=0.5)(module(), q, k, v, None, scaling=None)
    want = attention_fp64(q, k, v, True, 64 ** -0.5).transpose(1, 2)
    assert (out.double() - want).abs().max().item() < 1e-4


def test_is_causal_keyword_overrides_the_module():
    g = torch.Generator().manual_seed(SEED)
    q, k, v = inputs(1, 2, 2, 16, 16, 32, g)
    out, _ = st.attention_forward("dense")(module(is_causal=True), q, k, v, None, scaling=None, is_causal=False)
    want = attention_fp64(q, k, v, False, 32 ** -0.5).transpose(1, 2)
    assert (out.double() - want).abs().max().item() < 1e-4


def test_a_sparse_method_gives_what_spattn_gives():
    g = torch.Generator().manual_seed(SEED)
    q, k, v = inputs(1, 4, 1, 300, 300, 64, g)
    out, _ = st.attention_forward("sparge", topk=0.5)(module(), q, k, v, None, scaling=None)
    want = spattn.sparse_attention(q, k, v, method="sparge", causal=True, topk=0.5)
    assert torch.equal(out, want.transpose(1, 2))


def test_per_layer_params(tmp_path):
    g = torch.Generator().manual_seed(SEED)
    q, k, v = inputs(1, 2, 2, 256, 256, 64, g)
    paths = []
    for layer, top_p in enumerate((0.5, 0.99)):
        path = tmp_path / f"layer{layer}.json"
        spattn.calibrate("fgattn", [(q, k, v)], path, causal=True, rel_l1=1.0 if layer == 0 else 1e-9)
        paths.append(path)
    forward = st.attention_forward("fgattn", params=paths)
    for layer in range(2):
        out, _ = forward(module(layer_idx=layer), q, k, v, None)
        want = spattn.sparse_attention(q, k, v, method="fgattn", causal=True, params=paths[layer])
        assert torch.equal(out, want.transpose(1, 2))
    with pytest.raises(spattn.Error, match="layer_idx is 2"):
        forward(module(layer_idx=2), q, k, v, None)
    with pytest.raises(spattn.Error, match="not both"):
        st.attention_forward("fgattn", params=paths, top_p=0.9)


def test_refusals():
    g = torch.Generator().manual_seed(SEED)
    q, k, v = inputs(1, 2, 2, 8, 8, 32, g)
    forward = st.attention_forward("dense")
    with pytest.raises(spattn.Error, match="attention mask"):
        forward(module(), q, k, v, torch.ones(1, 1, 8, 8, dtype=torch.bool))
    with pytest.raises(spattn.Error, match="sliding-window"):
        forward(module(sliding_window=4), q, k, v, None)
    with pytest.raises(spattn.Error, match="dropout"):
        forward(module(training=True), q, k, v, None, dropout=0.1)
    with pytest.raises(spattn.Error, match="output_attentions"):
        forward(module(), q, k, v, None, output_attentions=True)


def test_mask_function_returns_no_mask_and_refuses_padding():
    ones = torch.ones(2, 12, dtype=torch.bool)
    assert st.mask_function(batch_size=2, q_length=12, kv_length=12, attention_mask=ones) is None
    assert st.mask_function(batch_size=2, q_length=1, kv_length=12, q_offset=11, attention_mask=ones) is None
    padded = ones.clone()
    padded[1, :3] = False
    with pytest.raises(spattn.Error, match="padded"):
        st.mask_function(batch_size=2, q_length=12, kv_length=12, attention_mask=padded)
    with pytest.raises(spattn.Error, match="more tokens seen"):
        st.mask_function(batch_size=2, q_length=12, kv_length=8, attention_mask=None)


def test_static_cache_attends_to_the_written_slots_only():
    """A static cache as transformers' StaticLayer reports it: before its first update the query offset is 0 (an int)
    and the key slots are max_cache_len; after it, the offset is a tensor. The mask function passes the tokens
    written (and recognises its own result handed back as the attention mask); the prefill attends to the first L
    slots as without a cache, a decode step to the written slots only — the unwritten ones hold garbage here —
    against the fp64 softmax attention over those keys; a prefill that does not start at slot 0 is refused."""
    g = torch.Generator().manual_seed(SEED + 3)
    slots, prompt = 64, 21
    q, k, v = inputs(1, 4, 2, prompt, slots, 32, g)
    k[:, :, prompt:] *= 50  # garbage in the unwritten slots: attending to them would show
    written = st.mask_function(batch_size=1, q_length=prompt, kv_length=slots, q_offset=0)
    assert written.dtype == torch.int64 and written.tolist() == [prompt]
    again = st.mask_function(batch_size=1, q_length=prompt, kv_length=slots, q_offset=0, attention_mask=written)
    assert again.tolist() == [prompt]
    forward = st.attention_forward("dense")
    out, _ = forward(module(), q, k, v, written, scaling=0.2)
    want = attention_fp64(q, k[:, :, :prompt], v[:, :, :prompt], True, 0.2).transpose(1, 2)
    assert (out.double() - want).abs().max().item() < 1e-4
    q1 = torch.randn(1, 4, 1, 32, generator=g)
    written = st.mask_function(batch_size=1, q_length=1, kv_length=slots, q_offset=torch.tensor(prompt))
    assert written.tolist() == [prompt + 1]
    out, _ = forward(module(), q1, k, v, written, scaling=0.2)
    assert tuple(out.shape) == (1, 1, 4, 32)
    want = attention_fp64(q1, k[:, :, :prompt + 1], v[:, :, :prompt + 1], True, 0.2).transpose(1, 2)
    assert (out.double() - want).abs().max().item() < 1e-5
    chunk = st.mask_function(batch_size=1, q_length=5, kv_length=slots, q_offset=torch.tensor(prompt))
    with pytest.raises(spattn.Error, match="static cache"):
        forward(module(), q[:, :, :5], k, v, chunk)


def test_register_names_the_implementation():
    pytest.importorskip("transformers")
    from transformers import AttentionInterface
    name = st.register("sale", tau=0.1)
    assert name == "spattn_sale"
    assert name in AttentionInterface._global_mapping
