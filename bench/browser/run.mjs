// weft (WebGPU) and wllama (llama.cpp in wasm, CPU threads) on the same GGUF in one headless
// Chromium run, served with Range and the COOP/COEP headers wllama's threads need.
//
//   (cd bench/browser && npm install) && bash scripts/build-wasm.sh
//   node bench/browser/run.mjs [--model /models/SmolLM2-135M-Instruct.Q4_1.gguf] [--gen 16]
//                             [--threads 2] [--engines weft,wllama] [--out bench/results/browser.json]
import { spawn } from 'node:child_process';
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { chromium } from '@playwright/test';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const port = 4190;
const model = opt('--model', '/models/SmolLM2-135M-Instruct.Q4_1.gguf');
const gen = Number(opt('--gen', '16'));
const threads = Number(opt('--threads', '2'));
const engines = opt('--engines', 'weft,wllama').split(',');
const out = opt('--out', 'bench/results/browser.json');
// About 100 tokens of plain English for both engines' tokenizers.
const prompt = opt('--prompt', [
  'The history of the printing press begins in the fifteenth century, when Johannes Gutenberg',
  'combined movable metal type, oil-based ink and a wooden press adapted from wine making.',
  'Within a few decades, printing shops had opened in most large European cities, books became',
  'cheaper, and ideas travelled faster than ever before. Scholars could compare identical copies',
  'of a text, merchants printed price lists, and governments issued proclamations by the',
  'thousand. Historians still argue about which of these changes mattered most, but',
].join(' '));

const server = spawn('node', ['scripts/serve.mjs', '--port', String(port), '--root', 'www', '--coop',
  '--mount', '/js=js', '--mount', '/models=models', '--mount', '/bench=bench/browser',
  '--mount', '/wllama=bench/browser/node_modules/@wllama/wllama/esm'], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 800));
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--enable-unsafe-webgpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const results = [];
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  await page.goto(`http://127.0.0.1:${port}/bench/index.html`);
  const chromiumVersion = browser.version();
  for (const engine of engines) {
    const r = await page.evaluate(([e, o]) => window.bench(e, o), [engine, { model, prompt, gen, threads }]);
    r.chromium = chromiumVersion;
    results.push(r);
    console.log(`${engine.padEnd(8)} prompt ${r.promptTokens} tok: prefill ${r.prefillTokS?.toFixed(1)} tok/s, `
      + `decode ${r.decodeTokS?.toFixed(1)} tok/s (${r.generated} tokens), ttft ${r.ttftMs?.toFixed(0)} ms`);
  }
} finally {
  await browser.close();
  server.kill();
}
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify({ model, gen, threads, results }, null, 2)}\n`);
console.log(`wrote ${out}`);
