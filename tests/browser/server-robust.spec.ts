import { test, expect } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PORT } from '../../playwright.config';

// scripts/serve.mjs against hostile requests: malformed request targets, symlinks out of its
// root, and a stream of made-up fault URLs. Runs its own server on a scratch root.

const OWN_PORT = PORT + 7;
const BASE = `http://127.0.0.1:${OWN_PORT}`;
let server: ChildProcess;
let root: string;

/** One raw request line on a fresh connection; resolves to the status line ('' if none). */
function raw(target: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(OWN_PORT, '127.0.0.1', () => {
      socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    });
    let text = '';
    socket.on('data', (d) => (text += d.toString('latin1')));
    socket.on('close', () => resolve(text.split('\r\n')[0] ?? ''));
    socket.on('error', () => resolve(''));
  });
}

test.beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'weft-serve-'));
  const outside = mkdtempSync(path.join(tmpdir(), 'weft-outside-'));
  writeFileSync(path.join(outside, 'secret.txt'), 'secret\n');
  writeFileSync(path.join(root, 'index.html'), 'hello\n');
  mkdirSync(path.join(root, 'sub'));
  writeFileSync(path.join(root, 'sub', 'inner.txt'), 'inner\n');
  symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'leak.txt'));
  symlinkSync(outside, path.join(root, 'leakdir'));
  symlinkSync(path.join(root, 'sub', 'inner.txt'), path.join(root, 'ok-link.txt'));
  server = spawn('node', ['scripts/serve.mjs', '--port', String(OWN_PORT), '--root', root], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${BASE}/index.html`)).ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('serve.mjs did not start');
});

test.afterAll(() => {
  server?.kill();
  if (root) rmSync(root, { recursive: true, force: true });
});

test('malformed request targets get 400 and the server keeps serving', async () => {
  for (const target of ['//[/', 'http://a:99999/', 'http://[bad/', '/%E0%A4%A', '/\u00ff']) {
    const status = await raw(target);
    console.log(`${JSON.stringify(target)} -> ${status}`);
    expect(status).toMatch(/^HTTP\/1\.1 (400|404)/);
    expect(server.exitCode).toBeNull();
  }
  expect((await fetch(`${BASE}/index.html`)).status).toBe(200);
});

test('symlinks that lead out of the root are not served; those inside are', async () => {
  expect((await fetch(`${BASE}/leak.txt`)).status).toBe(404);
  expect((await fetch(`${BASE}/leakdir/secret.txt`)).status).toBe(404);
  const ok = await fetch(`${BASE}/ok-link.txt`);
  expect(ok.status).toBe(200);
  expect(await ok.text()).toBe('inner\n');
});

test('the fault map forgets the oldest URLs past its bound', async () => {
  const first = `${BASE}/index.html?fail503=1&t=first`;
  expect((await fetch(first)).status).toBe(503);
  expect((await fetch(first)).status).toBe(200);
  // 1000 more fault URLs push the first one out: its count starts again.
  for (let i = 0; i < 1000; i += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, j) => fetch(`${BASE}/index.html?t=${i + j}`).then((r) => r.text())));
  }
  expect((await fetch(first)).status).toBe(503);
  expect(server.exitCode).toBeNull();
});
