// y[t, n] = W[n, k] · x[t, k] for one or a few tokens on GPUs (not CPU-emulated adapters), for
// weft weights with K a multiple of 32 — and the GGUF types that are repacked into them at upload
// (Q4_0, Q8_0; src/ops/qmatmul/weight.rs). The BLOCKS kernel of qgemv.wgsl read 12-17 % of an
// H100's copy bandwidth; this one is written for the memory system:
// - the activations are staged in workgroup memory, a tile of 2 · LPR chunks at a time, and read
//   from there by every row group of the workgroup: loaded from device memory by each lane they
//   cost more traffic than the weights (32 f32 per 16 bytes of 4-bit weights), and on an H100
//   those loads were served at about 3.3 TB/s, so they, not the weights, set the time;
// - no dynamically indexed arrays in registers: a chunk's activations and the accumulators are
//   named values, since such an array may be placed in local memory by the driver's compiler;
// - a lane loads a whole 32-weight chunk with one vector load (vec4 of words at 4 and 8 bits),
//   adjacent lanes load adjacent chunks, so a subgroup's loads of a row are one contiguous run;
// - levels become floats by the exponent trick (q | 0x4B000000 reads as 2^23 + q), which skips
//   the int-to-float conversion, a quarter-rate instruction on NVIDIA GPUs; and a field is
//   masked where it lies rather than shifted down (q · 16^c for the c-th nibble of a half-word),
//   the activations it meets being staged pre-multiplied by 16^-c (XSCALE): a power of two, so
//   each product (q - z) · x is the same as without the trick, for one integer operation a
//   weight instead of two (at 4 bits the integer pipe, half the rate of the float one, set the
//   time on an H100);
// - two chunks a lane per tile, their weights and scales loaded before the barrier that waits for
//   the tile, so the loads overlap the staging;
// - RPT rows (1, 2 or 4) share each load of the activations.
// LPR adjacent lanes share a group of RPT rows; lane j takes chunks j, j + LPR, ... and the
// lanes' sums are added by subgroup shuffles (SG) or a shared-memory tree.
//
// KQ: a repacked K-quant (src/quant/repack.rs), the same 4-bit words read the same way, and
// Q5_K's and Q6_K's high bits masked in place like them. A Q4_K / Q5_K chunk's weights are
// d1 · q - m1 (d1 = d · sc, m1 = dmin · m from its super-block's head), so its term is
// d1 · Σ q · x - m1 · Σ x; a Q6_K half-chunk's are d1 · (q - 32), so d1 · (Σ q · x - 32 Σ x).
// KL: Q4_1 / Q5_1 (d · q + m: the same with d1 = d, m1 = -m) and Q5_0 (KL0, d · (q - 16): m1 =
// 16 d, exact), a 32-weight block's params in place of a super-block's head.
// The codes are decoded once per 32 weights, Σ x once per chunk of activations for all the
// lane's rows.
//
// Each weight is s · (q - z) with q - z exact, as the reference computes it; only the order of
// the additions differs from the reference, which the kernels' named tolerance covers.
//
// Fusions of the decode step: NORM (x RMS-normalised first, see gemv_norm.wgsl; its sum of
// squares is taken while x is staged and 1 / rms scales the finished sums, so x is read once)
// RESIDUAL (the product added to y) and GLU (x is the stacked gate/up product, SwiGLU taken
// while staging: the MLP's down projection without the activation's own dispatch), SWIGLU (W
// the stacked gate/up weight [2n, k], gate rows first: each lane group takes gate rows and the
// up rows n below them, RPT 2 or 4, and stores silu(gate) · up, [t, n], the expression of
// shaders/silu_mul.wgsl on the same sums: the SwiGLU as the product's epilogue, so the down
// projection stages plain activations, half the bytes and no exp per workgroup). DP4: the
// activations quantized to 8 bits while staged and integer dot products (shaders/gemv_dp4.wgsl),
// at 4 and 8 bits and for the planes (KQ).

