//! The JavaScript facade: the only module that speaks wasm-bindgen. Errors cross as `JsError`.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::gpu::{BackendChoice, Capabilities, GpuContext};

mod error;
mod model;

thread_local! {
    static CONTEXT: RefCell<Option<Rc<GpuContext>>> = const { RefCell::new(None) };
}

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The shared device, created on first use.
async fn context() -> Result<Rc<GpuContext>, JsError> {
    Ok(shared_context().await?)
}

/// The shared device; a lost one is replaced, so a model can be loaded again after a loss.
pub(crate) async fn shared_context() -> crate::Result<Rc<GpuContext>> {
    if let Some(ctx) = CONTEXT.with(|c| c.borrow().clone()) {
        if ctx.lost_reason().is_none() {
            return Ok(ctx);
        }
    }
    let mut ctx = GpuContext::new(BackendChoice::Auto).await?;
    let caps = web_adapter_info(ctx.capabilities().clone()).await;
    ctx.set_capabilities(caps);
    let ctx = Rc::new(ctx);
    CONTEXT.with(|c| *c.borrow_mut() = Some(ctx.clone()));
    Ok(ctx)
}

/// wgpu maps only the description from `GPUAdapterInfo`; vendor and architecture come from the
/// browser directly. A failure here only leaves those fields empty.
async fn web_adapter_info(caps: Capabilities) -> Capabilities {
    async fn read() -> Result<(String, String, bool), JsValue> {
        let global = js_sys::global();
        let navigator = js_sys::Reflect::get(&global, &"navigator".into())?;
        let gpu = js_sys::Reflect::get(&navigator, &"gpu".into())?;
        let request: js_sys::Function =
            js_sys::Reflect::get(&gpu, &"requestAdapter".into())?.dyn_into()?;
        let promise: js_sys::Promise = request.call0(&gpu)?.dyn_into()?;
        let adapter = wasm_bindgen_futures::JsFuture::from(promise).await?;
        let info = js_sys::Reflect::get(&adapter, &"info".into())?;
        let text = |key: &str| {
            js_sys::Reflect::get(&info, &key.into()).ok().and_then(|v| v.as_string()).unwrap_or_default()
        };
        let fallback = js_sys::Reflect::get(&info, &"isFallbackAdapter".into())
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        Ok((text("vendor"), text("architecture"), fallback))
    }
    match read().await {
        Ok((vendor, architecture, fallback)) => caps.with_web_info(vendor, architecture, fallback),
        Err(_) => caps,
    }
}

/// Adapter identity, features and limits, as a plain object.
#[wasm_bindgen]
pub async fn capabilities() -> Result<JsValue, JsError> {
    let ctx = context().await?;
    Ok(serde_wasm_bindgen::to_value(ctx.capabilities())?)
}

/// Multiplies `a` [m, k] by `b` [k, n] with the GPU's tiled matmul and returns the f32 result,
/// so a caller can check it against its own reference.
#[wasm_bindgen(js_name = gpuMatmul)]
pub async fn gpu_matmul(
    a: Vec<f32>,
    b: Vec<f32>,
    m: usize,
    k: usize,
    n: usize,
) -> Result<Vec<f32>, JsError> {
    let ctx = context().await?;
    Ok(crate::selftest::gpu_matmul(&ctx, &a, &b, m, k, n).await?)
}

/// Runs the kernel self-test (seeded random matmul vs the f64 CPU reference) and reports the
/// deviation and whether it is within the named tolerance.
#[wasm_bindgen(js_name = selfTest)]
pub async fn self_test(seed: u32, m: usize, k: usize, n: usize) -> Result<JsValue, JsError> {
    let ctx = context().await?;
    let report = crate::selftest::run(&ctx, seed as u64, m, k, n).await?;
    Ok(serde_wasm_bindgen::to_value(&report)?)
}

/// Decodes seeded random data of one storage type (`F16`, `Q4_K`, `gguf:BF16`, ...) with the CPU
/// reference and with the GPU kernel in this page, and reports the elements whose f32 bits differ.
#[wasm_bindgen(js_name = dequantSelfTest)]
pub async fn dequant_self_test(
    type_name: String,
    seed: u32,
    elements: u32,
) -> Result<JsValue, JsError> {
    let ty = crate::ops::dequant::storage_type_from_name(&type_name)
        .ok_or_else(|| JsError::new(&format!("unknown storage type '{type_name}'")))?;
    let ctx = context().await?;
    let report =
        crate::ops::dequant::self_test(&ctx, ty, seed as u64, elements as usize).await?;
    Ok(serde_wasm_bindgen::to_value(&report)?)
}

/// Runs the quantized GEMV, GEMM (f32, and f16 where the adapter has it) and embedding lookup on
/// seeded weights of one format (`Q4_K`, `F16`, `q3_g64_asym`, ...) with W [n, k] and t tokens,
/// against the f64 CPU reference; each kernel's report has its max error and tolerance.
#[wasm_bindgen(js_name = qmatmulSelfTest)]
pub async fn qmatmul_self_test(
    format: String,
    seed: u32,
    n: usize,
    k: usize,
    t: usize,
) -> Result<JsValue, JsError> {
    let format = crate::ops::qmatmul::WeightFormat::parse(&format)
        .ok_or_else(|| JsError::new(&format!("unknown weight format '{format}'")))?;
    let ctx = context().await?;
    let report = crate::ops::qmatmul::self_test(&ctx, format, seed as u64, n, k, t).await?;
    Ok(serde_wasm_bindgen::to_value(&report)?)
}
