//! GPU time of each dispatch from timestamp queries, where the adapter has them: every dispatch
//! gets its own compute pass with beginning and end timestamps, so the figures include no CPU
//! time and no wait for the readback.

use super::{Dispatch, GpuContext};
use crate::error::{Error, Result};

impl GpuContext {
    /// Nanoseconds of GPU time of each dispatch, run in order in one submission, or `None` when
    /// the device has no timestamp queries.
    pub async fn time_dispatches(&self, dispatches: &[&Dispatch]) -> Result<Option<Vec<f64>>> {
        if !self.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) || dispatches.is_empty() {
            return Ok(None);
        }
        // WebGPU caps a query set at 4096 entries: two per dispatch.
        let mut out = Vec::with_capacity(dispatches.len());
        for chunk in dispatches.chunks(2048) {
            out.extend(self.time_chunk(chunk).await?);
        }
        Ok(Some(out))
    }

    /// Nanoseconds of GPU time of `dispatches` recorded into one compute pass (timestamps at
    /// the pass's beginning and end, so the CPU's recording is not counted), or `None` when
    /// the device has no timestamp queries.
    pub async fn time_pass(&self, dispatches: &[&Dispatch]) -> Result<Option<f64>> {
        if !self.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Ok(None);
        }
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("weft pass timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolved = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("weft pass timestamps resolved"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut encoder =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("weft timed pass") });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("weft timed pass"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            for d in dispatches {
                d.record(&mut pass);
            }
        }
        encoder.resolve_query_set(&set, 0..2, &resolved, 0);
        self.queue.submit([encoder.finish()]);
        let raw = self.read_bytes(&resolved, 16).await?;
        self.check()?;
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&raw);
        let period = f64::from(self.queue.get_timestamp_period());
        if period <= 0.0 {
            return Err(Error::Gpu("the adapter reports a timestamp period of 0".into()));
        }
        Ok(Some(ticks[1].saturating_sub(ticks[0]) as f64 * period))
    }

    async fn time_chunk(&self, dispatches: &[&Dispatch]) -> Result<Vec<f64>> {
        let count = 2 * dispatches.len() as u32;
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("weft timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let bytes = u64::from(count) * 8;
        let resolved = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("weft timestamps resolved"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut encoder =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("weft timed run") });
        for (i, d) in dispatches.iter().enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(d.name()),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            d.record(&mut pass);
        }
        encoder.resolve_query_set(&set, 0..count, &resolved, 0);
        self.queue.submit([encoder.finish()]);
        let raw = self.read_bytes(&resolved, bytes).await?;
        self.check()?;
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&raw);
        let period = f64::from(self.queue.get_timestamp_period());
        if period <= 0.0 {
            return Err(Error::Gpu("the adapter reports a timestamp period of 0".into()));
        }
        Ok(ticks.chunks_exact(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period).collect())
    }
}
