"""llama.cpp (through llama-cpp-python) on the same GGUF and the same protocol as `weft bench`:
random prompt ids, prefill timed to the first sampled token, then greedy decode.

    python bench/native/llama_cpp_bench.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
        [--prompt-len 128] [--gen 128] [--reps 3] [--threads 2]
Prints one JSON object.
"""
import argparse
import json
import random
import statistics
import time

import llama_cpp
from llama_cpp import Llama


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    llm = Llama(a.model, n_ctx=a.prompt_len + a.gen + 8, n_batch=max(a.prompt_len, 32),
                n_threads=a.threads, n_threads_batch=a.threads, verbose=False, logits_all=False)
    rng = random.Random(1)
    vocab = llm.n_vocab()
    prefill, decode = [], []
    for rep in range(a.reps + 1):  # the first run warms up
        prompt = [rng.randrange(vocab) for _ in range(a.prompt_len)]
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t_prefill = time.perf_counter() - t0
        t1 = time.perf_counter()
        for _ in range(a.gen - 1):
            token = int(llm.scores[llm.n_tokens - 1].argmax())
            llm.eval([token])
        t_decode = time.perf_counter() - t1
        if rep > 0:
            prefill.append(a.prompt_len / t_prefill)
            decode.append((a.gen - 1) / t_decode)
    print(json.dumps({
        "engine": "llama.cpp", "version": llama_cpp.__version__, "threads": a.threads,
        "prompt_len": a.prompt_len, "gen": a.gen, "reps": a.reps,
        "prefill_tok_s": [round(x, 1) for x in prefill], "decode_tok_s": [round(x, 1) for x in decode],
        "prefill_tok_s_median": round(statistics.median(prefill), 1),
        "decode_tok_s_median": round(statistics.median(decode), 1),
    }))


if __name__ == "__main__":
    main()
