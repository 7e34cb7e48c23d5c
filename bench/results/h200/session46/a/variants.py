"""Writes the trial variants of shaders/qgemv_gpu.wgsl (as the diag hook of session34/b dumps it,
all parts concatenated) for the qmatmul_bench and weft builds with that hook:
  unpack        half_in by unpack2x16float instead of the exact integer widening
  nosel         no clamps or row-end selects where the tile count divides the chunks (a constant
                with SHAPE)
  unpack_nosel  both
    python variants.py DUMPED.wgsl OUT_DIR
"""
import os
import sys

src = open(sys.argv[1]).read()
out = sys.argv[2]
a = "    return widen((words >> ((h & 1u) * 16u)) & 0xffffu);\n"
assert src.count(a) == 1
unpack = src.replace(a, "    return unpack2x16float(words)[h & 1u];\n")
sel = [("        let c = min(t0 + lane, nb - 1u);\n",
        "        let whole = nb % TILE == 0u;\n        let c = select(min(t0 + lane, nb - 1u), t0 + lane, whole);\n"),
       ("        let d = min(t0 + lane + LPR, nb - 1u);\n",
        "        let d = select(min(t0 + lane + LPR, nb - 1u), t0 + lane + LPR, whole);\n"),
       ("        let has_c = t0 + lane < nb;\n", "        let has_c = whole || t0 + lane < nb;\n"),
       ("        let has_d = t0 + lane + LPR < nb;\n", "        let has_d = whole || t0 + lane + LPR < nb;\n")]


def nosel(s):
    for x, y in sel:
        assert s.count(x) == 1, x
        s = s.replace(x, y)
    return s


for name, text in [("unpack", unpack), ("nosel", nosel(src)), ("unpack_nosel", nosel(unpack))]:
    os.makedirs(f"{out}/{name}", exist_ok=True)
    open(f"{out}/{name}/qgemv_gpu.wgsl", "w").write(text)
