"""spattn for PyTorch: a drop-in for torch.nn.functional.scaled_dot_product_attention and a torch.library custom op.

    import spattn.torch
    out = spattn.torch.scaled_dot_product_attention(q, k, v, is_causal=True, method="sparge", topk=0.3)

    with spattn.torch.patched(method="sparge", topk=0.3):   # every F.scaled_dot_product_attention call in the block
        model.generate(...)                                  # (e.g. a transformers model with attn_implementation="sdpa")

The op ``torch.ops.spattn.sparse_attention`` (PyTorch >= 2.4, torch.library.custom_op) has a fake implementation,
so torch.compile traces through it without a graph break. With an older PyTorch the same function runs eagerly
(``HAS_CUSTOM_OP`` is False). Forward only: there is no backward.

On CUDA tensors the op runs a cached spattn.Plan (one per method, options and shape; the last 16 kept; its device
memory a workspace from torch's caching allocator) on the current stream: asynchronous like any torch op, and
capturable in a CUDA graph after a first (warm-up) call. A method the GPU pipeline does not cover runs through
spattn.sparse_attention instead (synchronous: the library's dispatcher picks the backend, or says why none covers the
call).
"""
import collections
import contextlib
import json

import torch

import spattn

HAS_CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op")


def _out_like(q, v):
    return q.new_empty(tuple(q.shape[:3]) + (v.shape[3],))


_PLANS = collections.OrderedDict()  # (method, options, shapes, ...) -> spattn.Plan, or None: not covered
_MAX_PLANS = 16


def _plan(q, k, v, method, causal, scale, config):
    key = (method, config, causal, scale, tuple(q.shape), tuple(k.shape), tuple(v.shape), q.dtype, q.device.index)
    if key in _PLANS:
        _PLANS.move_to_end(key)
        return _PLANS[key]
    try:
        options = dict(method=method, causal=causal, scale=scale, **json.loads(config))
        # The plan's device buffers come from torch's caching allocator (counted by torch.cuda.memory_allocated,
        # returned to its pool when the plan leaves the cache).
        workspace = torch.empty(spattn.Plan.required_bytes(q, k, v, **options), dtype=torch.uint8, device=q.device)
        plan = spattn.Plan(q, k, v, workspace=workspace, **options)
    except spattn.Error:
        plan = None  # e.g. a method without a GPU estimator: the dispatcher's path (which explains what it cannot do)
    _PLANS[key] = plan
    if len(_PLANS) > _MAX_PLANS:
        _PLANS.popitem(last=False)
    return plan


def _run(q, k, v, method, causal, scale, config):
    out = _out_like(q, v)
    plan = _plan(q, k, v, method, causal, scale, config) if q.is_cuda and spattn.has_cuda else None
    if plan is not None:
        plan.run(q, k, v, out)
    else:
        spattn.sparse_attention(q, k, v, method=method, causal=causal, scale=scale, out=out, **json.loads(config))
    return out


if HAS_CUSTOM_OP:
    from typing import Optional

    @torch.library.custom_op("spattn::sparse_attention", mutates_args=())
    def sparse_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, method: str, causal: bool,
                            scale: Optional[float], config: str) -> torch.Tensor:
        """spattn.sparse_attention as an op: q, k, v [B, H, N, D] (any strides spattn takes); config: the method's
        options as a JSON object."""
        return _run(q, k, v, method, causal, scale, config)

    @sparse_attention_op.register_fake
    def _(q, k, v, method, causal, scale, config):
        return _out_like(q, v)
else:
    sparse_attention_op = None


def _config_json(config):
    return json.dumps(config, sort_keys=True)


# torch.compile evaluates the options' JSON while tracing (a constant of the call site) instead of breaking the graph
# on the C encoder.
_assume_constant = getattr(getattr(torch, "compiler", None), "assume_constant_result", None) or getattr(
    getattr(torch, "_dynamo", None), "assume_constant_result", None)
if _assume_constant is not None:
    _config_json = _assume_constant(_config_json)


def sparse_attention(q, k, v, *, method, causal=False, scale=None, **config):
    """spattn.sparse_attention on torch tensors [B, H, N, D] through the custom op (eagerly without one)."""
    config_json = _config_json(config)
    if HAS_CUSTOM_OP:
        return torch.ops.spattn.sparse_attention(q, k, v, method, causal, scale, config_json)
    return _run(q, k, v, method, causal, scale, config_json)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, method="sparge", **config):
    """torch.nn.functional.scaled_dot_product_attention's signature, computed by spattn's `method` (with its
    options as keywords). query [B, Hq, L, E], key [B, Hkv, S, E], value [B, Hkv, S, Ev] (or without B), in
    torch's layout, read in place through their strides (the last dimension must be contiguous).

    What SDPA takes and spattn does not raises spattn.Error instead of computing something else: an attn_mask
    (spattn's masks come from the method), dropout, is_causal with L != S (torch aligns that mask top-left, spattn
    bottom-right), Hq != Hkv without enable_gqa (as torch)."""
    if attn_mask is not None:
        raise spattn.Error("attn_mask: spattn computes its own sparse mask; pass attn_mask=None "
                           "(is_causal=True for causal attention)")
    if dropout_p != 0.0:
        raise spattn.Error(f"dropout_p: spattn has no dropout, got {dropout_p}")
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise spattn.Error(f"query, key, value: expected [B, H, N, D] or [H, N, D], got {tuple(query.shape)}, "
                           f"{tuple(key.shape)}, {tuple(value.shape)}")
    if is_causal and query.shape[2] != key.shape[2]:
        raise spattn.Error(f"is_causal: with L = {query.shape[2]} != S = {key.shape[2]} torch aligns the causal mask "
                           "top-left and spattn bottom-right; call spattn.sparse_attention(causal=True) for the latter")
    if not enable_gqa and query.shape[1] != key.shape[1]:
        raise spattn.Error(f"query has {query.shape[1]} heads, key {key.shape[1]}: pass enable_gqa=True (as torch)")
    out = sparse_attention(query, key, value, method=method, causal=bool(is_causal), scale=scale, **config)
    return out.squeeze(0) if squeeze else out


@contextlib.contextmanager
def patched(*, method="sparge", **config):
    """Within the block, torch.nn.functional.scaled_dot_product_attention is spattn's (with `method` and config)."""
    functional = torch.nn.functional
    original = getattr(functional, "scaled_dot_product_attention", None)  # PyTorch < 2.0 has none

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                            method=method, **config)

    functional.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        if original is None:
            del functional.scaled_dot_product_attention
        else:
            functional.scaled_dot_product_attention = original
