"""Rows of the quality table in docs/QUALITY.md as JSON lines, for make_report.py to merge with
new measurements without measuring the old rows again: each carried row is marked with the
commit it was measured at (its own mark, or COMMIT for the unmarked rows of that version).

usage: carry.py QUALITY.md COMMIT > carried.jsonl
"""

import json
import re
import sys

WEIGHTS = 134_479_872  # quantized matrix weights of SmolLM2-135M (the table's bits/weight divisor)

ROWS_SH_FLAGS = {
    # Row names whose flags decide the chart's series (budget plans and keep rules).
    "mixed": "--budget-mb",
    "+": "--keep",
    "mix": "--keep",
}


def flags_of(name):
    for key, flag in ROWS_SH_FLAGS.items():
        if name.startswith(key) or key in name:
            return flag
    return ""


def main(path, commit):
    text = open(path).read()
    results = text.split("## Results", 1)[1].split("![", 1)[0]
    for line in results.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not re.match(r"^[0-9.]+$", cells[1]):
            continue
        label, bpw, mb, ppl, kld, p99, top1 = cells
        m = re.match(r"^(.*?)(?: \(([0-9a-f]{7})\))?$", label)
        name, mark = m.group(1), m.group(2) or commit
        # The table's bits/weight (3 decimals) gives the file size to ~8 kB; its MB column to 50 kB.
        rec = {"bits_per_weight": float(bpw), "file_bytes": round(float(bpw) * WEIGHTS / 8), "ppl": float(ppl), "kld": float(kld),
               "kld_p99": float(p99), "top1": float(top1.rstrip("%")) / 100, "measured_at": mark}
        if name.startswith("base"):
            rec.update(row="base", kind="base")
            rec.pop("measured_at")
        elif name.startswith("weft "):
            short = name[len("weft "):]
            rec.update(row=f"weft:{short}", kind="weft", name=short, flags=flags_of(short))
        else:
            imatrix = name.endswith(" imatrix")
            ty = name.replace("llama.cpp ", "").replace(" imatrix", "")
            rec.update(row=f"{'imatrix' if imatrix else 'llama'}:{ty}", kind="llama", name=name)
            if imatrix:
                rec["imatrix"] = True
        print(json.dumps(rec))
    roles = text.split("## Sensitivity by role", 1)[1].split("##", 1)[0]
    for line in roles.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.match(r"^[0-9]+$", cells[2]):
            continue
        role, name, tensors, kld, rel_sq, _ = cells
        print(json.dumps({"row": f"role:{role}:{name}", "kind": "role", "role": role, "name": name,
                          "tensors": int(tensors), "kld": float(kld), "rel_sq_sum": float(rel_sq), "measured_at": commit}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
