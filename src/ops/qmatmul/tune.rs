//! GEMV launch shapes measured on the device at load, per weight shape. The best shape depends
//! on the GPU and on the matrix: on an H100 the default (32 lanes per row, 8 rows per workgroup)
//! won on every SmolLM2 layer, while the 49152-row output head ran twice as fast with 4 lanes
//! per row and 8192 x 8192 about 1.25x faster with 4 rows per lane group (bench/NOTES.md).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::records::{records_shape, RecordOrder, RECORD_SWIGLU_CANDIDATES};
use super::{gemv_fused_tuned, gemv_int8, gemv_tuned, gpu_gemv, GemvConfig, GemvFusion, Precision, QWeight, WeightFormat};
use crate::error::Result;
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};
use crate::selftest::random_f32;

/// The shapes tried, the adapter's default first: those that won some shape in the H100 sweep,
/// more rows per lane group, which reuse each x load for more weights, and small workgroups,
/// which give matrices of few rows (4096 x 14336) more workgroups to spread over the GPU.
pub const GEMV_CANDIDATES: [GemvConfig; 11] = [
    GemvConfig { wg: 256, rows: 2, lanes: 32 },
    GemvConfig { wg: 256, rows: 1, lanes: 32 },
    GemvConfig { wg: 64, rows: 1, lanes: 32 },
    GemvConfig { wg: 64, rows: 2, lanes: 32 },
    GemvConfig { wg: 128, rows: 2, lanes: 32 },
    GemvConfig { wg: 128, rows: 4, lanes: 32 },
    GemvConfig { wg: 256, rows: 4, lanes: 32 },
    GemvConfig { wg: 128, rows: 8, lanes: 32 },
    GemvConfig { wg: 128, rows: 1, lanes: 16 },
    GemvConfig { wg: 256, rows: 2, lanes: 16 },
    GemvConfig { wg: 64, rows: 2, lanes: 4 },
];

/// Timed repetitions of each candidate; the median counts.
const REPS: usize = 7;

/// What tuning measured for one weight shape.
#[derive(Clone, Debug, Serialize)]
pub struct GemvTuning {
    pub format: String,
    pub rows: usize,
    pub cols: usize,
    /// Timed as the stacked gate/up product with the SwiGLU epilogue ([`GemvFusion::swiglu`]).
    pub swiglu: bool,
    /// Timed with 8-bit activations ([`GemvFusion::int8`]).
    pub int8: bool,
    /// Timed writing activation records ([`GemvFusion::records_out`]).
    pub records: bool,
    /// Timed reading activation records ([`GemvFusion::records_in`]).
    pub reads_records: bool,
    /// (config, median µs) for every candidate.
    pub timings: Vec<(GemvConfig, f64)>,
    pub chosen: GemvConfig,
}

fn key(format: &WeightFormat, rows: usize, cols: usize, precision: Precision, swiglu: bool, int8: bool) -> String {
    let what = if swiglu { "gemv swiglu" } else { "gemv" };
    let x = if int8 { " int8" } else { "" };
    format!("{what}{x} {} {rows}x{cols} {precision:?}", format.name())
}

fn records_key(w: &QWeight) -> String {
    key(&w.format, w.rows, w.cols, Precision::F32, true, true) + " records"
}

fn reads_records_key(w: &QWeight) -> String {
    key(&w.format, w.rows, w.cols, Precision::F32, false, true) + " records in"
}

fn pay_key(gate_up: &QWeight, down: &QWeight) -> String {
    format!("records pay: {} / {}", records_key(gate_up), reads_records_key(down))
}

/// Whether the SwiGLU epilogue of `gate_up` writing records, and `down` reading them, took less
/// time at load than the two without records (their shapes tuned each way); true where they were
/// not timed.
pub fn records_pay(ctx: &GpuContext, gate_up: &QWeight, down: &QWeight) -> bool {
    ctx.tuned(&pay_key(gate_up, down)).is_none_or(|[pay, ..]| pay == 1)
}

/// The launch shape tuning chose for `w`'s GEMV reading activation records, if tuned.
pub(super) fn measured_reading_records(ctx: &GpuContext, w: &QWeight) -> Option<GemvConfig> {
    ctx.tuned(&reads_records_key(w)).map(|[wg, rows, lanes]| GemvConfig { wg, rows, lanes })
}

/// What a weight is timed as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    /// The SwiGLU epilogue's product.
    Swiglu,
    /// The SwiGLU epilogue's product writing activation records (8-bit activations only).
    SwigluRecords,
    /// Reading activation records, added into y (8-bit activations only).
    ReadsRecords,
}

/// The launch shape tuning chose for `w`'s SwiGLU epilogue writing activation records, if tuned.
pub(super) fn measured_records(ctx: &GpuContext, w: &QWeight) -> Option<GemvConfig> {
    ctx.tuned(&records_key(w)).map(|[wg, rows, lanes]| GemvConfig { wg, rows, lanes })
}

