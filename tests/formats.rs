//! Model headers that are well formed: safetensors with every dtype (written by the
//! `safetensors` crate), GGUF v2 and v3 built here, and the real SmolLM2 GGUF.

mod common;

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use common::{ty, GgufWriter};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use weft::format::{
    detect_and_parse, parse_gguf, parse_safetensors, FormatError, GgmlType, GgufArray, GgufValue,
    ModelHeader, SafeDtype, StorageType,
};

fn crate_dtype(dtype: SafeDtype) -> Dtype {
    match dtype {
        SafeDtype::F64 => Dtype::F64,
        SafeDtype::F32 => Dtype::F32,
        SafeDtype::F16 => Dtype::F16,
        SafeDtype::BF16 => Dtype::BF16,
        SafeDtype::F8E4M3 => Dtype::F8_E4M3,
        SafeDtype::F8E5M2 => Dtype::F8_E5M2,
        SafeDtype::F4 => Dtype::F4,
        SafeDtype::I64 => Dtype::I64,
        SafeDtype::I32 => Dtype::I32,
        SafeDtype::I16 => Dtype::I16,
        SafeDtype::I8 => Dtype::I8,
        SafeDtype::U64 => Dtype::U64,
        SafeDtype::U32 => Dtype::U32,
        SafeDtype::U16 => Dtype::U16,
        SafeDtype::U8 => Dtype::U8,
        SafeDtype::Bool => Dtype::BOOL,
    }
}

/// Name, dtype and bytes of each tensor written.
type Written = Vec<(String, SafeDtype, Vec<u8>)>;

/// One tensor per dtype, shape [3, 4] (F4: 12 nibbles, 6 bytes), each filled with its index.
fn all_dtypes_file() -> anyhow::Result<(Vec<u8>, Written)> {
    let mut tensors = Vec::new();
    for (i, dtype) in SafeDtype::ALL.into_iter().enumerate() {
        let bytes = dtype.bytes_for(12).context("12 elements fill whole bytes")?;
        tensors.push((format!("layer.{i}.{}", dtype.name()), dtype, vec![i as u8; bytes as usize]));
    }
    let views = tensors
        .iter()
        .map(|(name, dtype, data)| Ok((name.clone(), TensorView::new(crate_dtype(*dtype), vec![3, 4], data)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string()), ("note".to_string(), "all".to_string())]);
    let file = safetensors::serialize(views, Some(metadata))?;
    Ok((file, tensors))
}

#[test]
fn safetensors_every_dtype() -> anyhow::Result<()> {
    let (file, written) = all_dtypes_file()?;
    let header = parse_safetensors(&file, Some(file.len() as u64))?;
    assert_eq!(header.tensors.len(), SafeDtype::ALL.len());
    assert_eq!(header.metadata.get("format").map(String::as_str), Some("pt"));
    assert_eq!(header.data_start, 8 + header.header_len);
    assert_eq!(header.data_end(), file.len() as u64);
    for (name, dtype, data) in &written {
        let Some(t) = header.tensors.iter().find(|t| &t.name == name) else { bail!("{name} missing") };
        assert_eq!(t.storage, StorageType::Safe(*dtype));
        assert_eq!(t.shape, vec![3, 4]);
        let bytes = file.get(t.range.start as usize..t.range.end as usize).context("range in file")?;
        assert_eq!(bytes, data.as_slice(), "{name}");
    }
    // Tensors come in the order their bytes lie.
    assert!(header.tensors.windows(2).all(|w| w[0].range.end == w[1].range.start));
    Ok(())
}

#[test]
fn safetensors_from_a_growing_prefix() -> anyhow::Result<()> {
    let (file, _) = all_dtypes_file()?;
    let full = parse_safetensors(&file, None)?;
    let mut have = 0;
    let mut rounds = 0;
    let header = loop {
        match parse_safetensors(&file[..have], None) {
            Ok(h) => break h,
            Err(FormatError::NeedMore { needed, .. }) => have = needed as usize,
            Err(e) => return Err(e.into()),
        }
        rounds += 1;
    };
    assert_eq!(rounds, 2, "length prefix, then the whole JSON");
    assert_eq!(have as u64, full.data_start);
    assert_eq!(header, full);
    Ok(())
}

#[test]
fn safetensors_scalar_empty_and_unordered() -> anyhow::Result<()> {
    // Entries listed out of data order, a scalar, a zero-sized tensor, no metadata.
    let json = r#"{"b":{"dtype":"F32","shape":[],"data_offsets":[2,6]},
                  "z":{"dtype":"U8","shape":[0,7],"data_offsets":[2,2]},
                  "a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}"#;
    let file = common::safetensors_with_header(json, 6);
    let header = parse_safetensors(&file, Some(file.len() as u64))?;
    let names: Vec<&str> = header.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "z", "b"]);
    assert_eq!(header.tensors[2].shape, Vec::<u64>::new());
    assert_eq!(header.tensors[2].elements(), 1);
    assert!(header.metadata.is_empty());
    Ok(())
}

