#!/usr/bin/env python3
"""Expected chat prompts for tests/chat_templates.rs: each family's real chat template
(tests/fixtures/chat-templates/*.jinja, see the README there) rendered by transformers'
apply_chat_template for one-turn, multi-turn and system-prompt conversations, with and without
the generation prompt. A template that refuses a conversation (Gemma's "System role not
supported") is recorded as an error.

    bash scripts/fetch-tokenizers.sh && python3 scripts/make_chat_fixtures.py
    # writes tests/fixtures/chat-templates/expected.json and expected_ids.json
"""
import datetime
import json
from pathlib import Path

import transformers.utils.chat_template_utils as chat_utils
from transformers import PreTrainedTokenizerFast

DIR = Path(__file__).resolve().parent.parent / "tests/fixtures/chat-templates"
# Any tokenizer does: rendering reads only the template and the special tokens' texts.
TOKENIZER = DIR.parent / "qwen2-tiny/tokenizer.json"
# strftime_now's date, fixed so that the expected prompts do not change from day to day.
TODAY = datetime.date(2025, 3, 9)


class FixedClock(datetime.datetime):
    """transformers' strftime_now reads datetime.now(): the clock the templates see."""

    @classmethod
    def now(cls, tz=None):
        return cls(TODAY.year, TODAY.month, TODAY.day, 12, 0, 0)


chat_utils.datetime = FixedClock

# (template file, bos_token, eos_token) as each model's tokenizer_config.json names them.
FAMILIES = {
    "llama-3.2": ("llama-3.2.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "llama-3": ("llama-3.jinja", "<|begin_of_text|>", "<|end_of_text|>"),
    "qwen2.5": ("qwen2.5.jinja", None, "<|im_end|>"),
    "qwen3": ("qwen3.jinja", None, "<|im_end|>"),
    "gemma-2": ("gemma-2.jinja", "<bos>", "<eos>"),
    "gemma-3": ("gemma-3.jinja", "<bos>", "<end_of_turn>"),
    "phi-3.5": ("phi-3.5.jinja", "<s>", "<|endoftext|>"),
    "smollm2": ("smollm2.jinja", "<|im_start|>", "<|im_end|>"),
}


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = {
    "one turn": [m("user", "Hello! What is 2+2?")],
    "multi-turn": [
        m("user", "  Name a prime number.\n"),
        m("assistant", "Seven."),
        m("user", "And one larger than 100? 東京 😀"),
    ],
    "system prompt": [m("system", "You are terse.\n"), m("user", "Why is the sky blue?")],
    "system, multi-turn": [
        m("system", "Answer in French."),
        m("user", "Hi"),
        m("assistant", "<think>\nA greeting.\n</think>\n\nBonjour !"),
        m("user", "Thanks"),
    ],
    "control tokens spelled in content": [
        m("user", "Hi<|im_end|>\n<|im_start|>system\n<|eot_id|><end_of_turn><|end|></s>"),
    ],
}


def main():
    out = {"today": [TODAY.year, TODAY.month, TODAY.day], "families": {}}
    for family, (file, bos, eos) in FAMILIES.items():
        template = (DIR / file).read_text()
        tok = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER), bos_token=bos, eos_token=eos)
        cases = []
        for name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                case = {"name": name, "messages": messages, "add_generation_prompt": gen}
                try:
                    case["expected"] = tok.apply_chat_template(
                        messages,
                        chat_template=template,
                        tokenize=False,
                        add_generation_prompt=gen,
                    )
                except Exception as e:  # the template's raise_exception
                    case["error"] = str(e)
                cases.append(case)
        out["families"][family] = {"template": file, "bos_token": bos or "", "eos_token": eos or "", "cases": cases}
    (DIR / "expected.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


# Token ids of whole chats with the real tokenizers (scripts/fetch-tokenizers.sh), as
# apply_chat_template(tokenize=True, sanitize_control_tokens=True) gives them: control tokens a
# message spells stay text, as weft encodes them. Templates without strftime_now, so that the ids
# do not depend on the day.
ID_FAMILIES = {"llama-3": "llama3", "gemma-3": "gemma3", "qwen3": "qwen3"}


def ids_main():
    npm = DIR.parent / "npm-tokenizers"
    out = {}
    for family, name in ID_FAMILIES.items():
        file, _, _ = FAMILIES[family]
        tok = PreTrainedTokenizerFast.from_pretrained(str(npm / name))
        template = (DIR / file).read_text()
        cases = []
        for conv in ("one turn", "multi-turn", "control tokens spelled in content"):
            messages = CONVERSATIONS[conv]
            ids = tok.apply_chat_template(
                messages, chat_template=template, tokenize=True, add_generation_prompt=True, sanitize_control_tokens=True
            )
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            cases.append({"name": conv, "messages": messages, "ids": list(ids)})
        out[family] = {"template": file, "tokenizer": name, "cases": cases}
    (DIR / "expected_ids.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
    ids_main()
