//! `weft inspect` as a user runs it: the built binary on `tests/fixtures/all_dtypes/`, a
//! safetensors file with a tensor of every dtype written by the `safetensors` Python package
//! (`scripts/make_all_dtypes.py`), next to what numpy and torch decode each tensor to.
//!
//! Values must match the reference bit for bit; NaN matches NaN, and the NaN bits that differ
//! are checked to differ only as `docs/DTYPES.md` says weft's do. Observed with numpy 2.4 and
//! torch 2.15: numpy (F32 copy, F16 cast) and torch (BF16 cast) keep signalling NaNs signalling,
//! weft sets the quiet bit and keeps sign and payload (e.g. F16 0x7C01 → numpy 0x7F802000, weft
//! 0x7FC02000); torch widens the E4M3 NaN S.1111.111 to ±0x7FF00000, weft to ±0x7FC00000.
//! The per-tensor counts print with `cargo test --test inspect_cli -- --nocapture`.

mod common;

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context};
use common::cli::{weft, weft_ok};
use common::http::{serve, ServerMode};
use serde_json::Value;

const ALL_DTYPES: [&str; 16] = [
    "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F4", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8",
    "BOOL",
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/all_dtypes")
}

fn fixture_file() -> String {
    fixture_dir().join("all_dtypes.safetensors").display().to_string()
}

struct Expected {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    bytes: u64,
}

/// The tensors as the Python writer recorded them.
fn manifest() -> anyhow::Result<Vec<Expected>> {
    let text = std::fs::read_to_string(fixture_dir().join("manifest.json"))?;
    let json: Value = serde_json::from_str(&text)?;
    let tensors = json["tensors"].as_array().context("manifest has no tensors")?;
    let expected = tensors
        .iter()
        .map(|t| {
            Ok(Expected {
                name: t["name"].as_str().context("name")?.to_string(),
                dtype: t["dtype"].as_str().context("dtype")?.to_string(),
                shape: serde_json::from_value(t["shape"].clone())?,
                bytes: t["bytes"].as_u64().context("bytes")?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    for dtype in ALL_DTYPES {
        ensure!(expected.iter().any(|e| e.dtype == dtype), "the fixture has no {dtype} tensor");
    }
    Ok(expected)
}

fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

#[test]
fn table_lists_every_dtype_with_shape_and_bytes() -> anyhow::Result<()> {
    let stdout = weft_ok(&["inspect", &fixture_file()])?;
    let expected = manifest()?;
    assert!(stdout.contains(&format!("tensors:  {}", expected.len())), "{stdout}");
    for e in &expected {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(e.name.as_str()))
            .with_context(|| format!("no row for {}", e.name))?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.get(1), Some(&e.dtype.as_str()), "{line}");
        assert!(line.contains(&shape_text(&e.shape)), "{line}");
        // The last two columns are bytes and bits per weight.
        assert_eq!(fields.iter().rev().nth(1), Some(&e.bytes.to_string().as_str()), "{line}");
    }
    Ok(())
}

#[test]
fn json_lists_every_dtype_with_shape_and_bytes() -> anyhow::Result<()> {
    let json: Value = serde_json::from_str(&weft_ok(&["inspect", &fixture_file(), "--json"])?)?;
    let rows = json["tensors"].as_array().context("no tensors array")?;
    let expected = manifest()?;
    assert_eq!(rows.len(), expected.len());
    assert_eq!(json["format"], "safetensors");
    for e in &expected {
        let row = rows.iter().find(|r| r["name"] == e.name.as_str()).with_context(|| e.name.clone())?;
        assert_eq!(row["storage"], e.dtype.as_str(), "{}", e.name);
        assert_eq!(serde_json::from_value::<Vec<u64>>(row["shape"].clone())?, e.shape, "{}", e.name);
        assert_eq!(row["bytes"].as_u64(), Some(e.bytes), "{}", e.name);
    }
    Ok(())
}

/// An f32 .npy file: its shape and its values' bits.
fn read_npy(path: &Path) -> anyhow::Result<(Vec<u64>, Vec<u32>)> {
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    ensure!(bytes.starts_with(b"\x93NUMPY\x01\x00"), "{}: not a version 1.0 .npy", path.display());
    let header_len = bytes.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]])).context("short file")?;
    let data_start = 10 + usize::from(header_len);
    let dict = std::str::from_utf8(bytes.get(10..data_start).context("short header")?)?;
    ensure!(dict.contains("'descr': '<f4'") && dict.contains("'fortran_order': False"), "{dict}");
    ensure!(data_start % 64 == 0, "data at {data_start} is not 64-byte aligned");
    let shape_text = dict.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).context("no shape")?;
    let shape = shape_text.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::parse).collect::<Result<Vec<u64>, _>>()?;
    let data = &bytes[data_start..];
    ensure!(data.len() % 4 == 0, "{} data bytes", data.len());
    let values = data.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok((shape, values))
}

