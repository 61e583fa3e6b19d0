"""Variable-length batches (FlashAttention's packed layout with cu_seqlens) and the log-sum-exp output, on the CPU
reference: a packed batch gives each sequence's rows bit for bit what a call on that sequence alone gives, for every
method (the estimate is per sequence); the LSE equals a float64 log-sum-exp over the keys each row sees."""
import random

import numpy as np
import pytest

import spattn

SEED = random.randrange(1 << 30)
print(f"test_varlen_lse seed {SEED}")
METHODS = ["dense", "sparge", "sale", "anchor", "fgattn", "bfla"]


def packed(rng, lengths, heads, dim):
    return rng.standard_normal((sum(lengths), heads, dim)).astype(np.float32)


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def as_batch1(x, a, b):
    """Rows [a, b) of a packed [total, H, D] array as a [1, H, n, D] batch."""
    return np.ascontiguousarray(x[a:b].transpose(1, 0, 2)[None])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("causal", [True, False])
def test_varlen_equals_per_sequence(method, causal):
    rng = np.random.default_rng(SEED)
    lq = [97, 300, 40]
    lk = [97, 300, 40] if not causal else [97, 420, 40]  # a chunked-prefill sequence: Nq < Nkv, bottom-right
    q, k, v = packed(rng, lq, 4, 64), packed(rng, lk, 2, 64), packed(rng, lk, 2, 64)
    cq, ck = offsets(lq), offsets(lk)
    out, lse = spattn.sparse_attention(q, k, v, method=method, causal=causal, cu_seqlens_q=cq, cu_seqlens_k=ck,
                                       return_lse=True)
    assert out.shape == (sum(lq), 4, 64) and lse.shape == (4, sum(lq))
    for b in range(len(lq)):
        one, one_lse = spattn.sparse_attention(as_batch1(q, cq[b], cq[b + 1]), as_batch1(k, ck[b], ck[b + 1]),
                                               as_batch1(v, ck[b], ck[b + 1]), method=method, causal=causal,
                                               return_lse=True)
        np.testing.assert_array_equal(out[cq[b]:cq[b + 1]], one[0].transpose(1, 0, 2))
        np.testing.assert_array_equal(lse[:, cq[b]:cq[b + 1]], one_lse[0])


def test_varlen_masks_are_per_sequence():
    rng = np.random.default_rng(SEED + 1)
    lengths = [130, 64]
    q, k = packed(rng, lengths, 2, 64), packed(rng, lengths, 2, 64)
    c = offsets(lengths)
    mask = spattn.estimate("sparge", q, k, causal=True, cu_seqlens_q=c, cu_seqlens_k=c)
    assert mask.batch == 2 and mask.seqlen_q == 130
    for b in range(2):
        one = spattn.estimate("sparge", as_batch1(q, c[b], c[b + 1]), as_batch1(k, c[b], c[b + 1]), causal=True)
        bitmap = np.asarray(mask.to_bitmap())[b]
        tiles = np.asarray(one.to_bitmap())[0]
        np.testing.assert_array_equal(bitmap[:, :tiles.shape[1], :tiles.shape[2]], tiles)


def lse64(q, k, scale, causal, keep=None):
    """float64 log-sum-exp of each row of one [H, N, D] problem over the keys it sees (keep: [H, Nq, Nkv] bool)."""
    s = np.einsum("hnd,hmd->hnm", q.astype(np.float64), k.astype(np.float64)) * scale
    n, m = s.shape[1:]
    sees = np.ones((n, m), dtype=bool)
    if causal:
        sees = np.tril(sees, m - n)
    sees = sees[None] if keep is None else sees[None] & keep
    s = np.where(sees, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # a row that sees no key: log(0) = −inf below
    with np.errstate(divide="ignore"):
        return np.log(np.exp(s - top).sum(-1)) + top[..., 0]


@pytest.mark.parametrize("causal", [True, False])
def test_lse_matches_float64(causal):
    rng = np.random.default_rng(SEED + 2)
    q = rng.standard_normal((2, 3, 150, 64)).astype(np.float32)
    k = rng.standard_normal((2, 3, 150, 64)).astype(np.float32)
    v = rng.standard_normal((2, 3, 150, 64)).astype(np.float32)
    bitmap = (rng.random((2, 3, 10, 10)) < 0.5).astype(np.uint8)
    mask = spattn.TileMask.from_bitmap(bitmap, tile_q=16, tile_k=16, seqlen_q=150, seqlen_kv=150, causal=causal)
    out, lse = spattn.attend(q, k, v, mask, causal=causal, return_lse=True)
    dense = np.asarray(mask.to_bitmap()).astype(bool).repeat(16, axis=2).repeat(16, axis=3)[:, :, :150, :150]
    for b in range(2):
        want = lse64(q[b], k[b], 64 ** -0.5, causal, dense[b])
        finite = np.isfinite(want)
        assert np.array_equal(finite, np.isfinite(lse[b]))  # rows that see no key: −inf on both sides
        assert (lse[b][~finite] == -np.inf).all()
        np.testing.assert_allclose(lse[b][finite], want[finite], rtol=0, atol=2e-5)


def test_bad_varlen_input():
    rng = np.random.default_rng(SEED + 3)
    q, k = packed(rng, [10, 20], 2, 64), packed(rng, [10, 20], 2, 64)
    c = offsets([10, 20])
    with pytest.raises(spattn.Error, match="both"):
        spattn.sparse_attention(q, k, k, method="dense", cu_seqlens_q=c)
    with pytest.raises(spattn.Error, match="packed"):
        spattn.sparse_attention(q[None], k[None], k[None], method="dense", cu_seqlens_q=c, cu_seqlens_k=c)
    with pytest.raises(spattn.Error, match="cu_seqlens_q: ends at 20"):
        spattn.sparse_attention(q, k, k, method="dense", cu_seqlens_q=offsets([10, 10]), cu_seqlens_k=c)
    with pytest.raises(spattn.Error, match="only with cu_seqlens"):
        spattn.sparse_attention(q[None], k[None], k[None], method="dense", max_seqlen_q=5)


def test_varlen_torch_equals_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(SEED + 4)
    lengths = [50, 120]
    q, k, v = packed(rng, lengths, 4, 64), packed(rng, lengths, 2, 64), packed(rng, lengths, 2, 64)
    c = offsets(lengths)
    out, lse = spattn.sparse_attention(q, k, v, method="sparge", causal=True, cu_seqlens_q=c, cu_seqlens_k=c,
                                       return_lse=True)
    tc = torch.from_numpy(c)
    tout, tlse = spattn.sparse_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                                         method="sparge", causal=True, cu_seqlens_q=tc, cu_seqlens_k=tc,
                                         return_lse=True)
    assert isinstance(tout, torch.Tensor) and isinstance(tlse, torch.Tensor) and tlse.dtype == torch.float32
    np.testing.assert_array_equal(tout.numpy(), out)
    np.testing.assert_array_equal(tlse.numpy(), lse)
