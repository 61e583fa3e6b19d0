"""The quality harness (bench/quality/harness.py) on the CPU reference, with the tiny models of bench/quality/models.py
(CI has no transformers; the harness treats every model alike): it leaves a model's loss bit-identical when it swaps in
the model's own dense attention, spattn's dense attention gives the same loss within fp32 rounding, a mask that drops
the diagonal raises it, the oracle at full density is dense, and what it records per layer is what the masks were."""
import os
import random
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "quality"))
import harness  # noqa: E402
import models  # noqa: E402
import clips  # noqa: E402

import spattn  # noqa: E402

SEED = random.randrange(1 << 30)
print(f"test_quality_harness seed {SEED}")


def tiny_lm():
    torch.manual_seed(SEED)
    model = models.TinyLM(dim=128, depth=2, heads=4, kv_heads=2).eval()
    windows = torch.randint(0, 256, (2, 97), generator=torch.Generator().manual_seed(SEED))
    return model, windows


def periodic_windows(count, length, generator):
    """Sequences a b a b …: each token is the one two before it, so a model must attend to a recent key (inside the
    diagonal 16×16 tile for most rows) to predict it."""
    pairs = torch.randint(0, 256, (count, 2), generator=generator)
    return pairs.repeat(1, (length + 1) // 2)[:, :length]


def trained_tiny_lm(steps=200):
    """A one-layer TinyLM trained (seeded, on the CPU, ~10 s) on periodic_windows until it predicts them."""
    torch.manual_seed(SEED)
    model = models.TinyLM(dim=128, depth=1, heads=4, kv_heads=2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(SEED)
    for _ in range(steps):
        w = periodic_windows(8, 49, g)
        loss = models.lm_loss(model(w[:, :-1]), w[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), periodic_windows(2, 49, g)


def no_diagonal(q, k, causal):
    """Every reachable 16×16 tile but the diagonal ones (rows with only diagonal tiles are left empty)."""
    tq = (q.shape[2] + 15) // 16
    bitmap = np.ones((q.shape[0], q.shape[1], tq, tq), dtype=np.uint8)
    for t in range(tq):
        bitmap[:, :, t, t] = 0
    return spattn.TileMask.from_bitmap(bitmap, tile_q=16, tile_k=16, seqlen_q=q.shape[2], seqlen_kv=k.shape[2],
                                       causal=causal)


def test_dense_swap_leaves_the_loss_bit_identical():
    model, windows = tiny_lm()
    own = harness.lm_loss_on(model, windows)
    with harness.Swap(harness.dense_attention(), layers=2) as record:
        swapped = harness.lm_loss_on(model, windows)
    assert swapped == own  # bit for bit: the harness adds nothing to the model's own computation
    assert record.summary()["calls"] == 2 * len(windows)
    assert all(e == 0.0 for e in record.summary()["layer_rel_l1"])


def test_spattn_dense_matches_and_a_dropped_diagonal_costs():
    model, windows = trained_tiny_lm()
    own = harness.lm_loss_on(model, windows)
    with harness.Swap(harness.spattn_attention("dense", tile_q=16, tile_k=16), layers=1) as record:
        dense = harness.lm_loss_on(model, windows)
    assert abs(dense - own) <= 1e-5 * own, (dense, own)
    s = record.summary()
    assert s["density"] == 1.0 and max(s["layer_rel_l1"]) < 1e-5
    with harness.Swap(harness.mask_attention(no_diagonal), layers=1) as record:
        dropped = harness.lm_loss_on(model, windows)
    s = record.summary()
    assert own < 1.0, own  # the model learned the task (ln 256 = 5.5 nats before training) ...
    assert dropped > 2 * own, (dropped, own)  # ... and needs the diagonal tiles' keys for it
    assert s["density"] == 0.5 and min(s["layer_rel_l1"]) > 1e-2, s  # 3 of the 6 causal tiles of 48 tokens


def test_oracle_full_density_is_dense_and_sparser_costs_more():
    model, windows = tiny_lm()
    own = harness.lm_loss_on(model, windows)
    losses, density = {}, {}
    for rho in (1.0, 0.5, 0.1):
        with harness.Swap(harness.oracle_attention(16, 16, density=rho), layers=2) as record:
            losses[rho] = harness.lm_loss_on(model, windows)
        density[rho] = record.summary()["density"]
    assert density[1.0] == 1.0 and density[1.0] > density[0.5] > density[0.1]  # ⌈ρ·R⌉ tiles a row: above ρ
    assert abs(losses[1.0] - own) <= 1e-5 * own
    assert losses[0.1] != own


def test_calibrated_attention_routes_each_layer_to_its_params(tmp_path):
    """Layer 0 gets FG-Attn's sparsest setting, layer 1 dense (calibrated against a bound every setting / none meets):
    the densities recorded per layer say which file each layer used."""
    model, _ = tiny_lm()
    windows = torch.randint(0, 256, (1, 513), generator=torch.Generator().manual_seed(SEED))  # 16 tiles of 32
    g = torch.Generator().manual_seed(SEED)
    q, k, v = (torch.randn(1, 4, 512, 32, generator=g) for _ in range(3))
    paths = [tmp_path / "layer0.json", tmp_path / "layer1.json"]
    spattn.calibrate("fgattn", [(q, k, v)], paths[0], causal=True, rel_l1=10.0)
    spattn.calibrate("fgattn", [(q, k, v)], paths[1], causal=True, rel_l1=1e-12)
    with harness.Swap(harness.calibrated_attention("fgattn", paths), layers=2) as record:
        harness.lm_loss_on(model, windows)
    density = record.summary()["layer_density"]
    assert density[1] == 1.0 and density[0] < 1.0, density


def test_swap_compares_the_first_calls_only_when_told():
    model, windows = tiny_lm()
    with harness.Swap(harness.spattn_attention("sparge", topk=0.5), layers=2, compare=2) as record:
        harness.lm_loss_on(model, windows)
    errors = [e for _, e in record.calls]
    assert len(errors) == 2 * len(windows)
    assert all(e is not None for e in errors[:2]) and all(e is None for e in errors[2:]), errors
    assert all(x == x for x in record.summary()["layer_rel_l1"])  # every layer has its first forward's error


def test_dit_loss_and_swap():
    torch.manual_seed(SEED)
    model = models.DiT(dim=64, depth=2, heads=2).eval()
    for p in model.parameters():  # the zero-initialised gates and output would hide the attention
        torch.nn.init.normal_(p, std=0.05)
    videos = clips.clips(1, 2, 16, 16, seed=SEED)
    own = harness.dit_loss_on(model, videos, [0.5], seed=SEED)
    assert own == harness.dit_loss_on(model, videos, [0.5], seed=SEED)  # the noise is the seed's
    with harness.Swap(harness.spattn_attention("dense", tile_q=16, tile_k=16), layers=2):
        dense = harness.dit_loss_on(model, videos, [0.5], seed=SEED)
    assert abs(dense - own) <= 1e-5 * own
    with harness.Swap(harness.mask_attention(no_diagonal), layers=2):
        dropped = harness.dit_loss_on(model, videos, [0.5], seed=SEED)
    assert dropped != own


def test_oracle_mask_api():
    q = torch.randn(1, 2, 64, 32, generator=torch.Generator().manual_seed(SEED))
    k = torch.randn(1, 2, 64, 32, generator=torch.Generator().manual_seed(SEED + 1))
    mask = spattn.oracle_mask(q, k, tile_q=16, tile_k=16, density=0.5, causal=False)
    assert mask.tile_q == 16 and mask.mask_heads == 2 and abs(mask.density - 0.5) < 1e-6
    # every row keeps its heaviest tile: the one of largest exact softmax mass, computed here in float64
    p = torch.softmax((q.double() @ k.double().transpose(-1, -2)) / 32 ** 0.5, dim=-1)
    mass = p.reshape(1, 2, 4, 16, 4, 16).sum(dim=(3, 5))
    bitmap = np.asarray(mask.to_bitmap())
    heaviest = mass.argmax(dim=-1).numpy()
    for h in range(2):
        for t in range(4):
            assert bitmap[0, h, t, heaviest[0, h, t]]
    with pytest.raises(spattn.Error, match="exactly one budget"):
        spattn.oracle_mask(q, k, density=0.5, mass=0.9)
    with pytest.raises(spattn.Error, match="budget"):
        spattn.oracle_mask(q, k, density=0.0)


def test_output_error_is_the_metric():
    rng = np.random.default_rng(SEED)
    want = rng.standard_normal(1000).astype(np.float32)
    got = want + rng.standard_normal(1000).astype(np.float32) * 0.01
    e = spattn.output_error(torch.from_numpy(got), want)
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert e["rel_l1"] == pytest.approx(d.sum() / np.abs(want.astype(np.float64)).sum(), rel=1e-12)
    assert e["max_abs"] == d.max() and e["first_non_finite"] == -1
    got[7] = np.nan
    e = spattn.output_error(got, want)
    assert np.isnan(e["rel_l1"]) and e["first_non_finite"] == 7
    with pytest.raises(spattn.Error, match="elements"):
        spattn.output_error(got[:10], want)


def test_similarity_fallback_keeps_exactly_the_dissimilar_tiles():
    """harness.low_similarity_tiles against the definition computed here in float64 (|mean of unit rows|², tiles of
    the mask's shape), on a query whose even 128-row blocks repeat one direction (similarity 1) and odd ones are
    random; then spattn_attention with the fallback keeps those tiles' rows dense and the others as the method chose."""
    g = torch.Generator().manual_seed(SEED)
    n, d = 300, 32
    q = torch.randn(1, 2, n, d, generator=g)
    for r0 in range(0, n, 256):
        q[:, :, r0:r0 + 128] = torch.randn(1, 2, 1, d, generator=g) * torch.rand(1, 2, min(128, n - r0), 1,
                                                                                    generator=g).add(0.5)
    k = torch.randn(1, 1, n, d, generator=g)
    v = torch.randn(1, 1, n, d, generator=g)
    mask = spattn.estimate("fgattn", q, k, causal=True, top_p=0.5)
    tq = mask.tile_q
    unit = q.double() / q.double().norm(dim=-1, keepdim=True)
    expected = np.zeros((1, mask.mask_heads, mask.num_q_tiles), dtype=bool)
    for t in range(mask.num_q_tiles):
        blocks = range(t * tq // 128, min((n + 127) // 128, ((t + 1) * tq - 1) // 128 + 1))
        for h in range(2):
            sims = [float((unit[0, h, b * 128:(b + 1) * 128].mean(0) ** 2).sum()) for b in blocks]
            expected[0, h * mask.mask_heads // 2, t] |= sum(sims) / len(sims) < 0.5
    low = harness.low_similarity_tiles(q, mask, 0.5)
    assert np.array_equal(low, expected) and low.any() and not low.all()
    out, fell_back = harness.spattn_attention("fgattn", fallback_sim=0.5, top_p=0.5)(q, k, v, True, None)
    bits, base = fell_back.to_bitmap(), mask.to_bitmap()
    dense = spattn.TileMask.dense(tile_q=tq, tile_k=mask.tile_k, batch=1, mask_heads=mask.mask_heads, seqlen_q=n,
                                  seqlen_kv=n, causal=True).to_bitmap()
    assert np.array_equal(bits[low], dense[low]) and np.array_equal(bits[~low], base[~low])
    assert torch.equal(out, spattn.attend(q, k, v, fell_back, causal=True))
