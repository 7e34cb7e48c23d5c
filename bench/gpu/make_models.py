"""Random-weight Llama-family models of real shapes, saved as Hugging Face folders
(config.json + one model.safetensors), for benchmarks on machines that cannot download models.

    python3 bench/gpu/make_models.py OUT_DIR [smollm2-135m] [tinyllama-1.1b]
"""
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SHAPES = {
    # SmolLM2-135M: the GGUF's metadata.
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                         rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         max_position_embeddings=8192),
    # TinyLlama-1.1B: its config.json.
    "tinyllama-1.1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                           num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                           rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                           max_position_embeddings=2048),
}


def main() -> None:
    out = Path(sys.argv[1])
    for name in sys.argv[2:] or list(SHAPES):
        torch.manual_seed(0)
        config = LlamaConfig(**SHAPES[name], torch_dtype="bfloat16")
        model = LlamaForCausalLM(config).to(torch.bfloat16)
        folder = out / name
        model.save_pretrained(folder, safe_serialization=True, max_shard_size="100GB")
        params = sum(p.numel() for p in model.parameters())
        print(f"{name}: {params / 1e6:.1f} M parameters -> {folder}", flush=True)


if __name__ == "__main__":
    main()