/// The launch shape tuning chose for `w` (as the SwiGLU epilogue's product with `swiglu`, with
/// 8-bit activations with `int8`, both at F32), if it was tuned.
pub(super) fn measured(ctx: &GpuContext, w: &QWeight, precision: Precision, swiglu: bool, int8: bool) -> Option<GemvConfig> {
    ctx.tuned(&key(&w.format, w.rows, w.cols, precision, swiglu, int8)).map(|[wg, rows, lanes]| GemvConfig { wg, rows, lanes })
}

/// The candidates of a SwiGLU epilogue: each as it runs there ([`GemvConfig::paired`],
/// duplicates dropped), the GPU kernel's at most four rows a lane group.
fn swiglu_candidates() -> Vec<GemvConfig> {
    let mut all: Vec<GemvConfig> = Vec::new();
    for c in GEMV_CANDIDATES {
        let c = c.paired();
        if c.rows <= 4 && !all.contains(&c) {
            all.push(c);
        }
    }
    all
}

/// Times every candidate launch shape on each distinct (format, rows, cols) of `weights` with
/// the block kernels, and remembers the fastest in `ctx` for later [`super::gemv`] calls; each
/// of `swiglu` (stacked gate/up weights whose decode GEMV takes [`GemvFusion::swiglu`]) also as
/// that product, for [`super::gemv_fused`]. With `int8` (the decode step's 8-bit activations),
/// each weight whose decode GEMV then takes them ([`gemv_int8`], decided by the first timing) is
/// timed again that way, over the shapes the GPU kernel runs: the integer products move the
/// best shape (at 2 and 3 bits four rows a lane group win where two do with f32 activations).
/// Each (gate/up, down) pair of `records` is also timed as the epilogue writing activation
/// records and the down GEMV reading them (shapes of their own), and [`records_pay`] then says
/// whether the two took less time that way. Needs timestamp queries; on software adapters (where the shapes were measured once, see
/// [`GemvConfig::for_format`]) or without timestamps it changes nothing and returns nothing.
pub async fn tune_gemv(
    ctx: &GpuContext,
    weights: &[&QWeight],
    swiglu: &[&QWeight],
    precision: Precision,
    int8: bool,
    records: &[(&QWeight, &QWeight)],
) -> Result<Vec<GemvTuning>> {
    let caps = ctx.capabilities();
    if caps.is_software || !caps.timestamp_query {
        return Ok(Vec::new());
    }
    // Warmed once, before the first sweep: a load whose shapes are all tuned already times nothing.
    let mut warm = false;
    let mut seen = HashSet::new();
    let mut best: HashMap<String, f64> = HashMap::new();
    let mut out = Vec::new();
    let plain = weights.iter().map(|w| (*w, Role::Plain));
    let mut all: Vec<(&QWeight, Role)> = plain.chain(swiglu.iter().map(|w| (*w, Role::Swiglu))).collect();
    // The epilogues writing activation records and the GEMVs reading them (8-bit activations).
    for (g, d) in records {
        all.extend([(*g, Role::SwigluRecords), (*d, Role::ReadsRecords)]);
    }
    // The 8-bit pass after the f32 one, whose choice decides which weights take 8 bits.
    let passes = if int8 { &[false, true][..] } else { &[false][..] };
    for (&eight, &(w, role)) in passes.iter().flat_map(|e| std::iter::repeat(e).zip(&all)) {
        let epilogue = matches!(role, Role::Swiglu | Role::SwigluRecords);
        let recorded = matches!(role, Role::SwigluRecords | Role::ReadsRecords);
        // The epilogue's GEMV, and every 8-bit one, is at F32.
        let precision = if epilogue || eight { Precision::F32 } else { precision };
        let k = match role {
            Role::SwigluRecords => records_key(w),
            Role::ReadsRecords => reads_records_key(w),
            _ => key(&w.format, w.rows, w.cols, precision, epilogue, eight),
        };
        let gemv_kernel = w.format.gemv_block().is_some() || matches!(w.format, WeightFormat::Repacked(_));
        let shapes_fit = match role {
            Role::SwigluRecords => (w.rows / 2).is_multiple_of(32),
            Role::ReadsRecords => w.cols.is_multiple_of(32) && RecordOrder::of(&w.format).is_some(),
            _ => true,
        };
        if (recorded && !eight) || !shapes_fit || !gemv_kernel || (eight && !gemv_int8(ctx, w)) || ctx.tuned(&k).is_some() || !seen.insert(k.clone()) {
            continue;
        }
        let mut configs = match role {
            Role::SwigluRecords => RECORD_SWIGLU_CANDIDATES.to_vec(),
            Role::Swiglu => swiglu_candidates(),
            _ => GEMV_CANDIDATES.to_vec(),
        };
        if eight {
            configs.retain(|&c| gpu_gemv(&w.format, w.cols, Precision::F32, c));
        }
        let x = if role == Role::ReadsRecords {
            ctx.zeros("tune records", &records_shape(1, w.cols), DType::U32)?
        } else {
            ctx.upload_f32("tune x", &[1, w.cols], &random_f32(w.cols as u64, w.cols))?
        };
        let y = ctx.zeros("tune y", &[1, if epilogue { w.rows / 2 } else { w.rows }], DType::F32)?;
        let rec = if role == Role::SwigluRecords { Some(ctx.zeros("tune records", &records_shape(1, w.rows / 2), DType::U32)?) } else { None };
        // The order only moves values between words: any times the same.
        let rec = rec.as_ref().map(|r| (r, RecordOrder::Nibbles));
        let reads = role == Role::ReadsRecords;
        let fusion = GemvFusion { swiglu: epilogue, int8: eight, records_out: rec, records_in: reads, residual: reads, ..Default::default() };
        let candidates = candidates(ctx, w, &x, &y, precision, &configs, fusion).await?;
        if !warm {
            warm_up(ctx, weights.iter().chain(swiglu).max_by_key(|w| w.rows * w.cols)).await?;
            warm = true;
        }
        // Each candidate once untimed (its first run pays for caches and clocks), then REPS
        // times, all in one submission: one wait for the whole sweep of a shape rather than
        // one per candidate. Every dispatch still has its own timed pass.
        let runs: Vec<&Dispatch> = candidates.iter().flat_map(|d| std::iter::repeat_n(d, REPS + 1)).collect();
        let Some(ns) = ctx.time_dispatches(&runs).await? else { return Ok(out) };
        let timings: Vec<(GemvConfig, f64)> = configs
            .iter()
            .zip(ns.chunks_exact(REPS + 1))
            .map(|(&config, runs)| {
                let mut timed = runs[1..].to_vec();
                timed.sort_by(f64::total_cmp);
                (config, timed[timed.len() / 2] / 1e3)
            })
            .collect();
        let Some(&(chosen, us)) = timings.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else { continue };
        ctx.set_tuned(k.clone(), [chosen.wg, chosen.rows, chosen.lanes]);
        best.insert(k, us);
        let (records, reads_records) = (role == Role::SwigluRecords, reads);
        out.push(GemvTuning { format: w.format.name(), rows: w.rows, cols: w.cols, swiglu: epilogue, int8: eight, records, reads_records, timings, chosen });
    }
    // Records where the pair's two GEMVs took less time with them than without.
    for (g, d) in records {
        let int8_key = |w: &QWeight, swiglu| key(&w.format, w.rows, w.cols, Precision::F32, swiglu, true);
        let times = [records_key(g), reads_records_key(d), int8_key(g, true), int8_key(d, false)].map(|k| best.get(&k).copied());
        if let [Some(a), Some(b), Some(c), Some(e)] = times {
            ctx.set_tuned(pay_key(g, d), [u32::from(a + b < c + e), 0, 0]);
        }
    }
    Ok(out)
}

