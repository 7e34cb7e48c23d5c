//! The device options the page chose in `init({ limits, features })`, applied when the shared
//! device is created.

use std::cell::Cell;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::error::to_js;
use crate::gpu::DeviceOptions;

thread_local! {
    static OPTIONS: Cell<DeviceOptions> = Cell::new(DeviceOptions::default());
    static SUBGROUPS_GRANTED: Cell<bool> = const { Cell::new(false) };
}

/// Called by the JS API's `requestDevice` wrapper (js/direct.js) as it sends weft's device
/// request: whether it added WebGPU's "subgroups" feature, which wgpu's web backend cannot name
/// (see `gpu::device_label`).
#[wasm_bindgen(js_name = deviceSubgroups)]
pub fn device_subgroups(granted: bool) {
    SUBGROUPS_GRANTED.with(|g| g.set(granted));
}

/// Whether the last device request got subgroups added; reading it clears it.
pub(crate) fn take_subgroups_granted() -> bool {
    SUBGROUPS_GRANTED.with(|g| g.replace(false))
}

/// The options the next device is created with.
pub(crate) fn options() -> DeviceOptions {
    OPTIONS.with(Cell::get)
}

/// `limits`: "adapter" (default: the adapter's maxima) or "default" (WebGPU's default limits
/// only); `features`: "all" (default) or "none" (no shader-f16, subgroups, timestamp-query);
/// `kernels`: "auto" (default) or "gpu" (a software adapter such as SwiftShader takes a hardware
/// GPU's kernel choices, to test them: `DeviceOptions::gpu_paths`).
/// A change replaces the shared device from the next call on; models loaded before keep theirs.
#[wasm_bindgen(js_name = configureDevice)]
pub fn configure_device(limits: Option<String>, features: Option<String>, kernels: Option<String>) -> Result<(), JsValue> {
    let mut wanted = DeviceOptions::parse(limits.as_deref().unwrap_or(""), features.as_deref().unwrap_or(""))
        .map_err(|e| to_js(&e))?;
    wanted.gpu_paths = DeviceOptions::parse_kernels(kernels.as_deref().unwrap_or("")).map_err(|e| to_js(&e))?;
    if OPTIONS.with(|o| o.replace(wanted)) != wanted {
        super::CONTEXT.with(|c| c.borrow_mut().take());
    }
    Ok(())
}

/// Whether the browser's WGSL has the language feature `name` (`navigator.gpu.wgslLanguageFeatures`).
pub(crate) fn wgsl_has(name: &str) -> bool {
    let lookup = || -> Option<bool> {
        let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
        let gpu = js_sys::Reflect::get(&navigator, &"gpu".into()).ok()?;
        let features = js_sys::Reflect::get(&gpu, &"wgslLanguageFeatures".into()).ok()?;
        let has: js_sys::Function = js_sys::Reflect::get(&features, &"has".into()).ok()?.dyn_into().ok()?;
        has.call1(&features, &name.into()).ok()?.as_bool()
    };
    lookup().unwrap_or(false)
}

/// Why this context cannot have WebGPU at all, checked before wgpu is asked: `navigator.gpu`
/// absent (no WebGPU in this browser or context) or null (WebKitGTK with WebGPU switched on but
/// no backend for this platform). wgpu itself would not fail with a clear error there.
pub(crate) fn missing_webgpu() -> Option<crate::Error> {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
    let gpu = js_sys::Reflect::get(&navigator, &"gpu".into()).ok()?;
    let what = if gpu.is_undefined() {
        "navigator.gpu is undefined"
    } else if gpu.is_null() {
        "navigator.gpu is null"
    } else {
        return None;
    };
    Some(crate::Error::NoAdapter {
        tried: what.to_string(),
        hint: "this browser exposes no WebGPU; use a current Chrome, Edge, Firefox or Safari with WebGPU enabled"
            .to_string(),
    })
}
