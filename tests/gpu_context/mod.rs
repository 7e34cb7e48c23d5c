//! The one GPU device the tests of a test binary share (lavapipe in CI; `WEFT_BACKEND` picks).

use std::sync::OnceLock;

use weft::gpu::{BackendChoice, GpuContext};

pub fn ctx() -> &'static GpuContext {
    static CTX: OnceLock<GpuContext> = OnceLock::new();
    CTX.get_or_init(|| {
        let choice = BackendChoice::from_env().expect("WEFT_BACKEND");
        pollster::block_on(GpuContext::new(choice)).expect("a GPU adapter (lavapipe in CI)")
    })
}
