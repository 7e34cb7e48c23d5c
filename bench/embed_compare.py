"""weft bench-embed and sentence-transformers on the same machine, interleaved: each round runs
every weft configuration and then sentence-transformers, so a change in the machine's load
reaches both. Appends one JSON line per run (with the 1-minute load average before it) to --out
and prints the best and median rate of each.

Run: cargo build --release --bin weft
     HF_HUB_OFFLINE=1 python3 bench/embed_compare.py [--rounds 5] [--weights f32,q8,q4]
         [--threads 0] [--device cpu] [--out bench/results/embed/local.jsonl]
weft's encoder runs on the CPU backend only; --device cuda times sentence-transformers on a GPU.
"""
import argparse, json, os, statistics, subprocess, sys
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--model", default="models/all-MiniLM-L6-v2")
p.add_argument("--weft", default="target/release/weft")
p.add_argument("--rounds", type=int, default=5)
p.add_argument("--reps", type=int, default=1, help="timed repetitions per run (best kept)")
p.add_argument("--weights", default="f32,q8,q4")
p.add_argument("--threads", type=int, default=0)
p.add_argument("--device", default="cpu", help="sentence-transformers' device")
p.add_argument("--out", default="bench/results/embed/local.jsonl")
a = p.parse_args()


def run(cmd):
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    row = json.loads(out)
    row["load_1min"] = round(load, 2)
    return row


rows = []
for r in range(a.rounds):
    for w in a.weights.split(","):
        cmd = [a.weft, "bench-embed", a.model, "--json", "--reps", str(a.reps), "--threads", str(a.threads)]
        cmd += [] if w == "f32" else ["--quantize", w]
        row = run(cmd)
        row.update(engine="weft", weights=w, device="cpu", round=r)
        rows.append(row)
    st = [sys.executable, "bench/embed_st.py", "--model", a.model, "--json", "--reps", str(a.reps), "--device", a.device]
    st += ["--threads", str(a.threads)] if a.threads else []
    row = run(st)
    row["round"] = r
    rows.append(row)
    this = [x for x in rows if x["round"] == r]
    ratios = ", ".join(f"{x['weights']} {x['sentences_per_s'] / row['sentences_per_s']:.2f}" for x in this if x["engine"] == "weft")
    print(f"round {r}: " + ", ".join(f"{x['engine']} {x['weights']} {x['sentences_per_s']:.1f}" for x in this),
          f"(load {rows[-1]['load_1min']}); weft / sentence-transformers: {ratios}", flush=True)

out = Path(a.out)
out.parent.mkdir(parents=True, exist_ok=True)
with out.open("a") as f:
    for row in rows:
        f.write(json.dumps(row) + "\n")
for key in dict.fromkeys((x["engine"], x["weights"]) for x in rows):
    rates = [x["sentences_per_s"] for x in rows if (x["engine"], x["weights"]) == key]
    print(f"{key[0]} {key[1]}: best {max(rates):.1f}, median {statistics.median(rates):.1f} sentences/s over {len(rates)} runs")
st = {x["round"]: x["sentences_per_s"] for x in rows if x["engine"] != "weft"}
for w in a.weights.split(","):
    per_round = [x["sentences_per_s"] / st[x["round"]] for x in rows if x["engine"] == "weft" and x["weights"] == w]
    print(f"weft {w} / sentence-transformers per round: {min(per_round):.2f}-{max(per_round):.2f}, "
          f"median {statistics.median(per_round):.2f}")
