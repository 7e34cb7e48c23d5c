"""A tiny random-weight Qwen2 checkpoint and its reference outputs, for weft's Qwen2 test
(attention biases, NeoX RoPE, a Qwen2-pattern byte-level BPE tokenizer of its own).

    python scripts/make_qwen2_fixture.py tests/fixtures/qwen2-tiny

Writes config.json, model.safetensors and tokenizer.json (saved by transformers and
Hugging Face tokenizers) and reference.json: token ids of sample texts, and the greedy
continuation transformers generates for a prompt, with the margin between the top two logits
at each step (so a near-tie can be told from a bug).

Needs: pip install torch transformers tokenizers safetensors
"""
import json
import os
import sys

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEXTS = [
    "Licensed under the Apache License, Version 2.0 (the \"License\");",
    "You may not use this file except in compliance with the License.\n\n  See it at 12345!",
    "Don't stop... it's   GREAT\tisn't it?\r\nYes.",
    "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n",
]
PROMPT = "The License shall"


def main(out):
    os.makedirs(out, exist_ok=True)
    with open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8") as f:
        corpus = f.read()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([corpus], trainer)
    tok.save(os.path.join(out, "tokenizer.json"))

    torch.manual_seed(1234)
    config = Qwen2Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        initializer_range=0.2,
        eos_token_id=tok.token_to_id("<|im_end|>"),
        bos_token_id=tok.token_to_id("<|endoftext|>"),
    )
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        # Non-zero biases, so that a missing bias add shows.
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0.0, 0.5)
    model.save_pretrained(out, safe_serialization=True)

    prompt = tok.encode(PROMPT).ids
    ids = list(prompt)
    margins = []
    with torch.no_grad():
        for _ in range(16):
            logits = model(torch.tensor([ids])).logits[0, -1]
            top = torch.topk(logits, 2)
            margins.append(float(top.values[0] - top.values[1]))
            ids.append(int(top.indices[0]))
    reference = {
        "texts": [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS],
        "prompt": PROMPT,
        "prompt_ids": prompt,
        "greedy": ids[len(prompt):],
        "margins": margins,
    }
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1)
    print("vocab", tok.get_vocab_size(), "greedy", reference["greedy"], "min margin", min(margins))


if __name__ == "__main__":
    main(sys.argv[1])
