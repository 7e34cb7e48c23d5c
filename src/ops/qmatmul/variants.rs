//! Every define set the matrix kernels may be compiled with, for the naga (and Tint) checks
//! of `ops::shader_variants`.

use super::*;

/// The subgroups of the hardware GPUs the variants are checked for.
const SG32: Subgroups = Subgroups { size: 32, emulated: 0 };

pub(crate) fn variants() -> Vec<(ShaderSource, Defines)> {
    let mut all = Vec::new();
    let mut formats = WeightFormat::all();
    formats.push(WeightFormat::F32);
    for f in &formats {
        // K = 4: vec4 activations; K = 3: one float at a time (ragged weft rows). The GPU
        // shape with and without subgroups.
        for precision in [Precision::F32, Precision::F16] {
            for k in [4, 3] {
                all.push((QGEMV_SHADER, gemv_defines(f, precision, GemvConfig::for_format(f), k, Subgroups::NONE)));
            }
            all.extend(gemm::variants(f, precision));
            for subgroup in [Subgroups::NONE, SG32] {
                all.push((QGEMV_SHADER, gemv_defines(f, precision, GEMV_BLOCKS_GPU, 4, subgroup)));
            }
        }
        all.push((QEMBED_SHADER, embed_defines(f)));
        if matches!(f, WeightFormat::Weft(_) | WeightFormat::Repacked(_)) {
            let pb = 3 + f.weight_bindings() - 1;
            for rows in [1, 2, 4] {
                for subgroup in [Subgroups::NONE, SG32] {
                    let d = gpu_gemv_defines(f, GemvConfig { wg: 256, rows, lanes: 32 }, subgroup);
                    all.push((QGEMV_GPU_SHADER, d.clone()));
                    all.push((QGEMV_GPU_SHADER, d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1)));
                    all.push((QGEMV_GPU_SHADER, d.clone().set("RESIDUAL", 1).set("GLU", 1)));
                    all.push((QGEMV_GPU_SHADER, d.clone().set("RESIDUAL", 1)));
                    if rows >= 2 {
                        all.push((QGEMV_GPU_SHADER, d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1).set("SWIGLU", 1)));
                    }
                    if int8_format(f) {
                        let d = d.set("DP4", 1);
                        if rows >= 2 {
                            all.push((QGEMV_GPU_SHADER, d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1).set("SWIGLU", 1)));
                        }
                        all.push((QGEMV_GPU_SHADER, d.clone()));
                        all.push((QGEMV_GPU_SHADER, d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1)));
                        all.push((QGEMV_GPU_SHADER, d.clone().set("RESIDUAL", 1).set("GLU", 1)));
                        all.push((QGEMV_GPU_SHADER, d.clone().set("RESIDUAL", 1).set("XREC", 1)));
                        all.push((QGEMV_GPU_SHADER, d.set("RESIDUAL", 1)));
                    }
                }
            }
            // The decode step's pipelines, the shape as constants (`GemvFusion::constant_shape`;
            // any consistent numbers serve the compilers).
            let shape = |d: Defines| shape_defines(d, &[64, 256, 1, 4, 32, 8, 0, 0, 64, 1e-5f32.to_bits(), 0, 0]);
            let d = gpu_gemv_defines(f, GemvConfig { wg: 256, rows: 2, lanes: 32 }, SG32);
            all.push((QGEMV_GPU_SHADER, shape(d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1))));
            all.push((QGEMV_GPU_SHADER, shape(d.clone().set("RESIDUAL", 1))));
            // Scales by unpack2x16float, where the adapter's is exact (`Capabilities::f16_unpack_exact`).
            all.push((QGEMV_GPU_SHADER, shape(d.clone().set("RESIDUAL", 1).set("F16_UNPACK", 1))));
            if int8_format(f) {
                let d = d.set("DP4", 1);
                all.push((QGEMV_GPU_SHADER, shape(d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1).set("SWIGLU", 1))));
                all.push((QGEMV_GPU_SHADER, shape(d.clone().set("RESIDUAL", 1).set("XREC", 1))));
                all.push((QGEMV_GPU_SHADER, shape(d.set("RESIDUAL", 1).set("XREC", 1).set("F16_UNPACK", 1))));
                // The SwiGLU epilogue writing records, in each order, at the shapes that may (the
                // first with subgroups also as constants).
                for (c, subgroup) in [(records::RECORD_SWIGLU_CANDIDATES[0], SG32), (records::RECORD_SWIGLU_CANDIDATES[4], Subgroups::NONE)] {
                    let d = gpu_gemv_defines(f, c, subgroup).set("DP4", 1).set("NORM", 1).set("NB", pb).set("SWIGLU", 1);
                    for order in 0..3 {
                        let v = d.clone().set("XOUT", 1).set("XO_ORDER", order).set("XB", pb + 1).set("PB", pb + 2);
                        if subgroup == SG32 && order == 1 {
                            all.push((QGEMV_GPU_SHADER, shape(v.clone())));
                        }
                        all.push((QGEMV_GPU_SHADER, v));
                    }
                }
            }
        }
        if f.gemv_block().is_some() {
            // The decode step's fused forms (vec4 x, F32), on both launch shapes.
            let pb = 3 + f.weight_bindings() - 1;
            for (config, subgroup) in [(GemvConfig::for_format(f), Subgroups::NONE), (GEMV_BLOCKS_GPU, SG32)] {
                let d = gemv_defines(f, Precision::F32, config, 4, subgroup);
                all.push((QGEMV_SHADER, d.clone().set("NORM", 1).set("NB", pb).set("PB", pb + 1)));
                all.push((QGEMV_SHADER, d.set("RESIDUAL", 1)));
            }
        }
    }
    // The emulated subgroups of the tests (tests/subgroup_sizes.rs), on both kernels.
    let emulated = Subgroups { size: 32, emulated: 32 };
    let q4 = WeightFormat::Weft(crate::quant::weft::WeftQuant { bits: 4, group: 32, scheme: crate::quant::weft::Scheme::Sym });
    all.push((QGEMV_SHADER, gemv_defines(&q4, Precision::F32, GEMV_BLOCKS_GPU, 4, emulated)));
    all.push((QGEMV_GPU_SHADER, gpu_gemv_defines(&q4, GemvConfig { wg: 256, rows: 4, lanes: 32 }, emulated)));
    all.sort_by(|a, b| (a.0.name, &a.1).cmp(&(b.0.name, &b.1)));
    all.dedup_by(|a, b| a.0.name == b.0.name && a.1 == b.1);
    all
}
