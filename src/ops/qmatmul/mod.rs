//! Matrix products and embedding lookups with weights that stay packed on the GPU: every kernel
//! dequantizes the weights it reads on the fly, with the same values as the CPU decoders.
//!
//! - [`gemv`]: y[t, n] = W[n, k] · x[t, k] for one or a few tokens (decode).
//! - [`gemm`]: the same product for many tokens (prefill), each weight decoded once per tile of
//!   tokens (src/ops/qmatmul/gemm.rs: block-native on CPU-emulated adapters, register-tiled
//!   outer products on GPUs, shared-memory tiles where neither applies).
//!
//! A weight larger than one storage binding is stored in parts of whole rows
//! ([`QWeight::parts`]); every kernel runs once per part, as one [`Dispatch`].
//! - [`qmatmul`]: picks one of the two by the token count.
//! - [`embed`]: out[t, k] = row ids[t] of W, decoding only the requested rows.

mod fusion;
mod gemm;
mod selftest;
mod int8;
pub mod records;
mod tune;
mod variants;
mod weight;

pub use selftest::{
    cpu_reference, f16_tolerance, f32_tolerance, self_test, test_weight, KernelReport,
    QMatmulReport, TestData, TestWeight,
};
pub use gemm::{gemm, gemm_tuned, GemmConfig, GemmKernel, GEMM_BLOCKS, GEMM_MATRIX, GEMM_OUTER, GEMM_TILED};
pub use int8::{int8_activations, int8_tolerance};
pub use fusion::GemvFusion;
pub(crate) use variants::variants;
pub use tune::{records_pay, tune_gemv, GemvTuning, GEMV_CANDIDATES};
pub use weight::{QPart, QWeight, WeightFormat};
pub(crate) use weight::{binding_limit, plane_tensors};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{Capabilities, DType, Dispatch, GpuContext, GpuTensor};

use super::grid;

macro_rules! q_shader {
    ($name:literal, $file:literal) => {
        ShaderSource {
            name: $name,
            source: &[
                wgsl!($file),
                crate::ops::fragments::QPARAMS,
                crate::ops::fragments::GEMV_NORM,
                crate::ops::fragments::GEMV_ROWSUM,
                crate::ops::fragments::QWEIGHT,
                crate::ops::fragments::QBLOCK,
                crate::ops::fragments::QBLOCK_K,
                crate::ops::fragments::DECODE,
            ],
        }
    };
}

pub const QGEMV_SHADER: ShaderSource = q_shader!("qgemv", "qgemv.wgsl");
pub const QGEMM_SHADER: ShaderSource = q_shader!("qgemm", "qgemm.wgsl");
pub const QGEMM_OUTER_SHADER: ShaderSource = q_shader!("qgemm_outer", "qgemm_outer.wgsl");
#[cfg(not(target_arch = "wasm32"))]
pub const QGEMM_COOP_SHADER: ShaderSource = q_shader!("qgemm_coop", "qgemm_coop.wgsl");
/// Browsers' WebGPU has no cooperative matrices, so `gemm` refuses the matrix kernel there
/// before it would compile: the module carries no source for it.
#[cfg(target_arch = "wasm32")]
pub const QGEMM_COOP_SHADER: ShaderSource = ShaderSource { name: "qgemm_coop", source: &[] };
pub const QEMBED_SHADER: ShaderSource = q_shader!("qembed", "qembed.wgsl");
/// The GEMV of GPUs for weft weights with K a multiple of 32 ([`gpu_gemv`]).
pub const QGEMV_GPU_SHADER: ShaderSource = ShaderSource {
    name: "qgemv_gpu",
    source: &[
        wgsl!("qgemv_gpu.wgsl"),
        crate::ops::fragments::QPARAMS,
        crate::ops::fragments::GEMV_NORM,
        crate::ops::fragments::GEMV_ROWSUM,
        crate::ops::fragments::GEMV_DP4,
        crate::ops::fragments::XRECORD,
    ],
};

/// Launch shape of the GEMV kernel. Block formats (see [`WeightFormat::gemv_block`]): `wg`
/// invocations per workgroup, `lanes` adjacent ones sharing `rows` rows (each lane takes every
/// `lanes`-th 32-weight chunk; their sums are then added), so a workgroup makes
/// `wg / lanes · rows` rows. Other formats: `wg` threads stride over K for `rows` rows per
/// workgroup (`lanes` unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GemvConfig {
    pub wg: u32,
    pub rows: u32,
    pub lanes: u32,
}

