#![no_main]

//! The whole input is a model file. Every tensor of an accepted header whose bytes lie inside
//! the input goes through the CPU decoder, so the decoders see exactly the (storage type, byte
//! count, element count) combinations the parsers let through.

use libfuzzer_sys::fuzz_target;
use weft::format::detect_and_parse;
use weft::quant::decode_to_f32;

/// Decoded elements per input, summed over tensors: large enough for several GGML K-quant
/// blocks in every tensor, small enough that one input stays well under a millisecond.
const MAX_ELEMENTS_PER_INPUT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = detect_and_parse(data, Some(data.len() as u64)) else {
        return;
    };
    let mut budget = MAX_ELEMENTS_PER_INPUT;
    for tensor in header.tensors() {
        let elements = tensor.elements();
        if elements > budget {
            continue;
        }
        budget -= elements;
        let bytes = usize::try_from(tensor.range.start)
            .ok()
            .zip(usize::try_from(tensor.range.end).ok())
            .and_then(|(start, end)| data.get(start..end));
        // The parser was told the file length, so an accepted tensor must lie inside it.
        let bytes = bytes.unwrap_or_else(|| panic!("{} ({:?}) lies outside the input", tensor.name, tensor.range));
        let values = decode_to_f32(tensor.storage, bytes, elements as usize)
            .unwrap_or_else(|e| panic!("{} accepted by the parser but not decodable: {e}", tensor.name));
        assert_eq!(values.len() as u64, elements);
    }
});
