import { test, expect, type Page } from '@playwright/test';
import { statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

// Loading over HTTP in the browser: one request per layer when cold, no model bytes when warm,
// memory near the largest layer, and the faults a real server or network produces.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const MODEL_BYTES = statSync(`models/SmolLM2-135M-Instruct.Q4_1.gguf`).size;
// The embedding (Q8_0, 49152 x 576): the largest group the loader reads at once.
const LARGEST_GROUP = 30_081_024;
// Where the tensor data (the embedding) starts; reads before it are the header's.
const EMBEDDING_START = 1_785_664;
// Greedy continuation of "The capital of France is" from the native CLI.
const NATIVE_IDS = [7042, 30, 198, 198, 504];

type Entry = { method: string; path: string; query?: string; range: string | null; status: number; dropped?: number };

async function requests(page: Page, token: string): Promise<Entry[]> {
  const all: Entry[] = await (await page.request.get('/__requests')).json();
  return all.filter((e) => e.path === MODEL && new URLSearchParams(e.query ?? '').get('t') === token);
}

function describe(entries: Entry[]): string {
  return entries.map((e) => `  ${e.method} ${e.range ?? '(whole file)'} -> ${e.status}${e.dropped ? ` dropped after ${e.dropped} bytes` : ''}`).join('\n');
}

/** Loads in the page through the in-thread API; resolves to stats, greedy ids, or the error. */
async function load(page: Page, url: string, options: Record<string, unknown> = {}, tokens = 0, abortAtStep = 0) {
  return page.evaluate(
    async ({ url, options, tokens, abortAtStep }) => {
      const weft = await import('/js/direct.js');
      const controller = new AbortController();
      let peakWasm = 0;
      let steps = 0;
      const started = performance.now();
      try {
        const m = await weft.loadModel(url, {
          backend: 'webgpu',
          ...options,
          maxContext: 64,
          signal: controller.signal,
          onProgress: (p: { step: number; phase: string; wasmMemoryBytes: number }) => {
            peakWasm = Math.max(peakWasm, p.wasmMemoryBytes);
            if (p.phase === 'weights') steps = p.step;
            if (abortAtStep && p.phase === 'weights' && p.step >= abortAtStep) controller.abort();
          },
        });
        const loadMs = performance.now() - started;
        const ids = [];
        if (tokens) {
          for await (const c of m.generate('The capital of France is', { maxTokens: tokens })) ids.push(c.token);
        }
        const stats = await m.stats();
        await m.dispose();
        return { ok: true as const, loadMs, ids, stats, peakWasm, steps };
      } catch (e) {
        const err = e as Record<string, unknown>;
        return {
          ok: false as const,
          steps,
          error: { code: err.code, message: err.message, url: err.url, start: err.start, end: err.end, status: err.status },
        };
      }
    },
    { url, options, tokens, abortAtStep },
  );
}

/** Resident memory of Chromium's renderer processes (the page's JS heap and wasm live there). */
function rendererRss(): number {
  try {
    const out = execFileSync('ps', ['-eo', 'rss=,args='], { encoding: 'utf8' });
    return out
      .split('\n')
      .filter((l) => l.includes('--type=renderer'))
      .map((l) => Number(l.trim().split(/\s+/)[0]) * 1024)
      .reduce((a, b) => Math.max(a, b), 0);
  } catch {
    return 0;
  }
}

const MB = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

test('cold load: one request per layer; warm load: no model bytes; memory near the largest layer', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const sampleHeap = async () => {
    const { metrics } = await cdp.send('Performance.getMetrics');
    return metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0;
  };
  const baseHeap = await sampleHeap();
  const baseRss = rendererRss();
  let peakHeap = 0;
  let peakRss = 0;
  let loading = true;
  const sampler = (async () => {
    while (loading) {
      peakHeap = Math.max(peakHeap, await sampleHeap());
      peakRss = Math.max(peakRss, rendererRss());
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const url = `${MODEL}?t=coldwarm`;
  const cold = await load(page, url, {}, 5);
  loading = false;
  await sampler;
  expect(cold.ok, JSON.stringify(cold)).toBe(true);
  if (!cold.ok) return;
  const coldLog = await requests(page, 'coldwarm');
  console.log(`cold load ${(cold.loadMs / 1000).toFixed(2)} s, ${coldLog.length} requests:\n${describe(coldLog)}`);
  console.log(
    `memory during the cold load: wasm linear memory peak ${MB(cold.peakWasm)}, JS heap peak ${MB(peakHeap)} ` +
      `(${MB(baseHeap)} before), renderer RSS peak ${MB(peakRss)} (${MB(baseRss)} before); ` +
      `model ${MB(MODEL_BYTES)}, largest group ${MB(LARGEST_GROUP)}`,
  );
  expect(cold.ids).toEqual(NATIVE_IDS);
  // A HEAD for the validator, a few header reads, then one request per group: the embedding,
  // 30 layers and the output norm.
  const gets = coldLog.filter((e) => e.method === 'GET');
  expect(coldLog.filter((e) => e.method === 'HEAD')).toHaveLength(1);
  expect(gets.every((e) => e.status === 206)).toBe(true);
  const start = (e: Entry) => Number(/bytes=(\d+)-/.exec(e.range ?? '')?.[1] ?? -1);
  const groupGets = gets.filter((e) => start(e) >= EMBEDDING_START);
  expect(groupGets).toHaveLength(1 + 30 + 1);
  expect(gets.length - groupGets.length).toBeLessThanOrEqual(3);
  expect(cold.stats.load.cacheMisses).toBe(gets.length);
  // Memory follows the largest group, not the model.
  expect(cold.peakWasm).toBeLessThan(MODEL_BYTES);
  expect(peakHeap).toBeLessThan(MODEL_BYTES);

  await page.request.delete('/__requests');
  const warm = await load(page, url, {}, 5);
  expect(warm.ok, JSON.stringify(warm)).toBe(true);
  if (!warm.ok) return;
  const warmLog = await requests(page, 'coldwarm');
  console.log(`warm load ${(warm.loadMs / 1000).toFixed(2)} s, ${warmLog.length} requests:\n${describe(warmLog)}`);
  expect(warmLog.filter((e) => e.method === 'GET')).toEqual([]);
  expect(warm.stats.load.cacheHits).toBe(gets.length);
  expect(warm.ids).toEqual(NATIVE_IDS);
});

test('a server that ignores Range: the body is streamed once, same result', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  const r = await load(page, `${MODEL}?t=norange&norange=1`, { cache: false }, 5);
  expect(r.ok, JSON.stringify(r)).toBe(true);
  if (!r.ok) return;
  const log = await requests(page, 'norange');
  console.log(`no-range load: peak wasm ${MB(r.peakWasm)}; requests:\n${describe(log)}`);
  expect(r.stats.load.streamedWholeBody).toBe(true);
  expect(log.filter((e) => e.method === 'GET')).toHaveLength(1);
  expect(r.peakWasm).toBeLessThan(MODEL_BYTES);
  expect(r.ids).toEqual(NATIVE_IDS);
});

test('a connection dropped mid-layer is retried', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  const r = await load(page, `${MODEL}?t=drop&drop=2000000`, { cache: false, backoffMs: 50 }, 3);
  expect(r.ok, JSON.stringify(r)).toBe(true);
  if (!r.ok) return;
  const log = await requests(page, 'drop');
  const dropped = log.filter((e) => e.dropped);
  console.log(`dropped: ${describe(dropped)}; retries ${r.stats.load.retries}`);
  expect(dropped).toHaveLength(1);
  expect(log.filter((e) => e.range === dropped[0].range).length).toBe(2);
  expect(r.stats.load.retries).toBeGreaterThanOrEqual(1);
  expect(r.ids).toEqual(NATIVE_IDS.slice(0, 3));
});

test('a dropped whole-body stream resumes at the bytes still needed', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  const r = await load(page, `${MODEL}?t=dropstream&norange=1&drop=40000000`, { cache: false, backoffMs: 50 }, 3);
  expect(r.ok, JSON.stringify(r)).toBe(true);
  if (!r.ok) return;
  const log = await requests(page, 'dropstream');
  console.log(`requests:\n${describe(log)}`);
  expect(log.filter((e) => e.method === 'GET')).toHaveLength(2);
  expect(r.ids).toEqual(NATIVE_IDS.slice(0, 3));
});

