"""PyTorch transformers eager `generate` on a model folder: greedy, random prompt ids, bf16,
with the default dynamic cache and with a static cache; plus the device's copy bandwidth.
Prints one JSON line per measurement.

    python3 bench/gpu/torch_generate.py MODEL_DIR [--prompt-len 128] [--gen 128] [--reps 3]
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def copy_bandwidth_gb_s(mib: int = 1024, reps: int = 20) -> float:
    """Device-to-device copy, counting bytes read plus bytes written."""
    src = torch.rand(mib * 1024 * 1024 // 4, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * src.numel() * 4 / statistics.median(times) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps({"what": "copy", "gb_s": round(copy_bandwidth_gb_s(), 1),
                      "gpu": torch.cuda.get_device_name()}), flush=True)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16).cuda().eval()
    gen = torch.Generator().manual_seed(0)
    for cache in ["dynamic", "static"]:
        kwargs = dict(max_new_tokens=a.gen, min_new_tokens=a.gen, do_sample=False)
        if cache == "static":
            kwargs["cache_implementation"] = "static"
        rates = []
        for rep in range(a.reps + 1):
            ids = torch.randint(0, model.config.vocab_size, (1, a.prompt_len), generator=gen).cuda()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - t0
            if rep > 0:  # the first run warms up (and compiles, for the static cache)
                rates.append((out.shape[1] - a.prompt_len) / elapsed)
        print(json.dumps({"what": "torch_generate", "model": a.model, "cache": cache,
                          "prompt_len": a.prompt_len, "gen": a.gen,
                          "tok_s": [round(r, 1) for r in rates],
                          "tok_s_median": round(statistics.median(rates), 1)}), flush=True)


if __name__ == "__main__":
    main()
