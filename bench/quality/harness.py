"""The quality harness: a trained model's own loss with a sparse attention in every attention layer, against dense.

    with Swap(spattn_attention("sparge", topk=0.5)) as record:
        loss = lm_loss_on(model, windows)
    record.summary()  -> density and rel L1 per layer

`Swap` replaces torch.nn.functional.scaled_dot_product_attention (which transformers' "sdpa" attention and
models.py call) for the block. Each attention given to it takes (q, k, v, causal, scale) [B, H, N, D] and returns
(out, mask or None); the swap records, per call, the mask's density and the rel L1 of the output against dense
attention on the same inputs (the layer's own error, given the inputs that the sparse layers before it produced).
Calls are numbered in the order they come, which in a forward pass is the layer order, so call i is layer
i mod layers.

Everything that decides — the masks, the oracle, the attention — is spattn's public Python API; this file only
feeds it and counts.
"""
import contextlib
import math

import torch

import spattn

from models import lm_loss, denoising_loss, math_sdpa


class Record:
    """What the attention calls of one evaluation did: per call (density, rel L1 against dense)."""

    def __init__(self, layers):
        self.layers, self.calls = layers, []

    def summary(self):
        by_layer = [[c for i, c in enumerate(self.calls) if i % self.layers == layer] for layer in range(self.layers)]
        mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
        density = [mean([c[0] for c in calls if c[0] is not None]) for calls in by_layer]
        err = [mean([c[1] for c in calls if c[1] is not None]) for calls in by_layer]
        return {"density": mean([d for d in density if not math.isnan(d)]) if self.calls else float("nan"),
                "layer_density": density, "layer_rel_l1": err, "calls": len(self.calls)}


def _dense(original):
    return original if original is not None else math_sdpa


@contextlib.contextmanager
def Swap(attention, layers, compare=True):
    """Within the block, every scaled_dot_product_attention call runs `attention`; yields the Record. compare: True
    (every call's rel L1 against dense), False (none), or a number N (the first N calls: the host-side metric costs
    more than the attention, so the quality runs measure it on the first forward's layers only)."""
    functional = torch.nn.functional
    original = getattr(functional, "scaled_dot_product_attention", None)
    dense = _dense(original)
    record = Record(layers)

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
             **kwargs):
        if attn_mask is not None and attn_mask.dtype == torch.bool and not is_causal:
            n, m = query.shape[2], key.shape[2]
            causal = torch.ones(n, m, dtype=torch.bool, device=attn_mask.device).tril(m - n)
            if attn_mask.shape[-2:] == (n, m) and bool((attn_mask == causal).all()):
                attn_mask, is_causal = None, True  # a materialised causal mask (some transformers paths)
        if attn_mask is not None or dropout_p != 0.0:
            raise spattn.Error("quality harness: the model passed an attn_mask or dropout; run it without padding "
                               "and in eval mode")
        if query.shape[1] != key.shape[1] and not enable_gqa:
            raise spattn.Error("quality harness: GQA without enable_gqa")
        wanted = compare if isinstance(compare, bool) else len(record.calls) < compare
        ref = dense(query, key, value, is_causal=is_causal, scale=scale,
                    enable_gqa=query.shape[1] != key.shape[1]) if wanted else None
        out, mask = attention(query, key, value, is_causal, scale)
        error = spattn.output_error(out, ref)["rel_l1"] if wanted else None  # spattn/metrics.hpp
        record.calls.append((None if mask is None else mask.density, error))
        return out.to(query.dtype)

    functional.scaled_dot_product_attention = sdpa
    try:
        yield record
    finally:
        if original is None:
            del functional.scaled_dot_product_attention
        else:
            functional.scaled_dot_product_attention = original


def dense_attention():
    """The model's own dense attention (torch's SDPA, or math_sdpa where torch has none): the baseline."""
    dense = _dense(getattr(torch.nn.functional, "scaled_dot_product_attention", None))

    def attention(q, k, v, causal, scale):
        return dense(q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1]), None
    return attention


def spattn_attention(method, fallback_sim=None, **config):
    """spattn.sparse_attention(method, **config): the method's estimate, then attention over its mask. With
    fallback_sim (an experiment, not a library option yet): the estimate, then every query tile whose rows are not
    self-similar kept dense (low_similarity_tiles), then spattn.attend."""
    def attention(q, k, v, causal, scale):
        if fallback_sim is not None:
            mask = spattn.estimate(method, q, k, causal=causal, scale=scale, **config)
            bits = mask.to_bitmap().copy()
            bits[low_similarity_tiles(q, mask, fallback_sim)] = 1
            mask = spattn.TileMask.from_bitmap(bits, tile_q=mask.tile_q, tile_k=mask.tile_k, seqlen_q=mask.seqlen_q,
                                               seqlen_kv=mask.seqlen_kv, causal=causal)
            return spattn.attend(q, k, v, mask, causal=causal, scale=scale), mask
        out, mask, _ = spattn.sparse_attention(q, k, v, method=method, causal=causal, scale=scale, return_mask=True,
                                               **config)
        return out, mask
    return attention


