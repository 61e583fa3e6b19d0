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

# Each method's settings swept: its main knob (the first setting is the method's default in the registry), and for
# BFLA, whose keep-mass γ changed nothing on the trained models of 2026-11-27, its band and rescues.
SWEEPS = {
    "dense": [{}],
    "sparge": [{"topk": x} for x in (0.9, 0.5, 0.3, 0.7, 0.8)] + [{"topk": 0.0}],  # topk 0: TopCdf (the paper's τ)
    "sale": [{"tau": x} for x in (0.004, 0.02, 0.05, 0.1, 0.2)],
    "anchor": [{"theta": x} for x in (12.0, 14.0, 16.0, 20.0, 10.0, 8.0)],
    "fgattn": [{"top_p": x} for x in (0.9, 0.95, 0.99, 0.995, 0.999)],
    "bfla": [{"gamma": 0.99}, {"gamma": 0.999}, {"n_local": 16}, {"n_local": 32}, {"rho": 0.1}, {"rho": 0.3}],
}


def settings(methods=None):
    for method, configs in SWEEPS.items():
        if methods is None or method in methods:
            for config in configs:
                yield method, config


def synchronize():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def evaluate(loss_fn, layers, attention, compare=True):
    synchronize()
    start = time.time()
    with harness.Swap(attention, layers, compare=compare) as record:
        loss = loss_fn()
    synchronize()
    return loss, record.summary(), time.time() - start


def run_model(name, model, loss_fn, layers, causal, oracle_densities, log, rows):
    """Appends a row per setting to `rows` as it goes (the caller saves them after each: a run cut short keeps what it
    measured)."""
    dense_loss = loss_fn()  # the model's own attention, unswapped
    log(f"{name}: dense loss {dense_loss:.5f}")
    for method, config in settings(getattr(log, "methods", None)):
        row = {"model": name, "method": method, "config": config}
        try:
            loss, summary, seconds = evaluate(loss_fn, layers, harness.spattn_attention(method, **config))
            row.update(loss=loss, increase=100 * (loss / dense_loss - 1), seconds=seconds, **summary)
            log(f"{name} {method} {config}: density {summary['density']:.3f} loss {loss:.5f} "
                f"({row['increase']:+.3f} %) rel L1 {sum(summary['layer_rel_l1']) / layers:.4f} [{seconds:.1f} s]")
        except Exception as e:  # a setting a backend refuses: recorded, the table goes on
            row["error"] = f"{type(e).__name__}: {e}"
            log(f"{name} {method} {config}: ERROR {row['error']}")
            traceback.print_exc()
        rows.append(row)
        log.save()
    for tile_q, tile_k in oracle_densities["shapes"]:
        for density in oracle_densities["densities"]:
            row = {"model": name, "method": "oracle", "config": {"tile_q": tile_q, "tile_k": tile_k,
                                                                  "density": density}}
            try:
                loss, summary, seconds = evaluate(loss_fn, layers,
                                                  harness.oracle_attention(tile_q, tile_k, density=density))
                row.update(loss=loss, increase=100 * (loss / dense_loss - 1), seconds=seconds, **summary)
                log(f"{name} oracle {tile_q}x{tile_k} rho {density}: density {summary['density']:.3f} loss "
                    f"{loss:.5f} ({row['increase']:+.3f} %) [{seconds:.1f} s]")
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"
                log(f"{name} oracle: ERROR {row['error']}")
            rows.append(row)
            log.save()
    return dense_loss


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


