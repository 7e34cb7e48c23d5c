//! GPU tensors: a storage buffer plus its logical shape and element type.

use wgpu::util::DeviceExt;

use super::GpuContext;
use crate::error::{Error, Result};

/// Element type of a GPU tensor as the kernels see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    /// Raw 32-bit words: packed quantized blocks, ids, half-precision pairs.
    U32,
}

impl DType {
    pub fn size(self) -> usize {
        4
    }
}

/// A storage buffer with a logical row-major shape.
pub struct GpuTensor {
    pub(crate) buffer: wgpu::Buffer,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl GpuTensor {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn bytes(&self) -> u64 {
        self.buffer.size()
    }

    /// The same buffer under another shape of at most as many elements: activations are made
    /// once for the largest batch and viewed at each batch's size.
    pub fn view(&self, shape: &[usize]) -> Result<GpuTensor> {
        let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let capacity = (self.buffer.size() / self.dtype.size() as u64) as usize;
        match count {
            Some(n) if n <= capacity => {
                Ok(GpuTensor { buffer: self.buffer.clone(), shape: shape.to_vec(), dtype: self.dtype })
            }
            _ => Err(Error::Shape {
                op: "view",
                message: format!("{shape:?} does not fit a buffer of {capacity} elements"),
            }),
        }
    }

    pub fn label_shape(&self) -> String {
        format!("{:?} {:?}", self.dtype, self.shape)
    }
}

/// A uniform block rewritten between submissions.
pub struct Uniform {
    pub(crate) buffer: wgpu::Buffer,
}

const USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl GpuContext {
    fn check_size(&self, label: &str, bytes: u64) -> Result<()> {
        let limits = &self.capabilities().limits;
        let (limit, what) = if limits.max_storage_buffer_binding_size < limits.max_buffer_size {
            (limits.max_storage_buffer_binding_size, "storage binding")
        } else {
            (limits.max_buffer_size, "buffer")
        };
        if bytes > limit {
            return Err(Error::BufferTooLarge { label: label.to_string(), bytes, limit, what });
        }
        Ok(())
    }

    fn element_count(label: &str, shape: &[usize]) -> Result<usize> {
        shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| Error::Shape {
            op: "tensor",
            message: format!("{label}: shape {shape:?} overflows"),
        })
    }

    /// Uploads `data` (row-major, `shape`) as an f32 tensor.
    pub fn upload_f32(&self, label: &str, shape: &[usize], data: &[f32]) -> Result<GpuTensor> {
        self.upload(label, shape, DType::F32, bytemuck::cast_slice(data), data.len())
    }

    /// Uploads raw 32-bit words.
    pub fn upload_u32(&self, label: &str, shape: &[usize], data: &[u32]) -> Result<GpuTensor> {
        self.upload(label, shape, DType::U32, bytemuck::cast_slice(data), data.len())
    }

    /// Uploads raw bytes as little-endian 32-bit words (the last one zero-padded), without a
    /// second copy of them in memory: loading a model stays near its largest tensor.
    pub fn upload_bytes_as_u32(&self, label: &str, bytes: &[u8]) -> Result<GpuTensor> {
        let words = bytes.len().div_ceil(4);
        self.upload(label, &[words], DType::U32, bytes, words)
    }

    fn upload(
        &self,
        label: &str,
        shape: &[usize],
        dtype: DType,
        bytes: &[u8],
        len: usize,
    ) -> Result<GpuTensor> {
        let count = Self::element_count(label, shape)?;
        if count != len {
            return Err(Error::Shape {
                op: "upload",
                message: format!("{label}: shape {shape:?} holds {count} elements, data has {len}"),
            });
        }
        self.check_size(label, bytes.len() as u64)?;
        // wgpu rejects zero-sized storage bindings; an empty tensor still gets one word. Copies
        // are in whole words.
        let size = (bytes.len() as u64).div_ceil(4).max(1) * 4;
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: USAGE,
            mapped_at_creation: false,
        });
        // write_buffer rather than a buffer mapped at creation: in the browser a mapped range is
        // a second copy of the tensor in wasm memory, while writeBuffer reads the bytes in place.
        let whole = bytes.len() / 4 * 4;
        if whole > 0 {
            self.queue.write_buffer(&buffer, 0, &bytes[..whole]);
        }
        if whole < bytes.len() {
            let mut tail = [0u8; 4];
            tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
            self.queue.write_buffer(&buffer, whole as u64, &tail);
        }
        Ok(GpuTensor { buffer, shape: shape.to_vec(), dtype })
    }

    /// One u32 tensor holding the first `words` words of each of `parts` in order, copied on
    /// the GPU (stacking weights that were uploaded separately).
    pub fn concat_words(&self, label: &str, parts: &[(&GpuTensor, usize)]) -> Result<GpuTensor> {
        let total: usize = parts.iter().map(|&(_, w)| w).sum();
        if let Some((t, w)) = parts.iter().find(|&&(t, w)| w > t.len()) {
            return Err(Error::Shape {
                op: "concat",
                message: format!("{label}: {w} words from {}", t.label_shape()),
            });
        }
        let out = self.zeros(label, &[total], DType::U32)?;
        let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        let mut at = 0u64;
        for &(t, words) in parts {
            let bytes = words as u64 * 4;
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(&t.buffer, 0, &out.buffer, at, bytes);
            }
            at += bytes;
        }
        self.queue.submit([encoder.finish()]);
        Ok(out)
    }

    /// A zero-filled tensor, typically a kernel's output.
    pub fn zeros(&self, label: &str, shape: &[usize], dtype: DType) -> Result<GpuTensor> {
        let count = Self::element_count(label, shape)?;
        let bytes = (count.max(1) as u64).checked_mul(dtype.size() as u64).ok_or_else(|| {
            Error::Shape { op: "zeros", message: format!("{label}: {shape:?} overflows") }
        })?;
        self.check_size(label, bytes)?;
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: USAGE,
            mapped_at_creation: false,
        });
        Ok(GpuTensor { buffer, shape: shape.to_vec(), dtype })
    }

    /// A uniform block the caller rewrites between submissions (positions, token counts): one
    /// buffer made at load, updated with `write_uniform`, so a step allocates nothing.
    pub fn uniform_block(&self, label: &str, bytes: usize) -> Uniform {
        let size = (bytes.div_ceil(16).max(1) * 16) as u64;
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Uniform { buffer }
    }

    /// Queues new contents for `uniform`; they take effect at the next submission.
    pub fn write_uniform(&self, uniform: &Uniform, bytes: &[u8]) {
        self.queue.write_buffer(&uniform.buffer, 0, bytes);
    }

    /// Queues new contents for `tensor` from element `offset` on.
    pub fn write_tensor(&self, tensor: &GpuTensor, offset: usize, bytes: &[u8]) -> Result<()> {
        let start = offset as u64 * tensor.dtype.size() as u64;
        if start + bytes.len() as u64 > tensor.bytes() || !bytes.len().is_multiple_of(4) {
            return Err(Error::Shape {
                op: "write_tensor",
                message: format!("{} bytes at element {offset} into {}", bytes.len(), tensor.label_shape()),
            });
        }
        self.queue.write_buffer(&tensor.buffer, start, bytes);
        Ok(())
    }

    /// A uniform buffer holding `bytes` (kernel parameters), padded to 16 bytes.
    pub(crate) fn uniform(&self, label: &str, bytes: &[u8]) -> wgpu::Buffer {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(16).max(1) * 16, 0);
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: &padded,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        })
    }
}
