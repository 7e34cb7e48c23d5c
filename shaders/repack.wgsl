// GGUF Q4_0 / Q8_0 blocks written as the weft format that holds them exactly, bit for bit what
// quant/repack.rs computes on the CPU: per block, `bits` words of levels and its f16 scale as
// stored.
//
// A block is 2 + 4 * bits bytes (18 or 34), so blocks are not word-aligned: the raw bytes are
// read as the words that hold them and shifted (`byte_at` and `u16_at` of decode.wgsl, which
// follows this file). One invocation writes two neighbouring blocks, whose scales share one
// word: a single writer fills it, no atomics.

struct Params {
    // Blocks in this dispatch's upload.
    blocks: u32,
    // 4: Q4_0, 8: Q8_0.
    bits: u32,
    // Index of the upload's first block in the output buffers (even).
    out_block0: u32,
    // Invocations per row of the dispatch grid.
    stride: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> scales: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let pair = gid.y * params.stride + gid.x;
    if 2u * pair >= params.blocks {
        return;
    }
    let bits = params.bits;
    let per = 32u / bits;
    var halves = array<u32, 2>(0u, 0u);
    for (var k = 0u; k < 2u; k++) {
        let b = 2u * pair + k;
        if b >= params.blocks {
            break;
        }
        let at = b * (2u + 4u * bits);
        halves[k] = u16_at(at);
        for (var w = 0u; w < bits; w++) {
            var word = 0u;
            for (var i = 0u; i < per; i++) {
                let l = w * per + i;
                var q: u32;
                if bits == 4u {
                    // Element l is the low nibble of byte l, element l + 16 the high one.
                    q = (byte_at(at + 2u + l % 16u) >> (4u * (l / 16u))) & 0xFu;
                } else {
                    // i8 plus the zero point 128: the byte with its top bit flipped.
                    q = byte_at(at + 2u + l) ^ 0x80u;
                }
                word |= q << (i * bits);
            }
            words[(params.out_block0 + b) * bits + w] = word;
        }
    }
    scales[params.out_block0 / 2u + pair] = halves[0] | (halves[1] << 16u);
}
