"""spattn.distributed's sharding and call check with gloo on the CPU, 2 and 3 processes: shard() gives each rank the
rows positions() names (zigzag for causal: chunks r and 2P−1−r), unshard() gives the whole tensor back on every rank for
lengths not divisible by 2P (and shorter than 2P), and ranks that disagree all raise the same spattn.Error instead of
waiting. Each group runs in spawned processes joined with a timeout, so a hang fails the test."""
import json
import os
import random
import tempfile
import traceback

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
import spattn  # noqa: E402
import spattn.distributed as sd  # noqa: E402

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

SEED = random.randrange(1 << 30)
print(f"test_distributed seed {SEED}")
LENGTHS = (1, 5, 100, 257)


def _init(rank, world, store):
    from datetime import timedelta
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))


def _roundtrip(rank, world, store, seed, results):
    try:
        _init(rank, world, store)
        checked = 0
        for n in LENGTHS:
            for causal in (True, False):
                x = torch.randn(2, 3, n, 4, generator=torch.Generator().manual_seed(seed + n))  # the same on every rank
                part = sd.shard(x, causal=causal)
                rows = sd.positions(n, rank, world, causal)
                assert torch.equal(part, x[:, :, rows]), (n, causal)
                back = sd.unshard(part, causal=causal)
                assert torch.equal(back, x), (n, causal)
                checked += 1
        results.put((rank, "ok", checked))
    except Exception:
        results.put((rank, "error", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _disagree(rank, world, store, seed, results):
    try:
        _init(rank, world, store)
        try:
            sd.check_same_call(method="sparge" if rank == 0 else "sale", heads=8, causal=True)
            results.put((rank, "no error", ""))
        except spattn.Error as e:
            results.put((rank, "raised", str(e)))
        sd.check_same_call(method="sparge", heads=8, causal=True)  # agreeing ranks go on (no collective left hanging)
        results.put((rank, "agreed", ""))
    except Exception:
        results.put((rank, "error", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


ULYSSES_CASES = [("dense", {}), ("sparge", {"topk": 0.5}), ("sale", {}), ("fgattn", {}), ("bfla", {}),
                 ("anchor", {"theta": 8.0})]


def _ulysses(rank, world, store, seed, results):
    """Every method through mode ulysses against one process's spattn.sparse_attention on the whole inputs: the
    rank's rows, bit for bit (each head computes on the same whole sequence)."""
    try:
        _init(rank, world, store)
        heads_kv, n, d = world, 257, 32
        heads_q = 2 * heads_kv
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(1, heads_q, n, d, generator=g)
        k = torch.randn(1, heads_kv, n, d, generator=g)
        v = torch.randn(1, heads_kv, n, d, generator=g)
        cases = ULYSSES_CASES
        checked = 0
        for causal in (True, False):
            rows = sd.positions(n, rank, world, causal)
            for method, config in cases:
                got = sd.sparse_attention(sd.shard(q, causal=causal), sd.shard(k, causal=causal),
                                          sd.shard(v, causal=causal), method=method, causal=causal, **config)
                want = spattn.sparse_attention(q, k, v, method=method, causal=causal, **config)[:, :, rows]
                assert torch.equal(got, want), (method, config, causal, (got - want).abs().max().item())
                checked += 1
            got, lse = sd.sparse_attention(sd.shard(q, causal=causal), sd.shard(k, causal=causal),
                                           sd.shard(v, causal=causal), method="sale", causal=causal, return_lse=True)
            want, want_lse = spattn.sparse_attention(q, k, v, method="sale", causal=causal, return_lse=True)
            assert torch.equal(got, want[:, :, rows]) and torch.equal(lse, want_lse[:, :, rows]), causal
        # A per-head SALE file (τ 0 is a dense head, 0.5 prunes most candidates): each rank runs its heads' τ.
        params = os.path.join(os.path.dirname(store), "sale_heads.json")
        if rank == 0:
            with open(params, "w") as f:
                json.dump({"method": "sale", "bits": 4, "local_window": 128, "theta": 0.4,
                           "tau": [0.0, 0.5, 0.01, 0.3, 0.2, 0.05][:heads_q]}, f)
        dist.barrier()
        for causal in (True, False):
            rows = sd.positions(n, rank, world, causal)
            got = sd.sparse_attention(sd.shard(q, causal=causal), sd.shard(k, causal=causal),
                                      sd.shard(v, causal=causal), method="sale", causal=causal, params=params)
            want = spattn.sparse_attention(q, k, v, method="sale", causal=causal, params=params)[:, :, rows]
            assert torch.equal(got, want), ("sale params", causal, (got - want).abs().max().item())
            checked += 1
        try:  # 3 K/V heads over 2 ranks (or 2 over 3): every rank refuses the same way
            bad = 3 if world == 2 else 2
            sd.sparse_attention(sd.shard(q[:, :bad]), sd.shard(k[:, :1].expand(1, bad, n, d).contiguous()),
                                sd.shard(v[:, :1].expand(1, bad, n, d).contiguous()), method="dense", causal=True)
            results.put((rank, "no error", checked))
        except spattn.Error as e:
            results.put((rank, "ok", (checked, str(e))))
    except Exception:
        results.put((rank, "error", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _run(target, world, expected_messages, timeout=120):
    ctx = torch.multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=target, args=(r, world, store, SEED, results)) for r in range(world)]
        for p in procs:
            p.start()
        got = [results.get(timeout=timeout) for _ in range(expected_messages * world)]
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == 0, f"a rank exited with {p.exitcode}"
    return got


@pytest.mark.parametrize("world", [2, 3])
def test_shard_and_unshard_round_trip(world):
    got = _run(_roundtrip, world, 1)
    assert all(status == "ok" for _, status, _ in got), got
    assert all(detail == 2 * len(LENGTHS) for _, _, detail in got)


@pytest.mark.parametrize("world", [2, 3])
def test_ulysses_gives_each_rank_its_rows_of_the_one_process_output(world):
    got = _run(_ulysses, world, 1, timeout=300)
    assert all(status == "ok" for _, status, _ in got), got
    assert all(detail[0] == 2 * len(ULYSSES_CASES) + 2 for _, _, detail in got), got  # + the SALE params file
    messages = {detail[1] for _, _, detail in got}
    assert len(messages) == 1 and "divisible by the group" in messages.pop(), got


def test_ranks_that_disagree_all_raise_the_same_error():
    got = _run(_disagree, 2, 2)
    raised = [detail for _, status, detail in got if status == "raised"]
    assert len(raised) == 2 and raised[0] == raised[1], got
    assert "disagree on method" in raised[0] and "rank 0: 'sparge'" in raised[0] and "rank 1: 'sale'" in raised[0]
    assert sum(status == "agreed" for _, status, _ in got) == 2, got


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_positions_partition_the_sequence_and_balance_causal_work(world):
    for n in (0, 1, 7, 64, 1000, 1001):
        for causal in (True, False):
            held = [sd.positions(n, r, world, causal) for r in range(world)]
            assert sorted(i for rows in held for i in rows) == list(range(n))
            sizes = [len(rows) for rows in held]
            assert max(sizes) - min(sizes) <= 2
            if causal and n >= 2 * world:
                work = [sum(i + 1 for i in rows) for rows in held]  # keys each rank's rows see
                assert max(work) - min(work) <= 2 * n, (n, world, work)  # a zigzag pair evens it out
            if causal and world > 1:
                parts = sd.chunks(n, 2 * world)
                assert held[0][:parts[0][1]] == list(range(*parts[0]))  # rank 0 starts with chunk 0 ...
                assert held[0][len(range(*parts[0])):] == list(range(*parts[-1]))  # ... and ends with chunk 2P − 1


def test_without_a_process_group():
    if dist.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(spattn.Error, match="not initialized"):
        sd.shard(torch.zeros(1, 1, 4, 2))
    with pytest.raises(spattn.Error, match="rank 3"):
        sd.positions(10, 3, 2)
