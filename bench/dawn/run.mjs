#!/usr/bin/env node
// weft's JavaScript API on Dawn, Chrome's WebGPU implementation, under Node: the npm package
// `webgpu` (dawn.node) installed as `navigator.gpu`, the wasm build (www/pkg, wasm-bindgen
// `--target web`) instantiated from its bytes, and js/direct.js's loadModel / generate: the path a
// page's worker runs, minus the worker's messages (Node has no Web Worker). Models are served over
// HTTP by scripts/serve.mjs (Range, strong ETags), so the loader reads them as a page does.
//
//   node bench/dawn/run.mjs [--webgpu DIR] [--dawn-icd JSON] [--prompt-len 128] [--gen 128] [--reps 3]
//       [--native WEFT] [--check 16] [--check-prompt TEXT] [--check-only] [--profile] [--activations int8]
//       [--dawn-flag F]... [--port 4391] MODEL.gguf...
//
//   --webgpu DIR  the package's index.js, package.json and dist/linux-x64/dawn.node
//                 (default: target/dawn/webgpu, where bench/dawn/fetch-webgpu.sh puts them)
//   --dawn-icd JSON  the Vulkan driver Dawn alone uses (VK_DRIVER_FILES in this process only;
//                 the native binary keeps the environment's). Without a GPU: Debian chromium's
//                 SwiftShader, /usr/lib/chromium/vk_swiftshader_icd.json (Dawn refuses lavapipe:
//                 "Vulkan shaderUniform*ArrayDynamicIndexing required").
//   --native WEFT a native weft binary: `WEFT generate MODEL --ids` gives the greedy ids the
//                 JS API's must equal for the first --check tokens (0: print both, assert nothing)
//   --check-only  the id check only, no timing
//   --activations int8  loadModel's `activations: 'int8'` (default f32), and the native ids from
//                 `weft generate --int8-activations`
//   --profile     after the timed runs, `profileStep(20)` (a wasm build with WEFT_WASM_FEATURES=web-profile):
//                 the decode step's CPU time, its wait and
//                 each kernel's GPU time (timestamp queries), as `weft bench --profile` natively;
//                 Dawn's timestamps are then not quantized (Chrome rounds them to 100 us)
//   --dawn-flag F a flag for Dawn's `create()`, e.g. disable-dawn-features=disable_robustness to
//                 see what a Chrome default costs (repeatable; diagnostics, not a page's setting)
//
// The protocol (bench/dawn/protocol.js, shared with bench/dawn/page.js, the same measurement in a
// browser): that of `weft bench --prompt-len 128 --gen 128 --reps 3`, with text prompts.
// Figures per repetition, from this script's clock around the async iterator:
//   prefill_tok_s  tokens the prompt pass ran / time to the first token
//   decode_tok_s   (generated - 1) / the time of the steps after the first token
// and the API's own `stats()` figures (stats_*; measured inside the wasm module).
// One JSON line per model on stdout, keys as `weft bench --json` where they mean the same; a
// model that fails gives a line with `error` (the error's code and message) and the others go on.
// Exit status 1 when any model failed or an id check found a difference.
//
// The JS API loads with its own defaults where weft bench sets its own: prompt passes of at most
// 64 tokens (weft bench: one pass of up to 128), the context sized to prompt + generated tokens.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { jsIds, round, timeModel } from './protocol.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

