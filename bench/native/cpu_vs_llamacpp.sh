#!/usr/bin/env bash
# weft's CPU backend against llama.cpp (llama-cpp-python) on one GGUF, natively, interleaved: each
# round runs `weft bench --backend cpu` and then bench/native/llama_cpp_bench.py with the same
# protocol and threads, so a change in the machine's load reaches both. Appends one JSON line per
# run (the 1-minute load average before it, the round, the engine, the medians) to OUT;
# bench/collect.py turns the file into a table of best and median rates and their ratio.
#
#   bash bench/native/cpu_vs_llamacpp.sh
#
# Settings, from the environment:
#   MODEL       models/SmolLM2-135M-Instruct.Q4_1.gguf
#   ROUNDS      5
#   PROMPT_LEN  64, GEN 16, REPS 3 (medians of REPS after one untimed repetition, per run)
#   THREADS     2
#   PYTHON      python3 (with llama-cpp-python and numpy)
#   OUT         bench/results/local/cpu-vs-llamacpp.jsonl (appended to; remove it to start over)
# Measure on an idle machine: figures taken while other jobs run say little about either engine.
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
ROUNDS=${ROUNDS:-5}
PROMPT_LEN=${PROMPT_LEN:-64}
GEN=${GEN:-16}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-bench/results/local/cpu-vs-llamacpp.jsonl}

cargo build --release --bin weft
mkdir -p "$(dirname "$OUT")"
proto=(--prompt-len "$PROMPT_LEN" --gen "$GEN" --reps "$REPS" --threads "$THREADS")

# One run: the command's JSON object (stdout) reduced to one line with the round and the load.
record() {
  local engine=$1 round=$2
  shift 2
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$@" | "$PYTHON" -c '
import json, sys
engine, rnd, load, threads, cpu = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
text = sys.stdin.read()
r = json.loads(text[text.index("{"):])
row = {"engine": engine, "round": rnd, "load_1min": load, "threads": threads, "cpu": cpu,
       "model": r["model"], "prompt_len": r["prompt_len"], "gen": r["gen"], "reps": r["reps"]}
for k in ("prefill_tok_s", "decode_tok_s", "ttft_ms"):
    row[k] = r[k]
    row[k + "_median"] = r[k + "_median"]
print(json.dumps(row))
' "$engine" "$round" "$load" "$THREADS" "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" | tee -a "$OUT"
}

for round in $(seq 1 "$ROUNDS"); do
  record "weft cpu" "$round" target/release/weft bench "$MODEL" --backend cpu --json "${proto[@]}"
  record "llama.cpp" "$round" "$PYTHON" bench/native/llama_cpp_bench.py "$MODEL" "${proto[@]}"
done
echo "appended $((2 * ROUNDS)) runs to $OUT; python3 bench/collect.py writes the table"
