import { test, expect } from '@playwright/test';
import { ISOLATED_PORT } from '../../playwright.config';

// SmolLM2 loaded through the JS API (Web Worker) from the Range server, on each backend: every
// checkpoint of the fixed 16-token input against PyTorch transformers (tests/fixtures/activations,
// written by scripts/dump_activations.py), and the greedy continuation against the native CLI
// (the GPU backend). The CPU backend takes checkpoints in its f32 arithmetic and generates with
// 8-bit activations; `cpu x2` is the threaded build with two threads, in a cross-origin isolated
// page.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
// Relative to the checkpoint's scale (max |ref|), as in tests/activations.rs: the same
// dequantized weights in f32, differing only in summation order through 30 blocks.
const TOLERANCE = 5e-5;
// `weft generate models/SmolLM2-135M-Instruct.Q4_1.gguf --prompt "The capital of France is"
//  --max-tokens 20 --ids` (greedy).
const NATIVE_IDS = [7042, 30, 198, 198, 504, 2988, 314, 42, 216, 34, 32, 33, 40, 29, 32, 33, 29, 34, 34, 216];

const RUNS = [
  { name: 'webgpu', backend: 'webgpu', page: '/harness.html', threads: 1 },
  { name: 'cpu', backend: 'cpu', page: '/harness.html', threads: 1 },
  { name: 'cpu x2', backend: 'cpu', page: `http://127.0.0.1:${ISOLATED_PORT}/harness.html`, threads: 2 },
] as const;

for (const { name, backend, page: pageUrl, threads } of RUNS) {
  test(`${name}: every checkpoint matches PyTorch and the greedy ids match the native CLI`, async ({ page }) => {
    test.setTimeout(600_000);
    page.on('console', (m) => m.type() === 'error' && console.log(`page: ${m.text()}`));
    await page.goto(pageUrl);
    const result = await page.evaluate(async ({ model, backend, threads }) => {
      // .npy version 1.0, little-endian f32, C order.
      const readNpy = (buf: ArrayBuffer) => {
        const bytes = new Uint8Array(buf);
        const headerLen = bytes[8] | (bytes[9] << 8);
        const header = new TextDecoder().decode(bytes.subarray(10, 10 + headerLen));
        if (!header.includes("'<f4'") || !header.includes("'fortran_order': False")) throw new Error(header);
        const shape = (/'shape': \(([^)]*)\)/.exec(header)?.[1] ?? '')
          .split(',')
          .map((d) => d.trim())
          .filter(Boolean)
          .map(Number);
        return { shape, data: new Float32Array(buf.slice(10 + headerLen)) };
      };
      const weft = await import('/js/index.js');
      await weft.init({ backend, threads });
      // The pool's workers join as they start: wait for them.
      let caps = await weft.capabilities();
      for (let i = 0; i < 100 && caps.cpu.threads < threads; i++) {
        await new Promise((r) => setTimeout(r, 50));
        caps = await weft.capabilities();
      }
      const input = await (await fetch('/fixtures/activations/input.json')).json();
      const started = performance.now();
      const m = await weft.loadModel(`${model}?t=activations-${backend}-${threads}`, { maxContext: 64, cache: false });
      const loadMs = performance.now() - started;
      const checkpoints = await m.checkpoints(input.ids);
      const rows = [];
      for (const cp of checkpoints) {
        const ref = readNpy(await (await fetch(`/fixtures/activations/${cp.name}.npy`)).arrayBuffer());
        let maxErr = 0;
        let scale = 0;
        let nan = false;
        for (let i = 0; i < ref.data.length; i++) {
          const err = Math.abs(cp.data[i] - ref.data[i]);
          if (Number.isNaN(err)) nan = true;
          maxErr = Math.max(maxErr, err);
          scale = Math.max(scale, Math.abs(ref.data[i]));
        }
        rows.push({
          name: cp.name,
          shape: cp.shape,
          refShape: ref.shape,
          len: cp.data.length,
          refLen: ref.data.length,
          maxErr,
          scale,
          rel: nan ? NaN : maxErr / Math.max(scale, 1e-30),
        });
      }
      const ids = [];
      let text = '';
      for await (const chunk of m.generate('The capital of France is', { maxTokens: 20, temperature: 0 })) {
        ids.push(chunk.token);
        text += chunk.text;
      }
      const stats = await m.stats();
      await m.dispose();
      return { rows, expectedNames: input.checkpoints, ids, text, stats, loadMs, cpuThreads: caps.cpu.threads };
    }, { model: MODEL, backend, threads });

    console.log(`loaded in ${(result.loadMs / 1000).toFixed(1)} s; ${result.rows.length} checkpoints`);
    console.log(`${'checkpoint'.padEnd(18)} ${'max |err|'.padStart(12)} ${'max |ref|'.padStart(12)} ${'relative'.padStart(10)}`);
    let firstBad: string | null = null;
    for (const r of result.rows) {
      console.log(
        `${r.name.padEnd(18)} ${r.maxErr.toExponential(3).padStart(12)} ${r.scale.toExponential(3).padStart(12)} ${r.rel.toExponential(2).padStart(10)}`,
      );
      if (firstBad === null && (r.len !== r.refLen || !(r.rel <= TOLERANCE))) {
        firstBad = `${r.name}: relative error ${r.rel.toExponential(2)} > ${TOLERANCE} (shape ${r.shape} vs ${r.refShape})`;
      }
    }
    console.log(`greedy ids: ${result.ids.join(',')} (${JSON.stringify(result.text)})`);
    console.log(`decode ${result.stats.tokensPerSecond.toFixed(2)} tok/s, first token ${result.stats.timeToFirstTokenMs.toFixed(0)} ms`);
    expect(result.rows.map((r) => r.name)).toEqual(result.expectedNames);
    expect(firstBad, 'first checkpoint out of tolerance').toBeNull();
    expect(result.stats.backend).toBe(backend);
    if (backend === 'cpu') expect(result.cpuThreads).toBe(threads);
    expect(result.ids).toEqual(NATIVE_IDS);
  });
}
