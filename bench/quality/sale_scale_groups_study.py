"""python3 bench/quality/sale_scale_groups_study.py [lm|dit]   (data/captures.npz; CPU, about a minute)

What would coarser quantization groups cost SALE? Its candidate kernel spends most of its instructions per (warp,
32-key block) on work that exists because every thread's unit sq·sk changes from block to block: SALE's scale groups
are the mma's per-thread groups (Q: rows 16a + r and 16a + r + 8; K: the 8 keys of one 32-key block with the same
(n mod 8) div 2), so the reciprocal, the folded biases and the float decisions are per block (issue 42,
bench/results/gpu-pipeline.md). With one Q scale per 64-row block and one K scale per (128-key segment, (n mod 8) div 2)
— SageAttention-like block scales — the unit would change once a segment and be the same for every row of the CTA.

This study prices that definition on a trained model's capture before any kernel is written: SALE's selection
(spec §3: 64-row query blocks, 32-key candidate blocks in 4-block segments after the sink block, the exact sink-local
threshold T_i = m̃_i + ln(τ·l̃_i)/scale, a block kept when some est_ij ≥ T_i) from quantized estimates
est_ij = sq_i·sk_j·(acc_ij + RNE(qmk_j / (sq_i·sk_j))) (the core's definition, in float64) under four groupings —
int4 and int8 codes, the per-thread groups and the block groups — against the same rule on exact scores. Printed per
τ: density, candidate decisions that differ from the exact-score rule, and the attention mass the mask drops (exact
softmax over each row's visible keys: the mean and the largest share of a row's mass in dropped blocks).
Measured (2026-11-29): with int8 codes the block groups decide as the per-thread groups do — 35–63 of 11160 LM
candidate decisions (2–13 of 3584 DiT) unlike the exact-score rule, against 17–58 (3–8), the same density and dropped
mass; int4 codes differ in 314–1126 (25–185) whichever the groups, keeping 4–10 % more blocks than the exact rule
(bench/results/gpu-pipeline.md, "SALE's scale groups priced on the trained captures")."""
import sys

import numpy as np


def bf16(a):
    return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


BQ, BK, SEG, NL = 64, 32, 4, 4  # query block, key block, blocks a segment, local blocks (local_window 128)


