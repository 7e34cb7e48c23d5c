//! The GEMM of prefill: Y[t, n] = X[t, k] · W[n, k]^T for many tokens, each weight decoded once
//! per tile of tokens. Four kernels, chosen by [`GemmKernel`]: whole rows an invocation on
//! CPU-emulated adapters, register-tiled outer products on GPUs, the matrix units (tensor
//! cores) where the adapter offers them and f16 products are asked for, and 32 x 32
//! shared-memory tiles where none of these applies (f16 arithmetic, K not a multiple of 32).

use serde::Serialize;

use super::{bindings, check_operands, check_precision, grid, params, per_part, x_defines, Precision, QWeight, WeightFormat};
use super::{QGEMM_COOP_SHADER, QGEMM_OUTER_SHADER, QGEMM_SHADER};
use crate::error::{Error, Result};
use crate::gpu::shader::{Defines, ShaderSource};
use crate::gpu::{Capabilities, Dispatch, GpuContext, GpuTensor};

/// Which GEMM kernel a [`GemmConfig`] launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmKernel {
    /// shaders/qgemm.wgsl BLOCKS (formats with [`WeightFormat::gemv_block`], F32): `wg`
    /// invocations a workgroup, each owning `rows` whole rows of one token, `tokens` adjacent
    /// invocations taking adjacent tokens of the same rows (it must divide `wg`).
    Blocks,
    /// shaders/qgemm.wgsl: 32 x 32 output tiles through workgroup memory, 2 x 2 outputs an
    /// invocation, F32 or F16 (`wg`, `rows` and `tokens` unused).
    Tiled,
    /// shaders/qgemm_outer.wgsl (F32, K a multiple of 32): tiles of `rows` (64) rows x `tokens`
    /// (32 or 64) tokens, 4 x 4 outputs an invocation, so `wg` = 4 · tokens.
    Outer,
    /// shaders/qgemm_coop.wgsl (F16, K a multiple of 32, [`Capabilities::matrix_f16`]): tiles
    /// of `rows` (64 or 128) rows x `tokens` (32 or 64), 16 x 16 x 16 matrix products of f16
    /// into f32 sums, a 32 x 32 block of Y a subgroup of 32 lanes, so `wg` = rows · tokens / 32;
    /// or, 64 x 64 with `wg` 256, two subgroups a block taking one half of K each (K a
    /// multiple of 64). Where F32 is asked for it gives way to the outer-product kernel.
    Matrix,
}

/// Launch shape of [`gemm_tuned`]; the fields' meaning depends on the [`GemmKernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GemmConfig {
    pub kernel: GemmKernel,
    pub wg: u32,
    pub rows: u32,
    pub tokens: u32,
}

/// Eight tokens fill one 8-lane SIMD group of llvmpipe with the same weight words, and sixteen
/// rows share each lane's x loads; on lavapipe this ran 4-10x faster than the tiled kernel and
/// 2-3x faster than rows across lanes with several tokens per invocation, and 16 rows beat 8 by
/// 10-40% in alternating runs (bench/NOTES.md).
pub const GEMM_BLOCKS: GemmConfig = GemmConfig { kernel: GemmKernel::Blocks, wg: 64, rows: 16, tokens: 8 };

/// On a discrete GPU the tiled kernel ran prefill 3.5x faster than the block kernel on an H100
/// (SmolLM2 shape, 128 tokens: 6,294 against 1,765 tok/s; bench/NOTES.md): the block kernel's
/// few fat invocations leave most of its compute units idle.
pub const GEMM_TILED: GemmConfig = GemmConfig { kernel: GemmKernel::Tiled, wg: 256, rows: 32, tokens: 32 };

/// The tiled kernel spends two workgroup-memory loads on four multiply-adds; the outer-product
/// kernel spends two on sixteen: on an H100 at 128 tokens 10-15 TFLOP/s against the tiled
/// kernel's 3.1-3.4 on 4096-wide shapes (bench/NOTES.md, note 21).
pub const GEMM_OUTER: GemmConfig = GemmConfig { kernel: GemmKernel::Outer, wg: 256, rows: 64, tokens: 64 };

