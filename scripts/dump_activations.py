"""Reference activations for weft's per-checkpoint comparison: PyTorch transformers loads the
GGUF (dequantizing every tensor to f32), runs a fixed 16-token input, and forward hooks record the
embedding, each block's attention output, MLP output and residual, the final norm and the
logits, saved as .npy files named like weft's checkpoints.

    python scripts/dump_activations.py models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/activations

Needs: pip install torch transformers gguf accelerate numpy
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

# "The quick brown fox jumps over the lazy dog because it wanted to see the river"
IDS = [504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 975, 357, 4146, 288, 963, 260, 4626]


def main(model_path, out_dir):
    folder, name = os.path.split(os.path.abspath(model_path))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    saved = {}

    def keep(key):
        def hook(_module, _inputs, output):
            tensor = output[0] if isinstance(output, tuple) else output
            saved[key] = tensor.detach().float().reshape(len(IDS), -1).numpy()

        return hook

    inner = model.model
    inner.embed_tokens.register_forward_hook(keep("embedding"))
    for i, layer in enumerate(inner.layers):
        layer.self_attn.register_forward_hook(keep(f"blk.{i}.attn_out"))
        layer.mlp.register_forward_hook(keep(f"blk.{i}.mlp_out"))
        layer.register_forward_hook(keep(f"blk.{i}.residual"))
    inner.norm.register_forward_hook(keep("final_norm"))
    with torch.no_grad():
        out = model(torch.tensor([IDS]), use_cache=False)
    saved["logits"] = out.logits[0].float().numpy()
    os.makedirs(out_dir, exist_ok=True)
    for key, value in saved.items():
        np.save(os.path.join(out_dir, key + ".npy"), value.astype(np.float32))
    with open(os.path.join(out_dir, "input.json"), "w") as f:
        json.dump({"ids": IDS, "checkpoints": list(saved.keys())}, f)
    top = saved["logits"][-1].argsort()[::-1][:5]
    print("checkpoints:", len(saved), "last-token top-5 ids:", top.tolist())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