def group_ids(n, kind, side):
    """Scale-group id of each of n rows (side "q") or keys (side "k")."""
    r = np.arange(n)
    if kind == "thread":  # the core's q_group / k_group (spattn/methods/sale.hpp)
        return (r // 16) * 16 + r % 8 if side == "q" else (r // 32) * 32 + (r % 8) // 2
    if side == "q":  # one scale per 64-row query block
        return r // BQ
    seg = np.where(r < BK, -1, (r - BK) // (SEG * BK))  # block 0 (the sink) apart, then 128-key segments
    return (seg + 1) * 4 + (r % 8) // 2


def quantize(x, ids, rng):
    """Symmetric codes in [−rng, rng], scale amax/rng per group (zero groups: codes 0, scale 0)."""
    scale = np.zeros(len(x))
    for g in np.unique(ids):
        sel = ids == g
        amax = np.abs(x[sel]).max()
        scale[sel] = amax / rng if amax > 0 else 0.0
    inv = np.where(scale > 0, 1.0 / np.where(scale > 0, scale, 1.0), 0.0)
    codes = np.clip(np.rint(x * inv[:, None]), -rng, rng)
    return codes, scale


def estimates(qp, kp, qmk, bits, kind):
    rng = 7 if bits == 4 else 127
    cq, sq = quantize(qp, group_ids(len(qp), kind, "q"), rng)
    ck, sk = quantize(kp, group_ids(len(kp), kind, "k"), rng)
    acc = cq @ ck.T  # exact: integers below 2^53
    unit = sq[:, None] * sk[None, :]
    bias = np.where(unit > 0, np.rint(qmk[None, :] / np.where(unit > 0, unit, 1.0)), 0.0)
    return np.where(unit > 0, unit * (acc + bias), qmk[None, :])


def study(prefix):
    d = np.load("data/captures.npz")
    q, k = bf16(d[prefix + "_q"]), bf16(d[prefix + "_k"])
    causal, scale, _ = d[prefix + "_meta"]
    heads, n, dim = q.shape
    ratio = heads // k.shape[0]
    nb = (n + BK - 1) // BK
    variants = [("int4, per-thread groups (the default)", 4, "thread"), ("int8, per-thread groups", 8, "thread"),
                ("int8, block groups", 8, "block"), ("int4, block groups", 4, "block")]
    print(f"capture {prefix}: {heads} query heads, N {n}, D {dim}, causal {bool(causal)}")
    per_head = []
    for h in range(heads):
        kh = k[h // ratio]
        mu_q, mu_k = q[h].mean(0), kh.mean(0)
        qp, kp = q[h] - mu_q, kh - mu_k
        qmk = kp @ mu_q
        exact = q[h] @ kp.T  # q·k' = q'·k' + qmk: the estimate's target
        ests = {name: estimates(qp, kp, qmk, bits, kind) for name, bits, kind in variants}
        logits = scale * (q[h] @ kh.T)
        per_head.append((exact, ests, logits))
    for tau in (0.004, 0.05, 0.2):
        rows_out = {name: [0, 0, 0, 0, 0.0, 0.0] for name in ["exact scores"] + [v[0] for v in variants]}
        for exact, ests, logits in per_head:
            for t in range((n + BQ - 1) // BQ):
                r0, r1 = t * BQ, min(n, (t + 1) * BQ)
                n_max = (r1 - 1) // BK + 1 if causal else nb
                segs = max(0, (n_max - 1 - NL) // SEG)
                if segs == 0:
                    continue
                cand_end = 1 + SEG * segs
                rows = np.arange(r0, r1)
                vis = rows + 1 if causal else np.full(len(rows), n)
                cols = np.arange(n)
                seen = cols[None, :] < vis[:, None]
                region = seen & ((cols[None, :] < BK) | (cols[None, :] >= cand_end * BK))
                s_region = np.where(region, exact[r0:r1], -np.inf)
                m = s_region.max(1)
                l = np.exp(scale * (s_region - m[:, None])).sum(1)
                thr = m + np.log(tau * l) / scale
                z = np.where(seen, logits[r0:r1], -np.inf)
                p = np.exp(z - z.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                blocks = np.arange(1, cand_end)
                key_block = cols // BK
                cand = seen & (key_block[None, :] >= 1) & (key_block[None, :] < cand_end)

                def kept(s):
                    over = np.where(cand, s[r0:r1] >= thr[:, None], False)
                    return np.array([over[:, b * BK:(b + 1) * BK].any() for b in blocks])
                want = kept(exact)
                for name, s in [("exact scores", exact)] + list(ests.items()):
                    got = want if name == "exact scores" else kept(s)
                    dropped_cols = np.zeros(n, bool)
                    for b, keep in zip(blocks, got):
                        if not keep:
                            dropped_cols[b * BK:(b + 1) * BK] = True
                    lost = (p * dropped_cols[None, :]).sum(1)
                    acc = rows_out[name]
                    acc[0] += got.sum()
                    acc[1] += len(blocks)
                    acc[2] += (got != want).sum()
                    acc[3] += len(rows)
                    acc[4] += lost.sum()
                    acc[5] = max(acc[5], lost.max())
        print(f"\ntau {tau}: candidate blocks kept, decisions unlike the exact-score rule, attention mass dropped")
        print(f"| estimate | kept | differ | mean mass dropped | largest row's |")
        print("|---|---|---|---|---|")
        for name, (kept_n, total, differ, nrows, lost, worst) in rows_out.items():
            print(f"| {name} | {kept_n / total:.3f} | {differ} of {total} | {lost / nrows:.2e} | {worst:.3f} |")


if __name__ == "__main__":
    study(sys.argv[1] if len(sys.argv) > 1 else "lm")