test('a wrong Content-Range is a LOAD_RANGE error naming URL, range and status', async ({ page }) => {
  await page.goto('/harness.html');
  const r = await load(page, `${MODEL}?t=badrange&badrange=1`, { cache: false });
  expect(r.ok).toBe(false);
  if (r.ok) return;
  console.log(`error: ${r.error.code}: ${r.error.message}`);
  expect(r.error.code).toBe('LOAD_RANGE');
  expect(r.error.status).toBe(206);
  expect(r.error.url).toContain('badrange=1');
  expect(r.error.start).toBe(0);
  expect(r.error.message).toContain('Content-Range');
});

test('503 then success is retried with backoff; 503 forever is a LOAD_HTTP error', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  const ok = await load(page, `${MODEL}?t=busy&fail503=2`, { cache: false, backoffMs: 20 }, 1);
  expect(ok.ok, JSON.stringify(ok)).toBe(true);
  if (ok.ok) {
    expect(ok.stats.load.retries).toBe(2);
    expect(ok.ids).toEqual(NATIVE_IDS.slice(0, 1));
  }
  const log = await requests(page, 'busy');
  expect(log.slice(0, 2).map((e) => e.status)).toEqual([503, 503]);
  const down = await load(page, `${MODEL}?t=down&fail503=1000`, { cache: false, retries: 2, backoffMs: 10 });
  expect(down.ok).toBe(false);
  if (down.ok) return;
  console.log(`error: ${down.error.code}: ${down.error.message}`);
  expect(down.error.code).toBe('LOAD_HTTP');
  expect(down.error.status).toBe(503);
  expect((await requests(page, 'down')).length).toBe(3);
});

