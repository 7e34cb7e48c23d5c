//! The GPU repack of GGUF blocks against the CPU repack, bit for bit: Q4_0 / Q8_0 against
//! `quant::repack::to_weft` (packed words and f16 scales), Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K
//! against `to_planes` (words, high words, heads and f16 d), on seeded blocks with every level
//! and the f16 params' edge cases (subnormal, negative, zero, infinite, NaN: they are copied,
//! never decoded), for ragged block counts, grids of several workgroups and a matrix of more
//! than one dispatch.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use weft::format::GgmlType;
use weft::ops::quantize::read_back;
use weft::ops::repack::{read_back_planes, Repacker, BLOCKS_PER_DISPATCH};
use weft::ops::qmatmul::{QWeight, WeightFormat};
use weft::quant::repack::{chunk_words, high_bit, level_bits, to_planes, to_weft, weft_equivalent};
use weft::Error;

mod gpu_context;
use gpu_context::ctx;

/// Every type the GPU repacks.
const TYPES: [GgmlType; 8] = [
    GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
];

/// Byte offsets of a block's f16 params (d, and m or dmin where the type has one).
fn params_at(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q8_0 | GgmlType::Q5_0 => &[0],
        GgmlType::Q6_K => &[208],
        _ => &[0, 2],
    }
}

/// `rows * cols` weights of `ty`'s blocks: the first 16 blocks' bytes count up (so every level
/// of every chunk position appears), the rest random; then the f16 params cycle through the edge
/// cases between random ones.
fn blocks(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let edge = [0x0003u16, 0x8001, 0x8400, 0x0000, 0x8000, 0x7C00, 0xFE01, 0x7BFF, 0x03FF, 0xFC00];
    let size = ty.block_bytes() as usize;
    let mut out = Vec::new();
    for i in 0..rows * cols / ty.block_elements() as usize {
        let mut b: Vec<u8> = match i < 16 {
            true => (0..size).map(|j| (16 * i + j) as u8).collect(),
            false => (0..size).map(|_| rng.random::<u8>()).collect(),
        };
        for (k, &at) in params_at(ty).iter().enumerate() {
            let d = if (i + k) % 3 == 0 { edge[(i + 2 * k) % edge.len()] } else { rng.random::<u16>() };
            b[at..at + 2].copy_from_slice(&d.to_le_bytes());
        }
        out.extend(b);
    }
    out
}

/// How many distinct levels the planes hold: read back through `high_bit`, as the kernels do.
fn distinct_levels(p: &weft::quant::repack::KPlanes) -> usize {
    let cw = chunk_words(p.ty);
    let mut seen = [false; 64];
    for (c, chunk) in p.words.chunks_exact(cw).enumerate() {
        for l in 0..32 {
            let (w, bit) = high_bit(p.ty, l);
            let hi = match level_bits(p.ty) {
                6 => (chunk[4 + w] >> bit) & 3,
                5 => (p.high[c] >> bit) & 1,
                _ => 0,
            };
            seen[(((chunk[l / 8] >> (4 * (l % 8))) & 0xF) | hi << 4) as usize] = true;
        }
    }
    seen.iter().filter(|&&s| s).count()
}

/// The first difference between two planes' words, named.
fn first_difference(got: &[u32], want: &[u32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} words, the CPU's {}", got.len(), want.len()));
    }
    let k = (0..want.len()).find(|&k| got[k] != want[k])?;
    Some(format!("word {k} is {:#010x}, the CPU's {:#010x}", got[k], want[k]))
}

/// The GPU weight `w` against the CPU repack of `bytes`, plane by plane.
fn check(ctx: &weft::gpu::GpuContext, what: &str, ty: GgmlType, w: &QWeight, bytes: &[u8]) -> anyhow::Result<()> {
    let (rows, cols) = (w.rows, w.cols);
    if let Some(quant) = weft_equivalent(ty) {
        let want = to_weft(ty, rows, cols, bytes)?.expect("Q4_0 and Q8_0 repack");
        assert_eq!(w.format, WeightFormat::Weft(quant), "{what}");
        let got = pollster::block_on(read_back(ctx, w))?;
        let halves = |h: &[u16]| h.iter().map(|&v| v as u32).collect::<Vec<u32>>();
        for (plane, g, x) in [("words", got.words, want.words), ("scales", halves(&got.scales), halves(&want.scales))] {
            assert!(first_difference(&g, &x).is_none(), "{what}: {plane}: {}", first_difference(&g, &x).unwrap());
        }
        assert!(got.zeros.is_empty(), "{what}");
        return Ok(());
    }
    let want = to_planes(ty, rows, cols, bytes)?.expect("a type with planes");
    assert_eq!(w.format, WeightFormat::Repacked(ty), "{what}");
    let got = pollster::block_on(read_back_planes(ctx, w))?;
    let d = |p: &weft::quant::repack::KPlanes| p.d.iter().map(|&v| v as u32).collect::<Vec<u32>>();
    let planes = [("words", &got.words, &want.words), ("high", &got.high, &want.high), ("heads", &got.heads, &want.heads)];
    for (plane, g, x) in planes {
        assert!(first_difference(g, x).is_none(), "{what}: {plane}: {}", first_difference(g, x).unwrap());
    }
    assert!(first_difference(&d(&got), &d(&want)).is_none(), "{what}: d: {}", first_difference(&d(&got), &d(&want)).unwrap());
    assert_eq!(got, want, "{what}");
    Ok(())
}

