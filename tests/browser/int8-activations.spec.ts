import { test, expect } from '@playwright/test';

// `loadModel(url, { activations: 'int8' })`: the decode step's GEMVs quantize their inputs to 8
// bits per 32 values and take dot4I8Packed products. Those GEMVs are a hardware GPU's kernels,
// so SwiftShader runs them here under init's `kernels: 'gpu'` (as WEFT_GPU_PATHS=1 does
// natively). The tiny Qwen2 (widths multiples of 32, 8-bit weights) keeps its greedy ids under
// 8-bit activations natively (tests/kv_cache.rs); here it must too, with `stats().activations`
// read from the kernels the step runs.

const MODEL = '/fixtures/tiny/qwen2-tiny-q8.safetensors';

test('8-bit activations run the DP4 GEMVs in the page and keep the greedy ids', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    const code = async (p: Promise<unknown>) => {
      try {
        await p;
        return 'ok';
      } catch (e) {
        const err = e as { code?: string; message?: string };
        return `${err.code}: ${err.message}`;
      }
    };
    const run = async (activations: 'f32' | 'int8') => {
      const m = await weft.loadModel(`${model}?t=${activations}`, { backend: 'webgpu', maxContext: 64, activations });
      const ids = [];
      for await (const c of m.generate('hello world, the', { maxTokens: 12 })) if (c.token >= 0) ids.push(c.token);
      const stats = (await m.stats()) as { activations: string };
      await m.dispose();
      return { ids, activations: stats.activations };
    };
    await weft.init({ kernels: 'gpu' });
    const capsGpu = (await weft.capabilities()) as { int8Activations?: boolean };
    const dp4 = (navigator as unknown as { gpu: { wgslLanguageFeatures?: Set<string> } }).gpu.wgslLanguageFeatures
      ?.has('packed_4x8_integer_dot_product');
    const gpuF32 = await run('f32');
    const gpuInt8 = await run('int8');
    const badValue = await code(weft.loadModel(model, { activations: 'int4' } as never));
    const badKernels = await code(weft.init({ kernels: 'fast' } as never));
    // The adapter's own choices again: SwiftShader's decode GEMVs have no 8-bit path.
    await weft.init({ kernels: 'auto' });
    const capsSoftware = (await weft.capabilities()) as { int8Activations?: boolean };
    const software = await run('int8');
    return { dp4, capsGpu: capsGpu.int8Activations, capsSoftware: capsSoftware.int8Activations, gpuF32, gpuInt8, badValue, badKernels, software };
  }, MODEL);
  console.log(JSON.stringify(r));
  expect(r.dp4).toBe(true);
  expect(r.capsGpu).toBe(true);
  expect(r.capsSoftware).toBe(false);
  expect(r.gpuF32.activations).toBe('f32');
  expect(r.gpuInt8.activations).toBe('int8');
  expect(r.gpuF32.ids.length).toBe(12);
  expect(r.gpuInt8.ids).toEqual(r.gpuF32.ids);
  expect(r.badValue).toMatch(/^INVALID_ARGUMENT: option 'activations' is 'int4'/);
  expect(r.badKernels).toMatch(/^INVALID_ARGUMENT: .*kernels 'fast'/);
  expect(r.software.activations).toBe('f32');
  expect(r.software.ids).toEqual(r.gpuF32.ids);
});
