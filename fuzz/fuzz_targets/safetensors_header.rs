#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((prefix, file_len)) = common::split_input(data) else {
        return;
    };
    let result = weft::format::parse_safetensors(prefix, file_len);
    common::check_result(&result, prefix, file_len, |h| &h.tensors);
    // Going through detection must agree with calling the parser directly.
    let detected = weft::format::detect_and_parse(prefix, file_len);
    if let (Ok(direct), Ok(detected)) = (&result, &detected) {
        assert_eq!(direct.tensors.as_slice(), detected.tensors());
    }
});