#ifdef XREC
// x as the 8-bit records its producer wrote (shaders/xrecord.wgsl): three vec4 a chunk.
@group(0) @binding(1) var<storage, read> xr: array<vec4<u32>>;  // [t, k / 32, 3]
#else
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;   // [t, k / 4]
#endif
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // [t, ny]
@group(0) @binding(3) var<storage, read> scales: array<u32>;    // f16 pairs, [n, gpr]; KQ: heads, [n, gpr, 4 or 1]
#ifdef ASYM
@group(0) @binding(4) var<storage, read> zeros: array<u32>;     // f16 pairs, [n, gpr]
#endif
#ifdef K6
@group(0) @binding(4) var<storage, read> dk: array<u32>;        // Q6_K's d, f16 pairs, [n, gpr]
#endif
#ifdef SHAPE
// The decode step's GEMVs: the weight's shape (and the norm's epsilon) are constants of the
// pipeline, each weight its own, and no uniform is bound. Every weight address then follows
// from the invocation's ids alone; with the uniform, each workgroup waited for its load before
// the first weight load could be issued (1-10 % of a decode step on an H200, bench/NOTES.md 68).
const p = Params(${SN}u, ${SK}u, ${ST}u, ${SGX}u, ${SWPR}u, ${SGPR}u, 0u, ${SROW0}u, ${SNY}u, ${SEPS}u, 0u, 0u);
#else
@group(0) @binding(${PB}) var<uniform> p: Params;
#endif

const WG: u32 = ${WG}u;
const LPR: u32 = ${LPR}u;
const RPT: u32 = ${RPT}u;
const BITS: u32 = ${BITS}u;
const CPG: u32 = ${GROUP}u / 32u; // chunks per group
const MAGIC: u32 = 0x4B000000u;   // the bits of 2^23: MAGIC | q reads as 2^23 + q
const TWO23: f32 = 8388608.0;

// Lanes sharing a group of rows add their four sums with `row_sum` (shaders/gemv_rowsum.wgsl).
alias RowAcc = vec4<f32>;

// A tile of activations: 2 · LPR chunks of eight vec4, each chunk followed by one vec4 of padding,
// so that the lanes of a subgroup, reading adjacent chunks, hit different banks.
const TILE: u32 = 2u * LPR;
#ifndef DP4
var<workgroup> xt: array<vec4<f32>, TILE * 9u>;
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
#ifdef WB5
@group(0) @binding(0) var<storage, read> q: array<vec4<u32>>; // low nibbles, one per chunk
@group(0) @binding(4) var<storage, read> qh: array<u32>;      // fifth bits, a word per chunk
struct Chunk {
    a: vec4<u32>,
    h: u32,
}
fn load(row: u32, c: u32) -> Chunk {
    return Chunk(q[row * (p.wpr / 4u) + c], qh[row * (p.k / 32u) + c]);
}
#endif
#ifdef WB6
@group(0) @binding(0) var<storage, read> q: array<vec2<u32>>; // three per chunk
struct Chunk {
    a: vec4<u32>, // low nibbles
    h: vec2<u32>, // high bit pairs of each half
}
fn load(row: u32, c: u32) -> Chunk {
    let at = row * (p.wpr / 2u) + 3u * c;
    return Chunk(vec4<u32>(q[at], q[at + 1u]), q[at + 2u]);
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
#ifdef F16_UNPACK
    // Where the adapter's unpack2x16float was found exact for every f16 (src/gpu/probe.rs):
    // one conversion instead of widen's dozen integer operations, 3-7 % of a 4-bit GEMV's time
    // on an H200 (bench/NOTES.md 71).
    return unpack2x16float(words)[h & 1u];
#else
    return widen((words >> ((h & 1u) * 16u)) & 0xffffu);
#endif
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

// PLACE: the place value of the weight field that meets component c of a staged vec4 of
// activations, once masked where it lies (see cdot); XSCALE = 1 / PLACE, what the activations
// are multiplied by when staged. Powers of two, so nothing rounds.
#ifdef WB4
const PLACE: vec4<f32> = vec4<f32>(1.0, 16.0, 256.0, 4096.0);
#endif
#ifdef WB5
const PLACE: vec4<f32> = vec4<f32>(1.0, 16.0, 256.0, 4096.0);
#endif
#ifdef WB6
const PLACE: vec4<f32> = vec4<f32>(1.0, 16.0, 256.0, 4096.0);
#endif
#ifdef WB8
const PLACE: vec4<f32> = vec4<f32>(1.0, 256.0, 1.0, 256.0);
#endif
#ifdef WB2
const PLACE: vec4<f32> = vec4<f32>(1.0, 4.0, 16.0, 64.0);
#endif
#ifdef WB3
const PLACE: vec4<f32> = vec4<f32>(1.0);
#endif
const XSCALE: vec4<f32> = vec4<f32>(1.0) / PLACE;

// (q - z) · PLACE for four levels masked in place (q · PLACE below 2^23), exactly.
fn centred(w: vec4<u32>, z: f32) -> vec4<f32> {
    let v = bitcast<vec4<f32>>(w | vec4<u32>(MAGIC));
    let zs = vec4<f32>(z) * PLACE;
#ifdef ASYM
    return (v - vec4<f32>(TWO23)) - zs;
#else
    return v - (vec4<f32>(TWO23) + zs);
#endif
}

// The `mask`-wide fields of `w` at bit offsets `sh`.
fn fields(w: u32, sh: vec4<u32>, mask: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> sh) & vec4<u32>(mask);
}

