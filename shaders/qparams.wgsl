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
