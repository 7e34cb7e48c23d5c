// The parameters every quantized-matmul kernel reads (shaders/qweight.wgsl's family and the GPU
// GEMV of shaders/qgemv_gpu.wgsl), set by `params` in src/ops/qmatmul/mod.rs.

// A weight larger than one storage binding is stored as several runs of rows, one dispatch
// each: `n` rows of this part, which are rows row0 .. row0 + n of W, written to columns
// row0 .. row0 + n of y [t, ny]. Row indices inside the kernels are local to the part.
struct Params {
    n: u32,      // rows of this part of W: output features
    k: u32,      // columns of W: the reduced dimension
    t: u32,      // tokens
    grid_x: u32, // workgroups along x of a 2-D grid of rows
    wpr: u32,    // weft: packed words per row
    gpr: u32,    // weft: groups (scales) per row
    chunks: u32, // GEMM block kernel: token chunks of TPT tokens
    row0: u32,   // the part's first row of W
    ny: u32,     // rows of all of W: the row length of y
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Scale and min codes of 32-weight sub-block j (0..8) of a Q4_K / Q5_K super-block, from the
// three words of its twelve code bytes (ggml's get_scale_min_k4): the four low sub-blocks keep
// six bits in bytes j and j + 4, the four high ones four bits in byte j + 4 and two in the top
// bits of bytes j - 4 and j. Shared by the repacked form's GEMV and its `w8`.
fn kq_codes(c0: u32, c1: u32, c2: u32, j: u32) -> vec2<u32> {
    let sh = 8u * (j % 4u);
    let a = (c0 >> sh) & 255u;
    let b = (c1 >> sh) & 255u;
    let c = (c2 >> sh) & 255u;
    let high = vec2<u32>((c & 15u) | ((a >> 6u) << 4u), (c >> 4u) | ((b >> 6u) << 4u));
    return select(high, vec2<u32>(a & 63u, b & 63u), j < 4u);
}
