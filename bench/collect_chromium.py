"""The JS API in headless Chromium on the GPU machine (bench/dawn/chromium.sh) beside native
`weft bench` of the same files in the same session, for bench/collect.py's results.md: each
source names the Chromium figures (one JSON line per model) and the session.log holding the
native figures of the same files, as the calls wrote them."""
import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# (Chromium's lines, the native log, what ran): session38/b call 8 (native weft bench before
# Chromium in the same call), call 9 round 2 (its first round found no adapter; native after
# each round), session38/c (the web-profile build, native `weft bench --profile` of the files;
# with --enable-webgpu-developer-features Chromium found no adapter in either run).
SOURCES = [
    ("h200/session38/b/b4/chromium.jsonl", "h200/session38/b/b1/session.log", "release build"),
    ("h200/session38/b/b5/chromium1.jsonl", None, "release build"),
    ("h200/session38/b/b5/chromium2.jsonl", "h200/session38/b/b5/session.log", "release build"),
    ("h200/session38/c/ce/chromium1.jsonl", None, "web-profile build, --enable-webgpu-developer-features"),
    ("h200/session38/c/ce/chromium2.jsonl", None, "web-profile build, --enable-webgpu-developer-features"),
    ("h200/session38/c/cf/chromium1.jsonl", "h200/session38/c/ce/session.log", "web-profile build"),
    ("h200/session38/c/cf/chromium2.jsonl", "h200/session38/c/ce/session.log", "web-profile build"),
    ("h200/session38/c/cf/chromium3.jsonl", "h200/session38/c/ce/session.log", "web-profile build"),
]


def native_figures(log: Path) -> dict:
    """Model name (smollm2, tinyllama, 7b) -> {decode, prefill} from a session.log: `weft bench`
    blocks after a `== [..] weft bench NAME ...` or `... NAME-Q4_0.gguf` stamp, or `native NAME
    decode X tok/s` lines (the last of each model wins)."""
    out, cur = {}, None
    for line in log.read_text().splitlines():
        m = re.match(r"== \[\d+ s\] weft bench (?:--profile )?(\w+)", line)
        if m:
            cur = out.setdefault(m[1].split("-")[0], {})
            continue
        m = re.match(r"native (\w+) decode\s+([\d.]+) tok/s", line)
        if m:
            out.setdefault(m[1], {})["decode"] = float(m[2])
            continue
        m = re.match(r"(prefill|decode)\s+([\d.]+) tok/s", line)
        if m and cur is not None:
            cur[m[1]] = float(m[2])
    return out


def chromium() -> list:
    rows = []
    for lines, log, build in SOURCES:
        path = RESULTS / lines
        if not path.exists():
            continue
        native = native_figures(RESULTS / log) if log else {}
        for rec in map(json.loads, path.read_text().splitlines()):
            name = Path(rec.get("model", "")).name.split("-")[0]
            keep = {k: v for k, v in rec.items() if k not in ("profile", "user_agent")}
            if "profile" in rec:
                p = rec["profile"]
                keep["profile"] = {k: p[k] for k in ("dispatches", "record_submit_ms", "wait_ms")}
            rows.append({"file": lines, "build": build, "model": name, "native": native.get(name, {}), "chromium": keep})
    return rows


def chromium_markdown(rows: list) -> str:
    if not rows:
        return ""
    out = ["\n## H200: weft's JS API in headless Chromium beside native wgpu (bench/dawn/chromium.sh, one session)\n",
           "Debian's Chromium 156 on the NVIDIA Vulkan driver, bench/dawn/page.js through js/index.js (the worker and the "
           "wasm build a page loads), the GGUF served with Range by bench/dawn/serve.py; the protocol of bench/dawn/run.mjs "
           "(prompt 128 + 128, greedy, median of 3 after one untimed run). Native: `weft bench --prompt-len 128 --gen 128 "
           "--reps 3` on the same files in the same session (bench/NOTES.md, note 60).\n",
           "| Chromium's figures | build | model | native decode | Chromium decode | Chromium / native | native prefill "
           "| Chromium prefill | problems |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        n, c = r["native"], r["chromium"]
        if "error" in c:
            out.append(f"| {r['file']} | {r['build']} | | | | | | | {c['error'][:90]} |")
            continue
        ratio = f"{c['decode_tok_s_median'] / n['decode']:.2f}" if "decode" in n else ""
        out.append(f"| {r['file']} | {r['build']} | {r['model']} | {n.get('decode', '')} | {c['decode_tok_s_median']:.1f} "
                   f"| {ratio} | {n.get('prefill', '')} | {c['prefill_tok_s_median']:.0f} | {'; '.join(c.get('problems', []))} |")
    return "\n".join(out) + "\n"
