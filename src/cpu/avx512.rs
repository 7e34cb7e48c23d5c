//! x86-64 AVX-512 (F, BW, VNNI) kernel of the encoder's blocked product (`gemm.rs`): 8-bit
//! weights times 8-bit activations. Callers check the CPU features first
//! ([`super::kernels::Isa::detect`]).
//!
//! An f32 register tile with AVX-512 (14 × 32 outputs in 28 of the 32 registers) measured no
//! faster than AVX2's 6 × 16 on AMD Zen 4, which runs a 512-bit multiply-add as two 256-bit
//! halves: AVX2's tile already issues a multiply-add every cycle. VNNI's `vpdpbusd` sums four
//! products of bytes into each of 16 i32 lanes per instruction, 64 products against an f32
//! multiply-add's 16.

use std::arch::x86_64::*;

use super::kernels::BLOCK;

/// Token rows per register tile: 6 rows × 2 registers of integer sums and of f32 sums (24),
/// two weight registers and their two scale registers.
pub const INT8_MR: usize = 6;
/// Outputs per packed panel (two 16-lane registers).
pub const INT8_NR: usize = 32;

/// One tile of token rows quantized per 32 values (`BlockQ8`), for [`gemm_int8`].
pub struct Int8Tokens<'a> {
    /// [group][k / 4 within it][INT8_MR][4] values.
    pub q: &'a [u8],
    /// [group][INT8_MR] scales d.
    pub d: &'a [f32],
    /// [group][INT8_MR]: -128 · d · Σq, the weights' zero point times the group's sum.
    pub zero: &'a [f32],
}

/// `tile[i][j] += Σ_group ws[g][j] · (d[g][i] · Σ_k w[k][j] · q[k][i] + zero[g][i])`, with the
/// weights `w` stored as bytes `v` of value `v - 128` times their scale: `w` [group][k / 4][NR][4]
/// and `ws` [group][NR]. Each group's integer sum is exact; f32 rounding comes after it.
///
/// # Safety
/// AVX-512 F, BW and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
pub unsafe fn gemm_int8(a: &Int8Tokens, w: &[u8], ws: &[f32], tile: &mut [[f32; INT8_NR]; INT8_MR]) {
    const MR: usize = INT8_MR;
    const NR: usize = INT8_NR;
    let groups = a.d.len() / MR;
    assert!(a.q.len() >= groups * BLOCK * MR && a.zero.len() >= groups * MR);
    assert!(w.len() >= groups * BLOCK * NR && ws.len() >= groups * NR);
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for (a, t) in acc.iter_mut().zip(tile.iter()) {
        a[0] = _mm512_loadu_ps(t.as_ptr());
        a[1] = _mm512_loadu_ps(t.as_ptr().add(16));
    }
    let (mut x, mut wp) = (a.q.as_ptr(), w.as_ptr());
    for g in 0..groups {
        let mut sums = [[_mm512_setzero_si512(); 2]; MR];
        for _ in 0..BLOCK / 4 {
            let w0 = _mm512_loadu_si512(wp as *const __m512i);
            let w1 = _mm512_loadu_si512(wp.add(64) as *const __m512i);
            for (i, s) in sums.iter_mut().enumerate() {
                // Four signed activation bytes in every lane; the weights are the unsigned side.
                let v = _mm512_set1_epi32(std::ptr::read_unaligned(x.add(4 * i) as *const i32));
                s[0] = _mm512_dpbusd_epi32(s[0], w0, v);
                s[1] = _mm512_dpbusd_epi32(s[1], w1, v);
            }
            x = x.add(4 * MR);
            wp = wp.add(4 * NR);
        }
        let scale = [_mm512_loadu_ps(ws.as_ptr().add(g * NR)), _mm512_loadu_ps(ws.as_ptr().add(g * NR + 16))];
        for (i, (acc, s)) in acc.iter_mut().zip(&sums).enumerate() {
            let (d, zero) = (_mm512_set1_ps(a.d[g * MR + i]), _mm512_set1_ps(a.zero[g * MR + i]));
            for j in 0..2 {
                let x = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]), d, zero);
                acc[j] = _mm512_fmadd_ps(x, scale[j], acc[j]);
            }
        }
    }
    for (a, t) in acc.iter().zip(tile.iter_mut()) {
        _mm512_storeu_ps(t.as_mut_ptr(), a[0]);
        _mm512_storeu_ps(t.as_mut_ptr().add(16), a[1]);
    }
}
