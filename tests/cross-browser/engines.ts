// The browsers Playwright cannot drive itself, behind the small part of Playwright's `Page` the
// browser specs use (goto, evaluate, on('console' | 'pageerror'), screenshot):
// - Firefox ESR through WebDriver BiDi (puppeteer-core), with WebGPU enabled by prefs;
// - WebKitGTK's MiniBrowser through WebKitWebDriver (W3C WebDriver over HTTP), on an Xvfb display
//   started here when there is none.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

export type Engine = 'firefox' | 'webkit';

/** What a spec may call on `page`. */
export interface EnginePage {
  goto(url: string): Promise<void>;
  evaluate<R, A>(fn: (arg: A) => R | Promise<R>, arg?: A): Promise<R>;
  on(event: 'console' | 'pageerror', handler: (value: never) => void): void;
  screenshot(options?: { path?: string; fullPage?: boolean }): Promise<unknown>;
  close(): Promise<void>;
}

export interface EngineBrowser {
  /** Engine name and version, as the browser reports it. */
  version: string;
  newPage(baseURL: string): Promise<EnginePage>;
  close(): Promise<void>;
}

// A long generation in the page is one evaluate call: no protocol timeout shorter than a test's.
const CALL_TIMEOUT_MS = 900_000;

export const FIREFOX = '/usr/bin/firefox-esr';
export const WEBKIT_DRIVER = '/usr/bin/WebKitWebDriver';
export const MINIBROWSER = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';

/** Prefs that give Firefox ESR WebGPU on Linux (lavapipe here): off by default there, and the
 * blocklist refuses software adapters. */
export const FIREFOX_PREFS = {
  'dom.webgpu.enabled': true,
  'gfx.webgpu.ignore-blocklist': true,
};

export async function launchFirefox(): Promise<EngineBrowser> {
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    protocolTimeout: CALL_TIMEOUT_MS,
    extraPrefsFirefox: FIREFOX_PREFS,
  });
  return {
    version: await browser.version(),
    async newPage(baseURL) {
      const page = await browser.newPage();
      page.setDefaultTimeout(CALL_TIMEOUT_MS);
      return {
        goto: async (url) => void (await page.goto(new URL(url, baseURL).href)),
        evaluate: (fn, arg) => page.evaluate(fn as never, arg as never) as never,
        on: (event, handler) => void page.on(event, handler as never),
        screenshot: (options) => page.screenshot(options as never),
        close: () => page.close(),
      };
    },
    close: () => browser.close(),
  };
}

/** An X display for MiniBrowser: the current one, else a fresh Xvfb (its number chosen by Xvfb). */
async function display(): Promise<{ name: string; server?: ChildProcess }> {
  if (process.env.DISPLAY) return { name: process.env.DISPLAY };
  const server = spawn('Xvfb', ['-displayfd', '3', '-nolisten', 'tcp', '-screen', '0', '1280x800x24'], {
    stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
  });
  const name = await new Promise<string>((resolve, reject) => {
    let text = '';
    server.stdio[3]!.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('\n')) resolve(`:${text.trim()}`);
    });
    server.on('exit', (code) => reject(new Error(`Xvfb exited (${code}); apt-get install xvfb`)));
  });
  return { name, server };
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** WebKitGTK's MiniBrowser. `features` go to its `--features` switch (e.g. '+WebGPU'). */
export async function launchWebKit(features?: string): Promise<EngineBrowser> {
  const { name, server } = await display();
  const port = await freePort();
  const driver = spawn(WEBKIT_DRIVER, [`--port=${port}`], {
    stdio: 'ignore',
    env: { ...process.env, DISPLAY: name, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? mkdtempSync(join(tmpdir(), 'weft-xdg-')) },
  });
  const stop = () => {
    driver.kill();
    server?.kill();
  };
  const base = `http://127.0.0.1:${port}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(base + path, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await r.json();
    if (!r.ok) throw new Error(`WebDriver ${method} ${path}: ${JSON.stringify(json.value)}`);
    return json.value;
  };
  try {
    for (let i = 0; ; i++) {
      try {
        await call('GET', '/status');
        break;
      } catch (e) {
        if (i > 50) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const args = ['--automation', ...(features ? [`--features=${features}`] : [])];
    const session = await call('POST', '/session', {
      capabilities: { alwaysMatch: { 'webkitgtk:browserOptions': { binary: MINIBROWSER, args } } },
    });
    const id: string = session.sessionId;
    await call('POST', `/session/${id}/timeouts`, { script: CALL_TIMEOUT_MS });
    const caps = session.capabilities;
    return {
      version: `${caps.browserName} (WebKitGTK) ${caps.browserVersion}`,
      async newPage(baseURL) {
        return {
          goto: async (url) => void (await call('POST', `/session/${id}/url`, { url: new URL(url, baseURL).href })),
          // The function's source runs in the page; its promise settles WebDriver's callback.
          async evaluate(fn, arg) {
            const script = `const done = arguments[arguments.length - 1];
              Promise.resolve().then(() => (${fn.toString()})(arguments[0]))
                .then((value) => done({ value }), (e) => done({ error: String(e && e.stack ? e.message + '\\n' + e.stack : e) }));`;
            const out = await call('POST', `/session/${id}/execute/async`, { script, args: [arg ?? null] });
            if (out && 'error' in out) throw new Error(out.error);
            return out?.value;
          },
          // Classic WebDriver has no console or error events.
          on: () => {},
          screenshot: async () => undefined,
          close: async () => {},
        };
      },
      async close() {
        await call('DELETE', `/session/${id}`).catch(() => {});
        stop();
      },
    };
  } catch (e) {
    stop();
    throw e;
  }
}