// w, w, w >> 16, w >> 16: a word's four bytes at place values 1, 256, 1, 256 once masked.
fn bytes(w: u32) -> vec4<u32> {
    let h = w >> 16u;
    return vec4<u32>(w, w, h, h);
}

// A chunk's quants with its scale and zero.
struct W {
    q: Chunk,
    s: f32,
    z: f32,
}

fn fetch(row: u32, c: u32) -> W {
#ifdef KL
    let b = row * p.gpr + c;
#ifdef KL0
    let d = half_in(scales[b >> 1u], b);
    return W(load(row, c), d, 16.0 * d);
#else
    let dm = scales[b];
    return W(load(row, c), half_in(dm, 0u), -half_in(dm, 1u));
#endif
#else
#ifdef KQ
    let sb = row * p.gpr + c / 8u;
    let h = sb * 4u;
#ifdef K6
    // s and z carry the halves' d · sc: the chunk's two 8-bit scales are bytes 2j, 2j + 1.
    let d = half_in(dk[sb >> 1u], sb);
    let sc = scales[h + (c % 8u) / 2u] >> (16u * (c % 2u));
    let s0 = f32(bitcast<i32>(sc << 24u) >> 24u);
    let s1 = f32(bitcast<i32>(sc << 16u) >> 24u);
    return W(load(row, c), d * s0, d * s1);
#else
    // s and z carry d1 and m1.
    let dm = scales[h];
    let sm = kq_codes(scales[h + 1u], scales[h + 2u], scales[h + 3u], c % 8u);
    return W(load(row, c), half_in(dm, 0u) * f32(sm.x), half_in(dm, 1u) * f32(sm.y));
#endif
#else
    return W(load(row, c), scale(row, c), zero(row, c));
#endif
#endif
}

#ifndef XREC
// Values 4i .. 4i + 3 of chunk c of token `tok` before the norm, as both stagings read them:
// x, or with GLU the SwiGLU of the stacked gate/up product [t, 2k] (gate then up), the
// expression of shaders/silu_mul.wgsl, so the same bits as its output.
fn xraw(tok: u32, c: u32, i: u32) -> vec4<f32> {
#ifdef GLU
    let at = tok * (p.k / 2u) + c * 8u + i;
    let g = x[at];
    return g / (vec4<f32>(1.0) + exp(-g)) * x[at + p.k / 4u];
#else
    return x[tok * (p.k / 4u) + c * 8u + i];
#endif
}
#endif

