import { test, expect } from '@playwright/test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

// Malformed models through the wasm build and the worker: every dimension field of a tiny valid
// llama GGUF set, one at a time, to 0, 1, 2^31, 2^32 - 1 and 2^63 (and the token list to 0 and 1
// entries). Each load resolves or rejects with a coded error of the model's (never WORKER,
// INTERNAL or uncoded), the worker survives, wasm memory stays bounded, and afterwards a valid
// model still loads and generates. The native counterpart is tests/malformed_models.rs.

const DIM = 32;
const FFN = 48;
const HEAD_DIM = 16;
const KV_DIM = 16;
const LAYERS = 2;
const VOCAB = 260;

/** The dimension keys of the GGUF model with their valid values. */
const DIMS: [string, bigint][] = [
  ['llama.block_count', BigInt(LAYERS)],
  ['llama.embedding_length', BigInt(DIM)],
  ['llama.attention.head_count', 2n],
  ['llama.attention.head_count_kv', 1n],
  ['llama.attention.key_length', BigInt(HEAD_DIM)],
  ['llama.feed_forward_length', BigInt(FFN)],
  ['llama.vocab_size', BigInt(VOCAB)],
  ['llama.context_length', 128n],
  ['llama.rope.dimension_count', BigInt(HEAD_DIM)],
];
const VALUES = [0n, 1n, 1n << 31n, (1n << 32n) - 1n, 1n << 63n];

/** Codes a malformed model may give: the file's fault, or one the device cannot hold. */
const MODEL_CODES = ['FORMAT', 'MODEL', 'UNSUPPORTED', 'GPU_OOM', 'GPU_LIMIT', 'TOKENIZER'];

class Writer {
  parts: Buffer[] = [];
  length = 0;
  raw(b: Buffer) {
    this.parts.push(b);
    this.length += b.length;
    return this;
  }
  u32(v: number) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    return this.raw(b);
  }
  u64(v: bigint) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(v);
    return this.raw(b);
  }
  string(s: string) {
    const b = Buffer.from(s, 'utf8');
    return this.u64(BigInt(b.length)).raw(b);
  }
  key(k: string, type: number) {
    return this.string(k).u32(type);
  }
  bytes() {
    return Buffer.concat(this.parts);
  }
}

const U32 = 4;
const F32 = 6;
const STRING = 8;
const ARRAY = 9;
const U64 = 10;

