//! Which backend runs a model in the page: `init({ backend })` (or `loadModel`'s `backend`
//! option) picks `webgpu`, `cpu` or `auto`; `Engine` is a loaded model on either.
//!
//! The `auto` rule reads the adapter's info: a software adapter (`Capabilities::is_software`:
//! SwiftShader, llvmpipe, lavapipe, WARP by name, or the browser's fallback adapter) or no
//! adapter at all means the CPU backend. On SmolLM2-135M Q4_1 in headless Chromium on two
//! cores, WebGPU on SwiftShader decodes at about 1 token/s where the CPU backend's SIMD128
//! kernels decode at tens (README, "Choosing a backend").

use std::cell::Cell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use super::error::js_error;
use crate::cpu::{Arithmetic, CpuLlama};
use crate::gpu::GpuContext;
use crate::model::graph::Checkpoint;
use crate::model::Llama;
use crate::ops::kv::KvFormat;
use crate::ops::sample::SampleParams;
use crate::Result;

/// What the page asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    Auto,
    WebGpu,
    Cpu,
}

impl Choice {
    pub const NAMES: &'static str = "'auto', 'webgpu' or 'cpu'";

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Choice::Auto),
            "webgpu" => Some(Choice::WebGpu),
            "cpu" => Some(Choice::Cpu),
            _ => None,
        }
    }
}

thread_local! {
    static CHOICE: Cell<Choice> = const { Cell::new(Choice::Auto) };
}

/// The backend `init()` chose, the default of every later load.
pub(crate) fn chosen() -> Choice {
    CHOICE.with(Cell::get)
}

/// `backend` of `init()`: "auto" (default), "webgpu" or "cpu".
#[wasm_bindgen(js_name = configureBackend)]
pub fn configure_backend(name: String) -> Result<(), JsValue> {
    let choice = Choice::parse(&name).ok_or_else(|| {
        js_error("INVALID_ARGUMENT", &format!("option 'backend' is '{name}'; use {}", Choice::NAMES))
    })?;
    CHOICE.with(|c| c.set(choice));
    Ok(())
}

/// Threads a CPU pass has now: this thread and the pool's workers that have joined (1 in the
/// single-thread build).
#[wasm_bindgen(js_name = cpuThreads)]
pub fn cpu_threads() -> usize {
    crate::cpu::threads::available()
}

/// The body of one pool worker (threaded build): joins the pool and runs passes' shares until
/// the worker is terminated. Never returns.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = cpuWorker)]
pub fn cpu_worker() {
    crate::cpu::threads::work()
}

/// Whether the thread running the model may block in `Atomics.wait` (a worker may, a page's
/// main thread may not): passes then sleep instead of spinning while they wait for the pool.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = cpuMayBlock)]
pub fn cpu_may_block(may: bool) {
    crate::cpu::threads::set_caller_may_block(may)
}

/// The compiled module and its shared memory, for the pool's workers to instantiate the same
/// module on the same memory (threaded build).
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = sharedModule)]
pub fn shared_module() -> js_sys::Array {
    [wasm_bindgen::module(), wasm_bindgen::memory()].into_iter().collect()
}

/// Where a model goes: the shared GPU device, or the CPU (with why, for `auto`).
pub(crate) enum Target {
    Gpu(Rc<GpuContext>),
    Cpu,
}

/// Resolves `choice`: `webgpu` fails without a usable adapter (UNSUPPORTED); `auto` takes the
/// GPU only when it is a real one; `cpu` never asks for an adapter.
pub(crate) async fn resolve(choice: Choice) -> Result<Target> {
    match choice {
        Choice::Cpu => Ok(Target::Cpu),
        Choice::WebGpu => Ok(Target::Gpu(super::shared_context().await?)),
        Choice::Auto => match super::shared_context().await {
            Ok(ctx) if !ctx.capabilities().is_software => Ok(Target::Gpu(ctx)),
            _ => Ok(Target::Cpu),
        },
    }
}

