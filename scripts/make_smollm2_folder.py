#!/usr/bin/env python3
"""The default SmolLM2 GGUF as a Hugging Face model folder, for the browser's folder loader.

    python3 scripts/make_smollm2_folder.py [--weft target/debug/weft] [--out tests/fixtures/generated]

writes (into an ignored folder, once: a second run finds it and does nothing)

    OUT/smollm2-f32/   config.json, tokenizer.json, tokenizer_config.json, chat_template.jinja,
                       model-0000{1,2}-of-00002.safetensors (F32, layers 0-14 and 15-29),
                       model.safetensors.index.json
    OUT/smollm2-q4.safetensors   `weft quantize OUT/smollm2-f32 ... --bits 4 --group 32
                                 --scheme asym`: the command line's quantization of the folder

The weights are `weft dequantize`'s F32 decoding of the GGUF, renamed to Hugging Face names, with
the query and key rows put back in Hugging Face's order (llama.cpp's converter interleaves each
head's rotary pairs). config.json and the tokenizer files are what transformers reads from the
GGUF's metadata.
"""

import argparse
import json
import os
import shutil
import subprocess

import numpy as np
from safetensors.numpy import load_file, save_file

GGUF = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
HF_FILES = "tests/fixtures/smollm2-hf"
LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def unpermute(w, heads):
    """Undoes llama.cpp's per-head interleaving of rotary pairs in a query or key matrix."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(name, config):
    """The Hugging Face name of a GGUF tensor, and the head count to unpermute it by (or None)."""
    if name == "token_embd.weight":
        return "model.embed_tokens.weight", None
    if name == "output_norm.weight":
        return "model.norm.weight", None
    if name == "output.weight":
        return "lm_head.weight", None
    _, layer, rest = name.split(".", 2)
    heads = {"attn_q.weight": config["num_attention_heads"], "attn_k.weight": config["num_key_value_heads"]}.get(rest)
    return f"model.layers.{layer}.{LAYER_NAMES[rest]}", heads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft", default="target/debug/weft")
    ap.add_argument("--out", default="tests/fixtures/generated")
    args = ap.parse_args()
    folder = os.path.join(args.out, "smollm2-f32")
    reference = os.path.join(args.out, "smollm2-q4.safetensors")
    if os.path.exists(os.path.join(folder, "model.safetensors.index.json")) and os.path.exists(reference):
        print(f"{folder} and {reference} are there")
        return
    if not os.path.exists(args.weft):
        subprocess.run(["cargo", "build", "--bin", "weft"], check=True)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)

    # config.json and the tokenizer files as transformers writes them from the GGUF's metadata.
    # They are committed in HF_FILES (made by these same calls, tokenizer.json without its
    # indentation), so a test run needs no transformers, whose GGUF reader needs PyTorch.
    if os.path.isdir(HF_FILES):
        for name in os.listdir(HF_FILES):
            shutil.copy(os.path.join(HF_FILES, name), folder)
    else:
        from transformers import AutoConfig, AutoTokenizer

        where, file = os.path.split(GGUF)
        AutoTokenizer.from_pretrained(where, gguf_file=file).save_pretrained(folder)
        AutoConfig.from_pretrained(where, gguf_file=file).save_pretrained(folder)
    config = json.load(open(os.path.join(folder, "config.json")))

    flat = os.path.join(args.out, "smollm2-dequantized.safetensors")
    subprocess.run([args.weft, "dequantize", GGUF, flat], check=True)
    tensors = {}
    for name, w in load_file(flat).items():
        new, heads = hf_name(name, config)
        tensors[new] = np.ascontiguousarray(unpermute(w, heads) if heads else w)
    os.remove(flat)

    # Two shards split between layers, as save_pretrained splits a checkpoint by size.
    half = config["num_hidden_layers"] // 2
    first = lambda n: n == "model.embed_tokens.weight" or (n.startswith("model.layers.") and int(n.split(".")[2]) < half)
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    names = list(shards)
    weight_map = {}
    for name, w in tensors.items():
        shard = names[0] if first(name) else names[1]
        shards[shard][name] = w
        weight_map[name] = shard
    total = sum(w.nbytes for w in tensors.values())
    for shard, part in shards.items():
        save_file(part, os.path.join(folder, shard), metadata={"format": "pt"})
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    json.dump(index, open(os.path.join(folder, "model.safetensors.index.json"), "w"), indent=2)

    subprocess.run(
        [args.weft, "quantize", folder, reference, "--bits", "4", "--group", "32", "--scheme", "asym"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"wrote {folder} ({total / 1e6:.0f} MB in 2 shards) and {reference}")


if __name__ == "__main__":
    main()