/// On lavapipe four rows per workgroup of 64 threads ran 1.5-2x faster than one or two (x is
/// loaded once for all of them, and there are fewer reductions); 128 or 256 threads were slower.
const GEMV_STRIDED: GemvConfig = GemvConfig { wg: 64, rows: 4, lanes: 1 };
/// Two rows per invocation share each x load and ran 1.1-1.4x faster than one on lavapipe; 16
/// or 128 invocations per workgroup were slower than 64 (bench/NOTES.md).
const GEMV_BLOCKS: GemvConfig = GemvConfig { wg: 64, rows: 2, lanes: 1 };
/// A GPU with a hundred or more compute units needs many workgroups even for a few thousand
/// rows, and the lanes of a warp should read adjacent words: 32 lanes per row (a warp on NVIDIA,
/// half a wave64 on AMD) and eight rows per 256-invocation workgroup give an 8192-row matrix
/// 1024 workgroups, each lane walking every 32nd chunk of its row.
const GEMV_BLOCKS_GPU: GemvConfig = GemvConfig { wg: 256, rows: 2, lanes: 32 };

impl GemvConfig {
    /// The launch shape for `format` on a CPU-emulated adapter (lavapipe's measured best).
    pub fn for_format(format: &WeightFormat) -> Self {
        if format.gemv_block().is_some() { GEMV_BLOCKS } else { GEMV_STRIDED }
    }

    /// The launch shape for `format` on the adapter `caps` describes: the CPU shape on software
    /// adapters, rows shared by 32 lanes on the others.
    pub fn for_adapter(caps: &Capabilities, format: &WeightFormat) -> Self {
        if format.gemv_block().is_some() && !caps.is_software { GEMV_BLOCKS_GPU } else { Self::for_format(format) }
    }

    /// The shape a SwiGLU epilogue runs at: a lane group holds gate and up rows in pairs, so
    /// one row a lane group becomes two.
    pub(crate) fn paired(self) -> Self {
        Self { rows: self.rows.max(2), ..self }
    }

    /// Rows one workgroup produces.
    fn rows_per_group(&self, blocks: bool) -> u32 {
        if blocks { self.wg / self.lanes * self.rows } else { self.rows }
    }
}
const EMBED_WG: u32 = 64;
/// Up to this many tokens [`qmatmul`] uses the GEMV kernel: below it a GEMM tile is mostly
/// empty rows of X.
pub const GEMV_MAX_TOKENS: usize = 1;

/// Arithmetic of the partial products: f32 everywhere, or f16 tiles and dot products (with f32
/// sums) where the adapter has `shader-f16`. [`qmatmul`] runs GEMV at F32 whatever the adapter:
/// a GEMV reads each weight once, so f16 products save no memory traffic, and on lavapipe the
/// f16 variant of the block kernel ran 2.5-3x slower (the conversions cost more than they
/// save). F16 stays available by asking for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    F16,
}

impl Precision {
    /// F16 where the adapter supports it, else F32.
    pub fn best(ctx: &GpuContext) -> Self {
        if ctx.capabilities().shader_f16 { Self::F16 } else { Self::F32 }
    }
}

/// The block kernels read x as vec4 unless K is not a multiple of 4 (weft rows may be ragged).
fn x_defines(d: Defines, k: usize) -> Defines {
    if k.is_multiple_of(4) { d } else { d.set("XSCALAR", 1) }
}

/// The subgroups a GEMV's lanes may add their sums with: the size the adapter guarantees (its
/// smallest; 0 without subgroups), and the size emulated in their place (0: none; see
/// `Capabilities::subgroup_emulation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Subgroups {
    pub(crate) size: u32,
    pub(crate) emulated: u32,
}

impl Subgroups {
    pub(crate) const NONE: Self = Self { size: 0, emulated: 0 };

    pub(crate) fn of(caps: &Capabilities) -> Self {
        Self { size: caps.subgroup_min_size, emulated: caps.subgroup_emulation }
    }

