//! GEMV and GEMM throughput per weight format and shape: many dispatches recorded into one
//! compute pass after a warm-up, timed by GPU timestamps around the pass where the adapter has
//! them (else by the wall clock, which also counts recording the pass), reported as µs per call,
//! GB/s of weight bytes read and GFLOP/s, next to the device's measured copy bandwidth.
//!
//! cargo run --release --example qmatmul_bench -- [--formats Q4_K,q4_g32_sym]
//!     [--shapes 8192x8192] [--wg 256] [--rows 1] [--lanes 32] [--tokens 1] [--tt 8]
//!     [--gemm blocks|tiled|outer|matrix]
//!     [--precision f32|f16] [--seconds 0.5] [--copy-mib 256] [--rotate-mib 0] [--int8]
//!     [--constant-shape] [--as-gpu] [--json]
//!
//! Shapes are NxK (output features x reduced dimension). --tokens 1 (the default) times the
//! GEMV, more the GEMM over that many tokens. --wg, --rows and --lanes override the adapter's
//! default `GemvConfig` (or --wg, --rows, --tt the `GemmConfig` of the adapter's GEMM kernel or
//! the one --gemm names); one left out keeps the default.
//! --int8 times the GEMV with 8-bit activations (weft weights of 2, 3, 4 and 8 bits, and the GGUF types
//! where the upload repacks them: Q4_0/Q8_0 into those, Q4_1, Q5_0, Q5_1 and the K-quants into
//! their planes; rows named FORMAT+int8).
//! --constant-shape times the GEMV with its shape compiled into the pipeline, as the decode step
//! runs it (`GemvFusion::constant_shape`; rows named FORMAT+shape): no uniform is read first.
//! --as-gpu treats a CPU-emulated adapter as a GPU (GGUF types repacked at upload as GPUs hold
//! them, the GPU launch shapes), to run the GPU path's kernels where there is no GPU; its times
//! say nothing about a GPU. The table's last columns name the format the GPU holds and the
//! kernel that ran.
//!
//! --rotate-mib M uploads the weight as many times as it takes to hold M MiB (at least once)
//! and cycles the calls through those copies: a matrix that fits the GPU's last-level cache is
//! otherwise read from the cache by every call after the first, where a decode step reads each
//! matrix once from memory. Rows then carry `copies`.
//!
//! Copy bandwidth: one buffer of --copy-mib MiB (capped by the adapter's buffer limits) copied
//! into another with copy_buffer_to_buffer, many times in one submission; "copy GB/s" counts
//! the bytes read plus the bytes written (2 x size / time), the traffic a copy moves, and
//! "of copy" is the kernel's weight-read GB/s over it. --json prints one JSON object instead
//! of the table.

use std::time::Instant;

use anyhow::{anyhow, Context};
use serde::Serialize;
use weft::gpu::{BackendChoice, DType, GpuContext, GpuTensor};
use weft::ops::qmatmul::{self, GemmConfig, GemvConfig, Precision, WeightFormat};

#[path = "common/args.rs"]
mod args;
use args::arg;

const DEFAULT_FORMATS: &str = "F32,F16,Q4_0,Q4_1,Q8_0,Q4_K,Q5_K,Q6_K,q4_g32_sym,q4_g128_asym,q8_g32_sym,q3_g64_sym,\
                               q2_g64_asym";
const DEFAULT_SHAPES: &str = "4096x4096,8192x8192,1536x576,576x1536,49152x576";

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Config {
    Gemv(GemvConfig),
    Gemm(GemmConfig),
}

#[derive(Serialize)]
struct Row {
    format: String,
    n: usize,
    k: usize,
    tokens: usize,
    weight_bytes: u64,
    /// GPU time per call from timestamps around the pass where the adapter has them, else
    /// `wall_us_per_call`.
    us_per_call: f64,
    /// Wall-clock time per call: recording and submitting the pass, then waiting for it.
    wall_us_per_call: f64,
    gb_per_s: f64,
    gflop_per_s: f64,
    fraction_of_copy: f64,
    config: Config,
    /// Distinct copies of the weight the calls cycle through (--rotate-mib).
    copies: usize,
    /// The format the GPU holds (a GGUF type may be repacked at upload) and the kernel's
    /// pipeline label.
    held: String,
    kernel: String,
}