#ifndef DP4
// The 32 activations of chunk j of the tile.
struct X8 {
    x0: vec4<f32>,
    x1: vec4<f32>,
    x2: vec4<f32>,
    x3: vec4<f32>,
    x4: vec4<f32>,
    x5: vec4<f32>,
    x6: vec4<f32>,
    x7: vec4<f32>,
#ifdef KQ
    sum: vec2<f32>, // Σ x of each half of the chunk (the staged values times PLACE: exact)
#endif
}

fn xchunk(j: u32) -> X8 {
    let at = 9u * j;
#ifdef KQ
    let sum = vec2<f32>(dot(xt[at] + xt[at + 1u] + xt[at + 2u] + xt[at + 3u], PLACE),
        dot(xt[at + 4u] + xt[at + 5u] + xt[at + 6u] + xt[at + 7u], PLACE));
    return X8(xt[at], xt[at + 1u], xt[at + 2u], xt[at + 3u], xt[at + 4u], xt[at + 5u], xt[at + 6u], xt[at + 7u], sum);
#else
    return X8(xt[at], xt[at + 1u], xt[at + 2u], xt[at + 3u], xt[at + 4u], xt[at + 5u], xt[at + 6u], xt[at + 7u]);
#endif
}

// Copies chunks t0 .. t0 + TILE of token `tok`'s activations into `xt` (times the norm's weight
// with NORM), returning the sum of squares of the values this invocation copied: the norm's
// 1 / rms is a scalar of the token, applied to the finished sums.
fn stage(tok: u32, t0: u32, nb: u32, lid: u32) -> f32 {
    let n = min(TILE, nb - t0) * 8u;
    var ss = 0.0;
    for (var v = lid; v < n; v += WG) {
        let xv = xraw(tok, t0 + v / 8u, v % 8u);
#ifdef NORM
        ss += dot(xv, xv);
        xt[v + v / 8u] = xv * norm_w[t0 * 8u + v] * XSCALE;
#else
        xt[v + v / 8u] = xv * XSCALE;
#endif
    }
    return ss;
}

#ifndef KQ
// Σ (q - z) · x over one chunk (the scale is applied by the caller).
fn cdot(w: Chunk, z: f32, xs: X8) -> f32 {
#ifdef WB4
    // Word i: levels 8i .. 8i + 3 in its low half-word, 8i + 4 .. 8i + 7 in its high one.
    let m = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
    return dot(centred(vec4<u32>(w.x) & m, z), xs.x0) + dot(centred(vec4<u32>(w.x >> 16u) & m, z), xs.x1)
        + dot(centred(vec4<u32>(w.y) & m, z), xs.x2) + dot(centred(vec4<u32>(w.y >> 16u) & m, z), xs.x3)
        + dot(centred(vec4<u32>(w.z) & m, z), xs.x4) + dot(centred(vec4<u32>(w.z >> 16u) & m, z), xs.x5)
        + dot(centred(vec4<u32>(w.w) & m, z), xs.x6) + dot(centred(vec4<u32>(w.w >> 16u) & m, z), xs.x7);
#endif
#ifdef WB8
    // Word i: levels 4i .. 4i + 3, a byte each; bytes 0 and 2 at place value 1, 1 and 3 at 256.
    let m = vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u);
    return dot(centred(bytes(w.a.x) & m, z), xs.x0) + dot(centred(bytes(w.a.y) & m, z), xs.x1)
        + dot(centred(bytes(w.a.z) & m, z), xs.x2) + dot(centred(bytes(w.a.w) & m, z), xs.x3)
        + dot(centred(bytes(w.b.x) & m, z), xs.x4) + dot(centred(bytes(w.b.y) & m, z), xs.x5)
        + dot(centred(bytes(w.b.z) & m, z), xs.x6) + dot(centred(bytes(w.b.w) & m, z), xs.x7);
