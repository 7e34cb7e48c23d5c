import { appendFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { test, expect, type Page } from '@playwright/test';

// Sentence embeddings in Chromium through the worker API: loadModel(folder, { task: 'embed' }),
// on the CPU and on WebGPU (backend: 'gpu', SwiftShader here), against the sentence-transformers
// fixture (tests/fixtures/embed), option errors with codes, and each backend's throughput on
// sentences of ~30 tokens in batches of 32 (tokenization included): the CPU on all 256 of
// bench/embed_sentences.txt, WebGPU on the first 32 (one batch: SwiftShader took more than the
// test's 10 minutes for 256). With WEFT_EMBED_RESULTS=FILE each rate is appended to FILE as a
// row of bench/embed_compare.py's, its sentence count stated (bench/results/embed/chromium.jsonl
// is the table's in bench/results.md); only then is the WebGPU rate taken.

const MODEL = '/models/all-MiniLM-L6-v2';

/** Sentences of bench/embed_sentences.txt timed on WebGPU (SwiftShader). */
const GPU_SENTENCES = 32;

function record(device: string, threads: number, sentences: number, rate: number) {
  const file = process.env.WEFT_EMBED_RESULTS;
  if (!file) return;
  const row = { engine: 'weft', device, weights: 'f32', threads, sentences, batch_size: 32, sentences_per_s: rate,
    load_1min: Math.round(loadavg()[0] * 100) / 100 };
  appendFileSync(file, JSON.stringify(row) + '\n');
}

type Encoder = { embed(texts: string[], options?: object): Promise<Float32Array[]> };
type Helpers = {
  weft: typeof import('../../js/index.js');
  texts: string[];
  refIds: number[];
  caught(p: Promise<unknown>): Promise<string | null>;
  minCosine(vectors: Float32Array[]): number;
  sentencesPerSecond(m: Encoder, count?: number): Promise<number>;
};

// Loads the harness and leaves on `globalThis.embedTest` what every test here uses: the
// initialised API, the fixture's texts, the rejection code of a promise, the minimum cosine of
// embeddings to the fixture's, and a model's rate on the first `count` sentences of
// bench/embed_sentences.txt (all 256 by default; after one untimed batch).
async function setUp(page: Page) {
  await page.goto('/harness.html');
  await page.evaluate(async () => {
    const weft = await import('/js/index.js');
    await weft.init();
    const fx = await (await fetch('/fixtures/embed/sentences.json')).json();
    const bench = (await (await fetch('/bench/embed_sentences.txt')).text()).split('\n').filter((l) => l.length);
    const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
      let d = 0, na = 0, nb = 0;
      for (let i = 0; i < a.length; i++) {
        d += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
      }
      return d / Math.sqrt(na * nb);
    };
    const helpers: Helpers = {
      weft,
      texts: fx.sentences.map((s: { text: string }) => s.text),
      refIds: fx.sentences[1].ids,
      caught: async (p) => {
        try {
          await p;
          return null;
        } catch (e) {
          return (e as { code: string }).code;
        }
      },
      minCosine: (vectors) => Math.min(...vectors.map((v, i) => cosine(v, fx.sentences[i].embedding))),
      sentencesPerSecond: async (m, count = 256) => {
        if (bench.length !== 256) throw new Error(`bench/embed_sentences.txt has ${bench.length} sentences`);
        const timed = bench.slice(0, count);
        await m.embed(bench.slice(0, 32), { batchSize: 32 });
        const start = performance.now();
        await m.embed(timed, { batchSize: 32 });
        return timed.length / ((performance.now() - start) / 1000);
      },
    };
    (globalThis as unknown as { embedTest: Helpers }).embedTest = helpers;
  });
}

