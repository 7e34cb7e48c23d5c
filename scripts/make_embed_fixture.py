"""Reference outputs of all-MiniLM-L6-v2 for tests/fixtures/embed, so the tests need no torch.

sentences.json: the texts, HF `tokenizers` ids (truncated at the model's 256), and the
sentence-transformers f32 embeddings (mean pooling, L2-normalised) of each text; the
retrieval set (queries, passages, the reference top-5 per query).
hidden.{s}.{l}.npy: every layer's hidden state (0 = embeddings) of sentences 0, 1, 2.

Run: HF_HUB_OFFLINE=1 python3 scripts/make_embed_fixture.py [models/all-MiniLM-L6-v2]
"""
import json, os, sys

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer
from transformers import AutoModel

MODEL = sys.argv[1] if len(sys.argv) > 1 else "models/all-MiniLM-L6-v2"
OUT = "tests/fixtures/embed"
MAX_LEN = 256

LONG = " ".join(f"Sentence number {i} talks about the weather, trains, and the price of bread." for i in range(40))
SENTENCES = [
    "The cat sits on the mat.",
    "Héllo, Wörld! Ça va?",
    "東京は日本の首都です。",
    "A man is playing a guitar.",
    "Someone is playing an instrument on stage",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "naïve café résumé coöperate façade",
    "What's the time?!... (approx.) -- 3:45pm; ok?",
    "I bought 3 apples for $4.50 @ the store #groceries",
    "Straße und Mädchen über Öl",
    "中文分词测试：我爱北京天安门",
    "한국어 문장도 있습니다",
    "Это предложение на русском языке.",
    "unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious",
    "x",
    "",
    "   leading and trailing   spaces\tand\ttabs\nnewline   ",
    "emoji 😀 and symbols ™ © ®",
    "Machine learning models can run in the browser with WebGPU.",
    "The weather today is sunny with a light breeze from the west, and the forecast says it will stay that way until the weekend when rain arrives.",
    LONG,
    "Ünïcödé ÀÉÎÕÜ àéîõü ñ Ñ",
    "Python's list.append(x) adds x; dict.get(k, default) returns default.",
    "Who wrote 'Pride and Prejudice'?",
]

QUERIES = [
    "How do I bake bread at home?",
    "Which animal is the fastest on land?",
    "What is the capital of France?",
    "How do neural networks learn?",
    "Tips for a good night's sleep",
]
PASSAGES = [
    "Mix flour, water, salt and yeast, knead the dough, let it rise, then bake at 230 degrees.",
    "Sourdough needs a starter culture that is fed daily with flour and water.",
    "The cheetah can reach speeds of over 100 kilometres per hour in short bursts.",
    "Pronghorn antelopes sustain high speeds for long distances across the prairie.",
    "Paris is the capital and most populous city of France.",
    "Lyon is known for its cuisine and its historic old town.",
    "Backpropagation computes gradients of the loss with respect to every weight.",
    "Gradient descent updates parameters in the direction that reduces the loss.",
    "Keep your bedroom dark and cool, and avoid screens before going to bed.",
    "Caffeine late in the day can make it harder to fall asleep.",
    "The Eiffel Tower was completed in 1889 for the World's Fair.",
    "Horses were domesticated on the Eurasian steppe thousands of years ago.",
    "A convolutional network applies learned filters across an image.",
    "Regular exercise improves mood and sleep quality.",
    "Baguettes are long thin loaves with a crisp crust.",
    "The stock market closed higher today after strong earnings reports.",
]


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_LEN)
    ids = [tok.encode(s).ids for s in SENTENCES]

    st = SentenceTransformer(MODEL, device="cpu")
    assert st.max_seq_length == MAX_LEN
    emb = st.encode(SENTENCES, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    for s, i in zip(SENTENCES, ids):  # sentence-transformers tokenizes the same way
        assert st.tokenizer(s, truncation=True, max_length=MAX_LEN)["input_ids"] == i, s

    q = st.encode(QUERIES, normalize_embeddings=True)
    p = st.encode(PASSAGES, normalize_embeddings=True)
    top5 = [list(map(int, np.argsort(-(p @ v), kind="stable")[:5])) for v in q]

    model = AutoModel.from_pretrained(MODEL).eval()
    for s in range(3):
        with torch.no_grad():
            out = model(torch.tensor([ids[s]]), output_hidden_states=True)
        for layer, h in enumerate(out.hidden_states):
            np.save(f"{OUT}/hidden.{s}.{layer}.npy", h[0].numpy().astype("<f4"))

    doc = {
        "max_len": MAX_LEN,
        "sentences": [{"text": s, "ids": i, "embedding": [round(float(x), 8) for x in e]}
                      for s, i, e in zip(SENTENCES, ids, emb)],
        "retrieval": {"queries": QUERIES, "passages": PASSAGES, "top5": top5},
    }
    with open(f"{OUT}/sentences.json", "w") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{len(SENTENCES)} sentences, hidden states of 3, retrieval top-5 of {len(QUERIES)} queries")


if __name__ == "__main__":
    main()
