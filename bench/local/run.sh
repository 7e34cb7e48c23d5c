#!/usr/bin/env bash
# The "this machine" rows of the benchmark: every engine on the CPU of the machine that runs
# this, with one model and one protocol, then bench/collect.py folds them into bench/results.json,
# bench/results.md and bench/chart.svg.
#
#   PYTHON=path/to/python bash bench/local/run.sh
#
# PYTHON needs llama-cpp-python, numpy and matplotlib (python3 -m venv .venv &&
# .venv/bin/pip install llama-cpp-python numpy matplotlib). The script brings the rest (scripts/
# setup.sh where a tool is missing, the release weft binary, the wasm package, the wllama npm
# package) and overwrites its outputs, so running it again repeats the measurement. About four
# minutes on two cores with the defaults, three of them weft on SwiftShader (~1 s per decode step,
# ~0.45 s per prompt token). Settings, from the environment:
#   MODEL       models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh fetches it)
#   PROMPT_LEN  64   prompt tokens (at most 64: the browser API runs the prompt in passes of 64)
#   GEN         16   generated tokens, the first one out of the prompt pass
#   REPS        3    timed repetitions, after one untimed one that compiles and warms up
#   THREADS     CPU count: llama.cpp's and wllama's threads
#   COLLECT     1    run bench/collect.py at the end (0: only the three files)
#
# Writes bench/results/local/
#   weft-native.json  `weft bench MODEL --json`: weft through wgpu on the native Vulkan adapter,
#                     here lavapipe (Mesa's software Vulkan on the CPU)
#   llama-cpp.json    bench/native/llama_cpp_bench.py: llama.cpp through llama-cpp-python, CPU
#   browser.json      bench/browser/run.mjs in headless Chromium: weft through WebGPU on SwiftShader
#                     (Chromium's software GPU on the CPU) and wllama (llama.cpp built to wasm, threads)
#   machine.json      the CPU, the date and the settings above
#   *.log             each command's stderr
#
# The protocol, the same for every engine: a prompt of PROMPT_LEN tokens (random ids natively,
# English text cut to exactly PROMPT_LEN tokens in the browser, whose APIs take text; a fresh prompt
# each repetition, no cache reused), then greedy decoding until GEN tokens exist. Per repetition:
#   ttft_ms        time to first token: the prompt's forward pass up to the first token picked
#   prefill_tok_s  PROMPT_LEN / ttft
#   decode_tok_s   (GEN - 1) / the time of the GEN - 1 single-token steps after the first token,
#                  each a forward pass of the token picked last and the pick of the next one
# and *_median over the REPS repetitions (the upper middle one for an even REPS; each figure's
# median is taken on its own). Each engine times itself: weft (native and wasm) around its own
# prefill/step calls, llama.cpp around eval + argmax, wllama from llama.cpp's server timings
# (prompt_ms, predicted_ms over predicted_n - 1 steps).
set -euo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPT_LEN=${PROMPT_LEN:-64}
GEN=${GEN:-16}
REPS=${REPS:-3}
THREADS=${THREADS:-$(nproc)}
PYTHON=${PYTHON:-python3}
COLLECT=${COLLECT:-1}
out=bench/results/local

# The toolchain, Chromium, lavapipe and the npm packages: scripts/setup.sh when one is missing.
if ! { [ -x /usr/bin/chromium ] && command -v wasm-bindgen >/dev/null && [ -x node_modules/.bin/wasm-opt ] &&
       [ -d node_modules/@playwright/test ]; }; then
  bash scripts/setup.sh
fi
[ -f "$MODEL" ] || [ "$MODEL" != models/SmolLM2-135M-Instruct.Q4_1.gguf ] || bash scripts/fetch-model.sh
[ -f "$MODEL" ] || { echo "no model at $MODEL" >&2; exit 1; }
"$PYTHON" -c 'import llama_cpp, numpy, matplotlib' 2>/dev/null || {
  echo "$PYTHON lacks llama-cpp-python, numpy or matplotlib: set PYTHON (see the header of $0)" >&2
  exit 1
}
mkdir -p "$out"
trap 'rm -f "$out"/*.json.tmp' EXIT
started=$(date +%s)
step() { echo "== $* ($(( $(date +%s) - started )) s)"; }

step "build"
[ -d bench/browser/node_modules/@wllama/wllama ] || (cd bench/browser && npm ci --no-audit --no-fund)
cargo build --release --bin weft
# The wasm package again only when a source is newer than it (wasm-opt alone takes a while).
if [ ! -f www/pkg/weft_bg.wasm ] || [ -n "$(find src shaders Cargo.toml Cargo.lock -newer www/pkg/weft_bg.wasm -print -quit)" ]; then
  bash scripts/build-wasm.sh
fi

# What the rows were measured on, and how (collect.py names the rows' group with it).
"$PYTHON" - "$out/machine.json" "$MODEL" "$PROMPT_LEN" "$GEN" "$REPS" "$THREADS" <<'EOF'
import json, os, platform, sys, time
path, model, prompt_len, gen, reps, threads = sys.argv[1:]
cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
           platform.processor())
json.dump({"cpu": cpu, "cpus": os.cpu_count(), "os": platform.platform(), "date": time.strftime("%Y-%m-%d"),
           "model": model, "model_name": os.path.basename(model).removesuffix(".gguf"),
           "prompt_len": int(prompt_len), "gen": int(gen), "reps": int(reps), "threads": int(threads)},
          open(path, "w"), indent=2)
EOF

# Each result goes to a temporary file first: a failed run leaves the last good file in place.
step "weft native: prompt $PROMPT_LEN, gen $GEN, reps $REPS"
target/release/weft bench "$MODEL" --prompt-len "$PROMPT_LEN" --gen "$GEN" --reps "$REPS" --json \
  >"$out/weft-native.json.tmp" 2>"$out/weft-native.log"
mv "$out/weft-native.json.tmp" "$out/weft-native.json"

step "llama.cpp native: $THREADS threads"
"$PYTHON" bench/native/llama_cpp_bench.py "$MODEL" --prompt-len "$PROMPT_LEN" --gen "$GEN" --reps "$REPS" \
  --threads "$THREADS" >"$out/llama-cpp.json.tmp" 2>"$out/llama-cpp.log"
mv "$out/llama-cpp.json.tmp" "$out/llama-cpp.json"

step "browser: weft (WebGPU) and wllama ($THREADS threads) in headless Chromium"
# run.mjs exits 1 when an engine broke the protocol (prompt or generated length, a cache hit) or
# failed; the file it wrote says which, and collect.py leaves such an engine out.
status=0
node bench/browser/run.mjs --model "$MODEL" --prompt-len "$PROMPT_LEN" --gen "$GEN" --reps "$REPS" \
  --threads "$THREADS" --out "$out/browser.json.tmp" 2> >(tee "$out/browser.log" >&2) || status=$?
[ -f "$out/browser.json.tmp" ] && mv "$out/browser.json.tmp" "$out/browser.json"

if [ "$COLLECT" = 1 ]; then
  step "collect"
  "$PYTHON" bench/collect.py
fi
step "done"
exit "$status"
