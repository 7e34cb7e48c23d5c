"""Writes the quality table (markdown, to stdout) and the KLD-vs-bits/weight plot (SVG) from the
JSON lines that run_table.py appended; with a third argument, also the size/quality frontier
(markdown table to stdout, chart to FRONTIER.svg): for each file size from 50 to 100 MB in 5 MB
steps, the lowest KLD of weft's files and of llama.cpp's files of at most that size.

usage: make_report.py RESULTS.jsonl[,MORE.jsonl] PLOT.svg [FRONTIER.svg] > table.md
"""

import json
import math
import sys


def load(paths):
    """Rows of one or more results files; a later measurement of a row replaces an earlier one."""
    rows = {}
    for path in paths.split(","):
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                rows[r["row"]] = r
    return list(rows.values())


def label(r):
    # Rows carried from an earlier run of the same harness are marked with the commit they were
    # measured at.
    mark = f" ({r['measured_at']})" if r.get("measured_at") else ""
    if r["kind"] == "base":
        return "base (Q4_1 source, decoded)"
    if r["kind"] == "weft":
        return f"weft {r['name']}{mark}"
    if r["kind"] == "role":
        return f"{r['role']} only, from {r['name']}"
    return r["name"] + mark


def table(rows):
    out = [
        "| model | bits/weight | file MB | perplexity | mean KLD | KLD p99 | top-1 agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    main = [r for r in rows if r["kind"] in ("base", "weft", "llama")]
    main.sort(key=lambda r: (r["kind"] != "base", r["bits_per_weight"]))
    for r in main:
        out.append(
            f"| {label(r)} | {r['bits_per_weight']:.3f} | {r['file_bytes'] / 1e6:.1f} | {r['ppl']:.4f} "
            f"| {r['kld']:.5f} | {r['kld_p99']:.4f} | {100 * r['top1']:.2f}% |"
        )
    return "\n".join(out)


def role_table(rows):
    roles = [r for r in rows if r["kind"] == "role"]
    if not roles:
        return ""
    out = [
        "| quantized role | from | tensors | mean KLD | summed relative sq. error | KLD per unit error |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(roles, key=lambda r: -r["kld"]):
        w = r["kld"] / r["rel_sq_sum"] if r["rel_sq_sum"] > 0 else float("nan")
        out.append(f"| {r['role']} | {r['name']} | {r['tensors']} | {r['kld']:.5f} | {r['rel_sq_sum']:.4f} | {w:.4f} |")
    return "\n".join(out)


def svg_plot(rows, path):
    series = {
        "weft (uniform)": [r for r in rows if r["kind"] == "weft" and "budget" not in r["flags"] and "--keep" not in r["flags"]],
        "weft (mixed / keep rules)": [r for r in rows if r["kind"] == "weft" and ("budget" in r["flags"] or "--keep" in r["flags"])],
        "llama.cpp": [r for r in rows if r["kind"] == "llama" and not r.get("imatrix")],
        "llama.cpp, imatrix": [r for r in rows if r["kind"] == "llama" and r.get("imatrix")],
    }
    colors = {"weft (uniform)": "#1f77b4", "weft (mixed / keep rules)": "#2ca02c", "llama.cpp": "#d62728", "llama.cpp, imatrix": "#9467bd"}
    pts = [r for s in series.values() for r in s]
    if not pts:
        return
    w, h, left, right, top, bottom = 760, 480, 70, 200, 30, 50
    xs = [r["bits_per_weight"] for r in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    ys = [math.log10(max(r["kld"], 1e-6)) for r in pts]
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys))

    def px(x):
        return left + (x - x0) / (x1 - x0) * (w - left - right)

    def py(y):
        return top + (y1 - math.log10(max(y, 1e-6))) / (y1 - y0) * (h - top - bottom)

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">']
    s.append(f'<rect width="{w}" height="{h}" fill="white"/>')
    s.append(f'<text x="{w / 2 - 90}" y="18" font-size="14">SmolLM2-135M: KL divergence vs size</text>')
    for x in range(x0, x1 + 1):
        s.append(f'<line x1="{px(x)}" y1="{top}" x2="{px(x)}" y2="{h - bottom}" stroke="#ddd"/>')
        s.append(f'<text x="{px(x) - 4}" y="{h - bottom + 16}">{x}</text>')
    for y in range(y0, y1 + 1):
        yy = top + (y1 - y) / (y1 - y0) * (h - top - bottom)
        s.append(f'<line x1="{left}" y1="{yy}" x2="{w - right}" y2="{yy}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 40}" y="{yy + 4}">1e{y}</text>')
    s.append(f'<text x="{left + 150}" y="{h - 12}">bits per weight (file bits / matrix weights)</text>')
    s.append(f'<text x="14" y="{h / 2 + 40}" transform="rotate(-90 14 {h / 2 + 40})">mean KLD vs base (log scale)</text>')
    for i, (name, rs) in enumerate(series.items()):
        c = colors[name]
        for r in rs:
            x, y = px(r["bits_per_weight"]), py(r["kld"])
            if name.startswith("llama.cpp"):
                s.append(f'<rect x="{x - 4}" y="{y - 4}" width="8" height="8" fill="{c}"/>')
            else:
                s.append(f'<circle cx="{x}" cy="{y}" r="4" fill="{c}"/>')
            tag = r["name"].replace("llama.cpp ", "").replace(" imatrix", "")
            s.append(f'<text x="{x + 6}" y="{y - 5}" font-size="9" fill="{c}">{tag}</text>')
        ly = top + 20 + 20 * i
        s.append(f'<circle cx="{w - right + 20}" cy="{ly - 4}" r="4" fill="{c}"/>')
        s.append(f'<text x="{w - right + 30}" y="{ly}">{name}</text>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s) + "\n")


SIZES_MB = list(range(50, 101, 5))


def best_at(rows, kind, mb):
    fit = [r for r in rows if r["kind"] == kind and r["file_bytes"] <= mb * 1e6]
    return min(fit, key=lambda r: r["kld"]) if fit else None


def frontier_table(rows):
    out = ["| file size ≤ | weft best | mean KLD | llama.cpp best | mean KLD | weft lower |", "|---|---|---|---|---|---|"]
    for mb in SIZES_MB:
        w, l = best_at(rows, "weft", mb), best_at(rows, "llama", mb)
        cell = lambda r: (f"{label(r)} ({r['file_bytes'] / 1e6:.1f} MB)", f"{r['kld']:.4f}") if r else ("none", "")
        lower = "yes" if w and (not l or w["kld"] < l["kld"]) else "no"
        out.append(f"| {mb} MB | {cell(w)[0]} | {cell(w)[1]} | {cell(l)[0]} | {cell(l)[1]} | {lower} |")
    return "\n".join(out)


def frontier_svg(rows, path):
    w, h, left, right, top, bottom = 760, 420, 70, 170, 30, 50
    klds = [r["kld"] for r in rows if r["kind"] in ("weft", "llama") and r["kld"] > 0]
    y0, y1 = math.floor(math.log10(min(klds))), math.ceil(math.log10(max(klds)))
    px = lambda mb: left + (mb - 45) / 60 * (w - left - right)
    py = lambda k: top + (y1 - math.log10(max(k, 1e-6))) / (y1 - y0) * (h - top - bottom)
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">']
    s.append(f'<rect width="{w}" height="{h}" fill="white"/>')
    s.append(f'<text x="{w / 2 - 150}" y="18" font-size="14">SmolLM2-135M: best mean KLD at each file size</text>')
    for mb in SIZES_MB:
        s.append(f'<line x1="{px(mb)}" y1="{top}" x2="{px(mb)}" y2="{h - bottom}" stroke="#eee"/>')
        s.append(f'<text x="{px(mb) - 8}" y="{h - bottom + 16}">{mb}</text>')
    for y in range(y0, y1 + 1):
        yy = py(10 ** y)
        s.append(f'<line x1="{left}" y1="{yy}" x2="{w - right}" y2="{yy}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 40}" y="{yy + 4}">1e{y}</text>')
    s.append(f'<text x="{left + 170}" y="{h - 12}">file size, MB (every byte)</text>')
    s.append(f'<text x="14" y="{h / 2 + 40}" transform="rotate(-90 14 {h / 2 + 40})">mean KLD vs base (log)</text>')
    for i, (kind, name, c) in enumerate([("weft", "weft", "#2ca02c"), ("llama", "llama.cpp", "#d62728")]):
        for r in rows:
            if r["kind"] == kind and r["kld"] > 0 and 45e6 <= r["file_bytes"] <= 105e6:
                s.append(f'<circle cx="{px(r["file_bytes"] / 1e6)}" cy="{py(r["kld"])}" r="3" fill="{c}" opacity="0.4"/>')
        pts = [(mb, best_at(rows, kind, mb)) for mb in SIZES_MB]
        pts = [(mb, r["kld"]) for mb, r in pts if r]
        if pts:
            path_d = " ".join(f"{'M' if j == 0 else 'L'}{px(mb)},{py(k)}" for j, (mb, k) in enumerate(pts))
            s.append(f'<path d="{path_d}" fill="none" stroke="{c}" stroke-width="2"/>')
        ly = top + 20 + 20 * i
        s.append(f'<line x1="{w - right + 12}" y1="{ly - 4}" x2="{w - right + 28}" y2="{ly - 4}" stroke="{c}" stroke-width="2"/>')
        s.append(f'<text x="{w - right + 34}" y="{ly}">{name} best ≤ size</text>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s) + "\n")


if __name__ == "__main__":
    rows = load(sys.argv[1])
    print(table(rows))
    roles = role_table(rows)
    if roles:
        print()
        print(roles)
    svg_plot(rows, sys.argv[2])
    if len(sys.argv) > 3:
        print()
        print(frontier_table(rows))
        frontier_svg(rows, sys.argv[3])
