"""spattn.testing: check another kernel's attention output against spattn's definitions.

``check_attention(out, q, k, v, mask)`` compares `out` with a float64 attention over the same mask, by the rule
FlashAttention's tests use (api/include/spattn/check.hpp, the one definition; `spattn check` prints the same
report)::

    ref64   = softmax(scale · q kᵀ over the mask) v in float64
    ref_low = spattn's reference executor on the same inputs and mask, in out's dtype (fp32 accumulate)
    passed  ⇔ every |out − ref64| ≤ factor · max|ref_low − ref64| + atol      (factor 2; NaN never passes)

The masks it takes, converted here to what the library checks (a TileMask, or an element mask when no TileMask
says the same thing exactly):

- a :class:`spattn.TileMask` (its own causality);
- a FlexAttention ``BlockMask`` (any object with ``kv_num_blocks``, ``kv_indices``, ``BLOCK_SIZE`` and, when
  present, ``full_kv_num_blocks`` / ``full_kv_indices``), or those lists as a dict or a tuple in that order
  (``block_size=(R, C)``). Every listed block, partial or full, is taken as wholly kept; inside it only the
  ``causal`` rule applies. That is the BlockMask of ``TileMask.to_flex_block_mask``; a BlockMask whose mask_mod
  masks more (a sliding window, documents) is checked with its boolean mask instead (FlexAttention's
  ``create_mask``);
- FlashInfer's block-sparse rows: a dict with ``indptr``, ``indices``, ``R`` and ``C`` (``TileMask.to_flashinfer_bsr``)
  or a tuple ``(indptr, indices, R, C)`` — one mask for all heads (``len(indptr) − 1`` = ⌈Nq/R⌉ rows) or one per
  (batch, head) in that order;
- a boolean array ``[Nq, Nkv]`` or ``[B or 1, H or 1, Nq, Nkv]`` (True: the key is visible, torch SDPA's
  convention; H is Hq or Hkv), or ``None`` for every key.

Blocks whose sizes a TileMask holds (R in [16, 2048], C in [1, 128]) become a TileMask; others, and boolean masks,
are checked as element masks: ref_low is then still the reference executor, run with each query row as its own
16-row tile (16 times the query rows' memory). ``causal=True`` applies spattn's bottom-right causal rule (row i sees
keys j ≤ i + Nkv − Nq) on top of any mask. Arrays: NumPy or torch (any device: copied to the host), layout
``"bhnd"`` or ``"bnhd"``, fixed-length batches.
"""

import numpy as np

from . import _spattn
from ._spattn import Error, TileMask

__all__ = ["CheckReport", "check_attention"]


class CheckReport:
    """The checker's verdict. ``bool(report)`` is ``passed``; ``str(report)`` the text `spattn check` prints.

    passed, bound (factor · reference_error + atol), factor, atol, reference_error (max|ref_low − ref64|),
    max_error (max|out − ref64|, NaN when out has a NaN), head_error / head_reference_error ([B, Hq] NumPy arrays of
    those maxima per (batch, head)), failing_rows, non_finite (NaN or infinite elements of out), first_failure
    ((batch, head, row) or None) with first_failure_detail ({batch, head, row, column, got, want}), mask_kind, text.
    """

    def __init__(self, result):
        self.__dict__.update(result)
        self.first_failure_detail = result["first_failure"]
        detail = self.first_failure_detail
        self.first_failure = None if detail is None else (detail["batch"], detail["head"], detail["row"])

    def __bool__(self):
        return self.passed

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"<spattn.testing.CheckReport passed={self.passed} first_failure={self.first_failure}>"

    def assert_passed(self):
        """Raises AssertionError with the report unless the output passed."""
        if not self.passed:
            raise AssertionError(self.text)


def _host(x):
    """x readable by the library on the host: torch tensors are detached and copied to the CPU."""
    if type(x).__module__.split(".")[0] == "torch":
        return x.detach().cpu()
    return x


def _numpy(x, name):
    if type(x).__module__.split(".")[0] == "torch":
        x = x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except Exception as e:
        raise Error(f"{name}: expected an array, got {type(x).__name__}") from e


def _pair(size, name):
    if isinstance(size, (tuple, list)) and len(size) == 2:
        return int(size[0]), int(size[1])
    if np.ndim(size) == 0:
        return int(size), int(size)
    raise Error(f"{name}: expected a block size or (rows, cols), got {size!r}")


def _heads_of(count, batch, heads_q, heads_kv, what):
    """(batch extent, head extent) of `count` per-(batch, head) masks."""
    for b, h in ((1, 1), (batch, heads_q), (batch, heads_kv), (1, heads_q), (1, heads_kv), (batch, 1)):
        if b * h == count:
            return b, h
    raise Error(f"{what}: {count} masks fit neither 1, B·Hq ({batch * heads_q}), B·Hkv ({batch * heads_kv}), "
                f"Hq ({heads_q}), Hkv ({heads_kv}) nor B ({batch})")


