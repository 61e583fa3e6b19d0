"""bench/results/quality.md's tables and plot from a quality.py JSON (run here, on the CPU: matplotlib):

    python3 bench/quality/report.py bench/results/quality/h100-2026-11-27.json bench/results/quality/loss-vs-density.png

Prints the markdown tables (per model and length: each setting's density, loss increase, mean per-layer rel L1 and,
where timed, ms and × cuDNN; the speed-at-quality summary) and writes the plot of loss increase against density.
"""
import json

METHODS = ["sparge", "sale", "anchor", "fgattn", "bfla"]
NAMES = {"sparge": "SpargeAttn", "sale": "SALE", "anchor": "AnchorAttention", "fgattn": "FG-Attn", "bfla": "BFLA",
         "dense": "dense (spattn)", "oracle": "oracle"}


def setting(row):
    c = row["config"]
    if row["method"] == "oracle":
        return f"{c['tile_q']}×{c['tile_k']} ρ {c['density']}"
    if "calibrated" in c:
        targets = c["calibrated"]
        return "calibrated" + (f" (rel L1 ≤ {targets['rel_l1']})" if "rel_l1" in targets else " (the paper's targets)")
    return ", ".join(f"{k} {v}" for k, v in c.items()) or "—"


def mean_l1(row):
    if "mean_rel_l1" in row:
        return row["mean_rel_l1"]
    l1 = [x for x in row.get("layer_rel_l1", []) if x == x]
    return sum(l1) / len(l1) if l1 else float("nan")


def tables(data):
    models = []
    for r in data["rows"]:
        if r["model"] not in models:
            models.append(r["model"])
    out = []
    for m in models:
        rows = [r for r in data["rows"] if r["model"] == m]
        timed = any("ms" in r for r in rows)
        flex = any("flex_ms" in r for r in rows)
        cudnn = next((r["cudnn_ms"] for r in rows if "cudnn_ms" in r), None)
        out.append(f"### {m}\n")
        if cudnn is not None:
            out.append(f"cuDNN SDPA dense: {cudnn:.2f} ms over the 6 layers. FlexAttention: build + attention on the "
                       "method's own masks (spattn's estimate not in it).\n")
        head = "| method | setting | density | loss Δ % | mean rel L1 |" + (" ms (6 layers) | × cuDNN |" if timed else "")
        head += " FlexAttention ms (build + attn) |" if flex else ""
        out.append(head)
        out.append("|---|---|---|---|---|" + ("---|---|" if timed else "") + ("---|" if flex else ""))
        for r in rows:
            if "error" in r:
                out.append(f"| {NAMES[r['method']]} | {setting(r)} | {r['error']} | | |" + (" | |" if timed else "")
                           + (" |" if flex else ""))
                continue
            l1 = mean_l1(r)
            line = (f"| {NAMES[r['method']]} | {setting(r)} | {r['density']:.3f} | {r['increase']:+.3f} | "
                    + (f"{l1:.4f} |" if l1 == l1 else "— |"))
            if timed:
                line += f" {r['ms']:.2f} | {r['speedup']:.2f} |" if "ms" in r else " | |"
            if flex:
                line += (f" {r['flex_build_ms'] + r['flex_ms']:.2f} ({r['flex_build_ms']:.2f} + {r['flex_ms']:.2f}) |"
                         if "flex_ms" in r else " |")
            out.append(line)
        out.append("")
    return "\n".join(out)


def at_quality(data, model, bound):
    """Per method, the fastest timed setting of `model` within `bound` % loss increase (or the densest untimed)."""
    out = {}
    for method in METHODS:
        ok = [r for r in data["rows"] if r["model"] == model and r["method"] == method and "error" not in r
              and r["increase"] <= bound]
        timed = [r for r in ok if "ms" in r]
        if timed:
            out[method] = min(timed, key=lambda r: r["ms"])
        elif ok:
            out[method] = min(ok, key=lambda r: r["density"])
    return out


