"""spattn on NumPy arrays: results against the float64 reference (exact_fp64), the library's own pipeline, strides,
out= buffers, reference counts, TileMask conversions and files."""
import sys

import numpy as np
import pytest

import spattn
from conftest import exact_fp64, qkv


def random_mask(rng, batch, mask_heads, seqlen_q, seqlen_kv, tile_q, tile_k, causal, density=0.5):
    tq, tk = -(-seqlen_q // tile_q), -(-seqlen_kv // tile_k)
    bits = (rng.random((batch, mask_heads, tq, tk)) < density).astype(np.uint8)
    mask = spattn.TileMask.from_bitmap(bits, tile_q=tile_q, tile_k=tile_k, seqlen_q=seqlen_q, seqlen_kv=seqlen_kv,
                                       causal=causal)
    return mask, mask.to_bitmap().astype(bool)


CASES = [  # batch, Hq, Hkv, Nq, Nkv, D, Dv, tile_q, tile_k, causal, mask per KV head
    (1, 2, 1, 192, 192, 64, 64, 64, 32, True, False),
    (2, 4, 2, 100, 160, 32, 48, 16, 16, True, True),
    (1, 3, 3, 130, 77, 64, 64, 32, 8, False, False),
    (2, 2, 2, 64, 256, 128, 128, 16, 128, False, False),
]


@pytest.mark.parametrize("case", CASES)
def test_attend_matches_float64_oracle(rng, case):
    batch, hq, hkv, nq, nkv, d, dv, tile_q, tile_k, causal, per_kv = case
    q, k, v = qkv(rng, batch, hq, hkv, nq, nkv, d, dv)
    mask, kept = random_mask(rng, batch, hkv if per_kv else hq, nq, nkv, tile_q, tile_k, causal)
    scale = float(rng.uniform(0.05, 0.3))
    out = spattn.attend(q, k, v, mask, causal=causal, scale=scale)
    assert out.shape == (batch, hq, nq, dv) and out.dtype == np.float32
    expected = exact_fp64(q, k, v, kept, tile_q, tile_k, causal, scale)
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5)


@pytest.mark.parametrize("method", ["dense", "sparge", "sale", "fgattn", "bfla", "anchor"])
def test_sparse_attention_is_attention_over_its_mask(rng, method):
    q, k, v = qkv(rng, 1, 4, 2, 256, 256, 64)
    out, mask, info = spattn.sparse_attention(q, k, v, method=method, causal=True, return_mask=True)
    assert info["method"] == method and info["backend"] == "reference"
    if info["attend"]["pv_skipped"] == 0:  # SpargeAttn's PV-skip leaves out tiles the mask keeps
        kept = mask.to_bitmap().astype(bool)
        np.testing.assert_allclose(out, exact_fp64(q, k, v, kept, mask.tile_q, mask.tile_k, True), rtol=0, atol=5e-5)
    # The library's two stages give the same bits as its one call (for methods without executor extras).
    if method in ("dense", "fgattn", "bfla"):
        again = spattn.attend(q, k, v, spattn.estimate(method, q, k, causal=True), causal=True)
        assert np.array_equal(out, again)


def test_strided_views_give_the_same_bits(rng):
    q, k, v = qkv(rng, 2, 4, 2, 128, 128, 64)
    mask = spattn.estimate("fgattn", q, k, causal=True, tile_q=32, tile_k=32, top_p=0.8)
    contiguous = spattn.attend(q, k, v, mask, causal=True)
    # [B, N, H, D] arrays, read through layout="bnhd" as strided views (no copy).
    qt, kt, vt = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    bnhd = spattn.attend(qt, kt, vt, mask, causal=True, layout="bnhd")
    assert bnhd.shape == (2, 128, 4, 64)
    assert np.array_equal(bnhd.transpose(0, 2, 1, 3), contiguous)
    # Rows padded inside a larger buffer (stride_n > D) and every other head (stride_h = 2·N·D).
    big = np.full((2, 8, 128, 96), np.nan, np.float32)
    big[:, ::2, :, :64] = q
    view = big[:, ::2, :, :64]
    assert not view.flags.c_contiguous
    assert np.array_equal(spattn.attend(view, k, v, mask, causal=True), contiguous)
    assert spattn.estimate("fgattn", view, k, causal=True, tile_q=32, tile_k=32, top_p=0.8) == mask


def test_out_is_written_in_place_through_its_strides(rng):
    q, k, v = qkv(rng, 1, 2, 2, 96, 96, 64)
    mask, _ = random_mask(rng, 1, 2, 96, 96, 32, 32, True)
    expected = spattn.attend(q, k, v, mask, causal=True)
    poisoned = np.full((1, 96, 3, 80), np.nan, np.float32)  # [B, N, H+1, Dv+16]: out is a strided window of it
    out = poisoned[:, :, 1:, :64]
    before = out.__array_interface__["data"][0]
    qt, kt, vt = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    result = spattn.attend(qt, kt, vt, mask, causal=True, out=out, layout="bnhd")
    assert result is out and out.__array_interface__["data"][0] == before
    assert np.array_equal(out.transpose(0, 2, 1, 3), expected)
    assert np.isnan(poisoned[:, :, 0]).all() and np.isnan(poisoned[..., 64:]).all()  # nothing outside the view
    # sparse_attention too: every element of a poisoned out is written.
    out = np.full((1, 2, 96, 64), np.nan, np.float32)
    assert spattn.sparse_attention(q, k, v, method="bfla", causal=True, out=out) is out
    assert np.isfinite(out).all()


