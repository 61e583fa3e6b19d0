"""Procedural video clips (no download): shapes that move, scale and occlude one another over a textured background
that the camera pans across. Each clip is frames × height × width RGB in [-1, 1], drawn on the device of `device` from a
seeded generator, so a seed names a clip on any machine.
"""
import math

import torch


def clips(count, frames, height, width, seed, device="cpu", shapes=5):
    """[count, frames, 3, height, width] float32 clips."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g)
    t = torch.arange(frames, dtype=torch.float32).view(1, frames, 1, 1)
    y = torch.linspace(0, 1, height).view(1, 1, height, 1)
    x = torch.linspace(0, 1, width).view(1, 1, 1, width)
    # Background: a few sinusoidal gratings, panned by a constant camera velocity per clip.
    pan_y, pan_x = (rand(count, 1, 1, 1) - 0.5) * 0.06, (rand(count, 1, 1, 1) - 0.5) * 0.06
    background = torch.zeros(count, 3, frames, height, width)
    for _ in range(3):
        fy, fx = rand(count, 1, 1, 1) * 12 + 2, rand(count, 1, 1, 1) * 12 + 2
        phase = rand(count, 1, 1, 1) * 2 * math.pi
        wave = torch.sin(fy * (y + pan_y * t) * 2 * math.pi / 2 + fx * (x + pan_x * t) * 2 * math.pi / 2 + phase)
        colour = rand(count, 3) * 0.6 - 0.3
        background += colour.view(count, 3, 1, 1, 1) * wave.unsqueeze(1)
    video = background
    for s in range(shapes):  # drawn back to front: a later shape occludes an earlier one
        cy, cx = rand(count, 1, 1, 1) * 0.8 + 0.1, rand(count, 1, 1, 1) * 0.8 + 0.1
        vy, vx = (rand(count, 1, 1, 1) - 0.5) * 0.08, (rand(count, 1, 1, 1) - 0.5) * 0.08
        radius = rand(count, 1, 1, 1) * 0.15 + 0.05
        grow = (rand(count, 1, 1, 1) - 0.5) * 0.06  # relative scale change per frame
        square = rand(count, 1, 1, 1) < 0.5
        py, px = cy + vy * t, cx + vx * t
        r = radius * torch.clamp(1 + grow * t, min=0.2)
        dy, dx = (y - py).abs(), (x - px).abs()
        inside = torch.where(square, torch.maximum(dy, dx) < r, dy * dy + dx * dx < r * r)
        colour = (rand(count, 3) * 2 - 1).view(count, 3, 1, 1, 1)
        shade = 1 - 0.5 * torch.clamp(torch.sqrt(dy * dy + dx * dx) / r, max=1)  # a little shading per shape
        video = torch.where(inside.unsqueeze(1), colour * shade.unsqueeze(1), video)
    return video.clamp(-1, 1).permute(0, 2, 1, 3, 4).contiguous().to(device)
