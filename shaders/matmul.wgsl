// C = A · B with square shared-memory tiles. Inputs are ELEM (f32, or f16 where the
// adapter has shader-f16); accumulation and output are always f32.
#ifdef F16
enable f16;
#endif

struct Params {
    m: u32,
    k: u32,
    n: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> a: array<${ELEM}>;    // [m, k]
@group(0) @binding(1) var<storage, read> b: array<${ELEM}>;    // [k, n]
@group(0) @binding(2) var<storage, read_write> c: array<f32>;  // [m, n]
@group(0) @binding(3) var<uniform> p: Params;

const TILE: u32 = ${TILE}u;

var<workgroup> tile_a: array<array<f32, TILE>, TILE>;  // [row, k]
var<workgroup> tile_b: array<array<f32, TILE>, TILE>;  // [k, col]

@compute @workgroup_size(${TILE}, ${TILE})
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    let tiles = (p.k + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t++) {
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if (row < p.m && ka < p.k) {
            va = f32(a[row * p.k + ka]);
        }
        tile_a[lid.y][lid.x] = va;
        let kb = t * TILE + lid.y;
        var vb = 0.0;
        if (kb < p.k && col < p.n) {
            vb = f32(b[kb * p.n + col]);
        }
        tile_b[lid.y][lid.x] = vb;
        workgroupBarrier();
        for (var i = 0u; i < TILE; i++) {
            acc += tile_a[lid.y][i] * tile_b[i][lid.x];
        }
        workgroupBarrier();
    }
    if (row < p.m && col < p.n) {
        c[row * p.n + col] = acc;
    }
}
