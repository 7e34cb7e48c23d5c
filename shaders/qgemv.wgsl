// y[t, n] = W[n, k] · x[t, k] for few tokens (decode). Two kernels:
//
// - BLOCKS (formats with a `bdot` in shaders/qblock.wgsl): LPR invocations share RPT rows and
//   walk their 32-weight chunks, loading a chunk's activations as eight vec4 once for all the
//   rows (`xblock`, which also declares x). With LPR 1 (CPU adapters) there is no shared
//   memory and no barrier: on a CPU-emulated adapter invocations are SIMD lanes, and a
//   shared-memory tree costs a barrier round per level, so fat independent invocations win
//   (bench/NOTES.md). A GPU needs more workgroups than one row per invocation gives, and
//   adjacent lanes reading adjacent words: LPR 32 with a subgroup or shared-memory sum.
// - otherwise: ROWS rows per workgroup, its WG threads striding over K eight weights at a time
//   (weights from `w8`), each x unit loaded once for all ROWS rows, then a shared-memory tree
//   reduction per row.
//
// With F16 the partial products are f16 dot products of four terms; the sums stay f32. The
// token is workgroup_id.z.
//
// Fusions for a decode step (BLOCKS with vec4 x only), each saving a dispatch:
// - NORM: x is RMS-normalised first (shaders/gemv_norm.wgsl).
// - RESIDUAL: the result is added to y instead of stored (the residual connection).
#ifdef F16
enable f16;
#endif

@group(0) @binding(2) var<storage, read_write> y: array<f32>; // [t, n]
@group(0) @binding(${PB}) var<uniform> p: Params;

const WG: u32 = ${WG}u;

#ifdef BLOCKS
const RPT: u32 = ${RPT}u;
const LPR: u32 = ${LPR}u;

// Lanes sharing a row add their sums with `row_sum` (shaders/gemv_rowsum.wgsl).
alias RowAcc = f32;

// LPR adjacent lanes share each group of RPT rows; lane j takes chunks j, j + LPR, ..., so the
// lanes of a row read adjacent chunks (coalesced on a GPU). LPR 1 is the CPU-adapter shape: one
// invocation walks whole rows, no reduction.
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let lane = lid.x % LPR;
    let row0 = ((wid.x + wid.y * p.grid_x) * (WG / LPR) + lid.x / LPR) * RPT;
    let tok = wid.z;
    let nb = nblocks();
    var acc: array<f32, RPT>;
    for (var r = 0u; r < RPT; r++) {
        acc[r] = 0.0;
    }
#ifdef NORM
    let scale = inv_rms(tok, lid.x);
#endif
    // Rows past n repeat row n-1 and are never stored: no lane leaves the loop shape.
    for (var b = lane; b < nb; b += LPR) {
#ifdef NORM
        // Spelled out: a loop writing xs[i] puts the array in local memory on some compilers.
        let raw = xblock(tok, b);
        let g = b * 8u;
        let last = p.k / 4u - 1u;
        let xs = array<vec4<f32>, 8>(
            raw[0] * scale * norm_w[min(g, last)],
            raw[1] * scale * norm_w[min(g + 1u, last)],
            raw[2] * scale * norm_w[min(g + 2u, last)],
            raw[3] * scale * norm_w[min(g + 3u, last)],
            raw[4] * scale * norm_w[min(g + 4u, last)],
            raw[5] * scale * norm_w[min(g + 5u, last)],
            raw[6] * scale * norm_w[min(g + 6u, last)],
            raw[7] * scale * norm_w[min(g + 7u, last)],
        );
#else
        let xs = xblock(tok, b);
#endif
        for (var r = 0u; r < RPT; r++) {
            acc[r] += bdot(min(row0 + r, p.n - 1u), b, xs);
        }
    }
    for (var r = 0u; r < RPT; r++) {
        if (LPR > 1u) {
            acc[r] = row_sum(acc[r], lid.x);
        }
        if (lane == 0u && row0 + r < p.n) {
            let at = tok * p.ny + p.row0 + row0 + r;
#ifdef RESIDUAL
            y[at] = y[at] + acc[r];
#else
            y[at] = acc[r];
#endif
        }
    }
}
#else
@group(0) @binding(1) var<storage, read> x: array<f32>;       // [t, k]

const ROWS: u32 = ${ROWS}u;

var<workgroup> partial: array<f32, WG * ROWS>; // [ROWS, WG]

fn x8(at: u32) -> W8 {
    return W8(
        vec4<f32>(x[at], x[at + 1u], x[at + 2u], x[at + 3u]),
        vec4<f32>(x[at + 4u], x[at + 5u], x[at + 6u], x[at + 7u]),
    );
}

fn dot8(w: W8, v: W8) -> f32 {
#ifdef F16
    return f32(dot(vec4<f16>(w.a), vec4<f16>(v.a))) + f32(dot(vec4<f16>(w.b), vec4<f16>(v.b)));
#else
    return dot(w.a, v.a) + dot(w.b, v.b);
#endif
}

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let row0 = (wid.x + wid.y * p.grid_x) * ROWS;
    let tok = wid.z;
    let xrow = tok * p.k;
    let full = p.k / 8u;
    var acc: array<f32, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        acc[r] = 0.0;
    }
    // Rows past n (the last workgroup of an n not divisible by ROWS) repeat row n-1 and are
    // never stored: every thread keeps the same loop shape.
    for (var u = lid.x; u < full; u += WG) {
        let v = x8(xrow + u * 8u);
        for (var r = 0u; r < ROWS; r++) {
            acc[r] += dot8(w8(min(row0 + r, p.n - 1u), u), v);
        }
    }
    if (full * 8u < p.k && lid.x == full % WG) {
        var v = W8(vec4<f32>(0.0), vec4<f32>(0.0));
        let k0 = full * 8u;
        for (var j = 0u; j < 4u; j++) {
            if (k0 + j < p.k) {
                v.a[j] = x[xrow + k0 + j];
            }
            if (k0 + 4u + j < p.k) {
                v.b[j] = x[xrow + k0 + 4u + j];
            }
        }
        for (var r = 0u; r < ROWS; r++) {
            acc[r] += dot8(w8_tail(min(row0 + r, p.n - 1u), full), v);
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        partial[r * WG + lid.x] = acc[r];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            for (var r = 0u; r < ROWS; r++) {
                partial[r * WG + lid.x] += partial[r * WG + lid.x + s];
            }
        }
        workgroupBarrier();
    }
    if (lid.x < ROWS && row0 + lid.x < p.n) {
        y[tok * p.ny + p.row0 + row0 + lid.x] = partial[lid.x * WG];
    }
}
#endif
