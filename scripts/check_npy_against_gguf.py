#!/usr/bin/env python3
"""Compares `weft inspect MODEL --tensor NAME --npy OUT` with the PyPI `gguf` package's
reader and dequantizer (`gguf.GGUFReader`, `gguf.quants.dequantize`) for GGUF tensors.

Prints, per tensor: shapes, the number of values whose f32 bits differ (NaN matching NaN), and
the largest absolute difference. Exits non-zero if any tensor differs.

    /work/.venv-ref/bin/python scripts/check_npy_against_gguf.py \\
        models/SmolLM2-135M-Instruct.Q4_1.gguf blk.0.attn_q.weight token_embd.weight

A reference script only (numpy + gguf); the Rust tests do not need Python.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parent.parent


def weft_npy(weft, model, name, out_dir):
    out = Path(out_dir) / (name.replace("/", "_") + ".npy")
    subprocess.run([weft, "inspect", model, "--tensor", name, "--npy", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(out)


def compare(ours, reference):
    """(values whose bits differ, NaN matching NaN; largest absolute difference)."""
    a = ours.ravel().view(np.uint32)
    b = reference.ravel().view(np.uint32)
    both_nan = np.isnan(ours.ravel()) & np.isnan(reference.ravel())
    differ = int(np.count_nonzero((a != b) & ~both_nan))
    with np.errstate(invalid="ignore"):
        diff = np.abs(ours.astype(np.float64) - reference.astype(np.float64)).ravel()
    diff = diff[~both_nan]
    return differ, float(np.nanmax(diff)) if diff.size else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("tensors", nargs="+")
    parser.add_argument("--weft", default=str(ROOT / "target" / "debug" / "weft"),
                        help="the weft binary (default: target/debug/weft)")
    args = parser.parse_args()

    reader = GGUFReader(args.model)
    by_name = {t.name: t for t in reader.tensors}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tensors:
            tensor = by_name[name]
            reference = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
            ours = weft_npy(args.weft, args.model, name, tmp)
            if ours.shape != reference.shape or ours.dtype != np.float32:
                print(f"{name}: weft {ours.dtype} {ours.shape}, gguf {reference.shape}")
                failed = True
                continue
            differ, max_abs = compare(ours, reference)
            failed |= differ > 0
            print(f"{name}: {tensor.tensor_type.name} shape {list(ours.shape)}, {ours.size} values, "
                  f"{differ} differ, max |weft - gguf| = {max_abs:g}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
