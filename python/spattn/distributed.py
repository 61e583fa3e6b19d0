"""Context parallelism over torch.distributed (issue 44): the sequence sharded over the ranks of a process group.
This module holds the first pieces, which every later one stands on:

    import spattn.distributed as sd
    q_shard = sd.shard(q, causal=True)             # this rank's rows of q [B, H, N, D] (dim 2 is the sequence)
    rows = sd.positions(N, rank, world, causal=True)  # their global indices
    out = sd.unshard(out_shard, causal=True)       # the whole tensor again, on every rank
    sd.check_same_call(group, method="sparge", shape=..., ...)  # every rank raises the same spattn.Error on a mismatch

Sharding: with causal attention the later rows see more keys, so the sequence is cut into 2P chunks and rank r holds
chunks r and 2P−1−r (the head-tail "zigzag" order: every rank gets one early and one late chunk, the same causal work
to within a chunk's rows); otherwise into P contiguous chunks, rank r holding chunk r. Any length: chunk c of C is
rows [c·N // C, (c+1)·N // C), so chunk sizes differ by at most one row, and chunks may be empty when N < C.

Not here yet (issue 44): sparse_attention over the shards (estimates bit-identical to one process, communication only
for kept K/V tiles, merging through each row's state), the all-to-all-over-heads mode, and the C++/NCCL path.
"""
import spattn


def _dist():
    try:
        import torch.distributed as dist
    except ImportError as e:  # pragma: no cover - torch without distributed
        raise spattn.Error("spattn.distributed needs torch.distributed") from e
    if not dist.is_available() or not dist.is_initialized():
        raise spattn.Error("spattn.distributed: the default process group is not initialized "
                           "(torch.distributed.init_process_group)")
    return dist


def _world(group):
    dist = _dist()
    return dist, dist.get_rank(group), dist.get_world_size(group)


def chunks(length, parts):
    """The [begin, end) of each of `parts` chunks of `length` rows: chunk c is [c·N // C, (c+1)·N // C)."""
    if length < 0 or parts < 1:
        raise spattn.Error(f"chunks: length {length} and parts {parts} must be >= 0 and >= 1")
    return [(c * length // parts, (c + 1) * length // parts) for c in range(parts)]


def positions(length, rank, world, causal=True):
    """The global row indices rank `rank` of `world` holds, in the order shard() lays them out."""
    if not 0 <= rank < world:
        raise spattn.Error(f"positions: rank {rank} is not in [0, {world})")
    if causal:
        parts = chunks(length, 2 * world)
        mine = [parts[rank], parts[2 * world - 1 - rank]]
    else:
        mine = [chunks(length, world)[rank]]
    return [i for begin, end in mine for i in range(begin, end)]


def shard(x, group=None, *, dim=2, causal=True):
    """This rank's rows of x along `dim` (the sequence; every rank passes the whole x): the zigzag chunks r and
    2P−1−r for causal attention, contiguous chunk r otherwise. A view-free copy (contiguous)."""
    import torch
    _, rank, world = _world(group)
    index = torch.tensor(positions(x.shape[dim], rank, world, causal), dtype=torch.long, device=x.device)
    return x.index_select(dim, index).contiguous()


def unshard(x_shard, group=None, *, dim=2, causal=True):
    """The whole tensor on every rank from each rank's shard (shard()'s layout; the total length is the sum of the
    shards'). Shards of unequal length are padded to the longest for the all-gather and cut back."""
    import torch
    dist, rank, world = _world(group)
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([x_shard.shape[dim]], dtype=torch.long), group=group)
    sizes = [int(s.item()) for s in sizes]
    length, longest = sum(sizes), max(sizes)
    for r in range(world):
        if len(positions(length, r, world, causal)) != sizes[r]:
            raise spattn.Error(f"unshard: rank {r} holds {sizes[r]} rows, but shard() gives it "
                               f"{len(positions(length, r, world, causal))} of {length} (causal={causal})")
    pad = list(x_shard.shape)
    pad[dim] = longest - x_shard.shape[dim]
    padded = torch.cat([x_shard, x_shard.new_zeros(pad)], dim=dim) if pad[dim] else x_shard.contiguous()
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded, group=group)
    shape = list(x_shard.shape)
    shape[dim] = length
    out = x_shard.new_empty(shape)
    for r in range(world):
        index = torch.tensor(positions(length, r, world, causal), dtype=torch.long, device=out.device)
        out.index_copy_(dim, index, gathered[r].narrow(dim, 0, sizes[r]))
    return out


def check_same_call(group=None, **signature):
    """Compares a small signature of the call (shapes but the sequence, dtypes, method, options, causality, …) across
    the group before any exchange: when ranks disagree, every rank raises the same spattn.Error naming the first field
    that differs and each rank's value, so no rank is left waiting in a collective the others skipped."""
    dist, rank, world = _world(group)
    mine = sorted((k, repr(v)) for k, v in signature.items())
    every = [None] * world
    dist.all_gather_object(every, mine, group=group)
    for r, theirs in enumerate(every):
        if theirs != every[0]:
            a, b = dict(every[0]), dict(theirs)
            field = next(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
            values = ", ".join(f"rank {i}: {dict(s).get(field, '(missing)')}" for i, s in enumerate(every))
            raise spattn.Error(f"spattn.distributed: the ranks disagree on {field} ({values})")
