//! Where a model's load went, phase by phase: what `weft bench` prints, so that the slow part of
//! a load is measured rather than guessed.

use std::cell::RefCell;

use serde::Serialize;

/// Milliseconds a load spent in each phase (wall clock; phases never overlap, so they add up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LoadTimes {
    /// Reading and parsing the header, the configuration and the tokenizer (a folder's small
    /// files included).
    pub header_ms: f64,
    /// Reading the weights' bytes (file, HTTP or cache).
    pub read_ms: f64,
    /// CPU work on the bytes read: repacking GGUF blocks, quantizing float matrices, decoding
    /// vectors to f32.
    pub convert_ms: f64,
    /// Creating buffers and queueing their contents (`write_buffer`).
    pub upload_ms: f64,
    /// Quantizing on the GPU: making the kernel's pipeline, queueing it and waiting for it.
    pub gpu_quantize_ms: f64,
    /// Repacking GGUF blocks on the GPU (`ops::repack`): the kernel's pipeline, the
    /// blocks' upload, the kernel queued and waited for.
    pub gpu_repack_ms: f64,
    /// Stacking Q/K/V and gate/up into one matrix each (GPU copies).
    pub stack_ms: f64,
    /// Timing GEMV launch shapes (`ops::qmatmul::tune_gemv`), their pipelines included.
    pub tune_ms: f64,
    /// Compiling the decode step's pipelines and binding its dispatches.
    pub compile_ms: f64,
    /// Waiting for the GPU to finish what the load queued (the uploads' copies).
    pub finish_ms: f64,
}

/// Which [`LoadTimes`] field a measured span goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPhase {
    Read,
    Convert,
    Upload,
    GpuQuantize,
    GpuRepack,
    Stack,
    Tune,
    Compile,
    Finish,
}

impl LoadTimes {
    fn slot(&mut self, phase: LoadPhase) -> &mut f64 {
        match phase {
            LoadPhase::Read => &mut self.read_ms,
            LoadPhase::Convert => &mut self.convert_ms,
            LoadPhase::Upload => &mut self.upload_ms,
            LoadPhase::GpuQuantize => &mut self.gpu_quantize_ms,
            LoadPhase::GpuRepack => &mut self.gpu_repack_ms,
            LoadPhase::Stack => &mut self.stack_ms,
            LoadPhase::Tune => &mut self.tune_ms,
            LoadPhase::Compile => &mut self.compile_ms,
            LoadPhase::Finish => &mut self.finish_ms,
        }
    }

    /// The sum of every phase.
    pub fn total_ms(&self) -> f64 {
        let t = self;
        t.header_ms + t.read_ms + t.convert_ms + t.upload_ms + t.gpu_quantize_ms + t.gpu_repack_ms + t.stack_ms + t.tune_ms + t.compile_ms + t.finish_ms
    }

    /// (name, ms) of each phase, in load order.
    pub fn phases(&self) -> [(&'static str, f64); 10] {
        let t = self;
        [
            ("header", t.header_ms),
            ("read", t.read_ms),
            ("convert", t.convert_ms),
            ("upload", t.upload_ms),
            ("gpu quantize", t.gpu_quantize_ms),
            ("gpu repack", t.gpu_repack_ms),
            ("stack", t.stack_ms),
            ("tune", t.tune_ms),
            ("compile", t.compile_ms),
            ("finish", t.finish_ms),
        ]
    }
}

/// Accumulates [`LoadTimes`] through code that shares it by reference (the loader's closures).
#[derive(Default)]
pub(crate) struct LoadClock(RefCell<LoadTimes>);

impl LoadClock {
    pub(crate) fn new(times: LoadTimes) -> Self {
        Self(RefCell::new(times))
    }

    /// A time to pass to [`LoadClock::add`] later.
    pub(crate) fn start() -> f64 {
        super::llama::web_time_now()
    }

    /// Milliseconds since `start`.
    pub(crate) fn since(start: f64) -> f64 {
        super::llama::web_time_now() - start
    }

    /// Adds the time since `start` to `phase`.
    pub(crate) fn add(&self, phase: LoadPhase, start: f64) {
        *self.0.borrow_mut().slot(phase) += Self::since(start);
    }

    /// Runs `f`, its time added to `phase`.
    pub(crate) fn time<T>(&self, phase: LoadPhase, f: impl FnOnce() -> T) -> T {
        let start = Self::start();
        let out = f();
        self.add(phase, start);
        out
    }

    pub(crate) fn times(&self) -> LoadTimes {
        *self.0.borrow()
    }
}
