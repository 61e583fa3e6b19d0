"""spattn: training-free sparse attention (SpargeAttn, SALE, AnchorAttention, FG-Attn, BFLA) from Python.

Every function calls spattn's C++ library (the module ``spattn._spattn``); nothing here re-implements a method,
a mask rule or a numeric rule. Arrays are read through DLPack without a copy: NumPy arrays and torch CPU tensors
(host memory), torch and CuPy CUDA tensors (CUDA memory, when the library was built with CUDA). Arrays are
4-d ``[B, H, N, D]`` (``layout="bhnd"``, torch's SDPA order) or ``[B, N, H, D]`` (``layout="bnhd"``), any strides
the library takes (the last dimension contiguous). Bad input raises :class:`Error` with the library's message.

Outputs: ``out=`` is written in place when given; otherwise it is allocated by the input's own library (NumPy,
torch or CuPy) with q's dtype and device, in q's layout. Calls on CUDA arrays run on the legacy default stream and
return after it finished (the producer's pending work is ordered before it through DLPack's ``stream`` argument);
:class:`Plan` runs on the caller's stream without synchronising (CUDA graphs).
"""
import contextlib
import json
import os
import sys

from . import _spattn
from ._spattn import Error, TileMask, has_cuda

__all__ = ["Error", "TileMask", "Plan", "attend", "estimate", "sparse_attention", "calibrate", "methods",
           "backends", "has_cuda", "oracle_mask", "output_error"]

_LEGACY_DEFAULT_STREAM = 1  # DLPack's number for CUDA's legacy default stream (the public C++ API runs on it)
_CUDA = 2  # DLPack device type


def methods():
    """The methods, as {name: one-line summary}."""
    return dict(_spattn.methods())


def backends():
    """The linked backends, in the order backend="auto" tries them."""
    return _spattn.backends()


def _library(x):
    """'numpy', 'torch', 'cupy' or None: the library that made array x (without importing any)."""
    module = type(x).__module__.split(".")[0]
    return module if module in ("numpy", "torch", "cupy") else None


def _device(x, name):
    if not hasattr(x, "__dlpack_device__"):
        raise Error(f"{name}: expected an array with __dlpack__ (NumPy, torch, CuPy, JAX), got {type(x).__name__}")
    try:
        return tuple(x.__dlpack_device__())
    except Exception as e:  # e.g. torch's "meta" tensors
        raise Error(f"{name}: __dlpack_device__ failed: {e}") from e


def _empty_out(q, v, layout):
    """An output like q for the problem of q and v, made by q's library (q's dtype, device and layout)."""
    if layout not in ("bhnd", "bnhd"):
        raise Error(f"layout: expected 'bhnd' or 'bnhd', got {layout!r}")
    for name, x in (("q", q), ("v", v)):
        if len(getattr(x, "shape", ())) != 4:
            raise Error(f"{name}: expected 4 dimensions, got shape {tuple(getattr(x, 'shape', ()))}")
    shape = tuple(q.shape[:3]) + (v.shape[3],)  # [B, Hq, Nq, Dv] or [B, Nq, Hq, Dv]: q's layout
    library = _library(q)
    if library == "torch":
        return sys.modules["torch"].empty(shape, dtype=q.dtype, device=q.device)
    if library == "numpy":
        return sys.modules["numpy"].empty(shape, dtype=q.dtype)
    if library == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(q.device.id):
            return cupy.empty(shape, dtype=q.dtype)
    raise Error(f"out: spattn allocates outputs for NumPy, torch and CuPy arrays; give out= for {type(q).__name__}")


@contextlib.contextmanager
def _on_device_of(q):
    """Makes q's CUDA device current (the C++ library runs on the current device)."""
    device_type, device_id = _device(q, "q")
    library = _library(q)
    if device_type == _CUDA and library == "torch":
        with sys.modules["torch"].cuda.device(device_id):
            yield
    elif device_type == _CUDA and library == "cupy":
        with sys.modules["cupy"].cuda.Device(device_id):
            yield
    else:
        yield


def _call(layout, stream=_LEGACY_DEFAULT_STREAM):
    call = _spattn.Call()
    call.layout = layout
    call.stream = stream
    return call


def attend(q, k, v, mask, *, causal=False, scale=None, out=None, backend="auto", layout="bhnd", return_stats=False):
    """Exact attention over the tiles `mask` keeps (and the causal rule): softmax(scale·QKᵀ) V.

    q [B, Hq, Nq, D], k [B, Hkv, Nkv, D], v [B, Hkv, Nkv, Dv] (Hq a multiple of Hkv); causal attention is aligned
    bottom-right (row i sees keys j <= i + Nkv - Nq); scale defaults to 1/sqrt(D). Returns out [B, Hq, Nq, Dv]
    (with return_stats: (out, {backend, empty_rows, visited_tiles, pv_skipped})).
    """
    if out is None:
        out = _empty_out(q, v, layout)
    with _on_device_of(q):
        stats = _spattn.attend(q, k, v, mask, out, causal, scale, backend, _call(layout))
    return (out, stats) if return_stats else out


def estimate(method, q, k, *, causal=False, scale=None, backend="auto", layout="bhnd", return_info=False, **config):
    """Stage 1 of `method` ("sparge", "sale", "anchor", "fgattn", "bfla", "dense"): the TileMask for q and k.

    config: the method's options by the names of the spattn program's (tile_q=64, topk=0.3, tau=0.002, params=
    "sparge.json", ...); an option the method does not take raises Error listing those it takes. With return_info:
    (mask, {method, backend, candidates, selected}).
    """
    with _on_device_of(q):
        mask, info = _spattn.estimate(method, q, k, causal, scale, backend, _call(layout), config)
    return (mask, info) if return_info else mask


