"""Reference token ids for weft's tokenizer tests, from Hugging Face `tokenizers` (an independent
implementation) configured like SmolLM2's own tokenizer.json: byte-level BPE over the GGUF's
vocabulary and merges, digits split individually, then the GPT-2 byte-level pre-tokenizer.

    python scripts/make_tokenizer_fixture.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
        tests/fixtures/tokenizer/smollm2.json

Needs: pip install gguf tokenizers
"""
import json
import sys

import gguf
from tokenizers import Tokenizer, models, pre_tokenizers

CONTROL = 3

TEXTS = [
    "The capital of France is",
    "Hello world! It's  a test, isn't it? I'LL see; we'd've gone.",
    "Numbers: 3.14159, 2024-11-22, 1,000,000 and ½ or Ⅻ or ٣",
    "Tabs\tand\t\ttabs, newlines\n\n\nand trailing spaces   \n  indented line",
    "naïve café — 東京タワー 😀👍🏽 Ελληνικά русский عربى",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "    def f(x):\n        return x ** 2  # square\n",
]


def field(reader, key):
    f = reader.fields[key]
    return f.contents()


def main(model, out):
    r = gguf.GGUFReader(model)
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = field(r, "tokenizer.ggml.merges")
    vocab = {t: i for i, t in enumerate(tokens)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tk.add_special_tokens([t for t, ty in zip(tokens, types) if ty == CONTROL])
    texts = list(TEXTS)
    with open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8") as f:
        texts.append(f.read())
    cases = [{"text": t, "ids": tk.encode(t, add_special_tokens=False).ids} for t in texts]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"source": "huggingface tokenizers, SmolLM2 GGUF vocabulary", "cases": cases}, f, ensure_ascii=False)
    for c in cases:
        print(len(c["ids"]), c["ids"][:12])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