/// GPU time spent before the first sweep, and how many dispatches a round of it takes.
const WARM_NS: f64 = 250e6;
const WARM_ROUND: usize = 256;

/// Keeps the GPU busy with `w`'s GEMV for [`WARM_NS`] of its time (at most 128 rounds) before
/// anything is timed. A GPU left idle while the weights were read lowers its clocks and raises
/// them only under load: on an H200 the first sweeps after a load timed 2-3x slower than the
/// same shapes later, so the order of the sweeps, not the shapes, decided comparisons between
/// them (bench/NOTES.md, note 56).
async fn warm_up(ctx: &GpuContext, w: Option<&&QWeight>) -> Result<()> {
    let Some(w) = w else { return Ok(()) };
    let x = ctx.zeros("warm x", &[1, w.cols], DType::F32)?;
    let y = ctx.zeros("warm y", &[1, w.rows], DType::F32)?;
    let d = super::gemv(ctx, w, &x, &y, Precision::F32).await?;
    let round = vec![&d; WARM_ROUND];
    let mut spent = 0.0;
    for _ in 0..128 {
        let Some(ns) = ctx.time_dispatches(&round).await? else { return Ok(()) };
        spent += ns.iter().sum::<f64>();
        if spent >= WARM_NS {
            break;
        }
    }
    Ok(())
}

/// The dispatch of every candidate shape in `configs` for `w` (the fused GEMV where `fusion`
/// asks for the SwiGLU epilogue or 8-bit activations, else the plain one at `precision`). Each needs its own pipeline, a compile of its
/// own (naga, then the driver), so natively they are made side by side on their own threads
/// (the caller is blocked on the load anyway); the browser build has none and makes them in
/// turn.
async fn candidates(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    precision: Precision,
    configs: &[GemvConfig],
    fusion: GemvFusion<'_>,
) -> Result<Vec<Dispatch>> {
    let one = move |config: GemvConfig| async move {
        if fusion.swiglu || fusion.int8 {
            gemv_fused_tuned(ctx, w, x, y, fusion, config).await
        } else {
            gemv_tuned(ctx, w, x, y, precision, config).await
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::thread::scope(|s| {
            let made: Vec<_> = configs.iter().map(|&config| s.spawn(move || pollster::block_on(one(config)))).collect();
            made.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        })
    }
    #[cfg(target_arch = "wasm32")]
    {
        let mut made = Vec::with_capacity(configs.len());
        for &config in configs {
            made.push(one(config).await?);
        }
        Ok(made)
    }
}
