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

sparse_attention(q, k, v, method=..., mode="ulysses") runs the all-to-all-over-heads mode: each rank gets the whole
sequence of P-th of the heads (Hkv divisible by P; a K/V head moves with its query heads), runs the single-process
method on them, and the outputs go back to the sequence shards. Every head's mask is the one-process mask, since
every head sees the same whole sequence. On gloo (no all-to-all there) the exchange is P all-gathers; on other
backends one all_to_all each way.

Not here yet (issue 44): the sequence-parallel mode for Hkv < P (estimates combined bit-identically from summaries,
communication only for kept K/V tiles, merging through each row's state), and the C++/NCCL path.
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
    dist, _, world = _world(group)
    sizes, held = _layout(x_shard.shape[dim], group, causal, "unshard", x_shard.device)
    padded = _pad_rows(x_shard, max(sizes), dim)
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded, group=group)
    return _assemble(gathered, sizes, held, dim)


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


def _layout(n, group, causal, who, device):
    """Every rank's shard length (n here) and the global rows it holds, in rank order; the same spattn.Error on every
    rank when the lengths are not shard()'s of their sum. The lengths travel on `device`, the shards' (NCCL groups
    take CUDA tensors only)."""
    import torch
    dist, _, world = _world(group)
    sizes = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([n], dtype=torch.long, device=device), group=group)
    sizes = [int(x.item()) for x in sizes]
    length = sum(sizes)
    held = [positions(length, r, world, causal) for r in range(world)]
    if [len(rows) for rows in held] != sizes:
        raise spattn.Error(f"{who}: the ranks hold {sizes} rows, but shard() of {length} rows gives "
                           f"{[len(rows) for rows in held]} (causal={causal})")
    return sizes, held


def _pad_rows(t, longest, dim):
    """t with zero rows appended along `dim` up to `longest` (contiguous: what a collective takes)."""
    import torch
    extra = longest - t.shape[dim]
    if not extra:
        return t.contiguous()
    shape = list(t.shape)
    shape[dim] = extra
    return torch.cat([t, t.new_zeros(shape)], dim=dim)


def _assemble(pieces, sizes, held, dim):
    """The whole tensor from every rank's (padded) piece: rank r's first sizes[r] rows along `dim` at rows held[r]."""
    import torch
    shape = list(pieces[0].shape)
    shape[dim] = sum(sizes)
    out = pieces[0].new_empty(shape)
    for r, piece in enumerate(pieces):
        index = torch.tensor(held[r], dtype=torch.long, device=out.device)
        out.index_copy_(dim, index, piece.narrow(dim, 0, sizes[r]))
    return out


def _all_to_all(send, sizes, group):
    """send[j] (a [B, h, rows, D] tensor, rows at most max(sizes)) goes to rank j; returns recv, recv[i] what rank i
    sent here, padded along dim 2 to max(sizes) for the exchange (the caller cuts the rows it knows back)."""
    import torch
    dist, rank, world = _world(group)
    send = [_pad_rows(t, max(sizes), 2) for t in send]
    if dist.get_backend(group) == "gloo":  # no all_to_all in gloo: round j gathers every rank's piece for rank j
        recv = None
        for j in range(world):
            pieces = [torch.empty_like(send[j]) for _ in range(world)]
            dist.all_gather(pieces, send[j], group=group)
            if j == rank:
                recv = pieces
        return recv
    recv = [torch.empty_like(send[rank]) for _ in range(world)]
    dist.all_to_all(recv, send, group=group)
    return recv


def sparse_attention(q, k, v, *, method, group=None, causal=False, scale=None, mode="ulysses", return_lse=False,
                     **config):
    """spattn.sparse_attention over the group's sequence shards (shard()'s layout, the same `causal` as there):
    q [B, Hq, n_r, D], k and v [B, Hkv, n_r, D] on rank r; returns this rank's output rows [B, Hq, n_r, Dv] (and with
    return_lse, their natural-log LSE [B, Hq, n_r], as spattn.sparse_attention's).
    mode "ulysses": all-to-all over heads (Hkv a multiple of the group's size). Every rank must make the same call:
    ranks that disagree (method, options, heads, dims, dtypes, lengths) all raise the same spattn.Error. A per-head
    params file (spattn.calibrate's, for the model's Hq heads) gives each rank its heads' parameters."""
    import torch
    _, rank, world = _world(group)
    check_same_call(group, mode=mode, method=method, causal=bool(causal), scale=scale,
                    config=sorted((key, repr(value)) for key, value in config.items()),
                    q=(q.dim(), q.shape[0], q.shape[1], q.shape[-1], str(q.dtype)),
                    k=(k.dim(), k.shape[0], k.shape[1], k.shape[-1], str(k.dtype)),
                    v=(v.dim(), v.shape[0], v.shape[1], v.shape[-1], str(v.dtype)))
    if "params_first_head" in config or "params_heads" in config:
        raise spattn.Error("spattn.distributed.sparse_attention: params_first_head / params_heads are set by "
                           "spattn.distributed (each rank's heads of the params file)")
    if mode != "ulysses":
        raise spattn.Error(f"spattn.distributed.sparse_attention: mode {mode!r} is not available (\"ulysses\" is)")
    if q.dim() != 4 or k.shape[2] != q.shape[2] or v.shape[2] != q.shape[2]:
        raise spattn.Error("spattn.distributed.sparse_attention: q, k, v [B, H, n, D] shards of one sequence (self-"
                           f"attention), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    heads_q, heads_kv = q.shape[1], k.shape[1]
    if heads_kv % world != 0 or heads_q % heads_kv != 0:
        raise spattn.Error(f"spattn.distributed.sparse_attention: mode ulysses needs the K/V heads ({heads_kv}) "
                           f"divisible by the group's {world} ranks (and Hq = {heads_q} a multiple of them)")
    sizes, held = _layout(q.shape[2], group, causal, "spattn.distributed.sparse_attention", q.device)
    hq, hkv = heads_q // world, heads_kv // world
    if "params" in config:  # a per-head file: this rank runs the model's query heads [rank·hq, (rank+1)·hq)
        config = dict(config, params_first_head=rank * hq, params_heads=heads_q)
    # Heads out, sequence in: rank j gets query heads [j·hq, (j+1)·hq) and their K/V heads.
    got_q = _all_to_all([q[:, j * hq:(j + 1) * hq] for j in range(world)], sizes, group)
    got_k = _all_to_all([k[:, j * hkv:(j + 1) * hkv] for j in range(world)], sizes, group)
    got_v = _all_to_all([v[:, j * hkv:(j + 1) * hkv] for j in range(world)], sizes, group)
    out = spattn.sparse_attention(*(_assemble(got, sizes, held, 2) for got in (got_q, got_k, got_v)), method=method,
                                  causal=causal, scale=scale, return_lse=return_lse, **config)

    def rows_back(x):  # sequence out, heads in: rank i gets its rows of every rank's heads ([B, h, N, ...])
        back = _all_to_all([x.index_select(2, torch.tensor(held[i], dtype=torch.long, device=x.device))
                            for i in range(world)], sizes, group)
        return torch.cat([piece.narrow(2, 0, sizes[rank]) for piece in back], dim=1)
    if not return_lse:
        return rows_back(out)
    out, lse = out
    return rows_back(out), rows_back(lse.unsqueeze(-1)).squeeze(-1)
