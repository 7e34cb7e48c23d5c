//! What the adapter can do, reported to users (CLI, JS `capabilities()`) and used to pick kernels.

use serde::Serialize;

/// The limits that decide how large a tensor or a dispatch may be.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KeyLimits {
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
}

impl KeyLimits {
    pub fn from_wgpu(limits: &wgpu::Limits) -> Self {
        Self {
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
        }
    }
}

/// Adapter identity, features and limits of the device weft created.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub backend: String,
    pub adapter_name: String,
    /// PCI vendor id natively; the vendor string from `GPUAdapterInfo` on the web.
    pub vendor: String,
    /// Empty natively (wgpu does not expose it); `GPUAdapterInfo.architecture` on the web.
    pub architecture: String,
    pub driver: String,
    pub device_type: String,
    /// True for CPU emulations (lavapipe, llvmpipe, SwiftShader, WARP): slow, but correct.
    pub is_software: bool,
    pub shader_f16: bool,
    pub subgroups: bool,
    /// The smallest subgroup the adapter may run (0 without subgroups): a kernel that reduces
    /// over L adjacent lanes with subgroup operations needs L at most this.
    pub subgroup_min_size: u32,
    /// Tests only, never reported: subgroups of this many lanes emulated in workgroup memory in
    /// place of the adapter's (shaders/gemv_rowsum.wgsl, `SG_EMU`), so that the kernels' subgroup
    /// paths run at any size on any adapter; 0 (the default) uses the adapter's own. Kernels are
    /// still chosen by `subgroup_min_size`.
    #[serde(skip)]
    pub subgroup_emulation: u32,
    pub timestamp_query: bool,
    /// 16 x 16 x 16 matrix products of f16 into f32 by 32-lane subgroups (tensor cores), which
    /// the prefill GEMM at `Precision::F16` runs on (shaders/qgemm_coop.wgsl). Native only.
    pub matrix_f16: bool,
    /// `unpack2x16float` widens every f16 exactly here, subnormals included (measured when the
    /// device is created, `GpuContext::probe_f16_unpack`): the GEMVs then decode their scales
    /// with it rather than with integer operations.
    pub f16_unpack_exact: bool,
    pub limits: KeyLimits,
}

const SOFTWARE_NAMES: [&str; 5] = ["llvmpipe", "lavapipe", "swiftshader", "warp", "softpipe"];

impl Capabilities {
    pub fn new(info: &wgpu::AdapterInfo, features: wgpu::Features, limits: &wgpu::Limits) -> Self {
        let lower = format!("{} {}", info.name, info.driver).to_lowercase();
        let is_software = info.device_type == wgpu::DeviceType::Cpu
            || SOFTWARE_NAMES.iter().any(|n| lower.contains(n));
        Self {
            backend: format!("{:?}", info.backend),
            adapter_name: info.name.clone(),
            vendor: if info.vendor == 0 { String::new() } else { format!("0x{:04x}", info.vendor) },
            architecture: String::new(),
            driver: [info.driver.as_str(), info.driver_info.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
            device_type: format!("{:?}", info.device_type),
            is_software,
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            subgroup_min_size: if features.contains(wgpu::Features::SUBGROUP) { info.subgroup_min_size } else { 0 },
            subgroup_emulation: 0,
            timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            // shaders/qgemm_coop.wgsl stages up to 26,624 bytes of workgroup memory.
            matrix_f16: features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
                && limits.max_compute_workgroup_storage_size >= 26_624,
            f16_unpack_exact: false,
            limits: KeyLimits::from_wgpu(limits),
        }
    }

    /// Subgroups that the browser granted outside wgpu's feature table (see
    /// `gpu::device_label`), with the adapter's smallest subgroup; a size of 0 (not reported)
    /// leaves the kernels on their shared-memory sums.
    pub fn with_web_subgroups(mut self, min_size: u32) -> Self {
        self.subgroups = true;
        self.subgroup_min_size = min_size;
        self
    }

    /// No subgroups (tests): the kernels' shared-memory sums on an adapter that has subgroups.
    pub fn without_subgroups(mut self) -> Self {
        self.subgroups = false;
        self.subgroup_min_size = 0;
        self.subgroup_emulation = 0;
        self
    }

    /// Subgroups of `size` lanes emulated in workgroup memory (tests: see
    /// [`Capabilities::subgroup_emulation`]), as the smallest subgroup the kernels may count on.
    pub fn with_emulated_subgroups(mut self, size: u32) -> Self {
        self.subgroups = true;
        self.subgroup_min_size = size;
        self.subgroup_emulation = size;
        self
    }

    /// Folds in what only the browser's `GPUAdapterInfo` tells (wgpu leaves these empty on the web).
    pub fn with_web_info(mut self, vendor: String, architecture: String, is_fallback: bool) -> Self {
        if !vendor.is_empty() {
            self.vendor = vendor;
        }
        self.architecture = architecture;
        let lower = format!("{} {}", self.vendor, self.architecture).to_lowercase();
        self.is_software |= is_fallback || SOFTWARE_NAMES.iter().any(|n| lower.contains(n));
        self
    }
}