    /// `d` with the row sum of `lanes` lanes by subgroup shuffles (SG) where one subgroup always
    /// holds them — `lanes` at most the guaranteed size: in a smaller subgroup a shuffle would
    /// reach outside it — else unchanged (the shared-memory sum).
    fn row_sum(self, d: Defines, lanes: u32) -> Defines {
        if lanes <= 1 || lanes > self.size {
            return d;
        }
        let d = d.set("SG", 1);
        if self.emulated > 0 { d.set("SG_EMU", self.emulated) } else { d }
    }
}

/// Lanes sharing a row add their sums as [`Subgroups::row_sum`] says.
fn gemv_defines(format: &WeightFormat, precision: Precision, c: GemvConfig, k: usize, subgroup: Subgroups) -> Defines {
    let d = format.defines().set("WG", c.wg).set("PB", 3 + format.weight_bindings() - 1);
    let d = match format.gemv_block() {
        Some(path) => {
            let d = x_defines(d.set("BLOCKS", 1).set(path, 1).set("RPT", c.rows).set("LPR", c.lanes).set("ROW_SUM", 1), k);
            subgroup.row_sum(d, c.lanes)
        }
        None => d.set("ROWS", c.rows),
    };
    if precision == Precision::F16 { d.set("F16", 1) } else { d }
}

/// Whether the GEMV of `w` runs shaders/qgemv_gpu.wgsl: for weft weights with K a multiple of
/// 32 and repacked K-quants, at F32, with lanes sharing rows (the GPU launch shapes; CPU-emulated
/// adapters keep the block kernel's one row per invocation, measured best there) and 1, 2 or 4
/// rows per lane group.
fn gpu_gemv(format: &WeightFormat, k: usize, precision: Precision, c: GemvConfig) -> bool {
    matches!(format, WeightFormat::Weft(_) | WeightFormat::Repacked(_))
        && k.is_multiple_of(32)
        && precision == Precision::F32
        && c.lanes > 1
        && matches!(c.rows, 1 | 2 | 4)
}

fn gpu_gemv_defines(format: &WeightFormat, c: GemvConfig, subgroup: Subgroups) -> Defines {
    let mut d = format.defines().set("WG", c.wg).set("LPR", c.lanes).set("RPT", c.rows).set("ROW_SUM", 1);
    d = d.set("PB", 3 + format.weight_bindings() - 1);
    if c.rows >= 2 {
        d = d.set("R2", 1);
    }
    if c.rows == 4 {
        d = d.set("R4", 1);
    }
    subgroup.row_sum(d, c.lanes)
}

fn embed_defines(format: &WeightFormat) -> Defines {
    format.defines().set("PB", 3 + format.weight_bindings() - 1)
}

/// Checks x [t, k] against W and y [t, n], returning t.
fn check_operands(op: &'static str, w: &QWeight, x: &GpuTensor, y: &GpuTensor, n_out: usize) -> Result<u32> {
    check_shapes(op, w, (&x.shape, x.dtype), y, n_out)
}

/// [`check_operands`] for an x of this (shape, dtype): records' logical one.
fn check_shapes(op: &'static str, w: &QWeight, (xs, xd): (&[usize], DType), y: &GpuTensor, n_out: usize) -> Result<u32> {
    let fail = |message: String| Error::Shape { op, message };
    let (&[t, k], &[t2, n]) = (xs, &y.shape[..]) else {
        return Err(fail(format!("x and y must be 2-D, got {:?} and {:?}", xs, y.shape)));
    };
    if k != w.cols || n != n_out || t != t2 {
        return Err(fail(format!(
            "x [{t}, {k}] · W^T [{}, {}] -> y [{t2}, {n}] does not fit (y of {n_out} columns)",
            w.cols, w.rows
        )));
    }
    if xd != DType::F32 || y.dtype != DType::F32 {
        return Err(fail("x and y must be F32".into()));
    }
    if t == 0 {
        return Err(fail("no tokens".into()));
    }
    u32::try_from(t * k.max(n)).map_err(|_| fail(format!("[{t}, {}] exceeds u32 indexing", k.max(n))))?;
    Ok(t as u32)
}

fn check_precision(ctx: &GpuContext, op: &'static str, precision: Precision) -> Result<()> {
    if precision == Precision::F16 && !ctx.capabilities().shader_f16 {
        return Err(Error::Shape {
            op,
            message: "the f16 variant needs shader-f16, which this adapter lacks; use Precision::F32".into(),
        });
    }
    Ok(())
}