def _blocks_to_bitmap(kv_num_blocks, kv_indices, num_k_tiles, what):
    """The kept-block bitmap [..., Tq, Tk] of block lists: row r keeps kv_indices[r, :kv_num_blocks[r]]."""
    num = _numpy(kv_num_blocks, f"{what} kv_num_blocks").astype(np.int64)
    idx = _numpy(kv_indices, f"{what} kv_indices").astype(np.int64)
    if idx.ndim != num.ndim + 1 or idx.shape[:-1] != num.shape:
        raise Error(f"{what}: kv_indices {idx.shape} does not extend kv_num_blocks {num.shape} by one dimension")
    if num.size and (num.min() < 0 or num.max() > idx.shape[-1]):
        raise Error(f"{what}: kv_num_blocks outside [0, {idx.shape[-1]}]")
    listed = np.arange(idx.shape[-1]) < num[..., None]
    if np.any(listed & ((idx < 0) | (idx >= num_k_tiles))):
        raise Error(f"{what}: a listed key block is outside [0, {num_k_tiles})")
    bitmap = np.zeros(num.shape + (num_k_tiles + 1,), dtype=np.uint8)
    np.put_along_axis(bitmap, np.where(listed, idx, num_k_tiles), 1, axis=-1)
    return bitmap[..., :num_k_tiles]


