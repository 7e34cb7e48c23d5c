"""A tiny random-weight checkpoint of one architecture and its transformers reference, for
weft's architecture tests (tests/architectures.rs).

    python scripts/make_arch_fixture.py llama3 tests/fixtures/llama3-tiny
    python scripts/make_arch_fixture.py qwen3 tests/fixtures/qwen3-tiny
    python scripts/make_arch_fixture.py mistral tests/fixtures/mistral-tiny
    python scripts/make_arch_fixture.py gemma2 tests/fixtures/gemma2-tiny
    python scripts/make_arch_fixture.py gemma3 tests/fixtures/gemma3-tiny
    python scripts/make_arch_fixture.py phi3 tests/fixtures/phi3-tiny

Each model is built with its real transformers config class, with the architecture's special
features switched on (Llama 3 RoPE scaling with positions past `original_max_position_embeddings`,
Qwen3's per-head q/k norms, Mistral's sliding window under a longer prompt, Gemma 2's soft-capping, pre- and post-norms,
GeGLU and alternating local layers, Gemma 3's local RoPE base and 5:1 layers, Phi-3's fused
qkv and gate_up matrices and LongRoPE whose generation crosses `original_max_position_embeddings`),
grouped-query attention and odd head counts. Weights are rounded to
f16 and stored so; the reference runs in f32 on the rounded weights, so both sides see the same
numbers. Writes:

- config.json, model.safetensors (transformers' save_pretrained),
- model.gguf (the same weights with llama.cpp's key and tensor names, written with `gguf`),
- input.json and one .npy per checkpoint of one forward pass over the prompt (embedding; per
  block attention output, MLP output and residual; final norm; logits),
- reference.json: the greedy ids `generate` gives for 16 new tokens, and the top-two margins.

The tokenizer is tests/fixtures/qwen2-tiny/tokenizer.json (vocabulary 700), shared.

Needs: pip install torch transformers gguf numpy
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(__file__))
from tiny_models import greedy_reference, randomize, save_folder, write_gguf  # noqa: E402

# Longer than the Llama 3 fixture's original context (16), so that prompt and continuation
# run past the scaling threshold.
PROMPT = [5, 230, 118, 466, 27, 301, 77, 612, 9, 140, 355, 88, 41, 523, 260, 19, 402, 95, 170, 333]


def tiny(config_class, **family):
    """A config of `config_class` at the fixtures' size (vocabulary 700, width 48, MLP 64, two
    layers, one KV head, 256 positions), with the family's own settings over it."""
    shared = dict(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
    )
    return config_class(**{**shared, **family})


def rope(theta):
    return {"rope_type": "default", "rope_theta": theta}


def llama3():
    config = tiny(
        transformers.LlamaConfig,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=16,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    )
    return config, transformers.LlamaForCausalLM, "llama"


def qwen3():
    config = tiny(
        transformers.Qwen3Config,
        num_attention_heads=5,
        head_dim=16,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        rope_parameters=rope(1000000.0),
    )
    return config, transformers.Qwen3ForCausalLM, "qwen3"


def mistral():
    # A window of 8 under a 20-token prompt: most of the prompt and every generated token
    # attend to the window only.
    config = tiny(
        transformers.MistralConfig,
        num_attention_heads=3,
        head_dim=16,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        sliding_window=8,
        rope_parameters=rope(10000.0),
    )
    return config, transformers.MistralForCausalLM, "llama"


def gemma2():
    # Three layers: local, global, local. Soft-capping small enough to bend the scores and
    # logits of these weights, a query scalar other than head_dim.
    config = tiny(
        transformers.Gemma2Config,
        num_hidden_layers=3,
        num_attention_heads=3,
        head_dim=16,
        rms_norm_eps=1e-6,
        sliding_window=8,
        query_pre_attn_scalar=24,
        attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0,
        rope_parameters=rope(10000.0),
    )
    return config, transformers.Gemma2ForCausalLM, "gemma2"


def gemma3():
    # Six layers: five local (base 10,000, window 8) to one global (base 1,000,000, linear
    # scaling 2), q/k norms.
    config = tiny(
        transformers.Gemma3TextConfig,
        intermediate_size=32,
        num_hidden_layers=6,
        num_attention_heads=3,
        head_dim=16,
        rms_norm_eps=1e-6,
        sliding_window=8,
        query_pre_attn_scalar=24,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 2.0},
            "sliding_attention": rope(10000.0),
        },
    )
    return config, transformers.Gemma3ForCausalLM, "gemma3"


def phi3():
    # LongRoPE with an original context of 24: the 20-token prompt rotates with the short
    # factors, generation switches to the long ones at position 24 (transformers picks per
    # forward call), and cos/sin carry the attention factor of max / original = 256 / 24.
    pairs = 8
    config = tiny(
        transformers.Phi3Config,
        num_attention_heads=3,
        original_max_position_embeddings=24,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "short_factor": [1.0 + 0.25 * i for i in range(pairs)],
            "long_factor": [1.0 + 3.0 * i for i in range(pairs)],
            "original_max_position_embeddings": 24,
        },
    )
    return config, transformers.Phi3ForCausalLM, "phi3"


ARCHS = {"phi3": phi3, "llama3": llama3, "qwen3": qwen3, "mistral": mistral, "gemma2": gemma2, "gemma3": gemma3}


def checkpoints(model, ids, out):
    saved = {}

    def keep(key):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            saved[key] = tensor.detach().float().reshape(len(ids), -1).numpy()

        return hook

    inner = model.model
    hooks = [inner.embed_tokens.register_forward_hook(keep("embedding"))]
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.self_attn.register_forward_hook(keep(f"blk.{i}.attn_out")))
        hooks.append(layer.mlp.register_forward_hook(keep(f"blk.{i}.mlp_out")))
        hooks.append(layer.register_forward_hook(keep(f"blk.{i}.residual")))
    hooks.append(inner.norm.register_forward_hook(keep("final_norm")))
    with torch.no_grad():
        logits = model(torch.tensor([ids]), use_cache=False).logits[0]
    saved["logits"] = logits.float().numpy()
    for h in hooks:
        h.remove()
    for key, value in saved.items():
        np.save(os.path.join(out, key + ".npy"), value.astype(np.float32))
    with open(os.path.join(out, "input.json"), "w", encoding="utf-8") as f:
        json.dump({"ids": ids, "checkpoints": list(saved.keys())}, f)


def main(which, out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1234)
    config, cls, gguf_arch = ARCHS[which]()
    config._attn_implementation = "eager"
    model = cls(config).eval()
    randomize(model)

    checkpoints(model, PROMPT, out)
    greedy, margins = greedy_reference(model, PROMPT, out)
    write_gguf(os.path.join(out, "model.gguf"), gguf_arch, config, model)
    save_folder(model, out)
    print(which, "greedy", greedy, "min margin", min(margins))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
