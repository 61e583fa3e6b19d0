"""Real text with no download: the Python sources of the installed packages, as bytes (a byte-level vocabulary).

Files are split into training and held-out sets by a hash of their path (never by position inside a file), so no
held-out file was seen in training. A "document" is one file; documents are joined with a separator byte (0x00,
which source files do not contain) into one stream per split, and sequences are windows of that stream.
"""
import hashlib
import os
import site
import sys
import sysconfig

import numpy as np

SEPARATOR = 0
VOCAB = 256


def source_files(roots=None, suffixes=(".py",)):
    """(root, path) of every file under the package roots (sorted, so the corpus is the same on every run of one
    machine)."""
    if roots is None:
        paths = sysconfig.get_paths()
        roots = sorted({paths["purelib"], paths["platlib"], *site.getsitepackages()})
        roots = [r for r in roots if os.path.isdir(r)]
    files = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(suffixes):
                    files.append((root, os.path.join(dirpath, name)))
    return files


def is_held_out(relpath, fraction=0.02):
    """A file is held out when the hash of its path (relative to its package root) falls below `fraction`."""
    return int.from_bytes(hashlib.sha256(relpath.encode()).digest()[:8], "little") < fraction * 2**64


def build(max_bytes=400 << 20, held_out_fraction=0.02, roots=None, min_size=2048):
    """(train, held_out): uint8 arrays of the concatenated files (at most max_bytes together)."""
    train, held, total = [], [], 0
    for root, path in source_files(roots):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if len(data) < min_size or b"\x00" in data:
            continue
        (held if is_held_out(os.path.relpath(path, root), held_out_fraction) else train).append(data + bytes([SEPARATOR]))
        total += len(data) + 1
        if total >= max_bytes:
            break
    join = lambda parts: np.frombuffer(b"".join(parts), dtype=np.uint8)
    return join(train), join(held)


def windows(stream, seqlen, count, seed):
    """`count` windows of seqlen + 1 bytes at seeded random offsets of `stream` (inputs and shifted targets)."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(stream) - seqlen - 1, size=count)
    return np.stack([stream[s:s + seqlen + 1] for s in starts]).astype(np.int64)


if __name__ == "__main__":
    train, held = build()
    print(f"train {len(train) / 2**20:.1f} MiB, held-out {len(held) / 2**20:.1f} MiB", file=sys.stderr)
