//! The JavaScript facade: the only module that speaks wasm-bindgen. Errors cross as `JsError`.

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::gpu::{BackendChoice, Capabilities, GpuContext};

mod backend;
mod device;
mod embed;
mod error;
mod model;
mod options;
mod storage;

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
    if let Some(e) = device::missing_webgpu() {
        return Err(e);
    }
    device::take_subgroups_granted();
    let mut ctx = GpuContext::with_options(BackendChoice::Auto, device::options()).await?;
    let subgroups = device::take_subgroups_granted();
    let mut caps = web_adapter_info(ctx.capabilities().clone(), subgroups).await;
    // The browser's adapter info may name a software adapter that wgpu's did not.
    caps.is_software &= !device::options().gpu_paths;
    ctx.set_capabilities(caps);
    let ctx = Rc::new(ctx);
    CONTEXT.with(|c| *c.borrow_mut() = Some(ctx.clone()));
    Ok(ctx)
}

/// wgpu maps only the description from `GPUAdapterInfo`; vendor and architecture come from the
/// browser directly. A failure here only leaves those fields empty.
async fn web_adapter_info(caps: Capabilities, subgroups: bool) -> Capabilities {
    async fn read() -> Result<(String, String, bool, u32), JsValue> {
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
        let min_subgroup = js_sys::Reflect::get(&info, &"subgroupMinSize".into())
            .ok()
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0) as u32;
        Ok((text("vendor"), text("architecture"), fallback, min_subgroup))
    }
    match read().await {
        Ok((vendor, architecture, fallback, min_subgroup)) => {
            let caps = caps.with_web_info(vendor, architecture, fallback);
            if subgroups { caps.with_web_subgroups(min_subgroup) } else { caps }
        }
        Err(_) => caps,
    }
}

/// Adapter identity, features and limits, as a plain object with `webgpu: true`; where there is
/// no usable WebGPU, `{ webgpu: false, code, reason }`. It never rejects: it reports what is there.
#[wasm_bindgen]
pub async fn capabilities() -> JsValue {
    let unavailable = |code: &str, reason: &str| {
        let out = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&out, &"webgpu".into(), &false.into());
        let _ = js_sys::Reflect::set(&out, &"code".into(), &code.into());
        let _ = js_sys::Reflect::set(&out, &"reason".into(), &reason.into());
        out.into()
    };
    // `shared_context` checks navigator.gpu first (absent or null: UNSUPPORTED), then asks for
    // an adapter and a device with the options of `init()`.
    let (value, software) = match shared_context().await {
        Ok(ctx) => {
            let value = serde_wasm_bindgen::to_value(ctx.capabilities()).unwrap_or_else(|_| js_sys::Object::new().into());
            let _ = js_sys::Reflect::set(&value, &"webgpu".into(), &true.into());
            // Whether loadModel's `activations: 'int8'` would run its 8-bit GEMVs here: WGSL's
            // dot4I8Packed, and a hardware GPU's kernels (or init's `kernels: 'gpu'`).
            let int8 = !ctx.capabilities().is_software && device::wgsl_has(model::DP4_FEATURE);
            let _ = js_sys::Reflect::set(&value, &"int8Activations".into(), &int8.into());
            (value, ctx.capabilities().is_software)
        }
        Err(e) => (unavailable(error::code(&e), &e.to_string()), true),
    };
    let webgpu = js_sys::Reflect::get(&value, &"webgpu".into()).ok().and_then(|v| v.as_bool()).unwrap_or(false);
    // The backend a load would run on now; null where it would reject (`webgpu` without one).
    let backend = match backend::chosen() {
        backend::Choice::Cpu => JsValue::from("cpu"),
        backend::Choice::WebGpu if webgpu => JsValue::from("webgpu"),
        backend::Choice::WebGpu => JsValue::NULL,
        backend::Choice::Auto => JsValue::from(if webgpu && !software { "webgpu" } else { "cpu" }),
    };
    let _ = js_sys::Reflect::set(&value, &"selectedBackend".into(), &backend);
    let cpu = js_sys::Object::new();
    let isa = crate::cpu::kernels::Isa::detect();
    let _ = js_sys::Reflect::set(&cpu, &"available".into(), &true.into());
    let _ = js_sys::Reflect::set(&cpu, &"simd".into(), &isa.name().into());
    let threads = crate::cpu::threads::available() as f64;
    let _ = js_sys::Reflect::set(&cpu, &"threads".into(), &JsValue::from_f64(threads));
    let _ = js_sys::Reflect::set(&value, &"cpu".into(), &cpu);
    value
}

/// Hands over the chat-template renderer, `render(template, messages_json, options_json)` of the
/// `weft-chat` module, which the JS API loads on the first chat (src/tokenizer/chat.rs).
#[wasm_bindgen(js_name = setChatRenderer)]
pub fn set_chat_renderer(render: js_sys::Function) {
    crate::tokenizer::chat::set_renderer(render);
}

