//! `Model.profileStep(reps)`: where a decode step's time goes in this browser, the figures
//! `weft bench --profile` prints natively (`Llama::profile_step`), so that the two paths on one
//! GPU can be compared kernel by kernel.

use js_sys::Promise;
use wasm_bindgen::prelude::*;

use super::{js_error, run, to_js, to_value, Engine, Model};

#[wasm_bindgen]
impl Model {
    /// Runs the decode step `reps` times at the current position (after a generation) and
    /// resolves to `{ dispatches, record_submit_ms, wait_ms, kernels_us: [[name, µs, count]],
    /// pass_us }`; `kernels_us` is empty and `pass_us` null where the device has no timestamp
    /// queries. GPU models only.
    #[wasm_bindgen(js_name = profileStep)]
    pub fn profile_step(&self, reps: u32) -> Promise {
        run(&self.inner, move |s| {
            Box::pin(async move {
                match &s.engine {
                    Engine::Gpu { llama, ctx, .. } => {
                        let p = llama.profile_step(ctx, reps.clamp(1, 1000) as usize).await.map_err(|e| to_js(&e))?;
                        to_value(&p)
                    }
                    Engine::Cpu(_) => Err(js_error("UNSUPPORTED", "profileStep profiles the WebGPU backend's decode step")),
                }
            })
        })
    }
}
