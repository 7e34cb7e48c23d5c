import { test, expect } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

// The default SmolLM2 as a Hugging Face folder (scripts/make_smollm2_folder.py: `weft
// dequantize`'s F32 weights under Hugging Face names, in two shards with their index, and the
// config and tokenizer files), loaded in Chromium with `quantize: 'q4'`: each matrix quantized
// in the page as its layer arrives must be, bit for bit, what `weft quantize` wrote for the same
// folder (FNV-1a 64 of packed words, scales and zero points, per tensor); the model then gives
// the greedy ids and logits of that file loaded as it is. The server's log shows the layers
// read with Range requests over both shards, and wasm memory stays near the largest layer.
//
// The GPU quantizer itself: a tiny folder quantized with `quantizeOn: 'gpu'` on SwiftShader
// gives the digests and the greedy ids of the CPU quantizer's load, on either backend.

const DIR = 'tests/fixtures/generated';
const FOLDER = '/fixtures/generated/smollm2-f32/';
const REFERENCE = '/fixtures/generated/smollm2-q4.safetensors';
const SHARDS = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
// The same weights and kernels: only the order of float sums may differ between two loads.
const LOGIT_TOLERANCE = 1e-5;

/** 64-bit FNV-1a over `parts` in order, as 16 hex digits (src/loader/cache.rs). */
function fnv1a64(parts: Uint8Array[]): string {
  // The 64-bit state in two 32-bit halves; the prime is 2^40 + 0x1b3.
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (const bytes of parts) {
    for (let i = 0; i < bytes.length; i++) {
      lo ^= bytes[i];
      const low = (lo >>> 0) * 0x1b3;
      const carry = Math.floor(low / 0x100000000);
      hi = (Math.imul(hi, 0x1b3) + carry + (lo << 8)) >>> 0;
      lo = low >>> 0;
    }
  }
  return hi.toString(16).padStart(8, '0') + (lo >>> 0).toString(16).padStart(8, '0');
}

/** Per quantized matrix of a weft file: the digest of its .weft_q, .weft_scale, .weft_zero bytes. */
function weftDigests(path: string): Map<string, string> {
  const file = readFileSync(path);
  const headerLen = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + headerLen).toString('utf8'));
  const bytes = (name: string) => {
    const [start, end] = header[name].data_offsets;
    return file.subarray(8 + headerLen + start, 8 + headerLen + end);
  };
  const out = new Map<string, string>();
  for (const name of Object.keys(header)) {
    if (!name.endsWith('.weft_q')) continue;
    const base = name.slice(0, -'.weft_q'.length);
    const parts = [bytes(name), bytes(`${base}.weft_scale`)];
    if (header[`${base}.weft_zero`]) parts.push(bytes(`${base}.weft_zero`));
    out.set(base, fnv1a64(parts));
  }
  return out;
}

