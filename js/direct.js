// weft's JavaScript API running in the calling thread (a worker, or a page that accepts being
// blocked while the GPU is fed). index.js offers the same API backed by a Web Worker.
import initWasm, * as wasm from '../pkg/weft.js';

/** An error with a stable `code` (see index.d.ts for the list). */
export class WeftError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = 'WeftError';
    this.code = code;
    Object.assign(this, details);
  }
}

const DETAIL_KEYS = ['url', 'start', 'end', 'status', 'needed', 'available'];

/** The same error as a WeftError (errors from the wasm module already carry `code`). */
export function toWeftError(e) {
  if (e instanceof WeftError) return e;
  if (e && typeof e === 'object' && typeof e.code === 'string') {
    const details = {};
    for (const k of DETAIL_KEYS) if (e[k] !== undefined) details[k] = e[k];
    return new WeftError(e.code, e.message, details);
  }
  if (e && e.name === 'AbortError') return new WeftError('ABORTED', e.message || 'aborted');
  return new WeftError('INTERNAL', e instanceof Error ? e.message : String(e));
}

let ready = null;

/** Loads and instantiates the wasm module once; `wasmUrl` overrides where weft_bg.wasm lives.
 * `limits: 'default'` and `features: 'none'` create the device with WebGPU's default limits and
 * no optional features (what every implementation grants). */
export function init(options = {}) {
  ready ??= initWasm(options.wasmUrl ? { module_or_path: options.wasmUrl } : undefined).catch((e) => {
    ready = null;
    throw toWeftError(e);
  });
  return ready.then(() => {
    if (options.limits !== undefined || options.features !== undefined) {
      try {
        wasm.configureDevice(options.limits, options.features);
      } catch (e) {
        throw toWeftError(e);
      }
    }
  });
}

let persistence = null;

/** Asks once per page that the model cache be kept under storage pressure
 * (`navigator.storage.persist()`, a Window-only call; browsers may grant it silently, prompt, or
 * refuse). Not awaited by loads: a prompt must not hold up a download. */
export function requestPersistence() {
  const storage = globalThis.navigator?.storage;
  if (typeof storage?.persist !== 'function' || typeof globalThis.document === 'undefined') return Promise.resolve(false);
  persistence ??= storage.persist().then((granted) => !!granted, () => false);
  return persistence;
}

/** The model files in the Cache API copy: `{ url, bytes, coveredBytes, fileBytes, ranges, complete }`. */
export async function cachedModels() {
  await init();
  return call(() => wasm.cachedModels());
}

/** Deletes every cached range of one model file; true when there was something to delete. */
export async function deleteCachedModel(url) {
  await init();
  return call(() => wasm.deleteCachedModel(absolute(url)));
}

async function call(fn) {
  try {
    return await fn();
  } catch (e) {
    throw toWeftError(e);
  }
}

/** The WebGPU adapter's identity, features and limits. */
export async function capabilities() {
  await init();
  return call(() => wasm.capabilities());
}

/** Deletes every cached model range. */
export async function clearCache() {
  await init();
  return call(() => wasm.clearModelCache());
}

/** Bytes of the wasm module's linear memory. */
export async function wasmMemoryBytes() {
  await init();
  return wasm.wasmMemoryBytes();
}

function absolute(url) {
  return new URL(url, globalThis.location?.href).href;
}

/** Loads a model from `url` layer by layer (options: onProgress, signal, kv, maxContext, cache,
 * retries, backoffMs). */
export async function loadModel(url, options = {}) {
  await init();
  if (options.signal?.aborted) throw new WeftError('LOAD_ABORTED', `loading ${url} was aborted`, { url });
  if (options.cache !== false) requestPersistence();
  const inner = await call(() => wasm.loadModel(absolute(url), options));
  return new Model(inner);
}

function abortedError() {
  return new WeftError('ABORTED', 'generation was aborted');
}

export class Model extends EventTarget {
  #inner;
  #busy = false;
  #lost = false;

  constructor(inner) {
    super();
    this.#inner = inner;
  }

  #alive() {
    if (!this.#inner) throw new WeftError('DISPOSED', 'the model was disposed');
    return this.#inner;
  }

  async #call(fn) {
    try {
      return await fn(this.#alive());
    } catch (e) {
      const err = toWeftError(e);
      if (err.code === 'DEVICE_LOST' && !this.#lost) {
        this.#lost = true;
        this.dispatchEvent(Object.assign(new Event('devicelost'), { error: err }));
      }
      throw err;
    }
  }

  /** Streams the continuation of `prompt` chunk by chunk: {token, text, done}. */
  async *generate(prompt, options = {}) {
    const { maxTokens = 256, signal, ...sampling } = options;
    if (this.#busy) throw new WeftError('BUSY', 'a generation is already running on this model');
    this.#busy = true;
    try {
      if (signal?.aborted) throw abortedError();
      let chunk = await this.#call((m) => m.begin(String(prompt), sampling));
      for (let n = 1; ; n++) {
        yield chunk;
        if (chunk.done || n >= maxTokens) break;
        if (signal?.aborted) throw abortedError();
        chunk = await this.#call((m) => m.next());
      }
      const tail = this.#inner?.finish() ?? '';
      if (tail) yield { token: -1, text: tail, done: true };
    } finally {
      this.#busy = false;
    }
  }

  /** The reply to `messages` ([{role, content}]) with the model's chat template applied. */
  async chat(messages, options = {}) {
    let text = '';
    for await (const chunk of this.chatStream(messages, options)) text += chunk.text;
    return text;
  }

  /** The reply to `messages`, streamed like `generate`. */
  async *chatStream(messages, options = {}) {
    yield* this.generate(await this.chatPrompt(messages), options);
  }

  /** The prompt `chat` would run for `messages`. */
  async chatPrompt(messages) {
    return this.#call((m) => m.chatPrompt(messages));
  }

  async encode(text) {
    return this.#call((m) => Array.from(m.encode(String(text))));
  }

  async decode(ids) {
    return this.#call((m) => m.decode(Uint32Array.from(ids)));
  }

  /** Every debug checkpoint for the token ids `ids`: [{name, shape, data: Float32Array}]. */
  checkpoints(ids) {
    return this.#call((m) => m.checkpoints(Uint32Array.from(ids)));
  }

  /** Load cost, generation speed and memory. */
  async stats() {
    return this.#call((m) => m.stats());
  }

  /** Destroys the GPU device as a driver reset would, to exercise recovery. */
  async destroyDevice() {
    this.#alive().destroyDevice();
  }

  /** Frees the model's GPU buffers. */
  async dispose() {
    this.#inner?.free();
    this.#inner = null;
  }
}
