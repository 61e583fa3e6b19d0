"""TileMask's exports for PyTorch FlexAttention and FlashInfer, on top of the library's own conversions
(TileMask::to_flex_block_mask, TileMask::to_bsr in core/src/mask_export.cpp)."""
import inspect

from ._spattn import Error


def _torch():
    try:
        import torch
    except ImportError as e:
        raise Error("to_flex_block_mask: needs PyTorch") from e
    return torch


def flex_block_mask_tensors(self, heads_q=None, device="cpu"):
    """The FlexAttention BlockMask lists as int32 torch tensors: kv_num_blocks / full_kv_num_blocks [B, H, Tq],
    kv_indices / full_kv_indices [B, H, Tq, Tk]. "full" tiles are visible to every row (no mask_mod needed),
    "partial" ones need the causal mask_mod. H is the mask's heads, or heads_q when given (a mask per KV head is
    repeated for the query heads that read it, as the executor does)."""
    torch = _torch()
    lists = self.flex_block_mask_lists()
    tensors = {name: torch.from_numpy(array).to(device) for name, array in lists.items()}
    if heads_q is not None and heads_q != self.mask_heads:
        if heads_q % self.mask_heads != 0:
            raise Error(f"heads_q: {heads_q} is not a multiple of the mask's {self.mask_heads} heads")
        group = heads_q // self.mask_heads
        tensors = {name: t.repeat_interleave(group, dim=1) for name, t in tensors.items()}
    return tensors


def flex_mask_mod(self, heads_q=None, device="cpu"):
    """The FlexAttention mask_mod(b, h, q_idx, kv_idx) of the mask (see to_flex_block_mask)."""
    torch = _torch()
    kept = torch.from_numpy(self.to_bitmap()).to(device=device, dtype=torch.bool)
    if heads_q is not None and heads_q != self.mask_heads:
        if heads_q % self.mask_heads != 0:
            raise Error(f"heads_q: {heads_q} is not a multiple of the mask's {self.mask_heads} heads")
        kept = kept.repeat_interleave(heads_q // self.mask_heads, dim=1)
    tile_q, tile_k, causal, offset = self.tile_q, self.tile_k, self.causal, self.seqlen_kv - self.seqlen_q

    def mask_mod(b, h, q_idx, kv_idx):
        visible = kept[b, h, q_idx // tile_q, kv_idx // tile_k]
        return visible & (kv_idx <= q_idx + offset) if causal else visible

    return mask_mod


def to_flex_block_mask(self, heads_q=None, device="cpu"):
    """A torch.nn.attention.flex_attention.BlockMask with the mask's tiles as BLOCK_SIZE (tile_q, tile_k).

    FlexAttention defines a mask by its mask_mod and uses the block lists to skip work, so the mask_mod here is the
    whole mask: key j is visible to query row i when its tile is kept for i's tile (the bitmap, on `device`) and, if
    causal, j <= i + Nkv - Nq (spattn's bottom-right rule). Full tiles (every pair visible) skip it. H is the mask's
    heads, or heads_q when given. Variable-length masks are not exported."""
    torch = _torch()
    try:
        from torch.nn.attention.flex_attention import BlockMask
    except ImportError as e:
        raise Error(f"to_flex_block_mask: this PyTorch ({torch.__version__}) has no "
                    "torch.nn.attention.flex_attention (PyTorch >= 2.5); flex_block_mask_tensors() gives the "
                    "lists as tensors") from e
    if self.seqlens_q or self.seqlens_kv:
        raise Error("to_flex_block_mask: variable-length masks are not exported")
    t = flex_block_mask_tensors(self, heads_q, device)
    kwargs = dict(full_kv_num_blocks=t["full_kv_num_blocks"], full_kv_indices=t["full_kv_indices"],
                  BLOCK_SIZE=(self.tile_q, self.tile_k), mask_mod=flex_mask_mod(self, heads_q, device))
    if "seq_lengths" in inspect.signature(BlockMask.from_kv_blocks).parameters:
        kwargs["seq_lengths"] = (self.seqlen_q, self.seqlen_kv)
    return BlockMask.from_kv_blocks(t["kv_num_blocks"], t["kv_indices"], **kwargs)


def to_flashinfer_bsr(self):
    """FlashInfer's block-sparse row format (BlockSparseAttentionWrapper.plan): int32 NumPy indptr and indices over
    all B·Hm·Tq mask rows in (b, h, q tile) order, with block sizes R = tile_q and C = tile_k. One (b, h) is rows
    [(b·Hm + h)·Tq, (b·Hm + h + 1)·Tq): slice indptr there (and subtract its first entry) for a per-head mask."""
    bsr = self.bsr()
    return {"indptr": bsr["indptr"], "indices": bsr["indices"], "R": self.tile_q, "C": self.tile_k,
            "rows": self.batch * self.mask_heads * self.num_q_tiles, "num_k_tiles": self.num_k_tiles}


def _install(cls):
    cls.flex_block_mask_tensors = flex_block_mask_tensors
    cls.flex_mask_mod = flex_mask_mod
    cls.to_flex_block_mask = to_flex_block_mask
    cls.to_flashinfer_bsr = to_flashinfer_bsr
