"""sentence-transformers (PyTorch, f32) on the sentences of `weft bench-embed`: 256 sentences of
~30 tokens, batch 32, tokenization included; best of --reps after one untimed batch. Prints one
line, or one JSON object with --json.

Run: HF_HUB_OFFLINE=1 python3 bench/embed_st.py [--model models/all-MiniLM-L6-v2] [--threads N]
     [--device cpu|cuda] [--json]
"""
import argparse, json, time

import torch
from sentence_transformers import SentenceTransformer

p = argparse.ArgumentParser()
p.add_argument("--model", default="models/all-MiniLM-L6-v2")
p.add_argument("--sentences", default="bench/embed_sentences.txt")
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--threads", type=int, default=0)
p.add_argument("--device", default="cpu")
p.add_argument("--json", action="store_true")
a = p.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
sentences = [l for l in open(a.sentences).read().split("\n") if l]
model = SentenceTransformer(a.model, device=a.device)
model.encode(sentences[: a.batch_size], batch_size=a.batch_size)
best = float("inf")
for _ in range(a.reps):
    start = time.perf_counter()
    # encode returns host arrays, so on CUDA the time includes the copy back (as weft's does).
    model.encode(sentences, batch_size=a.batch_size, normalize_embeddings=True)
    best = min(best, time.perf_counter() - start)
rate = len(sentences) / best
if a.json:
    print(json.dumps({"engine": "sentence-transformers", "device": a.device, "sentences": len(sentences),
                      "batch_size": a.batch_size, "threads": torch.get_num_threads(), "weights": "f32",
                      "seconds": best, "sentences_per_s": rate}))
else:
    print(f"sentence-transformers {len(sentences)} sentences, batch {a.batch_size}, {a.device}, "
          f"{torch.get_num_threads()} threads, f32: {best:.3f} s, {rate:.1f} sentences/s")
