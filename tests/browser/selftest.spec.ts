import { test, expect } from '@playwright/test';

// The tiled matmul runs on the browser's WebGPU adapter (SwiftShader here) and is compared with a
// reference computed in JavaScript, independently of the Rust CPU reference.

test('WebGPU adapter is found and capabilities are reported', async ({ page }) => {
  await page.goto('/harness.html');
  const caps = await page.evaluate(async () => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    return await weft.capabilities();
  });
  console.log(`adapter: ${JSON.stringify(caps)}`);
  expect(caps.backend).toBe('BrowserWebGpu');
  expect(caps.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 2 ** 20);
  expect(caps.limits.maxComputeInvocationsPerWorkgroup).toBeGreaterThanOrEqual(256);
  expect(caps.adapterName.length + caps.vendor.length + caps.architecture.length).toBeGreaterThan(0);
});

test('GPU matmul matches a JavaScript f64 reference on ragged shapes', async ({ page }) => {
  await page.goto('/harness.html');
  const results = await page.evaluate(async () => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    // mulberry32: small seeded generator, values in [-1, 1).
    const rand = (seed: number) => () => {
      seed |= 0;
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
    };
    const out = [];
    for (const [m, k, n, seed] of [[1, 1, 1, 1], [17, 33, 5, 2], [64, 300, 48, 3], [3, 577, 129, 4]]) {
      const r = rand(seed);
      const a = Float32Array.from({ length: m * k }, r);
      const b = Float32Array.from({ length: k * n }, r);
      const got = await weft.gpuMatmul(a, b, m, k, n);
      // Named tolerance, the same rule as the Rust side: abs 2e-7 * max(k, 16), rel 1e-5.
      const abs = 2e-7 * Math.max(k, 16);
      let worst = 0;
      let bad = 0;
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          let want = 0;
          for (let p = 0; p < k; p++) want += a[i * k + p] * b[p * n + j];
          const err = Math.abs(got[i * n + j] - want);
          worst = Math.max(worst, err);
          if (!(err <= abs + 1e-5 * Math.abs(want))) bad++;
        }
      }
      out.push({ m, k, n, len: got.length, worst, bad });
    }
    return out;
  });
  for (const r of results) {
    console.log(`matmul [${r.m},${r.k}]x[${r.k},${r.n}]: max abs err ${r.worst.toExponential(2)}`);
    expect(r.len).toBe(r.m * r.n);
    expect(r.bad).toBe(0);
  }
});

test('the wasm self-test passes against the Rust f64 reference', async ({ page }) => {
  await page.goto('/harness.html');
  const report = await page.evaluate(async () => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    return await weft.selfTest(7, 67, 129, 45);
  });
  expect(report.passed).toBe(true);
  expect(report.deviation.maxAbs).toBeGreaterThan(0); // a real float computation, not a copy
});

test('the self-test page shows the adapter and a passing self-test', async ({ page }) => {
  const errors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto('/selftest.html');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ok', { timeout: 60_000 });
  await expect(page.locator('#caps')).toContainText('adapter');
  await expect(page.locator('#selftest .pass')).toHaveText('PASS');
  await page.screenshot({ path: 'test-results/selftest.png', fullPage: true });
  expect(errors).toEqual([]);
});
