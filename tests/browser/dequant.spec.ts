import { test, expect } from '@playwright/test';

// Every storage type decoded in the page by the Rust CPU reference and by the WGSL kernel on the
// browser's WebGPU adapter (SwiftShader here), compared bit for bit, NaN bits included.

const SAFE = ['F64', 'F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2', 'F4', 'I64', 'I32', 'I16', 'I8',
  'U64', 'U32', 'U16', 'U8', 'BOOL'];
const GGML = ['gguf:F32', 'gguf:F16', 'gguf:BF16', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q2_K',
  'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K'];

function sizes(name: string): number[] {
  if (name.startsWith('Q')) return name.endsWith('_K') ? [256, 37 * 256] : [32, 333 * 32];
  if (name === 'F4') return [2, 9002];
  return [3, 257, 9001];
}

test('every storage type decodes identically on the CPU and the GPU', async ({ page }) => {
  await page.goto('/harness.html');
  const cases = [...SAFE, ...GGML].flatMap((name, t) =>
    sizes(name).map((elements, s) => ({ name, elements, seed: t * 16 + s + 1000 })));
  const reports = await page.evaluate(async (cases) => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    const out = [];
    for (const c of cases) out.push(await weft.dequantSelfTest(c.name, c.seed, c.elements));
    return out;
  }, cases);
  expect(reports.length).toBe(cases.length);
  for (const [i, r] of reports.entries()) {
    console.log(`${cases[i].name} x${r.elements}: ${r.mismatches} mismatches, ${r.nan} NaN, ${r.infinite} inf`);
    expect(r.elements).toBe(cases[i].elements);
    expect(r.mismatches, JSON.stringify(r.firstMismatch)).toBe(0);
  }
  // The float types reached their special values in the page too.
  for (const name of ['F64', 'F32', 'F16', 'BF16', 'F8_E5M2']) {
    const big = reports.find((r, i) => cases[i].name === name && r.elements > 1000);
    expect(big.nan).toBeGreaterThan(0);
    expect(big.infinite).toBeGreaterThan(0);
  }
});

test('an unknown type name is a JavaScript error', async ({ page }) => {
  await page.goto('/harness.html');
  const message = await page.evaluate(async () => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    try {
      await weft.dequantSelfTest('Q8_1', 1, 32);
      return 'no error';
    } catch (e) {
      return String(e);
    }
  });
  expect(message).toContain("unknown storage type 'Q8_1'");
});
