//! What an adapter does that its features and limits do not say, measured once when the device
//! is created.

use super::shader::{Defines, ShaderSource};
use super::{DType, GpuContext};
use crate::error::Result;

pub const F16_PROBE_SHADER: ShaderSource = ShaderSource { name: "f16_probe", source: &[wgsl!("f16_probe.wgsl")] };

impl GpuContext {
    /// Whether `unpack2x16float` gives every f16 bit pattern's exact f32 on this adapter
    /// (subnormals kept, not flushed; a NaN as any NaN). WGSL allows the flush, so the GEMV
    /// kernels decode their f16 scales with integer operations unless this holds; where it
    /// does, one conversion replaces a dozen integer operations a chunk (bench/NOTES.md 71).
    pub(crate) async fn probe_f16_unpack(&self) -> Result<bool> {
        let out = self.zeros("f16 probe", &[1 << 16], DType::U32)?;
        let pipeline = self.pipeline(&F16_PROBE_SHADER, &Defines::default()).await?;
        let dispatch = self.dispatch(&pipeline, &[&out], None, [(1 << 15) / 64, 1, 1])?;
        self.run(&[&dispatch]);
        let got = self.read_u32(&out).await?;
        self.check()?;
        Ok(got.iter().enumerate().all(|(h, &bits)| widened_exactly(h as u32, bits)))
    }
}

/// `bits` is the f32 of the f16 pattern `h`, or a NaN where `h` is one.
fn widened_exactly(h: u32, bits: u32) -> bool {
    let want = crate::quant::f16_bits(h);
    if f32::from_bits(want).is_nan() {
        f32::from_bits(bits).is_nan()
    } else {
        bits == want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_accepts_exact_widening_and_refuses_a_flush() {
        // The smallest subnormal, the largest, a normal, infinity, a NaN.
        for h in [0x0001, 0x83ff, 0x3c00, 0x7c00, 0x7e01] {
            assert!(widened_exactly(h, crate::quant::f16_bits(h)), "{h:#06x}");
        }
        assert!(!widened_exactly(0x0001, 0), "a flushed subnormal");
        assert!(!widened_exactly(0x83ff, 0x8000_0000), "a flushed negative subnormal");
        assert!(widened_exactly(0x7e01, 0x7fc0_0000), "any NaN for a NaN");
        assert!(!widened_exactly(0x7c00, 0x7fc0_0000), "infinity is not a NaN");
    }
}
