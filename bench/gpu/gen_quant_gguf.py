"""A random-weight Llama-shape GGUF whose matrices are already Q4_0, Q4_1, Q8_0, F16 or K-quant blocks, for speed
runs of weft and llama.cpp on the same file without quantizing anything (the blocks are drawn
directly: random levels, f16 scales of a realistic size; the text it generates is noise).

    python gen_quant_gguf.py OUT.gguf TYPE dim ffn layers heads kv vocab
    e.g. Q4_0 2048 5632 22 32 4 32000 (TinyLlama shape); Q4_0 4096 14336 32 32 8 32000 (7B shape)

TYPE Q4_K_M mixes as llama.cpp's `llama-quantize ... Q4_K_M` does: Q4_K matrices, with Q6_K for the
head and for attn_v / ffn_down in the layers its `use_more_bits` rule picks (the first and last
eighth, and every third in between); widths must be multiples of 256.

Needs llama.cpp's gguf-py on the path (GGUF_PY, default llama.cpp/gguf-py).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.environ.get("GGUF_PY", "llama.cpp/gguf-py"))
import gguf  # noqa: E402

out, ty = sys.argv[1], sys.argv[2]
dim, ffn, layers, heads, kv, vocab = map(int, sys.argv[3:9])
T = gguf.GGMLQuantizationType
qtype = {"Q4_0": T.Q4_0, "Q4_1": T.Q4_1, "Q8_0": T.Q8_0, "F16": T.F16, "Q4_K_M": T.Q4_K}[ty]
rng = np.random.default_rng(0)
hd = dim // heads

# A pool of 2^16 valid blocks a type, tiled: every scale finite, so the logits stay finite.
POOL = 1 << 16


def f16s(scale):
    return (rng.uniform(0.5, 1.5, POOL) * scale).astype(np.float16).view(np.uint8).reshape(POOL, 2)


def random_bytes(n):
    return rng.integers(0, 256, (POOL, n), dtype=np.uint8)


# Q4_K (144 bytes a 256-weight block): d, dmin, 12 bytes of 6-bit sub-block scales and mins, 128
# of nibbles; a weight is d·sc·q − dmin·m. Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high
# bit pairs, 16 int8 sub-block scales, d; a weight is d·sc·(q − 32).
K_POOLS = {
    T.Q4_K: np.concatenate([f16s(0.03 / (15 * 40)), f16s(0.015 / 40), random_bytes(12), random_bytes(128)], axis=1),
    T.Q6_K: np.concatenate([random_bytes(128), random_bytes(64),
                            rng.integers(-64, 64, (POOL, 16), dtype=np.int8).view(np.uint8), f16s(0.03 / (64 * 32))],
                           axis=1),
}
if ty == "Q4_K_M":
    pool = K_POOLS[T.Q4_K]
elif ty == "Q4_1":
    # d·q + m with m ≈ -8·d: levels centred like Q4_0's.
    d = rng.uniform(0.5, 1.5, POOL) * 0.02 / 8
    m = -8 * d * rng.uniform(0.9, 1.1, POOL)
    halves = lambda v: v.astype(np.float16).view(np.uint8).reshape(POOL, 2)
    pool = np.concatenate([halves(d), halves(m), random_bytes(16)], axis=1)
elif ty == "Q4_0":
    d = (rng.uniform(0.5, 1.5, POOL) * 0.02 / 8).astype(np.float16).view(np.uint8).reshape(POOL, 2)
    pool = np.concatenate([d, rng.integers(0, 256, (POOL, 16), dtype=np.uint8)], axis=1)
elif ty == "Q8_0":
    d = (rng.uniform(0.5, 1.5, POOL) * 0.02 / 127).astype(np.float16).view(np.uint8).reshape(POOL, 2)
    pool = np.concatenate([d, rng.integers(0, 256, (POOL, 32), dtype=np.uint8)], axis=1)
else:
    pool = (rng.standard_normal((POOL, 32)) * 0.02).astype(np.float16).view(np.uint8)


def matrix(rows, cols, blocks_of=None):
    p = pool if blocks_of is None else K_POOLS[blocks_of]
    per = 256 if blocks_of is not None or ty == "Q4_K_M" else 32
    blocks = rows * cols // per
    data = np.tile(p.reshape(-1), -(-blocks // POOL))[: blocks * p.shape[1]]
    return data.reshape(rows, cols // per * p.shape[1])


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
w.add_file_type({"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "F16": 1, "Q4_K_M": 15}[ty])
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
toks += [f"\u2581t{i}" for i in range(vocab - len(toks))]
w.add_tokenizer_model("llama")
w.add_token_list(toks)
w.add_token_scores([0.0] * vocab)
w.add_token_types([3, 3, 3] + [6] * 256 + [1] * (vocab - 259))
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)


def add(name, rows, cols, more_bits=False):
    if ty == "Q4_K_M" and more_bits:
        w.add_tensor(name, matrix(rows, cols, T.Q6_K), raw_dtype=T.Q6_K)
    else:
        w.add_tensor(name, matrix(rows, cols), raw_dtype=qtype)


def use_more_bits(i):
    return i < layers // 8 or i >= 7 * layers // 8 or (i - layers // 8) % 3 == 2


add("token_embd.weight", vocab, dim)
for i in range(layers):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", ones(dim))
    add(p + "attn_q.weight", dim, dim)
    add(p + "attn_k.weight", kv * hd, dim)
    add(p + "attn_v.weight", kv * hd, dim, use_more_bits(i))
    add(p + "attn_output.weight", dim, dim)
    w.add_tensor(p + "ffn_norm.weight", ones(dim))
    add(p + "ffn_gate.weight", ffn, dim)
    add(p + "ffn_up.weight", ffn, dim)
    add(p + "ffn_down.weight", dim, ffn, use_more_bits(i))
w.add_tensor("output_norm.weight", ones(dim))
add("output.weight", vocab, dim, True)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print("wrote", out, os.path.getsize(out), "bytes")
