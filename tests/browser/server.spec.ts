import { test, expect } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { NO_RANGE_PORT } from '../../playwright.config';

// The static server must honour Range: the model loader streams layers with it.
const FILE = 'www/pkg/weft_bg.wasm';

test('a Range request returns 206 with exactly the requested bytes', async ({ request }) => {
  const whole = readFileSync(FILE);
  const res = await request.get('/pkg/weft_bg.wasm', { headers: { Range: 'bytes=100-1123' } });
  expect(res.status()).toBe(206);
  expect(res.headers()['content-range']).toBe(`bytes 100-1123/${whole.length}`);
  const body = await res.body();
  expect(body.length).toBe(1024);
  expect(Buffer.compare(body, whole.subarray(100, 1124))).toBe(0);

  const tail = await request.get('/pkg/weft_bg.wasm', { headers: { Range: 'bytes=-16' } });
  expect(tail.status()).toBe(206);
  expect(Buffer.compare(await tail.body(), whole.subarray(whole.length - 16))).toBe(0);

  const beyond = await request.get('/pkg/weft_bg.wasm', {
    headers: { Range: `bytes=${whole.length}-` },
  });
  expect(beyond.status()).toBe(416);
  expect(beyond.headers()['content-range']).toBe(`bytes */${whole.length}`);
});

test('the no-range server answers 200 with the whole file', async ({ request }) => {
  const whole = readFileSync(FILE);
  const res = await request.get(`http://127.0.0.1:${NO_RANGE_PORT}/pkg/weft_bg.wasm`, {
    headers: { Range: 'bytes=100-1123' },
  });
  expect(res.status()).toBe(200);
  expect(res.headers()['content-range']).toBeUndefined();
  expect(Buffer.compare(await res.body(), whole)).toBe(0);
});

test('the server logs what it served', async ({ request }) => {
  await request.delete('/__requests');
  await request.get('/harness.html', { headers: { Range: 'bytes=0-9' } });
  const log = await (await request.get('/__requests')).json();
  expect(log).toEqual([{ method: 'GET', path: '/harness.html', range: 'bytes=0-9', status: 206 }]);
});

test('paths outside the root are refused', async ({ request }) => {
  const res = await request.get('/..%2F..%2FCargo.toml');
  expect([400, 404]).toContain(res.status());
});
