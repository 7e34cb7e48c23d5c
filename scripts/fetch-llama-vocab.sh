#!/usr/bin/env bash
# llama.cpp's vocabulary test files (tokenizer metadata only, no weights, with the test texts and
# the ids Hugging Face tokenizers gives for them) from the PyPI sdist of llama-cpp-python, which
# vendors llama.cpp, into tests/fixtures/llama-vocab/ (ignored by git).
# tests/tokenizer_gguf_vocab.rs reads them. Idempotent: files with the right checksums are kept;
# the sdist (77 MB) is kept in ~/.cache/weft so that adding a file later does not fetch it again.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
out=tests/fixtures/llama-vocab
cache=${XDG_CACHE_HOME:-$HOME/.cache}/weft

# SHA-256 and name of every file the test reads. Families weft tokenizes come with their .inp
# (texts) and .out (ids); the others only as a GGUF whose refusal the test checks.
manifest=$(cat <<'EOF'
967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326  ggml-vocab-phi-3.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-phi-3.gguf.inp
ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29  ggml-vocab-phi-3.gguf.out
58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65  ggml-vocab-gemma-4.gguf
0528aa007b06965f980181d252b5dff7bb170a77af6157bd48bba56885374448  ggml-vocab-gemma-4.gguf.inp
ba8c596bcd05e97e62566fa994b42eeaeffd6a4e4b4a4abe7b5b689aa6b43bf3  ggml-vocab-gemma-4.gguf.out
16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69  ggml-vocab-llama-spm.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-llama-spm.gguf.inp
ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29  ggml-vocab-llama-spm.gguf.out
97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e  ggml-vocab-llama-bpe.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-llama-bpe.gguf.inp
118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b  ggml-vocab-llama-bpe.gguf.out
44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c  ggml-vocab-qwen2.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-qwen2.gguf.inp
de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363  ggml-vocab-qwen2.gguf.out
cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac  ggml-vocab-gpt-2.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-gpt-2.gguf.inp
48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60  ggml-vocab-gpt-2.gguf.out
fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d  ggml-vocab-starcoder.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-starcoder.gguf.inp
3ef12183c57ad076f9defd8e5eb454f509f5f0865cad35646abb4c4b2d2c5764  ggml-vocab-starcoder.gguf.out
ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678  ggml-vocab-refact.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-refact.gguf.inp
c7e5c1c5dc1dfd3e0d56576bf699d2aca0b760b80779523ea9d323aad6cd1b88  ggml-vocab-refact.gguf.out
59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f  ggml-vocab-mpt.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-mpt.gguf.inp
9d0982a7e7950b81bc2e325fb61bb7e295d2238934ab889737494de2dc4d906b  ggml-vocab-mpt.gguf.out
a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9  ggml-vocab-command-r.gguf
be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0  ggml-vocab-command-r.gguf.inp
d2a601336e422b60a264858c01b14c5d37575fe1f9adfcafc2f3b3707903903f  ggml-vocab-command-r.gguf.out
63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c  ggml-vocab-qwen35.gguf
0fc6547e7876cd5b2ef64a9d319c6e39040eb53986660bd4227ed7ddef017a94  ggml-vocab-qwen35.gguf.inp
5efe225820325303857d0a087a8d59216f0d1e9a9e31133e7a5b44c3c4e1e9ca  ggml-vocab-qwen35.gguf.out
9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad  ggml-vocab-falcon.gguf
91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1  ggml-vocab-deepseek-coder.gguf
867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76  ggml-vocab-deepseek-llm.gguf
fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854  ggml-vocab-bert-bge.gguf
EOF
)

mkdir -p "$out"
(cd "$out" && echo "$manifest" | sha256sum -c --status 2>/dev/null) && exit 0

mkdir -p "$cache"
if ! echo "$SDIST_SHA256  $cache/$SDIST" | sha256sum -c --status 2>/dev/null; then
  echo "[fetch-llama-vocab] downloading the llama-cpp-python==$VERSION sdist from PyPI (77 MB)"
  tmp_dl=$(mktemp -d)
  # --no-binary for this package alone: with ":all:" pip would also build its build backend's
  # dependencies (CMake) from source just to read the sdist's metadata.
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -d "$tmp_dl"
  mv "$tmp_dl/$SDIST" "$cache/$SDIST.part"
  rm -rf "$tmp_dl"
  echo "$SDIST_SHA256  $cache/$SDIST.part" | sha256sum -c --status || {
    echo "[fetch-llama-vocab] checksum mismatch for $SDIST" >&2
    exit 1
  }
  mv "$cache/$SDIST.part" "$cache/$SDIST"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
names=$(echo "$manifest" | awk '{print $2}')
# shellcheck disable=SC2086 # one member per name
tar -xzf "$cache/$SDIST" -C "$tmp" --strip-components=4 \
  $(for n in $names; do echo "llama_cpp_python-$VERSION/vendor/llama.cpp/models/$n"; done)
(cd "$tmp" && echo "$manifest" | sha256sum -c --quiet) || {
  echo "[fetch-llama-vocab] a file from $SDIST has the wrong checksum" >&2
  exit 1
}
for n in $names; do mv "$tmp/$n" "$out/$n"; done
echo "[fetch-llama-vocab] $out ready ($(du -sh "$out" | cut -f1))"
