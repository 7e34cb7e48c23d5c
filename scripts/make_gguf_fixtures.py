#!/usr/bin/env python3
"""Writes tests/fixtures/gguf/: GGML blocks and the PyPI `gguf` package's own decode of them, so
that weft's decoders are checked against an independent implementation without Python in CI.

  pip install gguf numpy
  python3 scripts/make_gguf_fixtures.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]

Per fixture NAME: NAME.bin (the raw blocks) and NAME.f32 (gguf.quants.dequantize, little-endian
f32), listed in manifest.json with the type and element count. Real blocks come from the model
(a few KB of its Q4_1 and Q8_0 tensors; the model itself is never committed); random blocks have
random quant bits and random finite f16 scales (zero, subnormal and normal, either sign).
"""

import json
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf"

# Byte offsets of the f16 scale fields within one block (ggml-common.h layouts).
SCALES = {
    Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}


def random_f16(rng, n):
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    mant = rng.integers(0, 0x400, n, dtype=np.uint16)
    exp = rng.integers(1, 31, n, dtype=np.uint16) << 10
    kind = rng.integers(0, 8, n)
    bits = np.where(kind == 0, sign, np.where(kind == 1, sign | np.maximum(mant, 1), sign | exp | mant))
    return bits.astype("<u2")


def random_blocks(qtype, n_blocks, seed):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    for at in SCALES[qtype]:
        blocks[:, at:at + 2] = random_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return blocks, n_blocks * block_elems


def write(manifest, name, qtype, blocks, elements, source):
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
    values = gguf.quants.dequantize(blocks, qtype).astype("<f4").reshape(-1)
    assert values.size == elements, (name, values.size, elements)
    (OUT / f"{name}.bin").write_bytes(blocks.tobytes())
    (OUT / f"{name}.f32").write_bytes(values.tobytes())
    manifest.append({"name": name, "type": qtype.name, "elements": elements, "source": source})


def real_blocks(reader, tensor_name, row, rows):
    t = next(t for t in reader.tensors if t.name == tensor_name)
    _, block_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type]
    return t.tensor_type, np.asarray(t.data)[row:row + rows].reshape(-1, block_bytes)


def main():
    model = Path(sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = []
    reader = gguf.GGUFReader(model)
    for name, tensor, row, rows in [
        ("real_q4_1_ffn_down", "blk.0.ffn_down.weight", 17, 3),
        ("real_q4_1_attn_q", "blk.5.attn_q.weight", 100, 4),
        ("real_q8_0_token_embd", "token_embd.weight", 1000, 3),
        ("real_q8_0_token_embd_b", "token_embd.weight", 30000, 3),
    ]:
        qtype, blocks = real_blocks(reader, tensor, row, rows)
        elements = blocks.shape[0] * gguf.GGML_QUANT_SIZES[qtype][0]
        source = f"{model.name}:{tensor} rows {row}..{row + rows}"
        write(manifest, name, qtype, blocks, elements, source)
    for seed, qtype in enumerate(SCALES):
        n_blocks = 16 if gguf.GGML_QUANT_SIZES[qtype][0] == 256 else 64
        blocks, elements = random_blocks(qtype, n_blocks, 1000 + seed)
        write(manifest, f"random_{qtype.name.lower()}", qtype, blocks, elements, f"numpy seed {1000 + seed}")
    meta = {"gguf": getattr(gguf, "__version__", None) or gguf_version(), "numpy": np.__version__,
            "fixtures": manifest}
    (OUT / "manifest.json").write_text(json.dumps(meta, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"{len(manifest)} fixtures, {total} bytes in {OUT}")


def gguf_version():
    from importlib.metadata import version
    return version("gguf")


if __name__ == "__main__":
    main()
