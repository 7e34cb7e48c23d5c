//! The GPU repack of GGUF Q4_0 / Q8_0 blocks against the CPU repack (`quant::repack::to_weft`),
//! bit for bit: packed words and f16 scales, on seeded blocks with every level and the scales'
//! edge cases (subnormal, negative, zero, infinite, NaN: the scale is copied, never decoded), for
//! ragged block counts, grids of several workgroups and a matrix of more than one dispatch.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use weft::format::GgmlType;
use weft::ops::quantize::read_back;
use weft::ops::repack::{Repacker, BLOCKS_PER_DISPATCH};
use weft::ops::qmatmul::WeightFormat;
use weft::quant::repack::{to_weft, weft_equivalent};
use weft::Error;

mod gpu_context;
use gpu_context::ctx;

/// `rows * cols / 32` blocks of `ty`: scales cycling through the edge cases and random ones; the
/// first 16 blocks' levels are every value in order, the rest random bytes.
fn blocks(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let edge = [0x0003u16, 0x8001, 0x8400, 0x0000, 0x8000, 0x7C00, 0xFE01, 0x7BFF, 0x03FF];
    let qs = ty.block_bytes() as usize - 2;
    let mut out = Vec::new();
    for i in 0..rows * cols / 32 {
        let d = if i % 3 == 0 { edge[(i / 3) % edge.len()] } else { rng.random::<u16>() };
        out.extend(d.to_le_bytes());
        if i < 16 {
            // Block i holds levels 16i .. 16i + qs: bytes (Q8_0) or nibble pairs (Q4_0) of
            // every value across the first blocks.
            out.extend((0..qs).map(|j| (16 * i + j) as u8));
        } else {
            out.extend((0..qs).map(|_| rng.random::<u8>()));
        }
    }
    out
}

#[test]
fn gpu_repack_equals_the_cpu_repack_bit_for_bit() -> anyhow::Result<()> {
    let ctx = ctx();
    let repacker = pollster::block_on(Repacker::new(ctx))?;
    // [rows, cols]: one block; an odd block count (a lone last block beside an empty scale
    // half); 330 blocks over several workgroups; then over one dispatch, ending mid-run.
    let big_rows = BLOCKS_PER_DISPATCH / 128 + 17;
    let shapes = [(1, 32), (7, 96), (33, 320), (big_rows, 4096)];
    assert!(big_rows * 4096 / 32 > BLOCKS_PER_DISPATCH);
    let mut cases = 0;
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        for (i, &(rows, cols)) in shapes.iter().enumerate() {
            let bytes = blocks(ty, rows, cols, 7 + i as u64);
            let want = to_weft(ty, rows, cols, &bytes)?.expect("Q4_0 and Q8_0 repack");
            let w = repacker.repack(ctx, "w", ty, rows, cols, &bytes)?;
            assert_eq!(w.format, WeightFormat::Weft(weft_equivalent(ty).unwrap()));
            assert_eq!((w.rows, w.cols), (rows, cols));
            let got = pollster::block_on(read_back(ctx, &w))?;
            assert_eq!(got.words.len(), want.words.len(), "{} [{rows}, {cols}]", ty.name());
            assert_eq!(got.scales.len(), want.scales.len(), "{} [{rows}, {cols}]", ty.name());
            if let Some(k) = (0..want.words.len()).find(|&k| got.words[k] != want.words[k]) {
                panic!("{} [{rows}, {cols}]: word {k} is {:#010x}, the CPU's {:#010x}", ty.name(), got.words[k], want.words[k]);
            }
            if let Some(k) = (0..want.scales.len()).find(|&k| got.scales[k] != want.scales[k]) {
                panic!("{} [{rows}, {cols}]: scale {k} is {:#06x}, the CPU's {:#06x}", ty.name(), got.scales[k], want.scales[k]);
            }
            assert!(got.zeros.is_empty());
            cases += 1;
        }
    }
    assert_eq!(cases, 8);
    Ok(())
}

