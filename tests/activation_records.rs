//! 8-bit activation records (src/ops/qmatmul/records.rs): the stacked gate/up GEMV's SwiGLU
//! epilogue writes its output quantized, in the order the down projection's DP4 GEMV reads, and
//! that GEMV reads them instead of staging. The records hold what the staging would make of the
//! same values, so the down projection's sums are the same bits either way; the epilogue's f32
//! output is unchanged; and the records decode to the values within half a step.

use weft::gpu::{DType, GpuContext, GpuTensor};
use weft::ops::qmatmul::records::{records_shape, writes_records, RecordOrder, RECORD_SWIGLU_CANDIDATES, RECORD_WORDS};
use weft::ops::qmatmul::{self, gemv_fused_tuned, gemv_int8, GemvConfig, GemvFusion, WeightFormat};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::gpu_kernel_ctx;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Checks the records of `values` (one token) against the values: each integer within half a
/// step of value / scale, and the half sums those of the integers.
fn check_decodes(records: &[u32], values: &[f32], order: RecordOrder, label: &str) {
    for (c, rec) in records.chunks_exact(RECORD_WORDS).enumerate() {
        let d = f32::from_bits(rec[8]);
        let amax = values[32 * c..32 * c + 32].iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!((d - amax / 127.0).abs() <= amax * 1e-6, "{label}: chunk {c} scale {d} for absmax {amax}");
        let mut halves = [0i32; 2];
        for j in 0..8 {
            for (b, byte) in rec[j].to_le_bytes().into_iter().enumerate() {
                let q = byte as i8 as i32;
                let v = values[32 * c + order.value_of(j, b)];
                assert!((q as f32 - v / d).abs() <= 0.5 + 1e-3, "{label}: chunk {c} word {j} byte {b}: {q} for {}", v / d);
                halves[j / 4] += q;
            }
        }
        assert_eq!([rec[9], rec[10]], [(halves[0] as f32).to_bits(), (halves[1] as f32).to_bits()], "{label}: chunk {c} sums");
    }
}

