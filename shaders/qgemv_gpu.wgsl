// y[t, n] = W[n, k] · x[t, k] for one or a few tokens on GPUs (not CPU-emulated adapters), for
// weft weights with K a multiple of 32 — and the GGUF types that are repacked into them at upload
// (Q4_0, Q8_0; src/ops/qmatmul/weight.rs). The BLOCKS kernel of qgemv.wgsl read 12-17 % of an
// H100's copy bandwidth; this one is written for the memory system:
// - no arrays: a chunk's activations and the accumulators are named values, since a dynamically
//   indexed array may be placed in local memory by the driver's compiler;
// - a lane loads a whole 32-weight chunk with one vector load (vec4 of words at 4 and 8 bits),
//   adjacent lanes load adjacent chunks, so a subgroup's loads of a row are one contiguous run;
// - levels become floats by the exponent trick (q | 0x4B000000 reads as 2^23 + q), which skips
//   the int-to-float conversion, a quarter-rate instruction on NVIDIA GPUs;
// - two chunks a loop turn, all their loads issued before the arithmetic that uses them;
// - RPT rows (1, 2 or 4) share each load of the activations.
// LPR adjacent lanes share a group of RPT rows; lane j takes chunks j, j + LPR, ... and the
// lanes' sums are added by subgroup shuffles (SG) or a shared-memory tree.
//
// Each weight is s · (q - z) with q - z exact, as the reference computes it; only the order of
// the additions differs from the reference, which the kernels' named tolerance covers.
//
// Fusions of the decode step: NORM (x RMS-normalised first, see gemv_norm.wgsl) and RESIDUAL
// (the product added to y).

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;   // [t, k / 4]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // [t, ny]
@group(0) @binding(3) var<storage, read> scales: array<u32>;    // f16 pairs, [n, gpr]
#ifdef ASYM
@group(0) @binding(4) var<storage, read> zeros: array<u32>;     // f16 pairs, [n, gpr]
#endif
@group(0) @binding(${PB}) var<uniform> p: Params;

const WG: u32 = ${WG}u;
const LPR: u32 = ${LPR}u;
const RPT: u32 = ${RPT}u;
const BITS: u32 = ${BITS}u;
const CPG: u32 = ${GROUP}u / 32u; // chunks per group
const MAGIC: u32 = 0x4B000000u;   // the bits of 2^23: MAGIC | q reads as 2^23 + q
const TWO23: f32 = 8388608.0;

#ifndef SG
var<workgroup> part: array<vec4<f32>, WG>;
#endif

#ifdef WB4
@group(0) @binding(0) var<storage, read> q: array<vec4<u32>>; // one per chunk
alias Chunk = vec4<u32>;
fn load(row: u32, c: u32) -> Chunk {
    return q[row * (p.wpr / 4u) + c];
}
#endif
#ifdef WB8
@group(0) @binding(0) var<storage, read> q: array<vec4<u32>>; // two per chunk
struct Chunk {
    a: vec4<u32>,
    b: vec4<u32>,
}
fn load(row: u32, c: u32) -> Chunk {
    let at = row * (p.wpr / 4u) + 2u * c;
    return Chunk(q[at], q[at + 1u]);
}
#endif
#ifdef WB2
@group(0) @binding(0) var<storage, read> q: array<vec2<u32>>; // one per chunk
alias Chunk = vec2<u32>;
fn load(row: u32, c: u32) -> Chunk {
    return q[row * (p.wpr / 2u) + c];
}
#endif
#ifdef WB3
@group(0) @binding(0) var<storage, read> q: array<u32>; // three words per chunk
alias Chunk = vec3<u32>;
fn load(row: u32, c: u32) -> Chunk {
    let at = row * p.wpr + 3u * c;
    return vec3<u32>(q[at], q[at + 1u], q[at + 2u]);
}
#endif

// The f16 with these 16 bits, widened exactly (subnormals, infinities and NaNs included)
// without branches.
fn widen(bits: u32) -> f32 {
    let mag = bits & 0x7fffu;
    let sign = (bits & 0x8000u) << 16u;
    let normal = (mag << 13u) + select(0x38000000u, 0x70000000u, mag >= 0x7c00u);
    let tiny = bitcast<u32>(f32(mag) * 5.9604645e-8); // mag · 2^-24, exact
    return bitcast<f32>(sign | select(normal, tiny, mag < 0x400u));
}

fn half_in(words: u32, h: u32) -> f32 {
    return widen((words >> ((h & 1u) * 16u)) & 0xffffu);
}

// The scale of chunk c of `row`, and what centring subtracts from 2^23 + q: 2^23 + z for the
// symmetric scheme's integer zero (exact), 2^23 alone for a stored zero point (subtracted next).
fn scale(row: u32, c: u32) -> f32 {
    let h = row * p.gpr + c / CPG;
    return half_in(scales[h >> 1u], h);
}

