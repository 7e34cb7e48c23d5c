#!/usr/bin/env python3
"""The ids llama.cpp gives for chat-like texts with special tokens, for llama.cpp's own vocabulary
test files (scripts/fetch-llama-vocab.sh puts them in tests/fixtures/llama-vocab/), committed as
tests/fixtures/tokenizer-references/gguf-special.json for tests/tokenizer_gguf_vocab.rs. The
files' own .inp/.out texts have no special tokens; these do (parsed as special, no BOS added).

    bash scripts/fetch-llama-vocab.sh && python3 scripts/make_gguf_vocab_references.py

Needs: pip install llama-cpp-python==0.3.36
"""
import json
from pathlib import Path

import llama_cpp

ROOT = Path(__file__).resolve().parent.parent / "tests/fixtures"
TEXTS = {
    "gemma-4": ["<|turn>user\nHi <b>there</b><turn|>\n<|turn>model\n", '<|tool_call>call:f{x:<|"|>a b<|"|>}<tool_call|>'],
    "phi-3": ["<|user|>\nHi!<|end|>\n<|assistant|>\n Hello</s>", "<s> a <|system|>  b"],
    "llama-spm": ["<s>[INST] Hi! [/INST] Hello</s>", "x</s>\n<s> y"],
    "llama-bpe": ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"],
    "qwen2": ["<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"],
}

out = {}
for name, texts in TEXTS.items():
    vocab = llama_cpp.Llama(model_path=str(ROOT / f"llama-vocab/ggml-vocab-{name}.gguf"), vocab_only=True, verbose=False)
    out[name] = [{"text": t, "ids": vocab.tokenize(t.encode(), add_bos=False, special=True)} for t in texts]
path = ROOT / "tokenizer-references/gguf-special.json"
path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
print(path)
