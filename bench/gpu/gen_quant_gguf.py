"""A random-weight Llama-shape GGUF whose matrices are already Q4_0, Q8_0 or F16 blocks, for speed
runs of weft and llama.cpp on the same file without quantizing anything (the blocks are drawn
directly: random levels, f16 scales of a realistic size; the text it generates is noise).

    python gen_quant_gguf.py OUT.gguf TYPE dim ffn layers heads kv vocab
    e.g. Q4_0 2048 5632 22 32 4 32000 (TinyLlama shape); Q4_0 4096 14336 32 32 8 32000 (7B shape)

Needs llama.cpp's gguf-py on the path (GGUF_PY, default llama.cpp/gguf-py).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.environ.get("GGUF_PY", "llama.cpp/gguf-py"))
import gguf  # noqa: E402

out, ty = sys.argv[1], sys.argv[2]
dim, ffn, layers, heads, kv, vocab = map(int, sys.argv[3:9])
qtype = {"Q4_0": gguf.GGMLQuantizationType.Q4_0, "Q8_0": gguf.GGMLQuantizationType.Q8_0,
         "F16": gguf.GGMLQuantizationType.F16}[ty]
rng = np.random.default_rng(0)
hd = dim // heads

# A pool of 2^16 valid blocks, tiled: every scale finite, so the logits stay finite.
POOL = 1 << 16
if ty == "Q4_0":
    d = (rng.uniform(0.5, 1.5, POOL) * 0.02 / 8).astype(np.float16).view(np.uint8).reshape(POOL, 2)
    pool = np.concatenate([d, rng.integers(0, 256, (POOL, 16), dtype=np.uint8)], axis=1)
elif ty == "Q8_0":
    d = (rng.uniform(0.5, 1.5, POOL) * 0.02 / 127).astype(np.float16).view(np.uint8).reshape(POOL, 2)
    pool = np.concatenate([d, rng.integers(0, 256, (POOL, 32), dtype=np.uint8)], axis=1)
else:
    pool = (rng.standard_normal((POOL, 32)) * 0.02).astype(np.float16).view(np.uint8)
block_bytes = pool.shape[1]


def matrix(rows, cols):
    blocks = rows * cols // 32
    data = np.tile(pool.reshape(-1), -(-blocks // POOL))[: blocks * block_bytes]
    return data.reshape(rows, cols // 32 * block_bytes)


def ones(n):
    return (1.0 + 0.01 * rng.standard_normal(n)).astype(np.float32)


w = gguf.GGUFWriter(out, "llama")
w.add_context_length(4096)
w.add_embedding_length(dim)
w.add_block_count(layers)
w.add_feed_forward_length(ffn)
w.add_rope_dimension_count(hd)
w.add_head_count(heads)
w.add_head_count_kv(kv)
w.add_layer_norm_rms_eps(1e-5)
w.add_rope_freq_base(10000.0)
w.add_file_type({"Q4_0": 2, "Q8_0": 7, "F16": 1}[ty])
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
toks += [f"\u2581t{i}" for i in range(vocab - len(toks))]
w.add_tokenizer_model("llama")
w.add_token_list(toks)
w.add_token_scores([0.0] * vocab)
w.add_token_types([3, 3, 3] + [6] * 256 + [1] * (vocab - 259))
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)


def add(name, rows, cols):
    w.add_tensor(name, matrix(rows, cols), raw_dtype=qtype)


add("token_embd.weight", vocab, dim)
for i in range(layers):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", ones(dim))
    add(p + "attn_q.weight", dim, dim)
    add(p + "attn_k.weight", kv * hd, dim)
    add(p + "attn_v.weight", kv * hd, dim)
    add(p + "attn_output.weight", dim, dim)
    w.add_tensor(p + "ffn_norm.weight", ones(dim))
    add(p + "ffn_gate.weight", ffn, dim)
    add(p + "ffn_up.weight", ffn, dim)
    add(p + "ffn_down.weight", dim, ffn)
w.add_tensor("output_norm.weight", ones(dim))
add("output.weight", vocab, dim)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print("wrote", out, os.path.getsize(out), "bytes")
