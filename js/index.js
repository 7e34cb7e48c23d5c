// weft's JavaScript API for pages: the model runs in a Web Worker (worker.js), so the page never
// blocks on the GPU. The API matches direct.js, which runs in the calling thread instead.
import { WeftError, absoluteUrl, generateOptions, promptInput, requestPersistence } from './direct.js';
import { WorkerEmbedModel } from './embed.js';

export { WeftError, requestPersistence };
export { openai } from './openai.js';

let worker = null;
let started = null;
let nextId = 1;
const pending = new Map();
const lostListeners = new Map();

function fromData(e) {
  const { message, code, ...details } = e;
  return new WeftError(code, message, details);
}

function onMessage({ data }) {
  if (data.id === null) {
    if (data.event === 'devicelost') lostListeners.get(data.model)?.(fromData(data.error));
    return;
  }
  const p = pending.get(data.id);
  if (!p) return;
  if ('progress' in data) p.onProgress?.(data.progress);
  else if ('chunk' in data) p.onChunk?.(data.chunk);
  else {
    pending.delete(data.id);
    if ('error' in data) p.reject(fromData(data.error));
    else p.resolve(data.result);
  }
}

/** Sends one operation; `hooks` receive streamed progress or chunks. Returns [id, promise]. */
function send(op, args, hooks = {}) {
  if (!worker) throw new WeftError('INVALID_STATE', 'call init() first');
  const id = nextId++;
  const promise = new Promise((resolve, reject) => pending.set(id, { resolve, reject, ...hooks }));
  worker.postMessage({ id, op, args });
  return [id, promise];
}

function request(op, args) {
  return send(op, args)[1];
}

/** `limits`, `features`, `kernels` and `backend` of init's options, or null when none is given. */
function deviceArgs(options) {
  const args = {};
  if (options.limits !== undefined) args.limits = options.limits;
  if (options.features !== undefined) args.features = options.features;
  if (options.kernels !== undefined) args.kernels = options.kernels;
  if (options.backend !== undefined) args.backend = options.backend;
  return Object.keys(args).length ? args : null;
}

/** Starts the worker and the wasm module in it. `workerUrl` and `wasmUrl` override where
 * worker.js and weft_bg.wasm are served from; `limits`, `features` and `kernels` choose the device (a later
 * call with them replaces the device for what follows). */
export function init(options = {}) {
  const device = deviceArgs(options);
  if (started && device) return started.then(() => request('init', device));
  started ??= (async () => {
    // The literal `new Worker(new URL(...), ...)` form lets bundlers (Vite, webpack) find and bundle the worker.
    worker = options.workerUrl
      ? new Worker(options.workerUrl, { type: 'module' })
      : new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    worker.onmessage = onMessage;
    worker.onerror = (e) => {
      for (const p of pending.values()) p.reject(new WeftError('WORKER', e.message || 'the worker failed'));
      pending.clear();
    };
    const build = {};
    if (options.wasmUrl) build.wasmUrl = String(options.wasmUrl);
    if (options.wasmThreadsUrl) build.wasmThreadsUrl = String(options.wasmThreadsUrl);
    if (options.threads !== undefined) build.threads = options.threads;
    await request('init', { ...build, ...device });
  })().catch((e) => {
    started = null;
    worker?.terminate();
    worker = null;
    throw e;
  });
  return started;
}

/** Never rejects: without a usable WebGPU (or worker) it reports `{ webgpu: false, code, reason }`. */
export async function capabilities() {
  try {
    await init();
    return await request('capabilities');
  } catch (e) {
    return { webgpu: false, code: e?.code ?? 'INTERNAL', reason: e?.message ?? String(e) };
  }
}

export async function clearCache() {
  await init();
  return request('clearCache');
}

/** The model files in the Cache API copy: `{ url, bytes, coveredBytes, fileBytes, ranges, complete }`. */
export async function cachedModels() {
  await init();
  return request('cachedModels');
}

/** Deletes every cached range of one model file; true when there was something to delete. */
export async function deleteCachedModel(url) {
  const href = absoluteUrl(url);
  await init();
  return request('deleteCachedModel', { url: href });
}

/** The CPU backend's SIMD kernels against their scalar reference on seeded data, in the worker. */
export async function cpuSelfTest(seed = 1) {
  await init();
  return request('cpuSelfTest', { seed });
}