#[test]
fn swiglu_records_give_the_down_projection_the_bits_of_its_staging() -> anyhow::Result<()> {
    let ctx = &gpu_kernel_ctx()?;
    let down_config = GemvConfig { wg: 256, rows: 2, lanes: 32 };
    let mut checked = 0;
    for (i, name) in ["q4_g32_sym", "q8_g32_sym", "q3_g32_asym", "q2_g32_asym", "Q4_K_R", "Q6_K_R"].into_iter().enumerate() {
        let format = WeightFormat::parse(name).expect("known format");
        let order = RecordOrder::of(&format).expect("a DP4 order");
        // h: the SwiGLU's outputs, the down projection's inputs (whole chunks; the K-quants'
        // super-blocks of 256); k: the model's width.
        let (h, k, n) = if format.k_multiple() > 32 { (256, 256, 40) } else { (96, 128, 40) };
        let gate_up = qmatmul::test_weight(format, 900 + i as u64, 2 * h, k)?.upload(ctx, "gate_up")?;
        let down = qmatmul::test_weight(format, 910 + i as u64, n, h)?.upload(ctx, "down")?;
        if !gemv_int8(ctx, &down) {
            continue;
        }
        let x: Vec<f32> = random_f32(920 + i as u64, k).iter().map(|v| v * 3.0).collect();
        let g: Vec<f32> = random_f32(930 + i as u64, k).iter().map(|v| 1.0 + 0.5 * v).collect();
        let stream = random_f32(940 + i as u64, n);
        let (tx, tg) = (ctx.upload_f32("x", &[1, k], &x)?, ctx.upload_f32("g", &[k], &g)?);
        let norm = Some((&tg, 1e-5));
        for config in RECORD_SWIGLU_CANDIDATES.into_iter().step_by(2) {
            let label = format!("{name} h {h} k {k} {config:?}");
            let staged = run(ctx, &gate_up, &down, &tx, norm, &stream, config, down_config, None)?;
            let rec = ctx.zeros("records", &records_shape(1, h), DType::U32)?;
            let recorded = run(ctx, &gate_up, &down, &tx, norm, &stream, config, down_config, Some((&rec, order)))?;
            assert_eq!(bits(&recorded.0), bits(&staged.0), "{label}: the SwiGLU's f32 output");
            assert_eq!(bits(&recorded.1), bits(&staged.1), "{label}: the down projection");
            let words = pollster::block_on(ctx.read_u32(&rec))?;
            check_decodes(&words, &staged.0, order, &label);
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} cases ran");
    Ok(())
}

/// The SwiGLU (norm and 8-bit activations folded in) into `act`, then the down projection added
/// into a copy of `stream`; with `records`, the epilogue writes them and the down GEMV reads
/// them. Returns (act, stream after).
#[allow(clippy::too_many_arguments)]
fn run(
    ctx: &GpuContext,
    gate_up: &qmatmul::QWeight,
    down: &qmatmul::QWeight,
    x: &GpuTensor,
    norm: Option<(&GpuTensor, f32)>,
    stream: &[f32],
    config: GemvConfig,
    down_config: GemvConfig,
    records: Option<(&GpuTensor, RecordOrder)>,
) -> anyhow::Result<(Vec<f32>, Vec<f32>)> {
    let h = gate_up.rows / 2;
    let act = ctx.upload_f32("act", &[1, h], &vec![-7.0; h])?;
    let y = ctx.upload_f32("stream", &[1, stream.len()], stream)?;
    let swiglu = GemvFusion { swiglu: true, norm, int8: true, records_out: records, ..Default::default() };
    let first = pollster::block_on(gemv_fused_tuned(ctx, gate_up, x, &act, swiglu, config))?;
    let residual = GemvFusion { residual: true, int8: true, records_in: records.is_some(), ..Default::default() };
    let input = records.map_or(&act, |(r, _)| r);
    let second = pollster::block_on(gemv_fused_tuned(ctx, down, input, &y, residual, down_config))?;
    ctx.run(&[&first, &second]);
    Ok((pollster::block_on(ctx.read_f32(&act))?, pollster::block_on(ctx.read_f32(&y))?))
}

#[test]
fn records_are_refused_where_they_cannot_be_written_or_read() -> anyhow::Result<()> {
    let ctx = &gpu_kernel_ctx()?;
    let q4 = WeightFormat::parse("q4_g32_sym").expect("q4");
    let order = RecordOrder::Nibbles;
    let gate_up = qmatmul::test_weight(q4, 1, 128, 64)?.upload(ctx, "gate_up")?;
    let x = ctx.zeros("x", &[1, 64], DType::F32)?;
    let act = ctx.zeros("act", &[1, 64], DType::F32)?;
    let rec = ctx.zeros("records", &records_shape(1, 64), DType::U32)?;
    let good = RECORD_SWIGLU_CANDIDATES[0];
    let out = GemvFusion { swiglu: true, int8: true, records_out: Some((&rec, order)), ..Default::default() };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &gate_up, &x, &act, out, good)).is_ok());
    // 8 output rows a workgroup: chunks would span workgroups.
    let part = GemvConfig { wg: 256, rows: 2, lanes: 32 };
    assert!(!writes_records(part));
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &gate_up, &x, &act, out, part)).is_err(), "chunks split between workgroups");
    let no_swiglu = GemvFusion { swiglu: false, ..out };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &gate_up, &x, &x, no_swiglu, good)).is_err(), "records out without the epilogue");
    let short = ctx.zeros("records", &records_shape(1, 32), DType::U32)?;
    let wrong = GemvFusion { records_out: Some((&short, order)), ..out };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &gate_up, &x, &act, wrong, good)).is_err(), "records of another width");
    let down = qmatmul::test_weight(q4, 2, 16, 64)?.upload(ctx, "down")?;
    let y = ctx.zeros("y", &[1, 16], DType::F32)?;
    let read = GemvFusion { int8: true, records_in: true, ..Default::default() };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &down, &rec, &y, read, part)).is_ok());
    let f32_acts = GemvFusion { int8: false, ..read };
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &down, &rec, &y, f32_acts, part)).is_err(), "records without 8-bit activations");
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &down, &x, &y, read, part)).is_err(), "f32 x as records");
    let wide = ctx.zeros("records", &records_shape(1, 128), DType::U32)?;
    assert!(pollster::block_on(gemv_fused_tuned(ctx, &down, &wide, &y, read, part)).is_err(), "records of another width");
    Ok(())
}

