"""python3 bench/quality/topcdf_fixed_point_study.py [data/captures.npz]   (NumPy only; CPU, about a minute)

Issue 42, FG-Attn's select step: TopCdf sorted each row because its fp32 prefix sums depended on the order. With
the weights as exact fixed-point integers (core/include/spattn/topcdf.hpp since 2026-11-28: W = ⌊w · 2^(40−e)⌋, e the
exponent of the row's largest weight — 2^40 for FG-Attn's w = 2^(x − max) ≤ 1) every summation order gives the same
sums, and the cut — the smallest prefix, in (weight desc, index asc) order, whose sum reaches τ of the row's — is
found by a radix select without a sort (backends/cuda: detail::top_cdf_select). This counts how many decisions the
fixed-point rule changes against the earlier one (fp32 sequential prefix sums, limit τ·Z in fp32, crossing
included) on FG-Attn's tile logits of the committed captures of the trained models and of random logit rows, at
top-p 0.9 / 0.99 / 0.999.

The logits here are FG-Attn's (mean-pooled 32 × 32 tiles, scaled, base 2) computed by NumPy in fp32, not the
reference's bits; both rules read the same logits, so the count is the rules' difference alone. Limit of the
fixed-point rule: 2^40 · τ is compared in exact integers (τ as its fp32 value, times 2^24, an integer)."""
import sys

import numpy as np

K = 40  # fraction bits of a weight; a row of up to 2^23 entries sums below 2^63


def old_keep(w, tau):
    """The earlier top_cdf_count with the crossing included (FG-Attn, BFLA): the number kept."""
    order = np.lexsort((np.arange(len(w)), -w))
    s = w[order]
    c = np.float32(0)
    total = np.float32(0)
    for v in s:
        total = np.float32(total + v)
    limit = np.float32(np.float32(tau) * total)
    for t, v in enumerate(s):
        c = np.float32(c + v)
        if c >= limit:
            return order, t + 1
    return order, len(s)


def new_keep(w, tau):
    """The fixed-point rule (topcdf.hpp): W = ⌊w·2^(K+1−e')⌋ with max = f·2^e', f in [0.5, 1) (exact integers), the
    smallest prefix with 2^24·ΣW_prefix ≥ T·ΣW, where T = τ·2^24 (exact for an fp32 τ in [2^-24, 1))."""
    order = np.lexsort((np.arange(len(w)), -w))
    scale = K + 1 - int(np.frexp(float(w.max()))[1])
    weights = [int(np.floor(np.ldexp(float(v), scale))) for v in w[order]]
    total = sum(weights)
    t_fixed = int(np.float32(tau) * (1 << 24))  # exact: fp32 τ has 24 significant bits
    c = 0
    for t, v in enumerate(weights):
        c += v
        if (c << 24) >= t_fixed * total:
            return order, t + 1
    return order, len(weights)


def pooled_logits(q, k, scale, tile=32, causal=False):
    """FG-Attn's tile logits in base 2 (fp32): mean-pooled queries and keys, q̄·k̄·scale·log2 e; a causal query tile
    sees the key tiles it reaches."""
    n = q.shape[0]
    tiles = (n + tile - 1) // tile
    qb = np.stack([q[i * tile:(i + 1) * tile].mean(0) for i in range(tiles)]).astype(np.float32)
    kb = np.stack([k[i * tile:(i + 1) * tile].mean(0) for i in range(tiles)]).astype(np.float32)
    x = (qb @ kb.T).astype(np.float32) * np.float32(scale * 1.4426950408889634)
    rows = []
    for i in range(tiles):
        reach = i + 1 if causal else tiles
        rows.append(x[i, :reach])
    return rows


def compare(name, rows, taus=(0.9, 0.99, 0.999)):
    for tau in taus:
        rows_changed = decisions = changed = more = 0
        gap = 0.0
        for x in rows:
            w = np.exp2((x - x.max()).astype(np.float32)).astype(np.float32)
            o1, k1 = old_keep(w, tau)
            o2, k2 = new_keep(w, tau)
            decisions += len(w)
            if k1 != k2:
                rows_changed += 1
                changed += abs(k1 - k2)
                more += k2 > k1
                # how near the tie: the exact (fp64) mass of the shorter prefix against τ of the row's, per unit mass
                exact = np.cumsum(w[o1].astype(np.float64))
                gap = max(gap, abs(exact[min(k1, k2) - 1] - tau * exact[-1]) / exact[-1])
        print(f"{name}, top-p {tau}: {len(rows)} rows, {decisions} decisions, {changed} changed in {rows_changed} rows"
              + (f" ({more} keep one more tile; the exact prefix mass within {gap:.1e} of τ)" if rows_changed else ""))


def bf16(a):
    bits = a.astype(np.uint32) << 16
    return bits.view(np.float32)


def main():
    d = np.load(sys.argv[1] if len(sys.argv) > 1 else "data/captures.npz")
    for prefix in ("lm", "dit"):
        q, k, meta = bf16(d[prefix + "_q"]), bf16(d[prefix + "_k"]), d[prefix + "_meta"]
        causal, scale = bool(meta[0]), float(meta[1])
        rows = []
        for h in range(q.shape[0]):
            rows += pooled_logits(q[h], k[h * k.shape[0] // q.shape[0]], scale, causal=causal)
        compare(f"{prefix} capture (32×32 tiles)", rows)
    rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 1234)
    compare("random logits (N(0, 4²), 1024 tiles a row)",
            [rng.normal(0, 4, 1024).astype(np.float32) for _ in range(300)])
    compare("random near-uniform logits (N(0, 0.01²))",
            [rng.normal(0, 0.01, 1024).astype(np.float32) for _ in range(300)])


if __name__ == "__main__":
    main()
