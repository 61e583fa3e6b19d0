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
    return _empty(q, tuple(q.shape[:3]) + (v.shape[3],))  # [B, Hq, Nq, Dv] or [B, Nq, Hq, Dv]: q's layout


def _empty(like, shape, float32=False, name="out"):
    """An uninitialised array of `shape` made by like's library on like's device, in like's dtype or float32."""
    library = _library(like)
    if library == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=torch.float32 if float32 else like.dtype, device=like.device)
    if library == "numpy":
        numpy = sys.modules["numpy"]
        return numpy.empty(shape, dtype=numpy.float32 if float32 else like.dtype)
    if library == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=cupy.float32 if float32 else like.dtype)
    raise Error(f"{name}: spattn allocates outputs for NumPy, torch and CuPy arrays; give {name}= for "
                f"{type(like).__name__}")


def _concat(parts, like):
    library = _library(like)
    if library == "torch":
        return sys.modules["torch"].cat(parts, dim=-1)
    return sys.modules[library].concatenate(parts, axis=-1)


class _Batch:
    """How a call's arrays are laid out: batched ([B, H, N, D] in `layout`) or a variable-length batch (packed
    [total, H, D] arrays and cu_seqlens, as FlashAttention's varlen functions take them), and the optional LSE."""

    def __init__(self, layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse):
        if (cu_seqlens_q is None) != (cu_seqlens_k is None):
            raise Error("cu_seqlens: give both cu_seqlens_q and cu_seqlens_k or neither")
        self.varlen = cu_seqlens_q is not None
        self.return_lse = return_lse
        self.layout = "bnhd" if self.varlen else layout
        if self.varlen:
            self.cu_q, self.cu_k = (self._offsets(c, name) for c, name in ((cu_seqlens_q, "cu_seqlens_q"),
                                                                           (cu_seqlens_k, "cu_seqlens_k")))
            lengths = [b - a for a, b in zip(self.cu_q, self.cu_q[1:])]
            self.max_q = int(max_seqlen_q) if max_seqlen_q is not None else max(lengths, default=0)
            self.max_k = int(max_seqlen_k) if max_seqlen_k is not None else 0
        elif max_seqlen_q is not None or max_seqlen_k is not None:
            raise Error("max_seqlen_q, max_seqlen_k: only with cu_seqlens_q and cu_seqlens_k")

    @staticmethod
    def _offsets(cu, name):
        try:
            values = cu.tolist() if hasattr(cu, "tolist") else list(cu)
            return [int(x) for x in values]
        except (TypeError, ValueError) as e:
            raise Error(f"{name}: expected a 1-d sequence of integer offsets: {e}") from e

    def arrays(self, *xs):
        """The arrays as the library reads them: packed [total, H, D] become [1, total, H, D] ("bnhd")."""
        if not self.varlen:
            return xs
        for name, x in zip("qkv", xs):
            if len(getattr(x, "shape", ())) != 3:
                raise Error(f"{name}: with cu_seqlens, expected a packed [total, H, D] array, got shape "
                            f"{tuple(getattr(x, 'shape', ()))}")
        return tuple(x[None] for x in xs)

    def out(self, q, v, out):
        """(out as returned, out as the library writes it)."""
        if out is None:
            out = _empty(q, tuple(q.shape[:2]) + (v.shape[2],)) if self.varlen else _empty_out(q, v, self.layout)
        return out, (out[None] if self.varlen else out)

    def call(self, q, stream=_LEGACY_DEFAULT_STREAM):
        call = _call(self.layout, stream)
        if self.varlen:
            call.cu_seqlens_q, call.cu_seqlens_kv = self.cu_q, self.cu_k
            call.max_seqlen_q, call.max_seqlen_kv = self.max_q, self.max_k
        if self.return_lse:
            if self.varlen:
                shape = (len(self.cu_q) - 1, q.shape[1], self.max_q)
            else:
                shape = (q.shape[0], q.shape[1] if self.layout == "bhnd" else q.shape[2],
                         q.shape[2] if self.layout == "bhnd" else q.shape[1])
            self.lse = _empty(q, shape, float32=True, name="lse")
            call.lse = self.lse[..., None]
        return call

    def result_lse(self):
        """The natural-log LSE: [B, Hq, Nq], or FlashAttention's varlen [Hq, total_q]."""
        if not self.varlen:
            return self.lse
        return _concat([self.lse[b, :, :e - a] for b, (a, e) in enumerate(zip(self.cu_q, self.cu_q[1:]))], self.lse)


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


