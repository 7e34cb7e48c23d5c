import { test, expect } from '@playwright/test';

// Browser storage around the model cache: loadModel asks navigator.storage.persist(), checks
// navigator.storage.estimate() before downloading (QUOTA, with nothing cached, when the model's
// uncached bytes do not fit), and cached models are listed and deleted one by one.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const FILE_BYTES = 98_362_432;

test('persist is asked, the quota is checked, cached models are listed and deleted', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  // Counts the page's persist() calls (the worker cannot make them).
  await page.evaluate(() => {
    const storage = navigator.storage as StorageManager & { persistCalls?: number };
    const persist = storage.persist.bind(storage);
    storage.persistCalls = 0;
    storage.persist = () => {
      storage.persistCalls! += 1;
      return persist();
    };
  });
  const first = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    await weft.clearCache();
    const m = await weft.loadModel(`${model}?t=storage`, { backend: 'webgpu', maxContext: 32 });
    const stats = await m.stats();
    await m.dispose();
    const calls = (navigator.storage as StorageManager & { persistCalls?: number }).persistCalls;
    return { listed: await weft.cachedModels(), fetched: stats.load.bytesFetched, calls, origin: location.origin };
  }, MODEL);
  console.log(`after the first load: ${JSON.stringify(first)}`);
  expect(first.calls).toBe(1);
  const url = `${first.origin}${MODEL}?t=storage`;
  expect(first.listed).toEqual([
    { url, bytes: first.fetched, coveredBytes: FILE_BYTES, fileBytes: FILE_BYTES, ranges: expect.any(Number), complete: true },
  ]);
  // Every range fetched was cached; the header's prefix reads overlap the first tensors a little.
  expect(first.fetched).toBeGreaterThanOrEqual(FILE_BYTES);
  expect(first.listed[0].ranges).toBeGreaterThan(30);

  // 32 MiB of storage left: less than the model. Chromium's quota cannot be lowered from a test
  // (CDP's Storage.overrideQuotaForOrigin leaves estimate() unchanged), so this part runs in the
  // page (direct.js) with estimate() answering 32 MiB more than the real usage.
  const second = await page.evaluate(async ([model, free]) => {
    const weft = await import('/js/direct.js');
    const real = navigator.storage.estimate.bind(navigator.storage);
    navigator.storage.estimate = async () => {
      const e = await real();
      return { ...e, quota: (e.usage ?? 0) + free };
    };
    // Cached already: nothing more to store, so the quota does not matter.
    const m = await weft.loadModel(`${model}?t=storage`, { backend: 'webgpu', maxContext: 32 });
    const stats = await m.stats();
    m.dispose();
    let quota = null;
    try {
      await weft.loadModel(`${model}?t=storage-new`, { backend: 'webgpu', maxContext: 32 });
    } catch (e) {
      const err = e as { code: string; message: string; needed: number; available: number };
      quota = { code: err.code, message: err.message, needed: err.needed, available: err.available };
    }
    const listed = await weft.cachedModels();
    const deleted = await weft.deleteCachedModel(`${model}?t=storage`);
    const again = await weft.deleteCachedModel(`${model}?t=storage`);
    return { cachedHits: stats.load.cacheHits, fetched: stats.load.bytesFetched, quota, listed, deleted, again, after: await weft.cachedModels() };
  }, [MODEL, 32 * 2 ** 20] as const);
  console.log(`with a 32 MiB quota: ${JSON.stringify(second)}`);
  expect(second.fetched).toBe(0);
  expect(second.cachedHits).toBeGreaterThan(30);
  expect(second.quota?.code).toBe('QUOTA');
  expect(second.quota?.needed).toBe(FILE_BYTES);
  expect(second.quota?.available).toBe(32 * 2 ** 20);
  expect(second.quota?.message).toContain('deleteCachedModel');
  // Rejected before any model byte was stored.
  expect(second.listed.map((m: { url: string }) => m.url)).toEqual([url]);
  expect(second.deleted).toBe(true);
  expect(second.again).toBe(false);
  expect(second.after).toEqual([]);
});
