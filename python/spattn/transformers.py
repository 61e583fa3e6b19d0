"""spattn as an attention implementation of Hugging Face transformers (its AttentionInterface, transformers >= 4.56):

    import spattn.transformers
    name = spattn.transformers.register(method="sale", tau=0.1)        # -> "spattn_sale"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=name)  # or model.set_attn_implementation(name)
    model = torch.compile(model, fullgraph=True)                        # the op traces without a graph break
    model.generate(input_ids, max_new_tokens=32)                        # prefill and decode (dynamic or static cache)

Every attention layer then runs spattn.torch.sparse_attention (a torch.library op: on CUDA a cached spattn.Plan on
the current stream). Per-layer calibrated parameters: register(method, params=[path of layer 0, path of layer 1, ...])
(spattn.calibrate on each layer's inputs; the layer is the module's layer_idx).

What the function takes from transformers and what it refuses (spattn.Error, never a silently different result):
- query [B, Hq, L, D], key / value [B, Hkv, S, D] (GQA: Hq a multiple of Hkv); the result [B, L, Hq, Dv], no weights.
- The methods are prefill methods: a decode step (one query over the cache, L = 1) runs spattn's dense attention.
- Causal layers use spattn's causal rule, aligned bottom-right: with a cache, the L new queries are the last L rows
  of the S keys, so decoding and chunked prefill need no mask. Non-causal layers (is_causal False) attend to every
  key.
- The mask transformers would build is replaced by register()'s mask function, which returns no mask: spattn
  computes its own. It refuses a padding mask with a padded position (use unpadded or variable-length batches:
  spattn.sparse_attention(cu_seqlens_q=...)): with spattn.Error eagerly, by a device-side assertion under
  torch.compile where the values cannot be read without a graph break (the CUDA context is then lost; nothing runs
  unmasked).
- A static cache (generate(cache_implementation="static"), and with it generate()'s compiled CUDA-graph decoding):
  the mask function passes the tokens written so far; a prefill must start at the first slot (the keys are then the
  first L slots: spattn as without a cache; a chunked prefill into a static cache is refused, by spattn.Error or,
  compiled, a device-side assertion) and a decode step attends to the written slots only (dense, fp32 torch ops with
  a key mask built on the device).
- Sliding-window layers, attention dropout in training, an explicit 4-D attention mask and output_attentions are
  refused.
"""
import spattn
import spattn.torch


def _compiling():
    import torch
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling())


def attention_forward(method, params=None, **config):
    """The attention function of transformers' AttentionInterface for spattn's `method` with its options (the
    keywords of spattn.sparse_attention), or per-layer calibrated parameters params[layer_idx]."""
    if params is not None and config:
        raise spattn.Error("attention_forward: give params= (calibrated per layer) or the method's options, not both")

    def forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, is_causal=None, **kwargs):
        written = _static_cache_tokens(attention_mask)
        if attention_mask is not None and written is None:
            raise spattn.Error("spattn attention: got an attention mask; spattn computes its own sparse mask (register() "
                               "installs a mask function that builds none: load the model with the name it returns)")
        if dropout and module.training:
            raise spattn.Error(f"spattn attention: no dropout (got {dropout} in training mode)")
        if kwargs.get("output_attentions", False):
            raise spattn.Error("spattn attention: output_attentions is not available (no weights are formed)")
        if getattr(module, "sliding_window", None):
            raise spattn.Error("spattn attention: sliding-window layers are not supported "
                               f"(sliding_window = {module.sliding_window})")
        causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
        options = config
        if params is not None:
            layer = getattr(module, "layer_idx", None)
            if layer is None or not 0 <= layer < len(params):
                raise spattn.Error(f"spattn attention: params has {len(params)} layers; this module's layer_idx is "
                                   f"{layer}")
            options = {"params": str(params[layer])}
        if written is not None:
            if query.shape[2] == 1:
                return _decode_static(query, key, value, written.to(key.device), scaling), None
            key, value = _prefill_static(query, key, value, written)
        if query.shape[2] == 1:  # decode: one row over the cache (a shape, so a static branch under compile)
            out = spattn.torch.sparse_attention(query, key, value, method="dense", causal=bool(causal), scale=scaling)
        else:
            out = spattn.torch.sparse_attention(query, key, value, method=method, causal=bool(causal), scale=scaling,
                                                **options)
        return out.transpose(1, 2).contiguous(), None

    return forward


_PADDED = ("spattn attention: the batch is padded (the attention mask has padded positions); run unpadded sequences, "
           "or spattn.sparse_attention with cu_seqlens_q / cu_seqlens_k")
