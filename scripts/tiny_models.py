"""What the tiny random-weight fixtures share (scripts/make_arch_fixture.py,
scripts/make_vocab_fixture.py): the weights' randomization, transformers' greedy reference, the
Hugging Face folder, and the GGUF with llama.cpp's key and tensor names (written with `gguf`).
"""
import json
import math
import os

import gguf
import numpy as np
import torch

# The shared tokenizer (vocabulary 700); every fixture folder links to it.
TOKENIZER = "tests/fixtures/qwen2-tiny/tokenizer.json"
NEW_TOKENS = 16


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
    # A vocabulary larger than the tokenizer's (the 128k fixture) ends in reserved control tokens.
    reserved = range(len(tokens), config.vocab_size)
    tokens += [f"<|r{i}|>" for i in reserved]
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
    w.add_token_types([3 if i in added or i in reserved else 1 for i in range(len(tokens))])
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


def greedy_reference(model, prompt, out):
    """reference.json: the prompt, the greedy ids of `generate` for NEW_TOKENS tokens and the
    top-two margin of each; returns the ids and margins."""
    with torch.no_grad():
        gen = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    greedy = gen.sequences[0, len(prompt):].tolist()
    margins = [float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1]) for s in gen.scores]
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"prompt_ids": prompt, "greedy": greedy, "margins": margins}, f, indent=1)
    return greedy, margins


def save_folder(model, out):
    """config.json and model.safetensors (f16) as save_pretrained writes them, without the
    generation_config.json it adds, and the shared tokenizer.json as a link."""
    model.half().save_pretrained(out, safe_serialization=True)
    extra = os.path.join(out, "generation_config.json")
    if os.path.exists(extra):
        os.remove(extra)
    link = os.path.join(out, "tokenizer.json")
    if not os.path.lexists(link):
        os.symlink(os.path.relpath(TOKENIZER, out), link)
