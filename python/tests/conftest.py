"""Shared fixtures: fresh random inputs per run (the seed is printed, and SPATTN_TEST_SEED replays it) and an
independent float64 NumPy reference of masked attention, exact_fp64 (written from DESIGN.md section 3, not from the
library)."""
import os
import random

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("SPATTN_TEST_SEED", random.SystemRandom().randrange(2**32)))
    print(f"\n{request.node.name}: seed {seed} (replay with SPATTN_TEST_SEED={seed})")
    return np.random.default_rng(seed)


def qkv(rng, batch=1, heads_q=2, heads_kv=1, seqlen_q=192, seqlen_kv=192, dim=64, dim_v=None, dtype=np.float32):
    shape = lambda h, n, d: (batch, h, n, d)  # noqa: E731
    q = rng.standard_normal(shape(heads_q, seqlen_q, dim)).astype(dtype)
    k = rng.standard_normal(shape(heads_kv, seqlen_kv, dim)).astype(dtype)
    v = rng.standard_normal(shape(heads_kv, seqlen_kv, dim_v or dim)).astype(dtype)
    return q, k, v


def exact_fp64(q, k, v, kept, tile_q, tile_k, causal, scale=None):
    """Masked attention in float64: query row i (of query tile i // tile_q) attends to key j when key tile
    j // tile_k is kept for its (batch, mask head, query tile), and, if causal, j <= i + Nkv - Nq; a row with no
    key gives zeros. kept: bool [B, Hm, Tq, Tk]; query head h reads mask head h // (Hq // Hm), KV head
    h // (Hq // Hkv)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    batch, heads_q, nq, dim = q.shape
    heads_kv, nkv = k.shape[1], k.shape[2]
    scale = 1.0 / np.sqrt(dim) if scale is None else scale
    rows, keys = np.arange(nq)[:, None], np.arange(nkv)[None, :]
    out = np.zeros((batch, heads_q, nq, v.shape[3]))
    for b in range(batch):
        for h in range(heads_q):
            kh, mh = h // (heads_q // heads_kv), h // (heads_q // kept.shape[1])
            visible = kept[b, mh][rows // tile_q, keys // tile_k]
            if causal:
                visible = visible & (keys <= rows + nkv - nq)
            s = np.where(visible, scale * q[b, h] @ k[b, kh].T, -np.inf)
            m = s.max(axis=1, keepdims=True)
            p = np.where(visible, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
            l = p.sum(axis=1, keepdims=True)
            out[b, h] = np.where(l > 0, (p @ v[b, kh]) / np.where(l > 0, l, 1), 0.0)
    return out
