"""Measures rows of the quality table and appends them to a JSON-lines file (rows already there
are skipped, so an interrupted run resumes).

Rows:
  base                          the source GGUF decoded (every other row is compared with it)
  weft:NAME:ARGS                `weft quantize SOURCE NAME.st ARGS`, then `weft dequantize`
  llama:TYPE                    llama.cpp's llama_model_quantize(SOURCE, TYPE, allow_requantize)
  imatrix:TYPE                  llama.cpp's own llama-imatrix and llama-quantize, built from source
                                (bench/llama_cpp/quantize.sh): TYPE with an importance matrix
  role:ROLE:NAME                the base with only tensors whose name contains ROLE taken from the
                                weft row NAME (its .st file must exist)
  tuned:NAME:FROM:ARGS          the weft row FROM's file (which must exist) with its group scales,
                                zero points and norms (with --levels its levels too) tuned by
                                distillation on the --cal-ids texts (`tune.py ARGS`), written as NAME.st
  packed:NAME:FROM              the weft row FROM's file (which must exist) with its k matrices
                                entropy-coded (`weft pack`), written as NAME.st: the same weights

usage: run_table.py --source GGUF --ids IDS.json --work DIR --results FILE [--weft BIN] ROW...
"""

import argparse
import json
import os
import subprocess
import sys
import time

from harness import Runner, evaluate, gguf_tensors_f32, matrix_weights, safetensors_f32

LLAMA_TYPES = {
    "Q2_K": 10,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q4_0": 2,
    "Q4_K_M": 15,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "Q8_0": 7,
}


def weft_file(args, name, flags):
    """The row's weft file, quantized unless it exists. Another process may be quantizing it
    already (NAME.st.tmp, renamed when complete): then wait for it."""
    st = os.path.join(args.work, f"{name}.st")
    tmp = st + ".tmp"
    while os.path.exists(tmp) and not os.path.exists(st):
        time.sleep(5)
    if not os.path.exists(st):
        with open(os.path.join(args.work, f"{name}.log"), "w") as out:
            subprocess.run([args.weft, "quantize", args.source, tmp, *flags.split()], check=True, stdout=out)
        os.replace(tmp, st)
    return st


def weft_tensors(args, st):
    f32 = st + ".f32.safetensors"
    subprocess.run([args.weft, "dequantize", st, f32], check=True, stdout=subprocess.DEVNULL)
    try:
        return safetensors_f32(f32)
    finally:
        os.remove(f32)


def tuned_file(args, name, source_row, flags):
    """NAME.st: FROM.st tuned by tune.py on the --cal-ids texts (its log beside it)."""
    st = os.path.join(args.work, f"{name}.st")
    if not os.path.exists(st):
        start = os.path.join(args.work, f"{source_row}.st")
        if not os.path.exists(start):
            raise SystemExit(f"tuned:{name}: measure the row {source_row} first")
        tune = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tune.py")
        with open(os.path.join(args.work, f"{name}.log"), "w") as out:
            ids = [arg for path in args.cal_ids.split(",") for arg in ("--ids", path)]
            subprocess.run([sys.executable, tune, "--source", args.source, "--file", start, *ids,
                            "--out", st + ".tmp", *flags.split()], check=True, stdout=out, stderr=subprocess.STDOUT)
        os.replace(st + ".tmp", st)
    return st


def llama_file(args, ftype):
    import llama_cpp

    out = os.path.join(args.work, f"llama-{ftype}.gguf")
    if not os.path.exists(out):
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = LLAMA_TYPES[ftype]
        params.allow_requantize = True
        params.nthread = 2
        rc = llama_cpp.llama_model_quantize(args.source.encode(), out.encode(), params)
        if rc != 0:
            raise SystemExit(f"llama_model_quantize {ftype} returned {rc}")
    return out