/// Binding order every kernel of this family shares: packed data, the two activation tensors,
/// then the weight's scales and zero points where it has them.
fn bindings<'a>(part: &'a QPart, input: &'a GpuTensor, output: &'a GpuTensor) -> Vec<&'a GpuTensor> {
    let mut tensors = vec![&part.data, input, output];
    tensors.extend(part.tensors().into_iter().skip(1));
    tensors
}

/// `Params` of shaders/qweight.wgsl for one part of `w`.
fn params(w: &QWeight, part: &QPart, t: u32, grid_x: u32, chunks: u32) -> [u32; 12] {
    let (wpr, gpr) = w.row_layout();
    [part.rows as u32, w.cols as u32, t, grid_x, wpr, gpr, chunks, part.row0 as u32, w.rows as u32, 0, 0, 0]
}

/// One dispatch per part of `w`, recorded as one step.
fn per_part(
    w: &QWeight,
    mut one: impl FnMut(&QPart) -> Result<Dispatch>,
) -> Result<Dispatch> {
    let mut all = w.parts.iter().map(&mut one).collect::<Result<Vec<_>>>()?.into_iter();
    let first = all.next().ok_or_else(|| Error::Shape { op: "qmatmul", message: "a weight without parts".into() })?;
    Ok(Dispatch::sequence(first, all))
}

/// y[t, n] = W[n, k] · x[t, k] at the format's default [`GemvConfig`].
pub async fn gemv(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    precision: Precision,
) -> Result<Dispatch> {
    gemv_tuned(ctx, w, x, y, precision, gemv_config(ctx, w, precision)).await
}

/// The launch shape for `w`: the one tuning measured fastest, else the adapter's default.
fn gemv_config(ctx: &GpuContext, w: &QWeight, precision: Precision) -> GemvConfig {
    tune::measured(ctx, w, precision, false, false).unwrap_or_else(|| GemvConfig::for_adapter(ctx.capabilities(), &w.format))
}

/// [`gemv`] with an explicit launch shape, for tuning: `wg` and `lanes` powers of two, `lanes`
/// at most `wg`, `rows` at least 1.
pub async fn gemv_tuned(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    precision: Precision,
    config: GemvConfig,
) -> Result<Dispatch> {
    gemv_with(ctx, w, x, y, precision, config, GemvFusion::default()).await
}

/// Whether [`gemv_fused`] takes `w`: the block kernels and the repacked K-quants (the GPU
/// kernel) with K a multiple of 4.
pub fn gemv_fuses(w: &QWeight) -> bool {
    (w.format.gemv_block().is_some() || matches!(w.format, WeightFormat::Repacked(_))) && w.cols.is_multiple_of(4)
}

/// The launch shape and precision a GEMV of `format` runs at: as asked, except that repacked
/// K-quants have one GEMV, the GPU kernel at F32 (their planes exist only on GPUs, where it is
/// the fast path): a shape it cannot run gives way to the GPU default.
fn gemv_shape(format: &WeightFormat, k: usize, precision: Precision, c: GemvConfig) -> (Precision, GemvConfig) {
    match format {
        WeightFormat::Repacked(_) if !gpu_gemv(format, k, Precision::F32, c) => (Precision::F32, GEMV_BLOCKS_GPU),
        WeightFormat::Repacked(_) => (Precision::F32, c),
        _ => (precision, c),
    }
}

/// The decode step's GEMV with its neighbours folded in, at F32: `y = W · rms_norm(x) * norm_w`
/// with `fusion.norm`, `y += W · x` with `fusion.residual`. Only for weights [`gemv_fuses`]
/// takes, one token at a time.
pub async fn gemv_fused(ctx: &GpuContext, w: &QWeight, x: &GpuTensor, y: &GpuTensor, fusion: GemvFusion<'_>) -> Result<Dispatch> {
    if fusion.records_out.is_some() {
        // Only the shapes whose workgroups own whole chunks write records.
        let config = tune::measured_records(ctx, w).unwrap_or(records::RECORD_SWIGLU_CANDIDATES[0]);
        return gemv_fused_tuned(ctx, w, x, y, fusion, config).await;
    }
    // Reading records stages nothing, which moves the best shape (fewer rows a workgroup).
    if let Some(config) = fusion.records_in.then(|| tune::measured_reading_records(ctx, w)).flatten() {
        return gemv_fused_tuned(ctx, w, x, y, fusion, config).await;
    }
    // The shape tuned for 8-bit activations, else for the SwiGLU epilogue, where they were.
    let tuned = fusion
        .int8
        .then(|| tune::measured(ctx, w, Precision::F32, fusion.swiglu, true))
        .flatten()
        .or_else(|| fusion.swiglu.then(|| tune::measured(ctx, w, Precision::F32, true, false)).flatten());
    gemv_fused_tuned(ctx, w, x, y, fusion, tuned.unwrap_or_else(|| gemv_config(ctx, w, Precision::F32))).await
}

