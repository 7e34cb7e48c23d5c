//! Kernel families: each module checks shapes, prepares dispatches and carries the CPU
//! reference its tests compare against. Ops know tensors and shapes, never model names.

pub mod attention;
pub mod conv;
pub mod dequant;
pub mod elementwise;
pub mod encoder_attention;
pub mod gelu;
pub mod kv;
pub mod layernorm;
pub mod matmul;
pub mod norm;
pub mod pool;
pub mod prefill_attention;
pub mod qmatmul;
pub mod quantize;
pub mod repack;
pub mod rope;
pub mod sample;
pub mod softmax;

/// The WGSL fragments several kernels concatenate after their own file (see [`ShaderSource`](
/// crate::gpu::shader::ShaderSource)): each is one `const`, so the binary holds one copy.
pub(crate) mod fragments {
    pub const QPARAMS: &str = wgsl!("qparams.wgsl");
    pub const GEMV_NORM: &str = wgsl!("gemv_norm.wgsl");
    pub const GEMV_ROWSUM: &str = wgsl!("gemv_rowsum.wgsl");
    pub const QWEIGHT: &str = wgsl!("qweight.wgsl");
    pub const QBLOCK: &str = wgsl!("qblock.wgsl");
    pub const QBLOCK_K: &str = wgsl!("qblock_k.wgsl");
    pub const DECODE: &str = wgsl!("decode.wgsl");
    pub const ROPE_PAIR: &str = wgsl!("rope_pair.wgsl");
    pub const ATTENTION_COMMON: &str = wgsl!("attention_common.wgsl");
    pub const ATTENTION_MERGE: &str = wgsl!("attention_merge.wgsl");
    pub const ATTENTION_PARTIAL: &str = wgsl!("attention_partial.wgsl");
    pub const GEMV_DP4: &str = wgsl!("gemv_dp4.wgsl");
    pub const XRECORD: &str = wgsl!("xrecord.wgsl");
}

use crate::gpu::shader::{Defines, ShaderSource};

/// Every shader with every define set weft may compile it with; `cargo test` validates each
/// one with naga, so a WGSL mistake fails the build's tests rather than a user's page.
pub fn shader_variants() -> Vec<(ShaderSource, Defines)> {
    let mut all = Vec::new();
    all.extend(dequant::variants());
    all.extend(elementwise::variants());
    all.extend(matmul::variants());
    all.extend(qmatmul::variants());
    all.extend(softmax::variants());
    all.extend(norm::variants());
    all.extend(rope::variants());
    all.extend(attention::variants());
    all.extend(prefill_attention::variants());
    all.extend(sample::variants());
    all.extend(conv::variants());
    all.extend(layernorm::variants());
    all.extend(gelu::variants());
    all.extend(encoder_attention::variants());
    all.extend(pool::variants());
    all.extend(quantize::variants());
    all.extend(repack::variants());
    all.push((crate::gpu::F16_PROBE_SHADER, Defines::default()));
    all
}

/// How close a GPU result must be to its CPU reference: |got - want| <= abs + rel * |want|.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
}

/// The largest deviations seen in one comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deviation {
    pub max_abs: f64,
    pub max_rel: f64,
    /// Index of the element furthest outside (or closest to) the tolerance.
    pub worst_index: usize,
    pub within: bool,
}

impl Tolerance {
    /// Bit-for-bit equality (NaN equal to NaN of the same bits).
    pub const EXACT: Tolerance = Tolerance { abs: 0.0, rel: 0.0 };

    pub fn compare(&self, got: &[f32], want: &[f64]) -> Deviation {
        let mut dev = Deviation { within: got.len() == want.len(), ..Default::default() };
        let mut worst_ratio = f64::NEG_INFINITY;
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let err = if g as f64 == w || (g.is_nan() && w.is_nan()) {
                0.0
            } else {
                let e = (g as f64 - w).abs();
                if e.is_nan() { f64::INFINITY } else { e }
            };
            let allowed = self.abs + self.rel * w.abs();
            dev.max_abs = dev.max_abs.max(err);
            if w != 0.0 {
                dev.max_rel = dev.max_rel.max(err / w.abs());
            }
            let ratio = if allowed > 0.0 { err / allowed } else if err > 0.0 { f64::INFINITY } else { 0.0 };
            if ratio > worst_ratio {
                worst_ratio = ratio;
                dev.worst_index = i;
            }
            if err > allowed {
                dev.within = false;
            }
        }
        dev
    }
}

/// 2-D grid for `groups` workgroups when one dimension may hold at most `max`.
pub(crate) fn grid(groups: u32, max: u32) -> [u32; 3] {
    let x = groups.clamp(1, max.max(1));
    [x, groups.div_ceil(x).max(1), 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shader_variant_validates_with_naga() {
        let variants = shader_variants();
        assert!(variants.len() >= 6, "expected every kernel family, got {}", variants.len());
        for (shader, defines) in variants {
            let wgsl = crate::gpu::shader::preprocess(&shader, &defines)
                .unwrap_or_else(|e| panic!("{e}"));
            let module = naga::front::wgsl::parse_str(&wgsl).unwrap_or_else(|e| {
                panic!("{}[{}]: {}", shader.name, defines.key(), e.emit_to_string(&wgsl))
            });
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| {
                panic!("{}[{}]: {}", shader.name, defines.key(), e.emit_to_string(&wgsl))
            });
        }
    }

    #[test]
    fn tolerance_flags_nan_and_outliers() {
        let t = Tolerance { abs: 1e-3, rel: 0.0 };
        assert!(t.compare(&[1.0, 2.0], &[1.0, 2.0005]).within);
        let d = t.compare(&[1.0, 2.0], &[1.0, 2.1]);
        assert!(!d.within && d.worst_index == 1);
        assert!(!t.compare(&[f32::NAN], &[1.0]).within);
        assert!(Tolerance::EXACT.compare(&[f32::NAN], &[f64::NAN]).within);
        assert!(!Tolerance::EXACT.compare(&[1.0], &[1.0, 2.0]).within);
    }

    #[test]
    fn grid_covers_all_groups() {
        assert_eq!(grid(10, 65535), [10, 1, 1]);
        let [x, y, _] = grid(200_000, 65535);
        assert!(x * y >= 200_000 && x <= 65535);
        assert_eq!(grid(0, 65535), [1, 1, 1]);
    }
}
