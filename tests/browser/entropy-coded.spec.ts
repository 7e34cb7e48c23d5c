import { test, expect } from '@playwright/test';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

// An entropy-coded weft file (`weft quantize --entropy` / `weft pack`, docs/FORMAT.md) in the
// page: the wasm build decodes its rANS streams to the packed matrices at load, so the tiny
// Qwen2 in q4_g32_k gives the same greedy ids from the coded file as from the packed one, on
// WebGPU and on the CPU backend, and a damaged stream fails the load with code FORMAT. The files:
// `weft quantize tests/fixtures/qwen2-tiny tests/fixtures/tiny/qwen2-tiny-q4k.safetensors --bits 4
// --group 32 --scheme k --no-default-keep`, then `weft pack` of it to qwen2-tiny-q4k-rans (its
// embedding is coded; its small matrices are smaller packed and stay so).

const DIR = 'tests/fixtures/tiny';
const DAMAGED = 'qwen2-tiny-q4k-rans.damaged.safetensors';

test("an entropy-coded file loads the packed file's weights; a damaged stream is FORMAT", async ({ page }) => {
  test.setTimeout(300_000);
  // One byte in the middle of the embedding's coded levels flipped.
  const bytes = readFileSync(`${DIR}/qwen2-tiny-q4k-rans.safetensors`);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  expect(JSON.parse(header.__metadata__['weft.q.model.embed_tokens.weight']).coding).toBe('rans');
  const [a, b] = header['model.embed_tokens.weight.weft_q'].data_offsets;
  bytes[8 + n + Math.floor((a + b) / 2)] ^= 0x5a;
  writeFileSync(`${DIR}/${DAMAGED}`, bytes);
  try {
    await page.goto('/harness.html');
    const r = await page.evaluate(async (damaged) => {
      const weft = await import('/js/index.js');
      const run = async (file: string) => {
        try {
          const m = await weft.loadModel(`/fixtures/tiny/${file}`, { maxContext: 64 });
          const ids = [];
          for await (const c of m.generate('hello world, the', { maxTokens: 12 })) if (c.token >= 0) ids.push(c.token);
          await m.dispose();
          return { ids };
        } catch (e) {
          const err = e as { code?: string; message?: string };
          return { code: err.code, message: err.message };
        }
      };
      await weft.init({ backend: 'webgpu' });
      const gpu = { packed: await run('qwen2-tiny-q4k.safetensors'), coded: await run('qwen2-tiny-q4k-rans.safetensors'), damaged: await run(damaged) };
      await weft.init({ backend: 'cpu' });
      const cpu = { packed: await run('qwen2-tiny-q4k.safetensors'), coded: await run('qwen2-tiny-q4k-rans.safetensors'), damaged: await run(damaged) };
      return { gpu, cpu };
    }, DAMAGED);
    console.log(JSON.stringify(r));
    for (const side of [r.gpu, r.cpu]) {
      expect(side.packed.ids?.length).toBe(12);
      expect(side.coded.ids).toEqual(side.packed.ids);
      expect(side.damaged.code).toBe('FORMAT');
      expect(side.damaged.message).toMatch(/entropy-coded stream/);
    }
  } finally {
    rmSync(`${DIR}/${DAMAGED}`, { force: true });
  }
});