/// On an adapter with matrix units (tensor cores) and F16 asked for.
pub const GEMM_MATRIX: GemmConfig = GemmConfig { kernel: GemmKernel::Matrix, wg: 256, rows: 128, tokens: 64 };

impl GemmConfig {
    /// The default launch shape for `format` on a CPU-emulated adapter (formats without a block
    /// kernel take the tiled one).
    pub fn for_format(_format: &WeightFormat) -> Self {
        GEMM_BLOCKS
    }

    /// The launch shape for `format` on this adapter: block kernel on CPU-emulated adapters,
    /// the matrix units where the adapter has them (at F16; F32 takes the outer products),
    /// outer products elsewhere.
    pub fn for_adapter(caps: &Capabilities, format: &WeightFormat) -> Self {
        if caps.is_software {
            Self::for_format(format)
        } else if caps.matrix_f16 {
            GEMM_MATRIX
        } else {
            GEMM_OUTER
        }
    }

    /// The matrix-unit shape with tiles of `rows` (64 or 128) x `tokens` (32 or 64).
    pub fn matrix(rows: u32, tokens: u32) -> Self {
        GemmConfig { kernel: GemmKernel::Matrix, wg: rows * tokens / 32, rows, tokens }
    }

    /// The matrix-unit shape with 64 x 64 tiles and K split between two subgroups a block.
    pub fn matrix_split() -> Self {
        GemmConfig { kernel: GemmKernel::Matrix, wg: 256, rows: 64, tokens: 64 }
    }

    fn split_k(&self) -> bool {
        self.kernel == GemmKernel::Matrix && self.wg == self.rows * self.tokens / 16
    }

    /// The shape that runs for a K of `k`: the split matrix shape needs K a multiple of 64.
    fn for_k(self, k: usize) -> Self {
        if self.split_k() && !k.is_multiple_of(64) { Self::matrix(64, 64) } else { self }
    }

    /// The outer-product shape with tiles of 64 rows x `tokens` (32 or 64).
    pub fn outer(tokens: u32) -> Self {
        GemmConfig { kernel: GemmKernel::Outer, wg: 4 * tokens, rows: 64, tokens }
    }

    /// This shape for a product of `n` rows and `t` tokens: the outer-product kernel takes
    /// 32-token tiles where 64-token ones would leave fewer than 128 workgroups (on an H100,
    /// 2048 x 2048 at 128 tokens: 6.4 against 6.0 TFLOP/s; 4096 x 4096: 10.5 against 12.1).
    fn fitted(self, n: usize, t: u32) -> Self {
        let groups = |c: GemmConfig| (n as u64).div_ceil(c.rows as u64) * (t as u64).div_ceil(c.tokens as u64);
        match self.kernel {
            GemmKernel::Outer if self.tokens == 64 && groups(self) < 128 => Self::outer(32),
            // Tiles of 128 rows x 64 tokens where that makes 128 workgroups or more, else of
            // 64 x 64 with K split: on an H100 at 128 tokens 4096 x 4096 ran at 27.3 TFLOP/s in
            // 128 tiles of 64 x 64 against 19.6 in 64 of 128 x 64, and 14336 x 4096 at 49.2 in
            // 224 tiles of 128 x 64 against 33.1; 32-token tiles lost on every shape
            // (bench/NOTES.md, note 24).
            GemmKernel::Matrix if groups(Self::matrix(128, 64)) >= 128 => Self::matrix(128, 64),
            GemmKernel::Matrix => Self::matrix_split(),
            _ => self,
        }
    }

