"""The quality table: each method at each setting of its main knob in every attention layer of the trained models,
the loss increase against dense, the density, the per-layer rel L1, the oracle mask at the same tile shapes beside
them, and (with --time) the attention's time at 32K against cuDNN SDPA. On the GPU machine, after train.py:

    python3 bench/quality/quality.py --lm ckpt/lm --dit ckpt/dit --out results/quality.json --time

Writes the JSON (every number) and prints the table; bench/quality/report.py turns the JSON into
bench/results/quality.md and its plot.
"""
import argparse
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clips  # noqa: E402
import corpus  # noqa: E402
import harness  # noqa: E402
import train  # noqa: E402

import spattn  # noqa: E402

# Each method's settings swept: its main knob (the first setting is the method's default in the registry); for BFLA,
# whose keep-mass γ changed nothing on the trained models of 2026-11-27, its top-k floor (keep_ratio), band and rescues.
SWEEPS = {
    "dense": [{}],
    "sparge": [{"topk": x} for x in (0.9, 0.5, 0.3, 0.7, 0.8)] + [{"topk": 0.0}],  # topk 0: TopCdf (the paper's τ)
    "sale": [{"tau": x} for x in (0.004, 0.02, 0.05, 0.1, 0.2)],
    "anchor": [{"theta": x} for x in (20.0, 12.0, 14.0, 16.0, 10.0)],
    "fgattn": [{"top_p": x} for x in (0.99, 0.9, 0.95, 0.995, 0.999)],
    "bfla": [{"gamma": 0.99}, {"keep_ratio": 0.1}, {"keep_ratio": 0.3}, {"keep_ratio": 0.5}, {"n_local": 32},
             {"rho": 0.3}],
}
# At the DiT's 32K, where AnchorAttention takes over a minute a setting, the settings that can still be a default
# (those within about +1 % at 8K in the last run, and each method's default).
LONG_DIT = {
    "dense": [{}],
    "sparge": [{"topk": 0.9}, {"topk": 0.7}, {"topk": 0.0}],
    "sale": [{"tau": x} for x in (0.004, 0.02, 0.05)],
    "anchor": [{"theta": 20.0}, {"theta": 16.0}],
    "fgattn": [{"top_p": x} for x in (0.99, 0.9, 0.995, 0.999)],
    "bfla": [{"gamma": 0.99}, {"keep_ratio": 0.3}, {"keep_ratio": 0.5}],
}
# Issue 41's experiment (--sweep fallback): AnchorAttention and FG-Attn keep every key tile of a query tile whose rows
# are not self-similar (harness.spattn_attention's fallback_sim: SpargeAttn's similarity rule), beside the same
# settings without it; SpargeAttn the same (its own rule, theta, also forces every key block that is not
# self-similar: at 0.4 it kept every tile of the committed LM capture); SALE τ 0.2 as the yardstick.
FALLBACK = {
    "dense": [{}],
    "anchor": [{"theta": 12.0}, {"theta": 12.0, "fallback_sim": 0.3}, {"theta": 12.0, "fallback_sim": 0.4},
               {"theta": 20.0, "fallback_sim": 0.4}],
    "fgattn": [{"top_p": 0.99}, {"top_p": 0.99, "fallback_sim": 0.3}, {"top_p": 0.99, "fallback_sim": 0.4},
               {"top_p": 0.95, "fallback_sim": 0.4}, {"top_p": 0.9, "fallback_sim": 0.4}],
    "sparge": [{"topk": 0.5}, {"topk": 0.5, "fallback_sim": 0.4}, {"topk": 0.7, "fallback_sim": 0.4}],
    "sale": [{"tau": 0.2}],
}
# AnchorAttention's and FG-Attn's defaults (--sweep defaults: θ 20 and top-p 0.99 since 2026-11-28) beside the papers'
# (θ 12, top-p 0.9) and their neighbours.
DEFAULT_CANDIDATES = {
    "dense": [{}],
    "anchor": [{"theta": x} for x in (20.0, 12.0, 16.0, 24.0)],
    "fgattn": [{"top_p": x} for x in (0.99, 0.9)],
}
# SALE's scale groups (--sweep sale_groups; issue 42): int8 codes with the paper's per-thread groups and with block
# groups (one Q scale a 64-row block, K scales a 128-key segment), beside the int4 default, at τ 0.004 / 0.05 / 0.2.
SALE_GROUPS = {
    "dense": [{}],
    "sale": [{"tau": t, **g} for t in (0.004, 0.05, 0.2)
             for g in ({}, {"bits": 8}, {"bits": 8, "groups": "block"})],
}
# calibrate() per layer on a training input (not the held-out one), then the held-out loss with those parameters:
# SpargeAttn and SALE with their papers' targets, the others against two per-head rel L1 bounds.
CALIBRATIONS = [("sale", {}), ("sparge", {}), ("fgattn", {"rel_l1": 0.002}), ("fgattn", {"rel_l1": 0.01}),
                ("bfla", {"rel_l1": 0.002}), ("bfla", {"rel_l1": 0.01}), ("anchor", {"rel_l1": 0.002}),
                ("anchor", {"rel_l1": 0.01})]


