"""spattn on torch CPU tensors (Debian's PyTorch 1.13 here; newer ones too): zero-copy input and output, dtypes,
strides, the SDPA drop-in, FlexAttention export lists, the custom op where this PyTorch has torch.library.custom_op."""
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import spattn  # noqa: E402
import spattn.torch  # noqa: E402
from conftest import exact_fp64, qkv  # noqa: E402


def tensors(rng, *shape_args, dtype=torch.float32):
    return [torch.from_numpy(x).to(dtype) for x in qkv(rng, *shape_args)]


def to64(x):
    return x.double().numpy()


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-5), (torch.float16, 4e-3), (torch.bfloat16, 2e-2)])
def test_attend_matches_float64_oracle(rng, dtype, atol):
    q, k, v = tensors(rng, 2, 4, 2, 160, 160, 64, dtype=dtype)
    bits = (rng.random((2, 4, 5, 10)) < 0.6).astype(np.uint8)
    mask = spattn.TileMask.from_bitmap(bits, tile_q=32, tile_k=16, seqlen_q=160, seqlen_kv=160, causal=True)
    out = spattn.attend(q, k, v, mask, causal=True)
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == (2, 4, 160, 64)
    expected = exact_fp64(to64(q), to64(k), to64(v), mask.to_bitmap().astype(bool), 32, 16, True)
    scale = max(1.0, np.abs(expected).max())
    assert np.abs(to64(out) - expected).max() <= atol * scale


def test_same_bits_as_numpy(rng):
    q, k, v = qkv(rng, 1, 2, 2, 128, 128, 64)
    from_numpy = spattn.sparse_attention(q, k, v, method="fgattn", causal=True)
    from_torch = spattn.sparse_attention(*(torch.from_numpy(x) for x in (q, k, v)), method="fgattn", causal=True)
    assert np.array_equal(from_torch.numpy(), from_numpy)


def test_zero_copy_views_and_out(rng):
    q, k, v = tensors(rng, 1, 4, 2, 128, 128, 64)
    expected = spattn.sparse_attention(q, k, v, method="bfla", causal=True)
    # [B, N, H, D] storage read as [B, H, N, D] through strides (transpose is a view, no copy).
    qt, kt, vt = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v))
    assert not qt.is_contiguous()
    out = torch.full((1, 128, 4, 64), float("nan")).transpose(1, 2)  # poisoned, strided
    pointer = out.data_ptr()
    result = spattn.sparse_attention(qt, kt, vt, method="bfla", causal=True, out=out)
    assert result is out and out.data_ptr() == pointer
    assert torch.equal(out, expected)


def test_reference_counts_unchanged(rng):
    q, k, v = tensors(rng, 1, 2, 1, 128, 128, 64)
    out = torch.empty_like(q)
    counts = [sys.getrefcount(x) for x in (q, k, v, out)]
    for _ in range(3):
        spattn.sparse_attention(q, k, v, method="sparge", causal=True, out=out)
        spattn.torch.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, method="dense")
        with pytest.raises(spattn.Error):
            spattn.sparse_attention(q, k, v.double(), method="sparge", causal=True, out=out)
    assert [sys.getrefcount(x) for x in (q, k, v, out)] == counts


def test_bad_tensors(rng):
    q, k, v = tensors(rng, 1, 2, 2, 64, 64, 64)
    with pytest.raises(spattn.Error, match="q: dtype"):
        spattn.sparse_attention(q.double(), k, v, method="dense")
    with pytest.raises(spattn.Error, match="the last dimension must be contiguous"):
        spattn.sparse_attention(q.transpose(2, 3), k, v, method="dense")
    with pytest.raises(spattn.Error, match="q: cannot be read through DLPack"):
        spattn.sparse_attention(q.requires_grad_(), k, v, method="dense")
    with pytest.raises(spattn.Error):
        spattn.sparse_attention(torch.empty(1, 2, 64, 64, device="meta"), k, v, method="dense", out=torch.empty(1, 2, 64, 64))


def test_sdpa_drop_in(rng):
    q, k, v = tensors(rng, 2, 4, 2, 96, 96, 64)
    out = spattn.torch.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, method="dense")
    all_kept = np.ones((2, 4, 1, 1), bool)
    expected = exact_fp64(to64(q), to64(k), to64(v), all_kept, 96, 96, True)
    assert np.abs(to64(out) - expected).max() <= 2e-5
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):  # PyTorch >= 2.0
        kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        torch_out = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, is_causal=True)
        assert torch.allclose(out, torch_out, atol=2e-5, rtol=0)
    # [H, N, D] inputs, a scale, a sparse method with its options.
    out3 = spattn.torch.scaled_dot_product_attention(q[0], k[0], v[0], scale=0.1, enable_gqa=True, method="fgattn",
                                                     top_p=0.95)
    assert out3.shape == (4, 96, 64)


