"""spattn as an attention implementation of Hugging Face transformers (its AttentionInterface, transformers >= 4.56):

    import spattn.transformers
    name = spattn.transformers.register(method="sale", tau=0.1)        # -> "spattn_sale"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=name)  # or model.set_attn_implementation(name)
    model = torch.compile(model, fullgraph=True)                        # the op traces without a graph break
    model.generate(input_ids, max_new_tokens=32)                        # prefill and decode (dynamic cache)

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
  spattn.sparse_attention(cu_seqlens_q=...)) and a cache with more key slots than tokens seen (a static cache, so
  also generate()'s compiled CUDA-graph decoding, which needs one: its unwritten slots would be attended; use the
  default dynamic cache): with spattn.Error eagerly, by a device-side assertion under torch.compile where the values
  cannot be read without a graph break (the CUDA context is then lost; nothing runs unmasked).
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
        if attention_mask is not None:
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
        if query.shape[2] == 1:  # decode: one row over the cache (a shape, so a static branch under compile)
            out = spattn.torch.sparse_attention(query, key, value, method="dense", causal=bool(causal), scale=scaling)
        else:
            out = spattn.torch.sparse_attention(query, key, value, method=method, causal=bool(causal), scale=scaling,
                                                **options)
        return out.transpose(1, 2).contiguous(), None

    return forward


_PADDED = ("spattn attention: the batch is padded (the attention mask has padded positions); run unpadded sequences, "
           "or spattn.sparse_attention with cu_seqlens_q / cu_seqlens_k")
_STATIC = ("spattn attention: the cache has more key slots than tokens seen (a static cache?); spattn's causal rule "
           "would attend to the unwritten slots: use the default dynamic cache")


def mask_function(batch_size=None, q_length=None, kv_length=None, q_offset=0, kv_offset=0, attention_mask=None,
                  **kwargs):
    """transformers' AttentionMaskInterface entry for spattn: no mask (spattn computes its own), after refusing what
    spattn's causal rule would get wrong: a padding mask with a padded position, and a cache with more key slots than
    tokens seen (a static cache). Eagerly with spattn.Error; while compiling, a check on values that cannot be read on
    the host without a graph break (the mask; a static layer's offset, which transformers may give as a tensor) is a
    device-side assertion (torch._assert_async, traced into the graph and replayed by CUDA graphs): the process's CUDA
    context is lost, but nothing runs unmasked."""
    import torch

    def require(ok, message):  # ok: a bool, or a one-element tensor
        if isinstance(ok, torch.Tensor):
            if _compiling():
                torch._assert_async(ok, message)
                return
            ok = bool(ok)
        if not ok:
            raise spattn.Error(message)

    if attention_mask is not None:
        require(attention_mask.all(), _PADDED)
    if q_length is not None and kv_length is not None:
        seen = q_offset + q_length
        require(seen.reshape(()) == kv_length - kv_offset if isinstance(seen, torch.Tensor)
                else seen == kv_length - kv_offset, _STATIC)
    return None


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