#[derive(Serialize)]
struct Copy {
    bytes: u64,
    us_per_copy: f64,
    /// Bytes read plus bytes written per second.
    read_write_gb_per_s: f64,
}

#[derive(Serialize)]
struct Report {
    adapter: String,
    backend: String,
    device_type: String,
    subgroup_min_size: u32,
    precision: Precision,
    copy: Copy,
    rows: Vec<Row>,
    skipped: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let formats = arg(&args, "--formats", DEFAULT_FORMATS);
    let shapes = arg(&args, "--shapes", DEFAULT_SHAPES);
    let opt = |name: &str| -> anyhow::Result<Option<u32>> {
        Ok(match arg(&args, name, "").as_str() {
            "" => None,
            v => Some(v.parse()?),
        })
    };
    let (wg, rows, tt, lanes) = (opt("--wg")?, opt("--rows")?, opt("--tt")?, opt("--lanes")?);
    let tokens = opt("--tokens")?.unwrap_or(1).max(1) as usize;
    let gemm_kernel = arg(&args, "--gemm", "");
    let copy_mib = opt("--copy-mib")?.unwrap_or(256).max(1) as u64;
    let rotate_bytes = opt("--rotate-mib")?.unwrap_or(0) as u64 * (1 << 20);
    let json = args.iter().any(|a| a == "--json");
    let int8 = args.iter().any(|a| a == "--int8");
    let constant_shape = args.iter().any(|a| a == "--constant-shape");
    let precision = match arg(&args, "--precision", "f32").as_str() {
        "f32" => Precision::F32,
        "f16" => Precision::F16,
        other => return Err(anyhow!("precision '{other}' is not f32 or f16")),
    };
    let seconds: f64 = arg(&args, "--seconds", "0.5").parse()?;
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    if args.iter().any(|a| a == "--as-gpu") {
        let mut c = ctx.capabilities().clone();
        c.is_software = false;
        ctx.set_capabilities(c);
    }
    let caps = ctx.capabilities().clone();
    let copy = copy_bandwidth(&ctx, copy_mib << 20, seconds)?;
    if !json {
        println!(
            "adapter: {} ({}, {}), shader-f16 {}, subgroups {} (min size {}), matrix units {}, {precision:?}",
            caps.adapter_name, caps.backend, caps.device_type, caps.shader_f16, caps.subgroups, caps.subgroup_min_size, caps.matrix_f16
        );
        println!(
            "copy: {:.1} MiB in {:.1} us: {:.2} GB/s read+write (2 x bytes / time)",
            copy.bytes as f64 / (1 << 20) as f64,
            copy.us_per_copy,
            copy.read_write_gb_per_s
        );
        println!(
            "{:<14} {:>12} {:>9} {:>10} {:>9} {:>8} {:>9}  config  held kernel",
            "format", "N x K", "MB", "us/call", "GB/s", "of copy", "GFLOP/s"
        );
    }
    let mut report = Report {
        adapter: caps.adapter_name.clone(),
        backend: caps.backend.clone(),
        device_type: caps.device_type.clone(),
        subgroup_min_size: caps.subgroup_min_size,
        precision,
        copy,
        rows: Vec::new(),
        skipped: Vec::new(),
    };
    for shape in shapes.split(',') {
        let (n, k) = shape.split_once('x').ok_or_else(|| anyhow!("shape '{shape}' is not NxK"))?;
        let (n, k): (usize, usize) = (n.parse()?, k.parse()?);
        for name in formats.split(',') {
            let format = WeightFormat::parse(name).ok_or_else(|| anyhow!("unknown format '{name}'"))?;
            let config = if tokens == 1 {
                let d = GemvConfig::for_adapter(&caps, &format);
                Config::Gemv(GemvConfig {
                    wg: wg.unwrap_or(d.wg),
                    rows: rows.unwrap_or(d.rows),
                    lanes: lanes.unwrap_or(d.lanes),
                })
            } else {
                let d = match gemm_kernel.as_str() {
                    "" => GemmConfig::for_adapter(&caps, &format),
                    "blocks" => GemmConfig::for_format(&format),
                    "tiled" => qmatmul::GEMM_TILED,
                    "outer" => GemmConfig::outer(tt.unwrap_or(qmatmul::GEMM_OUTER.tokens)),
                    // The matrix units take f16 operands: run with --precision f16.
                    "matrix" => GemmConfig::matrix(rows.unwrap_or(qmatmul::GEMM_MATRIX.rows), tt.unwrap_or(qmatmul::GEMM_MATRIX.tokens)),
                    other => return Err(anyhow!("--gemm '{other}' is not blocks, tiled, outer or matrix")),
                };
                // For --gemm outer, --tt sets the tile's tokens and with them the workgroup.
                Config::Gemm(GemmConfig {
                    wg: wg.unwrap_or(d.wg),
                    rows: rows.unwrap_or(d.rows),
                    tokens: tt.unwrap_or(d.tokens),
                    ..d
                })
            };
            let name = format!("{name}{}{}", if int8 { "+int8" } else { "" }, if constant_shape { "+shape" } else { "" });
            let fusion = qmatmul::GemvFusion { int8, constant_shape, ..Default::default() };
            match bench(&ctx, format, n, k, tokens, config, precision, fusion, seconds, rotate_bytes) {
                Ok((bytes, secs, wall, held, kernel, copies)) => {
                    let gb = bytes as f64 / secs / 1e9;
                    let row = Row {
                        format: name.clone(),
                        n,
                        k,
                        tokens,
                        weight_bytes: bytes,
                        us_per_call: secs * 1e6,
                        wall_us_per_call: wall * 1e6,
                        gb_per_s: gb,
                        gflop_per_s: 2.0 * (n * k * tokens) as f64 / secs / 1e9,
                        fraction_of_copy: gb / report.copy.read_write_gb_per_s,
                        config,
                        copies,
                        held,
                        kernel,
                    };
                    if !json {
                        println!(
                            "{:<14} {:>12} {:>9.1} {:>10.1} {:>9.2} {:>8.3} {:>9.2}  {config:?}  {} {}",
                            row.format,
                            format!("{n}x{k}"),
                            bytes as f64 / 1e6,
                            row.us_per_call,
                            row.gb_per_s,
                            row.fraction_of_copy,
                            row.gflop_per_s,
                            row.held,
                            row.kernel,
                        );
                    }
                    report.rows.push(row);
                }
                Err(e) => {
                    let line = format!("{name} {n}x{k}: {e:#}");
                    if !json {
                        println!("{name:<14} {:>12} skipped: {e:#}", format!("{n}x{k}"));
                    }
                    report.skipped.push(line);
                }
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    Ok(())
}

/// Waits for everything submitted so far: the queue runs in order, so mapping a small tensor
/// written last returns after the work before it.
fn finish(ctx: &GpuContext, marker: &GpuTensor) -> anyhow::Result<()> {
    pollster::block_on(ctx.read_f32(marker)).context("waiting for the GPU")?;
    Ok(())
}

/// Times copies of a `bytes` buffer (capped by the adapter's limits) into another.
fn copy_bandwidth(ctx: &GpuContext, bytes: u64, seconds: f64) -> anyhow::Result<Copy> {
    let limits = &ctx.capabilities().limits;
    let bytes = bytes.min(limits.max_buffer_size).min(limits.max_storage_buffer_binding_size) / 4 * 4;
    let words = (bytes / 4) as usize;
    let src = ctx.upload_u32("copy src", &[words], &vec![0x3f80_0000; words])?;
    let dst = ctx.zeros("copy dst", &[words], DType::U32)?;
    let marker = ctx.zeros("copy marker", &[4], DType::F32)?;
    let time = |reps: usize| -> anyhow::Result<f64> {
        let start = Instant::now();
        ctx.copy_repeated(&src, &dst, reps)?;
        finish(ctx, &marker)?;
        Ok(start.elapsed().as_secs_f64())
    };
    time(1)?; // warm-up: first touch of both buffers
    let once = time(2)? / 2.0;
    let reps = ((seconds / once.max(1e-7)) as usize).clamp(4, 10_000);
    let per = time(reps)? / reps as f64;
    Ok(Copy { bytes, us_per_copy: per * 1e6, read_write_gb_per_s: 2.0 * bytes as f64 / per / 1e9 })
}

/// Returns the weight bytes read per call, seconds per call (GPU timestamps where the adapter
/// has them, else the wall clock), wall-clock seconds per call, the format held, the kernel
/// and the number of weight copies the calls cycle through.
#[allow(clippy::too_many_arguments)]
fn bench(
    ctx: &GpuContext,
    format: WeightFormat,
    n: usize,
    k: usize,
    tokens: usize,
    config: Config,
    precision: Precision,
    fusion: qmatmul::GemvFusion<'static>,
    seconds: f64,
    rotate_bytes: u64,
) -> anyhow::Result<(u64, f64, f64, String, String, usize)> {
    let tw = qmatmul::test_weight(format, 1, n, k)?;
    let first = tw.upload(ctx, "bench weight")?;
    // The same values in distinct buffers: what the cache holds is addresses, not contents.
    let copies = rotate_bytes.div_ceil(first.bytes().max(1)).max(1) as usize;
    let mut weights = vec![first];
    for _ in 1..copies {
        weights.push(tw.upload(ctx, "bench weight")?);
    }
    let x = ctx.upload_f32("bench x", &[tokens, k], &weft::selftest::random_f32(2, tokens * k))?;
    let y = ctx.zeros("bench y", &[tokens, n], DType::F32)?;
    let mut calls = Vec::with_capacity(copies);
    for w in &weights {
        calls.push(match config {
            // 8-bit activations or the shape as constants: the fused GEMV (f32 arithmetic).
            Config::Gemv(c) if fusion.int8 || fusion.constant_shape => pollster::block_on(qmatmul::gemv_fused_tuned(ctx, w, &x, &y, fusion, c))?,
            Config::Gemv(c) => pollster::block_on(qmatmul::gemv_tuned(ctx, w, &x, &y, precision, c))?,
            Config::Gemm(c) => pollster::block_on(qmatmul::gemm_tuned(ctx, w, &x, &y, precision, c))?,
        });
    }
    let (w, d) = (&weights[0], &calls[0]);
    let marker = ctx.zeros("bench marker", &[4], DType::F32)?;
    let time = |reps: usize| -> anyhow::Result<f64> {
        let list: Vec<_> = calls.iter().cycle().take(reps).collect();
        let start = Instant::now();
        ctx.run(&list);
        finish(ctx, &marker)?;
        Ok(start.elapsed().as_secs_f64())
    };
    time(copies)?; // warm-up: pipeline, first touch of the buffers
    let once = time(2 * copies)? / (2 * copies) as f64;
    let reps = ((seconds / once.max(1e-7)) as usize).clamp(3 * copies, 20_000);
    let wall = time(reps)? / reps as f64;
    // The GPU's own time of the same calls where the adapter has timestamps: the wall clock
    // also counts recording the pass, which distinct bind groups (--rotate-mib) make dearer.
    let list: Vec<_> = calls.iter().cycle().take(reps).collect();
    let gpu = pollster::block_on(ctx.time_pass(&list))?.map(|ns| ns * 1e-9 / reps as f64);
    Ok((w.bytes(), gpu.unwrap_or(wall), wall, w.format.name(), d.name().to_string(), copies))
}
