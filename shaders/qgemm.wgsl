// Y[t, n] = X[t, k] · W[n, k]^T for many tokens (prefill). Two kernels:
//
// - BLOCKS (formats with a `bdot` in shaders/qblock.wgsl, F32 only): every
//   invocation owns RPT whole rows of one token and walks their 32-weight blocks like the GEMV,
//   its x block loaded once for all RPT rows; TPT adjacent invocations take adjacent tokens of
//   the same rows, so each SIMD group of llvmpipe reads one set of weight words. No shared
//   memory, no barriers: on a CPU-emulated adapter invocations are SIMD lanes and barriers
//   cost a switch between lane groups (bench/NOTES.md).
// - otherwise: 32 x 32 shared-memory tiles, below.
#ifdef BLOCKS
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [t, n]
@group(0) @binding(${PB}) var<uniform> p: Params;

const WG: u32 = ${WG}u;
const RPT: u32 = ${RPT}u;
const TPT: u32 = ${TPT}u;

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    // Lanes next to each other take next tokens of the same rows, so a SIMD group reads the same
    // weight words (one cache line, no spread gather) and each lane's x block serves RPT rows.
    // Token chunks vary fastest between workgroups, so the workgroups that read the same rows
    // of W run close together and find them in cache.
    let g = wid.x + wid.y * p.grid_x;
    let tok = (g % p.chunks) * TPT + lid.x % TPT;
    let row0 = ((g / p.chunks) * (WG / TPT) + lid.x / TPT) * RPT;
    let xtok = min(tok, p.t - 1u);
    let nb = nblocks();
    var acc: array<f32, RPT>;
    for (var r = 0u; r < RPT; r++) {
        acc[r] = 0.0;
    }
    // Rows past n repeat row n-1 and tokens past t repeat token t-1; neither is stored, and no
    // lane leaves the loop shape.
    for (var b = 0u; b < nb; b++) {
        let xs = xblock(xtok, b);
        for (var r = 0u; r < RPT; r++) {
            acc[r] += bdot(min(row0 + r, p.n - 1u), b, xs);
        }
    }
    for (var r = 0u; r < RPT; r++) {
        if (row0 + r < p.n && tok < p.t) {
            y[tok * p.ny + p.row0 + row0 + r] = acc[r];
        }
    }
}
#else
// Tiled kernel: a workgroup owns a 32-token x 32-row output tile; per 32-wide step of K, half its threads dequantize the 32 x 32 W tile once
// (`w8`, shaders/qweight.wgsl) and the other half stage the X tile, so each weight is decoded
// once per 32 tokens. Each of the 16 x 16 threads then computes 2 x 2 outputs. With F16 the
// tiles are f16 and the four-term dot products f16; the running sums stay f32.
#ifdef F16
enable f16;
#endif

@group(0) @binding(1) var<storage, read> x: array<f32>;       // [t, k]
@group(0) @binding(2) var<storage, read_write> y: array<f32>; // [t, n]
@group(0) @binding(${PB}) var<uniform> p: Params;

alias E = ${ELEM};

const TILE: u32 = 32u;
const UNITS: u32 = TILE / 8u; // eight-weight units per tile row

var<workgroup> wt: array<array<vec4<E>, 8>, TILE>; // [row, k / 4]
var<workgroup> xt: array<array<vec4<E>, 8>, TILE>; // [token, k / 4]

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n0 = wid.x * TILE;
    let t0 = wid.y * TILE;
    let tx = li % 16u;
    let ty = li / 16u;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0); // [token ty, ty + 16] x [row tx, tx + 16]
    let steps = (p.k + TILE - 1u) / TILE;
    let full = p.k / 8u;
    for (var step = 0u; step < steps; step++) {
        let j = li % 128u;
        let r = j / UNITS;
        let uu = j % UNITS;
        let u = step * UNITS + uu;
        var v = W8(vec4<f32>(0.0), vec4<f32>(0.0));
        if (li < 128u) {
            let row = min(n0 + r, p.n - 1u);
            if (u < full) {
                v = w8(row, u);
            } else if (u * 8u < p.k) {
                v = w8_tail(row, u);
            }
            wt[r][uu * 2u] = vec4<E>(v.a);
            wt[r][uu * 2u + 1u] = vec4<E>(v.b);
        } else {
            let tok = t0 + r;
            if (tok < p.t) {
                let at = tok * p.k + u * 8u;
                for (var e = 0u; e < 4u; e++) {
                    if (u * 8u + e < p.k) {
                        v.a[e] = x[at + e];
                    }
                    if (u * 8u + 4u + e < p.k) {
                        v.b[e] = x[at + 4u + e];
                    }
                }
            }
            xt[r][uu * 2u] = vec4<E>(v.a);
            xt[r][uu * 2u + 1u] = vec4<E>(v.b);
        }
        workgroupBarrier();
        for (var q = 0u; q < 8u; q++) {
            let w0 = wt[tx][q];
            let w1 = wt[tx + 16u][q];
            let x0 = xt[ty][q];
            let x1 = xt[ty + 16u][q];
            acc[0] += f32(dot(x0, w0));
            acc[1] += f32(dot(x0, w1));
            acc[2] += f32(dot(x1, w0));
            acc[3] += f32(dot(x1, w1));
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let tok = t0 + ty + (i / 2u) * 16u;
        let row = n0 + tx + (i % 2u) * 16u;
        if (tok < p.t && row < p.n) {
            y[tok * p.ny + p.row0 + row] = acc[i];
        }
    }
}
#endif