#endif
#ifdef WB2
    // Word i holds levels 16i .. 16i + 15, two bits each; byte j holds four of them.
    let m = vec4<u32>(0x3u, 0xcu, 0x30u, 0xc0u);
    return dot(centred(vec4<u32>(w.x) & m, z), xs.x0) + dot(centred(vec4<u32>(w.x >> 8u) & m, z), xs.x1)
        + dot(centred(vec4<u32>(w.x >> 16u) & m, z), xs.x2) + dot(centred(vec4<u32>(w.x >> 24u) & m, z), xs.x3)
        + dot(centred(vec4<u32>(w.y) & m, z), xs.x4) + dot(centred(vec4<u32>(w.y >> 8u) & m, z), xs.x5)
        + dot(centred(vec4<u32>(w.y >> 16u) & m, z), xs.x6) + dot(centred(vec4<u32>(w.y >> 24u) & m, z), xs.x7);
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

// s · Σ (q - z) · x for one chunk.
fn term(w: W, xs: X8) -> f32 {
    return w.s * cdot(w.q, w.z, xs);
}
#endif

#ifdef KQ
// Σ f · x over eight weights: f the fields that `m` masks in each nibble of the low and the high
// half-word of `h`, meeting x0 and x1, read at their place value (16^c times 2^b for the b-th
// field of a nibble), exactly.
fn hdot(h: u32, m: vec4<u32>, x0: vec4<f32>, x1: vec4<f32>) -> f32 {
    return dot(centred(vec4<u32>(h) & m, 0.0), x0) + dot(centred(vec4<u32>(h >> 16u) & m, 0.0), x1);
}

const NIB: vec4<u32> = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const BIT: vec4<u32> = vec4<u32>(0x1u, 0x10u, 0x100u, 0x1000u);

fn term(w: W, xs: X8) -> f32 {
#ifdef WB4
    let a = w.q;
#else
    let a = w.q.a;
#endif
    let lo = hdot(a.x, NIB, xs.x0, xs.x1) + hdot(a.y, NIB, xs.x2, xs.x3);
    let hi = hdot(a.z, NIB, xs.x4, xs.x5) + hdot(a.w, NIB, xs.x6, xs.x7);
#ifdef K4
    return w.s * (lo + hi) - w.z * (xs.sum.x + xs.sum.y);
#endif
#ifdef K5
    // The fifth bit of weight 16 a + 4 b + c at bit 16 a + 4 c + b.
    let h = w.q.h;
    let h5 = hdot(h, BIT, xs.x0, xs.x4) + 0.5 * hdot(h, BIT << vec4<u32>(1u), xs.x1, xs.x5)
        + 0.25 * hdot(h, BIT << vec4<u32>(2u), xs.x2, xs.x6) + 0.125 * hdot(h, BIT << vec4<u32>(3u), xs.x3, xs.x7);
    return w.s * (lo + hi + 16.0 * h5) - w.z * (xs.sum.x + xs.sum.y);
#endif
#ifdef K6
    // The high pair of weight 16 h + 8 a + 4 b + c in word h at bit 16 a + 4 c + 2 b.
    let pair = BIT * 3u;
    let up = pair << vec4<u32>(2u);
    let hl = hdot(w.q.h.x, pair, xs.x0, xs.x2) + 0.25 * hdot(w.q.h.x, up, xs.x1, xs.x3);
    let hh = hdot(w.q.h.y, pair, xs.x4, xs.x6) + 0.25 * hdot(w.q.h.y, up, xs.x5, xs.x7);
    return w.s * (lo + 16.0 * hl - 32.0 * xs.sum.x) + w.z * (hi + 16.0 * hh - 32.0 * xs.sum.y);
#endif
}
#endif
#endif

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
    let tok = wid.z;
    let nb = p.k / 32u;
    // Rows past n repeat row n - 1 and are never stored: every lane keeps the loop's shape.
    let last = p.n - 1u;
