#!/usr/bin/env python3
"""The ids Hugging Face tokenizers gives with added tokens that take the whitespace after them
(`rstrip`, as Phi-3's chat tokens have), on the real Llama 2-style tokenizer.json of
scripts/fetch-tokenizers.sh with two such tokens added, committed as
tests/fixtures/tokenizer-references/llama2-rstrip.json for tests/tokenizer_families.rs (which
adds the same tokens).

    bash scripts/fetch-tokenizers.sh && python3 scripts/make_rstrip_reference.py

Needs: pip install tokenizers
"""
import json
from pathlib import Path

from tokenizers import AddedToken, Tokenizer

ROOT = Path(__file__).resolve().parent.parent / "tests/fixtures"
ADDED = ["<|user|>", "<|end|>"]
TEXTS = ["<|user|>\n Hi!<|end|>\n\tok", "<s> a <|user|>  b", "x<|end|>", "<|user|>\n\n<|end|>\ny"]

tok = Tokenizer.from_file(str(ROOT / "npm-tokenizers/llama2/tokenizer.json"))
tok.add_special_tokens([AddedToken(t, rstrip=True, special=True, normalized=False) for t in ADDED])
added = [a for a in json.loads(tok.to_str())["added_tokens"] if a["content"] in ADDED]
texts = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in TEXTS]
path = ROOT / "tokenizer-references/llama2-rstrip.json"
path.write_text(json.dumps({"added_tokens": added, "texts": texts}, indent=1, ensure_ascii=False) + "\n")
print(path)
