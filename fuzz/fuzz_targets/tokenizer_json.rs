#![no_main]

//! `tokenizer.json` to a tokenizer, then the encoding of text. The input is the JSON, a NUL
//! byte, then the text to encode (the whole input is JSON when there is no NUL).

use libfuzzer_sys::fuzz_target;
use weft::tokenizer::Tokenizer;

fuzz_target!(|data: &[u8]| {
    let (json, text) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"Hello world, 12345!  \n"[..]),
    };
    let Ok(json) = std::str::from_utf8(json) else {
        return;
    };
    let Ok(tokenizer) = Tokenizer::from_hf_json(json, None) else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    for parse_special in [false, true] {
        let ids = tokenizer.encode(&text, parse_special);
        for &id in &ids {
            assert!((id as usize) < tokenizer.vocab_size(), "id {id} outside the vocabulary");
        }
        let _ = tokenizer.decode(&ids, false);
    }
});