    /// The kernel that runs for a K of `k` at `precision`: the block kernel needs a block path
    /// and F32, the outer-product kernel F32 and whole 32-wide steps; the tiled one takes the
    /// rest.
    fn resolve(self, format: &WeightFormat, precision: Precision, k: usize) -> GemmKernel {
        match self.kernel {
            GemmKernel::Blocks if format.gemv_block().is_some() && precision == Precision::F32 => GemmKernel::Blocks,
            GemmKernel::Outer if precision == Precision::F32 && k.is_multiple_of(32) => GemmKernel::Outer,
            GemmKernel::Matrix if k.is_multiple_of(32) => match precision {
                Precision::F16 => GemmKernel::Matrix,
                Precision::F32 => GemmKernel::Outer,
            },
            _ => GemmKernel::Tiled,
        }
    }
}

/// Output tile edge of the tiled GEMM kernel (tokens and rows).
const GEMM_TILE: u32 = 32;

fn gemm_defines(format: &WeightFormat, precision: Precision, c: GemmConfig, k: usize) -> Defines {
    let d = format.defines().set("PB", 3 + format.weight_bindings() - 1);
    let c = match c.resolve(format, precision, k) {
        // The matrix shape asked for at F32: the outer products' default shape.
        GemmKernel::Outer if c.kernel == GemmKernel::Matrix => GEMM_OUTER,
        _ => c,
    };
    match c.resolve(format, precision, k) {
        GemmKernel::Matrix => {
            let c = c.for_k(k);
            let kt = if c.split_k() { 64 } else { 32 };
            let d = d.set("TM", c.tokens).set("TN", c.rows).set("SGR", c.rows / 32).set("WG", c.wg).set("KT", kt);
            let d = d.set("WS", c.rows * (kt + 8)).set("XS", c.tokens * (kt + 8));
            // Eight-weight units of W and vec4 of X an invocation stages a step: two or four.
            let (units, vecs) = (c.rows * kt / 8 / c.wg, c.tokens * kt / 4 / c.wg);
            let d = if units == 4 { d.set("W4", 1) } else { d };
            let d = if vecs == 4 { d.set("X4", 1) } else { d };
            let d = d.set("CS", c.wg / 32 * 256);
            if c.split_k() { d.set("KSPLIT", 1) } else { d }
        }
        GemmKernel::Blocks => {
            let path = format.gemv_block().unwrap_or_default();
            let d = d.set("BLOCKS", 1).set(path, 1).set("WG", c.wg).set("RPT", c.rows).set("TPT", c.tokens);
            x_defines(d, k)
        }
        GemmKernel::Outer => {
            let d = d.set("TM", c.tokens).set("TN", c.rows).set("TM4", c.tokens / 4).set("TN4", c.rows / 4);
            let d = d.set("WG", c.wg);
            // Units of W a step: rows x 4 eight-weight units over wg invocations.
            if c.rows * 4 > c.wg { d.set("W2", 1) } else { d }
        }
        GemmKernel::Tiled => match precision {
            Precision::F16 => d.set("F16", 1).set("ELEM", "f16"),
            Precision::F32 => d.set("ELEM", "f32"),
        },
    }
}

/// The GEMM variants naga checks: every launch shape at K = 4 (vec4 activations), K = 3 (one
/// float at a time, ragged weft rows), K = 32 (the outer-product and matrix kernels) and K = 64
/// (the K-split matrix shape).
pub(super) fn variants(f: &WeightFormat, precision: Precision) -> Vec<(ShaderSource, Defines)> {
    let mut all = Vec::new();
    for k in [4, 3, 32, 64] {
        let matrix = [(128, 64), (64, 64), (128, 32), (64, 32)].map(|(r, t)| GemmConfig::matrix(r, t));
        let others = [GemmConfig::for_format(f), GEMM_TILED, GemmConfig::outer(32), GemmConfig::outer(64), GemmConfig::matrix_split()];
        for c in others.into_iter().chain(matrix) {
            all.push((*shader(c.resolve(f, precision, k)), gemm_defines(f, precision, c, k)));
        }
    }
    all
}

