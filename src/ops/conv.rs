//! 2-D convolution over NCHW activations with [out_c, in_c, k, k] weights, bias included.

use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{DType, Dispatch, GpuContext, GpuTensor};

use super::{grid, Tolerance};

pub const CONV2D_SHADER: ShaderSource =
    ShaderSource { name: "conv2d", source: &[wgsl!("conv2d.wgsl")] };

const WG: u32 = 256;

/// One f32 sum of `taps` products (in_c · k · k) against the f64 reference: the rounding error of
/// sequential summation grows with the number of terms, as for [`super::matmul::matmul_tolerance`].
pub fn conv2d_tolerance(taps: usize) -> Tolerance {
    Tolerance { abs: 2e-7 * taps.max(16) as f64, rel: 1e-5 }
}

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    vec![(CONV2D_SHADER, Defines::new().set("WG", WG))]
}

/// The geometry of one convolution: square kernel, equal stride and zero padding on both axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2d {
    pub in_c: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub out_c: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
}

impl Conv2d {
    /// Output height and width, or None when the kernel does not fit the padded input.
    pub fn out_hw(&self) -> Option<(usize, usize)> {
        let span = |n: usize| {
            let padded = n + 2 * self.padding;
            (self.stride > 0 && self.kernel > 0 && padded >= self.kernel)
                .then(|| (padded - self.kernel) / self.stride + 1)
        };
        Some((span(self.in_h)?, span(self.in_w)?))
    }

    pub fn weight_shape(&self) -> [usize; 4] {
        [self.out_c, self.in_c, self.kernel, self.kernel]
    }

    /// Output shape for `batch` inputs: [batch, out_c, out_h, out_w].
    pub fn out_shape(&self, batch: usize) -> Option<[usize; 4]> {
        let (h, w) = self.out_hw()?;
        Some([batch, self.out_c, h, w])
    }
}

/// `out = conv2d(x, w) + bias`: x [batch, in_c, in_h, in_w], w [out_c, in_c, k, k], bias [out_c],
/// out [batch, out_c, out_h, out_w], all F32.
pub async fn conv2d(
    ctx: &GpuContext,
    geo: &Conv2d,
    x: &GpuTensor,
    w: &GpuTensor,
    bias: &GpuTensor,
    out: &GpuTensor,
) -> Result<Dispatch> {
    let fail = |message: String| Error::Shape { op: "conv2d", message };
    let batch = match &x.shape[..] {
        &[b, c, h, wd] if c == geo.in_c && h == geo.in_h && wd == geo.in_w => b,
        _ => return Err(fail(format!("x {} does not match {geo:?}", x.label_shape()))),
    };
    let Some(out_shape) = geo.out_shape(batch) else {
        return Err(fail(format!("kernel {} does not fit the padded input in {geo:?}", geo.kernel)));
    };
    if w.len() != geo.weight_shape().iter().product::<usize>() || w.shape.first() != Some(&geo.out_c) {
        return Err(fail(format!("w {} is not {:?}", w.label_shape(), geo.weight_shape())));
    }
    if bias.len() != geo.out_c || out.shape != out_shape {
        return Err(fail(format!(
            "bias {} and out {} must be [{}] and {out_shape:?}",
            bias.label_shape(),
            out.label_shape(),
            geo.out_c
        )));
    }
    if [x, w, bias, out].iter().any(|t| t.dtype != DType::F32) {
        return Err(fail("all operands must be F32".into()));
    }
    let n = u32::try_from(out.len()).map_err(|_| fail(format!("{out_shape:?} exceeds u32")))?;
    let dims =
        [geo.in_c, geo.in_h, geo.in_w, geo.out_c, out_shape[2], out_shape[3], geo.kernel, geo.stride, geo.padding];
    let mut words = [0u32; 9];
    for (word, d) in words.iter_mut().zip(dims) {
        *word = u32::try_from(d).map_err(|_| fail(format!("{geo:?} exceeds u32")))?;
    }
    let pipeline = ctx.pipeline(&CONV2D_SHADER, &Defines::new().set("WG", WG)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    let groups = grid(n.div_ceil(WG), max);
    let mut params = vec![n, groups[0] * WG];
    params.extend(words);
    params.push(0);
    ctx.dispatch(&pipeline, &[x, w, bias, out], Some(bytemuck::cast_slice(&params)), groups)
}

/// CPU reference in f64 for `batch` inputs laid out as [`conv2d`]'s.
pub fn conv2d_cpu(geo: &Conv2d, batch: usize, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f64> {
    let Some((oh, ow)) = geo.out_hw() else { return Vec::new() };
    let k = geo.kernel;
    let mut out = Vec::with_capacity(batch * geo.out_c * oh * ow);
    for b in 0..batch {
        for o in 0..geo.out_c {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut acc = 0f64;
                    for c in 0..geo.in_c {
                        let plane = &x[(b * geo.in_c + c) * geo.in_h * geo.in_w..];
                        let taps = &w[(o * geo.in_c + c) * k * k..];
                        for ky in 0..k {
                            let Some(iy) = (y * geo.stride + ky).checked_sub(geo.padding) else { continue };
                            if iy >= geo.in_h {
                                continue;
                            }
                            for kx in 0..k {
                                let Some(ix) = (xo * geo.stride + kx).checked_sub(geo.padding) else { continue };
                                if ix < geo.in_w {
                                    acc += plane[iy * geo.in_w + ix] as f64 * taps[ky * k + kx] as f64;
                                }
                            }
                        }
                    }
                    out.push(acc + bias[o] as f64);
                }
            }
        }
    }
    out
}
