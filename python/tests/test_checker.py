"""spattn.testing.check_attention: spattn's own reference output and the exact answer pass; planted faults (a row
off by bf16 ulps, a dropped tile, a NaN, two heads swapped) fail at their (batch, head, row); every mask format
(TileMask, FlexAttention BlockMask and its lists, FlashInfer BSR, boolean) checks the same thing."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import exact_fp64, qkv

import spattn
import spattn.testing
from spattn.testing import check_attention

torch = pytest.importorskip("torch")

B, HQ, HKV, NQ, NKV, D = 2, 4, 2, 150, 200, 64  # GQA, Nq < Nkv (bottom-right causal), lengths not tile multiples


def random_mask(rng, tile_q=32, tile_k=16, mask_heads=HQ, causal=True, density=0.5, nq=NQ, nkv=NKV):
    tq, tk = -(-nq // tile_q), -(-nkv // tile_k)
    bitmap = (rng.random((B, mask_heads, tq, tk)) < density).astype(np.uint8)
    return spattn.TileMask.from_bitmap(bitmap, tile_q=tile_q, tile_k=tile_k, seqlen_q=nq, seqlen_kv=nkv,
                                       causal=causal)


def bf16_inputs(rng):
    return tuple(torch.from_numpy(x).bfloat16() for x in qkv(rng, B, HQ, HKV, NQ, NKV, D))


def bf16_ulp(x):
    """One bf16 ulp (8 significant bits) at magnitude x."""
    return 2.0 ** (math.floor(math.log2(x)) - 7)


def assert_fails_at(report, where, rows=1):
    assert not report.passed and not report, report.text
    assert report.first_failure == where, report.text
    assert report.failing_rows == rows, report.text
    assert f"first failing: batch {where[0]}, head {where[1]}, row {where[2]} " in report.text


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_spattn_reference_output_passes(rng, dtype):
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    if dtype != "float32":
        q, k, v = (torch.from_numpy(x).to(getattr(torch, dtype)) for x in (q, k, v))
    mask = random_mask(rng)
    out = spattn.attend(q, k, v, mask, causal=True, backend="reference")
    report = check_attention(out, q, k, v, mask)
    assert report.passed and report.first_failure is None and report.failing_rows == 0, report.text
    assert report.max_error == report.reference_error  # out is ref_low itself
    assert report.bound == 2 * report.reference_error + report.atol
    assert report.atol == (1e-5 if dtype == "float32" else 1e-4)
    assert report.head_error.shape == (B, HQ) and report.head_error.max() == report.max_error
    assert 0 < report.reference_error < (1e-5 if dtype == "float32" else 3e-2)
    assert report.text.startswith("spattn check: PASS (tile mask 32x16")


def test_exact_answer_passes_and_matches_the_numpy_reference(rng):
    """An fp32 rounding of conftest's independent NumPy float64 reference passes with an error of at most its rounding:
    the checker's float64 reference is that one."""
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    mask = random_mask(rng, mask_heads=HKV)
    want = exact_fp64(q, k, v, mask.to_bitmap().astype(bool), 32, 16, True)
    report = check_attention(want.astype(np.float32), q, k, v, mask)
    assert report.passed, report.text
    assert report.max_error <= np.abs(want).max() * 2.0 ** -24 * 1.01


def test_row_off_by_bf16_ulps_fails_at_that_row(rng):
    q, k, v = bf16_inputs(rng)
    mask = random_mask(rng)
    out = spattn.attend(q, k, v, mask, causal=True, backend="reference")
    b, h, row = int(rng.integers(B)), int(rng.integers(HQ)), int(rng.integers(NQ))
    # The bound is about one bf16 ulp at the largest output (2 × the half-ulp rounding of ref_low): four of those
    # on one element is a fault any correct bf16 kernel stays clear of.
    delta = 4 * bf16_ulp(out.float().abs().max().item())
    bad = out.clone()
    bad[b, h, row, int(rng.integers(D))] += delta
    report = check_attention(bad, q, k, v, mask)
    assert_fails_at(report, (b, h, row))
    assert report.bound < 1.5 * bf16_ulp(out.float().abs().max().item()), report.text
    assert report.head_error[b, h] == report.max_error >= delta - report.bound / 2
    others = np.delete(report.head_error.ravel(), b * HQ + h)
    assert np.all(others <= report.bound)


