import { defineConfig } from 'playwright/test';

// The browser specs in engines Playwright cannot launch itself (see engines.ts): Firefox ESR with
// WebGPU on lavapipe, and WebKitGTK, whose build here has no WebGPU adapter (the UNSUPPORTED path).
// tsconfig.json points the specs' `@playwright/test` at fixture.ts, which swaps in those pages.
const PORT = Number(process.env.WEFT_TEST_PORT ?? 4173);
const MOUNTS = '--mount /js=js --mount /models=models --mount /fixtures=tests/fixtures';

export default defineConfig({
  testDir: '.',
  tsconfig: './tsconfig.json',
  timeout: 600_000,
  fullyParallel: false,
  workers: 1,
  reporter: [['list']],
  use: { baseURL: `http://127.0.0.1:${PORT}` },
  projects: [
    {
      name: 'firefox',
      testDir: '../browser',
      // The kernels (matmul self-test, every storage type, every weight format), the model
      // against PyTorch's activations with the greedy ids, the worker API, a default-limits
      // device, the cache's storage functions, the memory budget checked before a download,
      // malformed model dimensions, and chat content encoded as text.
      testMatch: ['selftest.spec.ts', 'dequant.spec.ts', 'qmatmul.spec.ts', 'activations.spec.ts', 'api.spec.ts',
        'limits.spec.ts', 'storage.spec.ts', 'memory-budget.spec.ts', 'malformed-models.spec.ts',
        'chat-forge.spec.ts'],
      // Firefox reports an empty GPUAdapterInfo (vendor, architecture, description), which that
      // test requires; adapter.spec.ts checks what Firefox does report. The self-test page's
      // check uses Playwright locators, and the chat renderer's failed fetch request
      // interception (`page.context().route`), which this page does not have.
      grepInvert: /adapter is found|self-test page shows|renderer module fails to load/,
      use: { engine: 'firefox' },
    },
    { name: 'firefox-adapter', testMatch: 'adapter.spec.ts', use: { engine: 'firefox' } },
    { name: 'webkit', testMatch: 'unsupported.spec.ts', use: { engine: 'webkit' } },
    { name: 'webkit-webgpu-flag', testMatch: 'unsupported.spec.ts', use: { engine: 'webkit', webkitFeatures: '+WebGPU' } },
  ],
  webServer: [
    {
      command: `node scripts/serve.mjs --port ${PORT} --root www ${MOUNTS}`,
      cwd: '../..',
      url: `http://127.0.0.1:${PORT}/harness.html`,
      reuseExistingServer: false,
      stdout: 'ignore',
    },
    // Cross-origin isolated (COOP/COEP), for the threaded CPU backend's specs.
    {
      command: `node scripts/serve.mjs --port ${PORT + 3} --root www ${MOUNTS} --coop`,
      cwd: '../..',
      url: `http://127.0.0.1:${PORT + 3}/harness.html`,
      reuseExistingServer: false,
      stdout: 'ignore',
    },
  ],
});