def imatrix_file(args, ftype):
    out = os.path.join(args.work, f"llama-imatrix-{ftype}.gguf")
    if not os.path.exists(out):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench/llama_cpp/quantize.sh")
        with open(out + ".log", "w") as log:
            subprocess.run(["bash", script, ftype, out + ".tmp", args.source], check=True, stderr=log)
        os.replace(out + ".tmp", out)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--weft", default="target/release/weft")
    p.add_argument("--cal-ids", help="token ids of the tuning texts (comma-separated JSON files), for tuned: rows")
    p.add_argument("rows", nargs="+")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ids = json.load(open(args.ids))
    base_path = os.path.join(args.work, "base-logprobs.npy")
    weights = matrix_weights(args.source)
    done = set()
    if os.path.exists(args.results):
        done = {json.loads(line)["row"] for line in open(args.results) if line.strip()}
    runner = None
    for row in args.rows:
        if row in done:
            continue
        if row != "base" and not os.path.exists(base_path):
            raise SystemExit("measure the base row first")
        started = time.time()
        if runner is None:
            runner = Runner(args.source)
            base_tensors = runner.source_tensors
        kind, _, rest = row.partition(":")
        record = {"row": row, "kind": kind}
        if kind == "base":
            tensors = base_tensors
            record["file_bytes"] = os.path.getsize(args.source)
        elif kind == "weft":
            name, _, flags = rest.partition(":")
            st = weft_file(args, name, flags)
            tensors = weft_tensors(args, st)
            record.update(name=name, flags=flags, file_bytes=os.path.getsize(st))
        elif kind == "tuned":
            name, _, rest2 = rest.partition(":")
            source_row, _, flags = rest2.partition(":")
            st = tuned_file(args, name, source_row, flags)
            tensors = weft_tensors(args, st)
            record.update(kind="weft", tuned_from=source_row, name=name, flags=flags, file_bytes=os.path.getsize(st))
        elif kind == "packed":
            name, _, source_row = rest.partition(":")
            st = os.path.join(args.work, f"{name}.st")
            if not os.path.exists(st):
                start = os.path.join(args.work, f"{source_row}.st")
                if not os.path.exists(start):
                    raise SystemExit(f"packed:{name}: measure the row {source_row} first")
                subprocess.run([args.weft, "pack", start, st + ".tmp"], check=True, stdout=subprocess.DEVNULL)
                os.replace(st + ".tmp", st)
            tensors = weft_tensors(args, st)
            record.update(kind="weft", packed_from=source_row, name=name, file_bytes=os.path.getsize(st))
        elif kind == "llama":
            try:
                path = llama_file(args, rest)
            except ImportError as e:
                print(f"{row}: skipped ({e})", flush=True)
                continue
            tensors = gguf_tensors_f32(path)
            record.update(name=f"llama.cpp {rest}", file_bytes=os.path.getsize(path))
        elif kind == "imatrix":
            path = imatrix_file(args, rest)
            tensors = gguf_tensors_f32(path)
            # One llama.cpp series with the requantizations: the frontier compares weft with all.
            record.update(kind="llama", imatrix=True, name=f"llama.cpp {rest} imatrix", file_bytes=os.path.getsize(path))
        elif kind == "role":
            role, _, name = rest.partition(":")
            tensors = dict(base_tensors)
            quantized = weft_tensors(args, os.path.join(args.work, f"{name}.st"))
            swapped = [k for k in tensors if role in k and k in quantized]
            rel_sq = 0.0
            for k in swapped:
                diff = (tensors[k].astype("float64") - quantized[k]).ravel()
                rel_sq += float(diff @ diff) / float((tensors[k].astype("float64").ravel() ** 2).sum())
                tensors[k] = quantized[k]
            del quantized
            # Summed relative squared error of the swapped tensors: the budget planner's
            # role weight is kld / rel_sq_sum.
            record.update(role=role, name=name, tensors=len(swapped), rel_sq_sum=rel_sq)
        else:
            raise SystemExit(f"unknown row {row}")
        record["bits_per_weight"] = record.get("file_bytes", 0) * 8 / weights
        prepared = time.time()
        record.update(evaluate(runner, tensors, ids, base_path))
        record["seconds_prepare"] = round(prepared - started, 1)
        record["seconds"] = round(time.time() - started, 1)
        with open(args.results, "a") as out:
            out.write(json.dumps(record) + "\n")
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