test.describe('SmolLM2 as an F32 folder', () => {
  test.beforeAll(() => {
    // Writes the folder and the command line's quantization of it once (about 1 GB, ignored).
    execFileSync('python3', ['scripts/make_smollm2_folder.py', '--out', DIR], { stdio: 'inherit', timeout: 900_000 });
  });

  test('an HF folder quantized at load equals weft quantize, bit for bit, streaming both shards by layer', async ({ page }) => {
    test.setTimeout(900_000);
    page.on('console', (m) => m.type() === 'error' && console.log(`page: ${m.text()}`));
    await page.goto('/harness.html');
    await page.request.delete('/__requests');
    const result = await page.evaluate(async ({ folder, reference }) => {
      const weft = await import('/js/index.js');
      await weft.init({ backend: 'webgpu' });
      const ids = [504, 3575, 282, 4649, 314]; // "The capital of France is"
      const run = async (url: string, options: object) => {
        let peakProgress = 0;
        const onProgress = (p: { wasmMemoryBytes: number }) => (peakProgress = Math.max(peakProgress, p.wasmMemoryBytes));
        const m = await weft.loadModel(url, { maxContext: 64, cache: false, onProgress, ...options });
        const stats = await m.stats();
        const logits = (await m.checkpoints(ids)).find((c: { name: string }) => c.name === 'logits').data as Float32Array;
        const greedy = [];
        for await (const chunk of m.generate(ids, { maxTokens: 8, temperature: 0 })) greedy.push(chunk.token);
        await m.dispose();
        return { load: stats.load, logits, greedy, peakProgress };
      };
      const loaded = await run(folder, { quantize: 'q4' });
      const requests = await (await fetch('/__requests')).json();
      const cli = await run(reference, {});
      let maxErr = 0;
      let scale = 0;
      for (let i = 0; i < cli.logits.length; i++) {
        maxErr = Math.max(maxErr, Math.abs(loaded.logits[i] - cli.logits[i]));
        scale = Math.max(scale, Math.abs(cli.logits[i]));
      }
      return {
        quantized: loaded.load.quantized as { name: string; format: string; digest: string }[],
        peak: loaded.load.peakWasmMemoryBytes as number,
        peakProgress: loaded.peakProgress,
        fetched: loaded.load.bytesFetched as number,
        requests: requests as { method: string; path: string; range: string | null; status: number }[],
        greedy: loaded.greedy,
        cliGreedy: cli.greedy,
        logitsLen: [loaded.logits.length, cli.logits.length],
        rel: maxErr / scale,
      };
    }, { folder: FOLDER, reference: REFERENCE });

    // Bit for bit: every matrix of the command line's file, quantized the same in the page.
    const expected = weftDigests(`${DIR}/smollm2-q4.safetensors`);
    const formats = new Map<string, number>();
    for (const q of result.quantized) formats.set(q.format, (formats.get(q.format) ?? 0) + 1);
    console.log(`quantized in the page: ${result.quantized.length} matrices (${[...formats].map(([f, n]) => `${n} ${f}`).join(', ')})`);
    const differ = result.quantized.filter((q) => expected.get(q.name) !== q.digest).map((q) => q.name);
    console.log(`digests equal to weft quantize's: ${result.quantized.length - differ.length} of ${expected.size}`);
    expect(differ).toEqual([]);
    expect(result.quantized.map((q) => q.name).sort()).toEqual([...expected.keys()].sort());
    expect(result.quantized.find((q) => q.name === 'model.embed_tokens.weight')?.format).toBe('q8_g32_asym');

    console.log(`greedy ${result.greedy.join(',')} (weft quantize's file: ${result.cliGreedy.join(',')}); logits relative difference ${result.rel.toExponential(2)}`);
    expect(result.greedy).toEqual(result.cliGreedy);
    expect(result.logitsLen[0]).toBe(result.logitsLen[1]);
    expect(result.rel).toBeLessThanOrEqual(LOGIT_TOLERANCE);

    // Range requests over both shards: a header read, then one request per layer group.
    const perShard = SHARDS.map((shard) => result.requests.filter((r) => r.method === 'GET' && r.path === `${FOLDER}${shard}`));
    for (const [i, gets] of perShard.entries()) {
      console.log(`${SHARDS[i]}: ${gets.length} GETs: ${gets.map((g) => g.range).join(' ')}`);
      expect(gets.every((g) => g.status === 206 && g.range !== null)).toBe(true);
    }
    // 30 layers, the embedding and the final norm, in two halves, plus each shard's header.
    expect(perShard.map((g) => g.length)).toEqual([17, 17]);

    // The largest layer group is the F32 embedding (49152 x 576 x 4 bytes).
    const largest = 49152 * 576 * 4;
    console.log(`peak wasm memory ${(result.peak / 1e6).toFixed(1)} MB (progress events ${(result.peakProgress / 1e6).toFixed(1)} MB); largest layer ${(largest / 1e6).toFixed(1)} MB; file bytes fetched ${(result.fetched / 1e6).toFixed(1)} MB`);
    expect(result.peak).toBeLessThan(3 * largest);
  });
});

test('the GPU quantizer gives the CPU quantizer\'s bytes and greedy ids in the page', async ({ page }) => {
  test.setTimeout(300_000);
  page.on('console', (m) => m.type() === 'error' && console.log(`page: ${m.text()}`));
  await page.goto('/harness.html');
  const r = await page.evaluate(async () => {
    const weft = await import('/js/index.js');
    await weft.init({ backend: 'webgpu' });
    const folder = '/fixtures/llama3-tiny/';
    const reference = await (await fetch(`${folder}reference.json`)).json();
    const run = async (options: object) => {
      const m = await weft.loadModel(folder, { quantize: 'q8', quantizeDigests: true, maxContext: 64, cache: false, ...options });
      const ids: number[] = [];
      for await (const c of m.generate(reference.prompt_ids, { maxTokens: reference.greedy.length, temperature: 0 })) ids.push(c.token);
      const s = await m.stats();
      await m.dispose();
      return { ids, backend: s.backend, quantized: s.load.quantized as { name: string; format: string; digest?: string }[] };
    };
    return {
      gpu: await run({ backend: 'webgpu', quantizeOn: 'gpu' }),
      cpuQuantizer: await run({ backend: 'webgpu', quantizeOn: 'cpu' }),
      cpuBackend: await run({ backend: 'cpu' }),
    };
  });
  const digests = (q: { name: string; format: string; digest?: string }[]) =>
    q.map((t) => `${t.name} ${t.format} ${t.digest}`).sort();
  console.log(`GPU quantizer: ${r.gpu.quantized.length} matrices, ids ${r.gpu.ids.join(',')}; CPU quantizer: ids ${r.cpuQuantizer.ids.join(',')}; CPU backend: ids ${r.cpuBackend.ids.join(',')}`);
  expect([r.gpu.backend, r.cpuQuantizer.backend, r.cpuBackend.backend]).toEqual(['webgpu', 'webgpu', 'cpu']);
  // 7 matrices in each of 2 layers, the embedding and the untied head, every one with a digest.
  expect(r.gpu.quantized.length).toBe(16);
  expect(r.gpu.quantized.every((q) => /^[0-9a-f]{16}$/.test(q.digest ?? ''))).toBe(true);
  expect(digests(r.gpu.quantized)).toEqual(digests(r.cpuQuantizer.quantized));
  expect(digests(r.cpuBackend.quantized)).toEqual(digests(r.cpuQuantizer.quantized));
  expect(r.gpu.ids).toEqual(r.cpuQuantizer.ids);
  expect(r.cpuBackend.ids).toEqual(r.cpuQuantizer.ids);
});
