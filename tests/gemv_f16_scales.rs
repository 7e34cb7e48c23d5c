//! The GPU GEMV's f16 scales and zero points decoded exactly, both ways the kernel may decode
//! them: by unpack2x16float where the device's probe found it exact
//! (`Capabilities::f16_unpack_exact`), else by integer operations. WGSL lets unpack2x16float
//! flush subnormals, so half of each weight's rows get subnormal scales (and zero points, for
//! the asymmetric formats): a flushed scale would zero its row, orders of magnitude outside the
//! tolerance, which is relative to each row's own Σ |w · x|.

use weft::gpu::DType;
use weft::ops::qmatmul::{
    self, f32_tolerance, gemv_fused_tuned, int8_activations, int8_tolerance, GemvConfig, GemvFusion, TestData,
    WeightFormat,
};
use weft::selftest::random_f32;

mod gpu_context;
use gpu_context::gpu_kernel_ctx;

const CONFIG: GemvConfig = GemvConfig { wg: 256, rows: 2, lanes: 32 };

/// Rows 0, 2, 4, ... with every scale (and zero point) a subnormal f16.
fn subnormal_rows(format: &str, seed: u64, n: usize, k: usize) -> anyhow::Result<qmatmul::TestWeight> {
    let mut tw = qmatmul::test_weight(WeightFormat::parse(format).expect("known format"), seed, n, k)?;
    let TestData::Weft(m) = &mut tw.data else { anyhow::bail!("{format}: not a weft weight") };
    let groups = m.scales.len() / n;
    for r in (0..n).step_by(2) {
        for g in 0..groups {
            let i = r * groups + g;
            // Subnormal magnitudes spread over 0x0001 ..= 0x03ff, some negative.
            m.scales[i] = (1 + (37 * i as u16) % 0x3ff) | if g % 3 == 0 { 0x8000 } else { 0 };
            if !m.zeros.is_empty() {
                m.zeros[i] = 1 + (101 * i as u16) % 0x3ff;
            }
        }
    }
    Ok(tw)
}

#[test]
fn subnormal_scales_decode_exactly_with_the_probe_and_without() -> anyhow::Result<()> {
    let probed = gpu_kernel_ctx()?;
    let mut integer = gpu_kernel_ctx()?;
    let mut caps = integer.capabilities().clone();
    caps.f16_unpack_exact = false;
    integer.set_capabilities(caps);
    let unpack = probed.capabilities().f16_unpack_exact;
    let (n, k) = (16, 256);
    for (ctx, how) in [(&probed, if unpack { "unpack2x16float" } else { "integer widening (probe)" }), (&integer, "integer widening")] {
        for (i, format) in ["q4_g32_sym", "q4_g32_asym", "q8_g32_sym", "q3_g32_asym", "q2_g32_asym"].into_iter().enumerate() {
            let seed = 900 + 10 * i as u64;
            let tw = subnormal_rows(format, seed, n, k)?;
            let w = tw.upload(ctx, "w")?;
            let wf = tw.dequantize()?;
            assert!(wf[..k].iter().any(|&v| v != 0.0) && wf[..k].iter().all(|v| v.abs() < 1e-2), "{format}: row 0 tiny, not zero");
            let x: Vec<f32> = random_f32(seed + 1, k).iter().map(|v| v * 4.0).collect();
            let tx = ctx.upload_f32("x", &[1, k], &x)?;
            let plain = ctx.zeros("y", &[1, n], DType::F32)?;
            let int8 = ctx.zeros("y8", &[1, n], DType::F32)?;
            let d = [
                pollster::block_on(gemv_fused_tuned(ctx, &w, &tx, &plain, GemvFusion::default(), CONFIG))?,
                pollster::block_on(gemv_fused_tuned(ctx, &w, &tx, &int8, GemvFusion { int8: true, ..Default::default() }, CONFIG))?,
            ];
            ctx.run(&d.iter().collect::<Vec<_>>());
            let (want, scale) = qmatmul::cpu_reference(&wf, &x, n, k, 1);
            let got = pollster::block_on(ctx.read_f32(&plain))?;
            for r in 0..n {
                let err = (got[r] as f64 - want[r]).abs() / scale[r];
                assert!(err <= f32_tolerance(k), "{format} {how} f32 row {r}: {} against {}", got[r], want[r]);
            }
            // 8-bit activations: against the same weights times x as the kernel quantizes it.
            let (values, scales) = int8_activations(&x);
            let (want, scale) = qmatmul::cpu_reference(&wf, &values, n, k, 1);
            let max_d = scales.iter().fold(0f32, |m, &d| m.max(d)) as f64;
            let got = pollster::block_on(ctx.read_f32(&int8))?;
            for r in 0..n {
                let max_w = wf[r * k..(r + 1) * k].iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
                let err = (got[r] as f64 - want[r]).abs() / scale[r];
                assert!(err <= int8_tolerance(k, max_w, max_d, scale[r]), "{format} {how} int8 row {r}: {} against {}", got[r], want[r]);
            }
        }
    }
    Ok(())
}
