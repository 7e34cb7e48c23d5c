import { test, expect } from '@playwright/test';

// The JS API used carelessly: generations left by `break`, dropped without return() or aborted
// never leave the model busy; bad URLs and options are INVALID_ARGUMENT errors naming what is
// wrong; capabilities() reports instead of rejecting; a prompt longer than the context is
// CONTEXT_FULL, and generation past the context goes on over the sliding window.

// A tiny weft file (tests/fixtures/tiny): misuse needs a model, not a good one.
const MODEL = '/fixtures/tiny/qwen2-tiny-q8.safetensors';
const VOCAB = 700;

test('worker API: break, abort and bad options never leave the model busy', async ({ page }) => {
  test.setTimeout(120_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(
    async ({ model, vocab }) => {
      const weft = await import('/js/index.js');
      await weft.init();
      const code = async (p: Promise<unknown> | (() => Promise<unknown>)) => {
        try {
          await (typeof p === 'function' ? p() : p);
          return 'ok';
        } catch (e) {
          const err = e as { code?: string; message?: string };
          return `${err.code}: ${err.message}`;
        }
      };
      const drain = async (it: AsyncIterable<{ token: number }>) => {
        const ids = [];
        for await (const c of it) ids.push(c.token);
        return ids;
      };
      const out: Record<string, unknown> = {};
      out.caps = await weft.capabilities().then((c) => (c as { webgpu?: boolean }).webgpu);
      out.badUrl = await code(weft.loadModel('http://[bad'));
      out.unknownLoadKey = await code(weft.loadModel(`${model}?t=misuse`, { maxContxt: 64 } as never));
      out.badMaxContext = await code(weft.loadModel(`${model}?t=misuse`, { maxContext: 1.5 }));
      // The keys other features read are known: this fails on the missing file, not on them.
      out.futureKeys = await code(
        weft.loadModel('/models/missing.gguf', { cache: false, backend: 'webgpu', quantize: 'q4', memoryBudgetMB: 512, task: 'chat' } as never),
      );
      const m = await weft.loadModel(`${model}?t=misuse`, { backend: 'webgpu', maxContext: 32 });
      const prompt = 'hello world';
      out.reference = await drain(m.generate(prompt, { maxTokens: 3 }));
      // break, then at once another generation.
      const afterBreak = [];
      for (let i = 0; i < 3; i++) {
        for await (const _ of m.generate(prompt, { maxTokens: 50 })) break;
        afterBreak.push(await code(drain(m.generate(prompt, { maxTokens: 2 }))));
      }
      out.afterBreak = afterBreak;
      // Aborted, then at once another generation.
      const controller = new AbortController();
      out.aborted = await code(async () => {
        for await (const _ of m.generate(prompt, { maxTokens: 50, signal: controller.signal })) controller.abort();
      });
      out.afterAbort = await drain(m.generate(prompt, { maxTokens: 3 }));
      const bad: Record<string, unknown> = {
        temperatureNaN: { temperature: NaN },
        temperatureNegative: { temperature: -1 },
        repeatPenaltyZero: { repeatPenalty: 0 },
        topPZero: { topP: 0 },
        topPAboveOne: { topP: 1.5 },
        topKNegative: { topK: -1 },
        seedFraction: { seed: 1.5 },
        maxTokensFraction: { maxTokens: 2.5 },
        maxTokensZero: { maxTokens: 0 },
        unknownKey: { temprature: 0.5 },
      };
      const rejected: Record<string, string> = {};
      for (const [name, opts] of Object.entries(bad)) rejected[name] = await code(drain(m.generate(prompt, opts as never)));
      out.rejected = rejected;
      // Extreme but valid sampling still draws real tokens.
      const extreme = await drain(m.generate(prompt, { maxTokens: 4, temperature: 0.001, topP: 0.0001, repeatPenalty: 100, topK: 1, seed: 7 }));
      out.extremeInVocab = extreme.every((t) => t >= 0 && t < vocab);
      // Context: 32 positions. A longer prompt is CONTEXT_FULL; a generation past 32 goes on.
      out.longPrompt = await code(drain(m.generate('word '.repeat(60), { maxTokens: 2 })));
      const long = await drain(m.generate(prompt, { maxTokens: 60 }));
      out.pastGenerated = long.length;
      out.pastContext = (await m.encode(prompt)).length + long.length;
      out.pastContextInVocab = long.every((t) => t >= 0 && t < vocab);
      out.stats = await code(m.stats());
      await m.dispose();
      return out;
    },
    { model: MODEL, vocab: VOCAB },
  );
  console.log(JSON.stringify(r, null, 1));
  expect(r.caps).toBe(true);
  expect(r.badUrl).toMatch(/^INVALID_ARGUMENT: /);
  expect(r.unknownLoadKey).toMatch(/^INVALID_ARGUMENT: .*'maxContxt'/);
  expect(r.badMaxContext).toMatch(/^INVALID_ARGUMENT: .*'maxContext'/);
  expect(r.futureKeys).toMatch(/^LOAD_HTTP: /);
  expect(r.afterBreak).toEqual(['ok', 'ok', 'ok']);
  expect(r.aborted).toMatch(/^ABORTED: /);
  expect(r.afterAbort).toEqual(r.reference);
  expect(r.reference).toHaveLength(3);
  const rejected = r.rejected as Record<string, string>;
  const names: Record<string, string> = {
    temperatureNaN: 'temperature',
    temperatureNegative: 'temperature',
    repeatPenaltyZero: 'repeatPenalty',
    topPZero: 'topP',
    topPAboveOne: 'topP',
    topKNegative: 'topK',
    seedFraction: 'seed',
    maxTokensFraction: 'maxTokens',
    maxTokensZero: 'maxTokens',
    unknownKey: 'temprature',
  };
  for (const [name, option] of Object.entries(names)) {
    expect(rejected[name], name).toMatch(new RegExp(`^INVALID_ARGUMENT: .*'${option}'`));
  }
  expect(r.extremeInVocab).toBe(true);
  expect(r.longPrompt).toMatch(/^CONTEXT_FULL: /);
  // Prompt and reply run past the 32 positions (the old API stopped at 32).
  expect(r.pastContext).toBeGreaterThan(34);
  expect(r.pastGenerated).toBe(60);
  expect(r.pastContextInVocab).toBe(true);
  expect(r.stats).toBe('ok');
});

test('in-thread API: an iterator dropped without return() does not keep the model busy', async ({ page }) => {
  test.setTimeout(120_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/direct.js');
    const code = async (p: Promise<unknown>) => {
      try {
        await p;
        return 'ok';
      } catch (e) {
        const err = e as { code?: string; message?: string };
        return `${err.code}: ${err.message}`;
      }
    };
    const m = await weft.loadModel(`${model}?t=misuse-direct`, { backend: 'webgpu', maxContext: 32 });
    const prompt = 'hello world';
    const ids = async (it: AsyncIterable<{ token: number }>) => {
      const out = [];
      for await (const c of it) out.push(c.token);
      return out;
    };
    const reference = await ids(m.generate(prompt, { maxTokens: 3 }));
    // Started and abandoned mid-way: no return(), no further next().
    const dropped = m.generate(prompt, { maxTokens: 50 });
    await dropped.next();
    const afterDrop = await ids(m.generate(prompt, { maxTokens: 3 }));
    // The abandoned iterator, resumed, ends with a coded error instead of running on.
    const resumed = await code(dropped.next());
    // A next() still in flight when a new generation starts: the new one waits for it.
    const racing = m.generate(prompt, { maxTokens: 50 });
    await racing.next();
    const inFlight = racing.next();
    const afterRace = await ids(m.generate(prompt, { maxTokens: 3 }));
    const raced = await code(inFlight.then(() => racing.next()));
    for await (const _ of m.generate(prompt, { maxTokens: 50 })) break;
    const afterBreak = await ids(m.generate(prompt, { maxTokens: 3 }));
    const badUrl = await code(weft.loadModel('http://[bad'));
    // Disposing while a generation is suspended is fine, and the model is then DISPOSED.
    const pending = m.generate(prompt, { maxTokens: 50 });
    await pending.next();
    await m.dispose();
    const afterDispose = await code(ids(m.generate(prompt, { maxTokens: 2 })));
    return { reference, afterDrop, resumed, afterRace, raced, afterBreak, badUrl, afterDispose };
  }, MODEL);
  console.log(JSON.stringify(r));
  expect(r.reference).toHaveLength(3);
  expect(r.afterDrop).toEqual(r.reference);
  expect(r.resumed).toMatch(/^ABORTED: /);
  expect(r.afterRace).toEqual(r.reference);
  expect(r.raced).toMatch(/^ABORTED: /);
  expect(r.afterBreak).toEqual(r.reference);
  expect(r.badUrl).toMatch(/^INVALID_ARGUMENT: /);
  expect(r.afterDispose).toMatch(/^DISPOSED: /);
});

test('capabilities() without WebGPU resolves with webgpu: false', async ({ page }) => {
  await page.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined, configurable: true });
  });
  await page.goto('/harness.html');
  const caps = await page.evaluate(async () => {
    const weft = await import('/js/direct.js');
    try {
      return { resolved: await weft.capabilities() };
    } catch (e) {
      return { rejected: String((e as { code?: string }).code) };
    }
  });
  console.log(JSON.stringify(caps));
  expect(caps).toEqual({ resolved: expect.objectContaining({ webgpu: false, code: 'UNSUPPORTED' }) });
});
