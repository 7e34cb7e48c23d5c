# Call b again on the same machine (a second process for each small file, whose recording speed
# differs between processes: note 55), and the 7B Q4_0 file written and run the same way.
set -uo pipefail
o=$OUT/c; source bench/gpu/setup.sh
f="$models/7b-Q4_0.gguf"
[ -f "$f" ] || timeout 200 python3 bench/gpu/gen_quant_gguf.py "$f" Q4_0 4096 14336 32 32 8 32000 >>"$o/models.log" 2>&1
stamp "$f written"
DAWN_MODELS="smollm2-Q4_0 tinyllama-Q4_0 7b-Q4_0" DAWN_TIMEOUT=120 timeout 300 bash bench/gpu/session.sh "$o" "dawn"
stamp done
