"""weft's GPU encoder beside PyTorch on the same GPU, in one call (the `embed` step of
bench/gpu/session.sh, where no model folder is carried).

Makes a random-weight BertModel of all-MiniLM-L6-v2's shape (6 layers, 384 wide, 12 heads, FFN
1536, vocabulary 30522) with this machine's PyTorch and transformers and saves it as a model
folder (config.json, model.safetensors, tokenizer.json). The vocabulary is --vocab (e.g. the real
model's vocab.txt) when given, else one made from the sentences' words (every word one token,
padded to 30522 entries), so both engines read the same ids. Then, interleaved over --rounds:
`weft bench-embed --backend gpu` for each of --weights, and PyTorch at f32 and fp16 (mean pooling
over the attention mask, L2 normalised, copied to the host), all on --count sentences of
bench/embed_sentences.txt in batches of 32, tokenization included, best of --reps after one
untimed batch. First prints the cosine of weft's GPU embeddings of four sentences to PyTorch
f32's (a check that the timed path is right on this device); then one JSON line per run, also
appended to --out (the rows bench/collect.py puts in the embeddings table).

Run: python3 bench/embed_gpu.py --weft target/release/weft [--device cuda] [--count 256]
         [--rounds 3] [--weights f32,q8] [--out bench/results/embed/h100.jsonl]
"""
import argparse, json, os, re, subprocess, sys, tempfile, time
from pathlib import Path

import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

p = argparse.ArgumentParser()
p.add_argument("--weft", default="target/release/weft")
p.add_argument("--folder", default=os.path.join(tempfile.gettempdir(), "weft-embed-random"))
p.add_argument("--vocab", help="a WordPiece vocab.txt; default: made from the sentences")
p.add_argument("--sentences", default="bench/embed_sentences.txt")
p.add_argument("--count", type=int, default=256)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--weights", default="f32,q8", help="weft's formats: f32, q8, q4 or weft format names")
p.add_argument("--device", default="cuda")
p.add_argument("--out", help="append the JSON lines to this file")
a = p.parse_args()

VOCAB = 30522
sentences = [l for l in open(a.sentences).read().split("\n") if l]
sentences = (sentences * (a.count // len(sentences) + 1))[: a.count]
folder = Path(a.folder)
folder.mkdir(parents=True, exist_ok=True)
sentence_file = folder / "sentences.txt"
sentence_file.write_text("\n".join(sentences) + "\n")

# The model folder.
torch.manual_seed(0)
config = BertConfig(vocab_size=VOCAB, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                    intermediate_size=1536, max_position_embeddings=512, hidden_act="gelu")
BertModel(config).save_pretrained(folder, safe_serialization=True)
vocab_file = folder / "vocab.txt"
if a.vocab:
    vocab_file.write_text(Path(a.vocab).read_text())
else:
    words = sorted({w for s in sentences for w in re.findall(r"\w+|[^\w\s]", s.lower())})
    chars = sorted({c for w in words for c in w})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    tokens += [w for w in words if w not in set(tokens)]
    tokens += [f"[unused{i}]" for i in range(VOCAB - len(tokens))]
    vocab_file.write_text("\n".join(tokens[:VOCAB]) + "\n")
BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True).save_pretrained(folder)

device = torch.device(a.device)
device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
tokenizer = BertTokenizerFast.from_pretrained(folder)
torch_tokens = sum(len(tokenizer(s, truncation=True, max_length=256)["input_ids"]) for s in sentences)


def torch_rate(dtype):
    model = BertModel.from_pretrained(folder).to(device=device, dtype=dtype).eval()

    def encode(texts):
        out = []
        for i in range(0, len(texts), a.batch_size):
            enc = tokenizer(texts[i : i + a.batch_size], padding=True, truncation=True, max_length=256,
                            return_tensors="pt").to(device)
            with torch.inference_mode():
                h = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
                pooled = (h * mask).sum(1) / mask.sum(1)
                out.append(torch.nn.functional.normalize(pooled.float(), dim=-1).cpu())
        return torch.cat(out)

    encode(sentences[: a.batch_size])
    best = float("inf")
    for _ in range(a.reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        encode(sentences)  # .cpu() waits for the device
        best = min(best, time.perf_counter() - start)
    return {"engine": "pytorch", "weights": "f32" if dtype == torch.float32 else "fp16", "threads": torch.get_num_threads(),
            "tokens": torch_tokens, "seconds": best, "sentences_per_s": len(sentences) / best}


def weft_rate(weights):
    cmd = [a.weft, "bench-embed", str(folder), "--backend", "gpu", "--json", "--reps", str(a.reps),
           "--sentences", str(sentence_file), "--batch-size", str(a.batch_size)]
    cmd += [] if weights == "f32" else ["--quantize", weights]
    row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    return {"engine": "weft", "weights": weights, "threads": row["threads"], "tokens": row["tokens"],
            "seconds": row["seconds"], "sentences_per_s": row["sentences_per_s"]}


def check():
    """weft's GPU embeddings of a few sentences against PyTorch f32 on the same random weights:
    the timed path computes the same thing on this device."""
    texts = sentences[:4]
    cmd = [a.weft, "embed", str(folder), "--backend", "gpu"] + [x for t in texts for x in ("--text", t)]
    got = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["embeddings"]
    model = BertModel.from_pretrained(folder).to(device).eval()
    enc = tokenizer(texts, padding=True, return_tensors="pt").to(device)
    with torch.inference_mode():
        h = model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        want = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1).cpu()
    cos = [float(torch.dot(torch.tensor(g["embedding"]), w)) for g, w in zip(got, want)]
    print(json.dumps({"check": "weft gpu vs pytorch f32, cosine", "texts": len(texts), "min": min(cos)}), flush=True)


check()
dtypes = [torch.float32] + ([torch.float16] if device.type == "cuda" else [])
rows = []
for r in range(a.rounds):
    runs = [lambda w=w: weft_rate(w) for w in a.weights.split(",")] + [lambda d=d: torch_rate(d) for d in dtypes]
    for run in runs:
        load = os.getloadavg()[0]
        row = run()
        row.update(device=f"{device_name} (random weights)", sentences=len(sentences), batch_size=a.batch_size,
                   round=r, load_1min=round(load, 2))
        rows.append(row)
        print(json.dumps(row), flush=True)
if a.out:
    with open(a.out, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
for key in dict.fromkeys((x["engine"], x["weights"]) for x in rows):
    rates = sorted(x["sentences_per_s"] for x in rows if (x["engine"], x["weights"]) == key)
    print(f"{key[0]} {key[1]}: best {rates[-1]:.1f}, median {rates[len(rates) // 2]:.1f} sentences/s over {len(rates)} runs",
          file=sys.stderr)