/** GPT-2's printable stand-in for byte `b`. */
function byteChar(b: number): string {
  const printable = (x: number) => (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae;
  if (printable(b)) return String.fromCharCode(b);
  let index = 0;
  for (let x = 0; x < b; x++) if (!printable(x)) index++;
  return String.fromCharCode(256 + index);
}

/** A complete byte-level llama GGUF v3 (F32 weights) with `dims` as its dimension metadata and
 * `tokens` as its vocabulary; the tensors always have the valid shapes. */
function gguf(dims: [string, bigint][], tokens: string[]): Buffer {
  const tensors: [string, number[]][] = [
    ['token_embd.weight', [DIM, VOCAB]],
    ['output_norm.weight', [DIM]],
  ];
  for (let i = 0; i < LAYERS; i++) {
    for (const [name, shape] of [
      ['attn_norm.weight', [DIM]],
      ['attn_q.weight', [DIM, DIM]],
      ['attn_k.weight', [DIM, KV_DIM]],
      ['attn_v.weight', [DIM, KV_DIM]],
      ['attn_output.weight', [DIM, DIM]],
      ['ffn_norm.weight', [DIM]],
      ['ffn_gate.weight', [DIM, FFN]],
      ['ffn_up.weight', [DIM, FFN]],
      ['ffn_down.weight', [FFN, DIM]],
    ] as [string, number[]][]) {
      tensors.push([`blk.${i}.${name}`, shape]);
    }
  }
  const w = new Writer();
  w.raw(Buffer.from('GGUF')).u32(3).u64(BigInt(tensors.length)).u64(BigInt(6 + dims.length));
  w.key('general.architecture', STRING).string('llama');
  const eps = Buffer.alloc(4);
  eps.writeFloatLE(1e-5);
  w.key('llama.attention.layer_norm_rms_epsilon', F32).raw(eps);
  w.key('tokenizer.ggml.model', STRING).string('gpt2');
  w.key('tokenizer.ggml.pre', STRING).string('smollm');
  w.key('tokenizer.ggml.tokens', ARRAY).u32(STRING).u64(BigInt(tokens.length));
  for (const t of tokens) w.string(t);
  w.key('general.alignment', U32).u32(32);
  for (const [key, value] of dims) {
    if (value <= 0xffffffffn) w.key(key, U32).u32(Number(value));
    else w.key(key, U64).u64(value);
  }
  let offset = 0;
  for (const [name, shape] of tensors) {
    w.string(name).u32(shape.length);
    for (const d of shape) w.u64(BigInt(d));
    w.u32(0).u64(BigInt(offset)); // type 0: F32
    offset += Math.ceil((shape.reduce((a, b) => a * b, 1) * 4) / 32) * 32;
  }
  const pad = (32 - (w.length % 32)) % 32;
  w.raw(Buffer.alloc(pad));
  const data = Buffer.alloc(offset);
  for (let i = 0; i < offset / 4; i++) data.writeFloatLE(((i % 7) - 3) * 0.01, i * 4);
  return Buffer.concat([w.bytes(), data]);
}

const TOKENS = [...Array.from({ length: 256 }, (_, b) => byteChar(b)), '<|im_start|>', '<|im_end|>', 'ab', 'abc'];

let dir = '';
let cases: { name: string; url: string }[] = [];
let validUrl = '';

test.beforeAll(() => {
  // Served by the test server under /fixtures (tests/fixtures); removed afterwards.
  mkdirSync('tests/fixtures', { recursive: true });
  dir = mkdtempSync(path.join('tests/fixtures', 'malformed-tmp-'));
  const base = `/fixtures/${path.basename(dir)}`;
  const write = (file: string, bytes: Buffer) => {
    writeFileSync(path.join(dir, file), bytes);
    return `${base}/${file}`;
  };
  validUrl = write('valid.gguf', gguf(DIMS, TOKENS));
  cases = [];
  DIMS.forEach(([key], i) => {
    for (const value of VALUES) {
      const dims = DIMS.map(([k, v], j): [string, bigint] => [k, j === i ? value : v]);
      cases.push({ name: `${key} = ${value}`, url: write(`${key}-${value}.gguf`, gguf(dims, TOKENS)) });
    }
  });
  cases.push({ name: 'tokenizer.ggml.tokens: 0 entries', url: write('tokens-0.gguf', gguf(DIMS, [])) });
  cases.push({ name: 'tokenizer.ggml.tokens: 1 entry', url: write('tokens-1.gguf', gguf(DIMS, ['a'])) });
});

test.afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('malformed dimensions are coded errors in the worker, which survives them', async ({ page }) => {
  test.setTimeout(180_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(
    async ({ cases, validUrl }) => {
      const weft = await import('/js/index.js');
      await weft.init();
      const results: { name: string; code: string; message: string }[] = [];
      let peak = await weft.wasmMemoryBytes();
      for (const c of cases) {
        try {
          const m = await weft.loadModel(c.url, { backend: 'webgpu', cache: false, maxContext: 16 });
          await m.dispose();
          results.push({ name: c.name, code: 'ok', message: '' });
        } catch (e) {
          const err = e as { code?: string; message?: string };
          results.push({ name: c.name, code: String(err.code), message: String(err.message).slice(0, 200) });
        }
        peak = Math.max(peak, await weft.wasmMemoryBytes());
      }
      const m = await weft.loadModel(validUrl, { backend: 'webgpu', cache: false, maxContext: 16 });
      const ids = [];
      for await (const chunk of m.generate('ab', { maxTokens: 3, temperature: 0 })) ids.push(chunk.token);
      await m.dispose();
      return { results, peak, ids, after: await weft.wasmMemoryBytes() };
    },
    { cases, validUrl },
  );
  for (const c of r.results) console.log(`${c.name}: ${c.code}${c.message ? ` (${c.message})` : ''}`);
  console.log(`wasm memory: peak ${r.peak} bytes, after ${r.after}; valid model generated ${JSON.stringify(r.ids)}`);
  expect(r.results.length).toBe(DIMS.length * VALUES.length + 2);
  for (const c of r.results) {
    expect([...MODEL_CODES, 'ok'], `${c.name}: ${c.code} ${c.message}`).toContain(c.code);
  }
  // As natively: one KV head is the model's own value and a context of 1 a (useless) valid model.
  const loaded = r.results.filter((c) => c.code === 'ok').map((c) => c.name);
  expect(loaded).toEqual(['llama.attention.head_count_kv = 1', 'llama.context_length = 1']);
  expect(r.ids.length).toBe(3);
  expect(r.peak).toBeLessThan(256 * 2 ** 20);
});
