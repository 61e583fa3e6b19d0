"""spattn.distributed on GPUs over NCCL (issue 44): the Ulysses mode (all-to-all over heads) on P GPUs of one host
against the same call in one process on one GPU — outputs and LSE bit-identical (every head runs the single-GPU
pipeline on the whole sequence) — and the time of both. Run by torchrun, one process per GPU:

    PYTHONPATH=build-python-cuda/python torchrun --nproc_per_node P python/tests/gpu/distributed_nccl.py [N ...]

(scripts/gpu/distributed.sh builds the module and runs it.) Causal bf16, B 1, Hq 32, Hkv 8, D 128 (Hkv divisible by
P for P = 2, 4, 8); each rank makes the inputs from the same seed and takes its zigzag shard. Times: CUDA events on
rank 0 around the whole call (the exchanges included), after a barrier, median of 5 after 2 warm-ups (bench/peers.py's
timed). Rank 0 prints a table last; exit status 1 if any output differs.
"""
import os
import sys

import torch
import torch.distributed as dist

import spattn
import spattn.distributed as sd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
import peers  # noqa: E402  (bench/peers.py: the CUDA-event timing every GPU benchmark here shares)

METHODS = [("dense", {}), ("sparge", {}), ("sale", {"tau": 0.1}), ("bfla", {}), ("anchor", {})]


def timed(fn):
    return peers.timed(fn, reps=5, warmup=2, before=dist.barrier)


def main():
    lengths = [int(a) for a in sys.argv[1:]] or [32768]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    rows, failures = [], 0
    for n in lengths:
        g = torch.Generator().manual_seed(7 + n)
        q, k, v = (torch.randn(1, h, n, 128, generator=g).to("cuda", torch.bfloat16) for h in (32, 8, 8))
        shards = [sd.shard(x, causal=True) for x in (q, k, v)]
        mine = sd.positions(n, rank, world, causal=True)
        for method, config in METHODS:
            whole, whole_lse = spattn.sparse_attention(q, k, v, method=method, causal=True, return_lse=True, **config)
            out, lse = sd.sparse_attention(*shards, method=method, causal=True, return_lse=True, **config)
            same = torch.equal(out, whole[:, :, mine]) and torch.equal(lse, whole_lse[:, :, mine])
            flags = torch.tensor([0 if same else 1], device="cuda")
            dist.all_reduce(flags)
            diff = (out.float() - whole[:, :, mine].float()).abs().max().reshape(1)
            dist.all_reduce(diff, op=dist.ReduceOp.MAX)
            one = timed(lambda: spattn.sparse_attention(q, k, v, method=method, causal=True, **config))
            many = timed(lambda: sd.sparse_attention(*shards, method=method, causal=True, **config))
            failures += int(flags.item() > 0)
            rows.append((n, method, config, one, many, int(flags.item()), diff.item()))
    if rank == 0:
        print(f"\n{world} × {torch.cuda.get_device_name()}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
              f"torch {torch.__version__}; causal bf16, B 1, Hq 32, Hkv 8, D 128")
        print("| N | method | 1 GPU ms | Ulysses ms | speed-up | ranks whose output or LSE differs | max abs diff |\n"
              "|---|---|---|---|---|---|---|")
        for n, method, config, one, many, bad, diff in rows:
            setting = " ".join(f"{key} {value}" for key, value in config.items())
            print(f"| {n} | {method} {setting} | {one:.3f} | {many:.3f} | {one / many:.2f} | {bad} | {diff:.1e} |")
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