def block_similarity(q, block=128):
    """[B, H, ⌈N/block⌉]: each block of `block` rows' similarity, SpargeAttn's (sparge.hpp self_similarity: |mean of
    the rows' unit vectors|²; the last block's mean over its own rows)."""
    b, hq, n, d = q.shape
    unit = torch.nn.functional.normalize(q.float(), dim=-1)
    blocks = (n + block - 1) // block
    unit = torch.nn.functional.pad(unit, (0, 0, 0, blocks * block - n)).view(b, hq, blocks, block, d)
    rows = torch.full((blocks,), float(block), device=q.device)
    rows[-1] = n - (blocks - 1) * block
    return ((unit.sum(3) / rows[:, None]) ** 2).sum(-1).cpu()


def low_similarity_tiles(q, mask, threshold, block=128):
    """[B, Hm, Tq] bool: the query tiles of `mask` whose rows are not self-similar: a tile's similarity is the mean of
    block_similarity over the blocks it overlaps; a mask head (Hm < Hq: one per K/V head) is low when any of its query
    heads is."""
    b, hq = q.shape[:2]
    sim = block_similarity(q, block)  # [B, Hq, blocks]
    blocks = sim.shape[-1]
    tq, tiles = mask.tile_q, mask.num_q_tiles
    tile_sim = torch.stack([sim[:, :, t * tq // block:min(blocks, ((t + 1) * tq - 1) // block + 1)].mean(-1)
                            for t in range(tiles)], -1)  # [B, Hq, Tq]
    low = tile_sim < threshold
    return low.view(b, mask.mask_heads, hq // mask.mask_heads, tiles).any(2).numpy()


def calibrated_attention(method, params):
    """spattn_attention with layer i's calibrated parameters: params[i] is a calibrate() JSON file (spattn.calibrate
    on that layer's samples). Calls come in layer order, so call c is layer c mod len(params)."""
    calls = [0]

    def attention(q, k, v, causal, scale):
        path = params[calls[0] % len(params)]
        calls[0] += 1
        out, mask, _ = spattn.sparse_attention(q, k, v, method=method, causal=causal, scale=scale, return_mask=True,
                                               params=path)
        return out, mask
    return attention


def oracle_attention(tile_q, tile_k, per_kv_head=False, **budget):
    """The oracle mask (exact tile mass, spattn.oracle_mask, on the CPU reference) at tile_q × tile_k and one budget
    (density=ρ, mass=τ or threshold=ε), then spattn.attend over it: the limit of any estimator at that tile shape."""
    def attention(q, k, v, causal, scale):
        mask = spattn.oracle_mask(q.cpu(), k.cpu(), tile_q=tile_q, tile_k=tile_k, per_kv_head=per_kv_head,
                                  causal=causal, scale=scale, **budget)
        return spattn.attend(q, k, v, mask, causal=causal, scale=scale), mask
    return attention


def mask_attention(make_mask):
    """spattn.attend over make_mask(q, k, causal): a user's fixed mask (the tests' planted masks)."""
    def attention(q, k, v, causal, scale):
        mask = make_mask(q, k, causal)
        return spattn.attend(q, k, v, mask, causal=causal, scale=scale), mask
    return attention


@torch.no_grad()
def lm_loss_on(model, windows):
    """Mean next-token loss (nats) of `model` over windows [S, N + 1] of token ids, one sequence a forward. The model
    is called as model(tokens) -> logits (models.TinyLM) or model(input_ids=tokens).logits (transformers)."""
    total, count = 0.0, 0
    for w in windows:
        tokens = w.unsqueeze(0)
        out = model(input_ids=tokens[:, :-1]) if hasattr(model, "config") else model(tokens[:, :-1])
        logits = out.logits if hasattr(out, "logits") else out
        n = tokens.shape[1] - 1
        total += lm_loss(logits, tokens[:, 1:]).item() * n
        count += n
    return total / count


@torch.no_grad()
def dit_loss_on(model, videos, levels, seed):
    """Mean denoising loss of the DiT over clips [S, T, 3, H, W] at each noise level in `levels`, with noise drawn
    from `seed` (the same noise for every attention compared)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    total, count = 0.0, 0
    for video in videos:
        video = video.unsqueeze(0)
        for level in levels:
            noise = torch.randn(video.shape, generator=g).to(video.device)
            t = torch.full((1,), level, device=video.device)
            total += denoising_loss(model, video, t, noise).item()
            count += 1
    return total / count