fn zero(row: u32, c: u32) -> f32 {
#ifdef ASYM
    let h = row * p.gpr + c / CPG;
    return half_in(zeros[h >> 1u], h);
#else
    return f32(1u << (BITS - 1u));
#endif
}

// q - z for four levels q (each below 2^23).
fn centred(w: vec4<u32>, z: f32) -> vec4<f32> {
    let v = bitcast<vec4<f32>>(w | vec4<u32>(MAGIC));
#ifdef ASYM
    return (v - vec4<f32>(TWO23)) - vec4<f32>(z);
#else
    return v - vec4<f32>(TWO23 + z);
#endif
}

// The `mask`-wide fields of `w` at bit offsets `sh`.
fn fields(w: u32, sh: vec4<u32>, mask: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> sh) & vec4<u32>(mask);
}

// The 32 activations of chunk c of token `tok`.
struct X8 {
    x0: vec4<f32>,
    x1: vec4<f32>,
    x2: vec4<f32>,
    x3: vec4<f32>,
    x4: vec4<f32>,
    x5: vec4<f32>,
    x6: vec4<f32>,
    x7: vec4<f32>,
}

fn xchunk(tok: u32, c: u32, inv: f32) -> X8 {
    let at = tok * (p.k / 4u) + 8u * c;
#ifdef NORM
    let g = 8u * c;
    return X8(
        x[at] * inv * norm_w[g], x[at + 1u] * inv * norm_w[g + 1u],
        x[at + 2u] * inv * norm_w[g + 2u], x[at + 3u] * inv * norm_w[g + 3u],
        x[at + 4u] * inv * norm_w[g + 4u], x[at + 5u] * inv * norm_w[g + 5u],
        x[at + 6u] * inv * norm_w[g + 6u], x[at + 7u] * inv * norm_w[g + 7u],
    );
#else
    return X8(x[at], x[at + 1u], x[at + 2u], x[at + 3u], x[at + 4u], x[at + 5u], x[at + 6u], x[at + 7u]);
#endif
}

// Σ (q - z) · x over one chunk (the scale is applied by the caller).
fn cdot(w: Chunk, z: f32, xs: X8) -> f32 {
#ifdef WB4
    let lo = vec4<u32>(0u, 4u, 8u, 12u);
    let hi = vec4<u32>(16u, 20u, 24u, 28u);
    return dot(centred(fields(w.x, lo, 15u), z), xs.x0) + dot(centred(fields(w.x, hi, 15u), z), xs.x1)
        + dot(centred(fields(w.y, lo, 15u), z), xs.x2) + dot(centred(fields(w.y, hi, 15u), z), xs.x3)
        + dot(centred(fields(w.z, lo, 15u), z), xs.x4) + dot(centred(fields(w.z, hi, 15u), z), xs.x5)
        + dot(centred(fields(w.w, lo, 15u), z), xs.x6) + dot(centred(fields(w.w, hi, 15u), z), xs.x7);
#endif
#ifdef WB8
    let b = vec4<u32>(0u, 8u, 16u, 24u);
    return dot(centred(fields(w.a.x, b, 255u), z), xs.x0) + dot(centred(fields(w.a.y, b, 255u), z), xs.x1)
        + dot(centred(fields(w.a.z, b, 255u), z), xs.x2) + dot(centred(fields(w.a.w, b, 255u), z), xs.x3)
        + dot(centred(fields(w.b.x, b, 255u), z), xs.x4) + dot(centred(fields(w.b.y, b, 255u), z), xs.x5)
        + dot(centred(fields(w.b.z, b, 255u), z), xs.x6) + dot(centred(fields(w.b.w, b, 255u), z), xs.x7);
#endif
#ifdef WB2
    // Word i holds levels 16i .. 16i + 15, two bits each.
    let s = vec4<u32>(0u, 2u, 4u, 6u);
    return dot(centred(fields(w.x, s, 3u), z), xs.x0) + dot(centred(fields(w.x, s + 8u, 3u), z), xs.x1)
        + dot(centred(fields(w.x, s + 16u, 3u), z), xs.x2) + dot(centred(fields(w.x, s + 24u, 3u), z), xs.x3)
        + dot(centred(fields(w.y, s, 3u), z), xs.x4) + dot(centred(fields(w.y, s + 8u, 3u), z), xs.x5)
        + dot(centred(fields(w.y, s + 16u, 3u), z), xs.x6) + dot(centred(fields(w.y, s + 24u, 3u), z), xs.x7);
#endif
#ifdef WB3
    // Low bit pairs of levels 0-15 in word x, 16-31 in word y; bit i of word z is level i's third.
    let s = vec4<u32>(0u, 2u, 4u, 6u);
    let e = vec4<u32>(0u, 1u, 2u, 3u);
    return dot(centred(fields(w.x, s, 3u) | (fields(w.z, e, 1u) << vec4<u32>(2u)), z), xs.x0)
        + dot(centred(fields(w.x, s + 8u, 3u) | (fields(w.z, e + 4u, 1u) << vec4<u32>(2u)), z), xs.x1)
        + dot(centred(fields(w.x, s + 16u, 3u) | (fields(w.z, e + 8u, 1u) << vec4<u32>(2u)), z), xs.x2)
        + dot(centred(fields(w.x, s + 24u, 3u) | (fields(w.z, e + 12u, 1u) << vec4<u32>(2u)), z), xs.x3)
        + dot(centred(fields(w.y, s, 3u) | (fields(w.z, e + 16u, 1u) << vec4<u32>(2u)), z), xs.x4)
        + dot(centred(fields(w.y, s + 8u, 3u) | (fields(w.z, e + 20u, 1u) << vec4<u32>(2u)), z), xs.x5)
        + dot(centred(fields(w.y, s + 16u, 3u) | (fields(w.z, e + 24u, 1u) << vec4<u32>(2u)), z), xs.x6)
        + dot(centred(fields(w.y, s + 24u, 3u) | (fields(w.z, e + 28u, 1u) << vec4<u32>(2u)), z), xs.x7);
#endif
}

