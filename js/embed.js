// Sentence embeddings: what `loadModel(url, { task: 'embed' })` returns. EmbedModel runs the
// encoder in the calling thread (direct.js, and inside the worker); WorkerEmbedModel forwards to
// it from the page (index.js).
import { WeftError, toWeftError } from './direct.js';

const EMBED_KEYS = new Set(['pooling', 'normalize', 'batchSize', 'onProgress']);

/** Checks embed()'s arguments; returns [texts, options]. */
export function embedArgs(texts, options) {
  if (!Array.isArray(texts) || texts.some((t) => typeof t !== 'string')) {
    throw new WeftError('INVALID_ARGUMENT', 'embed() takes an array of strings');
  }
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw new WeftError('INVALID_ARGUMENT', 'the embed options must be an object');
  for (const key of Object.keys(options)) {
    if (!EMBED_KEYS.has(key)) {
      throw new WeftError('INVALID_ARGUMENT', `unknown embed option '${key}'; the options are ${[...EMBED_KEYS].join(', ')}`);
    }
  }
  const { batchSize = 32, onProgress } = options;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
    throw new WeftError('INVALID_ARGUMENT', `option 'batchSize' must be a positive integer; got ${String(batchSize)}`);
  }
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new WeftError('INVALID_ARGUMENT', "option 'onProgress' must be a function");
  }
  return [texts, options];
}

/** Loads a BERT-family model folder (config.json, tokenizer.json or vocab.txt, model.safetensors)
 * through `wasm`, the bindings init() chose. */
export async function loadEmbedModel(wasm, href, options) {
  const { task, signal, ...rest } = options;
  try {
    return new EmbedModel(await wasm.loadEncoder(href, rest));
  } catch (e) {
    throw toWeftError(e);
  }
}

export class EmbedModel {
  #inner;

  constructor(inner) {
    this.#inner = inner;
  }

  #alive() {
    if (!this.#inner) throw new WeftError('DISPOSED', 'the model was disposed');
    return this.#inner;
  }

  get task() {
    return 'embed';
  }

  get dim() {
    return this.#alive().dim;
  }

  /** 'gpu' or 'cpu': where the passes run (loadModel's `backend`: 'gpu', 'cpu' or 'auto'). */
  get backend() {
    return this.#alive().backend;
  }

  /** One Float32Array per text, `batchSize` texts per pass; the event loop runs between passes. */
  async embed(texts, options = {}) {
    const [list, { pooling = 'mean', normalize = true, batchSize = 32, onProgress }] = embedArgs(texts, options);
    const out = [];
    for (let i = 0; i < list.length; i += batchSize) {
      const batch = list.slice(i, i + batchSize);
      try {
        out.push(...(await this.#alive().embed(batch, { pooling, normalize, batchSize })));
      } catch (e) {
        throw toWeftError(e);
      }
      onProgress?.({ done: out.length, total: list.length });
      await new Promise((r) => setTimeout(r, 0));
    }
    return out;
  }

  async tokenize(text) {
    return Array.from(this.#alive().tokenize(String(text)));
  }

  async dispose() {
    this.#inner?.free();
    this.#inner = null;
  }
}

/** The same API, the encoder living in the worker; `send(op, args, hooks)` as in index.js. */
export class WorkerEmbedModel {
  #handle;
  #send;
  #dim;
  #backend;

  constructor(handle, dim, send, backend) {
    this.#handle = handle;
    this.#dim = dim;
    this.#send = send;
    this.#backend = backend;
  }

  #args(extra = {}) {
    if (this.#handle === null) throw new WeftError('DISPOSED', 'the model was disposed');
    return { model: this.#handle, ...extra };
  }

  get task() {
    return 'embed';
  }

  get dim() {
    return this.#dim;
  }

  get backend() {
    return this.#backend;
  }

  async embed(texts, options = {}) {
    const [list, { onProgress, ...rest }] = embedArgs(texts, options);
    return this.#send('embed', this.#args({ texts: list, options: rest }), { onProgress: onProgress ?? (() => {}) })[1];
  }

  tokenize(text) {
    return this.#send('embedTokenize', this.#args({ text: String(text) }))[1];
  }

  async dispose() {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    await this.#send('dispose', { model: handle })[1];
  }
}