/// A GGUF with every metadata value type, a nested array and three tensors.
pub fn small_gguf(version: u32) -> Vec<u8> {
    let mut w = GgufWriter::new(version, 3, 16);
    w.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 2)
        .key("u8", ty::U8).u8(200)
        .key("i8", ty::I8).u8(0xff)
        .key("u16", ty::U16).raw(&513u16.to_le_bytes())
        .key("i16", ty::I16).raw(&(-2i16).to_le_bytes())
        .key("i32", ty::I32).raw(&(-70000i32).to_le_bytes())
        .key("llama.rope.freq_base", ty::F32).raw(&10000f32.to_le_bytes())
        .key("flag", ty::BOOL).u8(1)
        .key("u64", ty::U64).u64(1 << 40)
        .key("i64", ty::I64).raw(&(-5i64).to_le_bytes())
        .key("f64", ty::F64).raw(&0.25f64.to_le_bytes())
        .kv_str_array("tokenizer.ggml.tokens", &["a", "bc", "<0x0A>"])
        .key("scores", ty::ARRAY).u32(ty::F32).u64(2).raw(&1f32.to_le_bytes()).raw(&(-1f32).to_le_bytes())
        .key("nested", ty::ARRAY).u32(ty::ARRAY).u64(2)
        .u32(ty::I32).u64(1).raw(&7i32.to_le_bytes())
        .u32(ty::STRING).u64(0)
        .kv_u32("general.alignment", 64);
    // Q4_1 [2, 32] = 40 bytes at 0; F32 [4] at 64; Q8_0 [32] = 34 bytes at 128.
    w.tensor("w", &[32, 2], GgmlType::Q4_1.id(), 0)
        .tensor("n", &[4], GgmlType::F32.id(), 64)
        .tensor("q", &[32], GgmlType::Q8_0.id(), 128);
    w.finish(64, 128 + 34)
}

#[test]
fn gguf_v2_and_v3_built_here() -> anyhow::Result<()> {
    for version in [2, 3] {
        let file = small_gguf(version);
        let h = parse_gguf(&file, Some(file.len() as u64))?;
        assert_eq!(h.version, version);
        assert_eq!(h.alignment, 64);
        assert_eq!(h.data_start % 64, 0);
        let m = &h.metadata;
        assert_eq!(m.get_str("general.architecture")?, "llama");
        assert_eq!(m.get_u32("llama.block_count")?, 2);
        assert_eq!(m.get_u32("u8")?, 200);
        assert_eq!(m.get_i64("i8")?, -1);
        assert_eq!(m.get_u32("u16")?, 513);
        assert_eq!(m.get_i64("i16")?, -2);
        assert_eq!(m.get_i64("i32")?, -70000);
        assert_eq!(m.get_f32("llama.rope.freq_base")?, 10000.0);
        assert!(m.get_bool("flag")?);
        assert_eq!(m.get_u64("u64")?, 1 << 40);
        assert_eq!(m.get_i64("i64")?, -5);
        assert_eq!(m.get_f32("f64")?, 0.25);
        assert_eq!(m.get_str_array("tokenizer.ggml.tokens")?, ["a", "bc", "<0x0A>"]);
        assert_eq!(m.get_f32_array("scores")?, [1.0, -1.0]);
        let nested = m.get_array("nested")?;
        assert_eq!(nested, &GgufArray::Array(vec![GgufArray::I32(vec![7]), GgufArray::String(vec![])]));
        assert!(matches!(m.get_u32("i64"), Err(FormatError::WrongType { .. })));
        assert!(matches!(m.get_str("u8"), Err(FormatError::WrongType { .. })));
        assert!(matches!(m.get_u32("absent"), Err(FormatError::MissingKey { key }) if key == "absent"));

        let shapes: Vec<(&str, &[u64], StorageType)> =
            h.tensors.iter().map(|t| (t.name.as_str(), t.shape.as_slice(), t.storage)).collect();
        assert_eq!(
            shapes,
            [
                ("w", &[2u64, 32][..], StorageType::Ggml(GgmlType::Q4_1)),
                ("n", &[4][..], StorageType::Ggml(GgmlType::F32)),
                ("q", &[32][..], StorageType::Ggml(GgmlType::Q8_0)),
            ]
        );
        let ranges: Vec<_> = h.tensors.iter().map(|t| t.range.start - h.data_start..t.range.end - h.data_start).collect();
        assert_eq!(ranges, [0..40, 64..80, 128..162]);
        assert_eq!(h.tensors[2].range.end, file.len() as u64);
    }
    Ok(())
}