function parseArgs(argv) {
  const o = {
    webgpu: join(ROOT, 'target', 'dawn', 'webgpu'), icd: null, promptLen: 128, gen: 128, reps: 3, native: null,
    check: 16, checkPrompt: 'The capital of France is', checkOnly: false, profile: false, dawnFlags: [], port: 4391, models: [],
    activations: 'f32',
  };
  const numbers = { '--prompt-len': 'promptLen', '--gen': 'gen', '--reps': 'reps', '--check': 'check', '--port': 'port' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (numbers[a]) o[numbers[a]] = Number(argv[++i]);
    else if (a === '--webgpu') o.webgpu = resolve(argv[++i]);
    else if (a === '--native') o.native = resolve(argv[++i]);
    else if (a === '--dawn-icd') o.icd = resolve(argv[++i]);
    else if (a === '--check-prompt') o.checkPrompt = argv[++i];
    else if (a === '--check-only') o.checkOnly = true;
    else if (a === '--profile') o.profile = true;
    else if (a === '--activations') o.activations = argv[++i];
    else if (a === '--dawn-flag') o.dawnFlags.push(argv[++i]);
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else o.models.push(resolve(a));
  }
  for (const k of Object.values(numbers)) {
    if (!Number.isSafeInteger(o[k]) || o[k] < 0) throw new Error(`option ${k} must be a non-negative integer`);
  }
  if (o.promptLen < 1 || o.gen < 2 || o.reps < 1) throw new Error('need --prompt-len >= 1, --gen >= 2, --reps >= 1');
  if (!o.models.length) throw new Error('no model file given');
  return o;
}

// Every device Dawn created: destroyed before the process exits, since dawn.node may crash
// (SIGSEGV) in its teardown when a device is still alive at exit.
const devices = [];

/** Dawn as the page's `navigator.gpu`. wgpu's web backend reads navigator.gpu from a Window or a
 * WorkerGlobalScope and finds neither in Node: a `Window` constructor makes it take the first. */
async function installDawn(dir, flags) {
  const { create, globals } = await import(pathToFileURL(join(dir, 'index.js')).href);
  Object.assign(globalThis, globals);
  const { requestDevice } = globals.GPUAdapter.prototype;
  globals.GPUAdapter.prototype.requestDevice = async function (...args) {
    const device = await requestDevice.apply(this, args);
    devices.push(device);
    return device;
  };
  const gpu = create(flags);
  const navigator = { gpu, hardwareConcurrency: availableParallelism(), userAgent: `Node.js ${process.version}` };
  Object.defineProperty(globalThis, 'navigator', { value: navigator, configurable: true, writable: true });
  globalThis.Window ??= class Window {};
  return gpu;
}

