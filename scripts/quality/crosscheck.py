"""Checks the Python harness against weft's own engine on the same token ids.

Reads the log-probabilities `weft perplexity --save-logits` wrote for the base model (with the
token ids in its header), runs the base and one weft file through the harness on those ids, and
prints: the harness's perplexity, KLD and top-1 agreement for the weft file (to set beside
`weft perplexity WEFT_FILE --kld BASE.logp`), and how far weft's engine and transformers are
apart on the base model itself.

usage: crosscheck.py SOURCE.gguf BASE.logp WEFT_FILE.st [--weft BIN]
"""

import argparse
import json
import os
import subprocess
import tempfile

import numpy as np

from harness import Runner, compare, safetensors_f32


def read_weft_logp(path):
    with open(path, "rb") as f:
        if f.read(8) != b"weftlogp":
            raise SystemExit(f"{path}: not a weft log-probability file")
        version, dtype, vocab, window, tokens, rows = np.frombuffer(f.read(24), dtype="<u4")
        if version != 1:
            raise SystemExit(f"{path}: version {version}")
        ids = np.frombuffer(f.read(4 * int(tokens)), dtype="<u4").astype(np.int64).tolist()
        kind = "<f4" if dtype == 0 else "<f2"
        lp = np.frombuffer(f.read(), dtype=kind).reshape(int(rows), int(vocab)).astype(np.float32)
    if int(rows) != len(ids) - 1:
        raise SystemExit("cross-check needs one window over the whole text")
    return ids, lp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("source")
    p.add_argument("base_logp")
    p.add_argument("weft_file")
    p.add_argument("--weft", default="target/release/weft")
    args = p.parse_args()
    ids, weft_base = read_weft_logp(args.base_logp)
    runner = Runner(args.source)
    base = runner.log_probs(ids)[:-1]
    engine = compare(base, weft_base, ids)
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "decoded.safetensors")
        subprocess.run([args.weft, "dequantize", args.weft_file, f32], check=True, stdout=subprocess.DEVNULL)
        runner.load(safetensors_f32(f32))
    variant = compare(base, runner.log_probs(ids)[:-1], ids)
    print(json.dumps({
        "tokens": len(ids),
        "harness_base_ppl": compare(base, base, ids)["ppl"],
        "weft_engine_base_vs_harness_base": engine,
        "harness_variant_vs_base": variant,
    }, indent=1))


if __name__ == "__main__":
    main()
