// One thread of the CPU backend's pool (the threaded build only): instantiates the module on the
// memory of the thread that started it and joins the pool, whose loop never returns.
import init, { cpuWorker } from '../pkg-threads/weft.js';

self.onmessage = async ({ data: { module, memory } }) => {
  await init({ module_or_path: module, memory });
  cpuWorker();
};
