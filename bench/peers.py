"""Peers on the same GPU (PERF.md): SDPA with the cuDNN and flash backends (dense, causal) and, when mask
files from spattn_bench_cuda are given, FlexAttention on the same block masks (kv_num_blocks/kv_indices
exported by TileMask::to_flex_block_mask). Causal bf16, B = 1, H = 32, D = 128; CUDA events; median of 10.
    python3 bench/peers.py 8192 32768 [--masks DIR]
"""
import glob
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, reps=10, warmup=3, before=None):
    """Median ms of fn() by CUDA events after `warmup` calls; before() (e.g. a process group's barrier) runs ahead of
    each timed call, outside the events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


_flex = None


def flex_on_bitmap(q, k, v, bits, tile_q, tile_k, causal, scale=None):
    """FlexAttention on a spattn mask the way its users build one: create_block_mask from a mask function (a lookup in
    the mask's tile bitmap bits [B or 1, Hm, Tq, Tk] on the GPU, AND causal bottom-right), compiled block by block
    (_compile=True: the eager form materialises the whole [H, N, N] mask), BLOCK_SIZE 128; then the compiled
    flex_attention with GQA. q [B, Hq, Nq, D], k/v [B, Hkv, Nkv, D]; a mask per K/V head (Hm < Hq) serves its query
    heads. Returns (build ms, attention ms), CUDA events (the build: median of 3)."""
    global _flex
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if _flex is None:
        _flex = torch.compile(flex_attention)
    batch, heads, nq, nkv = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    bits = bits.bool()
    per, offset = heads // bits.shape[1], nkv - nq

    def mask_mod(b, h, qi, kv):
        hit = bits[b if bits.shape[0] > 1 else 0, h // per, qi // tile_q, kv // tile_k]
        return hit & (kv <= qi + offset) if causal else hit

    build = lambda: create_block_mask(mask_mod, batch, heads, nq, nkv, device=q.device, BLOCK_SIZE=128, _compile=True)
    build_ms = timed(build, reps=3, warmup=1)
    block_mask = build()
    attend_ms = timed(lambda: _flex(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=heads != k.shape[1]))
    return build_ms, attend_ms


def main():
    args = sys.argv[1:]
    mask_dir = None
    if "--masks" in args:
        i = args.index("--masks")
        mask_dir = args[i + 1]
        del args[i : i + 2]
    lengths = [int(a) for a in args] or [8192, 32768]
    H, D = 32, int(os.environ.get("HEAD_DIM", "128"))
    print(f"causal bf16, B = 1, H = {H}, D = {D}")
    print(f"{'N':<8} {'peer':<28} {'ms':>10} {'TFLOP/s(eq)':>12}")
    for n in lengths:
        q, k, v = (torch.randn(1, H, n, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4 * H * n * n * D / 2
        for name, backend in (("sdpa cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa flash (FA2)", SDPBackend.FLASH_ATTENTION)):
            with sdpa_kernel(backend):
                ms = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            print(f"{n:<8} {name:<28} {ms:10.3f} {flops / ms / 1e9:12.1f}")
        if mask_dir:
            import numpy as np
            from torch.nn.attention.flex_attention import BlockMask, flex_attention

            flex = torch.compile(flex_attention)
            for path in sorted(glob.glob(os.path.join(mask_dir, f"mask_{n}_*.npz"))):
                z = np.load(path)
                t = {key: torch.from_numpy(z[key]).to("cuda") for key in z.files}
                causal = lambda b, h, qi, kv: qi >= kv
                bm = BlockMask.from_kv_blocks(t["kv_num_blocks"], t["kv_indices"], t["full_kv_num_blocks"],
                                              t["full_kv_indices"], BLOCK_SIZE=128, mask_mod=causal, seq_lengths=(n, n))
                ms = timed(lambda: flex(q, k, v, block_mask=bm))
                density = int(path.rsplit("_", 1)[1].split(".")[0]) / 1000
                print(f"{n:<8} {'flex density %.3f' % density:<28} {ms:10.3f} {flops / ms / 1e9:12.1f}")


if __name__ == "__main__":
    main()
