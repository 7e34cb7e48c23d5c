//! Chat templates. Models ship a Jinja template; weft recognises the families in use and
//! renders them directly rather than embedding a template engine.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// Template families weft renders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatFormat {
    /// `<|im_start|>role\ncontent<|im_end|>\n` (SmolLM, Qwen2), with the template's default
    /// system prompt when the conversation has none.
    ChatMl { default_system: Option<String> },
    /// `<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>` (Llama 3).
    Llama3,
    /// `[INST] user [/INST] assistant` with `<<SYS>>` (Llama 2).
    Llama2,
    /// `<|role|>\ncontent</s>\n` (Zephyr, TinyLlama chat).
    Zephyr,
}

impl ChatFormat {
    /// Recognises the family of a Jinja chat template; None when none matches.
    pub fn detect(template: &str) -> Option<Self> {
        if template.contains("<|im_start|>") {
            let default_system = template
                .split("<|im_start|>system\\n")
                .nth(1)
                .or_else(|| template.split("<|im_start|>system\n").nth(1))
                .and_then(|rest| rest.split("<|im_end|>").next())
                .filter(|s| !s.contains("{{") && !s.contains("{%") && !s.contains('\''))
                .map(|s| s.replace("\\n", "\n"));
            return Some(Self::ChatMl { default_system });
        }
        if template.contains("<|start_header_id|>") {
            return Some(Self::Llama3);
        }
        if template.contains("[INST]") {
            return Some(Self::Llama2);
        }
        if template.contains("<|user|>") {
            return Some(Self::Zephyr);
        }
        None
    }

    /// The prompt for `messages`, ending with the assistant's turn opened, as one string (for
    /// display: encoding it with special tokens parsed would also parse any the messages hold;
    /// [`crate::tokenizer::Tokenizer::encode_chat`] does not).
    pub fn render(&self, messages: &[Message]) -> Result<String> {
        Ok(self.render_parts(messages)?.iter().map(ChatPart::text).collect())
    }

    /// The prompt as the template's special tokens and the text between them. Message content
    /// is always [`ChatPart::Text`], so what a user types can never become a control token.
    pub fn render_parts(&self, messages: &[Message]) -> Result<Vec<ChatPart>> {
        for m in messages {
            if !matches!(m.role.as_str(), "system" | "user" | "assistant") {
                return Err(Error::Tokenizer(format!("unknown chat role '{}'", m.role)));
            }
        }
        let mut out = Parts::default();
        match self {
            Self::ChatMl { default_system } => {
                let turn = |out: &mut Parts, role: &str, content: &str| {
                    out.special("<|im_start|>").text(role).text("\n").text(content).special("<|im_end|>").text("\n");
                };
                if let (Some(system), false) = (default_system, messages.first().is_some_and(|m| m.role == "system")) {
                    turn(&mut out, "system", system);
                }
                for m in messages {
                    turn(&mut out, &m.role, &m.content);
                }
                out.special("<|im_start|>").text("assistant\n");
            }
            Self::Llama3 => {
                out.special("<|begin_of_text|>");
                for m in messages {
                    out.special("<|start_header_id|>").text(&m.role).special("<|end_header_id|>");
                    out.text("\n\n").text(m.content.trim()).special("<|eot_id|>");
                }
                out.special("<|start_header_id|>").text("assistant").special("<|end_header_id|>").text("\n\n");
            }
            Self::Llama2 => {
                let mut system: Option<&str> = None;
                for m in messages {
                    match m.role.as_str() {
                        "system" => system = Some(&m.content),
                        "user" => {
                            out.special("<s>").text("[INST] ");
                            match system.take() {
                                // The template trims the joined text: the system prompt's start
                                // and the user text's end.
                                Some(s) => {
                                    out.text("<<SYS>>\n").text(s).text("\n<</SYS>>\n\n").text(m.content.trim_end())
                                }
                                None => out.text(m.content.trim()),
                            };
                            out.text(" [/INST]");
                        }
                        _ => {
                            out.text(" ").text(m.content.trim()).text(" ").special("</s>");
                        }
                    }
                }
            }
            Self::Zephyr => {
                for m in messages {
                    out.text("<|").text(&m.role).text("|>\n").text(&m.content).special("</s>").text("\n");
                }
                out.text("<|assistant|>\n");
            }
        }
        Ok(out.0)
    }
}

/// A piece of a rendered chat prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatPart {
    /// A special token the template itself writes (`<|im_start|>`, `<s>`).
    Special(&'static str),
    /// Template text and message content: encoded as text, special-token lookalikes included.
    Text(String),
}

impl ChatPart {
    pub fn text(&self) -> &str {
        match self {
            Self::Special(s) => s,
            Self::Text(t) => t,
        }
    }
}

#[derive(Default)]
struct Parts(Vec<ChatPart>);

impl Parts {
    fn special(&mut self, token: &'static str) -> &mut Self {
        self.0.push(ChatPart::Special(token));
        self
    }

    fn text(&mut self, text: &str) -> &mut Self {
        match self.0.last_mut() {
            Some(ChatPart::Text(t)) => t.push_str(text),
            _ => self.0.push(ChatPart::Text(text.to_string())),
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    fn user(text: &str) -> Message {
        Message { role: "user".into(), content: text.into() }
    }

    #[test]
    fn smollm2_template_adds_its_default_system_prompt() {
        let f = ChatFormat::detect(SMOLLM2).unwrap();
        assert_eq!(
            f.render(&[user("Hi")]).unwrap(),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let sys = Message { role: "system".into(), content: "Be brief.".into() };
        assert_eq!(
            f.render(&[sys, user("Hi")]).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn other_families_and_bad_roles() {
        assert_eq!(ChatFormat::detect("{{ '<|start_header_id|>' }}"), Some(ChatFormat::Llama3));
        assert_eq!(ChatFormat::detect("[INST]"), Some(ChatFormat::Llama2));
        assert_eq!(ChatFormat::detect("plain"), None);
        let z = ChatFormat::Zephyr.render(&[user("Hi")]).unwrap();
        assert_eq!(z, "<|user|>\nHi</s>\n<|assistant|>\n");
        let bad = Message { role: "tool".into(), content: String::new() };
        assert!(ChatFormat::Zephyr.render(&[bad]).is_err());
    }
}