_CHUNKED_STATIC = ("spattn attention: a prefill into a static cache must start at its first slot (chunked prefill "
                   "needs the default dynamic cache)")
_SLOTS = "spattn attention: more tokens seen than the cache has key slots"


def _static_cache_tokens(attention_mask):
    """The tokens written into a static cache, as register()'s mask function passes them (a 1-element int64 tensor),
    or None for anything else."""
    import torch
    if (isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 1 and attention_mask.numel() == 1
            and attention_mask.dtype == torch.int64):
        return attention_mask
    return None


def _decode_static(query, key, value, written, scaling):
    """One query row over a static cache: dense attention over its written slots, in fp32 with torch ops (the key mask
    built on the device from `written`: no host read, so it compiles and replays in CUDA graphs; the query heads of a
    KV head grouped, so K/V are not repeated). [B, 1, Hq, Dv]."""
    import torch
    batch, heads_q, _, dim = query.shape
    heads_kv, slots = key.shape[1], key.shape[2]
    scale = scaling if scaling is not None else dim ** -0.5
    q = query.reshape(batch, heads_kv, heads_q // heads_kv, dim).float()
    scores = (q @ key.float().transpose(-1, -2)) * scale  # [B, Hkv, group, S]
    visible = torch.arange(slots, device=key.device) < written
    weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    out = (weights @ value.float()).to(query.dtype)  # [B, Hkv, group, Dv]
    return out.reshape(batch, 1, heads_q, value.shape[-1])


def _prefill_static(query, key, value, written):
    """A prefill of L tokens into an empty static cache: the keys are its first L slots. A prefill that does not start
    at slot 0 (chunked, or a second prompt) is refused: spattn.Error eagerly, a device-side assertion while compiling."""
    import torch
    rows = query.shape[2]
    if _compiling():
        torch._assert_async(written[0] == rows, _CHUNKED_STATIC)
    elif int(written[0]) != rows:
        raise spattn.Error(f"{_CHUNKED_STATIC} ({int(written[0]) - rows} tokens were in the cache)")
    return key[:, :, :rows], value[:, :, :rows]


def mask_function(batch_size=None, q_length=None, kv_length=None, q_offset=0, kv_offset=0, attention_mask=None,
                  **kwargs):
    """transformers' AttentionMaskInterface entry for spattn: spattn computes its own sparse mask, so this builds
    none. It returns None (a dynamic cache: its key slots are the tokens seen) or, for a cache with more slots than
    tokens seen (a static cache), the tokens written so far as a 1-element int64 tensor, for the attention function,
    which then attends only to those slots. transformers' StaticLayer gives its query offset as 0 (an int) until
    its first update and as a tensor (occupied slots counted on the device) after it: the prefill's count is known on
    the host, a decode step's stays on the device (compiled, CUDA graphs). generate() hands this function's earlier
    result back as the attention mask: it is recognised, not taken for padding. It refuses a padding mask with a
    padded position: spattn.Error eagerly; while compiling, where values cannot be read on the host without a graph
    break, a device-side assertion (torch._assert_async, traced into the graph and replayed by CUDA graphs) — the
    process's CUDA context is lost, but no padded batch runs unmasked."""
    import torch
    if attention_mask is not None and _static_cache_tokens(attention_mask) is None:
        if _compiling():
            torch._assert_async(attention_mask.all(), _PADDED)
        elif not bool(attention_mask.all()):
            raise spattn.Error(_PADDED)
    if q_length is None or kv_length is None:
        return None
    seen = q_offset + q_length
    if isinstance(seen, torch.Tensor):  # a static layer after its first update
        return seen.reshape(1).to(torch.int64)
    slots = kv_length - kv_offset
    if seen == slots:
        return None
    if seen > slots:
        raise spattn.Error(f"{_SLOTS} ({seen} tokens, {slots} slots)")
    device = kwargs.get("device") or (attention_mask.device if attention_mask is not None else None)
    return torch.tensor([seen], dtype=torch.int64, device=device)


def register(method="sparge", name=None, params=None, **config):
    """Registers spattn's `method` (with its options, or per-layer params files) with transformers'
    AttentionInterface and AttentionMaskInterface under `name` (default "spattn_<method>"); returns the name, to
    give as attn_implementation=."""
    from transformers import AttentionInterface
    try:
        from transformers import AttentionMaskInterface
    except ImportError:
        from transformers.masking_utils import AttentionMaskInterface
    name = name or f"spattn_{method}"
    AttentionInterface.register(name, attention_forward(method, params=params, **config))
    AttentionMaskInterface.register(name, mask_function)
    return name
