"""A Llama 3-shaped model with Llama 3's vocabulary of 128,256 tokens and a tied head, tiny in
every other dimension (hidden size 8), for tests/large_vocab.rs: loaded with the storage binding
limit lowered so that the embedding and the head it doubles as are split over several bindings,
as Llama 3's 525 MB embedding is under a 128 MiB limit.

    python scripts/make_vocab_fixture.py tests/fixtures/vocab128k-tiny

Writes config.json and model.safetensors (f16, 2 MB), model.gguf (the same weights with
llama.cpp's names, the shared tokenizer's tokens followed by reserved control tokens up to
128,256), reference.json (the prompt, the greedy ids of transformers' generate for 16 tokens and
their margins) and last_logits.npy (the logits of the prompt's last position, f32).
"""
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(__file__))
from tiny_models import greedy_reference, randomize, save_folder, write_gguf  # noqa: E402

# Ids from all over the vocabulary, so that the embedding rows come from every part.
PROMPT = [5, 128255, 64000, 99999, 33333, 120000, 7, 81234, 1000, 127000, 45678, 110000]


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(4321)
    config = transformers.LlamaConfig(
        vocab_size=128256,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=4,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
    )
    config._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(config).eval()
    randomize(model)
    with torch.no_grad():
        last = model(torch.tensor([PROMPT])).logits[0, -1].float()
    greedy, margins = greedy_reference(model, PROMPT, out)
    np.save(os.path.join(out, "last_logits.npy"), last.numpy().astype(np.float32))
    write_gguf(os.path.join(out, "model.gguf"), "llama", config, model)
    save_folder(model, out)
    print("greedy", greedy, "min margin", min(margins))


if __name__ == "__main__":
    main(sys.argv[1])