/// Tuning with 8-bit activations and records times the SwiGLU epilogue writing records over the
/// shapes whose workgroups own whole chunks and the down GEMV reading them over its own, decides
/// by the two pairs' times whether records pay, and the fused GEMVs run at the shapes chosen.
#[test]
fn tuning_times_the_recording_epilogue_at_whole_chunk_shapes() -> anyhow::Result<()> {
    let ctx = &gpu_kernel_ctx()?;
    assert!(ctx.capabilities().timestamp_query, "this test needs timestamp queries");
    // k ≠ 2h, so the two GEMVs' timings are told apart by their rows.
    let (h, k) = (64, 256);
    let q4 = WeightFormat::parse("q4_g32_sym").expect("q4");
    let w = qmatmul::test_weight(q4, 95, 2 * h, k)?.upload(ctx, "gate_up")?;
    let down = qmatmul::test_weight(q4, 97, k, h)?.upload(ctx, "down")?;
    let tuned = pollster::block_on(qmatmul::tune_gemv(ctx, &[&w, &down], &[&w], qmatmul::Precision::F32, true, &[(&w, &down)]))?;
    if !gemv_int8(ctx, &w) || !gemv_int8(ctx, &down) {
        assert!(tuned.iter().all(|t| !t.records), "{tuned:?}");
        return Ok(());
    }
    let best = |pick: &dyn Fn(&&qmatmul::GemvTuning) -> bool| {
        let found: Vec<_> = tuned.iter().filter(pick).collect();
        assert_eq!(found.len(), 1, "{tuned:?}");
        found[0].timings.iter().map(|&(_, us)| us).fold(f64::INFINITY, f64::min)
    };
    let with = best(&|t| t.records) + best(&|t| t.reads_records);
    let without = best(&|t| t.int8 && t.swiglu && !t.records) + best(&|t| t.int8 && !t.swiglu && !t.reads_records && t.rows == k);
    assert_eq!(qmatmul::records_pay(ctx, &w, &down), with < without, "{with} µs with records, {without} without");
    let reader = tuned.iter().find(|t| t.reads_records).expect("timed reading records");
    assert!(reader.int8 && !reader.swiglu && reader.timings.iter().all(|(c, us)| c.lanes > 1 && *us > 0.0), "{reader:?}");
    let t = tuned.iter().find(|t| t.records).expect("timed writing records");
    assert!(t.swiglu && t.int8, "{t:?}");
    assert!(t.timings.iter().all(|(c, us)| RECORD_SWIGLU_CANDIDATES.contains(c) && writes_records(*c) && *us > 0.0), "{t:?}");
    let x = ctx.upload_f32("x", &[1, k], &random_f32(96, k))?;
    let act = ctx.zeros("act", &[1, h], DType::F32)?;
    let rec = ctx.zeros("records", &records_shape(1, h), DType::U32)?;
    let fusion = GemvFusion { swiglu: true, int8: true, records_out: Some((&rec, RecordOrder::Nibbles)), ..Default::default() };
    let d = pollster::block_on(qmatmul::gemv_fused(ctx, &w, &x, &act, fusion))?;
    let c = t.chosen;
    for part in [format!("LPR={},", c.lanes), format!("RPT={},", c.rows), "XOUT=1".into()] {
        assert!(d.name().contains(&part), "{} for {c:?}", d.name());
    }
    // The reader runs at its own shape.
    let y = ctx.zeros("y", &[1, k], DType::F32)?;
    let read = GemvFusion { int8: true, records_in: true, residual: true, ..Default::default() };
    let d = pollster::block_on(qmatmul::gemv_fused(ctx, &down, &rec, &y, read))?;
    let c = reader.chosen;
    for part in [format!("LPR={},", c.lanes), format!("WG={},", c.wg), "XREC=1".into()] {
        assert!(d.name().contains(&part), "{} for {c:?}", d.name());
    }
    Ok(())
}