fn is_nan(bits: u32) -> bool {
    bits & 0x7FFF_FFFF > 0x7F80_0000
}

/// The NaN weft makes of the NaN a reference decoder made: quieted, sign and payload kept; for
/// E4M3, whose one NaN has no payload, the canonical quiet NaN with its sign.
fn weft_nan_for(dtype: &str, reference: u32) -> u32 {
    const QUIET: u32 = 0x0040_0000;
    if dtype == "F8_E4M3" {
        (reference & 0x8000_0000) | 0x7F80_0000 | QUIET
    } else {
        reference | QUIET
    }
}

#[test]
fn npy_of_every_tensor_matches_numpy_and_torch() -> anyhow::Result<()> {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("inspect_cli_npy");
    std::fs::create_dir_all(&out_dir)?;
    let mut mismatches = Vec::new();
    for e in manifest()? {
        let ours = out_dir.join(format!("{}.npy", e.name));
        let stdout = weft_ok(&["inspect", &fixture_file(), "--tensor", &e.name, "--npy", &ours.display().to_string()])?;
        assert!(stdout.contains(&format!("to {}", ours.display())), "{stdout}");
        let (shape, values) = read_npy(&ours)?;
        let (want_shape, want) = read_npy(&fixture_dir().join(format!("{}.npy", e.name)))?;
        assert_eq!(shape, e.shape, "{}", e.name);
        assert_eq!(want_shape, e.shape, "{}", e.name);
        assert_eq!(values.len(), want.len(), "{}", e.name);
        let (mut nans, mut nan_bits_differ) = (0, 0);
        for (i, (&got, &want)) in values.iter().zip(&want).enumerate() {
            if is_nan(want) && is_nan(got) {
                nans += 1;
                nan_bits_differ += usize::from(got != want);
                if got != want && got != weft_nan_for(&e.dtype, want) {
                    mismatches.push(format!("{}[{i}]: NaN {got:#010x}, reference NaN {want:#010x}", e.name));
                }
            } else if got != want {
                mismatches.push(format!("{}[{i}]: weft {got:#010x}, reference {want:#010x}", e.name));
            }
        }
        println!("{:<11} {:<8} {:>4} values, {nans} NaN, {nan_bits_differ} with other NaN bits", e.name, e.dtype, values.len());
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    Ok(())
}

#[test]
fn an_unknown_tensor_names_close_ones() -> anyhow::Result<()> {
    let npy = Path::new(env!("CARGO_TARGET_TMPDIR")).join("never_written.npy");
    let out = weft(&["inspect", &fixture_file(), "--tensor", "f8e4m3", "--npy", &npy.display().to_string()])?;
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)?;
    assert!(stderr.contains("no tensor named 'f8e4m3'") && stderr.contains("close names: f8_e4m3"), "{stderr}");
    assert!(!npy.exists());
    Ok(())
}

#[test]
fn npy_over_http_fetches_the_header_and_that_tensor_only() -> anyhow::Result<()> {
    // A 3 MB tensor the export must not download, then the 4-value tensor it asks for.
    const BIG: usize = 3 << 20;
    let json = format!(
        r#"{{"big":{{"dtype":"U8","shape":[{BIG}],"data_offsets":[0,{BIG}]}},"small":{{"dtype":"BF16","shape":[2,2],"data_offsets":[{BIG},{}]}}}}"#,
        BIG + 8
    );
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(json.as_bytes());
    let data_start = file.len();
    file.resize(data_start + BIG, 0xAB);
    for v in [1.0f32, -2.5, 0.0, 65280.0] {
        // Each is exact in BF16: the top half of its f32 bits.
        file.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes());
    }
    let (url, log) = serve(file.clone(), ServerMode::Ranges)?;
    let npy = Path::new(env!("CARGO_TARGET_TMPDIR")).join("over_http.npy");
    let out = weft(&["inspect", &url, "--tensor", "small", "--npy", &npy.display().to_string()])?;
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (shape, values) = read_npy(&npy)?;
    assert_eq!(shape, [2, 2]);
    assert_eq!(values, [1.0f32, -2.5, 0.0, 65280.0].map(f32::to_bits));
    let ranges: Vec<String> = log.lock().map_err(|_| anyhow::anyhow!("log poisoned"))?.iter().flatten().cloned().collect();
    let tensor_range = format!("{}-{}", data_start + BIG, data_start + BIG + 7);
    assert_eq!(ranges.last(), Some(&tensor_range), "{ranges:?}");
    let fetched: usize = ranges
        .iter()
        .filter_map(|r| r.split_once('-'))
        .map(|(s, e)| Ok::<_, anyhow::Error>(e.parse::<usize>()?.min(file.len() - 1) + 1 - s.parse::<usize>()?))
        .sum::<anyhow::Result<usize>>()?;
    if fetched >= BIG {
        bail!("fetched {fetched} bytes of a {}-byte file: {ranges:?}", file.len());
    }
    Ok(())
}
