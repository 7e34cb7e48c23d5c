import { test, expect } from '@playwright/test';

// Quantized GEMV, GEMM and embedding lookup in the page, on the browser's WebGPU adapter
// (SwiftShader here, which has no shader-f16: the f32 kernels), for every weight format, against
// the f64 CPU reference of dequant(W) · x computed by the same wasm module.

const GGML = ['F32', 'F16', 'BF16', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q2_K', 'Q3_K', 'Q4_K',
  'Q5_K', 'Q6_K'];
const WEFT = [2, 3, 4, 8].flatMap((bits) => [32, 64, 128].flatMap((group) =>
  ['sym', 'asym'].map((scheme) => `q${bits}_g${group}_${scheme}`)));

// K ragged where the format allows it; n odd; t past one 32-token GEMM tile. The weft formats
// run twice: K = 200 (the block kernels' vec4 activations, a partial last chunk) and K = 203
// (not a multiple of 4: activations one float at a time).
function k(name: string): number {
  if (name.startsWith('q')) return 200;
  if (name.startsWith('Q')) return name.endsWith('_K') ? 512 : 96;
  return 77;
}

test('every weight format multiplies within tolerance and embeds exactly', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const cases = [...GGML, ...WEFT].map((format, i) => ({ format, seed: 500 + i, n: 9, k: k(format), t: 35 }))
    .concat(WEFT.map((format, i) => ({ format, seed: 600 + i, n: 7, k: 203, t: 3 })));
  const reports = await page.evaluate(async (cases) => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    const out = [];
    for (const c of cases) out.push(await weft.qmatmulSelfTest(c.format, c.seed, c.n, c.k, c.t));
    return out;
  }, cases);
  expect(reports.length).toBe(cases.length);
  for (const [i, r] of reports.entries()) {
    const errs = r.kernels.map((kr) => `${kr.kernel}/${kr.precision} ${kr.maxError.toExponential(2)} (tol ${kr.tolerance.toExponential(2)})`);
    console.log(`${r.format} [${r.n}, ${r.k}] t=${r.t}: ${errs.join(', ')}, embed mismatches ${r.embedMismatches}`);
    expect(r.format).toBe(cases[i].format);
    expect(r.kernels.length).toBeGreaterThanOrEqual(2);
    for (const kr of r.kernels) expect(kr.maxError, `${r.format} ${kr.kernel}/${kr.precision}`).toBeLessThanOrEqual(kr.tolerance);
    expect(r.embedMismatches).toBe(0);
    expect(r.passed).toBe(true);
  }
});

test('an unknown weight format is a JavaScript error', async ({ page }) => {
  await page.goto('/harness.html');
  const message = await page.evaluate(async () => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    try {
      await weft.qmatmulSelfTest('q5_g32_sym', 1, 4, 32, 1);
      return 'no error';
    } catch (e) {
      return String(e);
    }
  });
  expect(message).toContain("unknown weight format 'q5_g32_sym'");
});
