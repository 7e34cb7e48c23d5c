//! Copying GPU results back to the CPU on both targets.
//!
//! The map callback is awaited through a channel. Natively `poll` drives it to completion; in the
//! browser `poll` does nothing and the callback fires from the event loop while we await, so the
//! same code serves both.

use super::{DType, GpuContext, GpuTensor};
use crate::error::{Error, Result};

impl GpuContext {
    /// Reads an f32 tensor back.
    pub async fn read_f32(&self, tensor: &GpuTensor) -> Result<Vec<f32>> {
        self.expect_dtype(tensor, DType::F32)?;
        let bytes = self.read_bytes(&tensor.buffer, tensor.len() as u64 * 4).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Reads a u32 tensor back.
    pub async fn read_u32(&self, tensor: &GpuTensor) -> Result<Vec<u32>> {
        self.expect_dtype(tensor, DType::U32)?;
        let bytes = self.read_bytes(&tensor.buffer, tensor.len() as u64 * 4).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    fn expect_dtype(&self, tensor: &GpuTensor, dtype: DType) -> Result<()> {
        if tensor.dtype != dtype {
            return Err(Error::Shape {
                op: "readback",
                message: format!("asked for {dtype:?}, tensor is {}", tensor.label_shape()),
            });
        }
        Ok(())
    }

    /// Copies the first `len` bytes of `buffer` into a staging buffer and maps it.
    pub async fn read_bytes(&self, buffer: &wgpu::Buffer, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let label = format!("readback {len} bytes");
        let fail = |message: String| Error::Readback { label: label.clone(), message };
        let size = len.div_ceil(wgpu::COPY_BUFFER_ALIGNMENT) * wgpu::COPY_BUFFER_ALIGNMENT;
        if size > buffer.size() {
            return Err(fail(format!("buffer holds only {} bytes", buffer.size())));
        }
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&label),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(&label) });
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.queue.submit([encoder.finish()]);

        let (tx, rx) = futures_channel::oneshot::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            // The receiver only disappears if the caller was dropped; nothing to report then.
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| fail(format!("waiting for the GPU: {e}")))?;
        let mapped = rx.await;
        self.check()?;
        mapped
            .map_err(|_| fail("the map callback never ran".into()))?
            .map_err(|e| fail(e.to_string()))?;
        let data = {
            let view = staging.slice(..).get_mapped_range().map_err(|e| fail(e.to_string()))?;
            view[..len as usize].to_vec()
        };
        staging.unmap();
        Ok(data)
    }
}

/// A recorded, not yet submitted step (see [`GpuContext::encode_step`]).
pub struct StepCommands {
    commands: wgpu::CommandBuffer,
    size: u64,
}

/// A submitted step whose result has not been read yet.
pub struct Submitted {
    size: u64,
    index: wgpu::SubmissionIndex,
}

/// A mapped-readable buffer made once and reused, so that reading a token id each step
/// allocates nothing.
pub struct ReadSlot {
    buffer: wgpu::Buffer,
}

impl GpuContext {
    pub fn read_slot(&self, label: &str, bytes: u64) -> ReadSlot {
        let size = bytes.div_ceil(wgpu::COPY_BUFFER_ALIGNMENT).max(1) * wgpu::COPY_BUFFER_ALIGNMENT;
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        ReadSlot { buffer }
    }

    /// Records `dispatches` in one compute pass, copies the first words of `tensor` into
    /// `slot` in the same command buffer, submits once and returns those words.
    pub async fn run_and_read_u32(
        &self,
        dispatches: &[super::Dispatch],
        tensor: &GpuTensor,
        slot: &ReadSlot,
    ) -> Result<Vec<u32>> {
        let submitted = self.submit_step(self.encode_step(dispatches, tensor, slot));
        self.read_step(slot, submitted).await
    }

    /// The commands of [`GpuContext::run_and_read_u32`], recorded but not submitted: a step
    /// whose inputs stay on the GPU can be recorded while the previous one runs.
    pub fn encode_step(&self, dispatches: &[super::Dispatch], tensor: &GpuTensor, slot: &ReadSlot) -> StepCommands {
        let size = slot.buffer.size().min(tensor.bytes());
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("weft step") });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("weft step"),
                timestamp_writes: None,
            });
            for d in dispatches {
                d.record(&mut pass);
            }
        }
        encoder.copy_buffer_to_buffer(&tensor.buffer, 0, &slot.buffer, 0, size);
        StepCommands { commands: encoder.finish(), size }
    }

    /// Submits a recorded step; [`GpuContext::read_step`] then waits for its result.
    pub fn submit_step(&self, step: StepCommands) -> Submitted {
        let index = self.queue.submit([step.commands]);
        Submitted { size: step.size, index }
    }

    /// Waits for a submitted step (not for work submitted after it) and returns the words it
    /// copied into `slot`.
    pub async fn read_step(&self, slot: &ReadSlot, submitted: Submitted) -> Result<Vec<u32>> {
        let size = submitted.size;
        let fail = |message: String| Error::Readback { label: "step".into(), message };
        let (tx, rx) = futures_channel::oneshot::channel();
        slot.buffer.slice(..size).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::Wait { submission_index: Some(submitted.index), timeout: None })
            .map_err(|e| fail(format!("waiting for the GPU: {e}")))?;
        let mapped = rx.await;
        self.check()?;
        mapped.map_err(|_| fail("the map callback never ran".into()))?.map_err(|e| fail(e.to_string()))?;
        let words = {
            let view = slot.buffer.slice(..size).get_mapped_range().map_err(|e| fail(e.to_string()))?;
            bytemuck::pod_collect_to_vec(&view[..])
        };
        slot.buffer.unmap();
        Ok(words)
    }
}