def test_reference_counts_unchanged(rng):
    q, k, v = qkv(rng, 1, 2, 1, 128, 128, 64)
    out = np.empty_like(q)
    mask = spattn.estimate("sparge", q, k, causal=True)
    counts = [sys.getrefcount(x) for x in (q, k, v, out, mask)]
    for _ in range(3):
        spattn.attend(q, k, v, mask, causal=True, out=out)
        spattn.sparse_attention(q, k, v, method="sale", causal=True, out=out)
        spattn.estimate("bfla", q, k, causal=True)
        with pytest.raises(spattn.Error):
            spattn.attend(q, k, v.astype(np.float16), mask, causal=True, out=out)
        with pytest.raises(spattn.Error):
            spattn.attend(q, k, v, mask, causal=False, out=out)  # the mask is causal
    assert [sys.getrefcount(x) for x in (q, k, v, out, mask)] == counts


def test_tile_mask_conversions_and_file(rng, tmp_path):
    q, k, _ = qkv(rng, 2, 4, 2, 200, 200, 64)
    mask = spattn.estimate("fgattn", q, k, causal=True, tile_q=32, tile_k=16)
    bits = mask.to_bitmap()
    assert bits.shape == (2, 4, 7, 13) and bits.dtype == np.uint8
    assert mask.density == pytest.approx(bits.sum() / mask.stats()["reachable_tiles"])
    assert spattn.TileMask.from_bitmap(bits, tile_q=32, tile_k=16, seqlen_q=200, seqlen_kv=200, causal=True) == mask
    rows = [mask.row(b, h, t) for b in range(2) for h in range(4) for t in range(7)]
    assert np.array_equal(mask.row_ptr, np.cumsum([0] + [len(r) for r in rows]))
    assert np.array_equal(mask.tiles, np.concatenate(rows))
    bsr = mask.to_flashinfer_bsr()
    assert np.array_equal(bsr["indptr"], mask.row_ptr) and np.array_equal(bsr["indices"], mask.tiles)
    assert (bsr["R"], bsr["C"], bsr["rows"]) == (32, 16, 2 * 4 * 7)
    lists = mask.flex_block_mask_lists()
    counts = lists["kv_num_blocks"] + lists["full_kv_num_blocks"]
    assert np.array_equal(counts, bits.sum(axis=3))
    path = tmp_path / "mask.npz"
    mask.save(str(path))
    assert spattn.TileMask.load(str(path)) == mask
    arrays = np.load(path)  # the CLI's format: NumPy reads it
    assert np.array_equal(arrays["tiles"], mask.tiles) and int(arrays["tile_q"]) == 32


def test_calibrate_writes_params_that_estimate_reads(rng, tmp_path):
    samples = [qkv(rng, 1, 2, 2, 256, 256, 64) for _ in range(2)]
    path = tmp_path / "sale.json"
    params = spattn.calibrate("sale", samples, path, causal=True, sale_theta=0.4)
    assert params["method"] == "sale" and len(params["tau"]) == 2
    q, k, v = samples[0]
    with_params = spattn.estimate("sale", q, k, causal=True, params=str(path))
    assert with_params.mask_heads == 2
    with pytest.raises(spattn.Error, match="heads"):
        spattn.estimate("sale", q[:, :1], k[:, :1], causal=True, params=str(path))


@pytest.mark.parametrize("method", ["anchor", "fgattn", "bfla"])
def test_calibrate_main_knob_round_trip(rng, tmp_path, method):
    samples = [qkv(rng, 1, 4, 2, 512, 512, 64) for _ in range(2)]
    path = tmp_path / f"{method}.json"
    params = spattn.calibrate(method, samples, path, causal=True, rel_l1=0.05)
    assert params["method"] == method and params["bound"] == pytest.approx(0.05)
    q, k, v = samples[0]
    from_file = spattn.sparse_attention(q, k, v, method=method, causal=True, params=str(path))
    if params["dense"]:
        same = spattn.sparse_attention(q, k, v, method="dense", causal=True)
    else:
        assert params["worst_rel_l1"] <= 0.05
        same = spattn.sparse_attention(q, k, v, method=method, causal=True, **{params["option"]: params["value"]})
    assert np.array_equal(from_file, same)  # the file is the knob's setting, nothing else
    with pytest.raises(spattn.Error, match="not"):
        spattn.estimate("sale" if method != "sale" else "fgattn", q, k, causal=True, params=str(path))


def test_methods_and_backends():
    assert {"dense", "sparge", "sale", "anchor", "fgattn", "bfla"} <= set(spattn.methods())
    assert spattn.backends()[-1] == "reference" or "reference" in spattn.backends()