/** Bytes of the wasm module's linear memory in the worker. */
export async function wasmMemoryBytes() {
  await init();
  return request('wasmMemoryBytes');
}

function forwardAbort(signal, id) {
  if (!signal) return () => {};
  const onAbort = () => worker?.postMessage({ id: nextId++, op: 'abort', args: { target: id } });
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

export async function loadModel(url, options = {}) {
  const absolute = absoluteUrl(url);
  if (options === null || typeof options !== 'object') throw new WeftError('INVALID_ARGUMENT', 'the loadModel options must be an object');
  await init();
  const { onProgress, signal, ...rest } = options;
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new WeftError('INVALID_ARGUMENT', "option 'onProgress' must be a function");
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new WeftError('INVALID_ARGUMENT', "option 'signal' must be an AbortSignal");
  }
  if (signal?.aborted) throw new WeftError('LOAD_ABORTED', `loading ${url} was aborted`, { url });
  // The worker has no navigator.storage.persist(): the page asks.
  if (rest.cache !== false) requestPersistence();
  const [id, promise] = send('load', { url: absolute, options: rest, cancellable: !!signal }, { onProgress });
  const detach = forwardAbort(signal, id);
  try {
    const handle = await promise;
    if (rest.task === 'embed') return new WorkerEmbedModel(handle.model, handle.dim, send, handle.backend);
    return new Model(handle);
  } finally {
    detach();
  }
}

export class Model extends EventTarget {
  #handle;
  #stats = null;

  constructor(handle) {
    super();
    this.#handle = handle;
    lostListeners.set(handle, (error) => this.dispatchEvent(Object.assign(new Event('devicelost'), { error })));
  }

  #args(extra = {}) {
    if (this.#handle === null) throw new WeftError('DISPOSED', 'the model was disposed');
    return { model: this.#handle, ...extra };
  }

  async *generate(prompt, options = {}) {
    yield* this.#generate({ prompt: promptInput(prompt) }, options);
  }

  /** A generation in the worker on `input`: `{ prompt }` or `{ messages }`. */
  async *#generate(input, options) {
    generateOptions(options);
    const { signal, ...rest } = options ?? {};
    const queue = [];
    let wake = null;
    const [id, finished] = send('generate', this.#args({ ...input, options: rest }), {
      onChunk: (c) => {
        queue.push(c);
        wake?.();
      },
    });
    let settled = false;
    let failure = null;
    finished.then(
      () => (settled = true),
      (e) => ((settled = true), (failure = e)),
    ).finally(() => wake?.());
    const detach = forwardAbort(signal, id);
    try {
      for (;;) {
        if (queue.length) {
          yield queue.shift();
          continue;
        }
        if (settled) break;
        await new Promise((r) => (wake = r));
        wake = null;
      }
      if (failure) throw failure;
    } finally {
      detach();
      // The consumer stopped early: stop the worker too.
      if (!settled) worker?.postMessage({ id: nextId++, op: 'abort', args: { target: id } });
    }
  }

  async chat(messages, options = {}) {
    let text = '';
    for await (const chunk of this.chatStream(messages, options)) text += chunk.text;
    return text;
  }

  async *chatStream(messages, options = {}) {
    yield* this.#generate({ messages }, options);
  }

  chatPrompt(messages) {
    return request('chatPrompt', this.#args({ messages }));
  }

  chatIds(messages) {
    return request('chatIds', this.#args({ messages }));
  }

  encode(text) {
    return request('encode', this.#args({ text }));
  }

  decode(ids) {
    return request('decode', this.#args({ ids: Array.from(ids) }));
  }

  checkpoints(ids) {
    return request('checkpoints', this.#args({ ids: Array.from(ids) }));
  }

  /** Load cost, generation speed and memory (a promise: the numbers live in the worker). */
  stats() {
    return request('stats', this.#args());
  }

  /** Where a decode step's time goes (see direct.js). */
  profileStep(reps = 20) {
    return request('profileStep', this.#args({ reps }));
  }

  destroyDevice() {
    return request('destroyDevice', this.#args());
  }

  async dispose() {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    lostListeners.delete(handle);
    await request('dispose', { model: handle });
  }
}
