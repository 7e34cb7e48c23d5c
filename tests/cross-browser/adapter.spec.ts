import { test, expect } from '@playwright/test';

// What Firefox tells about its WebGPU adapter, and weft's capabilities() on it. Firefox keeps
// GPUAdapterInfo's vendor, architecture and description empty; it does report a software
// adapter as a fallback one (lavapipe here), which weft folds into `isSoftware`.

test('Firefox exposes a WebGPU adapter and weft reports its limits', async ({ page }) => {
  await page.goto('/harness.html');
  const r = await page.evaluate(async () => {
    const adapter = await navigator.gpu.requestAdapter();
    const info = adapter!.info;
    const weft = await import('/pkg/weft.js');
    await weft.default();
    return {
      userAgent: navigator.userAgent,
      info: { vendor: info.vendor, architecture: info.architecture, description: info.description, isFallbackAdapter: (info as unknown as { isFallbackAdapter: boolean }).isFallbackAdapter },
      features: [...adapter!.features],
      caps: await weft.capabilities(),
    };
  });
  console.log(`user agent: ${r.userAgent}`);
  console.log(`adapter info: ${JSON.stringify(r.info)}; features: ${r.features.join(', ')}`);
  console.log(`weft capabilities: ${JSON.stringify(r.caps)}`);
  expect(r.userAgent).toContain('Firefox/');
  expect(r.caps.backend).toBe('BrowserWebGpu');
  expect(r.caps.isSoftware).toBe(r.info.isFallbackAdapter);
  expect(r.caps.shaderF16).toBe(r.features.includes('shader-f16'));
  expect(r.caps.timestampQuery).toBe(r.features.includes('timestamp-query'));
  // weft asks for the adapter's maxima: Firefox caps storage bindings at 128 MiB.
  expect(r.caps.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 2 ** 20);
  expect(r.caps.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
});
