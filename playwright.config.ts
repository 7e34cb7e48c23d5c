import { defineConfig } from '@playwright/test';

// Headless Chromium from Debian (no browser download) with WebGPU on SwiftShader.
// WEFT_TEST_PORT moves the servers (PORT to PORT + 3) when another run holds the defaults.
export const PORT = Number(process.env.WEFT_TEST_PORT ?? 4173);
export const NO_RANGE_PORT = PORT + 1;
/** Serves the Vite consumer app's build (started by its spec). */
export const VITE_APP_PORT = PORT + 2;
/** The Range server with the cross-origin isolation headers (COOP/COEP) that shared memory, and
 * so the CPU backend's threads, need. */
export const ISOLATED_PORT = PORT + 3;
// The JS API, the model and the activation fixtures, next to the pages in www/.
const MOUNTS = '--mount /js=js --mount /models=models --mount /fixtures=tests/fixtures --mount /bench=bench';

export default defineConfig({
  testDir: 'tests/browser',
  timeout: 120_000,
  fullyParallel: false,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${PORT}`,
    browserName: 'chromium',
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--enable-unsafe-webgpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    },
  },
  webServer: [
    {
      command: `node scripts/serve.mjs --port ${PORT} --root www ${MOUNTS}`,
      url: `http://127.0.0.1:${PORT}/harness.html`,
      reuseExistingServer: false,
      stdout: 'ignore',
    },
    {
      command: `node scripts/serve.mjs --port ${NO_RANGE_PORT} --root www ${MOUNTS} --no-range`,
      url: `http://127.0.0.1:${NO_RANGE_PORT}/harness.html`,
      reuseExistingServer: false,
      stdout: 'ignore',
    },
    {
      command: `node scripts/serve.mjs --port ${ISOLATED_PORT} --root www ${MOUNTS} --coop`,
      url: `http://127.0.0.1:${ISOLATED_PORT}/harness.html`,
      reuseExistingServer: false,
      stdout: 'ignore',
    },
  ],
});
