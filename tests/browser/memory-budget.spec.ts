import { test, expect } from '@playwright/test';

// loadModel's memoryBudgetMB: the model's weights, KV cache and activations are checked against
// the budget after the header and before any weight is fetched. A model over it rejects with
// GPU_OOM (`needed` > `available`), fetching no range past the header, and a model already
// loaded keeps working; a budget it fits loads and generates. Bad values are INVALID_ARGUMENT.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

interface Entry {
  method: string;
  path: string;
  range: string | null;
  query?: string;
  status: number;
}

test('a model over memoryBudgetMB is GPU_OOM before any weight is fetched; one within it loads', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    await weft.init();
    const fail = async (p: Promise<unknown>) => {
      try {
        await p;
        return { code: 'ok' } as Record<string, unknown>;
      } catch (e) {
        const err = e as Record<string, unknown>;
        return { code: err.code, message: err.message, needed: err.needed, available: err.available };
      }
    };
    const drain = async (it: AsyncIterable<{ token: number }>) => {
      const ids = [];
      for await (const c of it) ids.push(c.token);
      return ids;
    };
    const log = async (t: string) =>
      ((await (await fetch('/__requests')).json()) as Entry[]).filter(
        (e) => e.path === model && new URLSearchParams(e.query ?? '').get('t') === t,
      );
    const out: Record<string, unknown> = {};
    // A generous budget: loads and generates.
    const roomy = await weft.loadModel(`${model}?t=budget-roomy`, { backend: 'webgpu', memoryBudgetMB: 4096, maxContext: 64, cache: false });
    out.reference = await drain(roomy.generate('The capital of France is', { maxTokens: 3, temperature: 0 }));
    const roomyLog = await log('budget-roomy');
    out.roomyGets = roomyLog.filter((e) => e.method === 'GET').length;
    // 10 MB: SmolLM2's weights alone are ~98 MB.
    const phases: { phase: string; bytesLoaded: number }[] = [];
    out.small = await fail(
      weft.loadModel(`${model}?t=budget-small`, {
        backend: 'webgpu',
        memoryBudgetMB: 10,
        maxContext: 64,
        cache: false,
        onProgress: (p) => phases.push({ phase: p.phase, bytesLoaded: p.bytesLoaded }),
      }),
    );
    out.phases = phases;
    out.smallLog = await log('budget-small');
    // The model loaded first is untouched.
    out.after = await drain(roomy.generate('The capital of France is', { maxTokens: 3, temperature: 0 }));
    await roomy.dispose();
    const bad: Record<string, unknown> = {};
    for (const [name, v] of [['zero', 0], ['negative', -5], ['nan', NaN], ['infinity', Infinity], ['string', '100']] as const) {
      bad[name] = await fail(weft.loadModel(`${model}?t=budget-bad`, { backend: 'webgpu', memoryBudgetMB: v as never, cache: false }));
    }
    out.bad = bad;
    out.badLog = (await log('budget-bad')).length;
    return out;
  }, MODEL);
  console.log(JSON.stringify({ ...r, smallLog: undefined }));
  const small = r.small as { code: string; needed: number; available: number; message: string };
  expect(small.code, small.message).toBe('GPU_OOM');
  expect(small.available).toBe(10_000_000);
  expect(small.needed).toBeGreaterThan(small.available);
  // Only the header was read: no weights phase, and every GET ends within the header's bytes.
  const phases = r.phases as { phase: string; bytesLoaded: number }[];
  expect(phases.map((p) => p.phase)).toEqual(['header']);
  const headerBytes = phases[0].bytesLoaded;
  const gets = (r.smallLog as Entry[]).filter((e) => e.method === 'GET');
  console.log(`rejected load: header ${headerBytes} bytes, ranges ${gets.map((e) => e.range).join(', ')}; roomy load: ${r.roomyGets} GETs`);
  expect(gets.length).toBeGreaterThan(0);
  for (const e of gets) {
    const m = /^bytes=(\d+)-(\d+)$/.exec(e.range ?? '');
    expect(m, `a ranged GET, not ${e.range}`).not.toBeNull();
    expect(Number(m![2]) + 1).toBeLessThanOrEqual(headerBytes);
  }
  expect(r.roomyGets as number).toBeGreaterThan(gets.length + 30);
  // Generation before and after the rejected load.
  expect((r.reference as number[]).length).toBe(3);
  expect(r.after).toEqual(r.reference);
  for (const [name, v] of Object.entries(r.bad as Record<string, { code: string; message: string }>)) {
    expect(v.code, name).toBe('INVALID_ARGUMENT');
    expect(v.message, name).toContain('memoryBudgetMB');
  }
  // Refused before the file was asked for.
  expect(r.badLog).toBe(0);
});
