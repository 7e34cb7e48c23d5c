// Whether this adapter's unpack2x16float widens every f16 exactly: WGSL lets an implementation
// flush subnormal values, so the GEMV kernels decode their f16 scales with integer operations
// (shaders/qgemv_gpu.wgsl, `widen`) unless this probe found the builtin exact
// (src/gpu/probe.rs). Invocation i unpacks the word holding the bit patterns 2i and 2i + 1, so
// the 32,768 invocations cover all 65,536; the patterns come from the invocation's id, so no
// compiler can fold the conversion away.

@group(0) @binding(0) var<storage, read_write> out: array<vec2<u32>>; // [32768]

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < 32768u) {
        let word = (2u * i) | ((2u * i + 1u) << 16u);
        out[i] = bitcast<vec2<u32>>(unpack2x16float(word));
    }
}
