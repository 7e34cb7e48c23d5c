// Every shader variant weft may compile, compiled by Dawn's WGSL compiler (Tint, the one Chrome
// uses), which is stricter than naga on some of the grammar: naga accepts `a | b << 4u`, Tint
// asks for parentheses. `cargo test` validates each variant with naga; this checks them with
// Tint, including the kernels only GPUs run (the GGUF repack at upload, the subgroup GEMVs),
// which no browser test on a software adapter reaches.
//
//   node tests/tint/check.mjs [--weft target/debug/weft] [--webgpu target/dawn/webgpu] [--icd JSON]
//
// --weft writes the variants (`weft shaders FILE`); --webgpu is the npm package `webgpu` (Dawn for
// Node, bench/dawn/fetch-webgpu.sh); --icd the Vulkan driver Dawn uses (VK_DRIVER_FILES in this
// process only; default the SwiftShader driver of Debian's chromium, as bench/dawn/run.mjs in
// scripts/test.sh: Dawn refuses lavapipe). A variant that
// enables a feature the device lacks is counted as skipped; any other compilation error fails.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const opt = { weft: 'target/debug/weft', webgpu: 'target/dawn/webgpu', icd: '/usr/lib/chromium/vk_swiftshader_icd.json' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const key = argv[i].replace(/^--/, '');
  if (!(key in opt) || i + 1 >= argv.length) throw new Error(`unknown or incomplete option ${argv[i]}`);
  opt[key] = argv[++i];
}

const dir = mkdtempSync(join(tmpdir(), 'weft-tint-'));
let variants;
try {
  const file = join(dir, 'shaders.json');
  execFileSync(resolve(ROOT, opt.weft), ['shaders', file], { stdio: ['ignore', 'ignore', 'inherit'] });
  variants = JSON.parse(readFileSync(file, 'utf8'));
} finally {
  rmSync(dir, { recursive: true, force: true });
}

process.env.VK_DRIVER_FILES = opt.icd;
const { create, globals } = await import(pathToFileURL(join(resolve(ROOT, opt.webgpu), 'index.js')).href);
Object.assign(globalThis, globals);
const adapter = await create([]).requestAdapter();
if (!adapter) throw new Error(`Dawn found no adapter through ${opt.icd}`);
const wanted = ['shader-f16', 'subgroups'].filter((f) => adapter.features.has(f));
const device = await adapter.requestDevice({ requiredFeatures: wanted });
const has = new Set(wanted);

const ENABLES = { f16: 'shader-f16', subgroups: 'subgroups' };
let checked = 0;
const skipped = [];
const failed = [];
for (const { name, wgsl } of variants) {
  const needs = [...wgsl.matchAll(/^\s*enable\s+([\w, ]+);/gm)].flatMap((m) => m[1].split(',').map((s) => s.trim()));
  const missing = needs.filter((e) => !has.has(ENABLES[e] ?? e));
  if (missing.length) {
    skipped.push({ name, reason: missing.join(', ') });
    continue;
  }
  const module = device.createShaderModule({ code: wgsl });
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === 'error');
  if (errors.length) failed.push(`${name}:\n${errors.map((e) => `  ${e.lineNum}:${e.linePos}: ${e.message}`).join('\n')}`);
  checked++;
}
const info = adapter.info ?? {};
console.log(`tint: ${checked} of ${variants.length} shader variants compiled on ${info.vendor ?? '?'} / ${info.architecture ?? '?'} ` +
  `(features: ${wanted.join(', ') || 'none'}); ${skipped.length} skipped for features the device lacks; ${failed.length} failed`);
const reasons = {};
for (const s of skipped) reasons[s.reason] = (reasons[s.reason] ?? 0) + 1;
for (const [why, n] of Object.entries(reasons)) console.log(`  skipped (${why}): ${n}`);
for (const f of failed) console.log(`FAILED ${f}`);
device.destroy();
process.exit(failed.length || checked === 0 ? 1 : 0);
