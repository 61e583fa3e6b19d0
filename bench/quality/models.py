"""The trained models of the quality harness, beside transformers' Llama (lm.py):

- ``DiT``: a diffusion transformer over a (frames × height × width) token grid of video patches, full (non-causal)
  attention with 3-D rotary positions, trained as a rectified-flow denoiser (train.py);
- ``TinyLM``: a causal byte-level transformer from the same blocks, for the CPU tests (CI has no transformers).

Every attention layer calls ``torch.nn.functional.scaled_dot_product_attention`` at call time (looked up on the
module, not bound at import), so the harness can swap it for spattn's.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotary(x, cos, sin):
    """x [B, H, N, D] rotated pairwise (first half / second half of D) by angles cos/sin [N, D/2]."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


def axial_angles(shape, head_dim, base=10000.0):
    """Rotary angles [N, D/2] for a grid of `shape` (one axis per entry): the pairs are split among the axes, each
    axis with its own frequency ladder (the first axis gets the remainder)."""
    pairs = head_dim // 2
    per_axis = [pairs // len(shape)] * len(shape)
    per_axis[0] += pairs - sum(per_axis)
    grids = torch.meshgrid(*[torch.arange(n, dtype=torch.float32) for n in shape], indexing="ij")
    angles = []
    for positions, n_pairs in zip(grids, per_axis):
        freq = base ** (-torch.arange(n_pairs, dtype=torch.float32) / n_pairs)
        angles.append(positions.reshape(-1, 1) * freq)
    return torch.cat(angles, dim=-1)


def math_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """Dense attention in q's dtype by the textbook formula: the stand-in for torch < 2.0, which has no
    scaled_dot_product_attention (Debian 12's torch 1.13, where CI runs). Causal bottom-right = top-left here (Nq = Nkv
    in these models)."""
    assert attn_mask is None and dropout_p == 0.0
    if enable_gqa and k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    s = (q.float() @ k.float().transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if is_causal:
        n, m = s.shape[-2:]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(m - n + 1), float("-inf"))
    return (s.softmax(dim=-1) @ v.float()).to(q.dtype)


def sdpa(*args, **kwargs):
    """torch.nn.functional.scaled_dot_product_attention as it is at call time (the harness may have replaced it), or
    math_sdpa where this torch has none."""
    return getattr(F, "scaled_dot_product_attention", math_sdpa)(*args, **kwargs)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, causal):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.causal = heads, kv_heads, dim // heads, causal
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        extra = {"enable_gqa": True} if self.kv_heads != self.heads else {}
        out = sdpa(q, k, v, is_causal=self.causal, **extra)
        return self.o(out.transpose(1, 2).reshape(b, n, -1))


class Block(nn.Module):
    """Pre-norm transformer block; with `cond` (the DiT's timestep), adaLN: per-block scale, shift and gate."""

    def __init__(self, dim, heads, kv_heads, causal, mlp_ratio=4, cond=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=not cond)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=not cond)
        self.attn = Attention(dim, heads, kv_heads, causal)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(mlp_ratio * dim, dim))
        self.ada = nn.Linear(dim, 6 * dim) if cond else None
        if cond:
            nn.init.zeros_(self.ada.weight)
            nn.init.zeros_(self.ada.bias)

    def forward(self, x, cos, sin, c=None):
        if self.ada is None:
            x = x + self.attn(self.norm1(x), cos, sin)
            return x + self.mlp(self.norm2(x))
        s1, b1, g1, s2, b2, g2 = self.ada(c).unsqueeze(1).chunk(6, dim=-1)
        x = x + (1 + g1) * self.attn(self.norm1(x) * (1 + s1) + b1, cos, sin)
        return x + (1 + g2) * self.mlp(self.norm2(x) * (1 + s2) + b2)


class DiT(nn.Module):
    """Denoiser over clips [B, T, 3, H, W]: patches of patch×patch pixels become tokens on a (T, H/p, W/p) grid;
    predicts the rectified-flow velocity (noise − clip) from the noised clip and the noise level t in [0, 1]."""

    def __init__(self, dim=768, depth=6, heads=6, patch=2, channels=3):
        super().__init__()
        self.patch, self.channels, self.heads = patch, channels, heads
        self.embed = nn.Linear(channels * patch * patch, dim)
        self.time = nn.Sequential(nn.Linear(256, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, heads, causal=False, cond=True) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.out = nn.Linear(dim, channels * patch * patch)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self._angles = {}

    def config(self):
        return {"dim": self.embed.out_features, "depth": len(self.blocks), "heads": self.heads, "patch": self.patch,
                "channels": self.channels}

    def angles(self, grid, device):
        key = (grid, str(device))
        if key not in self._angles:
            a = axial_angles(grid, self.embed.out_features // self.heads).to(device)
            self._angles[key] = (a.cos(), a.sin())
        return self._angles[key]

    def forward(self, noisy, t):
        b, frames, c, h, w = noisy.shape
        p = self.patch
        grid = (frames, h // p, w // p)
        x = noisy.reshape(b, frames, c, h // p, p, w // p, p).permute(0, 1, 3, 5, 2, 4, 6).reshape(b, -1, c * p * p)
        freq = torch.exp(-math.log(10000.0) * torch.arange(128, device=t.device, dtype=torch.float32) / 128)
        emb = torch.cat([torch.sin(1000 * t[:, None] * freq), torch.cos(1000 * t[:, None] * freq)], dim=-1)
        cond = self.time(emb.to(self.embed.weight.dtype))
        x = self.embed(x)
        cos, sin = self.angles(grid, x.device)
        for block in self.blocks:
            x = block(x, cos, sin, cond)
        x = self.out(self.norm(x))
        return x.reshape(b, frames, h // p, w // p, c, p, p).permute(0, 1, 4, 2, 5, 3, 6).reshape(noisy.shape)


def denoising_loss(model, video, t, noise):
    """Rectified flow: x_t = (1 − t)·video + t·noise, target noise − video; mean squared error."""
    tt = t.view(-1, 1, 1, 1, 1)
    noisy = (1 - tt) * video + tt * noise
    return F.mse_loss(model(noisy.to(model.embed.weight.dtype), t).float(), (noise - video).float())


class TinyLM(nn.Module):
    """A causal byte-level transformer from the DiT's blocks (1-D rotary positions, GQA): the CPU tests' model."""

    def __init__(self, dim=64, depth=2, heads=4, kv_heads=2, vocab=256):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads, causal=True) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        a = axial_angles((tokens.shape[1],), self.embed.embedding_dim // self.heads).to(tokens.device)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, a.cos(), a.sin())
        return self.head(self.norm(x))


def lm_loss(logits, targets):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
