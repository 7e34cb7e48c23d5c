//! Decode attention (the RoPE + KV store + split attention kernel a decode step runs) per head
//! layout, context length and chunk: many dispatches recorded into one compute pass, timed by
//! GPU timestamps around the pass where the adapter has them (else the wall clock), reported
//! as µs per call. The calls depend on each other through the caches, so they run one after
//! another as a decode step's layers do; a call's time includes the gap between dependent
//! dispatches, which `floor` (the kernel at a context of one position) shows.
//!
//! cargo run --release --example attention_bench -- [--heads 9/3/64,32/4/64,32/8/128]
//!     [--contexts 1,128,192,256,1024,4096] [--chunks 64,128,256] [--reps 400] [--rotate-mib 0] [--max-seq 0]
//!
//! --rotate-mib M cycles the calls through distinct caches holding M MiB in all (at least one),
//! so that a call reads its K/V rows from memory, as a decode step's layers do after the
//! weights between them have passed through the GPU's cache.
//!
//! A head layout is n_heads/n_kv_heads/head_dim. The cache holds max(context, 256) + 1
//! positions (a decode bench of prompt 128 + 128 holds 257), or --max-seq N (at least the
//! context), and the step's position is context - 1, so the kernel attends to `context`
//! positions.

use std::time::Instant;

use anyhow::Context;
use weft::gpu::{BackendChoice, DType, GpuContext};
use weft::ops::attention::{attention_rope_split, decode_chunk, partials_shape, AttentionMask, AttentionShape, SPLIT_CHUNK};
use weft::ops::kv::KvFormat;
use weft::ops::rope::{rope_table, step_bytes, RopeScaling, RopeShape, RopeStyle};
use weft::selftest::random_f32;

#[path = "common/args.rs"]
mod args;
use args::arg;

fn list(s: &str) -> anyhow::Result<Vec<usize>> {
    s.split(',').map(|v| v.trim().parse::<usize>().with_context(|| format!("not a number: {v}"))).collect()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let heads = arg(&args, "--heads", "9/3/64,32/4/64,32/8/128");
    let contexts = list(&arg(&args, "--contexts", "1,128,192,256,1024,4096"))?;
    let chunks = list(&arg(&args, "--chunks", "64,128,256"))?;
    let reps: usize = arg(&args, "--reps", "400").parse()?;
    let rotate_bytes = arg(&args, "--rotate-mib", "0").parse::<u64>()? << 20;
    let max_seq_arg: usize = arg(&args, "--max-seq", "0").parse()?;
    let ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    println!("adapter {}", ctx.capabilities().adapter_name);
    println!("{:<12} {:>8} {:>6} {:>8} {:>10} {:>10}", "heads", "context", "chunk", "default", "us/call", "wall us");
    for layout in heads.split(',') {
        let h = list(&layout.replace('/', ","))?;
        let [n_heads, n_kv_heads, head_dim] = h[..] else { anyhow::bail!("a head layout is n_heads/n_kv_heads/head_dim: {layout}") };
        for &context in &contexts {
            let max_seq = if max_seq_arg > 0 { max_seq_arg.max(context) } else { context.max(256) + 1 };
            for &chunk in &chunks {
                let (gpu, wall) = time(&ctx, [n_heads, n_kv_heads, head_dim], max_seq, context, chunk, reps, rotate_bytes)?;
                let default = if decode_chunk(head_dim) == chunk { "yes" } else { "" };
                println!("{layout:<12} {context:>8} {chunk:>6} {default:>8} {:>10.2} {:>10.2}", gpu.unwrap_or(f64::NAN), wall);
            }
        }
    }
    Ok(())
}

/// µs per call from GPU timestamps (None without them) and from the wall clock.
#[allow(clippy::too_many_arguments)]
fn time(
    ctx: &GpuContext,
    [n_heads, n_kv_heads, head_dim]: [usize; 3],
    max_seq: usize,
    context: usize,
    chunk: usize,
    reps: usize,
    rotate_bytes: u64,
) -> anyhow::Result<(Option<f64>, f64)> {
    let rs = RopeShape { n_tokens: 1, n_heads, n_kv_heads, head_dim, max_seq, rot_dims: head_dim, style: RopeStyle::Neox, kv: KvFormat::F32, sinks: 0 };
    let s = AttentionShape { n_tokens: 1, n_heads, n_kv_heads, head_dim, max_seq, kv: KvFormat::F32 };
    let qkv = ctx.upload_f32("qkv", &[1, n_heads + 2 * n_kv_heads, head_dim], &random_f32(1, (n_heads + 2 * n_kv_heads) * head_dim))?;
    let table = ctx.upload_f32("rope", &[max_seq, head_dim / 2, 2], &rope_table(max_seq, head_dim, 10000.0, &RopeScaling::None))?;
    let step = ctx.uniform_block("step", 16);
    ctx.write_uniform(&step, &step_bytes((context - 1) as u32, 1));
    let cache = [n_kv_heads, max_seq, head_dim];
    let cache_bytes = 2 * 4 * (n_kv_heads * max_seq * head_dim) as u64;
    // Distinct caches, one a call in turn, as a step's layers each read their own: with enough
    // of them no call finds the last one's K/V rows in the GPU's cache.
    let copies = rotate_bytes.div_ceil(cache_bytes).max(1) as usize;
    let mut caches = Vec::with_capacity(copies);
    for c in 0..copies as u64 {
        let kc = ctx.upload_f32("k cache", &cache, &random_f32(2 + 2 * c, n_kv_heads * max_seq * head_dim))?;
        let vc = ctx.upload_f32("v cache", &cache, &random_f32(3 + 2 * c, n_kv_heads * max_seq * head_dim))?;
        caches.push((kc, vc));
    }
    let partials = ctx.zeros("partials", &partials_shape(&s, SPLIT_CHUNK), DType::F32)?;
    let arrivals = ctx.zeros("arrivals", &[n_heads], DType::U32)?;
    let out = ctx.zeros("out", &[1, n_heads, head_dim], DType::F32)?;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut each = Vec::with_capacity(copies);
    for (kc, vc) in &caches {
        each.push(pollster::block_on(attention_rope_split(
            ctx,
            rs,
            AttentionMask::default(),
            &qkv,
            [kc, vc],
            &table,
            [&partials, &arrivals],
            &out,
            scale,
            &step,
            chunk,
        ))?);
    }
    let calls: Vec<_> = each.iter().cycle().take(reps.max(copies)).collect();
    let run = || -> anyhow::Result<f64> {
        let start = Instant::now();
        ctx.run(&calls);
        pollster::block_on(ctx.read_f32(&out)).context("waiting for the GPU")?;
        Ok(start.elapsed().as_secs_f64())
    };
    let reps = calls.len();
    run()?; // warm-up: the pipeline, first touch of the buffers, the clocks
    run()?;
    let wall = run()? / reps as f64 * 1e6;
    let gpu = pollster::block_on(ctx.time_pass(&calls))?.map(|ns| ns * 1e-3 / reps as f64);
    Ok((gpu, wall))
}
