//! Device creation, buffers, shader preprocessing, the pipeline cache and readback. Everything
//! that touches wgpu directly lives here or in `ops`.

mod buffer;
mod caps;
mod pipeline;
mod probe;
mod readback;
mod timing;
pub mod shader;

pub use buffer::{DType, GpuTensor, Uniform};
pub use caps::{Capabilities, KeyLimits};
pub use pipeline::{Dispatch, Pipeline};
pub use probe::F16_PROBE_SHADER;
pub use readback::{ReadSlot, StepCommands, Submitted};

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use pipeline::PipelineCache;

/// Which native backend to try. The browser always uses WebGPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// Vulkan first, then GL.
    Auto,
    Vulkan,
    Gl,
}

impl BackendChoice {
    /// Reads `WEFT_BACKEND` (auto, vulkan, gl); unset means auto.
    pub fn from_env() -> Result<Self> {
        match std::env::var("WEFT_BACKEND") {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(Self::Auto),
        }
    }

    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "vulkan" | "vk" => Ok(Self::Vulkan),
            "gl" | "gles" | "opengl" => Ok(Self::Gl),
            other => Err(Error::UnknownBackend(other.to_string())),
        }
    }

    fn candidates(self) -> Vec<wgpu::Backends> {
        if cfg!(target_arch = "wasm32") {
            return vec![wgpu::Backends::BROWSER_WEBGPU];
        }
        match self {
            Self::Auto => vec![wgpu::Backends::VULKAN, wgpu::Backends::GL],
            Self::Vulkan => vec![wgpu::Backends::VULKAN],
            Self::Gl => vec![wgpu::Backends::GL],
        }
    }
}

/// What weft asks of the adapter when it creates the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceOptions {
    /// Request only WebGPU's default limits (a `requiredLimits`-free device) instead of the
    /// adapter's maxima: what every WebGPU implementation must grant, so every kernel is
    /// expected to run within them.
    pub default_limits: bool,
    /// Request none of the optional features (shader-f16, subgroups, timestamp-query), as on an
    /// adapter that has none of them.
    pub no_features: bool,
    /// Request every optional feature but subgroups: the kernels' shared-memory sums on an
    /// adapter that has subgroups, to measure what they cost.
    pub no_subgroups: bool,
    /// Which of wgpu's protections weft's own kernels (`shaders/`) are compiled with natively.
    pub shader_checks: ShaderChecks,
    /// A software adapter takes the kernel choices of a hardware GPU (launch shapes, repacking,
    /// the fused decode GEMVs, 8-bit activations), to check those paths where there is no GPU:
    /// `WEFT_GPU_PATHS=1`, or `init({ kernels: 'gpu' })` in JavaScript.
    pub gpu_paths: bool,
}

/// wgpu compiles every WGSL module with run-time checks (array indices clamped, a counter in
/// every loop) and zeroes workgroup memory before each workgroup starts: protections for
/// shaders nobody has read. weft's own kernels (`shaders/`) go without them on native Vulkan,
/// where the checks cost the prefill's matrix-unit GEMM a quarter of its speed (bench/NOTES.md,
/// note 75). A browser applies its own robustness regardless, and kernels from outside
/// `shaders/` (tests, user WGSL) always keep wgpu's checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShaderChecks {
    /// [`ShaderChecks::None`] on native Vulkan, whose driver keeps buffer accesses within their
    /// bindings (robustBufferAccess, which wgpu enables); [`ShaderChecks::All`] on the other
    /// backends.
    #[default]
    Auto,
    /// wgpu's defaults: checked modules, zeroed workgroup memory.
    All,
    /// Checked modules; workgroup memory left as the previous workgroup wrote it (no kernel of
    /// weft reads workgroup memory before writing it).
    NoZeroInit,
    /// Neither: no index clamps, no loop counters, no zeroing.
    None,
}

impl DeviceOptions {
    /// Reads `WEFT_LIMITS` (adapter, default), `WEFT_FEATURES` (all, none, no-subgroups),
    /// `WEFT_SHADER_CHECKS` (auto, all, no-zero-init, none) and `WEFT_GPU_PATHS` (1); unset means
    /// the adapter's limits, every optional feature weft uses, [`ShaderChecks::Auto`] and the
    /// adapter's own kernel choices.
    pub fn from_env() -> Result<Self> {
        let limits = std::env::var("WEFT_LIMITS").unwrap_or_default();
        let features = std::env::var("WEFT_FEATURES").unwrap_or_default();
        let checks = std::env::var("WEFT_SHADER_CHECKS").unwrap_or_default();
        let gpu_paths = std::env::var("WEFT_GPU_PATHS").is_ok_and(|v| v == "1");
        Ok(Self { shader_checks: ShaderChecks::parse(&checks)?, gpu_paths, ..Self::parse(&limits, &features)? })
    }

