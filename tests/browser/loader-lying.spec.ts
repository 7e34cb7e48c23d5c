import { test, expect, type Page } from '@playwright/test';
import { statSync } from 'node:fs';

// A lying server (scripts/serve.mjs faults) against the browser loader, on a tiny weft file:
// a file that changes between HEAD and GET (same size, other size), versions mixed across
// ranges, a weak ETag only, no validator, a 200 without Content-Length, bodies longer or
// shorter than their Content-Length. Each is either loaded cleanly from one version or a
// coded error; a model is never built from bytes of two versions. The file is made by
// `weft quantize tests/fixtures/qwen2-tiny tests/fixtures/tiny/qwen2-tiny-q8.safetensors --bits 8 --group 32`.

const FILE = 'tests/fixtures/tiny/qwen2-tiny-q8.safetensors';
const MODEL = '/fixtures/tiny/qwen2-tiny-q8.safetensors';
const MODEL_BYTES = statSync(FILE).size;

type Entry = { method: string; query?: string; status: number; version?: string; range: string | null };

async function served(page: Page, token: string): Promise<Entry[]> {
  const all: (Entry & { path: string })[] = await (await page.request.get('/__requests')).json();
  return all.filter((e) => e.path === MODEL && new URLSearchParams(e.query ?? '').get('t') === token);
}

/** The versions served from the last HEAD on: the requests the final load attempt used. */
function lastAttempt(log: Entry[]): Entry[] {
  const head = log.map((e) => e.method).lastIndexOf('HEAD');
  return log.slice(head);
}

type Loaded =
  | { ok: true; ids: number[]; stats: { load: Record<string, unknown> } }
  | { ok: false; code: string; message: string };

async function load(page: Page, faults: string, token: string, options: Record<string, unknown> = {}): Promise<Loaded> {
  return page.evaluate(
    async ({ url, options }) => {
      const weft = await import('/js/direct.js');
      try {
        const m = await weft.loadModel(url, { backend: 'webgpu', maxContext: 64, backoffMs: 10, retries: 1, ...options });
        const ids = [];
        for await (const c of m.generate('hello world', { maxTokens: 4 })) ids.push(c.token);
        const stats = await m.stats();
        await m.dispose();
        return { ok: true as const, ids, stats };
      } catch (e) {
        const err = e as { code: string; message: string };
        return { ok: false as const, code: err.code, message: err.message };
      }
    },
    { url: `${MODEL}?t=${token}${faults ? `&${faults}` : ''}`, options },
  );
}

