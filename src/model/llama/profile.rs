//! Where a decode step's time goes: wall time per dispatch run alone, or the CPU/GPU split of a
//! whole step with each kernel's GPU time from timestamp queries.

use super::{web_time_now, Llama};
use crate::error::Result;
use crate::gpu::{Dispatch, GpuContext};
use crate::ops::rope::step_bytes;

/// Where a decode step's time goes (see [`Llama::profile_step`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepProfile {
    pub dispatches: usize,
    /// CPU: recording the step's dispatches and submitting them (median).
    pub record_submit_ms: f64,
    /// From submission to the result being readable on the CPU (median).
    pub wait_ms: f64,
    /// GPU time per pipeline, summed over the step: (name, µs, dispatches). Empty without
    /// timestamp queries.
    pub kernels_us: Vec<(String, f64, usize)>,
    /// GPU time of the whole step recorded as the decode loop records it, in one compute pass
    /// (median µs). Against the decode loop's time per token it says how much of a step is not
    /// the GPU's work (submission, the gap between queued steps). `None` without timestamp
    /// queries.
    pub pass_us: Option<f64>,
}

impl Llama {
    /// Wall time of each decode dispatch run alone (submitted and waited for one at a time),
    /// summed by pipeline: where a step's time goes on adapters without timestamp queries.
    pub async fn profile_decode(&self, ctx: &GpuContext, reps: usize) -> Result<Vec<(String, f64, usize)>> {
        let mut by_name: Vec<(String, f64, usize)> = Vec::new();
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, 1));
        for d in self.decode_at(self.pos).1 {
            let started = web_time_now();
            for _ in 0..reps {
                ctx.run(&[d]);
            }
            ctx.read_u32(&self.chosen).await?;
            let ms = (web_time_now() - started) / reps as f64;
            match by_name.iter_mut().find(|(n, _, _)| n == d.name()) {
                Some(e) => {
                    e.1 += ms;
                    e.2 += 1;
                }
                None => by_name.push((d.name().to_string(), ms, 1)),
            }
        }
        by_name.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(by_name)
    }

    /// A decode step's cost, split: CPU time to record and submit it, the wait for its result,
    /// and (with timestamp queries) each kernel's GPU time summed by pipeline.
    pub async fn profile_step(&self, ctx: &GpuContext, reps: usize) -> Result<StepProfile> {
        ctx.write_uniform(&self.step, &step_bytes(self.pos as u32, 1));
        let decode = self.decode_at(self.pos).1;
        let refs: Vec<&Dispatch> = decode.iter().collect();
        let (mut record, mut wait) = (Vec::new(), Vec::new());
        for _ in 0..reps.max(1) {
            let t0 = web_time_now();
            ctx.run(&refs);
            let t1 = web_time_now();
            ctx.read_u32(&self.chosen).await?;
            record.push(t1 - t0);
            wait.push(web_time_now() - t1);
        }
        let mut kernels: Vec<(String, f64, usize)> = Vec::new();
        if let Some(ns) = ctx.time_dispatches(&refs).await? {
            for (d, ns) in decode.iter().zip(ns) {
                match kernels.iter_mut().find(|(n, _, _)| n == d.name()) {
                    Some(e) => {
                        e.1 += ns / 1e3;
                        e.2 += 1;
                    }
                    None => kernels.push((d.name().to_string(), ns / 1e3, 1)),
                }
            }
            kernels.sort_by(|a, b| b.1.total_cmp(&a.1));
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mut passes = Vec::new();
        for _ in 0..reps.max(1) {
            match ctx.time_pass(&refs).await? {
                Some(ns) => passes.push(ns / 1e3),
                None => break,
            }
        }
        Ok(StepProfile {
            dispatches: refs.len(),
            record_submit_ms: median(&mut record),
            wait_ms: median(&mut wait),
            kernels_us: kernels,
            pass_us: (!passes.is_empty()).then(|| median(&mut passes)),
        })
    }
}