    /// `kernels` of the JS API's `init`: "" or "auto" (the adapter's own choices), or "gpu"
    /// ([`DeviceOptions::gpu_paths`]).
    pub fn parse_kernels(kernels: &str) -> Result<bool> {
        match kernels.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(false),
            "gpu" => Ok(true),
            other => Err(Error::DeviceOption(format!(
                "kernels '{other}': use \"auto\" (the adapter's own kernel choices) or \"gpu\" (a hardware GPU's, \
                 on any adapter)"
            ))),
        }
    }

    /// `limits`: "" or "adapter", or "default"; `features`: "" or "all", "none" or "no-subgroups".
    pub fn parse(limits: &str, features: &str) -> Result<Self> {
        let default_limits = match limits.trim().to_ascii_lowercase().as_str() {
            "" | "adapter" => false,
            "default" => true,
            other => {
                return Err(Error::DeviceOption(format!(
                    "limits '{other}': use \"adapter\" (the adapter's maxima) or \"default\" (WebGPU's defaults)"
                )))
            }
        };
        let (no_features, no_subgroups) = match features.trim().to_ascii_lowercase().as_str() {
            "" | "all" => (false, false),
            "none" => (true, false),
            "no-subgroups" => (false, true),
            other => {
                return Err(Error::DeviceOption(format!(
                    "features '{other}': use \"all\" (every optional feature the adapter has), \"none\" or \"no-subgroups\""
                )))
            }
        };
        Ok(Self { default_limits, no_features, no_subgroups, ..Self::default() })
    }
}

impl ShaderChecks {
    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::All => "all",
            Self::NoZeroInit => "no-zero-init",
            Self::None => "none",
        }
    }

    /// "" or "auto", "all", "no-zero-init" or "none".
    pub fn parse(value: &str) -> Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "all" => Ok(Self::All),
            "no-zero-init" => Ok(Self::NoZeroInit),
            "none" => Ok(Self::None),
            other => Err(Error::DeviceOption(format!(
                "shader checks '{other}': use \"auto\" (none on native Vulkan, wgpu's elsewhere), \"all\" \
                 (wgpu's), \"no-zero-init\" or \"none\""
            ))),
        }
    }
}

/// The label of weft's device request. wgpu's web backend has no name for WebGPU's "subgroups"
/// feature, so it can neither ask for it nor report it; the JS API's `requestDevice` wrapper
/// (js/direct.js) adds it to requests labelled [`WEB_SUBGROUPS_LABEL`] where the adapter offers
/// it and tells the module (`deviceSubgroups`).
fn device_label(options: DeviceOptions) -> &'static str {
    if cfg!(target_arch = "wasm32") && !options.no_features && !options.no_subgroups {
        WEB_SUBGROUPS_LABEL
    } else {
        "weft"
    }
}

/// See [`device_label`]; js/direct.js matches this string.
pub const WEB_SUBGROUPS_LABEL: &str = "weft +subgroups";

/// The device, its queue, what it can do, and the compiled pipelines.
pub struct GpuContext {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    caps: Capabilities,
    pipelines: PipelineCache,
    health: Arc<Health>,
    /// Launch shapes measured on this device, by kernel and shape (see `ops::qmatmul::tune_gemv`).
    tuned: Mutex<std::collections::HashMap<String, [u32; 3]>>,
    shader_checks: ShaderChecks,
}

/// Errors the device reports outside any error scope, and whether it was lost. wgpu's default
/// handler would panic; weft keeps the first message so the next call can return it.
#[derive(Default)]
struct Health {
    uncaptured: Mutex<Option<String>>,
    lost: Mutex<Option<String>>,
}

fn record(slot: &Mutex<Option<String>>, message: String) {
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    slot.get_or_insert(message);
}

impl GpuContext {
    /// Creates a device on the first backend of `choice` that offers an adapter, with the
    /// adapter's own maximum limits (not WebGPU's defaults) and the optional features weft uses,
    /// unless `WEFT_LIMITS` / `WEFT_FEATURES` ask for less (see [`DeviceOptions::from_env`]).
    /// `WEFT_GPU_PATHS=1` makes a software adapter take the kernel choices of a hardware GPU
    /// (launch shapes, repacking, the fused decode GEMVs), to check those paths where there is
    /// no GPU.
    pub async fn new(choice: BackendChoice) -> Result<Self> {
        Self::with_options(choice, DeviceOptions::from_env()?).await
    }

