//! Each family's real chat template (tests/fixtures/chat-templates) rendered by weft equals what
//! transformers' apply_chat_template renders (scripts/make_chat_fixtures.py): one turn,
//! multi-turn, system prompts, with and without the generation prompt; a conversation the
//! template refuses (Gemma 2 has no system role) is refused with the template's message. The
//! control tokens spelled in messages are rendered through weft's placeholders, so the equality
//! also shows that they come back unchanged.

use weft::tokenizer::chat::{self, ChatOptions, ChatPart, Message};
use weft::tokenizer::{HfTokenizerFiles, Tokenizer};

const DIR: &str = "tests/fixtures/chat-templates";

/// Control tokens of the families, escaped in message content as a tokenizer escapes its own.
const CONTROL: &[&str] = &[
    "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
    "<bos>", "<start_of_turn>", "<end_of_turn>", "<|end|>", "<|user|>", "<|assistant|>", "<s>", "</s>",
];

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    messages: Vec<Message>,
    add_generation_prompt: bool,
    expected: Option<String>,
    error: Option<String>,
}

#[derive(serde::Deserialize)]
struct Family {
    template: String,
    bos_token: String,
    eos_token: String,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Expected {
    today: (i32, u32, u32),
    families: std::collections::BTreeMap<String, Family>,
}

#[test]
fn templates_render_as_transformers_renders_them() -> anyhow::Result<()> {
    let e: Expected = serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/expected.json"))?)?;
    let names: Vec<&str> = e.families.keys().map(String::as_str).collect();
    assert_eq!(names, ["gemma-2", "gemma-3", "llama-3", "llama-3.2", "phi-3.5", "qwen2.5", "qwen3", "smollm2"]);
    let mut checked = 0;
    for (family, f) in &e.families {
        let template = std::fs::read_to_string(format!("{DIR}/{}", f.template))?;
        for case in &f.cases {
            let options = ChatOptions {
                add_generation_prompt: case.add_generation_prompt,
                bos_token: f.bos_token.clone(),
                eos_token: f.eos_token.clone(),
                today: Some(e.today),
            };
            let what = format!("{family}, {} (generation prompt {})", case.name, case.add_generation_prompt);
            let got = chat::render_parts(&template, &case.messages, &options, CONTROL);
            match (&case.expected, &case.error) {
                (Some(expected), None) => {
                    let parts = got.map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
                    let text: String = parts.iter().map(ChatPart::text).collect();
                    assert_eq!(&text, expected, "{what}");
                    // What a message spells is content, never template text.
                    let spelled = case.messages.iter().map(|m| CONTROL.iter().filter(|t| m.content.contains(*t)).count()).sum::<usize>();
                    let content = parts.iter().filter(|p| matches!(p, ChatPart::Content(_))).count();
                    assert!(content >= spelled.min(1), "{what}: {parts:?}");
                }
                (None, Some(error)) => {
                    let err = got.expect_err(&what).to_string();
                    assert!(err.contains(error.as_str()), "{what}: {err}");
                }
                _ => anyhow::bail!("{what}: a case needs expected or error"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 80);
    Ok(())
}

#[derive(serde::Deserialize)]
struct IdCase {
    name: String,
    messages: Vec<Message>,
    ids: Vec<u32>,
}

#[derive(serde::Deserialize)]
struct IdFamily {
    template: String,
    tokenizer: String,
    cases: Vec<IdCase>,
}

/// The ids of whole chats with the real Llama 3, Gemma 3 and Qwen3 tokenizers (fetched by
/// scripts/fetch-tokenizers.sh) equal transformers' `apply_chat_template(tokenize=True,
/// sanitize_control_tokens=True)`: the template's special tokens as their ids, a control token
/// spelled in a message as text.
#[test]
fn chat_ids_match_transformers_with_real_tokenizers() -> anyhow::Result<()> {
    let e: std::collections::BTreeMap<String, IdFamily> =
        serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/expected_ids.json"))?)?;
    assert_eq!(e.len(), 3);
    for (family, f) in &e {
        let dir = format!("tests/fixtures/npm-tokenizers/{}", f.tokenizer);
        let json = std::fs::read_to_string(format!("{dir}/tokenizer.json"))
            .map_err(|err| anyhow::anyhow!("{dir}/tokenizer.json: {err}: run scripts/fetch-tokenizers.sh"))?;
        let config = std::fs::read_to_string(format!("{dir}/tokenizer_config.json"))?;
        let template = std::fs::read_to_string(format!("{DIR}/{}", f.template))?;
        let files = HfTokenizerFiles {
            tokenizer_json: &json,
            tokenizer_config: Some(&config),
            chat_template_jinja: Some(&template),
            ..Default::default()
        };
        let tok = Tokenizer::from_hf_files(&files)?;
        for case in &f.cases {
            assert_eq!(tok.encode_chat(&case.messages)?, case.ids, "{family}, {}", case.name);
        }
    }
    Ok(())
}