/// A loaded model on one backend: the calls the web API makes, in one place.
pub(crate) enum Engine {
    Gpu { ctx: Rc<GpuContext>, llama: Box<Llama> },
    Cpu(Box<CpuLlama>),
}

impl Engine {
    pub fn name(&self) -> &'static str {
        match self {
            Engine::Gpu { .. } => "webgpu",
            Engine::Cpu(_) => "cpu",
        }
    }

    pub fn vocab(&self) -> usize {
        match self {
            Engine::Gpu { llama, .. } => llama.config.vocab,
            Engine::Cpu(c) => c.config.vocab,
        }
    }

    pub fn max_seq(&self) -> usize {
        match self {
            Engine::Gpu { llama, .. } => llama.options.max_seq,
            Engine::Cpu(c) => c.options.max_seq,
        }
    }

    /// Why the device was lost; never for the CPU.
    pub fn lost_reason(&self) -> Option<String> {
        match self {
            Engine::Gpu { ctx, .. } => ctx.lost_reason(),
            Engine::Cpu(_) => None,
        }
    }

    pub fn reset(&mut self) {
        match self {
            Engine::Gpu { llama, .. } => llama.reset(),
            Engine::Cpu(c) => c.reset(),
        }
    }

    pub fn truncate(&mut self, len: usize) -> bool {
        match self {
            Engine::Gpu { llama, .. } => llama.truncate(len),
            Engine::Cpu(c) => c.truncate(len),
        }
    }

    pub fn set_sampling(&mut self, params: &SampleParams) {
        match self {
            Engine::Gpu { ctx, llama } => llama.set_sampling(ctx, params),
            Engine::Cpu(c) => c.set_sampling(params),
        }
    }

    pub async fn prefill(&mut self, ids: &[u32]) -> Result<u32> {
        match self {
            Engine::Gpu { ctx, llama } => llama.prefill(ctx, ids).await,
            Engine::Cpu(c) => c.prefill(ids),
        }
    }

    pub async fn step(&mut self) -> Result<u32> {
        match self {
            Engine::Gpu { ctx, llama } => llama.step(ctx).await,
            Engine::Cpu(c) => c.step(),
        }
    }

    pub async fn checkpoints(&mut self, ids: &[u32]) -> Result<Vec<Checkpoint>> {
        match self {
            Engine::Gpu { ctx, llama } => llama.checkpoints(ctx, ids).await,
            Engine::Cpu(c) => {
                // Checkpoints are compared with f32 references (PyTorch, the GPU): they take
                // the CPU's f32 arithmetic, whatever the model generates with.
                let arithmetic = std::mem::replace(&mut c.options.arithmetic, Arithmetic::F32);
                let got = c.checkpoints(ids);
                c.options.arithmetic = arithmetic;
                got
            }
        }
    }

    /// Bytes the model holds on its device: GPU memory, or wasm memory for the CPU.
    pub fn bytes(&self) -> u64 {
        match self {
            Engine::Gpu { llama, .. } => llama.gpu_bytes(),
            Engine::Cpu(c) => c.bytes(),
        }
    }

    /// The KV cache's format and the bytes it holds (`max_seq` positions).
    pub fn kv_cache(&self) -> (KvFormat, u64) {
        match self {
            Engine::Gpu { llama, .. } => (llama.options.kv, llama.kv_bytes_per_token() * llama.options.max_seq as u64),
            Engine::Cpu(c) => (c.options.kv, c.kv_bytes()),
        }
    }

    pub fn weight_bytes(&self) -> u64 {
        match self {
            Engine::Gpu { llama, .. } => llama.weights.bytes(),
            Engine::Cpu(c) => c.weights.bytes(),
        }
    }

    /// Destroys the GPU device (a test of recovery); the CPU has none to lose.
    pub fn destroy_device(&self) {
        if let Engine::Gpu { ctx, .. } = self {
            ctx.destroy_device();
        }
    }

    /// Checks the device after a load.
    pub fn check(&self) -> Result<()> {
        match self {
            Engine::Gpu { ctx, .. } => ctx.check(),
            Engine::Cpu(_) => Ok(()),
        }
    }
}
