//! Unit tests of the tokenizer on small hand-made vocabularies.

use super::*;

/// A byte-level vocabulary: the 256 byte characters, a few merges and two control tokens.
fn toy() -> Tokenizer {
    let table = bpe::byte_to_char();
    let mut tokens: Vec<String> = table.iter().map(|c| c.to_string()).collect();
    let merges = ["h e", "l l", "he ll", "hell o", "\u{120} w", "\u{120}w o"];
    for m in merges {
        tokens.push(m.replace(' ', ""));
    }
    tokens.extend(["<tool>".into(), "<|im_start|>".into(), "<|im_end|>".into()]);
    let mut types = vec![token_type::NORMAL; tokens.len()];
    let n = types.len();
    types[n - 3..].copy_from_slice(&[token_type::USER_DEFINED, token_type::CONTROL, token_type::CONTROL]);
    Tokenizer::new(TokenizerSpec {
        model: "gpt2".into(),
        pre: Some("smollm".into()),
        tokens,
        token_types: types,
        merges: merges.iter().map(|m| m.to_string()).collect(),
        eos: Some(n as u32 - 1),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn merges_apply_by_rank_and_round_trip() {
    let t = toy();
    let hello = t.id("hello").unwrap();
    let ids = t.encode("hello wo", false);
    assert_eq!(ids, [hello, t.id("\u{120}wo").unwrap()]);
    assert_eq!(t.decode(&ids, false).unwrap(), "hello wo");
    let text = "naïve 東京 😀 x\n\n";
    assert_eq!(t.decode(&t.encode(text, false), false).unwrap(), text);
}

#[test]
fn control_tokens_only_when_parsing_specials_user_defined_always() {
    let t = toy();
    let start = t.id("<|im_start|>").unwrap();
    let ids = t.encode("<|im_start|>hello<|im_end|>", true);
    assert_eq!(ids.first(), Some(&start));
    assert_eq!(ids.last(), t.eos.as_ref());
    assert_eq!(ids.len(), 3);
    let plain = t.encode("<|im_start|>", false);
    assert!(plain.len() > 1 && !plain.contains(&start));
    assert_eq!(t.decode(&ids, true).unwrap(), "hello");
    let tool = t.id("<tool>").unwrap();
    assert_eq!(t.encode("hello<tool>", false), [t.id("hello").unwrap(), tool]);
}

#[test]
fn sentencepiece_merges_by_score_with_byte_fallback() {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![token_type::UNKNOWN, token_type::CONTROL, token_type::CONTROL];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(token_type::BYTE);
    }
    for t in ["\u{2581}", "a", "b", "\u{2581}a", "ab", "\u{2581}ab"] {
        tokens.push(t.into());
        types.push(token_type::NORMAL);
    }
    let mut scores = vec![0.0; tokens.len()];
    let n = tokens.len();
    scores[n - 3] = -1.0; // ▁a
    scores[n - 2] = -5.0; // ab
    scores[n - 1] = -0.5; // ▁ab
    let t = Tokenizer::new(TokenizerSpec {
        model: "llama".into(),
        tokens,
        token_types: types,
        scores,
        bos: Some(1),
        add_bos: true,
        add_space_prefix: true,
        ..Default::default()
    })
    .unwrap();
    let ids = t.encode("ab", false);
    assert_eq!(ids, [1, t.id("\u{2581}ab").unwrap()]);
    let ids = t.encode("ac", false); // 'c' has no token: its byte
    assert_eq!(ids, [1, t.id("\u{2581}a").unwrap(), 3 + b'c' as u32]);
    assert_eq!(t.decode(&ids, true).unwrap(), "ac");
}

/// A template that writes BOS itself gets no second one from `add_bos`; one that does not
/// gets it once; BOS spelled in a message stays text.
#[test]
fn chat_bos_is_never_doubled() {
    let table = bpe::byte_to_char();
    let mut tokens: Vec<String> = table.iter().map(|c| c.to_string()).collect();
    let specials = ["<s>", "</s>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"];
    tokens.extend(specials.iter().map(|s| s.to_string()));
    let mut types = vec![token_type::NORMAL; tokens.len()];
    types[256..].fill(token_type::CONTROL);
    let with = |template: &str, bos: &str| {
        Tokenizer::new(TokenizerSpec {
            model: "gpt2".into(),
            tokens: tokens.clone(),
            token_types: types.clone(),
            bos: Some(256 + specials.iter().position(|s| *s == bos).unwrap() as u32),
            add_bos: true,
            chat_template: Some(template.into()),
            ..Default::default()
        })
        .unwrap()
    };
    let user = [chat::Message { role: "user".into(), content: "hi <s>".into() }];
    let llama3 = "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}";
    let llama2 = "{% for m in messages %}{{ bos_token + '[INST] ' + m.content + ' [/INST]' }}{% endfor %}";
    let zephyr = "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{{ eos_token }}\n{% endfor %}";
    for (template, bos) in [(llama2, "<s>"), (llama3, "<|begin_of_text|>"), (zephyr, "<s>")] {
        let t = with(template, bos);
        let ids = t.encode_chat(&user).unwrap();
        let bos = t.bos.unwrap();
        assert_eq!(ids[0], bos, "{template}");
        assert_eq!(ids.iter().filter(|&&i| i == bos).count(), 1, "{template}: {ids:?}");
    }
}

#[test]
fn malformed_specs_are_errors() {
    assert!(Tokenizer::new(TokenizerSpec { model: "gpt2".into(), ..Default::default() }).is_err());
    let spec = TokenizerSpec { model: "wordpiece".into(), tokens: vec!["a".into()], ..Default::default() };
    assert!(Tokenizer::new(spec).is_err());
    let spec = TokenizerSpec {
        model: "gpt2".into(),
        tokens: vec!["a".into()],
        eos: Some(5),
        ..Default::default()
    };
    assert!(Tokenizer::new(spec).is_err());
    assert!(toy().token_bytes(100_000).is_err());
}

/// An `rstrip` token drops the whitespace after it in plain text and in a chat, where that
/// whitespace may end the template's text before a message starts.
#[test]
fn rstrip_tokens_drop_the_whitespace_after_them() {
    let mut spec = toy().spec().clone();
    let start = spec.tokens.iter().position(|t| t == "<|im_start|>").unwrap() as u32;
    spec.rstrip = vec![start];
    spec.chat_template = Some("{% for m in messages %}<|im_start|>\n {{ m.content }}<|im_end|>{% endfor %}".into());
    let t = Tokenizer::new(spec).unwrap();
    let want = t.encode("<|im_start|>hello<|im_end|>", true);
    assert_eq!(t.encode("<|im_start|> \n\thello<|im_end|>", true), want);
    let user = [chat::Message { role: "user".into(), content: "hello".into() }];
    assert_eq!(t.encode_chat(&user).unwrap(), want);
    let plain = toy();
    assert_ne!(plain.encode("<|im_start|>\nhello<|im_end|>", true), want);
}
