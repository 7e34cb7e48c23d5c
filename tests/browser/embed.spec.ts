import { test, expect } from '@playwright/test';

// Sentence embeddings in Chromium through the worker API: loadModel(folder, { task: 'embed' }),
// on the CPU and on WebGPU (backend: 'gpu'),
// against the sentence-transformers fixture (tests/fixtures/embed), option errors with codes,
// and the throughput of 256 sentences of ~30 tokens in batches of 32 (tokenization included).

const MODEL = '/models/all-MiniLM-L6-v2';

test('embeddings equal sentence-transformers in the browser', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    await weft.init();
    const fx = await (await fetch('/fixtures/embed/sentences.json')).json();
    const caught = async (p: Promise<unknown>) => {
      try {
        await p;
        return null;
      } catch (e) {
        return (e as { code: string }).code;
      }
    };
    const missing = await caught(weft.loadModel('/models/no-such-encoder', { task: 'embed', cache: false }));
    const loads: number[] = [];
    const m = await weft.loadModel(model, { task: 'embed', onProgress: (p: { bytesLoaded: number }) => loads.push(p.bytesLoaded) });
    const badOption = await caught(m.embed(['x'], { pooling: 'max' }));
    const badTexts = await caught(m.embed('x' as unknown as string[]));
    const texts = fx.sentences.map((s: { text: string }) => s.text);
    const progress: number[] = [];
    const vectors = await m.embed(texts, { pooling: 'mean', normalize: true, batchSize: 8, onProgress: (p: { done: number }) => progress.push(p.done) });
    const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
      let d = 0, na = 0, nb = 0;
      for (let i = 0; i < a.length; i++) {
        d += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
      }
      return d / Math.sqrt(na * nb);
    };
    const cosines = vectors.map((v: Float32Array, i: number) => cosine(v, fx.sentences[i].embedding));
    const ids = await m.tokenize(texts[1]);

    const bench = (await (await fetch('/bench/embed_sentences.txt')).text()).split('\n').filter((l) => l.length);
    await m.embed(bench.slice(0, 32), { batchSize: 32 });
    const start = performance.now();
    await m.embed(bench, { batchSize: 32 });
    const seconds = (performance.now() - start) / 1000;
    return {
      missing, badOption, badTexts, loads: loads.length, progress,
      isFloat32: vectors.every((v: unknown) => v instanceof Float32Array), dim: m.dim, n: vectors.length,
      minCosine: Math.min(...cosines), ids, refIds: fx.sentences[1].ids,
      benchSentences: bench.length, sentencesPerSecond: bench.length / seconds,
    };
  }, MODEL);
  console.log(`min cosine ${r.minCosine.toFixed(8)} over ${r.n} texts; ${r.benchSentences} sentences: ${r.sentencesPerSecond.toFixed(1)} sentences/s`);
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
  expect(r.benchSentences).toBe(256);
});

test("backend: 'gpu' runs the encoder on WebGPU (SwiftShader) with the same embeddings", async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    await weft.init();
    const fx = await (await fetch('/fixtures/embed/sentences.json')).json();
    const caught = async (p: Promise<unknown>) => {
      try {
        await p;
        return null;
      } catch (e) {
        return (e as { code: string }).code;
      }
    };
    const badBackend = await caught(weft.loadModel(model, { task: 'embed', backend: 'tpu' }));
    // SwiftShader is a software adapter: 'auto' keeps the CPU, as for the LLMs.
    const auto = await weft.loadModel(model, { task: 'embed', backend: 'auto' });
    const autoBackend = auto.backend;
    await auto.dispose();
    const m = await weft.loadModel(model, { task: 'embed', backend: 'gpu' });
    const texts = fx.sentences.map((s: { text: string }) => s.text);
    const vectors = await m.embed(texts, { batchSize: 8 });
    const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
      let d = 0, na = 0, nb = 0;
      for (let i = 0; i < a.length; i++) {
        d += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
      }
      return d / Math.sqrt(na * nb);
    };
    const cosines = vectors.map((v: Float32Array, i: number) => cosine(v, fx.sentences[i].embedding));
    const backend = m.backend;
    await m.dispose();
    return { badBackend, autoBackend, backend, n: vectors.length, minCosine: Math.min(...cosines) };
  }, MODEL);
  console.log(`GPU (SwiftShader): min cosine ${r.minCosine.toFixed(8)} over ${r.n} texts`);
  expect(r.badBackend).toBe('INVALID_ARGUMENT');
  expect(r.autoBackend).toBe('cpu');
  expect(r.backend).toBe('gpu');
  expect(r.n).toBe(24);
  expect(r.minCosine).toBeGreaterThanOrEqual(0.99999);
});