#[test]
fn gpu_repack_equals_the_cpu_repack_bit_for_bit() -> anyhow::Result<()> {
    let ctx = ctx();
    let repacker = pollster::block_on(Repacker::new(ctx))?;
    // [rows, cols] in blocks of a row: one block; an odd block count (a lone last block beside
    // an empty f16 half); 165 blocks over several workgroups; then over one dispatch of
    // BLOCKS_PER_DISPATCH 32-weight chunks, ending mid-run.
    let big_rows = BLOCKS_PER_DISPATCH / 128 + 17;
    assert!(big_rows * 4096 / 32 > BLOCKS_PER_DISPATCH);
    let mut cases = 0;
    for ty in TYPES {
        let be = ty.block_elements() as usize;
        let shapes = [(1, be), (7, 3 * be), (33, 5 * be), (big_rows, 4096)];
        for (i, &(rows, cols)) in shapes.iter().enumerate() {
            let bytes = blocks(ty, rows, cols, 7 + i as u64);
            let w = repacker.repack(ctx, "w", ty, rows, cols, &bytes)?;
            assert_eq!((w.rows, w.cols), (rows, cols));
            check(ctx, &format!("{} [{rows}, {cols}]", ty.name()), ty, &w, &bytes)?;
            if i == 3 {
                if let Some(p) = to_planes(ty, rows, cols, &bytes)? {
                    assert_eq!(distinct_levels(&p), 1 << level_bits(ty), "{}: every level present", ty.name());
                }
            }
            cases += 1;
        }
    }
    assert_eq!(cases, 4 * TYPES.len());
    Ok(())
}

#[test]
fn bytes_that_are_not_whole_rows_of_blocks_are_a_shape_error() -> anyhow::Result<()> {
    let ctx = ctx();
    let repacker = pollster::block_on(Repacker::new(ctx))?;
    let cases = [
        (GgmlType::Q4_0, 2, 32, 18),
        (GgmlType::Q8_0, 1, 48, 51),
        (GgmlType::Q4_1, 1, 32, 24),
        (GgmlType::Q6_K, 1, 128, 105),
        (GgmlType::Q4_K, 2, 256, 144),
        (GgmlType::Q3_K, 1, 256, 110),
    ];
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

/// Tiny GGUF models of each repacked type (bench/gpu/gen_quant_gguf.py, widths of odd block
/// counts; Q4_K_M: Q4_K with Q6_K in blk.1's attn_v and ffn_down and the head) loaded with the
/// repack on the GPU (asked for: on a software adapter the load keeps the blocks otherwise) and
/// without: the repacked matrices read back equal the CPU repack of the file's bytes, the load
/// counts its time as its own phase and none as convert, and the logits of both loads agree.
#[test]
fn a_load_repacked_on_the_gpu_holds_the_cpu_repack_and_gives_the_same_logits() -> anyhow::Result<()> {
    use weft::loader::native::FileReader;
    use weft::model::{self, EngineOptions, QuantizeOn, WeightOptions};
    let ctx = ctx();
    for file_type in ["q4_0", "q8_0", "q4_1", "q4_k_m"] {
        let path = format!("tests/fixtures/quant-tiny/model-{file_type}.gguf");
        let file = std::fs::read(&path)?;
        let header = weft::format::detect_and_parse(&file, None)?;
        let mut logits = Vec::new();
        for on in [QuantizeOn::Gpu, QuantizeOn::Cpu] {
            let reader = FileReader::open(&path)?;
            let weights = WeightOptions { quantize_on: on, ..Default::default() };
            let engine = EngineOptions { max_seq: 16, max_batch: 8, ..Default::default() };
            let mut llama = pollster::block_on(model::open(ctx, &reader, engine, weights, &mut |_| {}))?.0;
            let t = llama.load_times;
            let down = &llama.weights.layers[1].down;
            let stored = |name: &str| {
                let info = header.tensors().iter().find(|i| i.name == name).expect(name);
                let weft::format::StorageType::Ggml(ty) = info.storage else { panic!("{name} is not GGUF blocks") };
                (ty, &file[info.range.start as usize..info.range.end as usize])
            };
            if on == QuantizeOn::Gpu {
                assert!(t.gpu_repack_ms > 0.0 && t.convert_ms < t.gpu_repack_ms, "{path}: {t:?}");
                for (name, w) in [("token_embd.weight", &llama.weights.embedding), ("blk.1.ffn_down.weight", down)] {
                    let (ty, bytes) = stored(name);
                    check(ctx, &format!("{path}: {name}"), ty, w, bytes)?;
                }
            } else if ctx.capabilities().is_software {
                assert_eq!(down.format, WeightFormat::Ggml(stored("blk.1.ffn_down.weight").0));
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
