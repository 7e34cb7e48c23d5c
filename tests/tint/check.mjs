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
//
// The variants are compiled in slices, each in a Node process of its own: dawn.node on this
// kind of machine now and then aborts ("std::system_error: Invalid argument") or stops
// answering a compilation, neither of them about the shader at hand, so a slice whose process
// dies or stays silent for SLICE_TIMEOUT_S is run again (at most three times). A compilation
// error is never retried.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const opt = { weft: 'target/debug/weft', webgpu: 'target/dawn/webgpu', icd: '/usr/lib/chromium/vk_swiftshader_icd.json', child: null, from: '0', to: '0' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const key = argv[i].replace(/^--/, '');
  if (!(key in opt) || i + 1 >= argv.length) throw new Error(`unknown or incomplete option ${argv[i]}`);
  opt[key] = argv[++i];
}
const SLICE = 400;
const SLICE_TIMEOUT_S = 300;
const ATTEMPTS = 3;

/** One slice in this process: variants [from, to) of the file, compiled by Dawn; prints one JSON line. */
async function child() {
  const variants = JSON.parse(readFileSync(opt.child, 'utf8')).slice(Number(opt.from), Number(opt.to));
  process.env.VK_DRIVER_FILES = opt.icd;
  const { create, globals } = await import(pathToFileURL(join(resolve(ROOT, opt.webgpu), 'index.js')).href);
  Object.assign(globalThis, globals);
  const adapter = await create([]).requestAdapter();
  if (!adapter) throw new Error(`Dawn found no adapter through ${opt.icd}`);
  const wanted = ['shader-f16', 'subgroups'].filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({ requiredFeatures: wanted });
  const has = new Set(wanted);
  const ENABLES = { f16: 'shader-f16', subgroups: 'subgroups' };
  const out = { checked: 0, skipped: [], failed: [], wanted, vendor: adapter.info?.vendor, architecture: adapter.info?.architecture };
  for (const { name, wgsl } of variants) {
    const needs = [...wgsl.matchAll(/^\s*enable\s+([\w, ]+);/gm)].flatMap((m) => m[1].split(',').map((x) => x.trim()));
    const missing = needs.filter((e) => !has.has(ENABLES[e] ?? e));
    if (missing.length) {
      out.skipped.push(missing.join(', '));
      continue;
    }
    const module = device.createShaderModule({ code: wgsl });
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length) out.failed.push(`${name}:\n${errors.map((e) => `  ${e.lineNum}:${e.linePos}: ${e.message}`).join('\n')}`);
    out.checked++;
  }
  console.log(JSON.stringify(out));
  device.destroy();
  process.exit(0);
}

/** Runs slice [from, to) in a child process; resolves to its JSON line, or null if the process
 * died or stayed silent past the timeout. */
function slice(file, from, to) {
  return new Promise((done) => {
    const p = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', file, '--from', String(from), '--to', String(to),
      '--webgpu', opt.webgpu, '--icd', opt.icd], { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    p.stdout.on('data', (d) => { text += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), SLICE_TIMEOUT_S * 1000);
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      const line = text.trim().split('\n').pop();
      if (code === 0 && line) return done(JSON.parse(line));
      console.error(`tint: variants ${from}-${to}: the Dawn process ${signal ? `was ended by ${signal}` : `exited with ${code}`}`);
      return done(null);
    });
  });
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'weft-tint-'));
  try {
    const file = join(dir, 'shaders.json');
    execFileSync(resolve(ROOT, opt.weft), ['shaders', file], { stdio: ['ignore', 'ignore', 'inherit'] });
    const total = JSON.parse(readFileSync(file, 'utf8')).length;
    const all = { checked: 0, skipped: [], failed: [], wanted: [], vendor: '?', architecture: '?' };
    for (let from = 0; from < total; from += SLICE) {
      const to = Math.min(from + SLICE, total);
      let r = null;
      for (let attempt = 1; attempt <= ATTEMPTS && !r; attempt++) r = await slice(file, from, to);
      if (!r) {
        console.log(`FAILED variants ${from}-${to}: Dawn's process died or hung ${ATTEMPTS} times`);
        return 1;
      }
      all.checked += r.checked;
      all.skipped.push(...r.skipped);
      all.failed.push(...r.failed);
      Object.assign(all, { wanted: r.wanted, vendor: r.vendor ?? '?', architecture: r.architecture ?? '?' });
    }
    console.log(`tint: ${all.checked} of ${total} shader variants compiled on ${all.vendor} / ${all.architecture} ` +
      `(features: ${all.wanted.join(', ') || 'none'}); ${all.skipped.length} skipped for features the device lacks; ${all.failed.length} failed`);
    const reasons = {};
    for (const why of all.skipped) reasons[why] = (reasons[why] ?? 0) + 1;
    for (const [why, n] of Object.entries(reasons)) console.log(`  skipped (${why}): ${n}`);
    for (const f of all.failed) console.log(`FAILED ${f}`);
    return all.failed.length || all.checked === 0 ? 1 : 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (opt.child) await child();
else process.exit(await main());
