"""Bad input raises spattn.Error with the library's message — never a crash, never a silent result."""
import numpy as np
import pytest

import spattn
from conftest import qkv


@pytest.fixture
def inputs(rng):
    q, k, v = qkv(rng, 1, 2, 1, 128, 128, 64)
    mask = spattn.TileMask.dense(tile_q=64, tile_k=64, batch=1, mask_heads=2, seqlen_q=128, seqlen_kv=128,
                                 causal=True)
    return q, k, v, mask


def test_error_is_a_value_error():
    assert issubclass(spattn.Error, ValueError)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint16])
def test_wrong_dtype(inputs, dtype):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error, match="q: dtype"):
        spattn.attend(q.astype(dtype), k, v, mask, causal=True)


def test_mixed_dtypes(inputs):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error, match="k: dtype f16 differs"):
        spattn.attend(q, k.astype(np.float16), v, mask, causal=True)


def test_wrong_rank(inputs):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error, match="q: expected 4 dimensions"):
        spattn.estimate("sparge", q[0], k, causal=True)
    with pytest.raises(spattn.Error, match="4 dimensions"):
        spattn.attend(q, k, v[0], mask, causal=True)


def test_shapes_that_do_not_fit(inputs):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error, match="k: shape .* does not fit q"):
        spattn.attend(q, k[..., :32], v, mask, causal=True)
    with pytest.raises(spattn.Error, match="v: shape .* does not fit k"):
        spattn.attend(q, k, v[:, :, :64], mask, causal=True)
    with pytest.raises(spattn.Error, match="out: shape"):
        spattn.attend(q, k, v, mask, causal=True, out=np.empty((1, 2, 64, 64), np.float32))


def test_mismatched_heads(rng):
    q, k, v = qkv(rng, 1, 3, 2, 64, 64, 64)
    with pytest.raises(spattn.Error, match="heads"):
        spattn.sparse_attention(q, k, v, method="dense", causal=True)


def test_head_dim_out_of_range(rng):
    q, k, v = qkv(rng, 1, 1, 1, 64, 64, 20)
    with pytest.raises(spattn.Error, match="head_dim"):
        spattn.sparse_attention(q, k, v, method="dense")


def test_non_contiguous_last_dim(inputs):
    q, k, v, mask = inputs
    wide = np.repeat(q, 2, axis=3)[..., ::2]
    assert wide.strides[3] == 8
    with pytest.raises(spattn.Error, match="q: the last dimension must be contiguous"):
        spattn.attend(wide, k, v, mask, causal=True)
    with pytest.raises(spattn.Error, match="out: the last dimension must be contiguous"):
        spattn.attend(q, k, v, mask, causal=True, out=np.empty((1, 2, 128, 128), np.float32)[..., ::2])


def test_not_an_array(inputs):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error, match="k: expected an array with __dlpack__"):
        spattn.attend(q, k.tolist(), v, mask, causal=True)


def test_read_only_out(inputs):
    q, k, v, mask = inputs
    out = np.empty_like(q)
    out.flags.writeable = False
    with pytest.raises(spattn.Error, match="out: cannot be read through DLPack"):
        spattn.attend(q, k, v, mask, causal=True, out=out)


def test_unsupported_device(inputs):
    q, k, v, mask = inputs

    class OpenClArray:
        def __dlpack_device__(self):
            return (4, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

    with pytest.raises(spattn.Error, match="q: DLPack device type 4 is not supported"):
        spattn.attend(OpenClArray(), k, v, mask, causal=True, out=np.empty_like(q))


def test_mask_that_does_not_fit(inputs):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error):
        spattn.attend(q, k, v, mask, causal=False)  # a causal mask
    other = spattn.TileMask.dense(tile_q=64, tile_k=64, batch=1, mask_heads=2, seqlen_q=64, seqlen_kv=64, causal=True)
    with pytest.raises(spattn.Error):
        spattn.attend(q, k, v, other, causal=True)


def test_non_finite_input(inputs):
    q, k, v, mask = inputs
    q = q.copy()
    q[0, 1, 5, 7] = np.nan
    with pytest.raises(spattn.Error):
        spattn.sparse_attention(q, k, v, method="sparge", causal=True)


def test_method_options(inputs):
    q, k, _, _ = inputs
    with pytest.raises(spattn.Error, match="unknown method"):
        spattn.estimate("nope", q, k)
    with pytest.raises(spattn.Error, match="'sparge': unknown option 'tua' .*takes"):
        spattn.estimate("sparge", q, k, tua=0.5)
    with pytest.raises(spattn.Error, match="topk: expected a number"):
        spattn.estimate("sparge", q, k, topk="high")
    with pytest.raises(spattn.Error, match="expected a number, got a bool"):
        spattn.estimate("sale", q, k, bits=True)
    with pytest.raises(spattn.Error, match="sink: expected True or False"):
        spattn.estimate("sparge", q, k, sink=1)
    with pytest.raises(spattn.Error, match="merge"):
        spattn.estimate("fgattn", q, k, merge="sideways")
    with pytest.raises(spattn.Error, match="top_p"):
        spattn.estimate("fgattn", q, k, top_p=1.5)
    with pytest.raises(spattn.Error, match="sale.json"):
        spattn.estimate("sale", q, k, params="/nonexistent/sale.json")


def test_bad_layout_and_backend(inputs):
    q, k, v, mask = inputs
    with pytest.raises(spattn.Error, match="layout"):
        spattn.attend(q, k, v, mask, causal=True, layout="nhd")
    with pytest.raises(spattn.Error, match="backend"):
        spattn.attend(q, k, v, mask, causal=True, backend="tpu")


def test_plan_needs_cuda(inputs):
    q, k, v, _ = inputs
    if spattn.has_cuda:
        pytest.skip("built with CUDA")
    with pytest.raises(spattn.Error, match="without CUDA"):
        spattn.Plan(q, k, v, method="sparge", causal=True)


def test_bad_tile_mask_arguments():
    with pytest.raises(spattn.Error, match="tile"):
        spattn.TileMask.dense(tile_q=3, tile_k=64, batch=1, mask_heads=1, seqlen_q=64, seqlen_kv=64, causal=False)
    with pytest.raises(spattn.Error, match="bitmap"):
        spattn.TileMask.from_bitmap(np.ones((1, 1, 3, 3), np.uint8), tile_q=32, tile_k=32, seqlen_q=64, seqlen_kv=64,
                                    causal=False)
    with pytest.raises(spattn.Error):
        spattn.TileMask.load("/nonexistent/mask.npz")
    mask = spattn.TileMask.dense(tile_q=32, tile_k=32, batch=1, mask_heads=1, seqlen_q=64, seqlen_kv=64, causal=False)
    with pytest.raises(spattn.Error, match="row"):
        mask.row(0, 1, 0)
