import { defineConfig } from 'vite';

export default defineConfig({
  // weft's worker is an ES module (it imports the wasm bindings).
  worker: { format: 'es' },
  // Pre-bundling would move weft's files away from the wasm and worker they reference by URL.
  optimizeDeps: { exclude: ['weft'] },
  build: { target: 'es2022' },
});