test('embeddings equal sentence-transformers in the browser', async ({ page }) => {
  test.setTimeout(600_000);
  await setUp(page);
  const r = await page.evaluate(async (model) => {
    const { weft, texts, refIds, caught, minCosine, sentencesPerSecond } = (globalThis as unknown as { embedTest: Helpers }).embedTest;
    const missing = await caught(weft.loadModel('/models/no-such-encoder', { task: 'embed', cache: false }));
    const loads: number[] = [];
    const m = await weft.loadModel(model, { task: 'embed', onProgress: (p: { bytesLoaded: number }) => loads.push(p.bytesLoaded) });
    const badOption = await caught(m.embed(['x'], { pooling: 'max' }));
    const badTexts = await caught(m.embed('x' as unknown as string[]));
    const progress: number[] = [];
    const vectors = await m.embed(texts, { pooling: 'mean', normalize: true, batchSize: 8, onProgress: (p: { done: number }) => progress.push(p.done) });
    const ids = await m.tokenize(texts[1]);
    return {
      missing, badOption, badTexts, loads: loads.length, progress,
      isFloat32: vectors.every((v: unknown) => v instanceof Float32Array), dim: m.dim, n: vectors.length,
      minCosine: minCosine(vectors), ids, refIds, sentencesPerSecond: await sentencesPerSecond(m),
      threads: (await weft.capabilities()).cpu.threads,
    };
  }, MODEL);
  console.log(`CPU: min cosine ${r.minCosine.toFixed(8)} over ${r.n} texts; 256 sentences: ${r.sentencesPerSecond.toFixed(1)} sentences/s`);
  record('chromium cpu (wasm)', r.threads, 256, r.sentencesPerSecond);
  expect(r.missing).toMatch(/^(FORMAT|LOAD_HTTP)$/);
  expect(r.badOption).toBe('INVALID_ARGUMENT');
  expect(r.badTexts).toBe('INVALID_ARGUMENT');
  expect(r.loads).toBeGreaterThan(0);
  expect(r.progress).toEqual([8, 16, 24]);
  expect(r.isFloat32).toBe(true);
  expect(r.dim).toBe(384);
  expect(r.n).toBe(24);
  expect(r.minCosine).toBeGreaterThanOrEqual(0.99999);
  expect(r.ids).toEqual(r.refIds);
});

test("backend: 'gpu' runs the encoder on WebGPU (SwiftShader) with the same embeddings", async ({ page }) => {
  test.setTimeout(600_000);
  await setUp(page);
  const r = await page.evaluate(async ({ model, timed, count }) => {
    const { weft, texts, caught, minCosine, sentencesPerSecond } = (globalThis as unknown as { embedTest: Helpers }).embedTest;
    const badBackend = await caught(weft.loadModel(model, { task: 'embed', backend: 'tpu' }));
    // SwiftShader is a software adapter: 'auto' keeps the CPU, as for the LLMs.
    const auto = await weft.loadModel(model, { task: 'embed', backend: 'auto' });
    const autoBackend = auto.backend;
    await auto.dispose();
    const m = await weft.loadModel(model, { task: 'embed', backend: 'gpu' });
    const vectors = await m.embed(texts, { batchSize: 8 });
    const backend = m.backend;
    const rate = timed ? await sentencesPerSecond(m, count) : null;
    await m.dispose();
    return { badBackend, autoBackend, backend, n: vectors.length, minCosine: minCosine(vectors), sentencesPerSecond: rate };
  }, { model: MODEL, timed: !!process.env.WEFT_EMBED_RESULTS, count: GPU_SENTENCES });
  const rate = r.sentencesPerSecond === null ? '' : `; ${GPU_SENTENCES} sentences: ${r.sentencesPerSecond.toFixed(2)} sentences/s`;
  console.log(`GPU (SwiftShader): min cosine ${r.minCosine.toFixed(8)} over ${r.n} texts${rate}`);
  if (r.sentencesPerSecond !== null) record('chromium webgpu (SwiftShader)', 1, GPU_SENTENCES, r.sentencesPerSecond);
  expect(r.badBackend).toBe('INVALID_ARGUMENT');
  expect(r.autoBackend).toBe('cpu');
  expect(r.backend).toBe('gpu');
  expect(r.n).toBe(24);
  expect(r.minCosine).toBeGreaterThanOrEqual(0.99999);
});
