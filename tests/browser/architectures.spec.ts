import { test, expect } from '@playwright/test';

// The architecture fixtures of tests/architectures.rs (scripts/make_arch_fixture.py: tiny
// random-weight models made with transformers' own config classes) loaded in Chromium through
// the JS API (Web Worker, WebGPU), each from its GGUF and from its Hugging Face folder: every
// checkpoint of a forward pass against transformers (f32), and 16 greedy ids from the fixture's
// prompt against transformers' `generate`. The folders share qwen2-tiny's tokenizer.json.

// Relative to the checkpoint's scale (max |ref|), as in tests/architectures.rs.
const TOLERANCE = 5e-5;
const FIXTURES = ['llama3-tiny', 'qwen3-tiny', 'gemma2-tiny', 'gemma3-tiny', 'phi3-tiny'];
const ROWS = FIXTURES.flatMap((name) => [
  { name, format: 'gguf', url: `/fixtures/${name}/model.gguf` },
  { name, format: 'folder', url: `/fixtures/${name}/` },
]);

for (const { name, format, url } of ROWS) {
  test(`${name} (${format}): every checkpoint matches transformers and 16 greedy ids match generate`, async ({ page }) => {
    page.on('console', (m) => m.type() === 'error' && console.log(`page: ${m.text()}`));
    await page.goto('/harness.html');
    const result = await page.evaluate(async ({ name, url }) => {
      // .npy version 1.0, little-endian f32, C order.
      const readNpy = (buf: ArrayBuffer) => {
        const bytes = new Uint8Array(buf);
        const headerLen = bytes[8] | (bytes[9] << 8);
        const header = new TextDecoder().decode(bytes.subarray(10, 10 + headerLen));
        if (!header.includes("'<f4'") || !header.includes("'fortran_order': False")) throw new Error(header);
        return new Float32Array(buf.slice(10 + headerLen));
      };
      const weft = await import('/js/index.js');
      await weft.init({ backend: 'webgpu' });
      const input = await (await fetch(`/fixtures/${name}/input.json`)).json();
      const reference = await (await fetch(`/fixtures/${name}/reference.json`)).json();
      const m = await weft.loadModel(url, { maxContext: 64, cache: false });
      const rows = [];
      for (const cp of await m.checkpoints(input.ids)) {
        const ref = readNpy(await (await fetch(`/fixtures/${name}/${cp.name}.npy`)).arrayBuffer());
        let maxErr = 0;
        let scale = 0;
        for (let i = 0; i < ref.length; i++) {
          const err = Math.abs(cp.data[i] - ref[i]);
          maxErr = Number.isNaN(err) ? NaN : Math.max(maxErr, err);
          scale = Math.max(scale, Math.abs(ref[i]));
        }
        rows.push({ name: cp.name, len: cp.data.length, refLen: ref.length, rel: maxErr / Math.max(scale, 1e-30) });
      }
      const ids = [];
      for await (const chunk of m.generate(reference.prompt_ids, { maxTokens: reference.greedy.length, temperature: 0 })) {
        if (chunk.token >= 0) ids.push(chunk.token); // -1: text held back to the end
      }
      await m.dispose();
      return { rows, expectedNames: input.checkpoints, ids, greedy: reference.greedy };
    }, { name, url });

    let firstBad: string | null = null;
    for (const r of result.rows) {
      console.log(`${name} ${format} ${r.name.padEnd(16)} relative ${r.rel.toExponential(2)}`);
      if (firstBad === null && (r.len !== r.refLen || !(r.rel <= TOLERANCE))) {
        firstBad = `${r.name}: relative error ${r.rel.toExponential(2)} > ${TOLERANCE} (${r.len} values vs ${r.refLen})`;
      }
    }
    console.log(`${name} ${format} greedy ${result.ids.join(',')}`);
    expect(result.rows.map((r) => r.name)).toEqual(result.expectedNames);
    expect(firstBad, 'first checkpoint out of tolerance').toBeNull();
    expect(result.ids).toEqual(result.greedy);
  });
}
