//! Small convolutional networks (the MNIST dtype study's model): the description stored in the
//! file, the parameters it implies, and the forward pass on the GPU and on the CPU.

mod file;
mod forward;
pub mod study;

pub use file::{matrix_dims, CnnFile, StoredTensor, CONFIG_KEY, SCALED_PREFIX};
pub use forward::{cpu_forward, decode_on_gpu, CnnGpu};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ops::conv::Conv2d;

/// One step of the network, applied in order to a batch of inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CnnLayer {
    /// `y = x · Wᵀ + b`, W `{name}.weight` [outputs, inputs], b `{name}.bias` [outputs].
    Dense { name: String, inputs: usize, outputs: usize, relu: bool },
    /// Reinterprets each input as this shape (no data moves).
    Reshape { shape: Vec<usize> },
    /// W `{name}.weight` [out_channels, in_channels, kernel, kernel], b `{name}.bias`.
    Conv2d {
        name: String,
        in_channels: usize,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        relu: bool,
    },
    /// [c, h, w] to [c·h·w], channel-major (no data moves).
    Flatten,
    /// Over the last dimension.
    Softmax,
}

/// The network: the shape of one input and the layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CnnConfig {
    pub input: Vec<usize>,
    pub layers: Vec<CnnLayer>,
}

/// A layer with the input shape it sees, as the forward passes run it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    Dense {
        name: String,
        inputs: usize,
        outputs: usize,
        relu: bool,
    },
    Conv {
        name: String,
        geo: Conv2d,
        relu: bool,
    },
    /// The shape of one item after a reshape or flatten.
    View(Vec<usize>),
    Softmax,
}

impl CnnConfig {
    /// Walks the layers, checking that each fits the shape it receives.
    pub(crate) fn steps(&self) -> Result<Vec<Step>> {
        let fail = |i: usize, message: String| Error::Model(format!("{CONFIG_KEY} layer {i}: {message}"));
        let mut shape = self.input.clone();
        if shape.is_empty() || shape.contains(&0) || shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none() {
            return Err(Error::Model(format!("{CONFIG_KEY}: input shape {shape:?} is empty or too large")));
        }
        let mut steps = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            let size: usize = shape.iter().product();
            match layer {
                CnnLayer::Dense { name, inputs, outputs, relu } => {
                    if shape.len() != 1 || shape[0] != *inputs || *outputs == 0 {
                        return Err(fail(i, format!("dense {name} takes [{inputs}], gets {shape:?}")));
                    }
                    steps.push(Step::Dense { name: name.clone(), inputs: *inputs, outputs: *outputs, relu: *relu });
                    shape = vec![*outputs];
                }
                CnnLayer::Reshape { shape: to } => {
                    if to.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(size) || to.is_empty() {
                        return Err(fail(i, format!("cannot reshape {shape:?} to {to:?}")));
                    }
                    shape = to.clone();
                    steps.push(Step::View(shape.clone()));
                }
                CnnLayer::Flatten => {
                    shape = vec![size];
                    steps.push(Step::View(shape.clone()));
                }
                CnnLayer::Conv2d { name, in_channels, out_channels, kernel, stride, padding, relu } => {
                    let &[c, h, w] = &shape[..] else {
                        return Err(fail(i, format!("conv2d {name} takes [c, h, w], gets {shape:?}")));
                    };
                    let geo = Conv2d {
                        in_c: c,
                        in_h: h,
                        in_w: w,
                        out_c: *out_channels,
                        kernel: *kernel,
                        stride: *stride,
                        padding: *padding,
                    };
                    let out = geo.out_hw().filter(|_| c == *in_channels && *out_channels > 0);
                    let Some((oh, ow)) = out else {
                        return Err(fail(i, format!("conv2d {name} does not fit input {shape:?}")));
                    };
                    steps.push(Step::Conv { name: name.clone(), geo, relu: *relu });
                    shape = vec![*out_channels, oh, ow];
                }
                CnnLayer::Softmax => steps.push(Step::Softmax),
            }
        }
        Ok(steps)
    }

    /// Every parameter with its shape, in layer order.
    pub fn parameters(&self) -> Result<Vec<(String, Vec<usize>)>> {
        let mut out = Vec::new();
        for step in self.steps()? {
            let (name, w, b) = match step {
                Step::Dense { name, inputs, outputs, .. } => (name, vec![outputs, inputs], outputs),
                Step::Conv { name, geo, .. } => (name, geo.weight_shape().to_vec(), geo.out_c),
                _ => continue,
            };
            if w.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none_or(|n| n > u32::MAX as usize) {
                return Err(Error::Model(format!("{name}.weight: shape {w:?} is too large")));
            }
            out.push((format!("{name}.weight"), w));
            out.push((format!("{name}.bias"), vec![b]));
        }
        Ok(out)
    }

    /// Values per input item and per output item.
    pub fn io_sizes(&self) -> Result<(usize, usize)> {
        let mut last = self.input.iter().product();
        for step in self.steps()? {
            last = match step {
                Step::Dense { outputs, .. } => outputs,
                Step::Conv { geo, .. } => geo.out_shape(1).map_or(0, |s| s.iter().product()),
                Step::View(s) => s.iter().product(),
                Step::Softmax => last,
            };
        }
        Ok((self.input.iter().product(), last))
    }
}
