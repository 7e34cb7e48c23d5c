// The Web Worker behind index.js: runs the in-thread API (direct.js) and answers messages
// {id, op, args}. Replies are {id, result} or {id, error}; a load streams {id, progress}, a
// generation {id, chunk}; {id: null, event} reports a lost device.
import * as weft from './direct.js';

const models = new Map();
const controllers = new Map();
let nextModel = 1;

function errorData(e) {
  const err = weft.toWeftError(e);
  const out = { message: err.message, code: err.code };
  for (const k of ['url', 'start', 'end', 'status', 'needed', 'available', 'tokens', 'context']) if (err[k] !== undefined) out[k] = err[k];
  return out;
}

function model(handle) {
  const m = models.get(handle);
  if (!m) throw new weft.WeftError('DISPOSED', 'the model was disposed');
  return m;
}

function controllerFor(id) {
  const c = new AbortController();
  controllers.set(id, c);
  return c;
}

const ops = {
  init: (args) => weft.init(args),
  capabilities: () => weft.capabilities(),
  clearCache: () => weft.clearCache(),
  wasmMemoryBytes: () => weft.wasmMemoryBytes(),
  cpuSelfTest: ({ seed }) => weft.cpuSelfTest(seed),
  cachedModels: () => weft.cachedModels(),
  deleteCachedModel: ({ url }) => weft.deleteCachedModel(url),

  async load({ url, options, cancellable }, id) {
    const opts = { ...options };
    if (cancellable) opts.signal = controllerFor(id).signal;
    opts.onProgress = (progress) => postMessage({ id, progress });
    // Options the page sent as undefined arrive as undefined: drop them like the page would.
    for (const k of Object.keys(opts)) if (opts[k] === undefined) delete opts[k];
    const m = await weft.loadModel(url, opts);
    const handle = nextModel++;
    models.set(handle, m);
    if (opts.task === 'embed') return { model: handle, dim: m.dim, backend: m.backend };
    m.addEventListener('devicelost', (e) => postMessage({ id: null, event: 'devicelost', model: handle, error: errorData(e.error) }));
    return handle;
  },

  async generate({ model: handle, prompt, messages, options }, id) {
    const signal = controllerFor(id).signal;
    const m = model(handle);
    const chunks = messages !== undefined ? m.chatStream(messages, { ...options, signal }) : m.generate(prompt, { ...options, signal });
    for await (const chunk of chunks) {
      postMessage({ id, chunk });
    }
    return null;
  },

  async embed({ model: handle, texts, options }, id) {
    const list = await model(handle).embed(texts, { ...options, onProgress: (progress) => postMessage({ id, progress }) });
    return { value: list, transfer: list.map((v) => v.buffer) };
  },
  embedTokenize: ({ model: handle, text }) => model(handle).tokenize(text),

  chatPrompt: ({ model: handle, messages }) => model(handle).chatPrompt(messages),
  chatIds: ({ model: handle, messages }) => model(handle).chatIds(messages),
  encode: ({ model: handle, text }) => model(handle).encode(text),
  decode: ({ model: handle, ids }) => model(handle).decode(ids),
  stats: ({ model: handle }) => model(handle).stats(),
  profileStep: ({ model: handle, reps }) => model(handle).profileStep(reps),
  destroyDevice: ({ model: handle }) => model(handle).destroyDevice(),

  async checkpoints({ model: handle, ids }) {
    const list = await model(handle).checkpoints(ids);
    return { value: list, transfer: list.map((c) => c.data.buffer) };
  },

  dispose({ model: handle }) {
    models.get(handle)?.dispose();
    models.delete(handle);
    return null;
  },

  abort({ target }) {
    controllers.get(target)?.abort();
    return null;
  },
};

self.onmessage = async ({ data }) => {
  const { id, op, args } = data;
  try {
    const fn = ops[op];
    if (!fn) throw new weft.WeftError('INVALID_ARGUMENT', `unknown operation '${op}'`);
    const result = await fn(args ?? {}, id);
    if (result && typeof result === 'object' && 'transfer' in result && 'value' in result) {
      postMessage({ id, result: result.value }, result.transfer);
    } else {
      postMessage({ id, result });
    }
  } catch (e) {
    postMessage({ id, error: errorData(e) });
  } finally {
    controllers.delete(id);
  }
};
