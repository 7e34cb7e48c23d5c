//! weft's GGML decoders against the PyPI `gguf` package (numpy) on committed fixtures written by
//! `scripts/make_gguf_fixtures.py`: real Q4_1/Q8_0 blocks from SmolLM2-135M and random blocks of
//! every quantised type. Rule: identical f32 bits. Every product in these formats is exact in f32
//! (see docs/DTYPES.md), and numpy, like ggml, adds or subtracts the offset once, last, so a
//! different association of the products cannot change a bit; the test still measures the ULP
//! distance per type so a failure says how far off it is.

use std::collections::BTreeMap;
use std::path::Path;

use weft::format::{GgmlType, StorageType};
use weft::gpu::{BackendChoice, GpuContext};

fn ulps(a: f32, b: f32) -> u64 {
    let key = |v: f32| {
        let bits = v.to_bits();
        if bits >> 31 == 1 { -((bits & 0x7FFF_FFFF) as i64) } else { bits as i64 }
    };
    key(a).abs_diff(key(b))
}

struct Fixture {
    name: String,
    ty: StorageType,
    elements: usize,
    bytes: Vec<u8>,
    want: Vec<f32>,
}

fn fixtures() -> anyhow::Result<Vec<Fixture>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json"))?)?;
    let mut out = Vec::new();
    for f in manifest["fixtures"].as_array().into_iter().flatten() {
        let name = f["name"].as_str().unwrap_or_default().to_string();
        let ty_name = f["type"].as_str().unwrap_or_default();
        let ty = GgmlType::ALL
            .into_iter()
            .find(|t| t.name() == ty_name)
            .ok_or_else(|| anyhow::anyhow!("{name}: unknown type {ty_name}"))?;
        let elements = f["elements"].as_u64().unwrap_or(0) as usize;
        let bytes = std::fs::read(dir.join(format!("{name}.bin")))?;
        let want: Vec<f32> = std::fs::read(dir.join(format!("{name}.f32")))?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        anyhow::ensure!(want.len() == elements, "{name}: {} values for {elements}", want.len());
        out.push(Fixture { name, ty: StorageType::Ggml(ty), elements, bytes, want });
    }
    Ok(out)
}

#[test]
fn decoders_agree_with_the_gguf_package() -> anyhow::Result<()> {
    let all = fixtures()?;
    let mut max_ulps: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    for f in &all {
        let got = weft::quant::decode_to_f32(f.ty, &f.bytes, f.elements)?;
        assert_eq!(got.len(), f.want.len(), "{}", f.name);
        let worst = got.iter().zip(&f.want).map(|(&g, &w)| ulps(g, w)).max().unwrap_or(0);
        let entry = max_ulps.entry(f.ty.name()).or_default();
        entry.0 = entry.0.max(worst);
        entry.1 += f.elements;
        assert!(got.iter().any(|v| *v != 0.0), "{}: all zero", f.name);
    }
    for (ty, (worst, n)) in &max_ulps {
        println!("{ty}: max {worst} ULP over {n} values");
    }
    let types: Vec<&str> = max_ulps.keys().copied().collect();
    for t in GgmlType::ALL.iter().filter(|t| t.block_elements() > 1) {
        assert!(types.contains(&t.name()), "no fixture for {}", t.name());
    }
    let off: Vec<_> = max_ulps.iter().filter(|(_, (w, _))| *w != 0).collect();
    assert!(off.is_empty(), "not bit-identical to the gguf package: {off:?}");
    Ok(())
}

#[test]
fn gpu_decodes_the_real_model_blocks_like_the_gguf_package() -> anyhow::Result<()> {
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    for f in fixtures()?.iter().filter(|f| f.name.starts_with("real_")) {
        let got = pollster::block_on(weft::ops::dequant::gpu_decode(&ctx, f.ty, &f.bytes, f.elements))?;
        let same = got.iter().zip(&f.want).filter(|(g, w)| g.to_bits() == w.to_bits()).count();
        assert_eq!(same, f.elements, "{}", f.name);
    }
    Ok(())
}