def _bitmap_mask(bitmap, rows, cols, shape, causal):
    """A TileMask of a [Bm, Hm, Tq, Tk] block bitmap, or (when the block sizes are not a TileMask's) its element
    mask [Bm, Hm, Nq, Nkv]. shape: (B, Hq, Hkv, Nq, Nkv)."""
    batch, heads_q, heads_kv, nq, nkv = shape
    tq, tk = -(-nq // rows), -(-nkv // cols)
    if bitmap.shape[-2:] != (tq, tk):
        raise Error(f"mask: {bitmap.shape[-2]} x {bitmap.shape[-1]} blocks of {rows} x {cols}, the lengths "
                    f"{nq} x {nkv} need {tq} x {tk}")
    if 16 <= rows <= 2048 and 1 <= cols <= 128:
        mb, mh = bitmap.shape[:2]
        if mb not in (1, batch) or mh not in (1, heads_q, heads_kv):
            raise Error(f"mask: {mb} x {mh} (batch, head) masks fit neither 1 or B ({batch}) x 1, Hq ({heads_q}) "
                        f"or Hkv ({heads_kv})")
        if mh == 1:
            mh = heads_q
        bitmap = np.ascontiguousarray(np.broadcast_to(bitmap, (batch, mh, tq, tk)))
        return TileMask.from_bitmap(bitmap, tile_q=rows, tile_k=cols, seqlen_q=nq, seqlen_kv=nkv, causal=causal)
    elements = np.repeat(np.repeat(bitmap, rows, axis=-2)[..., :nq, :], cols, axis=-1)[..., :nkv]
    return np.ascontiguousarray(elements)


def _flex_mask(mask, block_size, shape, causal):
    if isinstance(mask, dict):
        lists, size = mask, block_size
        if size is None:
            raise Error("mask: block lists as a dict need block_size=(rows, cols)")
    else:
        lists = {name: getattr(mask, name, None) for name in
                 ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")}
        size = mask.BLOCK_SIZE if block_size is None else block_size
    rows, cols = _pair(size, "BLOCK_SIZE")
    batch, heads_q, heads_kv, nq, nkv = shape
    tk = -(-nkv // cols)
    bitmap = _blocks_to_bitmap(lists["kv_num_blocks"], lists["kv_indices"], tk, "BlockMask")
    if lists.get("full_kv_num_blocks") is not None:
        bitmap |= _blocks_to_bitmap(lists["full_kv_num_blocks"], lists["full_kv_indices"], tk, "BlockMask full")
    if bitmap.ndim != 4:
        raise Error(f"BlockMask: kv_num_blocks must be [B, H, Tq], got {bitmap.ndim - 1} dimensions")
    tq = -(-nq // rows)
    bitmap = bitmap[:, :, :tq]  # FlexAttention may list blocks past the query length
    return _bitmap_mask(bitmap, rows, cols, shape, causal)


def _bsr_mask(mask, shape, causal):
    indptr = _numpy(mask["indptr"], "indptr").astype(np.int64)
    indices = _numpy(mask["indices"], "indices").astype(np.int64)
    rows, cols = int(mask["R"]), int(mask["C"])
    batch, heads_q, heads_kv, nq, nkv = shape
    tq, tk = -(-nq // rows), -(-nkv // cols)
    if indptr.ndim != 1 or len(indptr) < 2 or (len(indptr) - 1) % tq:
        raise Error(f"indptr: {len(indptr) - 1} block rows are not a multiple of the {tq} block rows of Nq {nq}")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] > len(indices):
        raise Error("indptr: must start at 0, not decrease and end within indices")
    if np.any((indices[:indptr[-1]] < 0) | (indices[:indptr[-1]] >= tk)):
        raise Error(f"indices: a key block outside [0, {tk})")
    count = np.diff(indptr)
    bitmap = np.zeros((len(count), tk), dtype=np.uint8)
    bitmap[np.repeat(np.arange(len(count)), count), indices[:indptr[-1]]] = 1
    mb, mh = _heads_of((len(indptr) - 1) // tq, batch, heads_q, heads_kv, "indptr")
    return _bitmap_mask(bitmap.reshape(mb, mh, tq, tk), rows, cols, shape, causal)


def _element_mask(mask, shape):
    batch, heads_q, heads_kv, nq, nkv = shape
    allowed = _numpy(mask, "mask")
    if allowed.ndim == 2:
        allowed = allowed[None, None]
    if allowed.ndim != 4 or allowed.shape[2:] != (nq, nkv):
        raise Error(f"mask: a boolean mask must be [Nq, Nkv] or [B or 1, H or 1, Nq, Nkv] = [.., .., {nq}, {nkv}], "
                    f"got shape {allowed.shape}")
    return np.ascontiguousarray(allowed != 0, dtype=np.uint8)


def check_attention(out, q, k, v, mask=None, *, causal=None, scale=None, factor=2.0, atol=None, layout="bhnd",
                    block_size=None):
    """Checks `out` [B, Hq, Nq, Dv], another kernel's attention of q [B, Hq, Nq, D], k, v [B, Hkv, Nkv, D(v)] over
    `mask` (see the module's doc for the masks and the rule), and returns a :class:`CheckReport`.

    causal: spattn's bottom-right causal rule on top of the mask; None: a TileMask's own, else False. scale: the
    softmax scale (default 1/sqrt(D)). factor, atol: the rule's (atol default: 1e-5 for fp32 inputs and output, else
    1e-4). block_size: (rows, cols) of BlockMask lists given as a dict (a BlockMask object carries BLOCK_SIZE).
    """
    q, k, v, out = (_host(x) for x in (q, k, v, out))
    if layout not in ("bhnd", "bnhd"):
        raise Error(f"layout: expected 'bhnd' or 'bnhd', got {layout!r}")
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
        if len(getattr(x, "shape", ())) != 4:
            raise Error(f"{name}: expected 4 dimensions, got shape {tuple(getattr(x, 'shape', ()))}")
    n_axis, h_axis = (2, 1) if layout == "bhnd" else (1, 2)
    shape = (q.shape[0], q.shape[h_axis], k.shape[h_axis], q.shape[n_axis], k.shape[n_axis])
    if isinstance(mask, TileMask):
        if causal is None:
            causal = mask.causal
        elif causal != mask.causal:
            raise Error(f"causal: {causal} differs from the TileMask's causal={mask.causal}")
    causal = bool(causal)
    if mask is None:
        mask = TileMask.dense(tile_q=128, tile_k=128, batch=shape[0], mask_heads=shape[2], seqlen_q=shape[3],
                              seqlen_kv=shape[4], causal=causal)
    elif isinstance(mask, TileMask):
        pass
    elif hasattr(mask, "kv_num_blocks") or (isinstance(mask, dict) and "kv_num_blocks" in mask):
        mask = _flex_mask(mask, block_size, shape, causal)
    elif isinstance(mask, dict) and "indptr" in mask:
        mask = _bsr_mask(mask, shape, causal)
    elif isinstance(mask, tuple) and len(mask) == 4 and all(np.ndim(x) == 0 for x in mask[2:]):
        mask = _bsr_mask(dict(zip(("indptr", "indices", "R", "C"), mask)), shape, causal)
    elif isinstance(mask, tuple) and len(mask) in (2, 4):
        names = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")
        mask = _flex_mask(dict(zip(names, mask)), block_size, shape, causal)
    else:
        mask = _element_mask(mask, shape)
    call = _spattn.Call()
    call.layout = layout
    tile_mask, element = (mask, None) if isinstance(mask, TileMask) else (None, mask)
    result = _spattn.check_attention(q, k, v, out, tile_mask, element, causal, scale, float(factor),
                                     None if atol is None else float(atol), call)
    return CheckReport(result)
