import { test, expect } from '@playwright/test';

// A soak of the in-thread API on a tiny weft file: 200 generate calls with random breaks,
// aborts, dropped iterators, bad options and disposes mid-generation, over 3 loads and
// disposes. Afterwards the wasm linear memory and the live GPU buffer bytes are back to what
// they were after one warm-up load and dispose, no call answered BUSY, and every error had a
// code.

const MODEL = '/fixtures/tiny/qwen2-tiny-q8.safetensors';

test('200 generations with random breaks, aborts and disposes leave nothing behind', async ({ page }) => {
  test.setTimeout(240_000);
  // Live GPU buffer bytes: created minus destroyed minus collected.
  await page.addInitScript(() => {
    const live = { bytes: 0, buffers: 0, peak: 0 };
    const sizes = new WeakMap<GPUBuffer, number>();
    const collected = new FinalizationRegistry<{ size: number; gone: { done: boolean } }>((held) => {
      if (!held.gone.done) {
        held.gone.done = true;
        live.bytes -= held.size;
        live.buffers -= 1;
      }
    });
    const gone = new WeakMap<GPUBuffer, { done: boolean }>();
    const create = GPUDevice.prototype.createBuffer;
    GPUDevice.prototype.createBuffer = function (descriptor: GPUBufferDescriptor) {
      const buffer = create.call(this, descriptor);
      const flag = { done: false };
      sizes.set(buffer, descriptor.size);
      gone.set(buffer, flag);
      collected.register(buffer, { size: descriptor.size, gone: flag });
      live.bytes += descriptor.size;
      live.buffers += 1;
      live.peak = Math.max(live.peak, live.bytes);
      return buffer;
    };
    const destroy = GPUBuffer.prototype.destroy;
    GPUBuffer.prototype.destroy = function () {
      const flag = gone.get(this);
      if (flag && !flag.done) {
        flag.done = true;
        live.bytes -= sizes.get(this) ?? 0;
        live.buffers -= 1;
      }
      return destroy.call(this);
    };
    (globalThis as unknown as { __gpuLive: typeof live }).__gpuLive = live;
  });
  await page.goto('/harness.html');
  const cdp = await page.context().newCDPSession(page);
  const settle = async () => {
    // Collected buffers are reported by finalizers, which run after a collection.
    for (let i = 0; i < 4; i++) {
      await cdp.send('HeapProfiler.collectGarbage');
      await page.evaluate(() => new Promise((r) => setTimeout(r, 50)));
    }
    return page.evaluate(async () => {
      const weft = await import('/js/direct.js');
      const gpu = (globalThis as unknown as { __gpuLive: { bytes: number; buffers: number; peak: number } }).__gpuLive;
      return { wasm: await weft.wasmMemoryBytes(), gpuBytes: gpu.bytes, gpuBuffers: gpu.buffers, gpuPeak: gpu.peak };
    });
  };

  // The soak, defined once in the page: `calls` generate calls, a dispose (and a new load, but
  // after the last) at each index of `disposes_at`.
  await page.evaluate(() => {
    (globalThis as unknown as { __soak: unknown }).__soak = async (url: string, calls: number, disposes_at: number[]) => {
    const weft = await import('/js/direct.js');
    // Seeded, so a failure repeats.
    let seed = 12345;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      // The high bits: an LCG's low bits repeat with short periods.
      return Math.floor((seed / 2147483648) * n);
    };
    const codes: Record<string, number> = {};
    const actions: Record<string, number> = {};
    const uncoded: string[] = [];
    const note = (e: unknown) => {
      const c = (e as { code?: unknown }).code;
      if (typeof c !== 'string') uncoded.push(String(e));
      codes[String(c)] = (codes[String(c)] ?? 0) + 1;
    };
    const prompts = ['hello world', 'the quick brown fox', 'a', 'one two three four five six'];
    const optionsFor = (i: number) =>
      rand(2) ? { maxTokens: 1 + rand(8) } : { maxTokens: 1 + rand(8), temperature: 0.5 + rand(10) / 10, topK: rand(50), topP: 0.5 + rand(5) / 10, seed: i };
    let m = await weft.loadModel(url, { backend: 'webgpu', maxContext: 32 });
    let loads = 1;
    let disposes = 0;
    let completed = 0;
    let tokens = 0;
    const disposeAt = new Set(disposes_at);
    for (let i = 0; i < calls; i++) {
      const prompt = prompts[rand(prompts.length)];
      const action = disposeAt.has(i) ? 'dispose' : ['complete', 'break', 'abort', 'drop', 'bad-option'][rand(5)];
      actions[action] = (actions[action] ?? 0) + 1;
      try {
        if (action === 'complete') {
          for await (const c of m.generate(prompt, optionsFor(i))) if (c.token >= 0) tokens++;
          completed++;
        } else if (action === 'break') {
          const stopAt = rand(4);
          let n = 0;
          for await (const _ of m.generate(prompt, { maxTokens: 16 })) if (n++ >= stopAt) break;
        } else if (action === 'abort') {
          const controller = new AbortController();
          const stopAt = rand(4);
          let n = 0;
          for await (const _ of m.generate(prompt, { maxTokens: 16, signal: controller.signal })) {
            if (n++ >= stopAt) controller.abort();
          }
        } else if (action === 'drop') {
          // Started, then left without return().
          const it = m.generate(prompt, { maxTokens: 16 });
          for (let k = rand(3); k >= 0; k--) await it.next();
        } else if (action === 'bad-option') {
          const bad = [{ temperature: NaN }, { topP: 2 }, { repeatPenalty: 0 }, { maxTokens: -1 }, { nope: 1 }][rand(5)];
          for await (const _ of m.generate(prompt, bad as never)) {
            /* never reached */
          }
        } else {
          // Disposed in the middle of a generation; later calls say DISPOSED; then a new load.
          const it = m.generate(prompt, { maxTokens: 16 });
          await it.next();
          await m.dispose();
          disposes++;
          try {
            await it.next();
          } catch (e) {
            note(e);
          }
          try {
            for await (const _ of m.generate(prompt, { maxTokens: 2 })) {
              /* never reached */
            }
          } catch (e) {
            note(e);
          }
          if (i !== calls - 1) {
            m = await weft.loadModel(url, { backend: 'webgpu', maxContext: 32 });
            loads++;
          }
        }
      } catch (e) {
        note(e);
      }
    }
    return { codes, actions, uncoded, loads, disposes, tokens, completed };
    };
  });
  type Soak = { codes: Record<string, number>; actions: Record<string, number>; uncoded: string[]; loads: number; disposes: number; tokens: number; completed: number };
  const soak = (calls: number, disposesAt: number[]) =>
    page.evaluate(
      ({ url, calls, disposesAt }) =>
        (globalThis as unknown as { __soak: (u: string, c: number, d: number[]) => Promise<Soak> }).__soak(url, calls, disposesAt),
      { url: MODEL, calls, disposesAt },
    );
  // Warm-up: one soak brings the shared device, its pipelines and the wasm heap to their
  // working size (linear memory only grows, to its high-water mark); what is left after it is
  // the baseline the second soak must come back to.
  const warm = await soak(200, [66, 133, 199]);
  expect(warm.uncoded).toEqual([]);
  const before = await settle();
  const r = await soak(200, [66, 133, 199]);
  const after = await settle();
  const MB = (n: number) => `${(n / 1e6).toFixed(2)} MB`;
  console.log(`actions ${JSON.stringify(r.actions)}; error codes ${JSON.stringify(r.codes)}; ${r.tokens} tokens in ${r.completed} completed generations`);
  console.log(
    `wasm memory ${MB(before.wasm)} before, ${MB(after.wasm)} after; ` +
      `live GPU buffers ${before.gpuBuffers} (${MB(before.gpuBytes)}) before, ${after.gpuBuffers} (${MB(after.gpuBytes)}) after, ` +
      `peak ${MB(after.gpuPeak)} while models were loaded`,
  );
  expect(r.loads).toBe(3);
  expect(r.disposes).toBe(3);
  expect(r.uncoded).toEqual([]);
  expect(r.codes.BUSY).toBeUndefined();
  expect(Object.keys(r.codes).sort()).toEqual(['ABORTED', 'DISPOSED', 'INVALID_ARGUMENT']);
  expect(r.tokens).toBeGreaterThanOrEqual(r.completed);
  // The hook saw the models' buffers (so the zero after is a measurement, not a blind spot).
  expect(after.gpuPeak).toBeGreaterThan(100_000);
  expect(after.wasm).toBe(before.wasm);
  expect(after.gpuBytes).toBe(before.gpuBytes);
});
