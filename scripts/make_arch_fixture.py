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
import math
import os
import sys

import gguf
import numpy as np
import torch
import transformers

TOKENIZER = "tests/fixtures/qwen2-tiny/tokenizer.json"
# Longer than the Llama 3 fixture's original context (16), so that prompt and continuation
# run past the scaling threshold.
PROMPT = [5, 230, 118, 466, 27, 301, 77, 612, 9, 140, 355, 88, 41, 523, 260, 19, 402, 95, 170, 333]
NEW_TOKENS = 16


def llama3():
    config = transformers.LlamaConfig(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
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
    config = transformers.Qwen3Config(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=5,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    )
    return config, transformers.Qwen3ForCausalLM, "qwen3"


def mistral():
    # A window of 8 under a 20-token prompt: most of the prompt and every generated token
    # attend to the window only.
    config = transformers.MistralConfig(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=3,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        sliding_window=8,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    return config, transformers.MistralForCausalLM, "llama"


def gemma2():
    # Three layers: local, global, local. Soft-capping small enough to bend the scores and
    # logits of these weights, a query scalar other than head_dim.
    config = transformers.Gemma2Config(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=3,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        sliding_window=8,
        query_pre_attn_scalar=24,
        attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    return config, transformers.Gemma2ForCausalLM, "gemma2"


def gemma3():
    # Six layers: five local (base 10,000, window 8) to one global (base 1,000,000, linear
    # scaling 2), q/k norms.
    config = transformers.Gemma3TextConfig(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=32,
        num_hidden_layers=6,
        num_attention_heads=3,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        sliding_window=8,
        query_pre_attn_scalar=24,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 2.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    )
    return config, transformers.Gemma3ForCausalLM, "gemma3"


def phi3():
    # LongRoPE with an original context of 24: the 20-token prompt rotates with the short
    # factors, generation switches to the long ones at position 24 (transformers picks per
    # forward call), and cos/sin carry the attention factor of max / original = 256 / 24.
    pairs = 8
    config = transformers.Phi3Config(
        vocab_size=700,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=3,
        num_key_value_heads=1,
        max_position_embeddings=256,
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


def randomize(model):
    """Weights with enough spread that every feature moves the output, rounded to f16."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(1.0, 0.3)
            else:
                p.normal_(0.0, 0.15)
            p.copy_(p.half().float())


def permute(w, heads):
    """llama.cpp's converter reorders llama Q/K rows so that rotated pairs are adjacent."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(rope, head_dim):
    """The per-pair divisors llama.cpp's converter stores as rope_freqs.weight."""
    base, factor = rope["rope_theta"], rope["factor"]
    low, high, old = rope["low_freq_factor"], rope["high_freq_factor"], rope["original_max_position_embeddings"]
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * base ** (i / head_dim)
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


GGUF_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    # Phi-3's fused matrices keep their fusion in llama.cpp's files.
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",
}


def write_gguf(path, arch, config, model):
    tok = json.load(open(TOKENIZER, encoding="utf-8"))
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    added = {t["id"]: t["content"] for t in tok["added_tokens"]}
    tokens = [added.get(i, text) for text, i in vocab] + [added[i] for i in sorted(added) if i >= len(vocab)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    w = gguf.GGUFWriter(path, arch)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_block_count(config.num_hidden_layers)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    if config.model_type == "gemma3_text":
        full, local = config.rope_parameters["full_attention"], config.rope_parameters["sliding_attention"]
        w.add_rope_freq_base(full["rope_theta"])
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(full["factor"])
        w.add_rope_freq_base_swa(local["rope_theta"])
    else:
        w.add_rope_freq_base(config.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_vocab_size(config.vocab_size)
    if config.model_type == "phi3":
        rope = config.rope_parameters
        orig = rope["original_max_position_embeddings"]
        scale = config.max_position_embeddings / orig
        # llama.cpp's converter: the original context, the attention factor, 0 for no window.
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig)))
        w.add_sliding_window(config.sliding_window or 0)
    if getattr(config, "sliding_window", None) and config.model_type in ("mistral", "gemma2", "gemma3_text"):
        w.add_sliding_window(config.sliding_window)
    if config.model_type == "gemma2":
        w.add_attn_logit_softcapping(config.attn_logit_softcapping)
        w.add_final_logit_softcapping(config.final_logit_softcapping)
    if config.model_type in ("gemma2", "gemma3_text"):
        # The query scale, which llama.cpp otherwise derives from the model size.
        w.add_attention_scale(config.query_pre_attn_scalar**-0.5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in added else 1 for i in range(len(tokens))])
    w.add_token_merges(merges)

    def f16(t):
        return t.detach().float().numpy().astype(np.float16)

    def f32(t):
        return t.detach().float().numpy().astype(np.float32)

    state = model.state_dict()
    layer_names = GGUF_LAYER
    if arch in ("gemma2", "gemma3"):
        # llama.cpp's converter stores Gemma's norms as 1 + w, and names its four norms so.
        state = {k: (v + 1 if k.endswith("norm.weight") else v) for k, v in state.items()}
        layer_names = dict(GGUF_LAYER)
        layer_names["post_attention_layernorm.weight"] = "post_attention_norm.weight"
        layer_names["pre_feedforward_layernorm.weight"] = "ffn_norm.weight"
        layer_names["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight"
    w.add_tensor("token_embd.weight", f16(state["model.embed_tokens.weight"]))
    if not config.tie_word_embeddings:
        w.add_tensor("output.weight", f16(state["lm_head.weight"]))
    w.add_tensor("output_norm.weight", f32(state["model.norm.weight"]))
    if config.rope_parameters.get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(config.rope_parameters, head_dim))
    if config.rope_parameters.get("rope_type") == "longrope":
        w.add_tensor("rope_factors_long.weight", np.array(config.rope_parameters["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(config.rope_parameters["short_factor"], dtype=np.float32))
    for i in range(config.num_hidden_layers):
        for hf, gg in layer_names.items():
            key = f"model.layers.{i}.{hf}"
            if key not in state:
                continue
            t = state[key]
            if arch == "llama" and hf == "self_attn.q_proj.weight":
                t = permute(t, config.num_attention_heads)
            if arch == "llama" and hf == "self_attn.k_proj.weight":
                t = permute(t, config.num_key_value_heads)
            w.add_tensor(f"blk.{i}.{gg}", f32(t) if t.dim() == 1 else f16(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


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
    with torch.no_grad():
        gen = model.generate(
            torch.tensor([PROMPT]),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    greedy = gen.sequences[0, len(PROMPT):].tolist()
    margins = [float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in gen.scores]
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"prompt_ids": PROMPT, "greedy": greedy, "margins": margins}, f, indent=1)

    write_gguf(os.path.join(out, "model.gguf"), gguf_arch, config, model)
    model.half().save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))
    print(which, "greedy", greedy, "min margin", min(margins))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
