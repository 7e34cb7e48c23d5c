#!/usr/bin/env python3
"""all-MiniLM-L6-v2 with its block matrices quantized at load, in each weft format: cosine of
every fixture embedding to the F32 run's, retrieval agreement on the fixture's queries and
passages, and bits per matrix weight. Prints a markdown table and writes JSON lines.

The texts, queries, passages and the reference top-5 are those of tests/embed_quant.rs, read
from its fixture (tests/fixtures/embed/sentences.json, through tests/common/embed.rs): the 24
texts' cosines to F32 (min, mean); for each of the 5 queries the 5 passages (of 16) closest to it,
their overlap with the fixture's top-5 and whether the first is the same (`top1`).

    python3 scripts/quality/embed_table.py [--rows q4_g32_k,q4_g32_k+keep] [--threads 1]

Needs numpy and a release build of weft (`cargo build --release --bin weft`).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = "tests/fixtures/embed/sentences.json"
# The encoder's default keep rules (src/model/bert/mod.rs, ENCODER_DEFAULT_KEEP): applied under a
# format below 8 bits unless --no-default-keep is given.
DEFAULT_KEEP = ["attention.self.value=q8_g32_sym", "intermediate.dense=q8_g32_sym"]

# (row name, --quantize format or None for F32, extra flags). `+keep`: the default keep rules
# (value and up projections at q8_g32_sym); every other quantized row passes --no-default-keep.
def default_rows():
    rows = [("f32", None, []), ("q8_g32_sym", "q8_g32_sym", ["--no-default-keep"])]
    for bits in (4, 3, 2):
        for scheme in ("asym", "k"):
            f = f"q{bits}_g32_{scheme}"
            rows.append((f, f, ["--no-default-keep"]))
            rows.append((f + "+keep", f, []))
    for bits in (4, 3, 2):
        for scheme in ("sym", "asym", "k"):
            f = f"q{bits}_g64_{scheme}"
            rows.append((f, f, ["--no-default-keep"]))
    return rows


def parse_format(name):
    """(bits, group, scheme) of a weft format name (src/quant/weft.rs, WeftQuant::parse)."""
    b, g, s = name.split("_")
    return int(b[1:]), int(g[1:]), s


def matrix_bytes(fmt, rows, cols, in_memory):
    """Bytes of a [rows, cols] matrix in `fmt` (src/quant/weft.rs, WeftQuant::file_bytes; None:
    f32). A `k` matrix stores one byte per scale and zero point and one exponent byte per row;
    in memory it is held as its asymmetric twin (docs/FORMAT.md), f16 scale and zero point."""
    if fmt is None:
        return 4 * rows * cols
    bits, group, scheme = parse_format(fmt)
    groups = rows * math.ceil(cols / group)
    words = groups * (group * bits // 32) * 4
    if scheme == "sym":
        return words + 2 * groups
    if scheme == "asym" or in_memory:
        return words + 4 * groups
    return words + 2 * groups + rows


def keep_format(rule, default):
    """The format a PATTERN=BITS|FORMAT rule gives (src/model/convert.rs, KeepRule::quant)."""
    what = rule.rsplit("=", 1)[1]
    if "_" in what:
        return what
    bits = int(what)
    if bits in (16, 32):
        return None
    _, group, scheme = parse_format(default)
    if scheme == "k" and bits > 4:
        scheme = "asym"
    return f"q{bits}_g{group}_{scheme}"


def matrices(config):
    """(Hugging Face name, rows, cols) of every block matrix (src/model/bert/weights.rs)."""
    d, f = config["hidden_size"], config["intermediate_size"]
    parts = [("attention.self.query", d, d), ("attention.self.key", d, d), ("attention.self.value", d, d),
             ("attention.output.dense", d, d), ("intermediate.dense", f, d), ("output.dense", d, f)]
    return [(f"encoder.layer.{l}.{p}", r, c) for l in range(config["num_hidden_layers"]) for p, r, c in parts]


def bits_per_weight(config, fmt, flags, in_memory):
    """Bits per block-matrix weight and the share of weights per format."""
    rules = [flags[i + 1] for i, a in enumerate(flags) if a == "--keep"]
    if fmt is not None and "--no-default-keep" not in flags and parse_format(fmt)[0] < 8:
        rules += DEFAULT_KEEP
    total_bits, weights, share = 0, 0, {}
    for name, rows, cols in matrices(config):
        rule = next((r for r in rules if r.rsplit("=", 1)[0] in name), None)
        f = fmt if fmt is None or rule is None else keep_format(rule, fmt)
        total_bits += 8 * matrix_bytes(f, rows, cols, in_memory)
        weights += rows * cols
        share[f or "f32"] = share.get(f or "f32", 0) + rows * cols
    return total_bits / weights, {k: v / weights for k, v in share.items()}


def embed(weft, model, texts, fmt, flags, threads):
    cmd = [weft, "embed", model, "--threads", str(threads)]
    if fmt is not None:
        cmd += ["--quantize", fmt]
    cmd += flags
    for t in texts:
        cmd += ["--text", t]
    start = time.time()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        return None, time.time() - start, out.stderr.strip().splitlines()[0] if out.stderr.strip() else "failed"
    got = json.loads(out.stdout)["embeddings"]
    assert [g["text"] for g in got] == texts
    return np.array([g["embedding"] for g in got], dtype=np.float32).astype(np.float64), time.time() - start, None


def cosine(a, b):
    return float(a @ b / (np.sqrt(a @ a) * np.sqrt(b @ b)))


def top_k(query, passages, k):
    """Indices of the k passages closest to `query`, best first (tests/common/embed.rs)."""
    scores = [cosine(query, p) for p in passages]
    return sorted(range(len(passages)), key=lambda i: -scores[i])[:k]


def retrieval(q, p, want):
    overlap, top1 = 0, 0
    for v, w in zip(q, want):
        top = top_k(v, p, 5)
        overlap += sum(i in w for i in top)
        top1 += int(top[0] == w[0])
    return overlap / (5 * len(want)), top1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weft", default="target/release/weft")
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", help="comma-separated row names (default: every row)")
    ap.add_argument("--out", default="target/quality/embed_table.jsonl")
    a = ap.parse_args()
    os.chdir(ROOT)

    fx = json.load(open(FIXTURE, encoding="utf-8"))
    texts = [s["text"] for s in fx["sentences"]]
    r = fx["retrieval"]
    queries, passages, want = r["queries"], r["passages"], r["top5"]
    config = json.load(open(os.path.join(a.model, "config.json")))
    all_texts = texts + queries + passages
    n, nq = len(texts), len(queries)

    rows = default_rows()
    if a.rows:
        names = a.rows.split(",")
        rows = [x for x in rows if x[0] == "f32" or x[0] in names]
        known = {x[0] for x in rows}
        rows += [(nm, nm.split("+")[0], [] if nm.endswith("+keep") else ["--no-default-keep"])
                 for nm in names if nm not in known]

    vnni = "avx512_vnni" in open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    results, ref = [], None
    started = time.time()
    with open(a.out, "w") as jl:
        for name, fmt, flags in rows:
            e, secs, err = embed(a.weft, a.model, all_texts, fmt, flags, a.threads)
            bits, share = bits_per_weight(config, fmt, flags, in_memory=False)
            mem_bits, _ = bits_per_weight(config, fmt, flags, in_memory=True)
            row = {"row": name, "quantize": fmt, "flags": flags, "bits_per_matrix_weight": round(bits, 4),
                   "bits_in_memory": round(mem_bits, 4), "weights_by_format": {k: round(v, 4) for k, v in share.items()},
                   "seconds": round(secs, 2), "commit": commit, "avx512_vnni": vnni, "threads": a.threads}
            if err is not None:
                row["error"] = err
                print(f"{name}: {err}", file=sys.stderr)
            else:
                if ref is None:
                    ref = e
                    # weft's F32 against the fixture's sentence-transformers embeddings
                    st = [cosine(x, np.array(s["embedding"], dtype=np.float32).astype(np.float64))
                          for x, s in zip(e[:n], fx["sentences"])]
                    row["min_cosine_to_sentence_transformers"] = round(min(st), 8)
                cos = [cosine(x, y) for x, y in zip(e[:n], ref[:n])]
                overlap, top1 = retrieval(e[n:n + nq], e[n + nq:], want)
                row.update({"min_cosine": round(min(cos), 6), "mean_cosine": round(sum(cos) / n, 6),
                            "top5_overlap": overlap, "top1": top1, "queries": nq, "texts": n})
                print(f"{name}: {bits:.3f} bits, min {min(cos):.6f} mean {sum(cos) / n:.6f} "
                      f"top-5 {overlap:.0%} top-1 {top1}/{nq} ({secs:.1f} s)", file=sys.stderr)
            results.append(row)
            jl.write(json.dumps(row) + "\n")
            jl.flush()

    print(f"| format | keep | bits/matrix weight | held in memory | min cosine | mean cosine | top-5 overlap | top-1 |")
    print("|---|---|---|---|---|---|---|---|")
    for x in results:
        keep = "—" if x["quantize"] is None or "--no-default-keep" in x["flags"] else "value, up at q8_g32_sym"
        if "error" in x:
            print(f"| {x['quantize'] or 'f32'} | {keep} | {x['bits_per_matrix_weight']:.3f} | | refused: {x['error']} | | | |")
            continue
        print(f"| {x['quantize'] or 'f32'} | {keep} | {x['bits_per_matrix_weight']:.3f} | {x['bits_in_memory']:.3f} | "
              f"{x['min_cosine']:.6f} | {x['mean_cosine']:.6f} | {x['top5_overlap']:.0%} | {x['top1']}/{x['queries']} |")
    f32 = results[0]
    print(f"\nF32 min cosine to sentence-transformers {f32.get('min_cosine_to_sentence_transformers')}; "
          f"AVX-512 VNNI: {vnni}; {a.threads} thread(s); {time.time() - started:.0f} s in all; {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
