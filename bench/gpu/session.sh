#!/usr/bin/env bash
# One call on the GPU machine: kernel checks, GEMV throughput and decode/prefill of GGUF models
# of three shapes, all in one session so every ratio pairs figures of the same session.
#
#   bash bench/gpu/session.sh OUT_DIR [STEPS]
#
# Expects, in the repository root: .gl/*.deb (libvulkan1 and libglvnd0, libgl1, libglx0, libegl1,
# libgles2, libopengl0: the NVIDIA ICD on the H200 loads only beside libglvnd's libraries), .dev/*.xz (release binaries: weft,
# qmatmul_bench, and optionally the test binaries qmatmul-*, fused_kernels-*, gemv_int8-*),
# .whl/gguf-*.whl.
# STEPS (default "copy tests gemv models"): which parts to run.
#   copy    the device's copy bandwidth through PyTorch (bytes read + written per second)
#   tests   the GEMV test binaries on this GPU
#   gemv    qmatmul_bench over formats, shapes and launch shapes (inside and beyond L2)
#   gemm    qmatmul_bench over prefill shapes (GEMM_TOKENS tokens, default 128) for each GEMM
#           kernel (GEMM_CONFIGS): tiled, outer products on tiles of 64 rows x 32 or 64 tokens,
#           and the matrix units at f16 where the adapter has them (GFLOP/s)
#   models  random-weight GGUFs (Q4_0, Q8_0) of the SmolLM2, TinyLlama and 7B shapes; weft bench,
#           and llama.cpp's llama-bench on the same files where .dev/llama-bench.xz is there (built
#           with CUDA from the llama.cpp source in the llama-cpp-python sdist)
#   llama   build llama-bench (CUDA, sm_90) from .llama/llama.tar.xz (the llama.cpp source of the
#           llama-cpp-python sdist; niced, on three quarters of the cores, so the weft runs beside it
#           keep their figures) while the other steps run, then run it on every model file
#   dawn    weft's JS API on Dawn (bench/dawn/run.mjs, carried as .dev/weft-dawn.txz) beside a
#           native weft bench of each model file (after `models` in the same call); DAWN_ARGS
#           (e.g. --profile, --activations int8) go to run.mjs, NATIVE_ARGS (e.g.
#           --int8-activations) to that weft bench
#   embed   sentence embeddings: a random-weight all-MiniLM-L6-v2-shape BertModel made with the
#           device's transformers; weft bench-embed --backend gpu (EMBED_WEIGHTS, default f32,q8)
#           beside PyTorch f32 and fp16 on the GPU, 256 sentences, batch 32, tokenization
#           included (bench/embed_gpu.py); JSON lines in OUT_DIR/embed.jsonl for bench/collect.py
set -uo pipefail
out=${1:?output folder}
steps=${2:-copy tests gemv models}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/session.log"; }
# The rows of a qmatmul_bench JSON file, into the log: GB/s for GEMVs, with "gemm" GFLOP/s.
show_rows() {
  python3 - "$1" "${2:-gemv}" <<'EOF' | tee -a "$out/session.log"
import json, sys
d = json.load(open(sys.argv[1]))
gemm = sys.argv[2] == "gemm"
for r in d["rows"]:
    rate = f'{r["gflop_per_s"]:8.0f} GFLOP/s' if gemm else f'{r["gb_per_s"]:7.0f} GB/s'
    tokens = f' t={r["tokens"]:<4}' if gemm else ""
    copies = f' x{r["copies"]}' if r.get("copies", 1) > 1 else ""
    print(f'{r["format"]:>12} {r["n"]:>6}x{r["k"]:<6}{tokens} {r["us_per_call"]:9.1f} us {rate}{copies}')
for s in d.get("skipped", []):
    print("skipped:", s)
EOF
}