/// Whether the decode step's GEMV of `w` on this adapter runs the GPU kernel
/// (shaders/qgemv_gpu.wgsl), the one that stages the activations once per workgroup: the
/// condition of the fusions that work on the staged activations.
fn decode_gemv_is_gpu_kernel(ctx: &GpuContext, w: &QWeight) -> bool {
    let (precision, config) = gemv_shape(&w.format, w.cols, Precision::F32, gemv_config(ctx, w, Precision::F32));
    gemv_fuses(w) && gpu_gemv(&w.format, w.cols, precision, config)
}

/// Whether the decode step's GEMV of `w` on this adapter takes [`GemvFusion::glu`]: the GPU
/// kernel takes the SwiGLU once per workgroup while staging (the block kernel would take it
/// once per row).
pub fn gemv_glu(ctx: &GpuContext, w: &QWeight) -> bool {
    decode_gemv_is_gpu_kernel(ctx, w)
}

/// Whether the decode step's GEMV of `w` on this adapter takes [`GemvFusion::swiglu`]: the GPU
/// kernel, an even number of rows and one part (gate row r and up row r + h in one binding).
pub fn gemv_swiglu(ctx: &GpuContext, w: &QWeight) -> bool {
    decode_gemv_is_gpu_kernel(ctx, w) && gate_up_pairs(w)
}

/// Whether `w`'s rows split into gate and up halves within one binding.
fn gate_up_pairs(w: &QWeight) -> bool {
    w.rows.is_multiple_of(2) && w.parts.len() == 1
}

/// Whether the decode step's GEMV of `w` on this adapter takes [`GemvFusion::int8`]: the GPU
/// kernel with weft weights (Q4_0 and Q8_0 become 4- and 8-bit ones at upload) or the planes of
/// Q4_1, Q5_0, Q5_1 and the K-quants ([`WeightFormat::Repacked`]).
pub fn gemv_int8(ctx: &GpuContext, w: &QWeight) -> bool {
    decode_gemv_is_gpu_kernel(ctx, w) && int8_format(&w.format)
}

fn int8_format(format: &WeightFormat) -> bool {
    matches!(format, WeightFormat::Weft(_) | WeightFormat::Repacked(_))
}

/// [`gemv_fused`] at an explicit launch shape, for tests and tuning.
pub async fn gemv_fused_tuned(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    fusion: GemvFusion<'_>,
    config: GemvConfig,
) -> Result<Dispatch> {
    let (_, mut config) = gemv_shape(&w.format, w.cols, Precision::F32, config);
    let fail = |message: String| Error::Shape { op: "gemv_fused", message };
    if fusion.swiglu {
        config = config.paired();
        let alone = !fusion.residual && !fusion.glu && fusion.at.is_none();
        if !gpu_gemv(&w.format, w.cols, Precision::F32, config) || !gate_up_pairs(w) || !alone {
            return Err(fail(format!("{} [{}, {}] in {} parts: the SwiGLU epilogue needs the GPU kernel, an even number of rows, one part \
                and no other epilogue", w.format.name(), w.rows, w.cols, w.parts.len())));
        }
    }
    records::check_fusion(w, y, &fusion, config)?;
    if fusion.int8 && !(int8_format(&w.format) && gpu_gemv(&w.format, w.cols, Precision::F32, config)) {
        return Err(fail(format!("{} [{}, {}]: 8-bit activations need weft weights or repacked planes, and the GPU kernel",
            w.format.name(), w.rows, w.cols)));
    }
    if fusion.glu {
        if !gpu_gemv(&w.format, w.cols, Precision::F32, config) || fusion.norm.is_some() || x.shape != [1, 2 * w.cols] {
            return Err(fail(format!("{} [{}, {}] with gate/up {}: SwiGLU staging needs the GPU kernel, no norm and x [1, {}]",
                w.format.name(), w.rows, w.cols, x.label_shape(), 2 * w.cols)));
        }
        // The product's own checks see the activation's logical shape; the kernel binds all of x.
        let logical = x.view(&[1, w.cols])?;
        return gemv_with(ctx, w, &logical, y, Precision::F32, config, fusion).await;
    }
    if !gemv_fuses(w) || x.shape.first() != Some(&1) {
        return Err(fail(format!("{} [{}, {}] with x {}: needs a block format, K a multiple of 4 and one token",
            w.format.name(), w.rows, w.cols, x.label_shape())));
    }
    if let Some((norm, _)) = fusion.norm {
        if norm.shape != [w.cols] || norm.dtype != DType::F32 {
            return Err(fail(format!("norm weight {} for K = {}", norm.label_shape(), w.cols)));
        }
    }
    if let Some(at) = fusion.at {
        if !matches!(y.shape[..], [1, ny] if at + w.rows <= ny) {
            return Err(fail(format!("{} rows at column {at} of y {}", w.rows, y.label_shape())));
        }
    }
    gemv_with(ctx, w, x, y, Precision::F32, config, fusion).await
}

