# Sourced by the device calls in bench/results/h200/*/call.sh, from the repository root, with `o`
# set to the call's output folder: unpacks the carried Vulkan loader (.gl), the release binaries
# (.dev/*.xz, into $bin) and the gguf wheel (.whl, for gen_quant_gguf.py), points Vulkan at the
# NVIDIA driver, and defines `stamp` (a line with the seconds since setup, kept in session.log).
mkdir -p "$o"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/weft-bin; models=/tmp/weft-models; mkdir -p "$bin" "$models"
for f in .dev/*.xz; do xz -dc "$f" >"$bin/$(basename "$f" .xz)"; done; chmod +x "$bin"/*
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$o/session.log"; }