#[test]
fn gguf_every_cut_asks_for_more_then_parses() -> anyhow::Result<()> {
    let file = small_gguf(3);
    let full = parse_gguf(&file, None)?;
    for cut in 0..full.header_len as usize {
        let prefix = &file[..cut];
        match parse_gguf(prefix, None) {
            Err(FormatError::NeedMore { needed, have }) => {
                assert_eq!(have, cut as u64);
                assert!(needed > have, "cut {cut}");
            }
            other => bail!("cut {cut}: {other:?}"),
        }
        match parse_gguf(prefix, Some(cut as u64)) {
            Err(FormatError::Truncated { needed, file_len, .. }) => assert!(needed > file_len),
            other => bail!("cut {cut} with length: {other:?}"),
        }
        // Following the requests converges on the header.
        let mut have = cut;
        for _ in 0..64 {
            match parse_gguf(&file[..have], Some(file.len() as u64)) {
                Ok(h) => {
                    assert_eq!(h, full);
                    break;
                }
                Err(FormatError::NeedMore { needed, .. }) => have = needed as usize,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

#[test]
fn detection_picks_the_format() -> anyhow::Result<()> {
    let gguf = small_gguf(3);
    assert!(matches!(detect_and_parse(&gguf, None)?, ModelHeader::Gguf(_)));
    let (st, _) = all_dtypes_file()?;
    assert!(matches!(detect_and_parse(&st, None)?, ModelHeader::Safetensors(_)));
    assert!(matches!(detect_and_parse(b"GG", None), Err(FormatError::NeedMore { .. })));
    assert!(matches!(detect_and_parse(b"PK\x03\x04 zip file", None), Err(FormatError::BadMagic { .. })));
    Ok(())
}

const SMOLLM2: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

#[test]
fn smollm2_gguf() -> anyhow::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SMOLLM2);
    let file = std::fs::read(&path).with_context(|| format!("{} (scripts/setup.sh fetches it)", path.display()))?;
    let file_len = file.len() as u64;
    let h = parse_gguf(&file, Some(file_len))?;
    assert_eq!(h.version, 3);
    assert_eq!(h.alignment, 32);
    let m = &h.metadata;
    assert_eq!(m.get_str("general.architecture")?, "llama");
    assert_eq!(m.get_u32("llama.block_count")?, 30);
    assert_eq!(m.get_u32("llama.embedding_length")?, 576);
    assert_eq!(m.get_u32("llama.feed_forward_length")?, 1536);
    assert_eq!(m.get_u32("llama.attention.head_count")?, 9);
    assert_eq!(m.get_u32("llama.attention.head_count_kv")?, 3);
    assert_eq!(m.get_u32("llama.context_length")?, 8192);
    assert_eq!(m.get_f32("llama.rope.freq_base")?, 100000.0);
    assert_eq!(m.get_str("tokenizer.ggml.model")?, "gpt2");
    let tokens = m.get_str_array("tokenizer.ggml.tokens")?;
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens.first().map(String::as_str), Some("<|endoftext|>"));
    assert_eq!(m.get_i32_array("tokenizer.ggml.token_type")?.len(), 49152);
    assert_eq!(m.get_str_array("tokenizer.ggml.merges")?.len(), 48900);
    assert!(matches!(m.get("tokenizer.chat_template"), Some(GgufValue::String(_))));

    // 30 blocks × 9 tensors + token embedding + output norm; the output shares token_embd.
    assert_eq!(h.tensors.len(), 30 * 9 + 2);
    let count = |ty| h.tensors.iter().filter(|t| t.storage == StorageType::Ggml(ty)).count();
    assert_eq!((count(GgmlType::Q4_1), count(GgmlType::Q8_0), count(GgmlType::F32)), (210, 1, 61));
    let embd = h.tensors.iter().find(|t| t.name == "token_embd.weight").context("token_embd")?;
    assert_eq!((embd.shape.as_slice(), embd.storage), (&[49152u64, 576][..], StorageType::Ggml(GgmlType::Q8_0)));
    let q = h.tensors.iter().find(|t| t.name == "blk.0.attn_q.weight").context("attn_q")?;
    assert_eq!(q.shape, [576, 576]);
    let k = h.tensors.iter().find(|t| t.name == "blk.29.attn_k.weight").context("attn_k")?;
    assert_eq!(k.shape, [192, 576]);
    assert_eq!(h.tensors.iter().map(|t| t.range.end).max(), Some(file_len));
    assert_eq!(h.tensors.iter().map(|t| t.byte_len()).sum::<u64>(), 96_576_768);
    Ok(())
}
