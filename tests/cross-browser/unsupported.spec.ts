import { test, expect } from '@playwright/test';

// A browser without a WebGPU adapter (WebKitGTK here: without its WebGPU feature navigator.gpu is
// absent; with it, navigator.gpu is null, as the build has no backend for this platform).
// capabilities() never rejects: it resolves with { webgpu: false, code: 'UNSUPPORTED', reason }.
// loadModel() rejects with UNSUPPORTED before fetching any model byte, the cache functions still
// work, and the demo shows its no-WebGPU banner.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

test("without WebGPU capabilities() reports UNSUPPORTED and the CPU backend, loadModel({ backend: 'webgpu' }) rejects with it and nothing is fetched", async ({ page }) => {
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const caught = async (p: Promise<unknown>) => {
      try {
        await p;
        return null;
      } catch (e) {
        const err = e as { code: string; message: string };
        return { code: err.code, message: err.message, isError: e instanceof Error };
      }
    };
    const reported = async (p: Promise<unknown>) => {
      try {
        const c = (await p) as { webgpu: boolean; code?: string; reason?: string; selectedBackend?: string; cpu?: object };
        return { resolved: true, webgpu: c.webgpu, code: c.code, reason: c.reason, selectedBackend: c.selectedBackend, cpu: c.cpu };
      } catch (e) {
        return { resolved: false, code: (e as { code?: string }).code, reason: (e as Error).message };
      }
    };
    const gpu = 'gpu' in navigator ? String((navigator as unknown as { gpu: unknown }).gpu) : 'absent';
    // In the page (direct.js), so the page's resource timings show every request it made.
    const direct = await import('/js/direct.js');
    const directCaps = await reported(direct.capabilities());
    const directLoad = await caught(direct.loadModel(`${model}?t=unsupported`, { backend: 'webgpu' }));
    const modelRequests = performance.getEntriesByType('resource').filter((e) => e.name.includes('.gguf')).length;
    // Through the worker (index.js).
    const weft = await import('/js/index.js');
    const workerCaps = await reported(weft.capabilities());
    const workerLoad = await caught(weft.loadModel(`${model}?t=unsupported-worker`, { backend: 'webgpu' }));
    const cached = await weft.cachedModels();
    return { userAgent: navigator.userAgent, gpu, directCaps, directLoad, modelRequests, workerCaps, workerLoad, cached };
  }, MODEL);
  console.log(JSON.stringify(r, null, 1));
  expect(r.gpu === 'absent' || r.gpu === 'null').toBe(true);
  const why = `navigator.gpu is ${r.gpu === 'absent' ? 'undefined' : 'null'}`;
  for (const c of [r.directCaps, r.workerCaps]) {
    expect(c).toEqual({
      resolved: true,
      webgpu: false,
      code: 'UNSUPPORTED',
      reason: expect.stringContaining(why),
      // Without WebGPU, `auto` runs on the CPU backend.
      selectedBackend: 'cpu',
      cpu: expect.objectContaining({ available: true }),
    });
  }
  for (const e of [r.directLoad, r.workerLoad]) {
    expect(e?.code).toBe('UNSUPPORTED');
    expect(e?.isError).toBe(true);
    expect(e?.message).toContain(why);
  }
  expect(r.modelRequests).toBe(0);
  expect(r.cached.filter((m: { url: string }) => m.url.includes('unsupported'))).toEqual([]);
});

test('the demo shows the no-WebGPU banner', async ({ page }) => {
  await page.goto('/index.html');
  const banner = await page.evaluate(async () => {
    for (let i = 0; i < 200; i++) {
      const el = document.getElementById('no-webgpu');
      if (el && !el.hidden) return { shown: true, text: el.textContent ?? '', load: document.getElementById('load-state')?.textContent };
      await new Promise((r) => setTimeout(r, 100));
    }
    return { shown: false, text: '', load: '' };
  });
  console.log(JSON.stringify(banner));
  expect(banner.shown).toBe(true);
  expect(banner.text).toContain('WebGPU');
  // The CPU backend still runs: the demo offers to load.
  expect(banner.text).toContain('CPU backend');
});
