"""sentence-transformers (PyTorch, f32, CPU) on the sentences of `weft bench-embed`: 256
sentences of ~30 tokens, batch 32, tokenization included; best of --reps. Prints one line.

Run: HF_HUB_OFFLINE=1 python3 bench/embed_st.py [--model models/all-MiniLM-L6-v2] [--threads N]
"""
import argparse, time

import torch
from sentence_transformers import SentenceTransformer

p = argparse.ArgumentParser()
p.add_argument("--model", default="models/all-MiniLM-L6-v2")
p.add_argument("--sentences", default="bench/embed_sentences.txt")
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--threads", type=int, default=0)
a = p.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
sentences = [l for l in open(a.sentences).read().split("\n") if l]
model = SentenceTransformer(a.model, device="cpu")
model.encode(sentences[: a.batch_size], batch_size=a.batch_size)
best = float("inf")
for _ in range(a.reps):
    start = time.perf_counter()
    model.encode(sentences, batch_size=a.batch_size, normalize_embeddings=True)
    best = min(best, time.perf_counter() - start)
print(f"sentence-transformers {len(sentences)} sentences, batch {a.batch_size}, "
      f"{torch.get_num_threads()} threads, f32: {best:.3f} s, {len(sentences) / best:.1f} sentences/s")
