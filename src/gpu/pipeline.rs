//! Compiled compute pipelines, cached by shader name + defines, and prepared dispatches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::shader::{browser_source, preprocess, Defines, ShaderSource};
use super::{GpuContext, GpuTensor, ShaderChecks, Uniform};
use crate::error::{Error, Result};

/// A compiled compute pipeline (entry point `main`, layout derived from the shader).
pub struct Pipeline {
    pub(crate) name: String,
    pub(crate) pipeline: wgpu::ComputePipeline,
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    compiled: Mutex<HashMap<(String, Defines), Arc<Pipeline>>>,
}

impl GpuContext {
    /// Returns the pipeline for `shader` under `defines`, compiling it on first use. A WGSL error
    /// comes back as [`Error::ShaderCompile`] naming the shader, never as a panic or a log line.
    pub async fn pipeline(&self, shader: &ShaderSource, defines: &Defines) -> Result<Arc<Pipeline>> {
        let key = (shader.name.to_string(), defines.clone());
        if let Some(p) = self.lock_pipelines().get(&key) {
            return Ok(p.clone());
        }
        let label = if defines.key().is_empty() {
            shader.name.to_string()
        } else {
            format!("{}[{}]", shader.name, defines.key())
        };
        let wgsl = if cfg!(target_arch = "wasm32") { browser_source(shader, defines)? } else { preprocess(shader, defines)? };
        let pipeline = Arc::new(self.compile_with(&label, &wgsl, self.shader_checks).await?);
        self.lock_pipelines().insert(key, pipeline.clone());
        Ok(pipeline)
    }

    /// Compiles WGSL that did not come from `shaders/` (tests, user kernels) the same checked way.
    pub async fn compile(&self, name: &str, wgsl: &str) -> Result<Pipeline> {
        self.compile_with(name, wgsl, ShaderChecks::All).await
    }

    async fn compile_with(&self, name: &str, wgsl: &str, checks: ShaderChecks) -> Result<Pipeline> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(wgsl.into()) };
        let module = if checks == ShaderChecks::None {
            let mut runtime = wgpu::ShaderRuntimeChecks::checked();
            runtime.bounds_checks = false;
            runtime.force_loop_bounding = false;
            // SAFETY: only weft's own kernels come here (`pipeline`, never `compile`). Their
            // workgroup and local arrays are indexed within constant bounds, their loops end at
            // counts the host checked when it made the tensors and uniforms, and their buffer
            // accesses stay bounded by the driver's robust buffer access. Integer division
            // keeps its check.
            unsafe { self.device.create_shader_module_trusted(desc, runtime) }
        } else {
            self.device.create_shader_module(desc)
        };
        let scope_error = scope.pop().await;
        let info = module.get_compilation_info().await;
        let messages: Vec<String> = info
            .messages
            .iter()
            .filter(|m| m.message_type == wgpu::CompilationMessageType::Error)
            .map(|m| match &m.location {
                Some(loc) => format!("{}:{}: {}", loc.line_number, loc.line_position, m.message),
                None => m.message.clone(),
            })
            .collect();
        if !messages.is_empty() || scope_error.is_some() {
            let message = if messages.is_empty() {
                scope_error.map(|e| e.to_string()).unwrap_or_default()
            } else {
                messages.join("\n")
            };
            return Err(Error::ShaderCompile { shader: name.to_string(), message });
        }

        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                zero_initialize_workgroup_memory: checks == ShaderChecks::All,
                ..Default::default()
            },
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(Error::PipelineCreate { shader: name.to_string(), message: e.to_string() });
        }
        Ok(Pipeline { name: name.to_string(), pipeline })
    }

    fn lock_pipelines(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, Defines), Arc<Pipeline>>> {
        // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
        self.pipelines.compiled.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Binds `tensors` (storage, in binding order 0..) and an optional uniform block (next
    /// binding) to `pipeline`, ready to be recorded any number of times.
    pub fn dispatch(
        &self,
        pipeline: &Arc<Pipeline>,
        tensors: &[&GpuTensor],
        params: Option<&[u8]>,
        workgroups: [u32; 3],
    ) -> Result<Dispatch> {
        self.dispatch_with(pipeline, tensors, params, &[], workgroups)
    }

    /// Like [`GpuContext::dispatch`], with shared uniform blocks (such as the per-step
    /// position) bound after the parameters.
    pub fn dispatch_with(
        &self,
        pipeline: &Arc<Pipeline>,
        tensors: &[&GpuTensor],
        params: Option<&[u8]>,
        shared: &[&Uniform],
        workgroups: [u32; 3],
    ) -> Result<Dispatch> {
        let max = self.capabilities().limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&w| w > max) {
            return Err(Error::Shape {
                op: "dispatch",
                message: format!(
                    "{}: {workgroups:?} workgroups exceed this GPU's {max} per dimension",
                    pipeline.name
                ),
            });
        }
        let uniform = params.map(|bytes| self.uniform(&pipeline.name, bytes));
        let mut entries: Vec<wgpu::BindGroupEntry> = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: t.buffer.as_entire_binding(),
            })
            .collect();
        let uniforms = uniform.iter().chain(shared.iter().map(|u| &u.buffer));
        for (i, u) in uniforms.enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: (tensors.len() + i) as u32,
                resource: u.as_entire_binding(),
            });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&pipeline.name),
            layout: &pipeline.pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        Ok(Dispatch { pipeline: pipeline.clone(), bind_group, workgroups, _uniform: uniform, then: Vec::new() })
    }
}

/// One kernel launch with its resources bound. Built once, recorded as often as needed, so a
/// steady-state step allocates nothing.
pub struct Dispatch {
    pipeline: Arc<Pipeline>,
    bind_group: wgpu::BindGroup,
    workgroups: [u32; 3],
    _uniform: Option<wgpu::Buffer>,
    /// Launches recorded right after this one, as one step (a weight stored in several parts).
    then: Vec<Dispatch>,
}

impl Dispatch {
    /// The pipeline's label: shader name and defines.
    pub fn name(&self) -> &str {
        &self.pipeline.name
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        let [x, y, z] = self.workgroups;
        pass.dispatch_workgroups(x, y, z);
        for d in &self.then {
            d.record(pass);
        }
    }

    /// One step that records `first`, then each of `rest` in order.
    pub fn sequence(mut first: Dispatch, rest: impl IntoIterator<Item = Dispatch>) -> Dispatch {
        first.then.extend(rest);
        first
    }
}
