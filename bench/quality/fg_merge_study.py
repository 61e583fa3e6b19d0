"""python3 bench/quality/fg_merge_study.py data/captures.npz   (PYTHONPATH: a build's python folder)

Issue 42, FG-Attn's merged fine tiles: a 128-row work item of 16- or 32-row query tiles streams the union of its
members' kept key tiles, and each member masks the keys it did not keep, so the kept share of what is streamed bounds
the item's rate against the 128-row kernel's. On independent random tiles at 25 % density that share is 37 % (32-row)
and 28 % (16-row). This prints it on FG-Attn's own masks (spattn.estimate, CPU reference) for one layer of each
trained model: kept / streamed = Σ_members |kept| / (members · |union|), consecutive members as the executor merges
them. Causal rows past the diagonal are counted as streamed (a slight underestimate of the share)."""
import sys

import numpy as np
import torch

import spattn


def bf16(a):
    return torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16).float().numpy()[None]


def main():
    d = np.load(sys.argv[1] if len(sys.argv) > 1 else "data/captures.npz")
    for prefix, causal in (("dit", False), ("lm", True)):
        q, k = bf16(d[prefix + "_q"]), bf16(d[prefix + "_k"])
        for top_p in (0.9, 0.99):
            for tile_q, members in ((32, 4), (16, 8)):
                mask = spattn.estimate("fgattn", q, k, causal=causal, top_p=top_p, tile_q=tile_q, tile_k=32)
                bits = np.asarray(mask.to_bitmap()).astype(bool)  # [1, H, Tq, Tk]
                kept = streamed = 0
                for h in range(bits.shape[1]):
                    for t0 in range(0, bits.shape[2], members):
                        item = bits[0, h, t0:t0 + members]
                        kept += int(item.sum())
                        streamed += int(item.any(0).sum()) * item.shape[0]
                print(f"{prefix} top-p {top_p}, {tile_q}x32 tiles, {members} per item: density {mask.density:.3f}, "
                      f"kept / streamed {kept / streamed:.3f}")


if __name__ == "__main__":
    main()
