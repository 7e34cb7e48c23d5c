// 2-D convolution with bias: one invocation per output element.
// out[b, o, y, x] = bias[o] + sum over c, ky, kx of
//     inp[b, c, y*stride - pad + ky, x*stride - pad + kx] * w[o, c, ky, kx]
// Taps that fall outside the input read zero (zero padding).

struct Params {
    n: u32,          // output elements: batch * out_c * out_h * out_w
    row_stride: u32, // invocations per row of the 2-D grid
    in_c: u32,
    in_h: u32,
    in_w: u32,
    out_c: u32,
    out_h: u32,
    out_w: u32,
    kernel: u32,
    stride: u32,
    pad: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> inp: array<f32>;        // [batch, in_c, in_h, in_w]
@group(0) @binding(1) var<storage, read> w: array<f32>;          // [out_c, in_c, kernel, kernel]
@group(0) @binding(2) var<storage, read> bias: array<f32>;       // [out_c]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;  // [batch, out_c, out_h, out_w]
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * p.row_stride;
    if (i >= p.n) {
        return;
    }
    let ox = i % p.out_w;
    let oy = (i / p.out_w) % p.out_h;
    let o = (i / (p.out_w * p.out_h)) % p.out_c;
    let b = i / (p.out_w * p.out_h * p.out_c);
    var acc = 0.0;
    for (var c = 0u; c < p.in_c; c++) {
        let plane = (b * p.in_c + c) * p.in_h;
        let taps = (o * p.in_c + c) * p.kernel;
        for (var ky = 0u; ky < p.kernel; ky++) {
            // Unsigned arithmetic: a row above the input wraps to a huge value and fails the test.
            let iy = oy * p.stride + ky - p.pad;
            if (iy >= p.in_h) {
                continue;
            }
            for (var kx = 0u; kx < p.kernel; kx++) {
                let ix = ox * p.stride + kx - p.pad;
                if (ix >= p.in_w) {
                    continue;
                }
                acc += inp[(plane + iy) * p.in_w + ix] * w[(taps + ky) * p.kernel + kx];
            }
        }
    }
    out[i] = acc + bias[o];
}