test('a lying server: each fault is a clean load of one version or a coded error', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  await page.evaluate(async () => (await import('/js/direct.js')).clearCache());
  const results: Record<string, Loaded> = {};
  const logs: Record<string, Entry[]> = {};
  const cases: [string, string, Record<string, unknown>?][] = [
    ['honest', ''],
    ['changed-same-size', 'change=1'],
    ['changed-other-size', 'change=1&grow=1'],
    ['mixed', 'alternate=1'],
    ['weak-etag', 'validator=weak'],
    ['last-modified-only', 'validator=lm'],
    ['no-validator', 'validator=none'],
    ['no-validator-changed', 'validator=none&change=1'],
    ['no-validator-grown', 'validator=none&change=1&grow=1'],
    // The stream breaks, and its retry is the other version (every byte different).
    ['no-validator-restart-mixed', 'validator=none&alternate=1&scramble=1&drop=100000'],
    ['no-length-strong', 'norange=1&nolength=1'],
    ['no-length-no-validator', 'norange=1&nolength=1&validator=none'],
    ['long-body', 'longbody=1000'],
    ['short-body', 'shortbody=1000'],
  ];
  for (const [name, faults, options] of cases) {
    results[name] = await load(page, faults, name, { cache: true, ...options });
    logs[name] = await served(page, name);
    const r = results[name];
    console.log(
      `${name}: ${r.ok ? `ok ids ${r.ids} stats ${JSON.stringify(r.stats.load)}` : `${r.code}: ${r.message}`}\n` +
        logs[name].map((e) => `    ${e.method} ${e.range ?? '(whole)'} -> ${e.status} ${e.version ?? ''}`).join('\n'),
    );
  }
  const ok = (name: string) => {
    const r = results[name];
    expect(r.ok, `${name}: ${JSON.stringify(r)}`).toBe(true);
    return r as Extract<Loaded, { ok: true }>;
  };
  const failed = (name: string, code: string) => {
    const r = results[name];
    expect(r.ok, `${name} must fail`).toBe(false);
    if (!r.ok) expect(r.code, `${name}: ${r.message}`).toBe(code);
  };
  /** Every byte the successful attempt used came from one version. */
  const oneVersion = (name: string) => {
    const versions = new Set(lastAttempt(logs[name]).filter((e) => e.method === 'GET').map((e) => e.version));
    expect(versions.size, `${name}: ${[...versions]}`).toBe(1);
    return [...versions][0];
  };

  const honest = ok('honest');
  expect(honest.stats.load.warnings).toEqual([]);
  expect(honest.stats.load.streamedWholeBody).toBe(false);

  // The file changed after the HEAD: detected on the first range, loaded again from version B.
  for (const name of ['changed-same-size', 'changed-other-size']) {
    const r = ok(name);
    expect(r.stats.load.reloadedAfterChange, name).toBe(true);
    expect(oneVersion(name), name).toBe('b');
    expect(logs[name].filter((e) => e.method === 'HEAD')).toHaveLength(2);
  }
  expect(ok('changed-other-size').stats.load.fileBytes).toBe(MODEL_BYTES + 4096);
  // Versions alternating request by request can never be loaded.
  failed('mixed', 'LOAD_CHANGED');

  // No strong validator: one streamed GET, nothing cached, a coded warning.
  for (const name of ['weak-etag', 'last-modified-only', 'no-validator', 'no-validator-changed']) {
    const r = ok(name);
    expect(r.stats.load.warnings, name).toEqual(['NO_STRONG_VALIDATOR']);
    expect(r.stats.load.streamedWholeBody, name).toBe(true);
    expect(r.stats.load.cacheHits, name).toBe(0);
    expect(logs[name].filter((e) => e.method === 'GET'), name).toHaveLength(1);
  }
  expect(ok('weak-etag').ids).toEqual(honest.ids);
  expect(oneVersion('no-validator-changed')).toBe('b');
  // The streamed body is longer than the HEAD said: loaded again, all from version B.
  expect(ok('no-validator-grown').stats.load.reloadedAfterChange).toBe(true);
  expect(oneVersion('no-validator-grown')).toBe('b');

  // A restarted stream must repeat the bytes the broken one delivered: here it cannot (unless
  // the break came before any byte reached the reader), so the load starts again. Either way
  // the model is version A's alone: version B's bytes would not even parse.
  const restarted = ok('no-validator-restart-mixed');
  expect(restarted.stats.load.reloadedAfterChange || restarted.stats.load.retries > 0).toBe(true);
  expect(restarted.ids).toEqual(honest.ids);

  // A 200 without Content-Length: used only when its strong ETag is the HEAD's.
  expect(ok('no-length-strong').ids).toEqual(honest.ids);
  failed('no-length-no-validator', 'LOAD_RANGE');

  // Bytes past Content-Length are never read; a body cut short is retried, then LOAD_NETWORK.
  expect(ok('long-body').ids).toEqual(honest.ids);
  failed('short-body', 'LOAD_NETWORK');
});

test('a warm load after the file changed uses nothing cached from the old version', async ({ page }) => {
  test.setTimeout(120_000);
  await page.goto('/harness.html');
  // How many requests a cold load makes.
  const probe = await load(page, '', 'warm-probe');
  expect(probe.ok, JSON.stringify(probe)).toBe(true);
  const n = (await served(page, 'warm-probe')).length;
  // The same URL: its first n requests (one cold load, which caches every range) see version
  // A, everything after version B, with its own ETag.
  const faults = `change=${n}`;
  const cold = await load(page, faults, 'warm-change');
  expect(cold.ok, JSON.stringify(cold)).toBe(true);
  const coldLog = await served(page, 'warm-change');
  expect(coldLog).toHaveLength(n);
  expect(new Set(coldLog.map((e) => e.version))).toEqual(new Set(['a']));
  const warm = await load(page, faults, 'warm-change');
  expect(warm.ok, JSON.stringify(warm)).toBe(true);
  if (!warm.ok) return;
  const warmLog = (await served(page, 'warm-change')).slice(n);
  console.log(`after the change: ${JSON.stringify(warm.stats.load)}\n` + warmLog.map((e) => `    ${e.method} ${e.range} -> ${e.status} ${e.version}`).join('\n'));
  expect(warm.stats.load.cacheHits).toBe(0);
  expect(warmLog.filter((e) => e.method === 'GET').length).toBe(n - 1);
  expect(new Set(warmLog.map((e) => e.version))).toEqual(new Set(['b']));
});