def test_dropped_tile_fails_at_its_first_row(rng):
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    tile_q, tile_k = 32, 16
    mask = random_mask(rng, tile_q, tile_k, causal=False, density=0.6)
    bitmap = mask.to_bitmap()
    kept = np.argwhere(bitmap)
    b, h, t, j = (int(x) for x in kept[rng.integers(len(kept))])
    bitmap[b, h, t, j] = 0
    dropped = spattn.TileMask.from_bitmap(bitmap, tile_q=tile_q, tile_k=tile_k, seqlen_q=NQ, seqlen_kv=NKV,
                                          causal=False)
    out = spattn.attend(q, k, v, dropped, backend="reference")
    report = check_attention(out, q, k, v, mask)
    rows_in_tile = min(NQ, (t + 1) * tile_q) - t * tile_q
    assert_fails_at(report, (b, h, t * tile_q), rows=rows_in_tile)


def test_nan_never_passes(rng):
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    mask = random_mask(rng)
    out = spattn.attend(q, k, v, mask, causal=True, backend="reference")
    b, h, row = int(rng.integers(B)), int(rng.integers(HQ)), int(rng.integers(NQ))
    out[b, h, row, 7] = np.nan
    for factor, atol in ((2.0, None), (1e6, 1e6)):
        report = check_attention(out, q, k, v, mask, factor=factor, atol=atol)
        assert_fails_at(report, (b, h, row))
        assert report.non_finite == 1 and math.isnan(report.max_error) and math.isnan(report.head_error[b, h])
    out[b, h, row, 7] = np.inf
    assert_fails_at(check_attention(out, q, k, v, mask, atol=1e6), (b, h, row))


def test_swapped_heads_fail_at_the_first_of_them(rng):
    q, k, v = bf16_inputs(rng)
    mask = random_mask(rng, density=1.0)
    out = spattn.attend(q, k, v, mask, causal=True, backend="reference")
    b = int(rng.integers(B))
    h1, h2 = sorted(int(x) for x in rng.choice(HQ, size=2, replace=False))
    bad = out.clone()
    bad[b, h1], bad[b, h2] = out[b, h2], out[b, h1]
    report = check_attention(bad, q, k, v, mask)
    assert report.first_failure == (b, h1, 0), report.text
    assert report.head_error[b, h1] > report.bound and report.head_error[b, h2] > report.bound
    others = [report.head_error[bb, hh] for bb in range(B) for hh in range(HQ) if (bb, hh) not in ((b, h1), (b, h2))]
    assert max(others) <= report.bound
    # the layout read wrongly (bnhd data as bhnd) is caught too
    bnhd = out.transpose(1, 2).contiguous().transpose(1, 2)
    assert check_attention(bnhd, q, k, v, mask).passed
    q4, k4, v4, o4 = (x.transpose(1, 2).contiguous() for x in (q, k, v, out))
    assert check_attention(o4, q4, k4, v4, mask, layout="bnhd").passed