def time_settings(name, captured, rows, log):
    """Per setting: spattn.Plan (estimate + attend on the device) summed over the layers' captured inputs, against
    cuDNN SDPA on the same inputs (K/V repeated to the query heads outside the timing)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from peers import timed as cuda_time  # median of CUDA-event timings after warm-up (bench/peers.py)
    cudnn = 0.0
    for q, k, v, causal, scale in captured:
        kr = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        vr = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            cudnn += cuda_time(lambda: torch.nn.functional.scaled_dot_product_attention(q, kr, vr, is_causal=causal,
                                                                                        scale=scale))
    log(f"{name}: cuDNN SDPA {cudnn:.3f} ms over {len(captured)} layers")
    for row in rows:
        if row["method"] == "oracle" or "error" in row:
            continue
        try:
            total = 0.0
            for q, k, v, causal, scale in captured:
                plan = spattn.Plan(q, k, v, method=row["method"], causal=causal, scale=scale, **row["config"])
                out = torch.empty_like(q)
                total += cuda_time(lambda: plan.run(q, k, v, out))
            row.update(ms=total, cudnn_ms=cudnn, speedup=cudnn / total)
            log(f"{name} {row['method']} {row['config']}: {total:.3f} ms, {cudnn / total:.2f}x cuDNN")
        except Exception as e:
            row["time_error"] = f"{type(e).__name__}: {e}"
            log(f"{name} {row['method']} {row['config']}: time ERROR {row['time_error']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lm")
    ap.add_argument("--dit")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lengths", default="8192,32768")
    ap.add_argument("--lm-sequences", default="8,2", help="held-out windows at each length")
    ap.add_argument("--dit-clips", default="4,1", help="held-out clips at each length")
    ap.add_argument("--oracle", default="8192", help="lengths at which the oracle runs (it is on the CPU)")
    ap.add_argument("--time", action="store_true", help="time each setting at the longest length")
    ap.add_argument("--methods", default=",".join(SWEEPS), help="the methods to sweep (oracle: --oracle)")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    log_file = open(args.out + ".log", "a")
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "models": {}, "rows": []}

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    def log(msg):
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()
    log.save = save
    log.methods = args.methods.split(",")
    oracle_lengths = {int(x) for x in args.oracle.split(",") if x}
    if args.lm:
        _, lm = train.load(args.lm)
        layers = lm.config.num_hidden_layers
        _, held = corpus.build()
        held = torch.from_numpy(held.copy())
        results["models"]["lm"] = {"config": train.LM_CONFIG, "held_out_bytes": len(held),
                                   "train_log": json.load(open(os.path.join(args.lm, "log.json")))}
        for n, count in zip(lengths, [int(x) for x in args.lm_sequences.split(",")]):
            windows = torch.from_numpy(corpus.windows(held.numpy(), n, count, seed=1234)).cuda()
            name = f"lm-{n // 1024}k"
            oracle = {"shapes": [(128, 128), (32, 32)] if n in oracle_lengths else [],
                      "densities": [0.1, 0.2, 0.3, 0.5]}
            dense = run_model(name, lm, lambda: harness.lm_loss_on(lm, windows), layers, True, oracle, log,
                              results["rows"])
            results["models"]["lm"][f"dense_loss_{n}"] = dense
            if args.time and n == max(lengths):
                captured = capture_qkv(lambda: harness.lm_loss_on(lm, windows[:1]), layers)
                time_settings(name, captured, [r for r in results["rows"] if r["model"] == name], log)
            save()
        del lm
        torch.cuda.empty_cache()
    if args.dit:
        _, dit = train.load(args.dit)
        layers = len(dit.blocks)
        results["models"]["dit"] = {"config": train.DIT_CONFIG,
                                    "train_log": json.load(open(os.path.join(args.dit, "log.json")))}
        for n, count in zip(lengths, [int(x) for x in args.dit_clips.split(",")]):
            frames = n // (train.DIT_PIXELS // train.DIT_CONFIG["patch"]) ** 2
            videos = clips.clips(count, frames, train.DIT_PIXELS, train.DIT_PIXELS, seed=987654321, device="cuda")
            videos = videos.to(torch.bfloat16)
            name = f"dit-{n // 1024}k"
            levels = [0.25, 0.5, 0.75]
            oracle = {"shapes": [(128, 128), (32, 32)] if n in oracle_lengths else [],
                      "densities": [0.1, 0.2, 0.3, 0.5]}
            loss_fn = lambda: harness.dit_loss_on(dit, videos, levels, seed=4321)
            dense = run_model(name, dit, loss_fn, layers, False, oracle, log, results["rows"])
            results["models"]["dit"][f"dense_loss_{n}"] = dense
            if args.time and n == max(lengths):
                captured = capture_qkv(lambda: harness.dit_loss_on(dit, videos[:1], levels[:1], seed=4321), layers)
                time_settings(name, captured, [r for r in results["rows"] if r["model"] == name], log)
            save()
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
