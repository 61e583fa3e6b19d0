"""python3 bench/quality/sale_block_bound_study.py [lm|dit]   (data/captures.npz)

Could SALE skip a candidate block's products (not only its biases) by a certified upper bound? For every 16-row warp
and 32-key candidate block of the trained LM's capture, three upper bounds on max(q'·k' + μ_q·k') over the block are
compared with the rows' thresholds (SALE's rule, float scores standing in for the quantized ones): Cauchy–Schwarz
about the block's centroid (q'·c + |q'|·r) over 32 and over 8 keys, and the per-dimension box bound
(Σ_d max(q_d·lo_d, q_d·hi_d)) over 32 and 8 keys. Printed: the share of warp-blocks truly below threshold and the
share each bound proves below (issue 42, bench/results/gpu-pipeline.md). Measured: every bound proves 0 %."""
import sys

import numpy as np


def bf16(a): return (a.astype(np.uint32) << 16).view(np.float32)
d = np.load("data/captures.npz"); prefix = sys.argv[1] if len(sys.argv) > 1 else "lm"
q, k = bf16(d[prefix + "_q"]), bf16(d[prefix + "_k"]); causal, scale, _ = d[prefix + "_meta"]
H, N, D = q.shape; ratio = H // k.shape[0]; BQ, BK, SEG, NL = 64, 32, 4, 4
nb = (N + BK - 1) // BK
assert N % BK == 0, "the study takes whole key blocks"


def pools(kp, n):  # centroid, radius and per-dimension range of every n-key block
    blocks = kp.reshape(-1, n, D); c = blocks.mean(1)
    return c, np.linalg.norm(blocks - c[:, None], axis=2).max(1), blocks.min(1), blocks.max(1)


for tau in [0.004, 0.02, 0.1, 0.2]:
    n = 0; count = dict(truly=0, cs32=0, cs8=0, box32=0, box8=0)
    for h in range(H):
        kh = k[h // ratio]; kp = kh - kh.mean(0); mu_q = q[h].mean(0); qp = q[h] - mu_q
        s_all = qp @ kp.T + (kp @ mu_q)[None, :]; bias = kp @ mu_q; qn = np.linalg.norm(qp, axis=1)
        qpos, qneg = np.maximum(qp, 0), np.minimum(qp, 0)
        ub = {}
        for size in (32, 8):
            c, r, lo, hi = pools(kp, size)
            ub["cs%d" % size] = (qp @ c.T + qn[:, None] * r[None, :]).reshape(N, nb, BK // size).max(2)
            ub["box%d" % size] = (qpos @ hi.T + qneg @ lo.T).reshape(N, nb, BK // size).max(2)
        for t in range((N + BQ - 1) // BQ):
            r0, r1 = t * BQ, min(N, (t + 1) * BQ)
            n_max = (r1 - 1) // BK + 1 if causal else nb
            S = max(0, (n_max - 1 - NL) // SEG)
            if S == 0: continue
            cand_end = 1 + SEG * S; rows = np.arange(r0, r1); s = s_all[r0:r1]
            vis = rows + 1 if causal else np.full(len(rows), N); cols = np.arange(N)
            region = (cols[None, :] < BK) | ((cols[None, :] >= cand_end * BK) & (cols[None, :] < vis[:, None]))
            sr = np.where(region, s, -np.inf); m = sr.max(1); l = np.exp(scale * (sr - m[:, None])).sum(1)
            T = m + np.log(tau * l) / scale
            for J in range(1, cand_end):
                bmax = bias[J * BK:(J + 1) * BK].max()
                for w in range(0, r1 - r0, 16):
                    rr = slice(r0 + w, min(r0 + w + 16, r1)); Tw = T[w:w + 16]
                    n += 1
                    count["truly"] += (s_all[rr, J * BK:(J + 1) * BK] < Tw[:, None]).all()
                    for key, u in ub.items(): count[key] += (u[rr, J] + bmax < Tw).all()
    print(f"{prefix} tau {tau}: {n} warp-blocks; " + ", ".join(f"{key} {v / n:.3f}" for key, v in count.items()))
