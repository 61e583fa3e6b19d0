"""python3 bench/quality/pooled_miss_study.py [data/captures.npz] [lm|dit]   (PYTHONPATH: a build's python folder)

Issue 41: what each method's mask drops, row by row, on one committed capture of a trained model (CPU reference).
Per method and setting: the density, the share of rows that lose more than 10 % / 30 % of their softmax mass (exact,
float64), the largest loss, the share per query head, and where the lost mass lies (the first 128 keys; within 256
keys of the row). Then each query head's SpargeAttn block similarity (|mean of the rows' unit vectors|², 128-row
blocks; percentiles 0/10/50/90/100), the quantity harness.low_similarity_tiles falls back on, and for the LM the
rows of its worst head that AnchorAttention θ 20 drops > 30 % of: their heaviest key and its offset."""
import os
import sys

import numpy as np
import torch

import spattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import block_similarity  # noqa: E402


def bf16(a):
    return torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16).float().numpy()[None]


def probabilities(q, k, causal, scale):
    heads, n, group = q.shape[1], q.shape[2], q.shape[1] // k.shape[1]
    out = []
    for h in range(heads):
        s = (q[0, h].astype(np.float64) @ k[0, h // group].astype(np.float64).T) * scale
        if causal:
            s[np.triu_indices(n, 1)] = -np.inf
        p = np.exp(s - s.max(1, keepdims=True))
        out.append(p / p.sum(1, keepdims=True))
    return np.stack(out)


def kept_elements(mask, heads, n):
    """[H, N, N] bool: the mask's tiles at element level (a mask head per K/V head covers its query heads)."""
    bits = np.asarray(mask.to_bitmap()).astype(bool)[0]
    full = np.repeat(np.repeat(bits, mask.tile_q, 1), mask.tile_k, 2)[:, :n, :n]
    return np.repeat(full, heads // full.shape[0], 0)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "data/captures.npz"
    prefix = sys.argv[2] if len(sys.argv) > 2 else "lm"
    d = np.load(path)
    q, k = bf16(d[prefix + "_q"]), bf16(d[prefix + "_k"])
    causal, scale = bool(d[prefix + "_meta"][0]), float(d[prefix + "_meta"][1])
    heads, n = q.shape[1], q.shape[2]
    p = probabilities(q, k, causal, scale)
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    near = (offset >= 0) & (offset < 256)
    settings = [("anchor", {"theta": 12.0}), ("anchor", {"theta": 20.0}), ("fgattn", {"top_p": 0.9}),
                ("fgattn", {"top_p": 0.99}), ("fgattn", {"top_p": 0.999}), ("sale", {"tau": 0.004}),
                ("sale", {"tau": 0.2}), ("sparge", {"topk": 0.9}), ("sparge", {"topk": 0.5})]
    for method, config in settings:
        mask = spattn.estimate(method, q, k, causal=causal, scale=scale, **config)
        kept = kept_elements(mask, heads, n)
        drop = 1 - (p * kept).sum(2)
        lost = p * ~kept
        total = max(lost.sum(), 1e-300)
        print(f"{prefix} {method} {config}: density {mask.density:.3f}, rows losing >10 % {np.mean(drop > 0.1):.4f} "
              f">30 % {np.mean(drop > 0.3):.4f}, largest {drop.max():.3f}, per head >10 % "
              f"{[round(float(np.mean(drop[h] > 0.1)), 3) for h in range(heads)]}; lost mass in the first 128 keys "
              f"{lost[:, :, :128].sum() / total:.2f}, within 256 of the row {(lost * near).sum() / total:.2f}")
    sims = block_similarity(torch.from_numpy(q))
    for h in range(heads):
        print(f"{prefix} head {h}: block similarity percentiles 0/10/50/90/100 "
              f"{np.round(np.percentile(sims[0, h].numpy(), [0, 10, 50, 90, 100]), 2).tolist()}")
    if prefix == "lm":
        kept = kept_elements(spattn.estimate("anchor", q, k, causal=causal, scale=scale, theta=20.0), heads, n)
        drop = 1 - (p * kept).sum(2)
        h = int(np.argmax((drop > 0.3).sum(1)))
        rows = np.where(drop[h] > 0.3)[0][:20]
        heavy = p[h][rows].argmax(1)
        print(f"lm anchor theta 20, head {h}: rows {rows.tolist()}\n  heaviest key {heavy.tolist()}\n"
              f"  offset {(rows - heavy).tolist()}\n  its weight {np.round(p[h][rows, heavy], 3).tolist()}")


if __name__ == "__main__":
    main()
