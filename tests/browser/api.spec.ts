import { test, expect } from '@playwright/test';

// The page-facing API (js/index.js, model in a Web Worker): chat with the model's template,
// streaming, stats, errors with stable codes, aborting a generation, and recovering from a
// lost GPU device by loading again.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

test('chat, streaming, stats, aborts and a lost device through the worker API', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    await weft.init();
    const caught = async (p: Promise<unknown>) => {
      try {
        await p;
        return null;
      } catch (e) {
        const err = e as { code: string; message: string; name: string };
        return { code: err.code, message: err.message, isError: e instanceof Error, name: err.name };
      }
    };
    const badKv = await caught(weft.loadModel(`${model}?t=api`, { backend: 'webgpu', kv: 'q4' as 'f32' }));
    const missing = await caught(weft.loadModel('/models/missing.gguf', { cache: false }));
    // Aborting a load in the worker from the page.
    const loadController = new AbortController();
    const abortedLoad = await caught(
      weft.loadModel(`${model}?t=api-abort`, {
        backend: 'webgpu',
        cache: false,
        signal: loadController.signal,
        onProgress: (p) => p.phase === 'weights' && p.step >= 3 && loadController.abort(),
      }),
    );
    const phases = new Set<string>();
    let lastProgress = null;
    const m = await weft.loadModel(`${model}?t=api`, {
      backend: 'webgpu',
      kv: 'f32',
      maxContext: 128,
      onProgress: (p) => {
        phases.add(p.phase);
        lastProgress = p;
      },
    });
    // A short system message keeps the prompt small (SwiftShader is slow).
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Capital of France?' },
    ];
    const prompt = await m.chatPrompt(messages);
    const chunks = [];
    for await (const c of m.chatStream(messages, { maxTokens: 2 })) chunks.push(c);
    const reply = await m.chat(messages, { maxTokens: 2 });
    const stats = await m.stats();
    // A generation aborted after its first chunk stops with ABORTED.
    const controller = new AbortController();
    let seen = 0;
    const aborted = await caught(
      (async () => {
        for await (const _ of m.generate('Once upon a time', { maxTokens: 50, signal: controller.signal })) {
          seen++;
          controller.abort();
        }
      })(),
    );
    // A lost device: an event, DEVICE_LOST from the next call, and a fresh load works.
    let lostEvent = null;
    m.addEventListener('devicelost', (e) => (lostEvent = (e as Event & { error: { code: string } }).error.code));
    await m.destroyDevice();
    await new Promise((res) => setTimeout(res, 500));
    const afterLoss = await caught(
      (async () => {
        for await (const _ of m.generate('Hello', { maxTokens: 2 })) {
          /* nothing */
        }
      })(),
    );
    await m.dispose();
    const again = await weft.loadModel(`${model}?t=api`, { backend: 'webgpu', maxContext: 64 });
    const ids = [];
    for await (const c of again.generate('The capital of France is', { maxTokens: 2 })) ids.push(c.token);
    await again.dispose();
    return {
      abortedLoad,
      badKv,
      missing,
      phases: [...phases],
      lastProgress,
      prompt,
      chunks,
      reply,
      stats,
      aborted,
      seen,
      lostEvent,
      afterLoss,
      ids,
    };
  }, MODEL);
  console.log(JSON.stringify({ ...r, stats: undefined }, null, 1));
  console.log(`stats: ${JSON.stringify(r.stats)}`);
  expect(r.abortedLoad?.code).toBe('LOAD_ABORTED');
  expect(r.badKv?.code).toBe('INVALID_ARGUMENT');
  expect(r.badKv?.isError).toBe(true);
  expect(r.missing?.code).toBe('LOAD_HTTP');
  expect(r.missing?.message).toContain('404');
  expect(r.phases).toEqual(['header', 'weights', 'compile', 'ready']);
  expect(r.prompt).toBe(
    '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nCapital of France?<|im_end|>\n<|im_start|>assistant\n',
  );
  expect(r.chunks).toHaveLength(2);
  expect(r.reply).toBe(r.chunks.map((c: { text: string }) => c.text).join(''));
  expect(r.reply.length).toBeGreaterThan(0);
  expect(r.stats.generatedTokens).toBe(2);
  expect(r.stats.timeToFirstTokenMs).toBeGreaterThan(0);
  expect(r.stats.tokensPerSecond).toBeGreaterThan(0);
  expect(r.stats.gpuBytes).toBeGreaterThan(r.stats.weightBytes);
  expect(r.stats.contextLength).toBe(128);
  expect(r.aborted?.code).toBe('ABORTED');
  // The worker may have produced a chunk or two before the abort reached it.
  expect(r.seen).toBeLessThan(5);
  expect(r.lostEvent).toBe('DEVICE_LOST');
  expect(r.afterLoss?.code).toBe('DEVICE_LOST');
  expect(r.ids).toEqual([7042, 30]);
});
