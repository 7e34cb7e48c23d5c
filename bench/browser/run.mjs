// weft (WebGPU, and its CPU backend in wasm) and wllama (llama.cpp in wasm, CPU threads) on the same
// GGUF in one headless Chromium run, served with Range and the COOP/COEP headers wllama's threads need.
//
//   (cd bench/browser && npm install) && bash scripts/build-wasm.sh
//   node bench/browser/run.mjs [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--prompt-len 64]
//       [--gen 16] [--reps 3] [--threads 2] [--engines weft,weft-cpu,weft-cpu-1,wllama] [--port 4180]
//       [--out bench/results/local/browser.json]
//
// The protocol of `weft bench` and bench/native/llama_cpp_bench.py, with text instead of random
// ids (the browser APIs take text): reps + 1 prompts of exactly --prompt-len tokens (cut from an
// English passage by weft's tokenizer, each starting at a different sentence so that no cache
// helps), greedy decoding of --gen tokens, the first repetition untimed. Figures per repetition:
//   ttft_ms        prompt pass up to the first token picked
//   prefill_tok_s  prompt_len / ttft
//   decode_tok_s   (gen - 1) / the time of the gen - 1 single-token steps after the first token
// and their medians (the upper middle element for an even count, as `weft bench` takes them).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { chromium } from '@playwright/test';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const port = Number(opt('--port', '4180'));
const model = opt('--model', 'models/SmolLM2-135M-Instruct.Q4_1.gguf');
const promptLen = Number(opt('--prompt-len', '64'));
const gen = Number(opt('--gen', '16'));
const reps = Number(opt('--reps', '3'));
const threads = Number(opt('--threads', '2'));
const engines = opt('--engines', 'weft,weft-cpu,weft-cpu-1,wllama').split(',');
const out = opt('--out', 'bench/results/local/browser.json');
if (!existsSync(model)) throw new Error(`no model file at ${model}`);
if (!(promptLen >= 1 && gen >= 2 && reps >= 1)) throw new Error('need --prompt-len >= 1, --gen >= 2, --reps >= 1');
// The weft JS API runs the prompt in passes of at most 64 tokens; `weft bench` takes it in one
// pass up to 128. Longer prompts still work, but the two weft rows would then differ in passes.
if (promptLen > 64) console.warn(`--prompt-len ${promptLen} > 64: weft in the browser runs the prompt in several passes`);
// Context: the prompt, the generated tokens and one spare, as `weft bench` sizes it.
const maxContext = promptLen + gen + 1;

// Plain English for the prompts, longer than any prompt cut from it.
const source = [
  'The history of the printing press begins in the fifteenth century, when Johannes Gutenberg',
  'combined movable metal type, oil-based ink and a wooden press adapted from wine making.',
  'Within a few decades, printing shops had opened in most large European cities, books became',
  'cheaper, and ideas travelled faster than ever before. Scholars could compare identical copies',
  'of a text, merchants printed price lists, and governments issued proclamations by the',
  'thousand. Historians still argue about which of these changes mattered most, but few doubt',
  'that the press changed how people learned. Schools could give every pupil the same grammar',
  'book. Maps were copied without the errors that crept in when each one was drawn by hand.',
  'Musicians bought printed scores, and sailors carried printed tables of the tides. Religious',
  'reformers spread pamphlets faster than their opponents could answer them. Newspapers',
  'appeared in the seventeenth century, first as weekly sheets of foreign news and later as',
  'daily papers with advertisements, letters and reports from parliament. By the nineteenth',
  'century, steam-driven presses printed thousands of sheets an hour, and cheap paper made from',
  'wood pulp let almost everyone buy a newspaper. Libraries grew from a few chained volumes to',
  'halls with millions of books, and reading became an ordinary part of daily life.',
].join(' ');

