"""Trains the quality harness's models on the GPU machine from local data only (no download), seeded:

    python3 bench/quality/train.py lm  --seqlen 8192  --minutes 4 --out ckpt/lm8k
    python3 bench/quality/train.py lm  --seqlen 32768 --minutes 1.5 --init ckpt/lm8k --out ckpt/lm
    python3 bench/quality/train.py dit --frames 8  --minutes 3 --out ckpt/dit8
    python3 bench/quality/train.py dit --frames 32 --minutes 1 --init ckpt/dit8 --out ckpt/dit

lm: transformers' LlamaForCausalLM from a config (byte-level, GQA 6/2, head dim 128, 6 layers), on the Python sources of
the installed packages (corpus.py; held-out files never seen). dit: models.DiT on procedural clips (clips.py), 64×64
pixels in 2×2 patches, so 8 frames are 8192 tokens and 32 frames 32768. Both train in bf16 autocast with AdamW, a
linear warm-up and a cosine decay over the time budget (the schedule follows the clock, so a budget in minutes is a
whole run). The loss curve goes to OUT/log.json beside the weights (OUT/model.pt) and the config (OUT/config.json).
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clips  # noqa: E402
import corpus  # noqa: E402
import models  # noqa: E402

LM_CONFIG = dict(vocab_size=corpus.VOCAB, hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                 num_attention_heads=6, num_key_value_heads=2, head_dim=128, max_position_embeddings=32768,
                 rope_theta=500000.0, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                 pad_token_id=None)
DIT_CONFIG = dict(dim=768, depth=6, heads=6, patch=2, channels=3)
DIT_PIXELS = 64


def build_lm(config=None):
    import transformers
    cfg = transformers.LlamaConfig(**(config or LM_CONFIG))
    try:
        cfg._attn_implementation = "sdpa"  # the default where torch has SDPA; said for older transformers
    except AttributeError:
        pass
    return transformers.LlamaForCausalLM(cfg)


def load(path, device="cuda", dtype=torch.bfloat16):
    """(kind, model) from a directory written by this script, in eval mode."""
    with open(os.path.join(path, "config.json")) as f:
        meta = json.load(f)
    model = build_lm(meta["config"]) if meta["kind"] == "lm" else models.DiT(**meta["config"])
    model.load_state_dict(torch.load(os.path.join(path, "model.pt"), map_location="cpu"))
    return meta["kind"], model.to(device=device, dtype=dtype).eval()


def save(path, kind, config, model, log):
    os.makedirs(path, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(path, "model.pt"))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"kind": kind, "config": config}, f)
    with open(os.path.join(path, "log.json"), "w") as f:
        json.dump(log, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["lm", "dit"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--init")
    ap.add_argument("--minutes", type=float, default=4)
    ap.add_argument("--seqlen", type=int, default=8192, help="lm: tokens a sequence")
    ap.add_argument("--frames", type=int, default=8, help="dit: frames a clip (1024 tokens a frame)")
    ap.add_argument("--tokens", type=int, default=65536, help="tokens a step")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = "cuda"
    if args.kind == "lm":
        config = LM_CONFIG
        model = build_lm()
        train_stream, _ = corpus.build()
        stream = torch.from_numpy(train_stream.copy()).to(device)
        batch = max(1, args.tokens // args.seqlen)
        gen = torch.Generator(device=device).manual_seed(args.seed)
        print(f"lm: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, corpus "
              f"{len(stream) / 2**20:.0f} MiB, batch {batch} x {args.seqlen}", flush=True)

        def step_loss():
            starts = torch.randint(0, len(stream) - args.seqlen - 1, (batch,), device=device, generator=gen)
            idx = starts[:, None] + torch.arange(args.seqlen + 1, device=device)
            tokens = stream[idx].long()
            logits = model(input_ids=tokens[:, :-1]).logits
            return models.lm_loss(logits, tokens[:, 1:])
    else:
        config = DIT_CONFIG
        model = models.DiT(**config)
        batch = max(1, args.tokens // (args.frames * (DIT_PIXELS // config["patch"]) ** 2))
        print(f"dit: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, batch {batch} x "
              f"{args.frames} frames", flush=True)
        counter = [args.seed * 1_000_003]

        def step_loss():
            counter[0] += 1
            video = clips.clips(batch, args.frames, DIT_PIXELS, DIT_PIXELS, seed=counter[0], device=device)
            t = torch.rand(batch, device=device)
            return models.denoising_loss(model, video, t, torch.randn_like(video))
    if args.init:
        model.load_state_dict(torch.load(os.path.join(args.init, "model.pt"), map_location="cpu"))
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    log, start, step = [], time.time(), 0
    budget = args.minutes * 60
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        progress = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for group in opt.param_groups:
            group["lr"] = lr
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_loss()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0 or step == 1:
            log.append({"step": step, "seconds": round(time.time() - start, 1), "loss": loss.item(), "lr": lr})
        if step % 200 == 0 or step == 1:
            print(f"{args.kind} step {step} {log[-1]['seconds']} s loss {log[-1]['loss']:.4f}", flush=True)
    save(args.out, args.kind, config, model, {"args": vars(args), "steps": step, "curve": log})
    print(f"{args.kind}: {step} steps in {time.time() - start:.0f} s, saved {args.out}", flush=True)


if __name__ == "__main__":
    main()
