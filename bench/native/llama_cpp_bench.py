"""llama.cpp (through llama-cpp-python) on the same GGUF and the same protocol as `weft bench`:
random prompt ids, prefill timed to the first sampled token, then greedy decode.

    python bench/native/llama_cpp_bench.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
        [--prompt-len 128] [--gen 128] [--reps 3] [--threads 2]
Prints one JSON object.

Per repetition (one untimed repetition first, as `weft bench` does):
  ttft_ms        the prompt's forward pass (one batch) and the greedy pick of the first token
  prefill_tok_s  prompt_len / ttft
  decode_tok_s   (gen - 1) / the time of the gen - 1 single-token steps after it, each one a
                 forward pass of the token picked last and the greedy pick of the next
Medians as `weft bench` takes them (the upper middle element for an even count).
"""
import argparse
import ctypes
import json
import random
import time

import llama_cpp
import numpy as np
from llama_cpp import Llama


def median(values):
    s = sorted(values)
    return s[len(s) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.prompt_len < 1 or a.gen < 2 or a.reps < 1:
        ap.error("need --prompt-len >= 1, --gen >= 2, --reps >= 1")
    llm = Llama(a.model, n_ctx=a.prompt_len + a.gen + 8, n_batch=max(a.prompt_len, 32),
                n_threads=a.threads, n_threads_batch=a.threads, verbose=False, logits_all=False)
    vocab = llm.n_vocab()

    def pick() -> int:
        # Logits of the last token of the last batch (the only row computed without logits_all).
        row = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        logits = np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_float)), shape=(vocab,))
        return int(logits.argmax())

    rng = random.Random(1)
    prefill, decode, ttft = [], [], []
    for rep in range(a.reps + 1):  # the first run warms up
        prompt = [rng.randrange(vocab) for _ in range(a.prompt_len)]
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        token = pick()
        t_prefill = time.perf_counter() - t0
        t1 = time.perf_counter()
        for _ in range(a.gen - 1):
            llm.eval([token])
            token = pick()
        t_decode = time.perf_counter() - t1
        if rep > 0:
            prefill.append(a.prompt_len / t_prefill)
            decode.append((a.gen - 1) / t_decode)
            ttft.append(t_prefill * 1e3)
    print(json.dumps({
        "engine": "llama.cpp", "version": llama_cpp.__version__, "model": a.model, "threads": a.threads,
        "prompt_len": a.prompt_len, "gen": a.gen, "reps": a.reps,
        "prefill_tok_s": [round(x, 2) for x in prefill], "decode_tok_s": [round(x, 2) for x in decode],
        "ttft_ms": [round(x, 1) for x in ttft],
        "prefill_tok_s_median": round(median(prefill), 2),
        "decode_tok_s_median": round(median(decode), 2),
        "ttft_ms_median": round(median(ttft), 1),
    }, indent=2))


if __name__ == "__main__":
    main()