/// Every SIMD kernel of the CPU backend in this build against its scalar reference on
/// `seed`'s data: `{ isa, ok, checks: [{ isa, kernel, maxErr, tolerance, ok }] }`.
#[wasm_bindgen(js_name = cpuSelfTest)]
pub fn cpu_self_test(seed: u32) -> Result<JsValue, JsError> {
    Ok(serde_wasm_bindgen::to_value(&crate::cpu::selftest::run(seed as u64)?)?)
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

/// The MNIST study's state in this page: the F32 network, the test digits with the F32 outputs
/// every row is compared with, and the networks loaded for the demo, by row key.
struct Mnist {
    f32: crate::model::cnn::CnnFile,
    test: Option<(crate::model::cnn::study::Digits, crate::model::cnn::study::Reference)>,
    loaded: RefCell<std::collections::HashMap<String, Rc<crate::model::cnn::CnnGpu>>>,
}

thread_local! {
    static MNIST: RefCell<Option<Rc<Mnist>>> = const { RefCell::new(None) };
}

fn mnist() -> Result<Rc<Mnist>, JsError> {
    MNIST.with(|m| m.borrow().clone()).ok_or_else(|| JsError::new("call mnistLoad first"))
}

fn mnist_variant(key: &str) -> Result<crate::model::cnn::study::Variant, JsError> {
    crate::model::cnn::study::Variant::parse(key).ok_or_else(|| JsError::new(&format!("unknown dtype row '{key}'")))
}

/// The keys of the dtype study's rows, in table order (`F32`, `I8/channel`, `q4_g32_sym`, ...).
#[wasm_bindgen(js_name = mnistRows)]
pub fn mnist_rows() -> Vec<String> {
    crate::model::cnn::study::Variant::all().iter().map(|v| v.key()).collect()
}

/// Parses the F32 CNN file; with test digits (N x 784 pixel bytes, then N labels) also runs the
/// F32 row, the reference of [`mnist_study_row`], and returns it.
#[wasm_bindgen(js_name = mnistLoad)]
pub async fn mnist_load(model: Vec<u8>, digits: Option<Vec<u8>>, cpu_digits: usize) -> Result<JsValue, JsError> {
    use crate::model::cnn::study;
    let f32 = crate::model::cnn::CnnFile::parse(&model)?;
    let mut state = Mnist { f32, test: None, loaded: Default::default() };
    let mut row = None;
    if let Some(bytes) = digits {
        let (input, classes) = state.f32.config.io_sizes()?;
        let digits = study::Digits::parse(&bytes, input)?;
        let ctx = context().await?;
        let (r, probs) =
            study::evaluate(&ctx, &state.f32, study::Variant::Plain(crate::format::SafeDtype::F32), &digits, None, cpu_digits)
                .await?;
        let reference = study::Reference { predictions: study::argmax_rows(&probs, classes), probs };
        state.test = Some((digits, reference));
        row = Some(r);
    }
    MNIST.with(|m| *m.borrow_mut() = Some(Rc::new(state)));
    Ok(serde_wasm_bindgen::to_value(&row)?)
}

/// One row of the dtype study (see `weft dtype-table`), the CPU forward pass over the first
/// `cpu_digits` test digits.
#[wasm_bindgen(js_name = mnistStudyRow)]
pub async fn mnist_study_row(key: String, cpu_digits: usize) -> Result<JsValue, JsError> {
    let variant = mnist_variant(&key)?;
    let state = mnist()?;
    let ctx = context().await?;
    let (digits, reference) = state.test.as_ref().ok_or_else(|| JsError::new("mnistLoad was given no test digits"))?;
    let (row, _) =
        crate::model::cnn::study::evaluate(&ctx, &state.f32, variant, digits, Some(reference), cpu_digits).await?;
    Ok(serde_wasm_bindgen::to_value(&row)?)
}

/// Class probabilities of one 784-pixel image (values 0..1) under the network stored as row `key`.
#[wasm_bindgen(js_name = mnistPredict)]
pub async fn mnist_predict(key: String, pixels: Vec<f32>) -> Result<Vec<f32>, JsError> {
    let variant = mnist_variant(&key)?;
    let state = mnist()?;
    let ctx = context().await?;
    let cached = state.loaded.borrow().get(&key).cloned();
    let net = match cached {
        Some(net) => net,
        None => {
            let bytes = variant.convert(&state.f32)?.to_bytes()?;
            let file = crate::model::cnn::CnnFile::parse(&bytes)?;
            let net = Rc::new(crate::model::cnn::CnnGpu::load(&ctx, &file).await?);
            state.loaded.borrow_mut().insert(key, net.clone());
            net
        }
    };
    Ok(net.forward(&ctx, &pixels, 1).await?)
}