async function waitForServer(url) {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the server at ${url} did not start`);
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const round = (x, digits) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/** The timed repetitions as the figures the native benchmarks write. */
function summarize(raw) {
  const timed = raw.reps.slice(1);
  const ttft = timed.map((r) => r.ttftMs);
  const prefill = timed.map((r) => r.promptTokens / (r.ttftMs / 1e3));
  const decode = timed.map((r) => (r.generated - 1) / (r.decodeMs / 1e3));
  const problems = [];
  for (const [i, r] of timed.entries()) {
    if (r.promptTokens !== promptLen) problems.push(`rep ${i + 1}: ${r.promptTokens} prompt tokens, not ${promptLen}`);
    if (r.generated !== gen) problems.push(`rep ${i + 1}: ${r.generated} tokens generated, not ${gen}`);
    if (r.cachedTokens) problems.push(`rep ${i + 1}: ${r.cachedTokens} prompt tokens came from a cache`);
  }
  const { reps: _, ...rest } = raw;
  return {
    ...rest,
    prompt_tokens: timed.map((r) => r.promptTokens),
    generated: timed.map((r) => r.generated),
    prefill_tok_s: prefill.map((x) => round(x, 2)),
    decode_tok_s: decode.map((x) => round(x, 2)),
    ttft_ms: ttft.map((x) => round(x, 1)),
    prefill_tok_s_median: round(median(prefill), 2),
    decode_tok_s_median: round(median(decode), 2),
    ttft_ms_median: round(median(ttft), 1),
    problems,
    repetitions: raw.reps,
  };
}

const modelUrl = `/model/${encodeURIComponent(basename(model))}`;
const server = spawn('node', ['scripts/serve.mjs', '--port', String(port), '--root', 'www', '--coop',
  '--mount', '/js=js', '--mount', `/model=${dirname(resolve(model))}`, '--mount', '/bench=bench/browser',
  '--mount', '/wllama=bench/browser/node_modules/@wllama/wllama/esm'], { stdio: 'ignore' });
let browser = null;
const results = [];
let chromiumVersion = null;
try {
  await waitForServer(`http://127.0.0.1:${port}/bench/index.html`);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--enable-unsafe-webgpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  chromiumVersion = browser.version();
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  page.on('pageerror', (e) => console.error(`[page] ${e.message}`));
  await page.goto(`http://127.0.0.1:${port}/bench/index.html`);
  const prompts = await page.evaluate((o) => window.makePrompts(o),
    { model: modelUrl, source, promptLen, count: reps + 1 });
  for (const engine of engines) {
    const started = Date.now();
    let raw;
    try {
      // A page per engine: weft's module and thread count are chosen once per page (init).
      const own = await browser.newPage();
      own.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
      await own.goto(`http://127.0.0.1:${port}/bench/index.html`);
      raw = await own.evaluate(([e, o]) => window.bench(e, o),
        [engine, { model: modelUrl, prompts, gen, threads, maxContext }]);
      await own.close();
    } catch (e) {
      // One engine failing still leaves the others' figures.
      console.error(`${engine}: ${e.message}`);
      results.push({ engine, error: e.message, problems: [e.message] });
      continue;
    }
    const r = summarize(raw);
    results.push(r);
    console.log(`${engine.padEnd(7)} prompt ${promptLen} tok: prefill ${r.prefill_tok_s_median} tok/s, `
      + `decode ${r.decode_tok_s_median} tok/s (${gen} tokens), ttft ${r.ttft_ms_median} ms `
      + `(median of ${reps}; ${((Date.now() - started) / 1e3).toFixed(0)} s in all)`);
    for (const p of r.problems) console.warn(`${engine}: ${p}`);
  }
} finally {
  await browser?.close();
  server.kill();
}
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify({
  model, chromium: chromiumVersion, prompt_len: promptLen, gen, reps, threads, results,
}, null, 2)}\n`);
console.log(`wrote ${out}`);
if (results.some((r) => r.problems.length)) process.exitCode = 1;