    /// [`GpuContext::new`] with explicit device options.
    pub async fn with_options(choice: BackendChoice, options: DeviceOptions) -> Result<Self> {
        let mut tried = Vec::new();
        for backends in choice.candidates() {
            let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
            desc.backends = backends;
            let instance = wgpu::Instance::new(desc);
            let adapter_options = wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            };
            match instance.request_adapter(&adapter_options).await {
                Ok(adapter) => return Self::from_adapter(adapter, options).await,
                Err(e) => tried.push(format!("{backends:?}: {e}")),
            }
        }
        let hint = if cfg!(target_arch = "wasm32") {
            "this browser exposes no WebGPU adapter; use a current Chrome, Edge, Firefox or Safari \
             with WebGPU enabled"
        } else {
            "install a Vulkan driver (Debian: apt-get install mesa-vulkan-drivers) or try \
             WEFT_BACKEND=gl"
        };
        Err(Error::NoAdapter { tried: tried.join("; "), hint: hint.to_string() })
    }

    async fn from_adapter(adapter: wgpu::Adapter, options: DeviceOptions) -> Result<Self> {
        let wanted = if options.no_features {
            wgpu::Features::empty()
        } else {
            wgpu::Features::SHADER_F16
                | wgpu::Features::SUBGROUP
                | wgpu::Features::TIMESTAMP_QUERY
                | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        };
        let mut features = adapter.features() & wanted;
        if options.no_subgroups {
            features.remove(wgpu::Features::SUBGROUP);
        }
        let info = adapter.get_info();
        // The matrix-unit GEMM (shaders/qgemm_coop.wgsl) is written for 16 x 16 x 16 products of
        // f16 into f32, by subgroups of 32 lanes; without that shape the feature is not asked for.
        let coop_shape = adapter.cooperative_matrix_properties().iter().any(|c| {
            (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
                && c.ab_type == wgpu::CooperativeScalarType::F16
                && c.cr_type == wgpu::CooperativeScalarType::F32
        });
        let coop_usable = coop_shape
            && features.contains(wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP)
            && info.subgroup_min_size == 32
            && info.subgroup_max_size == 32;
        if !coop_usable {
            features.remove(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        }
        // wgpu's defaults are WebGPU's: what every implementation grants without being asked.
        let limits = if options.default_limits { wgpu::Limits::default() } else { adapter.limits() };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some(device_label(options)),
                required_features: features,
                required_limits: limits.clone(),
                // SAFETY: the one experimental feature weft may ask for is the cooperative
                // matrix, used only by shaders/qgemm_coop.wgsl within the shape checked above.
                experimental_features: if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| Error::RequestDevice(e.to_string()))?;
        let mut caps = Capabilities::new(&info, device.features(), &device.limits());
        caps.is_software &= !options.gpu_paths;
        let health = Arc::new(Health::default());
        let h = health.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| record(&h.uncaptured, e.to_string())));
        let h = health.clone();
        device.set_device_lost_callback(move |reason, message| {
            record(&h.lost, format!("{reason:?}: {message}"))
        });
        // A browser applies its own robustness whatever is asked: there wgpu's are kept.
        let shader_checks = match options.shader_checks {
            _ if cfg!(target_arch = "wasm32") => ShaderChecks::All,
            ShaderChecks::Auto if info.backend == wgpu::Backend::Vulkan => ShaderChecks::None,
            ShaderChecks::Auto => ShaderChecks::All,
            chosen => chosen,
        };
        let mut ctx = Self {
            device,
            queue,
            caps,
            pipelines: PipelineCache::default(),
            health,
            tuned: Mutex::default(),
            shader_checks,
        };
        // A probe that cannot run leaves the exact integer decoding in place.
        ctx.caps.f16_unpack_exact = ctx.probe_f16_unpack().await.unwrap_or(false);
        Ok(ctx)
    }

    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The protections weft's own kernels are compiled with on this device (never `Auto`).
    pub fn shader_checks(&self) -> ShaderChecks {
        self.shader_checks
    }

    /// A launch shape measured earlier on this device for `key`.
    pub fn tuned(&self, key: &str) -> Option<[u32; 3]> {
        self.tuned.lock().unwrap_or_else(|p| p.into_inner()).get(key).copied()
    }

    /// Remembers the launch shape measured fastest for `key`.
    pub fn set_tuned(&self, key: String, shape: [u32; 3]) {
        self.tuned.lock().unwrap_or_else(|p| p.into_inner()).insert(key, shape);
    }

    /// Lets the web facade add what only `GPUAdapterInfo` knows.
    pub fn set_capabilities(&mut self, caps: Capabilities) {
        self.caps = caps;
    }

    /// Returns the first error the device reported outside an error scope since the last
    /// check, or that the device was lost.
    pub fn check(&self) -> Result<()> {
        if let Some(reason) = self.health.lost.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(Error::DeviceLost(reason));
        }
        let mut slot = self.health.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
        match slot.take() {
            Some(message) => Err(Error::Gpu(message)),
            None => Ok(()),
        }
    }

    /// Copies all of `src` into `dst` (at least as large) `reps` times in one submission, for
    /// measuring the device's copy bandwidth.
    pub fn copy_repeated(&self, src: &GpuTensor, dst: &GpuTensor, reps: usize) -> Result<()> {
        if dst.bytes() < src.bytes() {
            return Err(Error::Shape {
                op: "copy",
                message: format!("{} does not fit in {}", src.label_shape(), dst.label_shape()),
            });
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("weft copy") });
        for _ in 0..reps {
            encoder.copy_buffer_to_buffer(&src.buffer, 0, &dst.buffer, 0, src.bytes());
        }
        self.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// Collects out-of-memory errors until the guard is popped: the browser reports a failed
    /// allocation asynchronously rather than from `create_buffer`.
    pub fn watch_out_of_memory(&self) -> wgpu::ErrorScopeGuard {
        self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory)
    }

    /// Why the device was lost, once it has been.
    pub fn lost_reason(&self) -> Option<String> {
        self.health.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Destroys the device, as a driver reset would: every later call fails with
    /// [`Error::DeviceLost`]. For testing recovery.
    pub fn destroy_device(&self) {
        self.device.destroy();
    }

    /// Waits until the GPU has done everything queued so far, buffer writes included (they are
    /// submitted with the next submission: an empty one sends them).
    pub async fn wait_idle(&self) -> Result<()> {
        self.queue.submit([]);
        let (tx, rx) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            // The receiver only disappears if the caller was dropped; nothing to report then.
            let _ = tx.send(());
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
        let _ = rx.await;
        self.check()
    }

    /// Records every dispatch into one compute pass and submits once.
    pub fn run(&self, dispatches: &[&Dispatch]) {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("weft run") });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("weft pass"),
                timestamp_writes: None,
            });
            for d in dispatches {
                d.record(&mut pass);
            }
        }
        self.queue.submit([encoder.finish()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_options_parse_and_refuse_unknown_names() {
        assert_eq!(DeviceOptions::parse("", "").unwrap(), DeviceOptions::default());
        assert_eq!(
            DeviceOptions::parse("Default", " none ").unwrap(),
            DeviceOptions { default_limits: true, no_features: true, ..DeviceOptions::default() }
        );
        assert_eq!(
            DeviceOptions::parse("", "No-Subgroups").unwrap(),
            DeviceOptions { no_subgroups: true, ..DeviceOptions::default() }
        );
        assert_eq!(DeviceOptions::parse("adapter", "all").unwrap(), DeviceOptions::default());
        let e = DeviceOptions::parse("huge", "").unwrap_err();
        assert!(matches!(e, Error::DeviceOption(ref m) if m.contains("limits 'huge'")), "{e}");
        assert!(matches!(DeviceOptions::parse("", "some"), Err(Error::DeviceOption(_))));
    }

    #[test]
    fn shader_checks_parse_and_refuse_unknown_names() {
        assert_eq!(ShaderChecks::parse("").unwrap(), ShaderChecks::Auto);
        assert_eq!(ShaderChecks::parse("auto").unwrap(), ShaderChecks::Auto);
        assert_eq!(ShaderChecks::parse(" ALL ").unwrap(), ShaderChecks::All);
        assert_eq!(ShaderChecks::parse("no-zero-init").unwrap(), ShaderChecks::NoZeroInit);
        assert_eq!(ShaderChecks::parse("None").unwrap(), ShaderChecks::None);
        let e = ShaderChecks::parse("off").unwrap_err();
        assert!(matches!(e, Error::DeviceOption(ref m) if m.contains("shader checks 'off'")), "{e}");
        for c in [ShaderChecks::Auto, ShaderChecks::All, ShaderChecks::NoZeroInit, ShaderChecks::None] {
            assert_eq!(ShaderChecks::parse(c.name()).unwrap(), c);
        }
    }
}
