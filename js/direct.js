// weft's JavaScript API running in the calling thread (a worker, or a page that accepts being
// blocked while the GPU is fed). index.js offers the same API backed by a Web Worker.
import { loadEmbedModel } from './embed.js';
// The wasm module's bindings: pkg/ (one thread) or pkg-threads/ (shared memory and a pool of
// workers for the CPU backend), chosen in init().
let wasm = null;

/** An error with a stable `code` (see index.d.ts for the list). */
/** A prompt as `begin` takes it: an array of token ids as it is, anything else as text. */
export function promptInput(prompt) {
  return Array.isArray(prompt) ? prompt : String(prompt);
}

export class WeftError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = 'WeftError';
    this.code = code;
    Object.assign(this, details);
  }
}

const DETAIL_KEYS = ['url', 'start', 'end', 'status', 'needed', 'available', 'tokens', 'context'];

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

/** The threaded build needs shared memory, which a page has only when cross-origin isolated
 * (COOP/COEP headers); `threads: 1` asks for the single-thread build anyway. */
function wantsThreads(options) {
  return options.threads !== 1 && globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
}

/** Starts `threads - 1` workers that instantiate the threaded module on this one's memory and
 * join the CPU backend's pool (passes take the ones that have joined). */
function startPool(glue, threads) {
  const [module, memory] = glue.sharedModule();
  for (let i = 1; i < threads; i++) {
    const w = new Worker(new URL('./cpu-worker.js', import.meta.url), { type: 'module' });
    w.postMessage({ module, memory });
  }
}

async function loadWasm(options) {
  if (wantsThreads(options)) {
    const glue = await import('../pkg-threads/weft.js');
    await glue.default(options.wasmThreadsUrl ? { module_or_path: options.wasmThreadsUrl } : undefined);
    // A worker may sleep in Atomics.wait while the pool works; a page's main thread may not.
    glue.cpuMayBlock(typeof globalThis.WorkerGlobalScope !== 'undefined');
    const cores = globalThis.navigator?.hardwareConcurrency ?? 1;
    const threads = Math.max(1, Math.min(options.threads ?? cores, 16));
    startPool(glue, threads);
    // Passes take the workers that have joined; give them a few seconds to, so that init()
    // resolves with the pool complete (a worker that never starts only leaves it smaller).
    for (let waited = 0; glue.cpuThreads() < threads && waited < 5000; waited += 10) {
      await new Promise((r) => setTimeout(r, 10));
    }
    return glue;
  }
  const glue = await import('../pkg/weft.js');
  await glue.default(options.wasmUrl ? { module_or_path: options.wasmUrl } : undefined);
  return glue;
}

/** Loads and instantiates the wasm module once: the threaded build where the page is
 * cross-origin isolated (`threads` threads, default one per core; `threads: 1` takes the
 * single-thread build), else the single-thread one. `wasmUrl` and `wasmThreadsUrl` override
 * where each build's weft_bg.wasm lives.
 * `limits: 'default'` and `features: 'none'` create the device with WebGPU's default limits and
 * no optional features (what every implementation grants); `kernels: 'gpu'` gives a software
 * adapter a hardware GPU's kernel choices (to test them). `backend` ('auto', 'webgpu', 'cpu')
 * is where later loads run. */
export function init(options = {}) {
  ready ??= loadWasm(options).then((glue) => {
    wasm = glue;
    askForSubgroups();
  }).catch((e) => {
    ready = null;
    throw toWeftError(e);
  });
  return ready.then(() => {
    try {
      if (options.limits !== undefined || options.features !== undefined || options.kernels !== undefined) {
        wasm.configureDevice(options.limits, options.features, options.kernels);
      }
      if (options.backend !== undefined) wasm.configureBackend(String(options.backend));
    } catch (e) {
      throw toWeftError(e);
    }
  });
}

/** wgpu's web backend passes on only the WebGPU features it has names for, and "subgroups" is
 * not one of them. weft's device request (the label below, src/gpu/mod.rs `WEB_SUBGROUPS_LABEL`)
 * gets it added here where the adapter offers it, and the module is told, so that the GEMVs sum
 * with subgroup shuffles instead of through workgroup memory. Other requests are left alone. */
