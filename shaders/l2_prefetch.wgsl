// Reads weights ahead into the GPU's L2 cache: one word of every 32-byte sector (the unit the L2
// cache fills from memory in) of up to two spans of each of three buffers. Recorded right after
// a decode step's GEMV with nothing that needs a barrier between them, it runs beside that GEMV,
// which leaves part of the memory's bandwidth unused (bench/NOTES.md 72), and the next GEMV
// finds the spans of its weight in the cache.
//
// The words are XORed into `sink` (through a workgroup atomic, then one device atomic a
// workgroup), so a compiler cannot drop the loads, and a test can check that every sector of
// the spans was read exactly once.

@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read> b1: array<u32>;
@group(0) @binding(2) var<storage, read> b2: array<u32>;
@group(0) @binding(3) var<storage, read_write> sink: array<atomic<u32>>;

const SECTOR: u32 = 8u; // words
// Span j: its first sector and the number of sectors, b0's spans 0 and 1, b1's 2 and 3, b2's 4
// and 5.
const F0: u32 = ${F0}u;
const N0: u32 = ${N0}u;
const F1: u32 = ${F1}u;
const N1: u32 = ${N1}u;
const F2: u32 = ${F2}u;
const N2: u32 = ${N2}u;
const F3: u32 = ${F3}u;
const N3: u32 = ${N3}u;
const F4: u32 = ${F4}u;
const N4: u32 = ${N4}u;
const F5: u32 = ${F5}u;
const N5: u32 = ${N5}u;

var<workgroup> wx: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) nw: vec3<u32>) {
    // Adjacent lanes take adjacent sectors: a subgroup's loads are one contiguous run.
    let lanes = nw.x * 256u;
    let g = gid.x;
    var acc = 0u;
    for (var s = g; s < N0; s += lanes) {
        acc ^= b0[(F0 + s) * SECTOR];
    }
    for (var s = g; s < N1; s += lanes) {
        acc ^= b0[(F1 + s) * SECTOR];
    }
    for (var s = g; s < N2; s += lanes) {
        acc ^= b1[(F2 + s) * SECTOR];
    }
    for (var s = g; s < N3; s += lanes) {
        acc ^= b1[(F3 + s) * SECTOR];
    }
    for (var s = g; s < N4; s += lanes) {
        acc ^= b2[(F4 + s) * SECTOR];
    }
    for (var s = g; s < N5; s += lanes) {
        acc ^= b2[(F5 + s) * SECTOR];
    }
    atomicXor(&wx, acc);
    workgroupBarrier();
    if (lid == 0u) {
        atomicXor(&sink[0], atomicLoad(&wx));
    }
}
