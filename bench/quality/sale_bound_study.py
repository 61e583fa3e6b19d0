"""python3 bench/quality/sale_bound_study.py data/captures.npz lm

How many of SALE's candidate blocks a cheap certified upper bound on q·k' could skip (issue 42, lever 1).
Float scores stand in for SALE's quantized estimates (the decision margins are far larger than the quantization error
for most blocks); a block is 'prunable' when for every row of its 64-row query block an upper bound on max_j q·k'_j is
below the row's threshold T_i. Bounds: (a) per-channel min/max of the block's keys (Quest-style), (b) centre +
Cauchy–Schwarz radius, each over 32-key blocks and over their 8-key groups."""
import sys
import numpy as np

def bf16(a):
    return (a.astype(np.uint32) << 16).view(np.float32)

d = np.load(sys.argv[1])
prefix = sys.argv[2] if len(sys.argv) > 2 else "lm"
q, k = bf16(d[prefix + "_q"]), bf16(d[prefix + "_k"])
causal, scale, _ = d[prefix + "_meta"]
H, N, D = q.shape
ratio = H // k.shape[0]
BQ, BK, SEG, NL = 64, 32, 4, 4
for tau in [0.004, 0.02, 0.1, 0.2]:
    tot = {"cand": 0, "sel": 0, "a32": 0, "a8": 0, "b32": 0, "b8": 0}
    for h in range(H):
        kh = k[h // ratio]
        kp = kh - kh.mean(0)  # k' = k − μ_k
        s_all = q[h] @ kp.T  # raw q·k'
        for t in range((N + BQ - 1) // BQ):
            r0, r1 = t * BQ, min(N, (t + 1) * BQ)
            n_max = (r1 - 1) // BK + 1 if causal else (N + BK - 1) // BK
            S = max(0, (n_max - 1 - NL) // SEG)
            if S == 0:
                continue
            cand_end = 1 + SEG * S
            rows = np.arange(r0, r1)
            s = s_all[r0:r1]
            vis = rows + 1 if causal else np.full(len(rows), N)
            # sink-local region: [0, 32) and [cand_end*32, vis)
            cols = np.arange(N)
            region = (cols[None, :] < BK) | ((cols[None, :] >= cand_end * BK) & (cols[None, :] < vis[:, None]))
            sr = np.where(region, s, -np.inf)
            m = sr.max(1)
            l = np.exp(scale * (sr - m[:, None])).sum(1)
            T = m + np.log(tau * l) / scale
            for J in range(1, cand_end):
                keys = slice(J * BK, min(N, (J + 1) * BK))
                sb = s[:, keys]
                valid = cols[keys][None, :] < vis[:, None]
                margin = np.where(valid, sb - T[:, None], -np.inf).max()
                tot["cand"] += 1
                if margin >= 0:
                    tot["sel"] += 1
                    continue
                kb = kp[keys]
                qq = q[h][r0:r1]
                # (a) channel min/max over 32 keys, and over each 8-key group (max over groups)
                ub = np.maximum(qq * kb.max(0), qq * kb.min(0)).sum(1)
                tot["a32"] += bool((ub < T).all())
                ub8 = np.max([np.maximum(qq * g.max(0), qq * g.min(0)).sum(1) for g in np.split(kb, range(8, len(kb), 8))], 0)
                tot["a8"] += bool((ub8 < T).all())
                # (b) centre + radius
                c = kb.mean(0); rad = np.sqrt(((kb - c) ** 2).sum(1)).max()
                ubb = qq @ c + np.sqrt((qq ** 2).sum(1)) * rad
                tot["b32"] += bool((ubb < T).all())
                ub8b = np.max([qq @ g.mean(0) + np.sqrt((qq ** 2).sum(1)) * np.sqrt(((g - g.mean(0)) ** 2).sum(1)).max()
                               for g in np.split(kb, range(8, len(kb), 8))], 0)
                tot["b8"] += bool((ub8b < T).all())
    nsel = tot["cand"] - tot["sel"]
    print(f"{prefix} tau {tau}: candidates {tot['cand']}, selected {tot['sel']} ({tot['sel']/tot['cand']:.3f}); of the "
          f"{nsel} dropped, skippable by: minmax-32 {tot['a32']/max(nsel,1):.3f}, minmax-8 {tot['a8']/max(nsel,1):.3f}, "
          f"centre+radius-32 {tot['b32']/max(nsel,1):.3f}, -8 {tot['b8']/max(nsel,1):.3f}", flush=True)