/** js/ and www/pkg copied side by side (direct.js imports ../pkg/weft.js), as ES modules. */
function stage() {
  const dir = mkdtempSync(join(tmpdir(), 'weft-dawn-'));
  cpSync(join(ROOT, 'js'), join(dir, 'js'), { recursive: true });
  cpSync(join(ROOT, 'www', 'pkg'), join(dir, 'pkg'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  return dir;
}

/** scripts/serve.mjs on `port` with each model's folder mounted at /m<i>; resolves to the URLs. */
async function serve(models, port, root) {
  const mounts = models.flatMap((m, i) => ['--mount', `/m${i}=${dirname(m)}`]);
  const server = spawn(process.execPath, [join(ROOT, 'scripts', 'serve.mjs'), '--port', String(port), '--root', root, ...mounts],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  const urls = models.map((m, i) => `http://127.0.0.1:${port}/m${i}/${encodeURIComponent(basename(m))}`);
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(urls[0], { method: 'HEAD' })).ok) break;
    } catch {
      // not listening yet
    }
    if (i === 100 || server.exitCode !== null) throw new Error(`scripts/serve.mjs did not start on port ${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { server, urls };
}

/** Greedy ids of `text` from the native binary (`weft generate --ids`). */
function nativeIds(weft, model, text, count, activations) {
  const int8 = activations === 'int8' ? ['--int8-activations'] : [];
  const r = spawnSync(weft, ['generate', model, '--prompt', text, '--max-tokens', String(count), '--ids', ...int8],
    { encoding: 'utf8', env: nativeEnv });
  if (r.status !== 0) throw new Error(`${weft} generate failed (status ${r.status}): ${(r.stderr || '').trim().slice(-2000)}`);
  return r.stdout.trim().split(',').filter(Boolean).map(Number);
}


async function bench(api, o, file, url, adapter) {
  const out = { model: file, adapter, backend: 'dawn-js', prompt_len: o.promptLen, gen: o.gen, reps: o.reps };
  const t0 = performance.now();
  const m = await api.loadModel(url, { backend: 'webgpu', cache: false, maxContext: o.promptLen + o.gen + 8, activations: o.activations });
  out.load_s = round((performance.now() - t0) / 1e3, 3);
  const problems = [];
  try {
    if (o.check > 0 || o.native) {
      const dawn = await jsIds(m, o.checkPrompt, Math.max(o.check, 16));
      out.ids_dawn = dawn;
      if (o.native) {
        const native = nativeIds(o.native, file, o.checkPrompt, dawn.length, o.activations);
        const same = dawn.findIndex((id, i) => id !== native[i]);
        out.ids_native = native;
        out.ids_equal_first = same < 0 ? Math.min(dawn.length, native.length) : same;
        // Both stop at the same count (the maximum, or an end-of-sequence token they agree on).
        if (o.check > 0 && (!dawn.length || dawn.length !== native.length || out.ids_equal_first < Math.min(o.check, dawn.length))) {
          problems.push(`greedy ids differ from native at position ${out.ids_equal_first} (${dawn.length} ids, native ${native.length})`);
        }
      }
    }
    if (!o.checkOnly) {
      Object.assign(out, await timeModel(m, o, problems));
      if (o.profile) {
        out.profile = await m.profileStep(20);
        const p = out.profile;
        console.error(`profile: ${p.dispatches} dispatches, record + submit ${p.record_submit_ms.toFixed(3)} ms, wait ${p.wait_ms.toFixed(3)} ms`);
        for (const [name, us, n] of p.kernels_us.slice(0, 12)) console.error(`profile:   ${us.toFixed(1).padStart(9)} us ${String(n).padStart(4)}x ${name}`);
        if (p.pass_us != null) console.error(`profile: the step in one pass ${p.pass_us.toFixed(1)} us`);
      }
    }
  } finally {
    await m.dispose();
  }
  out.problems = problems;
  return out;
}

// The environment as it was before --dawn-icd, for the native binary.
const nativeEnv = { ...process.env };

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.icd) process.env.VK_DRIVER_FILES = o.icd;
  const flags = [...o.dawnFlags];
  if (o.profile && !flags.some((f) => f.includes('timestamp_quantization'))) flags.push('disable-dawn-features=timestamp_quantization');
  const gpu = await installDawn(o.webgpu, flags);
  const dir = stage();
  let server = null;
  let failed = false;
  try {
    const api = await import(pathToFileURL(join(dir, 'js', 'direct.js')).href);
    await api.init({ wasmUrl: readFileSync(join(dir, 'pkg', 'weft_bg.wasm')), backend: 'webgpu' });
    const caps = await api.capabilities();
    if (!caps.webgpu) throw new Error(`no WebGPU through Dawn: ${caps.code}: ${caps.reason}`);
    // Dawn's own adapter description beside the name wgpu reports.
    const info = (await gpu.requestAdapter())?.info ?? {};
    const adapter = `${caps.adapterName} (Dawn: ${[info.vendor, info.architecture, info.device, info.description]
      .filter(Boolean).join(' / ')}; features: ${['shaderF16', 'subgroups', 'timestampQuery'].filter((k) => caps[k]).join(', ')})`;
    console.error(`adapter ${adapter}`);
    let urls;
    ({ server, urls } = await serve(o.models, o.port, dir));
    for (const [i, file] of o.models.entries()) {
      let line;
      try {
        line = await bench(api, o, file, urls[i], adapter);
        failed ||= line.problems.some((p) => p.startsWith('greedy'));
      } catch (e) {
        line = { model: file, backend: 'dawn-js', error: `${e.code ?? e.name}: ${e.message}` };
        failed = true;
      }
      console.log(JSON.stringify(line));
    }
  } finally {
    server?.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  return failed ? 1 : 0;
}

/** Destroys every device and waits (at most a second) until Dawn reports each one lost. */
async function shutDown() {
  const lost = devices.map((d) => d.lost);
  for (const d of devices) d.destroy();
  await Promise.race([Promise.all(lost), new Promise((r) => setTimeout(r, 1000))]);
}

main().then(
  (status) => shutDown().then(() => process.exit(status)),
  (e) => {
    console.error(`bench/dawn/run.mjs: ${e.stack || e}`);
    shutDown().then(() => process.exit(2));
  },
);