_VARLEN_DOC = """
    Variable-length batches (FlashAttention's varlen layout): q [total_q, Hq, D], k [total_k, Hkv, D], v [total_k, Hkv,
    Dv] packed, with cu_seqlens_q / cu_seqlens_k (B+1 ascending offsets from 0, any 1-d integer sequence) and optionally
    max_seqlen_q / max_seqlen_k (default: the longest); out is [total_q, Hq, Dv]. return_lse=True also returns each
    row's natural-log log-sum-exp (−inf for a row that sees no key): [B, Hq, Nq], or [Hq, total_q] for a
    variable-length batch (FlashAttention's conventions), float32."""


def attend(q, k, v, mask, *, causal=False, scale=None, out=None, backend="auto", layout="bhnd", return_stats=False,
           cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False):
    """Exact attention over the tiles `mask` keeps (and the causal rule): softmax(scale·QKᵀ) V.

    q [B, Hq, Nq, D], k [B, Hkv, Nkv, D], v [B, Hkv, Nkv, Dv] (Hq a multiple of Hkv); causal attention is aligned
    bottom-right (row i sees keys j <= i + Nkv - Nq); scale defaults to 1/sqrt(D). Returns out [B, Hq, Nq, Dv]
    (with return_lse: (out, lse); with return_stats, the stats {backend, empty_rows, visited_tiles, pv_skipped} last).
    """
    batch = _Batch(layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse)
    out, out_view = batch.out(q, v, out)
    with _on_device_of(q):
        stats = _spattn.attend(*batch.arrays(q, k, v), mask, out_view, causal, scale, backend, batch.call(q))
    result = (out,) + ((batch.result_lse(),) if return_lse else ()) + ((stats,) if return_stats else ())
    return result if len(result) > 1 else out


attend.__doc__ += _VARLEN_DOC


def estimate(method, q, k, *, causal=False, scale=None, backend="auto", layout="bhnd", return_info=False,
             cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, **config):
    """Stage 1 of `method` ("sparge", "sale", "anchor", "fgattn", "bfla", "dense"): the TileMask for q and k.

    config: the method's options by the names of the spattn program's (tile_q=64, topk=0.3, tau=0.002, params=
    "sparge.json", ...); an option the method does not take raises Error listing those it takes. With return_info:
    (mask, {method, backend, candidates, selected}).
    """
    batch = _Batch(layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, False)
    with _on_device_of(q):
        mask, info = _spattn.estimate(method, *batch.arrays(q, k), causal, scale, backend, batch.call(q), config)
    return (mask, info) if return_info else mask


estimate.__doc__ += _VARLEN_DOC


def sparse_attention(q, k, v, *, method, causal=False, scale=None, out=None, backend="auto", layout="bhnd",
                     return_mask=False, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                     return_lse=False, **config):
    """estimate() then attend() over its mask, with the method's executor options (SpargeAttn's PV-skip).

    Returns out; with return_lse (out, lse); with return_mask, mask and info (the estimate's and the attend's counts)
    follow: (out[, lse], mask, info).
    """
    batch = _Batch(layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse)
    out, out_view = batch.out(q, v, out)
    with _on_device_of(q):
        mask, info = _spattn.sparse_attention(method, *batch.arrays(q, k, v), out_view, causal, scale, backend,
                                              batch.call(q), config)
    result = (out,) + ((batch.result_lse(),) if return_lse else ()) + ((mask, info) if return_mask else ())
    return result if len(result) > 1 else out


sparse_attention.__doc__ += _VARLEN_DOC