#[test]
fn bytes_that_are_not_whole_rows_of_blocks_are_a_shape_error() -> anyhow::Result<()> {
    let ctx = ctx();
    let repacker = pollster::block_on(Repacker::new(ctx))?;
    let cases = [(GgmlType::Q4_0, 2, 32, 18), (GgmlType::Q8_0, 1, 48, 51), (GgmlType::Q4_1, 1, 32, 20)];
    for (ty, rows, cols, len) in cases {
        match repacker.repack(ctx, "bad", ty, rows, cols, &vec![0u8; len]) {
            Err(Error::Shape { op: "repack", message }) => assert!(message.starts_with("bad: "), "{message}"),
            Err(e) => panic!("{} [{rows}, {cols}]: expected a repack shape error, got {e}", ty.name()),
            Ok(_) => panic!("{} [{rows}, {cols}] from {len} bytes was repacked", ty.name()),
        }
    }
    Ok(())
}

/// How far the logits of one model may move between the GEMV over GGUF blocks and the GEMV over
/// the repacked words: the same weights, summed in another order (the fixtures' logits are of
/// the order of 1e-3).
const LOGITS: weft::ops::Tolerance = weft::ops::Tolerance { abs: 1e-6, rel: 1e-3 };

/// Tiny Q4_0 and Q8_0 GGUF models (bench/gpu/gen_quant_gguf.py, widths of odd block counts)
/// loaded with the repack on the GPU (asked for: on a software adapter the load keeps the
/// blocks otherwise) and without: the repacked matrices read back equal the CPU repack of the
/// file's bytes, the load counts its time as its own phase and none as convert, and the logits
/// of both loads agree.
#[test]
fn a_load_repacked_on_the_gpu_holds_the_cpu_repack_and_gives_the_same_logits() -> anyhow::Result<()> {
    use weft::loader::native::FileReader;
    use weft::model::{self, EngineOptions, QuantizeOn, WeightOptions};
    let ctx = ctx();
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        let path = format!("tests/fixtures/quant-tiny/model-{}.gguf", ty.name().to_lowercase());
        let file = std::fs::read(&path)?;
        let header = weft::format::detect_and_parse(&file, None)?;
        let mut logits = Vec::new();
        for on in [QuantizeOn::Gpu, QuantizeOn::Cpu] {
            let reader = FileReader::open(&path)?;
            let weights = WeightOptions { quantize_on: on, ..Default::default() };
            let engine = EngineOptions { max_seq: 16, max_batch: 8, ..Default::default() };
            let mut llama = pollster::block_on(model::open(ctx, &reader, engine, weights, &mut |_| {}))?.0;
            let t = llama.load_times;
            if on == QuantizeOn::Gpu {
                assert!(t.gpu_repack_ms > 0.0 && t.convert_ms < t.gpu_repack_ms, "{path}: {t:?}");
                for (name, w) in [("token_embd.weight", &llama.weights.embedding), ("blk.1.ffn_down.weight", &llama.weights.layers[1].down)] {
                    let info = header.tensors().iter().find(|i| i.name == name).expect(name);
                    let bytes = &file[info.range.start as usize..info.range.end as usize];
                    let want = to_weft(ty, w.rows, w.cols, bytes)?.expect("Q4_0 and Q8_0 repack");
                    let got = pollster::block_on(read_back(ctx, w))?;
                    assert_eq!(w.format, WeightFormat::Weft(want.quant), "{path}: {name}");
                    assert!(got.words == want.words && got.scales == want.scales, "{path}: {name} differs from the CPU repack");
                }
            } else if ctx.capabilities().is_software {
                assert_eq!(llama.weights.layers[1].down.format, WeightFormat::Ggml(ty));
                assert_eq!(t.gpu_repack_ms, 0.0);
            }
            logits.push(pollster::block_on(llama.logits(ctx, &[1, 7, 42, 300, 5], None))?);
        }
        let want: Vec<f64> = logits[1].iter().map(|&v| v as f64).collect();
        assert!(want.iter().any(|v| v.abs() > 100.0 * LOGITS.abs), "{path}: logits too small to compare");
        let dev = LOGITS.compare(&logits[0], &want);
        assert!(dev.within, "{path}: logits of the GPU repack against the stored blocks: {dev:?}");
        println!("{path}: {} logits within {LOGITS:?}: {dev:?}", want.len());
    }
    Ok(())
}
