"""Capture a Hugging Face transformers model's attention inputs — Q, K, V after RoPE, as the attention kernel gets
them — for chosen layers, and save them as .npy for the spattn program:

    python -m spattn.capture --model /path/to/Llama-3.1-8B --prompt-file prompt.txt --layers 0,15,31 --out qkv/
    spattn run --method sparge --q qkv/layer15_q.npy --k qkv/layer15_k.npy --v qkv/layer15_v.npy
    spattn calibrate ... (the same files)

From Python: ``arrays = spattn.capture.capture(model, input_ids, layers=[0, 15])`` returns {layer: (q, k, v)} as
torch tensors [B, H, N, D] (k, v with the model's KV heads where the attention function gets them unrepeated).

The model runs one forward pass on the prompt (prefill). Where transformers routes attention through its
ALL_ATTENTION_FUNCTIONS table (transformers >= 4.48), the model's own implementation (e.g. "sdpa") is wrapped for
the pass: it records its query, key and value, which are after RoPE and before GQA's repetition. With an older
transformers the model must use attn_implementation="sdpa": torch.nn.functional.scaled_dot_product_attention is
wrapped and its calls are taken in layer order (K and V then arrive repeated to the query heads).

Files: layer{L}_q.npy, layer{L}_k.npy, layer{L}_v.npy, [1, H, N, D] float32 (exact for bf16 and fp16 models), or
with --bf16-bits the bfloat16 bit patterns as uint16 (read them with spattn run --bf16). The weights are the user's:
nothing here downloads anything unless from_pretrained is given a hub name.
"""
import argparse
import contextlib
import os

import numpy as np
import torch


@contextlib.contextmanager
def _recording_interface(model, record):
    """Wraps the model's entry in transformers' ALL_ATTENTION_FUNCTIONS (yields False where there is none)."""
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:
        yield False
        return
    name = getattr(model.config, "_attn_implementation", None)
    if name is None or name == "eager" or name not in ALL_ATTENTION_FUNCTIONS:
        yield False
        return
    original = ALL_ATTENTION_FUNCTIONS[name]

    def recording(module, query, key, value, *args, **kwargs):
        record(getattr(module, "layer_idx", None), query, key, value)
        return original(module, query, key, value, *args, **kwargs)

    ALL_ATTENTION_FUNCTIONS[name] = recording
    try:
        yield True
    finally:
        ALL_ATTENTION_FUNCTIONS[name] = original


@contextlib.contextmanager
def _recording_sdpa(record):
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention

    def recording(query, key, value, *args, **kwargs):
        record(None, query, key, value)
        return original(query, key, value, *args, **kwargs)

    functional.scaled_dot_product_attention = recording
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original


@torch.no_grad()
def capture(model, input_ids, layers, attention_mask=None):
    """One forward pass of `model` on input_ids [1, N]; returns {layer: (q, k, v)} for the layers asked for, as
    detached torch tensors [B, H, N, D] on the model's device."""
    wanted, captured, calls = set(layers), {}, []

    def record(layer, query, key, value):
        layer = len(calls) if layer is None else layer
        calls.append(layer)
        if layer in wanted:
            captured[layer] = tuple(t.detach().clone() for t in (query, key, value))

    with _recording_interface(model, record) as wrapped:
        if wrapped:
            model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        if not calls:  # no table, or a model that calls its attention past it
            if getattr(model.config, "_attn_implementation", "sdpa") != "sdpa":
                raise ValueError("capture: load the model with attn_implementation='sdpa' (this transformers "
                                 "routes other implementations past the capture)")
            with _recording_sdpa(record):
                model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    missing = wanted - set(captured)
    if missing:
        raise ValueError(f"capture: layers {sorted(missing)} were not seen (the model ran {len(calls)} attention calls)")
    return captured


def save(captured, out_dir, bf16_bits=False):
    """Writes layer{L}_{q,k,v}.npy into out_dir; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for layer, tensors in sorted(captured.items()):
        for name, t in zip("qkv", tensors):
            if bf16_bits:
                array = t.to(torch.bfloat16).cpu().view(torch.int16).numpy().view(np.uint16)
            else:
                array = t.float().cpu().numpy()
            path = os.path.join(out_dir, f"layer{layer}_{name}.npy")
            np.save(path, np.ascontiguousarray(array))
            paths.append(path)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a local model directory (or a hub name, if you have access)")
    prompt = parser.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="the prompt text")
    prompt.add_argument("--prompt-file", help="a file holding the prompt text")
    parser.add_argument("--layers", required=True, help="comma-separated layer indices, e.g. 0,15,31")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--max-tokens", type=int, default=None, help="truncate the prompt to this many tokens")
    parser.add_argument("--dtype", default="bfloat16", help="the model's dtype (default bfloat16)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--bf16-bits", action="store_true", help="save bfloat16 bit patterns as uint16 (spattn --bf16)")
    args = parser.parse_args(argv)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    text = args.prompt if args.prompt is not None else open(args.prompt_file).read()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=getattr(torch, args.dtype),
                                                 attn_implementation="sdpa").to(args.device).eval()
    ids = tokenizer(text, return_tensors="pt").input_ids[:, : args.max_tokens].to(args.device)
    layers = [int(x) for x in args.layers.split(",")]
    paths = save(capture(model, ids, layers), args.out, args.bf16_bits)
    print(f"{ids.shape[1]} tokens; wrote {len(paths)} files to {args.out}")
    bf16 = " --bf16" if args.bf16_bits else ""
    for layer in layers:
        files = " ".join(f"--{n} {os.path.join(args.out, f'layer{layer}_{n}.npy')}" for n in "qkv")
        print(f"  spattn run --method sparge {files}{bf16}")


if __name__ == "__main__":
    main()
