"""One measurement for every row of docs/QUALITY.md.

Each variant (the base, a weft file, a llama.cpp requantization) is decoded to f32 tensors under
GGUF names and run by one transformers model (fp32, CPU) over the token ids weft's tokenizer gives
for the text (one window, no BOS). The model is loaded once from the source GGUF by transformers'
own GGUF loader (`gguf_file=`); each variant's tensors are then put in its place with the same
renaming and Q/K row order that loader applies (checked at start-up: the source's tensors
decoded by gguf-py and mapped here must equal what the loader produced, bit for bit). Next-token
log-probabilities are compared with the base's: perplexity, mean KL(base || variant), top-1
agreement.
"""

import json
import os
import sys

import numpy as np
import gguf
from gguf import GGUFReader


def gguf_tensors_f32(path):
    """Every tensor of a GGUF file decoded to f32 (numpy order: [rows, cols])."""
    reader = GGUFReader(path)
    out = {}
    for t in reader.tensors:
        out[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    return out


def safetensors_f32(path):
    from safetensors.numpy import load_file

    return {k: v.astype(np.float32) for k, v in load_file(path).items()}


def matrix_weights(path):
    """Weights of the quantized matrices (every 2-D tensor) of a GGUF file."""
    reader = GGUFReader(path)
    return sum(int(np.prod(t.shape)) for t in reader.tensors if len(t.shape) == 2)


HF_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def hf_name(name):
    """transformers' parameter name for a GGUF tensor name."""
    parts = name.split(".")
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    if parts[0] == "blk":
        return f"model.layers.{parts[1]}.{HF_NAMES[parts[2]]}.{parts[3]}"
    raise SystemExit(f"no transformers name for {name}")


def unpermute(w, heads):
    """GGUF stores Q and K rows of each head interleaved for its RoPE; transformers' GGUF loader
    puts them back in halves."""
    dim = w.shape[0] // heads // 2
    return w.reshape(heads, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


class Runner:
    """One transformers model whose weights are swapped per variant."""

    def __init__(self, source_gguf):
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(2)
        folder, name = os.path.split(os.path.abspath(source_gguf))
        self.model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        self.model.eval()
        cfg = self.model.config
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.params = dict(self.model.named_parameters())
        reference = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.source_tensors = gguf_tensors_f32(source_gguf)
        self.load(self.source_tensors)
        for k, v in self.model.state_dict().items():
            if not torch.equal(v, reference[k]):
                raise SystemExit(f"the GGUF name mapping does not reproduce transformers' loader at {k}")

    def hf_name(self, name, w):
        """transformers' parameter for a GGUF tensor, and the tensor in that parameter's row order."""
        role = name.split(".")[2] if name.startswith("blk.") else ""
        if role == "attn_q":
            w = unpermute(w, self.heads)
        elif role == "attn_k":
            w = unpermute(w, self.kv_heads)
        return hf_name(name), w

    def load(self, tensors):
        import torch

        with torch.no_grad():
            for name, w in tensors.items():
                hf, w = self.hf_name(name, w)
                p = self.params[hf]
                if tuple(p.shape) != w.shape:
                    raise SystemExit(f"{name}: shape {w.shape}, model has {tuple(p.shape)}")
                p.copy_(torch.from_numpy(np.ascontiguousarray(w)))

    def log_probs(self, ids):
        import torch

        with torch.no_grad():
            logits = self.model(torch.tensor([ids], dtype=torch.long)).logits[0]
            return torch.log_softmax(logits.double(), dim=-1).float().numpy()  # row i predicts token i+1


def compare(base, lp, ids, chunk=256):
    """Perplexity of the variant, mean/p99 KL(base || variant) and top-1 agreement over the
    positions that have a next token."""
    n = len(ids) - 1
    klds, agree, nll = [], 0, 0.0
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        b = base[s:e].astype(np.float64)
        m = lp[s:e].astype(np.float64)
        klds.append((np.exp(b) * (b - m)).sum(axis=1))
        agree += int((b.argmax(axis=1) == m.argmax(axis=1)).sum())
        nll -= m[np.arange(e - s), np.asarray(ids[s + 1 : e + 1])].sum()
    klds = np.maximum(np.concatenate(klds), 0.0)
    return {
        "ppl": float(np.exp(nll / n)),
        "kld": float(klds.mean()),
        "kld_p99": float(np.quantile(klds, 0.99)),
        "top1": agree / n,
        "scored": n,
    }


def evaluate(runner, tensors, ids, base_path):
    """Log-probabilities of one variant (tensors by GGUF name), and its comparison with the saved
    base log-probabilities (written first, when base_path does not exist yet: the base row)."""
    runner.load(tensors)
    lp = runner.log_probs(ids)
    if not os.path.exists(base_path):
        np.save(base_path, lp)
        base = lp
    else:
        base = np.load(base_path, mmap_mode="r")
        if base.shape != lp.shape:
            raise SystemExit(f"base log-probabilities {base.shape} do not match {lp.shape}")
    return compare(base, lp, ids)


if __name__ == "__main__":
    print(json.dumps(matrix_weights(sys.argv[1])))
