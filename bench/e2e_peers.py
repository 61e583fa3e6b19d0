"""Peers of bench/e2e_bench.cpp in the same session (PERF.md): cuDNN and flash (FA2) SDPA dense (bf16, B = 1, Hq = 32; llm:
causal, K/V heads expanded from 8 to 32; video: non-causal, 32 K/V heads) and FlexAttention given each spattn mask
the way its users build one: create_block_mask from a mask function (tile lookup in the mask's bitmap, AND causal
for llm), its build time counted. CUDA events; median of 10 (the mask build: median of 3).
    OUT_DIR=masks WORKLOAD=llm ./spattn_bench_e2e 32768 ...; WORKLOAD=llm python3 bench/e2e_peers.py masks 32768 ...
"""
import glob
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import flex_on_bitmap, timed  # noqa: E402 - the same CUDA-event timing and FlexAttention build as bench/peers.py


def main():
    mask_dir, lengths = sys.argv[1], [int(a) for a in sys.argv[2:]]
    H, D = 32, 128
    video = os.environ.get("WORKLOAD", "llm") == "video"
    HKV, causal = (32, False) if video else (8, True)
    print(f"{'N':<7} {'peer':<40} {'build ms':>9} {'attn ms':>9} {'total ms':>9}")
    for n in lengths:
        q = torch.randn(1, H, n, D, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(1, HKV, n, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        ke, ve = k.repeat_interleave(H // HKV, dim=1), v.repeat_interleave(H // HKV, dim=1)
        for name, backend in (("sdpa cudnn dense", SDPBackend.CUDNN_ATTENTION), ("sdpa flash (FA2) dense", SDPBackend.FLASH_ATTENTION)):
            with sdpa_kernel(backend):
                ms = timed(lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=causal))
            print(f"{n:<7} {name:<40} {0:9.3f} {ms:9.3f} {ms:9.3f}", flush=True)
        for path in sorted(glob.glob(os.path.join(mask_dir, f"mask_{n}_*.npy"))):
            tq, tk = (int(x) for x in os.path.basename(path).split("_")[2].split("x"))
            bits = torch.from_numpy(np.load(path)).to("cuda").unsqueeze(0)  # [Hm, Tq, Tk] -> [1, Hm, Tq, Tk]
            try:
                build_ms, attn_ms = flex_on_bitmap(q, k, v, bits, tq, tk, causal)
            except Exception as e:  # noqa: BLE001 - report and go on (e.g. out of memory at long N)
                print(f"{n:<7} {'flex ' + os.path.basename(path)[:34]:<40} failed: {type(e).__name__}: {str(e)[:80]}")
                continue
            name = "flex " + "_".join(os.path.basename(path)[:-4].split("_")[3:])
            print(f"{n:<7} {name:<40} {build_ms:9.3f} {attn_ms:9.3f} {build_ms + attn_ms:9.3f}", flush=True)

if __name__ == "__main__":
    main()
