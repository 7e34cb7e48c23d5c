//! What a decode-step GEMV does besides the product: the fusions [`super::gemv_fused`] takes.

use super::records;
use crate::gpu::GpuTensor;

/// What a fused GEMV does besides the product (see [`super::gemv_fused`]).
#[derive(Clone, Copy, Default)]
pub struct GemvFusion<'a> {
    /// RMS-normalise x first with this weight [k] and epsilon.
    pub norm: Option<(&'a GpuTensor, f32)>,
    /// Add the product to y instead of storing it.
    pub residual: bool,
    /// x is the stacked gate/up product [t, 2k]; the GEMV reads `silu(gate) * up` (the GPU
    /// kernel only: see [`super::gemv_glu`]).
    pub glu: bool,
    /// Activations quantized to 8 bits per 32-value chunk while staged, products by packed
    /// integer dot products (shaders/gemv_dp4.wgsl): weft weights of every width and the repacked
    /// planes, on the GPU kernel only, see [`super::gemv_int8`].
    pub int8: bool,
    /// The product is columns `at .. at + n` of a wider y [1, ny] (y's row offset and stride in
    /// the kernels' params): products kept apart write into one buffer laid out as their
    /// stacked product's output, so that what reads the stacked output reads theirs.
    pub at: Option<usize>,
    /// W is the stacked gate/up weight [2h, k] (gate rows first) and y [t, h] receives
    /// `silu(gate) * up`: each lane group takes gate rows and their up rows, so the SwiGLU is
    /// the product's epilogue (the GPU kernel, a weight of one part: see [`super::gemv_swiglu`]).
    pub swiglu: bool,
    /// With `swiglu`: the output also as 8-bit activation records in this tensor (U32 [t, n / 32,
    /// 12]), in the order the next GEMV reads ([`records`]): at launch shapes whose workgroups
    /// own whole chunks ([`records::writes_records`]), n a multiple of 32.
    pub records_out: Option<(&'a GpuTensor, records::RecordOrder)>,
    /// x is 8-bit activation records (U32 [t, k / 32, 12]) written in this weight's
    /// [`records::RecordOrder`], with `int8`: the GEMV stages nothing (no norm, no GLU).
    pub records_in: bool,
    /// The weight's shape (and the norm's epsilon) compiled into a pipeline of its own instead
    /// of passed in a uniform (the GPU kernel, a weight of one part; otherwise ignored): the
    /// decode step's GEMVs then wait for no uniform before their first weight load. The same
    /// arithmetic (tests/gemv_shape_constants.rs); a pipeline per weight shape.
    pub constant_shape: bool,
}