def sparse_attention(q, k, v, *, method, causal=False, scale=None, out=None, backend="auto", layout="bhnd",
                     return_mask=False, **config):
    """estimate() then attend() over its mask, with the method's executor options (SpargeAttn's PV-skip).

    Returns out, or with return_mask (out, mask, info) where info holds the estimate's and the attend's counts.
    """
    if out is None:
        out = _empty_out(q, v, layout)
    with _on_device_of(q):
        mask, info = _spattn.sparse_attention(method, q, k, v, out, causal, scale, backend, _call(layout), config)
    return (out, mask, info) if return_mask else out


def calibrate(method, samples, path, *, causal=False, scale=None, l1=0.08, l2=0.09, theta_steps=16, sale_theta=0.4,
              backend="auto", layout="bhnd", **config):
    """Searches per-head parameters of `method` ("sparge" or "sale") on samples [(q, k, v), ...] — all in host memory,
    or all CUDA tensors (then the search runs on the GPU; CUDA builds) — and writes them to `path` as the JSON of
    `spattn calibrate`; returns that JSON as a dict. Use them with
    estimate(..., params=path) / sparse_attention(..., params=path) or `spattn run --params path`.

    l1, l2, theta_steps: SpargeAttn's targets; sale_theta: SALE's error bound (spattn.hpp: CalibrationTargets).
    """
    path = os.fspath(path)
    _spattn.calibrate(method, list(samples), causal, scale, path, l1, l2, theta_steps, sale_theta, backend,
                      _call(layout), config)
    with open(path) as f:
        return json.load(f)


def oracle_mask(q, k, *, tile_q=128, tile_k=128, density=None, mass=None, threshold=None, per_kv_head=False,
                causal=False, scale=None, layout="bhnd"):
    """The oracle mask of q and k (spattn/oracle.hpp): per mask row the key tiles of most EXACT attention mass first,
    until one budget is met — density=ρ (the first ⌈ρ·R⌉ of a row's R reachable tiles), mass=τ (the smallest prefix
    holding τ of the row's mass) or threshold=ε (every tile of mass per query row ≥ ε). Not a method: it reads the
    true scores (the Q·Kᵀ half of dense attention, on the CPU reference), so q and k must be in host memory. The
    limit any estimator at that tile shape and budget can reach; one mask per query head, or per KV head (the union
    over its query heads) with per_kv_head=True."""
    budgets = [(name, value) for name, value in (("density", density), ("mass", mass), ("threshold", threshold))
               if value is not None]
    if len(budgets) != 1:
        raise Error("oracle_mask: give exactly one budget: density=, mass= or threshold=")
    (budget, value), = budgets
    return _spattn.oracle_mask(q, k, causal, scale, tile_q, tile_k, per_kv_head, budget, float(value), _call(layout))


def output_error(got, want):
    """How far `got` is from `want` (spattn/metrics.hpp, the one definition calibrate(), the spattn program, the
    benches and the quality harness use): {rel_l1: Σ|got − want| / Σ|want|, max_abs, l1, reference_l1,
    first_non_finite}, over both as float32 in C order, summed in fp64 in element order; NaN and infinity are never
    hidden. Arrays of the same size: NumPy, or torch tensors on any device (copied to the host)."""
    def host(x):
        if _library(x) == "torch":
            x = x.detach().float().cpu().numpy()
        return x
    return _spattn.output_error(host(got), host(want))


def _current_stream(q):
    """The current CUDA stream of q's library as a DLPack stream number."""
    library = _library(q)
    if library == "torch":
        stream = sys.modules["torch"].cuda.current_stream(q.device).cuda_stream
    elif library == "cupy":
        stream = sys.modules["cupy"].cuda.get_current_stream().ptr
    else:
        raise Error("stream: give stream= (a cudaStream_t as int) for arrays other than torch and CuPy")
    return stream or _LEGACY_DEFAULT_STREAM  # 0 (the legacy default stream) is 1 in DLPack


class Plan:
    """A method end to end on the GPU for one problem shape (spattn::cuda::Plan): the constructor allocates once,
    run() enqueues estimate -> attend on the caller's current stream without allocating or synchronising, so it can
    be captured in a CUDA graph. Needs spattn built with CUDA (spattn.has_cuda)."""

    def __init__(self, q, k, v, *, method, causal=False, scale=None, layout="bhnd", **config):
        if not has_cuda:
            raise Error("Plan: spattn was built without CUDA (configure with -DSPATTN_ENABLE_CUDA=ON)")
        self._layout = layout
        with _on_device_of(q):
            self._plan = _spattn.Plan(method, q, k, v, causal, scale, layout, config)

    def run(self, q, k, v, out=None, *, stream=None):
        """Enqueues the method on `stream` (a cudaStream_t as int; default: the current stream of q's library, whose
        pending work needs no synchronisation then) and returns out. Nothing waits for it."""
        if out is None:
            out = _empty_out(q, v, self._layout)
        if stream is None:
            stream, dlpack_stream = _current_stream(q), -1
        else:
            dlpack_stream = stream or _LEGACY_DEFAULT_STREAM
        with _on_device_of(q):
            self._plan.run(q, k, v, out, stream, dlpack_stream)
        return out

    def mask(self, stream=None):
        """The method's whole selection of the last run, downloaded (waits for `stream`, default: the legacy default
        stream); for a method whose estimator computes part of each row exactly (AnchorAttention), with those keys."""
        return self._plan.mask(_LEGACY_DEFAULT_STREAM if stream is None else stream)

    @property
    def workspace_bytes(self):
        return self._plan.workspace_bytes


from ._mask_export import _install as _install_mask_export  # noqa: E402

_install_mask_export(TileMask)