def plot(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = []
    for r in data["rows"]:
        if r["model"] not in models:
            models.append(r["model"])
    cols = 2
    nrows = (len(models) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6 * cols, 4 * nrows), squeeze=False)
    axes = axes.ravel()
    for ax in axes[len(models):]:
        ax.axis("off")
    for ax, m in zip(axes, models):
        rows = [r for r in data["rows"] if r["model"] == m and "error" not in r]
        for method in METHODS:
            pts = sorted((r["density"], r["increase"]) for r in rows if r["method"] == method
                         and "calibrated" not in r["config"])
            if pts:
                line, = ax.plot(*zip(*pts), "o-", label=NAMES[method], ms=4)
                cal = [(r["density"], r["increase"]) for r in rows if r["method"] == method
                       and "calibrated" in r["config"]]
                if cal:
                    ax.plot(*zip(*cal), "*", color=line.get_color(), ms=11, label=f"{NAMES[method]} calibrated")
        for tile in ((128, 128), (32, 32)):
            pts = sorted((r["density"], r["increase"]) for r in rows if r["method"] == "oracle"
                         and (r["config"]["tile_q"], r["config"]["tile_k"]) == tile)
            if pts:
                ax.plot(*zip(*pts), "k--" if tile[0] == 128 else "k:", label=f"oracle {tile[0]}×{tile[1]}")
        for y in (0.5, 1.0):
            ax.axhline(y, color="grey", lw=0.6)
        ax.set_yscale("symlog", linthresh=0.5)
        ax.set_ylim(-0.5, 200)
        ax.set_xlim(0, 1.02)
        ax.set_title(m)
        ax.set_xlabel("density (kept tiles / reachable tiles)")
        ax.set_ylabel("loss increase against dense, %")
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[:len(models)]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    axes[0].legend(handles.values(), handles.keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def defaults(data, commit, overrides, also=()):
    """data/quality-defaults.json for `spattn demo`: per method, its default's loss increase on each model. The
    default is the first setting quality.py swept (SWEEPS puts each method's registry default first), or the
    override ("anchor:theta=20" when a default moved after the run)."""
    chosen = {}
    for r in data["rows"]:
        if r["method"] in METHODS and r["method"] not in chosen and "calibrated" not in r["config"]:
            chosen[r["method"]] = r["config"]
    for o in overrides:
        method, _, kv = o.partition(":")
        key, _, value = kv.partition("=")
        chosen[method] = {key: float(value)}
    out = {"gpu": data["gpu"], "commit": commit, "defaults": {}}
    for method in METHODS:
        if method not in chosen:
            continue
        entry = {"setting": ", ".join(f"{k} {v}" for k, v in chosen[method].items())}
        for source in [data, *also]:  # a column the run lacks comes from the first other run that has it
            for r in source["rows"]:
                if (r["method"] == method and r["config"] == chosen[method] and "error" not in r
                        and r["model"] not in entry):
                    entry[r["model"]] = round(r["increase"], 3)
        out["defaults"][method] = entry
    return out


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("plot", nargs="?")
    ap.add_argument("--defaults", help="write data/quality-defaults.json (the demo's measured loss) here")
    ap.add_argument("--commit", default="?", help="the commit the run measured (for --defaults)")
    ap.add_argument("--default", action="append", default=[], help="METHOD:KEY=VALUE, a default moved after the run")
    ap.add_argument("--also", action="append", default=[], help="another run's JSON for the columns this one lacks")
    args = ap.parse_args()
    data = json.load(open(args.json))
    print(tables(data))
    for bound in (0.5, 1.0):
        print(f"\nlm-32k at <= {bound} %:")
        for method, r in at_quality(data, "lm-32k", bound).items():
            print(f"  {NAMES[method]}: {setting(r)} density {r['density']:.3f} Δ {r['increase']:+.3f} % "
                  + (f"{r['ms']:.2f} ms {r['speedup']:.2f}x" if "ms" in r else "untimed"))
    if args.plot:
        plot(data, args.plot)
    if args.defaults:
        with open(args.defaults, "w") as f:
            also = [json.load(open(path)) for path in args.also]
            json.dump(defaults(data, args.commit, args.default, also), f, indent=1, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