def test_every_mask_format_checks_the_same_attention(rng):
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    tile_q, tile_k = 32, 16
    mask = random_mask(rng, tile_q, tile_k, mask_heads=HKV)
    out = spattn.attend(q, k, v, mask, causal=True, backend="reference")
    out[1, 3, 100, 5] += 0.01  # one fault, so every format must also locate it
    reports = {"TileMask": check_attention(out, q, k, v, mask)}
    lists = mask.flex_block_mask_tensors(heads_q=HQ)
    reports["BlockMask lists"] = check_attention(out, q, k, v, lists, causal=True, block_size=(tile_q, tile_k))
    block_mask = SimpleNamespace(BLOCK_SIZE=(tile_q, tile_k), **mask.flex_block_mask_tensors())  # duck-typed
    reports["BlockMask"] = check_attention(out, q, k, v, block_mask, causal=True)
    reports["FlashInfer BSR"] = check_attention(out, q, k, v, mask.to_flashinfer_bsr(), causal=True)
    bsr = mask.to_flashinfer_bsr()
    reports["BSR tuple"] = check_attention(out, q, k, v, (bsr["indptr"], bsr["indices"], tile_q, tile_k), causal=True)
    in_order = tuple(lists[name] for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"))
    reports["BlockMask tuple"] = check_attention(out, q, k, v, in_order, causal=True, block_size=(tile_q, tile_k))
    elements = np.repeat(np.repeat(mask.to_bitmap(), tile_q, axis=2), tile_k, axis=3)[:, :, :NQ, :NKV] != 0
    reports["boolean"] = check_attention(out, q, k, v, torch.from_numpy(elements), causal=True)
    for name, report in reports.items():
        assert report.first_failure == (1, 3, 100) and report.failing_rows == 1, (name, report.text)
        np.testing.assert_array_equal(report.head_error, reports["TileMask"].head_error, err_msg=name)
    assert reports["boolean"].mask_kind == "element mask"
    assert reports["BlockMask"].mask_kind == "tile mask 32x16"


def test_blocks_no_tile_mask_holds_are_checked_as_elements(rng):
    """FlashInfer blocks of 8 query rows (TileMask's tile_q starts at 16), one mask for every head."""
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    rows, cols = 8, 20
    tq, tk = -(-NQ // rows), -(-NKV // cols)
    bitmap = rng.random((tq, tk)) < 0.4
    indptr = np.concatenate([[0], np.cumsum(bitmap.sum(axis=1))]).astype(np.int32)
    indices = np.nonzero(bitmap)[1].astype(np.int32)
    elements = np.repeat(np.repeat(bitmap, rows, axis=0), cols, axis=1)[:NQ, :NKV]
    want = exact_fp64(q, k, v, np.broadcast_to(elements, (B, 1, NQ, NKV)), 1, 1, False).astype(np.float32)
    bsr = {"indptr": indptr, "indices": indices, "R": rows, "C": cols}
    report = check_attention(want, q, k, v, bsr)
    assert report.passed and report.mask_kind == "element mask", report.text
    want[0, 2, 77] = 0.5
    assert_fails_at(check_attention(want, q, k, v, bsr), (0, 2, 77))


def test_element_mask_with_empty_rows(rng):
    """A boolean mask no TileMask expresses (every row its own pattern, some rows empty): the exact answer passes,
    and an empty row must be zeros."""
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    allowed = rng.random((B, 1, NQ, NKV)) < 0.3
    allowed[:, :, 10] = False
    want = exact_fp64(q, k, v, allowed, 1, 1, True).astype(np.float32)
    report = check_attention(want, q, k, v, allowed, causal=True)
    assert report.passed, report.text
    assert report.reference_error < 1e-5
    want[1, 0, 10, 0] = 1e-3
    assert_fails_at(check_attention(want, q, k, v, allowed, causal=True), (1, 0, 10))


def test_bad_arguments_raise(rng):
    q, k, v = qkv(rng, B, HQ, HKV, NQ, NKV, D)
    mask = random_mask(rng)
    out = spattn.attend(q, k, v, mask, causal=True, backend="reference")
    with pytest.raises(spattn.Error, match="causal: False differs from the TileMask's causal=True"):
        check_attention(out, q, k, v, mask, causal=False)
    with pytest.raises(spattn.Error, match="factor: must be finite and >= 1"):
        check_attention(out, q, k, v, mask, factor=0.5)
    with pytest.raises(spattn.Error, match=r"mask: a boolean mask must be \[Nq, Nkv\]"):
        check_attention(out, q, k, v, np.ones((NQ, NQ), bool))
    with pytest.raises(spattn.Error, match="heads 3 is neither 1"):
        check_attention(out, q, k, v, np.ones((1, 3, NQ, NKV), bool))
    with pytest.raises(spattn.Error, match="a listed key block is outside"):
        lists = mask.flex_block_mask_tensors()
        lists["kv_indices"] = lists["kv_indices"] + 100
        check_attention(out, q, k, v, lists, causal=True, block_size=(32, 16))
    with pytest.raises(spattn.Error, match="out"):
        check_attention(out[:, :, :-1], q, k, v, mask)


def test_no_mask_is_dense(rng):
    q, k, v = qkv(rng, 1, 2, 1, 64, 64, D)
    dense = spattn.TileMask.dense(tile_q=64, tile_k=64, batch=1, mask_heads=2, seqlen_q=64, seqlen_kv=64, causal=True)
    out = spattn.attend(q, k, v, dense, causal=True, backend="reference")
    assert check_attention(out, q, k, v, causal=True).passed
    assert not check_attention(out, q, k, v).passed  # causal output against full attention
