#![no_main]

//! The chat-template renderer in place: a template (which picks the family and its default
//! system prompt) and messages from the input, rendered into the template's special tokens and
//! text. The input is the template, a NUL byte, then messages separated by 0x01, each a role, a
//! 0x02 byte and the content. Whatever the content holds, it must come out as text, never as a
//! template token, and rendering must not fail except for an unknown role.

use libfuzzer_sys::fuzz_target;
use weft::tokenizer::chat::{ChatFormat, ChatPart, Message};

fuzz_target!(|data: &[u8]| {
    let Some(at) = data.iter().position(|&b| b == 0) else { return };
    let template = String::from_utf8_lossy(&data[..at]);
    let Some(format) = ChatFormat::detect(&template) else { return };
    let messages: Vec<Message> = data[at + 1..]
        .split(|&b| b == 1)
        .take(64)
        .map(|m| {
            let mut it = m.splitn(2, |&b| b == 2);
            let role = String::from_utf8_lossy(it.next().unwrap_or_default()).into_owned();
            let content = String::from_utf8_lossy(it.next().unwrap_or_default()).into_owned();
            Message { role, content }
        })
        .collect();
    let Ok(parts) = format.render_parts(&messages) else { return };
    let specials: Vec<&str> = parts.iter().filter_map(|p| match p {
        ChatPart::Special(s) => Some(*s),
        ChatPart::Text(_) => None,
    }).collect();
    // Template tokens come from the template alone: at most a few per message plus the prompt's
    // framing, however many lookalikes the content holds.
    assert!(specials.len() <= 4 * messages.len() + 4, "{} template tokens for {} messages", specials.len(), messages.len());
    let text: String = parts.iter().filter_map(|p| match p {
        ChatPart::Text(t) => Some(t.as_str()),
        ChatPart::Special(_) => None,
    }).collect();
    // A system prompt may be folded into the first user turn (Llama 2) or dropped without one;
    // user and assistant turns always appear.
    for m in messages.iter().filter(|m| m.role == "user" || m.role == "assistant") {
        let body = m.content.trim();
        assert!(text.contains(body), "message content missing from the text parts");
    }
    assert_eq!(format.render(&messages).unwrap(), parts.iter().map(ChatPart::text).collect::<String>());
});