test('an aborted load stops with LOAD_ABORTED; the next load fetches only what it lacks', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const url = `${MODEL}?t=resume`;
  const aborted = await load(page, url, {}, 0, 8);
  expect(aborted.ok).toBe(false);
  if (aborted.ok) return;
  expect(aborted.error.code).toBe('LOAD_ABORTED');
  const first = (await requests(page, 'resume')).filter((e) => e.method === 'GET' && e.status === 206);
  console.log(`aborted after ${aborted.steps} groups; ${first.length} ranges fetched`);
  expect(first.length).toBeGreaterThanOrEqual(8);
  expect(first.length).toBeLessThan(34);
  await page.request.delete('/__requests');
  const resumed = await load(page, url, {}, 3);
  expect(resumed.ok, JSON.stringify(resumed)).toBe(true);
  if (!resumed.ok) return;
  const second = (await requests(page, 'resume')).filter((e) => e.method === 'GET');
  console.log(`resumed: ${second.length} ranges fetched, ${resumed.stats.load.cacheHits} from the cache`);
  const firstRanges = new Set(first.map((e) => e.range));
  expect(second.filter((e) => firstRanges.has(e.range))).toEqual([]);
  expect(resumed.stats.load.cacheHits).toBe(first.length);
  expect(resumed.ids).toEqual(NATIVE_IDS.slice(0, 3));
});

test('a cached range that fails its check is fetched again, never used', async ({ page }) => {
  test.setTimeout(600_000);
  await page.goto('/harness.html');
  const url = `${MODEL}?t=corrupt`;
  const cold = await load(page, url, {}, 0);
  expect(cold.ok, JSON.stringify(cold)).toBe(true);
  // Flip one byte of one cached layer, keeping its stored length and hash.
  const tampered = await page.evaluate(async () => {
    const cache = await caches.open('weft-model-ranges-v1');
    const keys = await cache.keys();
    // A layer in the middle of the file.
    const key = keys.find((k) => k.url.includes('corrupt') && Number(/&r=(\d+)-/.exec(k.url)?.[1]) > 50_000_000)!;
    const old = await cache.match(key);
    const bytes = new Uint8Array(await old!.arrayBuffer());
    bytes[bytes.length >> 1] ^= 0x55;
    await cache.put(key, new Response(bytes, { headers: old!.headers }));
    return key.url;
  });
  await page.request.delete('/__requests');
  const warm = await load(page, url, {}, 3);
  expect(warm.ok, JSON.stringify(warm)).toBe(true);
  if (!warm.ok) return;
  const log = (await requests(page, 'corrupt')).filter((e) => e.method === 'GET');
  console.log(`tampered ${tampered}; refetched:\n${describe(log)}`);
  expect(warm.stats.load.cacheRejected).toBe(1);
  expect(log).toHaveLength(1);
  const r = /&r=(\d+)-(\d+)/.exec(tampered)!;
  expect(log[0].range).toBe(`bytes=${r[1]}-${Number(r[2]) - 1}`);
  expect(warm.ids).toEqual(NATIVE_IDS.slice(0, 3));
});