// s · Σ (q - z) · x for chunk c of `row`, its quants already loaded.
fn term(row: u32, c: u32, w: Chunk, xs: X8) -> f32 {
    return scale(row, c) * cdot(w, zero(row, c), xs);
}

// The sums of the LPR adjacent lanes that share a group of rows, in every one of them.
fn row_sum(v: vec4<f32>, lid: u32) -> vec4<f32> {
    var s = v;
#ifdef SG
    for (var o = LPR / 2u; o > 0u; o >>= 1u) {
        s += subgroupShuffleXor(s, o);
    }
#else
    part[lid] = s;
    workgroupBarrier();
    let lane = lid % LPR;
    for (var o = LPR / 2u; o > 0u; o >>= 1u) {
        if (lane < o) {
            part[lid] += part[lid + o];
        }
        workgroupBarrier();
    }
    s = part[lid - lane];
#endif
    return s;
}

fn store(tok: u32, row: u32, v: f32) {
    if (row < p.n) {
        let at = tok * p.ny + p.row0 + row;
#ifdef RESIDUAL
        y[at] = y[at] + v;
#else
        y[at] = v;
#endif
    }
}

@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let lane = lid.x % LPR;
    let row0 = ((wid.x + wid.y * p.grid_x) * (WG / LPR) + lid.x / LPR) * RPT;
    let tok = wid.z;
    let nb = p.k / 32u;
    // Rows past n repeat row n - 1 and are never stored: every lane keeps the loop's shape.
    let last = p.n - 1u;
    let r0 = min(row0, last);
    let r1 = min(row0 + 1u, last);
    let r2 = min(row0 + 2u, last);
    let r3 = min(row0 + 3u, last);
#ifdef NORM
    let inv = inv_rms(tok, lid.x);
#else
    let inv = 1.0;
#endif
    var acc = vec4<f32>(0.0);
    var c = lane;
    for (; c + LPR < nb; c += 2u * LPR) {
        let d = c + LPR;
        let w0 = load(r0, c);
        let v0 = load(r0, d);
#ifdef R2
        let w1 = load(r1, c);
        let v1 = load(r1, d);
#endif
#ifdef R4
        let w2 = load(r2, c);
        let v2 = load(r2, d);
        let w3 = load(r3, c);
        let v3 = load(r3, d);
#endif
        let xa = xchunk(tok, c, inv);
        let xb = xchunk(tok, d, inv);
        acc.x += term(r0, c, w0, xa) + term(r0, d, v0, xb);
#ifdef R2
        acc.y += term(r1, c, w1, xa) + term(r1, d, v1, xb);
#endif
#ifdef R4
        acc.z += term(r2, c, w2, xa) + term(r2, d, v2, xb);
        acc.w += term(r3, c, w3, xa) + term(r3, d, v3, xb);
#endif
    }
    if (c < nb) {
        let xa = xchunk(tok, c, inv);
        acc.x += term(r0, c, load(r0, c), xa);
#ifdef R2
        acc.y += term(r1, c, load(r1, c), xa);
#endif
#ifdef R4
        acc.z += term(r2, c, load(r2, c), xa);
        acc.w += term(r3, c, load(r3, c), xa);
#endif
    }
    if (LPR > 1u) {
        acc = row_sum(acc, lid.x);
    }
    if (lane == 0u) {
        store(tok, row0, acc.x);
#ifdef R2
        store(tok, row0 + 1u, acc.y);
#endif
#ifdef R4
        store(tok, row0 + 2u, acc.z);
        store(tok, row0 + 3u, acc.w);
#endif
    }
}