function askForSubgroups() {
  const proto = globalThis.GPUAdapter?.prototype;
  if (!proto || typeof proto.requestDevice !== 'function' || proto.requestDevice.weftSubgroups) return;
  const original = proto.requestDevice;
  const wrapped = function requestDevice(descriptor) {
    if (descriptor?.label !== 'weft +subgroups') return original.call(this, descriptor);
    const add = this.features?.has('subgroups') === true;
    wasm.deviceSubgroups(add);
    if (!add) return original.call(this, descriptor);
    const features = [...(descriptor.requiredFeatures ?? [])];
    if (!features.includes('subgroups')) features.push('subgroups');
    return original.call(this, { ...descriptor, requiredFeatures: features });
  };
  wrapped.weftSubgroups = true;
  proto.requestDevice = wrapped;
}

let chatRenderer = null;

/** Loads the chat-template renderer (pkg-chat: minijinja, a wasm module of its own so that pages
 * that never chat do not download it) on the first chat and hands it to the main module. A
 * failure rejects with `LOAD` and is tried again on the next chat. */
function loadChatRenderer() {
  chatRenderer ??= (async () => {
    const glue = await import('../pkg-chat/weft_chat.js');
    await glue.default();
    wasm.setChatRenderer(glue.render);
  })().catch((e) => {
    chatRenderer = null;
    throw new WeftError('LOAD', `the chat template renderer (pkg-chat/weft_chat_bg.wasm) did not load: ${e?.message ?? e}`);
  });
  return chatRenderer;
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
  const href = absoluteUrl(url);
  await init();
  return call(() => wasm.deleteCachedModel(href));
}

async function call(fn) {
  try {
    return await fn();
  } catch (e) {
    throw toWeftError(e);
  }
}

/** The WebGPU adapter's identity, features and limits with `webgpu: true`, or
 * `{ webgpu: false, code, reason }`. Never rejects. */
export async function capabilities() {
  try {
    await init();
    return await wasm.capabilities();
  } catch (e) {
    const err = toWeftError(e);
    return { webgpu: false, code: err.code, reason: err.message };
  }
}

/** The CPU backend's SIMD kernels against their scalar reference on seeded data. */
export async function cpuSelfTest(seed = 1) {
  await init();
  return call(() => wasm.cpuSelfTest(seed));
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

/** `url` resolved against the page; a malformed one is an INVALID_ARGUMENT error. */
export function absoluteUrl(url) {
  if (typeof url !== 'string' && !(url instanceof URL)) {
    throw new WeftError('INVALID_ARGUMENT', `the model URL must be a string or URL, not ${typeof url}`);
  }
  try {
    return new URL(url, globalThis.location?.href).href;
  } catch {
    throw new WeftError('INVALID_ARGUMENT', `'${url}' is not a valid URL`, { url: String(url) });
  }
}

/** Options of generate() handled here; the sampling ones are checked by the wasm module. */
const GENERATE_KEYS = new Set(['maxTokens', 'signal', 'temperature', 'topK', 'topP', 'repeatPenalty', 'seed']);

/** Checks generate()'s own options and returns [maxTokens, signal, sampling options]. */
export function generateOptions(options) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw new WeftError('INVALID_ARGUMENT', 'the generate options must be an object');
  for (const key of Object.keys(options)) {
    if (!GENERATE_KEYS.has(key)) {
      throw new WeftError('INVALID_ARGUMENT', `unknown generate option '${key}'; the options are ${[...GENERATE_KEYS].join(', ')}`);
    }
  }
  const { maxTokens = 256, signal, ...sampling } = options;
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw new WeftError('INVALID_ARGUMENT', `option 'maxTokens' must be a positive integer; got ${String(maxTokens)}`);
  }
  if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
    throw new WeftError('INVALID_ARGUMENT', "option 'signal' must be an AbortSignal");
  }
  return [maxTokens, signal ?? undefined, sampling];
}

/** Loads a model from `url` layer by layer (options: onProgress, signal, kv, maxContext, cache,
 * retries, backoffMs). */
export async function loadModel(url, options = {}) {
  const href = absoluteUrl(url);
  await init();
  if (options?.signal?.aborted) throw new WeftError('LOAD_ABORTED', `loading ${url} was aborted`, { url });
  if (options?.cache !== false) requestPersistence();
  if (options?.task === 'embed') return loadEmbedModel(wasm, href, options);
  const inner = await call(() => wasm.loadModel(href, options));
  return new Model(inner);
}

