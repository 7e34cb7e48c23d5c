"""Trains a small Llama-2-style SentencePiece BPE tokenizer (Metaspace pre-tokenizer, byte
fallback, <unk>/<s>/</s>) with Hugging Face `tokenizers` on text available offline, and writes
tests/fixtures/spm/{tokenizer.json,reference.json}: the tokenizer and, for a few texts, the ids
`tokenizers` gives them (tests/tokenizer.rs compares weft's encode and decode).

Run once with the reference venv: /work/.venv-ref/bin/python scripts/make_spm_fixture.py
"""

import glob
import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "spm")
VOCAB = 2000


def corpus():
    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    # Docstrings and comments of a few standard-library modules: prose plus code punctuation.
    for name in ["textwrap", "string", "json/__init__", "argparse"]:
        path = f"/usr/lib/python3.11/{name}.py"
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                texts.append(f.read())
    return texts


def main():
    bytes_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    # Llama 2's decoder: spaces back, byte tokens to bytes, the prepended space dropped.
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>"] + bytes_tokens,
        limit_alphabet=80,
        show_progress=False,
    )
    texts = corpus()
    tok.train_from_iterator(texts, trainer=trainer)
    # Byte tokens are vocabulary entries of the model, not text matched verbatim.
    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] in ("<unk>", "<s>", "</s>")]
    tok = Tokenizer.from_str(json.dumps(data))

    license_text = texts[0]
    cases = [
        "Hello world",
        "  leading spaces, and   runs of  spaces ",
        "Non-ASCII falls back to bytes: café, naïve, Zürich, 東京, emoji 🚀, and → arrows.",
        "def f(x):\n    return x ** 2  # square\n\ttabs\tand\nnew lines\n",
        license_text[:6000],
        "Licensed under the Apache License, Version 2.0; you may not use this file except in compliance.",
    ]
    reference = {"vocab_size": tok.get_vocab_size(), "cases": []}
    for text in cases:
        ids = tok.encode(text, add_special_tokens=False).ids
        reference["cases"].append({"text": text, "ids": ids, "decoded": tok.decode(ids)})
    os.makedirs(OUT, exist_ok=True)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    with open(os.path.join(OUT, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, indent=1)
    total = sum(len(c["ids"]) for c in reference["cases"])
    print(f"vocab {tok.get_vocab_size()}, {len(cases)} texts, {total} ids")


if __name__ == "__main__":
    main()
