// The page side of bench/dawn/chromium.sh: bench/dawn/run.mjs's measurement in a browser, through
// the JS API a page imports (js/index.js, its worker and the wasm build) on the browser's own
// WebGPU. Options come from the query string: `models` (URLs, comma-separated), `promptLen`,
// `gen`, `reps`, `check` (greedy ids of `checkPrompt` to report, for comparison with native
// `weft generate --ids`), `profile` (1: after the timed runs, `profileStep(20)` of a wasm build
// with the web-profile feature: the step's recording and submission, its wait and each kernel's
// GPU time, as run.mjs --profile). Each model's figures (bench/dawn/protocol.js's protocol and
// keys) are POSTed to /result as one JSON object, then /done; a failure posts its code and
// message.
import * as api from '/js/index.js';
import { jsIds, round, timeModel } from '/bench/protocol.js';

const q = new URLSearchParams(location.search);
const o = {
  models: (q.get('models') || '').split(',').filter(Boolean),
  promptLen: Number(q.get('promptLen') || 128),
  gen: Number(q.get('gen') || 128),
  reps: Number(q.get('reps') || 3),
  check: Number(q.get('check') || 16),
  checkPrompt: q.get('checkPrompt') || 'The capital of France is',
  profile: q.get('profile') === '1',
};
const log = (line) => { document.getElementById('log').textContent += `\n${line}`; };
const post = (path, body) => fetch(path, { method: 'POST', body: JSON.stringify(body) });

async function bench(url, adapter) {
  const out = { model: url, adapter, backend: 'browser-js', user_agent: navigator.userAgent, prompt_len: o.promptLen, gen: o.gen, reps: o.reps };
  const t0 = performance.now();
  const m = await api.loadModel(url, { backend: 'webgpu', cache: false, maxContext: o.promptLen + o.gen + 8 });
  out.load_s = round((performance.now() - t0) / 1e3, 3);
  const problems = [];
  try {
    if (o.check > 0) out.ids_browser = await jsIds(m, o.checkPrompt, o.check);
    Object.assign(out, await timeModel(m, o, problems));
    if (o.profile) out.profile = await m.profileStep(20);
  } finally {
    await m.dispose();
  }
  out.problems = problems;
  return out;
}

async function main() {
  const caps = await api.capabilities();
  if (!caps.webgpu) throw Object.assign(new Error(caps.reason), { code: caps.code });
  const adapter = `${[caps.adapterName, caps.vendor, caps.architecture].filter(Boolean).join(' / ')} (features: ${
    ['shaderF16', 'subgroups', 'timestampQuery'].filter((k) => caps[k]).join(', ')})`;
  log(`adapter ${adapter}`);
  for (const url of o.models) {
    let line;
    try {
      line = await bench(url, adapter);
    } catch (e) {
      line = { model: url, backend: 'browser-js', adapter, error: `${e.code ?? e.name}: ${e.message}` };
    }
    log(JSON.stringify(line));
    await post('/result', line);
  }
}

main().catch((e) => post('/result', { backend: 'browser-js', error: `${e.code ?? e.name}: ${e.message}` }))
  .finally(() => post('/done', {}));