async fn gemv_with(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    precision: Precision,
    config: GemvConfig,
    fusion: GemvFusion<'_>,
) -> Result<Dispatch> {
    // With `fusion.at` the product's own checks see its own columns; the kernel binds all of y.
    let own;
    let (y_own, at, ny) = match fusion.at {
        Some(at) => {
            own = y.view(&[1, w.rows])?;
            (&own, at, y.shape[1])
        }
        None => (y, 0, w.rows),
    };
    let n_out = if fusion.swiglu { w.rows / 2 } else { w.rows };
    let t = if fusion.records_in {
        // The product's own checks see x's logical shape.
        let t = records::check_records("gemv", x, w.cols)?;
        check_shapes("gemv", w, (&[t, w.cols], DType::F32), y_own, n_out)?
    } else {
        check_operands("gemv", w, x, y_own, n_out)?
    };
    check_precision(ctx, "gemv", precision)?;
    let (precision, config) = gemv_shape(&w.format, w.cols, precision, config);
    let GemvConfig { wg, rows, lanes } = config;
    if !wg.is_power_of_two() || rows == 0 || !lanes.is_power_of_two() || lanes > wg {
        return Err(Error::Shape { op: "gemv", message: format!("workgroup {wg}, rows {rows}, lanes {lanes}") });
    }
    // In a browser the pipeline cache adds `enable subgroups;` (see `GpuContext::pipeline`).
    let subgroup = Subgroups::of(ctx.capabilities());
    let gpu = gpu_gemv(&w.format, w.cols, precision, config);
    let (shader, mut defines) = if gpu {
        let d = gpu_gemv_defines(&w.format, config, subgroup);
        (&QGEMV_GPU_SHADER, if ctx.capabilities().f16_unpack_exact { d.set("F16_UNPACK", 1) } else { d })
    } else {
        (&QGEMV_SHADER, gemv_defines(&w.format, precision, config, w.cols, subgroup))
    };
    // The norm weight and the records out take the parameters' binding in turn; they move up.
    let mut pb = 3 + w.format.weight_bindings() - 1;
    if fusion.norm.is_some() {
        defines = defines.set("NORM", 1).set("NB", pb).set("PB", pb + 1);
        pb += 1;
    }
    if fusion.residual {
        defines = defines.set("RESIDUAL", 1);
    }
    if fusion.glu {
        defines = defines.set("GLU", 1);
    }
    if fusion.int8 {
        defines = defines.set("DP4", 1);
    }
    if fusion.swiglu {
        defines = defines.set("SWIGLU", 1);
    }
    if fusion.records_in {
        defines = defines.set("XREC", 1);
    }
    if let Some((_, order)) = fusion.records_out {
        defines = defines.set("XOUT", 1).set("XO_ORDER", order as u32).set("XB", pb).set("PB", pb + 1);
    }
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let per_group = config.rows_per_group(gpu || w.format.gemv_block().is_some());
    let part_params = |part: &QPart| {
        let [gx, gy, _] = grid((part.rows as u32).div_ceil(per_group), max);
        let mut p = params(w, part, t, gx, 0);
        (p[7], p[8]) = (p[7] + at as u32, ny as u32);
        if fusion.swiglu {
            // The kernel's n is the output's rows, the up rows' offset.
            (p[0], p[8]) = (p[0] / 2, n_out as u32);
        }
        if let Some((_, eps)) = fusion.norm {
            p[9] = eps.to_bits();
        }
        (p, [gx, gy, t])
    };
    let constant = fusion.constant_shape && gpu && w.parts.len() == 1;
    if constant {
        defines = shape_defines(defines, &part_params(&w.parts[0]).0);
    }
    let pipeline = ctx.pipeline(shader, &defines).await?;
    per_part(w, |part| {
        let (p, workgroups) = part_params(part);
        let mut tensors = bindings(part, x, y);
        if let Some((norm, _)) = fusion.norm {
            tensors.push(norm);
        }
        if let Some((out, _)) = fusion.records_out {
            tensors.push(out);
        }
        let uniform: Option<&[u8]> = (!constant).then(|| bytemuck::cast_slice(&p));
        ctx.dispatch(&pipeline, &tensors, uniform, workgroups)
    })
}

