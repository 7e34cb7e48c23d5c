//! The device options the page chose in `init({ limits, features })`, applied when the shared
//! device is created.

use std::cell::Cell;

use wasm_bindgen::prelude::*;

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
/// only); `features`: "all" (default) or "none" (no shader-f16, subgroups, timestamp-query).
/// A change replaces the shared device from the next call on; models loaded before keep theirs.
#[wasm_bindgen(js_name = configureDevice)]
pub fn configure_device(limits: Option<String>, features: Option<String>) -> Result<(), JsValue> {
    let wanted = DeviceOptions::parse(limits.as_deref().unwrap_or(""), features.as_deref().unwrap_or(""))
        .map_err(|e| to_js(&e))?;
    if OPTIONS.with(|o| o.replace(wanted)) != wanted {
        super::CONTEXT.with(|c| c.borrow_mut().take());
    }
    Ok(())
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
