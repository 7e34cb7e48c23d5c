//! The one GPU device the tests of a test binary share (lavapipe in CI; `WEFT_BACKEND` picks).

use std::sync::OnceLock;

use weft::gpu::{BackendChoice, GpuContext};

/// A context of its own whose adapter counts as a hardware GPU, so the kernels and fusions
/// chosen only there (the GPU GEMV kernel with DP4 and its epilogues) run on CI's software
/// adapters. Not every test binary that shares this module uses it.
#[allow(dead_code)]
pub fn gpu_kernel_ctx() -> anyhow::Result<GpuContext> {
    let mut ctx = pollster::block_on(GpuContext::new(BackendChoice::from_env()?))?;
    let mut caps = ctx.capabilities().clone();
    caps.is_software = false;
    ctx.set_capabilities(caps);
    Ok(ctx)
}

// Binaries that only build their own contexts (gpu_kernel_ctx) leave this one unused.
#[allow(dead_code)]
pub fn ctx() -> &'static GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| {
        let choice = BackendChoice::from_env().expect("WEFT_BACKEND");
        pollster::block_on(GpuContext::new(choice)).expect("a GPU adapter (lavapipe in CI)")
    })
}
