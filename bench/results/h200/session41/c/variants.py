"""Diagnostic variants of shaders/attention_decode.wgsl with parts removed (timed only; their
outputs are wrong): python3 variants.py NAME BASE.wgsl OUT.wgsl, then build
examples/attention_bench with OUT in place of the kernel."""
import sys
base = open(sys.argv[2]).read()
def sub(s, old, new):
    assert old in s, old[:60]
    return s.replace(old, new, 1)
def empty(s):
    return sub(s, "    let h = wid.x;\n", "    if (p.n_heads > 0u) {\n        return;\n    }\n    let h = wid.x;\n")
def nov(s):
    return sub(s, "        va = v_round(vl, vl.g);\n        vb = v_round(vl, vl.g + 8u * groups);\n", "")
def norope(s):
    return sub(s, "fn rotated(src: u32, d: u32, slot: u32) -> f32 {\n", "fn rotated(src: u32, d: u32, slot: u32) -> f32 {\n    if (p.n_heads > 0u) {\n        return q[src + d];\n    }\n")
def nosoftmax(s):
    a = s.index("    let ms = subgroupMax(s);")
    b = s.index("#else\n    if (lane < CHUNK) {\n        probs[lane] = s;")
    return s[:a] + "    let m = 0.0;\n    let l = 1.0;\n    if (lane < CHUNK) {\n        probs[lane] = select(0.0, exp(s - m), seen);\n    }\n    workgroupBarrier();\n" + s[b:]
def nomerge(s):
    a = s.index("    merged[lane] = a0 + a1;")
    b = s.index("    let q_base = h * p.head_dim;")
    return s[:a] + "    let sum = a0 + a1;\n" + s[b:]
def nostore(s):
    return sub(s, """        if (stores) {
            k_cache[fresh_row + lane] = kv_store(k_new[lane]);
            v_cache[fresh_row + lane] = kv_store(v_new[lane]);
        }
#endif""", """        if (stores && p.n_heads == 0u) {
            k_cache[fresh_row + lane] = kv_store(k_new[lane]);
            v_cache[fresh_row + lane] = kv_store(v_new[lane]);
        }
#endif""")
V = {
  'base': [], 'empty': [empty], 'nov': [nov], 'norope': [norope], 'nosoftmax': [nosoftmax],
  'nomerge': [nomerge], 'nostore': [nostore], 'all': [nov, norope, nosoftmax, nomerge, nostore],
}
name = sys.argv[1]
s = base
for f in V[name]:
    s = f(s)
open(sys.argv[3], 'w').write(s)
