import { test, expect } from '@playwright/test';

// Every kernel family on a device created with WebGPU's default limits and no optional feature
// (what every implementation grants: 128 MiB storage bindings, 256 MiB buffers, 16 KiB of
// workgroup storage, 256 invocations, no shader-f16 / subgroups / timestamp-query), so weft runs
// wherever an adapter is found, not only where the adapter's maxima are generous.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
// The first greedy ids of "The capital of France is" (activations.spec.ts has all 20).
const NATIVE_IDS = [7042, 30, 198, 198, 504, 2988];
const DEFAULTS = {
  maxStorageBufferBindingSize: 134217728,
  maxBufferSize: 268435456,
  maxComputeWorkgroupsPerDimension: 65535,
  maxStorageBuffersPerShaderStage: 8,
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupStorageSize: 16384,
};
// One format of each kernel family: float rows, GGML blocks, K-quant super-blocks, weft's
// packed levels with and without zero points, at K a multiple of 4 and not.
const QFORMATS: [string, number][] = [['F16', 77], ['Q4_0', 96], ['Q8_0', 96], ['Q4_K', 512], ['Q6_K', 512],
  ['q4_g32_asym', 200], ['q3_g64_sym', 203], ['q8_g128_asym', 200], ['q2_g32_sym', 203]];
const DTYPES = ['F32', 'F16', 'BF16', 'I8', 'Q4_1', 'Q5_0', 'Q2_K', 'Q3_K', 'Q5_K', 'Q6_K'];

test('kernels, a CNN and a generation run on a default-limits device', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async ([qformats, dtypes]) => {
    const weft = await import('/pkg/weft.js');
    await weft.default();
    weft.configureDevice('default', 'none');
    const caps = await weft.capabilities();
    const selftest = await weft.selfTest(11, 67, 129, 45);
    const dequant = [];
    for (const [i, name] of dtypes.entries()) dequant.push(await weft.dequantSelfTest(name, 700 + i, name.startsWith('Q') && name.endsWith('_K') ? 2048 : 4096));
    const qmatmul = [];
    for (const [i, [format, k]] of qformats.entries()) qmatmul.push(await weft.qmatmulSelfTest(format, 800 + i, 9, k, 35));
    // The MNIST CNN (convolution, ReLU, dense layers) on the first test digit.
    const get = async (url: string) => new Uint8Array(await (await fetch(url)).arrayBuffer());
    await weft.mnistLoad(await get('/mnist/model-f32.safetensors'), undefined, 0);
    const digits = await get('/mnist/test-digits.bin');
    const n = (digits.length / 785) | 0;
    const probs = await weft.mnistPredict('F32', Float32Array.from(digits.subarray(0, 784), (v) => v / 255));
    const predicted = probs.indexOf(Math.max(...probs));
    return { caps, selftest, dequant, qmatmul, predicted, label: digits[784 * n] };
  }, [QFORMATS, DTYPES] as const);
  console.log(`device: ${JSON.stringify(r.caps)}`);
  expect(r.caps.limits).toEqual(DEFAULTS);
  expect([r.caps.shaderF16, r.caps.subgroups, r.caps.timestampQuery]).toEqual([false, false, false]);
  expect(r.selftest.passed).toBe(true);
  for (const d of r.dequant) {
    console.log(`dequant ${d.type} x${d.elements}: ${d.mismatches} mismatches`);
    expect(d.mismatches, JSON.stringify(d.firstMismatch)).toBe(0);
  }
  expect(r.dequant.length).toBe(DTYPES.length);
  for (const q of r.qmatmul) {
    const errs = q.kernels.map((k: { kernel: string; precision: string; maxError: number; tolerance: number }) =>
      `${k.kernel}/${k.precision} ${k.maxError.toExponential(2)} (tol ${k.tolerance.toExponential(2)})`);
    console.log(`qmatmul ${q.format} k=${q.k}: ${errs.join(', ')}, embed mismatches ${q.embedMismatches}`);
    expect(q.passed, q.format).toBe(true);
  }
  expect(r.qmatmul.length).toBe(QFORMATS.length);
  console.log(`MNIST digit 0: predicted ${r.predicted}, label ${r.label}`);
  expect(r.predicted).toBe(r.label);
});

test('the model generates the native greedy ids on a default-limits device (worker API)', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async ([model, steps]) => {
    const weft = await import('/js/index.js');
    await weft.init({ limits: 'default', features: 'none' });
    const caps = await weft.capabilities();
    const m = await weft.loadModel(`${model}?t=limits`, { backend: 'webgpu', maxContext: 64, cache: false });
    const ids = [];
    for await (const c of m.generate('The capital of France is', { maxTokens: steps, temperature: 0 })) ids.push(c.token);
    const stats = await m.stats();
    await m.dispose();
    // A later init() with device options reaches the running worker.
    let bad = null;
    try {
      await weft.init({ limits: 'huge' as 'default' });
    } catch (e) {
      bad = (e as { code: string }).code;
    }
    await weft.init({ limits: 'adapter', features: 'all' });
    const adapterCaps = await weft.capabilities();
    return { limits: caps.limits, shaderF16: caps.shaderF16, ids, tps: stats.tokensPerSecond, bad, adapterLimits: adapterCaps.limits };
  }, [MODEL, NATIVE_IDS.length] as const);
  console.log(`ids ${r.ids.join(',')}, decode ${r.tps.toFixed(2)} tok/s`);
  expect(r.limits.maxStorageBufferBindingSize).toBe(DEFAULTS.maxStorageBufferBindingSize);
  expect(r.limits.maxComputeWorkgroupStorageSize).toBe(DEFAULTS.maxComputeWorkgroupStorageSize);
  expect(r.shaderF16).toBe(false);
  expect(r.ids).toEqual(NATIVE_IDS);
  expect(r.bad).toBe('INVALID_ARGUMENT');
  // Back on the adapter's maxima (at least the defaults).
  expect(r.adapterLimits.maxBufferSize).toBeGreaterThanOrEqual(DEFAULTS.maxBufferSize);
  console.log(`adapter limits: ${JSON.stringify(r.adapterLimits)}`);
});

test('an unknown limits option is an INVALID_ARGUMENT error', async ({ page }) => {
  await page.goto('/harness.html');
  const r = await page.evaluate(async () => {
    const weft = await import('/js/direct.js');
    try {
      await weft.init({ limits: 'huge' as 'default' });
      return null;
    } catch (e) {
      return { code: (e as { code: string }).code, message: (e as Error).message };
    }
  });
  expect(r?.code).toBe('INVALID_ARGUMENT');
  expect(r?.message).toContain("limits 'huge'");
});