def test_sdpa_refuses_what_it_cannot_do(rng):
    q, k, v = tensors(rng, 1, 2, 2, 64, 64, 64)
    sdpa = spattn.torch.scaled_dot_product_attention
    with pytest.raises(spattn.Error, match="attn_mask"):
        sdpa(q, k, v, attn_mask=torch.ones(64, 64, dtype=torch.bool))
    with pytest.raises(spattn.Error, match="dropout"):
        sdpa(q, k, v, dropout_p=0.1)
    with pytest.raises(spattn.Error, match="top-left"):
        sdpa(q[:, :, :32], k, v, is_causal=True)
    with pytest.raises(spattn.Error, match="enable_gqa"):
        sdpa(q, k[:, :1], v[:, :1])
    with pytest.raises(spattn.Error, match="unknown option"):
        sdpa(q, k, v, method="sparge", top_p=0.5)


def test_patched_replaces_and_restores_sdpa(rng):
    q, k, v = tensors(rng, 1, 2, 2, 64, 64, 64)
    functional = torch.nn.functional
    before = getattr(functional, "scaled_dot_product_attention", None)
    with spattn.torch.patched(method="dense"):
        out = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert getattr(functional, "scaled_dot_product_attention", None) is before
    assert torch.equal(out, spattn.sparse_attention(q, k, v, method="dense", causal=True))


def test_flex_block_mask(rng):
    q, k, _ = tensors(rng, 1, 4, 2, 200, 200, 64)
    mask = spattn.estimate("fgattn", q, k, causal=True, tile_q=32, tile_k=32)
    mask = spattn.TileMask.from_bitmap(mask.to_bitmap()[:, ::2], tile_q=32, tile_k=32, seqlen_q=200, seqlen_kv=200,
                                       causal=True)  # one mask per KV head
    t = mask.flex_block_mask_tensors(heads_q=4)
    assert t["kv_indices"].shape == (1, 4, 7, 7) and t["kv_num_blocks"].dtype == torch.int32
    bits = torch.from_numpy(mask.to_bitmap()).repeat_interleave(2, dim=1)
    # Every kept tile is listed once, as full or partial; full tiles lie at or below the diagonal's first row.
    for h in range(4):
        for r in range(7):
            partial = t["kv_indices"][0, h, r, : t["kv_num_blocks"][0, h, r]].tolist()
            full = t["full_kv_indices"][0, h, r, : t["full_kv_num_blocks"][0, h, r]].tolist()
            assert sorted(partial + full) == torch.nonzero(bits[0, h, r]).flatten().tolist()
            assert all((c + 1) * 32 - 1 <= r * 32 and (r + 1) * 32 <= 200 for c in full)
    # The mask_mod is the mask itself: evaluated on every (h, i, j) it is exact_fp64's visibility.
    mask_mod = mask.flex_mask_mod(heads_q=4)
    b, h, i, j = (torch.arange(n).view(*[-1 if d == axis else 1 for d in range(4)])
                  for axis, n in enumerate((1, 4, 200, 200)))
    expected = bits.bool().repeat_interleave(32, dim=2)[:, :, :200].repeat_interleave(32, dim=3)[..., :200] & (j <= i)
    assert torch.equal(mask_mod(b, h, i, j), expected)
    try:
        from torch.nn.attention.flex_attention import BlockMask
    except ImportError:
        with pytest.raises(spattn.Error, match="flex_attention"):
            mask.to_flex_block_mask()
    else:
        block_mask = mask.to_flex_block_mask(heads_q=4)
        assert isinstance(block_mask, BlockMask) and block_mask.BLOCK_SIZE == (32, 32)


@pytest.mark.skipif(not spattn.torch.HAS_CUSTOM_OP, reason="this PyTorch has no torch.library.custom_op (< 2.4)")
def test_custom_op(rng):
    q, k, v = tensors(rng, 1, 2, 2, 128, 128, 64)
    out = torch.ops.spattn.sparse_attention(q, k, v, "sparge", True, None, '{"topk": 0.5}')
    assert torch.equal(out, spattn.sparse_attention(q, k, v, method="sparge", causal=True, topk=0.5))
    if hasattr(torch.library, "opcheck"):
        torch.library.opcheck(torch.ops.spattn.sparse_attention.default, (q, k, v, "sparge", True, None, "{}"))