def settings(methods=None, sweeps=SWEEPS):
    for method, configs in sweeps.items():
        if methods is None or method in methods:
            for config in configs:
                yield method, config


class Deadline:
    """Rows not started by `at` (time.time()) are skipped and recorded as such: the run ends inside its device time."""

    def __init__(self, at):
        self.at = at

    def passed(self):
        return self.at is not None and time.time() > self.at


def synchronize():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def evaluate(loss_fn, layers, attention):
    """The loss with `attention` in every layer; rel L1 per layer on the first forward (harness.Swap's compare)."""
    synchronize()
    start = time.time()
    with harness.Swap(attention, layers, compare=layers) as record:
        loss = loss_fn()
    synchronize()
    return loss, record.summary(), time.time() - start


def measure(name, method, config, attention, loss_fn, dense_loss, layers, log, rows, deadline, **extra):
    """One row: the held-out loss with `attention` in every layer, against dense. Appended to `rows` and saved at once
    (a run cut short keeps what it measured)."""
    row = {"model": name, "method": method, "config": config, **extra}
    if deadline.passed():
        row["error"] = "skipped: the run's deadline had passed"
    else:
        try:
            loss, summary, seconds = evaluate(loss_fn, layers, attention())
            row.update(loss=loss, increase=100 * (loss / dense_loss - 1), seconds=seconds, **summary)
            log(f"{name} {method} {config}: density {summary['density']:.3f} loss {loss:.5f} "
                f"({row['increase']:+.3f} %) rel L1 {sum(summary['layer_rel_l1']) / layers:.4f} [{seconds:.1f} s]")
        except Exception as e:  # a setting a backend refuses: recorded, the table goes on
            row["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
    if "error" in row:
        log(f"{name} {method} {config}: {row['error']}")
    rows.append(row)
    log.save()
    return row


def run_model(name, loss_fn, layers, sweeps, calibrated, oracle_densities, log, rows, deadline):
    """The sweep, then the calibrated settings ({(method, targets): per-layer params files}), then the oracle."""
    dense_loss = loss_fn()  # the model's own attention, unswapped
    log(f"{name}: dense loss {dense_loss:.5f}")
    for method, config in settings(getattr(log, "methods", None), sweeps):
        measure(name, method, config, lambda: harness.spattn_attention(method, **config), loss_fn, dense_loss, layers,
                log, rows, deadline)
    for (method, targets), params in calibrated.items():
        measure(name, method, {"calibrated": dict(targets)}, lambda: harness.calibrated_attention(method, params),
                loss_fn, dense_loss, layers, log, rows, deadline, params=params)
    for tile_q, tile_k in oracle_densities["shapes"]:
        for density in oracle_densities["densities"]:
            measure(name, "oracle", {"tile_q": tile_q, "tile_k": tile_k, "density": density},
                    lambda: harness.oracle_attention(tile_q, tile_k, density=density), loss_fn, dense_loss, layers,
                    log, rows, deadline)
    return dense_loss


def calibrate_layers(tag, captured, directory, log, deadline, methods):
    """spattn.calibrate per layer on a training input's captured (q, k, v): {(method, targets): [params file of each
    layer]} for the CALIBRATIONS whose method is swept (a method that fails is logged and left out)."""
    os.makedirs(directory, exist_ok=True)
    out = {}
    for method, targets in CALIBRATIONS:
        if method not in methods or deadline.passed():
            continue
        key = (method, tuple(sorted(targets.items())))
        suffix = "-".join(f"{k}{v}" for k, v in sorted(targets.items()))
        try:
            start, paths = time.time(), []
            for i, (q, k, v, causal, scale) in enumerate(captured):
                path = os.path.join(directory, f"{tag}-{method}{'-' + suffix if suffix else ''}-layer{i}.json")
                spattn.calibrate(method, [(q, k, v)], path, causal=causal, scale=scale, **targets)
                paths.append(path)
            out[key] = paths
            log(f"{tag}: calibrated {method} {targets} on {len(captured)} layers in {time.time() - start:.1f} s")
        except Exception as e:
            log(f"{tag}: calibrate {method} {targets}: ERROR {type(e).__name__}: {e}")
            traceback.print_exc()
    return out


def capture_qkv(forward, layers):
    """Each attention layer's (q, k, v, causal, scale) of one dense forward."""
    captured = []
    dense = harness.dense_attention()  # torch's SDPA, looked up before the swap replaces it

    def attention(q, k, v, causal, scale):
        captured.append((q.clone(), k.clone(), v.clone(), causal, scale))
        return dense(q, k, v, causal, scale)
    with harness.Swap(attention, layers, compare=False):
        forward()
    return captured


def bf16_bits(x):
    """A bf16 tensor as the uint16 bit patterns spattn's npy reader takes for bf16 (NumPy has no bf16)."""
    import numpy as np
    return x.to(torch.bfloat16).contiguous().cpu().view(torch.int16).numpy().view(np.uint16)


def add_capture(captures, prefix, captured, layer, heads_q, heads_kv):
    """Layer `layer`'s first heads_q query heads and heads_kv K/V heads, [H, N, D] bf16 bits, for the demo's
    committed captures (the scale and causality beside them)."""
    q, k, v, causal, scale = captured[layer]
    captures[prefix + "_q"] = bf16_bits(q[0, :heads_q])
    captures[prefix + "_k"] = bf16_bits(k[0, :heads_kv])
    captures[prefix + "_v"] = bf16_bits(v[0, :heads_kv])
    import numpy as np
    scale = scale if scale is not None else q.shape[-1] ** -0.5  # SDPA's default
    captures[prefix + "_meta"] = np.array([float(causal), float(scale), float(layer)])


def time_settings(name, captured, rows, log, deadline, flex_rows):
    """Per setting: spattn.Plan (estimate + attend on the device) summed over the layers' captured inputs, against
    cuDNN SDPA on the same inputs (K/V repeated to the query heads outside the timing); for the rows flex_rows(row)
    picks, FlexAttention on each layer's mask from that Plan (bench/peers.py: create_block_mask from the mask's tile
    bitmap, its build counted, spattn's estimate not)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from peers import timed as cuda_time  # median of CUDA-event timings after warm-up (bench/peers.py)
    from peers import flex_on_bitmap
    cudnn = 0.0
    for q, k, v, causal, scale in captured:
        kr = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        vr = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            cudnn += cuda_time(lambda: torch.nn.functional.scaled_dot_product_attention(q, kr, vr, is_causal=causal,
                                                                                        scale=scale))
    log(f"{name}: cuDNN SDPA {cudnn:.3f} ms over {len(captured)} layers")
    for row in rows:
        if row["method"] == "oracle" or "error" in row or deadline.passed():
            continue
        try:
            total, flex_build, flex_attend, flex = 0.0, 0.0, 0.0, flex_rows(row)
            for layer, (q, k, v, causal, scale) in enumerate(captured):
                config = dict(row["config"]) if "params" not in row else {"params": row["params"][layer]}
                plan = spattn.Plan(q, k, v, method=row["method"], causal=causal, scale=scale, **config)
                out = torch.empty_like(q)
                total += cuda_time(lambda: plan.run(q, k, v, out))
                if flex:
                    mask = plan.mask()
                    bits = torch.from_numpy(mask.to_bitmap()).to(q.device)
                    build_ms, attend_ms = flex_on_bitmap(q, k, v, bits, mask.tile_q, mask.tile_k, causal, scale)
                    flex_build += build_ms
                    flex_attend += attend_ms
            row.update(ms=total, cudnn_ms=cudnn, speedup=cudnn / total)
            if flex:
                row.update(flex_build_ms=flex_build, flex_ms=flex_attend)
            log(f"{name} {row['method']} {row['config']}: {total:.3f} ms, {cudnn / total:.2f}x cuDNN"
                + (f"; flex {flex_build:.2f} + {flex_attend:.2f} ms" if flex else ""))
        except Exception as e:
            row["time_error"] = f"{type(e).__name__}: {e}"
            log(f"{name} {row['method']} {row['config']}: time ERROR {row['time_error']}")
            traceback.print_exc()
        log.save()


def flex_worthy(default_configs):
    """The rows FlexAttention runs on: each method's default and every setting within +1 %."""
    def pick(row):
        return row["method"] != "dense" and (row["config"] == default_configs.get(row["method"])
                                             or row.get("increase", 1e9) <= 1.0)
    return pick


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lm")
    ap.add_argument("--dit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lengths", default="8192,32768")
    ap.add_argument("--lm-sequences", default="8,2", help="held-out windows at each length")
    ap.add_argument("--dit-clips", default="4,1", help="held-out clips at each length")
    ap.add_argument("--oracle", default="8192", help="lengths at which the oracle runs (it is on the CPU)")
    ap.add_argument("--oracle-densities", default="0.1,0.2,0.3")
    ap.add_argument("--time", action="store_true", help="time each setting at the longest length")
    ap.add_argument("--methods", default=",".join(SWEEPS), help="the methods to sweep (oracle: --oracle)")
    ap.add_argument("--calibrate", action="store_true", help="calibrate() per layer and measure it (CALIBRATIONS)")
    ap.add_argument("--captures", help="write small captures of both models' Q/K/V here (.npz, for the demo)")
    ap.add_argument("--sweep", choices=("main", "fallback", "defaults", "sale_groups"), default="main",
                    help="main: SWEEPS (LONG_DIT at the DiT's 32K); fallback: the FALLBACK experiment; defaults: "
                         "DEFAULT_CANDIDATES; sale_groups: SALE_GROUPS (all at every length)")
    ap.add_argument("--deadline", type=float, help="epoch seconds after which no row starts (recorded as skipped)")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    log_file = open(args.out + ".log", "a")
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "models": {}, "rows": []}
    deadline = Deadline(args.deadline)
    captures = {}

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
        if args.captures and captures:
            import numpy as np
            np.savez_compressed(args.captures, **captures)

    def log(msg):
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()
    log.save = save
    log.methods = args.methods.split(",")
    oracle_lengths = {int(x) for x in args.oracle.split(",") if x}
    oracle_densities = [float(x) for x in args.oracle_densities.split(",") if x]
    defaults = {m: configs[0] for m, configs in SWEEPS.items()}
    calib_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "calibrated")

    def oracle_at(n):
        return {"shapes": [(32, 32)] if n in oracle_lengths else [], "densities": oracle_densities}

    def stage(name, loss_fn, layers, n, calibrated, capture):
        sweeps = {"fallback": FALLBACK, "defaults": DEFAULT_CANDIDATES, "sale_groups": SALE_GROUPS}.get(
            args.sweep, LONG_DIT if name == "dit-32k" else SWEEPS)
        dense = run_model(name, loss_fn, layers, sweeps, calibrated, oracle_at(n), log, results["rows"], deadline)
        if args.time and n == max(lengths):
            time_settings(name, capture(), [r for r in results["rows"] if r["model"] == name], log, deadline,
                          flex_worthy(defaults))
        save()
        return dense

    if args.lm:
        _, lm = train.load(args.lm)
        layers = lm.config.num_hidden_layers
        train_stream, held = corpus.build()
        held = torch.from_numpy(held.copy())
        results["models"]["lm"] = {"config": train.LM_CONFIG, "held_out_bytes": len(held),
                                   "train_log": json.load(open(os.path.join(args.lm, "log.json")))}
        forward = lambda windows: harness.lm_loss_on(lm, windows)
        if args.captures:  # one GQA group (3 query heads, 1 K/V head) of the middle layer, 4096 held-out bytes
            window = torch.from_numpy(corpus.windows(held.numpy(), 4096, 1, seed=4242)).cuda()
            add_capture(captures, "lm", capture_qkv(lambda: forward(window), layers), layers // 2, 3, 1)
            save()
        calibrated = {}
        if args.calibrate:  # on one 8K window of the training text
            window = torch.from_numpy(corpus.windows(train_stream, 8192, 1, seed=99)).cuda()
            calibrated = calibrate_layers("lm", capture_qkv(lambda: forward(window), layers), calib_dir, log, deadline,
                                          log.methods)
        del train_stream
        for n, count in zip(lengths, [int(x) for x in args.lm_sequences.split(",")]):
            windows = torch.from_numpy(corpus.windows(held.numpy(), n, count, seed=1234)).cuda()
            name = f"lm-{n // 1024}k"
            results["models"]["lm"][f"dense_loss_{n}"] = stage(
                name, lambda: forward(windows), layers, n, calibrated,
                lambda: capture_qkv(lambda: forward(windows[:1]), layers))
        del lm
        torch.cuda.empty_cache()
    if args.dit:
        _, dit = train.load(args.dit)
        layers = len(dit.blocks)
        results["models"]["dit"] = {"config": train.DIT_CONFIG,
                                    "train_log": json.load(open(os.path.join(args.dit, "log.json")))}
        tokens_per_frame = (train.DIT_PIXELS // train.DIT_CONFIG["patch"]) ** 2

        def videos_of(count, frames, seed):
            return clips.clips(count, frames, train.DIT_PIXELS, train.DIT_PIXELS, seed=seed,
                               device="cuda").to(torch.bfloat16)
        levels = [0.25, 0.5, 0.75]
        if args.captures:  # 2 of the middle layer's heads, one 2-frame clip (2048 tokens) at noise level 0.5
            clip = videos_of(1, 2, seed=424242)
            add_capture(captures, "dit", capture_qkv(lambda: harness.dit_loss_on(dit, clip, [0.5], seed=7), layers),
                        layers // 2, 2, 2)
            save()
        calibrated = {}
        if args.calibrate:  # on one 8-frame training-distribution clip (not the held-out seed)
            clip = videos_of(1, 8, seed=12345)
            calibrated = calibrate_layers("dit", capture_qkv(lambda: harness.dit_loss_on(dit, clip, [0.5], seed=11),
                                                             layers), calib_dir, log, deadline, log.methods)
        for n, count in zip(lengths, [int(x) for x in args.dit_clips.split(",")]):
            videos = videos_of(count, n // tokens_per_frame, seed=987654321)
            name = f"dit-{n // 1024}k"
            loss_fn = lambda: harness.dit_loss_on(dit, videos, levels, seed=4321)
            results["models"]["dit"][f"dense_loss_{n}"] = stage(
                name, loss_fn, layers, n, calibrated,
                lambda: capture_qkv(lambda: harness.dit_loss_on(dit, videos[:1], levels[:1], seed=4321), layers))
    save()
    print("\n| model | method | setting | density | loss Δ % | mean rel L1 | ms | × cuDNN |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results["rows"]:
        if "error" in r:
            print(f"| {r['model']} | {r['method']} | {r['config']} | error | | | | |")
            continue
        l1 = [x for x in r["layer_rel_l1"] if x == x]
        print(f"| {r['model']} | {r['method']} | {r['config']} | {r['density']:.3f} | {r['increase']:+.3f} | "
              f"{sum(l1) / max(len(l1), 1):.4f} | {r.get('ms', float('nan')):.2f} | {r.get('speedup', float('nan')):.2f} |")


if __name__ == "__main__":
    main()