fn shader(kernel: GemmKernel) -> &'static ShaderSource {
    match kernel {
        GemmKernel::Outer => &QGEMM_OUTER_SHADER,
        GemmKernel::Matrix => &QGEMM_COOP_SHADER,
        GemmKernel::Blocks | GemmKernel::Tiled => &QGEMM_SHADER,
    }
}

/// Y[t, n] = X[t, k] · W[n, k]^T at this adapter's default [`GemmConfig`].
pub async fn gemm(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    precision: Precision,
) -> Result<Dispatch> {
    let t = x.shape.first().copied().unwrap_or(0) as u32;
    let config = match GemmConfig::for_adapter(ctx.capabilities(), &w.format) {
        c if c.kernel == GemmKernel::Matrix && precision == Precision::F32 => GEMM_OUTER,
        c => c,
    };
    let config = config.fitted(w.rows, t);
    gemm_tuned(ctx, w, x, y, precision, config).await
}

/// [`gemm`] with an explicit launch shape, for tuning. A kernel that does not apply (see
/// [`GemmKernel`]) gives way to the tiled one.
pub async fn gemm_tuned(
    ctx: &GpuContext,
    w: &QWeight,
    x: &GpuTensor,
    y: &GpuTensor,
    precision: Precision,
    config: GemmConfig,
) -> Result<Dispatch> {
    let t = check_operands("gemm", w, x, y, w.rows)?;
    check_precision(ctx, "gemm", precision)?;
    let kernel = config.resolve(&w.format, precision, w.cols);
    if kernel == GemmKernel::Matrix && !ctx.capabilities().matrix_f16 {
        return Err(Error::Shape {
            op: "gemm",
            message: "the matrix-unit kernel needs 16x16x16 f16 cooperative matrices, which this adapter lacks; \
                      use GemmConfig::for_adapter"
                .into(),
        });
    }
    let config = if kernel == GemmKernel::Outer && config.kernel == GemmKernel::Matrix { GEMM_OUTER } else { config.for_k(w.cols) };
    let GemmConfig { wg, rows, tokens, .. } = config;
    let bad = match kernel {
        GemmKernel::Blocks => !wg.is_power_of_two() || rows == 0 || tokens == 0 || wg % tokens != 0,
        GemmKernel::Outer => rows != 64 || !matches!(tokens, 32 | 64) || wg != 4 * tokens,
        GemmKernel::Matrix => {
            config != GemmConfig::matrix_split()
                && (!matches!(rows, 64 | 128) || !matches!(tokens, 32 | 64) || wg != rows * tokens / 32)
        }
        GemmKernel::Tiled => false,
    };
    if bad {
        return Err(Error::Shape { op: "gemm", message: format!("{kernel:?}: workgroup {wg}, rows {rows}, tokens {tokens}") });
    }
    let pipeline = ctx.pipeline(shader(kernel), &gemm_defines(&w.format, precision, config, w.cols)).await?;
    let max = ctx.capabilities().limits.max_compute_workgroups_per_dimension;
    per_part(w, |part| {
        let tensors = bindings(part, x, y);
        let (groups, p) = match kernel {
            GemmKernel::Blocks => {
                let chunks = t.div_ceil(tokens);
                let row_groups = (part.rows as u32).div_ceil(wg / tokens * rows);
                let total = chunks.checked_mul(row_groups).ok_or_else(|| Error::Shape {
                    op: "gemm",
                    message: format!("{chunks} token chunks x {row_groups} row groups exceed u32"),
                })?;
                let groups = grid(total, max);
                (groups, params(w, part, t, groups[0], chunks))
            }
            GemmKernel::Outer | GemmKernel::Matrix => {
                ([(part.rows as u32).div_ceil(rows), t.div_ceil(tokens), 1], params(w, part, t, 0, 0))
            }
            GemmKernel::Tiled => {
                ([(part.rows as u32).div_ceil(GEMM_TILE), t.div_ceil(GEMM_TILE), 1], params(w, part, t, 0, 0))
            }
        };
        ctx.dispatch(&pipeline, &tensors, Some(bytemuck::cast_slice(&p)), groups)
    })
}