#ifdef SWIGLU
    // Output rows row0 (and row0 + 1 with R4): gate rows r0 (r2), their up rows p.n below.
    let row0 = ((wid.x + wid.y * p.grid_x) * (WG / LPR) + lid.x / LPR) * (RPT / 2u);
    let r0 = min(row0, last);
    let r1 = r0 + p.n;
    let r2 = min(row0 + 1u, last);
    let r3 = r2 + p.n;
#else
    let row0 = ((wid.x + wid.y * p.grid_x) * (WG / LPR) + lid.x / LPR) * RPT;
    let r0 = min(row0, last);
    let r1 = min(row0 + 1u, last);
    let r2 = min(row0 + 2u, last);
    let r3 = min(row0 + 3u, last);
#endif
    var acc = vec4<f32>(0.0);
    var ss = 0.0;
    // Whole tiles (a constant with SHAPE): no chunk is past the row's end, nothing to clamp.
    let whole = nb % TILE == 0u;
    for (var t0 = 0u; t0 < nb; t0 += TILE) {
        // Lane `lane` takes chunks c and d of this tile (clamped past the row's end, then not
        // counted); its loads are issued before it waits for the tile.
        let c = select(min(t0 + lane, nb - 1u), t0 + lane, whole);
        let d = select(min(t0 + lane + LPR, nb - 1u), t0 + lane + LPR, whole);
        let w0 = fetch(r0, c);
        let v0 = fetch(r0, d);
#ifdef R2
        let w1 = fetch(r1, c);
        let v1 = fetch(r1, d);
#endif
#ifdef R4
        let w2 = fetch(r2, c);
        let v2 = fetch(r2, d);
        let w3 = fetch(r3, c);
        let v3 = fetch(r3, d);
#endif
#ifdef XREC
        // The records are in device memory: nothing to stage, no barriers.
        let xa = xrec(tok, c);
        let xb = xrec(tok, d);
#else
        workgroupBarrier(); // the previous tile's reads are done
        ss += stage(tok, t0, nb, lid.x);
        workgroupBarrier();
        let xa = xchunk(lane);
        let xb = xchunk(lane + LPR);
#endif
        let has_c = whole || t0 + lane < nb;
        let has_d = whole || t0 + lane + LPR < nb;
        acc.x += select(0.0, term(w0, xa), has_c) + select(0.0, term(v0, xb), has_d);
#ifdef R2
        acc.y += select(0.0, term(w1, xa), has_c) + select(0.0, term(v1, xb), has_d);
#endif
#ifdef R4
        acc.z += select(0.0, term(w2, xa), has_c) + select(0.0, term(v2, xb), has_d);
        acc.w += select(0.0, term(w3, xa), has_c) + select(0.0, term(v3, xb), has_d);
#endif
    }
    if (LPR > 1u) {
        acc = row_sum(acc, lid.x);
    }
#ifdef NORM
    acc *= inv_rms_of(wg_sum(ss, lid.x));
#endif
#ifdef SWIGLU
    let h0 = acc.x / (1.0 + exp(-acc.x)) * acc.y;
#ifdef R4
    let h1 = acc.z / (1.0 + exp(-acc.z)) * acc.w;
#endif
#endif
    if (lane == 0u) {
#ifdef SWIGLU
        store(tok, row0, h0);
#ifdef XOUT
        xo_v[(lid.x / LPR) * (RPT / 2u)] = h0;
#endif
#ifdef R4
        store(tok, row0 + 1u, h1);
#ifdef XOUT
        xo_v[(lid.x / LPR) * (RPT / 2u) + 1u] = h1;
#endif
#endif
#else
        store(tok, row0, acc.x);
#ifdef R2
        store(tok, row0 + 1u, acc.y);
#endif
#ifdef R4
        store(tok, row0 + 2u, acc.z);
        store(tok, row0 + 3u, acc.w);
#endif
#endif
    }
#ifdef XOUT
    // The workgroup's outputs are whole chunks: their records for the next GEMV.
    workgroupBarrier();
    write_records(tok, (wid.x + wid.y * p.grid_x) * XO_ROWS, lid.x);
#endif
}