/// The GPU kernel's `SHAPE` defines: `Params` `p` of a weight's one part as constants of the
/// pipeline, which then binds no uniform (shaders/qgemv_gpu.wgsl).
fn shape_defines(d: Defines, p: &[u32; 12]) -> Defines {
    d.set("SHAPE", 1).set("SN", p[0]).set("SK", p[1]).set("ST", p[2]).set("SGX", p[3]).set("SWPR", p[4]).set("SGPR", p[5])
        .set("SROW0", p[7]).set("SNY", p[8]).set("SEPS", p[9])
}

/// [`gemv`] at F32 for up to [`GEMV_MAX_TOKENS`] tokens, [`gemm`] beyond: at F32 for the
/// formats with a block kernel (F32 only; on lavapipe it ran 3-6x faster than the f16 tiled
/// kernel) and on GPUs (the outer-product kernel is F32), else at [`Precision::best`] (see [`Precision`] for why GEMV does not use f16).
pub async fn qmatmul(ctx: &GpuContext, w: &QWeight, x: &GpuTensor, y: &GpuTensor) -> Result<Dispatch> {
    let f32_gemm = w.format.gemv_block().is_some() || !ctx.capabilities().is_software;
    let gemm_precision = if f32_gemm { Precision::F32 } else { Precision::best(ctx) };
    matmul(ctx, w, x, y, Precision::F32, gemm_precision).await
}

/// [`gemv`] for up to [`GEMV_MAX_TOKENS`] tokens, [`gemm`] beyond, each at the given precision.
pub async fn matmul(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    gemv_precision: Precision,
    gemm_precision: Precision,
) -> Result<Dispatch> {
    if x.shape.first().is_some_and(|&t| t <= GEMV_MAX_TOKENS) {
        gemv(ctx, w, x, y, gemv_precision).await
    } else {
        gemm(ctx, w, x, y, gemm_precision).await
    }
}

/// out[t, k] = row ids[t] of W, dequantized exactly as the CPU decoders do. `ids` is U32 [t];
/// an id of n or more yields a row of zeros.
pub async fn embed(ctx: &GpuContext, w: &QWeight, ids: &GpuTensor, out: &GpuTensor) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "embed", message };
    let (&[t], &[t2, k]) = (&ids.shape[..], &out.shape[..]) else {
        return Err(fail(format!("ids must be 1-D and out 2-D, got {:?} and {:?}", ids.shape, out.shape)));
    };
    if t != t2 || k != w.cols || ids.dtype != DType::U32 || out.dtype != DType::F32 {
        return Err(fail(format!(
            "ids {} of W [{}, {}] -> out {} does not fit",
            ids.label_shape(),
            w.rows,
            w.cols,
            out.label_shape()
        )));
    }
    let units = u32::try_from(t * k.div_ceil(8)).map_err(|_| fail("too many values".into()))?;
    let pipeline = ctx.pipeline(&QEMBED_SHADER, &embed_defines(&w.format)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let groups = grid(units.div_ceil(EMBED_WG).max(1), max);
    // Each part writes the rows it holds; the first also writes the zeros of ids past the end.
    per_part(w, |part| {
        let p = params(w, part, t as u32, groups[0], 0);
        ctx.dispatch(&pipeline, &bindings(part, ids, out), Some(bytemuck::cast_slice(&p)), groups)
    })
}
