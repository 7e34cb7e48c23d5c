import { test, expect } from '@playwright/test';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { VITE_APP_PORT } from '../../playwright.config';

// weft as users consume it: scripts/build-vite-consumer.sh packs the npm package, installs the
// tarball into the Vite app in tests/vite-consumer, and builds it. The built app (worker and wasm
// bundled by Vite) is served here with the model mounted, and must generate tokens.

const ORIGIN = `http://127.0.0.1:${VITE_APP_PORT}`;
let server: ChildProcess | null = null;

test.beforeAll(async () => {
  test.setTimeout(600_000);
  execFileSync('bash', ['scripts/build-vite-consumer.sh'], { stdio: 'inherit', timeout: 540_000 });
  server = spawn(
    'node',
    ['scripts/serve.mjs', '--port', String(VITE_APP_PORT), '--root', 'tests/vite-consumer/dist', '--mount', '/models=models'],
    { stdio: 'ignore' },
  );
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${ORIGIN}/index.html`)).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 100) throw new Error(`the consumer app's server did not start on ${ORIGIN}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

test.afterAll(() => {
  server?.kill();
});

test('a Vite app that installed the packed tarball generates tokens', async ({ page }) => {
  test.setTimeout(300_000);
  const errors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${ORIGIN}/`);
  await expect(page.locator('#out')).toHaveAttribute('data-state', /done|error/, { timeout: 240_000 });
  const out = JSON.parse((await page.locator('#out').textContent()) ?? '{}');
  console.log(`consumer app: ${JSON.stringify(out)}`);
  expect(out.code).toBeUndefined();
  // Greedy continuation of "The capital of France is" (the same ids as the api spec).
  expect(out.tokens.slice(0, 2)).toEqual([7042, 30]);
  expect(out.tokens).toHaveLength(3);
  expect(out.text.length).toBeGreaterThan(0);
  expect(out.generatedTokens).toBe(3);
  // `auto` on this machine's software adapter: the CPU backend, from the bundled module.
  expect(out.backend).toBe('cpu');
  expect(out.weightBytes).toBeGreaterThan(0);

  // The bundled app fetched its wasm and worker from Vite's hashed asset names, and the model by Range.
  const requests: { path: string; range: string | null; status: number }[] = await (
    await fetch(`${ORIGIN}/__requests`)
  ).json();
  expect(requests.some((r) => /^\/assets\/weft_bg-[\w-]+\.wasm$/.test(r.path) && r.status === 200)).toBe(true);
  expect(requests.some((r) => /^\/assets\/worker-[\w-]+\.js$/.test(r.path) && r.status === 200)).toBe(true);
  const ranged = requests.filter((r) => r.path.endsWith('.gguf') && r.range !== null);
  expect(ranged.length).toBeGreaterThan(1);
  expect(ranged.every((r) => r.status === 206)).toBe(true);
  expect(errors).toEqual([]);
});