def calibrate(method, samples, path, *, causal=False, scale=None, l1=None, l2=None, theta_steps=None, sale_theta=None,
              rel_l1=None, backend="auto", layout="bhnd", **config):
    """Calibrates `method` on samples [(q, k, v), ...] — all in host memory, or all CUDA tensors (then the search runs
    on the GPU; CUDA builds) — and writes the result to `path` as the JSON of `spattn calibrate`; returns that JSON as
    a dict. Use it with estimate(..., params=path) / sparse_attention(..., params=path) or `spattn run --params path`.

    SpargeAttn and SALE get per-head parameters: l1, l2, theta_steps are SpargeAttn's targets, sale_theta SALE's error
    bound. A target left None keeps the library's default (spattn.hpp: CalibrationTargets, where each is explained). AnchorAttention, FG-Attn and BFLA get the setting of their main knob (θ, top-p, keep ratio) that keeps the
    fewest tiles with every head's rel L1 ≤ rel_l1 on the samples (or dense): give one layer's samples to calibrate
    that layer (spattn.hpp: calibrate, CalibrationTargets).
    """
    path = os.fspath(path)
    _spattn.calibrate(method, list(samples), causal, scale, path, l1, l2, theta_steps, sale_theta, rel_l1, backend,
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


def _workspace(workspace, q):
    """(device pointer, bytes) of a caller's workspace: a contiguous torch or CuPy array on q's CUDA device."""
    library = _library(workspace)
    if _device(workspace, "workspace") != _device(q, "q"):
        raise Error(f"workspace: on device {_device(workspace, 'workspace')}, q on {_device(q, 'q')}: the workspace "
                    "must be CUDA memory of q's device")
    if library == "torch":
        if not workspace.is_contiguous():
            raise Error("workspace: must be contiguous")
        return workspace.data_ptr(), workspace.numel() * workspace.element_size()
    if library == "cupy":
        if not workspace.flags.c_contiguous:
            raise Error("workspace: must be contiguous")
        return workspace.data.ptr, workspace.nbytes
    raise Error(f"workspace: expected a torch or CuPy array, got {type(workspace).__name__}")


class Plan:
    """A method end to end on the GPU for one problem shape (spattn::cuda::Plan): the constructor allocates once,
    run() enqueues estimate -> attend on the caller's current stream without allocating or synchronising, so it can
    be captured in a CUDA graph. Needs spattn built with CUDA (spattn.has_cuda).

    q, k, v give the shapes (and dtype) every run takes; the options are sparse_attention()'s: a variable-length batch
    (cu_seqlens_q / cu_seqlens_k, fixed for the plan), return_lse=True (run() returns (out, lse); the LSE lives in
    one array of the plan that every run overwrites). workspace=: device memory of the caller's (a contiguous torch or
    CuPy array on q's device of at least Plan.required_bytes(...) bytes, 256-byte aligned: torch.empty(n,
    dtype=torch.uint8, device=q.device) is) from which every device buffer of the plan is carved instead of being
    allocated; the plan keeps a reference to it and nothing else may use it while the plan lives."""

    def __init__(self, q, k, v, *, method, causal=False, scale=None, layout="bhnd", cu_seqlens_q=None,
                 cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False, workspace=None,
                 **config):
        if not has_cuda:
            raise Error("Plan: spattn was built without CUDA (configure with -DSPATTN_ENABLE_CUDA=ON)")
        self._batch = _Batch(layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse)
        self._workspace = workspace  # kept alive as long as the plan
        with _on_device_of(q):
            call = self._batch.call(q, stream=-1)  # only the shapes are read: no synchronisation
            self._plan = _spattn.Plan(method, *self._batch.arrays(q, k, v), causal, scale, call, config,
                                      None if workspace is None else _workspace(workspace, q))

    @staticmethod
    def required_bytes(q, k, v, *, method, causal=False, scale=None, layout="bhnd", cu_seqlens_q=None,
                       cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False, **config):
        """The bytes of device memory a Plan of these arguments takes as workspace= (nothing is allocated on the
        device but, with return_lse, the LSE array the plan would write)."""
        if not has_cuda:
            raise Error("Plan: spattn was built without CUDA (configure with -DSPATTN_ENABLE_CUDA=ON)")
        batch = _Batch(layout, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse)
        with _on_device_of(q):
            return _spattn.Plan.required_bytes(method, *batch.arrays(q, k, v), causal, scale, batch.call(q, stream=-1),
                                               config)

    def run(self, q, k, v, out=None, *, stream=None):
        """Enqueues the method on `stream` (a cudaStream_t as int; default: the current stream of q's library, whose
        pending work needs no synchronisation then) and returns out, or (out, lse) with return_lse. Nothing waits for
        it."""
        out, out_arg = self._batch.out(q, v, out)
        if stream is None:
            stream, dlpack_stream = _current_stream(q), -1
        else:
            dlpack_stream = stream or _LEGACY_DEFAULT_STREAM
        with _on_device_of(q):
            self._plan.run(*self._batch.arrays(q, k, v), out_arg, stream, dlpack_stream)
        return (out, self._batch.result_lse()) if self._batch.return_lse else out

    def mask(self, stream=None):
        """The method's whole selection of the last run, downloaded (waits for `stream`, default: the legacy default
        stream); for a method whose estimator computes part of each row exactly (AnchorAttention), with those keys."""
        return self._plan.mask(_LEGACY_DEFAULT_STREAM if stream is None else stream)

    @property
    def workspace_bytes(self):
        """Device bytes the plan holds (in the caller's workspace when it was given one)."""
        return self._plan.workspace_bytes


from ._mask_export import _install as _install_mask_export  # noqa: E402

_install_mask_export(TileMask)