for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin
mkdir -p "$bin"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done
chmod +x "$bin"/*
# A llama-bench built earlier on this machine (LLAMA_BENCH), if there is one.
[ -x "${LLAMA_BENCH:-}" ] && ln -sf "$LLAMA_BENCH" "$bin/llama-bench"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
if [[ $steps == *llama* ]] && [ ! -x "$bin/llama-bench" ]; then
  mkdir -p /tmp/l && tar -xJf .llama/llama.tar.xz -C /tmp/l
  (cd /tmp/l/llama.cpp && cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DBUILD_SHARED_LIBS=OFF >/tmp/l/cmake.log 2>&1 && nice -n 19 cmake --build build --target llama-bench -j "$(( $(nproc) * 3 / 4 ))" >/tmp/l/build.log 2>&1
   echo "built: $?" >>/tmp/l/build.log) &
  building=$!
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee -a "$out/session.log"

if [[ $steps == *copy* ]]; then
  log copy
  python3 - <<'EOF' 2>&1 | tee -a "$out/session.log"
import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
y = torch.empty_like(x)
for _ in range(3):
    y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
times = []
for _ in range(5):
    s.record()
    for _ in range(10):
        y.copy_(x)
    e.record()
    torch.cuda.synchronize()
    times.append(s.elapsed_time(e) / 10)
ms = sorted(times)[2]
print(f"device copy (PyTorch, 1 GiB, median of 5x10): {2 * x.numel() / ms / 1e6:.0f} GB/s")
EOF
fi

if [[ $steps == *tests* ]]; then
  for t in "$bin"/qmatmul-* "$bin"/fused_kernels-* "$bin"/gemv_int8-*; do
    [ -x "$t" ] || continue
    log "test $(basename "$t")"
    "$t" --test-threads 1 2>&1 | tail -15 | tee -a "$out/session.log"
  done
fi

if [[ $steps == *gemv* ]]; then
  formats=${QFORMATS:-Q4_0,Q8_0,Q4_K,q4_g32_asym,q3_g32_asym,q2_g32_asym,q4_g32_sym,q8_g32_sym}
  # QINT8=1: each launch shape also with 8-bit activations (--int8; files *-int8.json).
  # QROTATE=M: the calls cycle through copies of each weight holding M MiB (--rotate-mib), so
  # that a matrix the L2 cache could hold is read from memory, as in a decode step.
  for c in ${QCONFIGS:-256,1,32 256,2,32 256,4,32 128,4,32}; do
   for int8 in "" ${QINT8:+--int8}; do
    IFS=, read -r wg rows lanes <<<"$c"
    name="qmatmul-$wg-$rows-$lanes${int8:+-int8}"
    log "qmatmul_bench $c $int8"
    # shellcheck disable=SC2086
    "$bin/qmatmul_bench" --formats "$formats" --shapes ${QSHAPES:-8192x8192,14336x4096,4096x14336,16384x16384} \
      --seconds 0.4 --json --wg "$wg" --rows "$rows" --lanes "$lanes" $int8 ${QROTATE:+--rotate-mib "$QROTATE"} 2>>"$out/qmatmul.err" >"$out/$name.json"
    show_rows "$out/$name.json"
   done
  done
fi

if [[ $steps == *gemm* ]]; then
  # kernel[,rows,tokens a tile[,workgroup]] (matrix,64,64,256: the K-split matrix shape)
  for c in ${GEMM_CONFIGS:-tiled outer,64,32 outer,64,64 matrix}; do
    IFS=, read -r kernel rows tt wg <<<"$c"
    for t in ${GEMM_TOKENS:-128}; do
      name="qgemm-$kernel${rows:+-$rows}${tt:+-$tt}${wg:+-$wg}-t$t"
      log "qmatmul_bench GEMM $c, $t tokens"
      # The matrix units take f16 operands.
      prec=f32; [ "$kernel" = matrix ] && prec=f16
      "$bin/qmatmul_bench" --formats "${GEMM_FORMATS:-Q4_0,Q8_0,Q4_K,q4_g32_asym}" --tokens "$t" --gemm "$kernel" --precision "$prec" ${rows:+--rows "$rows"} ${tt:+--tt "$tt"} ${wg:+--wg "$wg"} \
        --shapes "${GEMM_SHAPES:-2048x2048,5632x2048,2048x5632,4096x4096,14336x4096,4096x14336}" --seconds 0.4 --json \
        2>>"$out/qmatmul.err" >"$out/$name.json"
      show_rows "$out/$name.json" gemm
    done
  done
fi

if [[ $steps == *models* ]]; then
  models=/tmp/weft-models
  mkdir -p "$models"
  # name type dim ffn layers heads kv vocab
  specs=${MODEL_SPECS:-"smollm2 Q4_0 576 1536 30 9 3 49152
tinyllama Q4_0 2048 5632 22 32 4 32000
tinyllama Q8_0 2048 5632 22 32 4 32000
7b Q4_0 4096 14336 32 32 8 32000
7b Q8_0 4096 14336 32 32 8 32000"}
  while read -r name ty dim ffn layers heads kv vocab; do
    f="$models/$name-$ty.gguf"
    [ -f "$f" ] || python3 bench/gpu/gen_quant_gguf.py "$f" "$ty" "$dim" "$ffn" "$layers" "$heads" "$kv" "$vocab" \
      >>"$out/models.log" 2>&1
    # WEFT_VARIANTS: '|'-separated extra flag sets, each a run of its own (the first profiled),
    # e.g. "|--no-fuse-glu|--no-pipeline" for what each decode-step change buys.
    IFS='|' read -r -a variants <<<"${WEFT_VARIANTS:-}"
    [ ${#variants[@]} -eq 0 ] && variants=("")
    first=--profile
    for v in "${variants[@]}"; do
      log "weft bench $name $ty ${v:-(defaults)}"
      # shellcheck disable=SC2086
      "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 $first $v ${WEFT_BENCH_ARGS:-} \
        2>>"$out/weft-$name-$ty.err" | tee -a "$out/session.log"
      first=
    done
    tail -3 "$out/weft-$name-$ty.err"
    if [ -x "$bin/llama-bench" ]; then
      log "llama-bench $name $ty"
      "$bin/llama-bench" -m "$f" -p 128 -n 128 -r 3 -ngl 99 -o md 2>>"$out/llama.err" | tee -a "$out/session.log"
    fi
  done <<<"$specs"
fi

if [[ $steps == *dawn* ]]; then
  # The JS API on Dawn (bench/dawn/run.mjs from .dev/weft-dawn.txz, bench/dawn/pack.sh) beside a
  # native `weft bench` of the same file right before it, on the GGUFs the models step wrote
  # (DAWN_MODELS: names such as "tinyllama-Q4_0 7b-Q4_0"; default every one). A failure prints
  # its error text and the next model goes on. DAWN_ICD: a Vulkan driver for Dawn alone (on a
  # machine without a GPU, /usr/lib/chromium/vk_swiftshader_icd.json).
  log dawn
  if [ ! -f .dev/weft-dawn.txz ]; then
    echo "dawn: no .dev/weft-dawn.txz (bash bench/dawn/pack.sh)" | tee -a "$out/session.log"
  elif ! tar -xJf .dev/weft-dawn.txz -C /tmp; then
    echo "dawn: .dev/weft-dawn.txz did not unpack" | tee -a "$out/session.log"
  else
    dawn=/tmp/weft-dawn
    log "dawn: greedy ids of the JS API on Dawn against native weft generate, tiny fixture"
    "$dawn/node" "$dawn/bench/dawn/run.mjs" --webgpu "$dawn/target/dawn/webgpu" ${DAWN_ICD:+--dawn-icd "$DAWN_ICD"} \
      --native "$bin/weft" --check 16 --check-only "$dawn/tests/fixtures/llama3-tiny/model.gguf" 2>&1 | sed 's/^/dawn: /' | tee -a "$out/session.log"
    names=${DAWN_MODELS:-$(cd /tmp/weft-models 2>/dev/null && ls ./*.gguf 2>/dev/null | sed 's|^\./||; s|\.gguf$||')}
    [ -n "$names" ] || echo "dawn: no models in /tmp/weft-models: run the models step first in this call" | tee -a "$out/session.log"
    tmp=/tmp/weft-dawn-run
    mkdir -p "$tmp"
    for name in $names; do
      f=/tmp/weft-models/$name.gguf
      log "dawn $name: native weft bench"
      "$bin/weft" bench "$f" --prompt-len 128 --gen 128 --reps 3 --json ${NATIVE_ARGS:-} >"$tmp/native.json" 2>"$tmp/native.err"
      log "dawn $name: JS API on Dawn"
      timeout "${DAWN_TIMEOUT:-300}" "$dawn/node" "$dawn/bench/dawn/run.mjs" --webgpu "$dawn/target/dawn/webgpu" \
        ${DAWN_ICD:+--dawn-icd "$DAWN_ICD"} --native "$bin/weft" --check 0 ${DAWN_ARGS:-} "$f" >"$tmp/js.json" 2>"$tmp/js.err"
      status=$?
      # DAWN_ARGS=--profile: the JS API's decode-step profile, beside the native one in the log.
      grep '^profile' "$tmp/js.err" | sed 's/^/dawn: /' | tee -a "$out/session.log"
      # One record a model in dawn.jsonl (a failure keeps its error text there and in the log).
      python3 - "$name" "$tmp" "$status" "$out/dawn.jsonl" <<'EOF' 2>&1 | sed 's/^/dawn: /' | tee -a "$out/session.log"
import json, sys
name, tmp, status, path = sys.argv[1:]
def read(what):
    try:
        return json.loads(open(f"{tmp}/{what}.json").read())
    except (OSError, ValueError):
        err = open(f"{tmp}/{what}.err", errors="replace").read().strip().splitlines()
        return {"error": " | ".join(err[-5:]) or "no output"}
n, d = read("native"), read("js")
with open(path, "a") as f:
    f.write(json.dumps({"model": name, "native": n, "dawn": d, "dawn_status": int(status)}) + "\n")
for what, r in (("native", n), ("dawn-js", d)):
    if "error" in r:
        print(f"{what}: {r['error']}")
    else:
        print(f"{what}: {r['adapter']}: prefill {r['prefill_tok_s_median']:.1f} tok/s, decode {r['decode_tok_s_median']:.1f} tok/s"
              + (f", problems: {'; '.join(r['problems'])}" if r.get("problems") else ""))
if "error" not in n and "error" not in d:
    print(f"dawn-js / native: decode {d['decode_tok_s_median'] / n['decode_tok_s_median']:.2f}, "
          f"prefill {d['prefill_tok_s_median'] / n['prefill_tok_s_median']:.2f}; greedy ids equal for the first "
          f"{d.get('ids_equal_first')} of {len(d.get('ids_dawn', []))}")
if status != "0":
    print(f"run.mjs exit status {status}")
EOF
    done
  fi
fi

if [[ $steps == *embed* ]]; then
  log embed
  python3 bench/embed_gpu.py --weft "$bin/weft" --device cuda --weights "${EMBED_WEIGHTS:-f32,q8}" \
    --out "$out/embed.jsonl" 2>>"$out/embed.err" | tee -a "$out/session.log"
  tail -4 "$out/embed.err" | tee -a "$out/session.log"
fi

if [ -n "${building:-}" ]; then
  log "waiting for the llama-bench build"
  wait "$building"
  tail -1 /tmp/l/build.log | tee -a "$out/session.log"
  # The binary comes back (xz, under the 16 MB a file that returns) for the next session to
  # carry as .dev/llama-bench.xz instead of building it again.
  built=/tmp/l/llama.cpp/build/bin/llama-bench
  if [ -x "$built" ]; then
    xz -T0 -c "$built" >"$out/llama-bench.xz"
    ldd "$built" | tee -a "$out/session.log"
    if [ "$(stat -c %s "$out/llama-bench.xz")" -gt 16000000 ]; then
      log "llama-bench.xz is over 16 MB: not kept"
      rm "$out/llama-bench.xz"
    fi
  fi
  for f in /tmp/weft-models/*.gguf; do
    log "llama-bench $(basename "$f" .gguf)"
    /tmp/l/llama.cpp/build/bin/llama-bench -m "$f" -p 128 -n 128 -r 3 -ngl 99 -o md 2>>"$out/llama.err" | tee -a "$out/session.log"
  done
fi
log done
