//! A kernel self-test any user can run (CLI `weft selftest`, JS `selfTest()`): the tiled matmul on
//! seeded random data against the f64 CPU reference.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde::Serialize;

use crate::error::Result;
use crate::gpu::GpuContext;
use crate::ops::{matmul, Deviation};

/// Uniform values in [-1, 1) from a seeded generator, so every run and target sees the same data.
pub fn random_f32(seed: u64, len: usize) -> Vec<f32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelfTestReport {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub seed: u64,
    pub deviation: Deviation,
    pub tolerance_abs: f64,
    pub tolerance_rel: f64,
    pub passed: bool,
}

/// Multiplies `a` [m, k] by `b` [k, n] on the GPU and returns the f32 result.
pub async fn gpu_matmul(
    ctx: &GpuContext,
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
) -> Result<Vec<f32>> {
    let ta = ctx.upload_f32("selftest a", &[m, k], a)?;
    let tb = ctx.upload_f32("selftest b", &[k, n], b)?;
    let tc = ctx.zeros("selftest c", &[m, n], crate::gpu::DType::F32)?;
    let d = matmul::matmul(ctx, &ta, &tb, &tc).await?;
    ctx.run(&[&d]);
    ctx.read_f32(&tc).await
}

/// Runs the matmul self-test with shape [m, k] · [k, n] (ragged sizes welcome).
pub async fn run(ctx: &GpuContext, seed: u64, m: usize, k: usize, n: usize) -> Result<SelfTestReport> {
    let a = random_f32(seed, m * k);
    let b = random_f32(seed.wrapping_add(1), k * n);
    let got = gpu_matmul(ctx, &a, &b, m, k, n).await?;
    let want = matmul::matmul_cpu(&a, &b, m, k, n);
    let tol = matmul::matmul_tolerance(k);
    let deviation = tol.compare(&got, &want);
    Ok(SelfTestReport {
        m,
        k,
        n,
        seed,
        deviation,
        tolerance_abs: tol.abs,
        tolerance_rel: tol.rel,
        passed: deviation.within,
    })
}
