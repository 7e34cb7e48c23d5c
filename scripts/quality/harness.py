"""One measurement for every row of docs/QUALITY.md.

Each variant (the base, a weft file, a llama.cpp requantization) is decoded to f32 tensors under
GGUF names, written as an F32 GGUF with the source GGUF's metadata, loaded by transformers
(`gguf_file=`, fp32, CPU) and run over the token ids weft's tokenizer gives for the text (one
window, no BOS). Its next-token log-probabilities are compared with the base's: perplexity, mean
KL(base || variant), top-1 agreement.
"""

import json
import os
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter


def source_arch(reader):
    field = reader.fields[gguf.Keys.General.ARCHITECTURE]
    return field.contents()


def write_f32_gguf(source_path, tensors, out_path):
    """An F32 GGUF holding `tensors` (name -> numpy array in GGUF's row-major order) with every
    metadata key of the source file."""
    reader = GGUFReader(source_path)
    writer = GGUFWriter(out_path, source_arch(reader))
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            writer.add_key_value(field.name, int(gguf.LlamaFileType.ALL_F32), gguf.GGUFValueType.UINT32)
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        if t.name not in tensors:
            raise SystemExit(f"{t.name} missing from the variant")
        arr = np.ascontiguousarray(tensors[t.name], dtype=np.float32)
        expected = tuple(int(d) for d in reversed(t.shape.tolist()))
        if arr.shape != expected:
            arr = arr.reshape(expected)
        writer.add_tensor(t.name, arr)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


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


def log_probs(gguf_path, ids):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(2)
    folder, name = os.path.split(os.path.abspath(gguf_path))
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids], dtype=torch.long)).logits[0]
        out = torch.log_softmax(logits.double(), dim=-1).float().numpy()
    del model
    return out  # [tokens, vocab]; row i predicts token i+1


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


def evaluate(source_gguf, tensors, ids, base_path):
    """Log-probabilities of one variant (tensors by GGUF name), and its comparison with the saved
    base log-probabilities (None when base_path does not exist yet: this is the base)."""
    tmp = tempfile.mkdtemp(dir=os.environ.get("QUALITY_TMP"))
    path = os.path.join(tmp, "model.gguf")
    try:
        write_f32_gguf(source_gguf, tensors, path)
        del tensors
        lp = log_probs(path, ids)
    finally:
        if os.path.exists(path):
            os.remove(path)
        os.rmdir(tmp)
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
