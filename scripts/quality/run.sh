#!/usr/bin/env bash
# Regenerates the quality table of docs/QUALITY.md (printed, and kept in $WORK/table.md) and
# docs/quality-kld.svg. Needs a Python with torch, transformers, gguf, numpy, safetensors and
# llama-cpp-python (PYTHON=...). Rows already in $WORK/results.jsonl are not measured again.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=$(realpath "${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}")
TEXT=$(realpath "${TEXT:-/usr/share/common-licenses/Apache-2.0}")
WORK=$(realpath -m "${WORK:-target/quality}")
PYTHON=${PYTHON:-python3}
cargo build --release --bin weft
mkdir -p "$WORK"
WEFT=$(realpath target/release/weft)
"$WEFT" tokenize "$MODEL" --text "$TEXT" --json > "$WORK/ids.json"
# The tuned rows' texts (tune.py): the calibration text, then 48 sequences of 512 tokens sampled
# from the source model itself (seeded), whose last two are held out.
"$WEFT" tokenize "$MODEL" --text data/calibration.txt --json > "$WORK/cal-ids.json"
# gen (seed 0) for every tuned row; gen2-gen4 (seeds 1, 3, 4) for the rows that continue tuning a
# tuned file (rows.sh).
for set in gen:0 gen2:1 gen3:3 gen4:4; do
  [ -f "$WORK/${set%:*}-ids.json" ] || (cd scripts/quality && "$PYTHON" tune.py generate --source "$MODEL" \
    --ids "$WORK/cal-ids.json" --out "$WORK/${set%:*}-ids.json" --count 48 --seed "${set#*:}")
done
export WORK
# Calibration statistics for the --calibration rows, from the default calibration text (not the
# evaluation text), made once, with the Hessians the --gptq rows need.
export CAL=${CAL:-$WORK/calibration.safetensors}
[ -f "$CAL" ] || "$WEFT" calibrate "$MODEL" --text data/calibration.txt --out "$CAL" --hessian
if [ $# -gt 0 ]; then printf '%s\n' "$@"; else bash scripts/quality/rows.sh; fi | awk '!seen[$0]++' > "$WORK/rows.txt"
mapfile -t ROWS < "$WORK/rows.txt"
(cd scripts/quality && nice -n 10 "$PYTHON" run_table.py --source "$MODEL" --ids "$WORK/ids.json" \
  --work "$WORK" --results "$WORK/results.jsonl" --weft "$WEFT" \
  --cal-ids "$WORK/cal-ids.json,$WORK/gen-ids.json" "${ROWS[@]}")
# Rows carried from docs/QUALITY.md (scripts/quality/carry.py) are merged first, so a row measured
# here replaces its carried figures.
RESULTS=$WORK/results.jsonl
[ -f "$WORK/carried.jsonl" ] && RESULTS=$WORK/carried.jsonl,$RESULTS
"$PYTHON" scripts/quality/make_report.py "$RESULTS" docs/quality-kld.svg docs/quality-frontier.svg | tee "$WORK/table.md"