function abortedError() {
  return new WeftError('ABORTED', 'generation was aborted');
}

function supersededError() {
  return new WeftError('ABORTED', 'a later generate() or dispose() on this model ended this generation');
}

export class Model extends EventTarget {
  #inner;
  #lost = false;
  // The generation that owns the model, if any: { cancelled, step } where `step` is the call
  // into the model in flight (null between chunks). A new generate() or dispose() cancels it
  // and waits for its step, so an iterator left by `break`, dropped without return(), or
  // aborted never keeps the model busy.
  #session = null;

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

  /** Cancels the current generation and waits until no call of it runs. */
  async #takeOver() {
    while (this.#session) {
      const old = this.#session;
      old.cancelled = true;
      if (!old.step) {
        this.#session = null;
        break;
      }
      await old.step.catch(() => {});
      if (this.#session === old) this.#session = null;
    }
  }

  /** One call of the generation `session` into the model. */
  async #step(session, fn) {
    if (session.cancelled) throw supersededError();
    const step = this.#call(fn);
    session.step = step;
    try {
      return await step;
    } finally {
      session.step = null;
    }
  }

  /** Streams the continuation of `prompt` (text, or an array of token ids) chunk by chunk:
   * {token, text, done}. Past the context it goes on over a sliding window; a prompt longer
   * than the context is a CONTEXT_FULL error. */
  async *generate(prompt, options = {}) {
    yield* this.#generate((m, sampling) => m.begin(promptInput(prompt), sampling), options);
  }

  /** A generation whose first call is `begin(inner, sampling)`. */
  async *#generate(begin, options) {
    const [maxTokens, signal, sampling] = generateOptions(options);
    this.#alive();
    await this.#takeOver();
    const session = { cancelled: false, step: null };
    this.#session = session;
    try {
      if (signal?.aborted) throw abortedError();
      let chunk = await this.#step(session, (m) => begin(m, sampling));
      for (let n = 1; ; n++) {
        yield chunk;
        if (session.cancelled) throw supersededError();
        if (chunk.done || n >= maxTokens) break;
        if (signal?.aborted) throw abortedError();
        chunk = await this.#step(session, (m) => m.next());
      }
      const tail = this.#inner?.finish() ?? '';
      if (tail) yield { token: -1, text: tail, done: true };
    } finally {
      if (this.#session === session) this.#session = null;
    }
  }

  /** The reply to `messages` ([{role, content}]) with the model's chat template applied. */
  async chat(messages, options = {}) {
    let text = '';
    for await (const chunk of this.chatStream(messages, options)) text += chunk.text;
    return text;
  }

  /** The reply to `messages`, streamed like `generate`. The template's special tokens are
   * control tokens; message content is encoded as text, so it cannot open or close a turn. */
  async *chatStream(messages, options = {}) {
    await loadChatRenderer();
    yield* this.#generate((m, sampling) => m.beginChat(messages, sampling), options);
  }

  /** The prompt `chat` would run for `messages`, as text. */
  async chatPrompt(messages) {
    await loadChatRenderer();
    return this.#call((m) => m.chatPrompt(messages));
  }

  /** The token ids `chat` runs for `messages`. */
  async chatIds(messages) {
    await loadChatRenderer();
    return this.#call((m) => Array.from(m.chatIds(messages)));
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

  /** Where a decode step's time goes (WebGPU models, after a generation): the step run `reps`
   * times, `{ dispatches, record_submit_ms, wait_ms, kernels_us: [[name, µs, count]], pass_us }`. Only in
   * a wasm build with the `web-profile` feature (`WEFT_WASM_FEATURES=web-profile`). */
  async profileStep(reps = 20) {
    return this.#call((m) => {
      if (typeof m.profileStep !== 'function') {
        throw new WeftError('UNSUPPORTED', 'profileStep needs a wasm build with the web-profile feature (WEFT_WASM_FEATURES=web-profile bash scripts/build-wasm.sh)');
      }
      return m.profileStep(reps);
    });
  }

  /** Destroys the GPU device as a driver reset would, to exercise recovery. */
  async destroyDevice() {
    this.#alive().destroyDevice();
  }

  /** Frees the model's GPU buffers, once a generation's call in flight has finished. */
  async dispose() {
    if (!this.#inner) return;
    await this.#takeOver();
    this.#inner?.free();
    this.#inner = null;
  }
}
