// Types of weft's JavaScript API. index.js (Web Worker) and direct.js (calling thread) share them.

/** Stable error codes:
 * - LOAD_HTTP: the server answered with an error status (`status`, `url`, `start`, `end` set)
 * - LOAD_NETWORK: no response after the retries (connection refused or dropped)
 * - LOAD_RANGE: a response with the wrong Content-Range, total length or body length
 * - LOAD_CHANGED: the file changed on the server during the load (and again on the one retry)
 * - LOAD_ABORTED: the load's AbortSignal fired; ABORTED: a generation's did, or a later
 *   generate() or dispose() on the model ended it
 * - CONTEXT_FULL: the prompt alone is longer than the context (`tokens`, `context` set)
 * - FORMAT: the file is not a model weft reads, or its data cannot be decoded (a damaged
 *   entropy-coded matrix); MODEL: it is, but its contents are inconsistent
 * - TOKENIZER: the tokenizer or chat template failed
 * - GPU_OOM: the GPU ran out of memory (`needed` bytes), or the model does not fit
 *   `memoryBudgetMB` (`needed`, `available`; checked before any weight is fetched); GPU_LIMIT:
 *   one buffer exceeds a limit
 * - MEMORY_LIMIT: the CPU backend's model (weights and KV cache, `needed`) exceeds what the
 *   wasm32 module can address (`available`: 4 GiB); checked before any weight is fetched
 * - DEVICE_LOST: the GPU device was lost; load the model again
 * - UNSUPPORTED: no WebGPU, or an option this build does not support
 * - QUOTA: the browser's storage cannot hold the model's uncached bytes (`needed`, `available`);
 *   nothing was downloaded
 * - INVALID_ARGUMENT, INVALID_STATE, BUSY, DISPOSED, WORKER, GPU, INTERNAL */
export type ErrorCode =
  | 'LOAD_HTTP'
  | 'LOAD_NETWORK'
  | 'LOAD_RANGE'
  | 'LOAD_ABORTED'
  | 'LOAD_CHANGED'
  | 'LOAD'
  | 'ABORTED'
  | 'FORMAT'
  | 'MODEL'
  | 'TOKENIZER'
  | 'CONTEXT_FULL'
  | 'GPU_OOM'
  | 'GPU_LIMIT'
  | 'MEMORY_LIMIT'
  | 'DEVICE_LOST'
  | 'UNSUPPORTED'
  | 'QUOTA'
  | 'INVALID_ARGUMENT'
  | 'INVALID_STATE'
  | 'BUSY'
  | 'DISPOSED'
  | 'WORKER'
  | 'GPU'
  | 'INTERNAL';

export declare class WeftError extends Error {
  readonly code: ErrorCode;
  /** For load errors: the URL, the byte range [start, end) and the HTTP status, where known. */
  readonly url?: string;
  readonly start?: number;
  readonly end?: number;
  readonly status?: number;
  /** For GPU_OOM: bytes the model needs on the GPU; for QUOTA: bytes the cache still needs. */
  readonly needed?: number;
  /** For QUOTA: free bytes in the browser's storage estimate; for GPU_OOM from the check before
   * a load: the memory budget (`memoryBudgetMB` in bytes) or the device's largest buffer. */
  readonly available?: number;
  /** For CONTEXT_FULL: the prompt's tokens and the context's positions. */
  readonly tokens?: number;
  readonly context?: number;
}

export interface InitOptions {
  /** Where weft_bg.wasm is served (default: next to pkg/weft.js). */
  wasmUrl?: string | URL;
  /** Where the threaded build's weft_bg.wasm is served (default: next to pkg-threads/weft.js). */
  wasmThreadsUrl?: string | URL;
  /** Threads of the CPU backend where the page is cross-origin isolated (COOP/COEP: shared
   * memory), which loads the threaded build and starts threads - 1 pool workers; default one
   * per core (navigator.hardwareConcurrency, at most 16). 1, or a page without isolation,
   * loads the single-thread build. */
  threads?: number;
  /** Where worker.js is served (index.js only; default: next to index.js). */
  workerUrl?: string | URL;
  /** 'default' creates the device with WebGPU's default limits only (a `requiredLimits`-free
   * device) instead of the adapter's maxima (default 'adapter'). */
  limits?: 'adapter' | 'default';
  /** 'none' requests no optional feature (shader-f16, subgroups, timestamp-query); 'no-subgroups' all but
   * subgroups; default 'all'. */
  features?: 'all' | 'none' | 'no-subgroups';
  /** 'gpu' gives a software adapter (SwiftShader) the kernel choices of a hardware GPU - launch
   * shapes, repacking, the fused decode GEMVs, 8-bit activations - and makes `backend: 'auto'`
   * take it, to test those kernels where there is no GPU (loads then time no launch shapes);
   * default 'auto'. */
  kernels?: 'auto' | 'gpu';
  /** Where models run: 'auto' (default) takes WebGPU on a hardware adapter and the CPU backend
   * (wasm SIMD128) where there is no adapter or a software one (SwiftShader, llvmpipe);
   * 'webgpu' only WebGPU (loads reject with UNSUPPORTED without it); 'cpu' only the CPU. */
  backend?: 'auto' | 'webgpu' | 'cpu';
}

/** One model file in the Cache API copy. */
export interface CachedModel {
  url: string;
  /** Bytes its cached ranges take (ranges may overlap: the header's reads). */
  bytes: number;
  /** Bytes of the file some cached range holds. */
  coveredBytes: number;
  /** The file's length when it was cached. */
  fileBytes: number;
  ranges: number;
  /** Every byte is cached: a load makes no model-byte requests. */
  complete: boolean;
}

/** With `webgpu: false` only `code` and `reason` are set: capabilities() never rejects. */
export interface Capabilities {
  webgpu: boolean;
  code?: ErrorCode;
  reason?: string;
  backend: string;
  adapterName: string;
  vendor: string;
  architecture: string;
  features: string[];
  limits: Record<string, number>;
  /** Whether `loadModel`'s `activations: 'int8'` runs 8-bit GEMVs on this adapter: the
   * browser's WGSL has dot4I8Packed and the adapter is a hardware GPU (or init's
   * `kernels: 'gpu'`). Absent without WebGPU. */
  int8Activations?: boolean;
  /** The backend a load would run on now (init's `backend` resolved on this adapter); null
   * when it would reject (`backend: 'webgpu'` without WebGPU). Set with or without WebGPU. */
  selectedBackend: 'webgpu' | 'cpu' | null;
  /** The CPU backend, always available: its kernels' instruction set and its threads. */
  cpu: { available: true; simd: 'simd128' | 'scalar' | string; threads: number };
  [key: string]: unknown;
}

/** One CPU kernel of this build against the scalar reference. */
export interface KernelCheck {
  isa: string;
  kernel: string;
  maxErr: number;
  tolerance: number;
  ok: boolean;
}

export type LoadPhase = 'header' | 'weights' | 'compile' | 'ready';

export interface LoadProgress {
  phase: LoadPhase;
  /** Layer groups uploaded (the embedding and the output head count as one each). */
  step: number;
  steps: number;
  bytesLoaded: number;
  bytesTotal: number;
  /** The wasm module's linear memory when the event was sent. */
  wasmMemoryBytes: number;
}

/** Unknown keys are an INVALID_ARGUMENT error naming the key. */
export interface LoadOptions {
  onProgress?: (progress: LoadProgress) => void;
  signal?: AbortSignal;
  /** KV-cache storage: f32 (default), f16 (half the bytes) or q8 (about a quarter). */
  kv?: 'f32' | 'f16' | 'q8';
  /** Positions the KV cache holds (default 2048, at most the model's context). */
  maxContext?: number;
  /** Keep fetched ranges in the Cache API and serve later loads from it (default true). */
  cache?: boolean;
  /** Further attempts after network errors, 5xx, 408 and 429 (default 4). */
  retries?: number;
  /** Delay before the first retry, doubled for each further one (default 200). */
  backoffMs?: number;
  /** The most GPU memory the model may use, in MB (10^6 bytes; a positive finite number): its
   * weights, KV cache (at `maxContext` and `kv`) and activations are checked against it after
   * the header, before any weight is fetched; over it, loadModel rejects with GPU_OOM
   * (`needed`, `available` in bytes). No budget: only the device's buffer limits are checked. */
  memoryBudgetMB?: number;
  /** This load's backend, overriding init's (see InitOptions.backend). */
  backend?: 'auto' | 'webgpu' | 'cpu';
  /** Float matrices (F32, F16, BF16) quantized as their layer arrives, under `weft quantize`'s
   * default keep rules (the embedding and an untied head at 8 bits): 'q4' (q4_g32_asym), 'q8'
   * (q8_g32_asym), 'q3' (q3_g32_asym), a weft format name, or 'none' (default). On the CPU
   * backend the reference quantizer runs in wasm as each matrix arrives (from a folder or a file).
   * 'auto' picks a format per matrix from the header before any weight is fetched, spending
   * what `memoryBudgetMB` leaves after the KV cache, activations and other tensors where the
   * predicted error falls most (role sensitivities of docs/QUALITY.md; 8 bits everywhere
   * without a budget); `stats().load.plan` reports it.
   * The GPU quantizes (see `quantizeOn`; the same bytes as `weft quantize`); a matrix holding NaN or an infinity
   * is FORMAT. `stats().load.quantized` lists each matrix with its format. */
  quantize?: 'q4' | 'q8' | 'q3' | 'auto' | 'none' | string;
  /** Where `quantize` runs: 'auto' (default: the GPU on a hardware adapter, the CPU on a
   * software one such as SwiftShader, where the GPU kernel is several times slower), 'gpu' or
   * 'cpu' (the reference quantizer, in wasm). Both give the same bytes. GGUF blocks (Q4_0,
   * Q8_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) follow it too: a hardware adapter repacks them
   * into weft's layout or their planes on the GPU unless 'cpu' (then in wasm), and 'gpu' repacks them on a software adapter too (which otherwise keeps
   * them as stored). */
  quantizeOn?: 'auto' | 'gpu' | 'cpu';
  /** Read each GPU-quantized matrix back for its digest in `stats().load.quantized` (a copy of
   * the weights; for comparing a load with `weft quantize`). */
  quantizeDigests?: boolean;
  /** 'int8': the decode step's GEMVs quantize their inputs to 8 bits per 32 values and take
   * integer dot products (WGSL's dot4I8Packed): 7B-class models decode about a third faster
   * natively (bench/NOTES.md note 68), at a mean KL divergence of 0.0056 from f32 on
   * SmolLM2. 'f32' (default) keeps them in f32. Applies to the WebGPU backend on a hardware
   * adapter (or with init's `kernels: 'gpu'`); `stats().activations` says which ran. A browser
   * whose WGSL lacks packed_4x8_integer_dot_product rejects it with UNSUPPORTED. */
  activations?: 'f32' | 'int8';
}

/** Unknown keys and values out of range are INVALID_ARGUMENT errors naming the option. */
export interface GenerateOptions {
  /** Most tokens to produce, a positive integer (default 256). */
  maxTokens?: number;
  /** 0 (default) is greedy; else 0.001 to 100. */
  temperature?: number;
  /** Keep the k most likely tokens, an integer; 0 (default) keeps all. */
  topK?: number;
  /** In (0, 1]; 1 (default) keeps all. */
  topP?: number;
  /** 0.01 to 100; 1 (default) is off. */
  repeatPenalty?: number;
  /** An integer from 0 to 2^32 - 1. */
  seed?: number;
  signal?: AbortSignal;
}

export interface Chunk {
  /** The token id (-1 for text held back until the end). */
  token: number;
  /** Text this token completes (may be empty mid-character or for control tokens). */
  text: string;
  /** End of sequence (a full context is not an end: generation goes on over a sliding window). */
  done: boolean;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface Checkpoint {
  name: string;
  shape: number[];
  data: Float32Array;
}

export interface LoadStats {
  url: string;
  fileBytes: number;
  loadMs: number;
  /** HTTP requests made (the HEAD that reads the validator included). */
  requests: number;
  bytesFetched: number;
  cacheHits: number;
  cacheMisses: number;
  /** Cached ranges that failed their length or hash check and were fetched again. */
  cacheRejected: number;
  retries: number;
  /** The server ignored Range, or sent no strong ETag; the body was streamed once instead. */
  streamedWholeBody: boolean;
  /** NO_STRONG_VALIDATOR: the server sent no strong ETag, so the file was read in one
   * streamed GET and nothing was cached. */
  warnings: string[];
  /** The file changed on the server mid-load and was loaded again from the start. */
  reloadedAfterChange: boolean;
  peakWasmMemoryBytes: number;
  /** The matrices `quantize` quantized while loading: the name in the file, the weft format,
   * and the FNV-1a 64 (16 hex digits) of the packed words, scales and zero points as a weft
   * file made by `weft quantize` stores them (on the GPU only with `quantizeDigests`). Empty
   * without `quantize`. */
  quantized: { name: string; format: string; digest?: string }[];
  /** With `quantize: 'auto'`: the budget in bytes (null without one), what the other tensors,
   * KV cache and activations take of it, the matrices' bytes and predicted error (KL divergence),
   * and each matrix's format. */
  plan?: {
    budgetBytes: number | null; fixedBytes: number; matrixBytes: number; predictedError: number;
    assignments: { name: string; format: { bits: number; group: number; scheme: 'sym' | 'asym' }; bytes: number; error: number }[];
  };
}

export interface StepProfile {
  dispatches: number;
  record_submit_ms: number;
  wait_ms: number;
  kernels_us: [string, number, number][];
  /** GPU µs of the whole step in one compute pass (median); null without timestamp queries. */
  pass_us: number | null;
}

export interface Stats {
  load: LoadStats;
  /** Where the model runs. */
  backend: 'webgpu' | 'cpu';
  /** The model's architecture: 'llama', 'qwen2', 'qwen3', 'gemma2', 'gemma3', 'phi3'. */
  architecture: string;
  promptTokens: number;
  /** Prompt tokens the last generation's prompt pass ran: the prompt less the prefix the KV
   * cache already held from the previous generation (a chat turn extending the last one). */
  prefillTokens: number;
  timeToFirstTokenMs: number;
  prefillTokensPerSecond: number;
  generatedTokens: number;
  /** Decode speed of the last generation. */
  tokensPerSecond: number;
  gpuBytes: number;
  weightBytes: number;
  /** 'int8' where the decode step's GEMVs take 8-bit activations (`loadModel`'s `activations:
   * 'int8'` on the WebGPU backend of a hardware adapter), else 'f32'. */
  activations: 'f32' | 'int8';
  /** The KV cache's storage (`loadModel`'s `kv`) and its bytes for `contextLength` positions,
   * on the GPU or in wasm memory. */
  kvFormat: 'f32' | 'f16' | 'q8';
  kvCacheBytes: number;
  contextLength: number;
  wasmMemoryBytes: number;
}

export declare class Model extends EventTarget {
  /** Streams the continuation of `prompt` (special tokens such as <|im_start|> are parsed;
   * an array of token ids runs as it is).
   * Past the context it goes on over a sliding window; a prompt longer than the context is
   * CONTEXT_FULL. A new generate() (or dispose()) ends one still running or left unfinished
   * (by `break`, or an iterator dropped): that one then rejects with ABORTED. */
  generate(prompt: string | number[], options?: GenerateOptions): AsyncGenerator<Chunk, void, void>;
  /** The assistant's reply to `messages`, with the model's chat template applied: the
   * template's special tokens are control tokens, message content is encoded as text (a
   * `<|im_start|>` written in a message stays text and cannot open a turn). */
  chat(messages: ChatMessage[], options?: GenerateOptions): Promise<string>;
  chatStream(messages: ChatMessage[], options?: GenerateOptions): AsyncGenerator<Chunk, void, void>;
  /** The templated prompt as text (for display; `encode` of it would parse special tokens
   * written in messages, which `chat` does not). */
  chatPrompt(messages: ChatMessage[]): Promise<string>;
  /** The token ids `chat` and `chatStream` run for `messages`. */
  chatIds(messages: ChatMessage[]): Promise<number[]>;
  encode(text: string): Promise<number[]>;
  decode(ids: ArrayLike<number>): Promise<string>;
  /** Runs `ids` (at most 64) from an empty context and returns every debug checkpoint:
   * embedding, each block's attention output, MLP output and residual, final norm, logits. */
  checkpoints(ids: ArrayLike<number>): Promise<Checkpoint[]>;
  stats(): Promise<Stats>;
  /** Where a decode step's time goes on the WebGPU backend, after a generation: the step run
   * `reps` times (default 20); `kernels_us` holds [pipeline, µs summed over the step, dispatches]
   * where the device has timestamp queries. Rejects with UNSUPPORTED on the CPU backend and in a
   * wasm build without the `web-profile` feature (the published one). */
  profileStep(reps?: number): Promise<StepProfile>;
  /** Destroys the GPU device as a driver reset would, to exercise recovery. */
  destroyDevice(): Promise<void>;
  dispose(): Promise<void>;
  /** 'devicelost' fires (with `error`, code DEVICE_LOST) when the GPU device is lost. */
  addEventListener(type: 'devicelost', listener: (event: Event & { error: WeftError }) => void): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null): void;
}

export declare function init(options?: InitOptions): Promise<void>;
export declare function capabilities(): Promise<Capabilities>;
/** The CPU backend's SIMD kernels against their scalar reference on `seed`'s data. */
export declare function cpuSelfTest(seed?: number): Promise<{ isa: string; ok: boolean; checks: KernelCheck[] }>;
export declare function loadModel(url: string | URL, options?: LoadOptions): Promise<Model>;
/** A BERT-family sentence encoder from a model folder (config.json, tokenizer.json or
 * vocab.txt, model.safetensors), run on the CPU in the worker. */
export declare function loadModel(url: string | URL, options: EmbedLoadOptions): Promise<EmbedModel>;
/** Deletes every cached model range. */
export declare function clearCache(): Promise<boolean>;
/** The model files in the cache, one entry per file version. */
export declare function cachedModels(): Promise<CachedModel[]>;
/** Deletes every cached range of `url` (resolved against the page); true if any was deleted. */
export declare function deleteCachedModel(url: string | URL): Promise<boolean>;
/** Asks once that the cache be kept under storage pressure (`navigator.storage.persist()`);
 * loadModel calls it without waiting. Resolves to whether it was granted. */
export declare function requestPersistence(): Promise<boolean>;
export declare function wasmMemoryBytes(): Promise<number>;

export interface EmbedLoadOptions {
  task: 'embed';
  /** Bytes of model.safetensors read so far. */
  onProgress?: (p: { bytesLoaded: number; bytesTotal: number }) => void;
  /** Keep the fetched ranges in the Cache API (default true). */
  cache?: boolean;
  /** Quantize the block matrices while loading: 'q8' (q8_g32_sym), 'q4' (q4_g32_asym; the value and up
   * projections stay at q8_g32_sym under any format below 8 bits) or a weft format name. */
  quantize?: string;
  /** Ids per text, [CLS] and [SEP] included (default 256); longer texts are truncated. */
  maxTokens?: number;
  /** 'gpu': WebGPU (UNSUPPORTED without it); 'cpu'; 'auto': the GPU when it is a hardware
   * adapter, else the CPU. Default: init()'s backend ('auto' unless set). */
  backend?: 'gpu' | 'cpu' | 'auto';
}

export interface EmbedOptions {
  /** 'mean' over the text's tokens (default) or the [CLS] token's row. */
  pooling?: 'mean' | 'cls';
  /** L2-normalise each vector (default true). */
  normalize?: boolean;
  /** Texts per pass (default 32). */
  batchSize?: number;
  /** After each pass. */
  onProgress?: (p: { done: number; total: number }) => void;
}

export declare class EmbedModel {
  readonly task: 'embed';
  /** Dimensions of an embedding. */
  readonly dim: number;
  /** Where the passes run. */
  readonly backend: 'gpu' | 'cpu';
  /** One vector per text, in order. */
  embed(texts: string[], options?: EmbedOptions): Promise<Float32Array[]>;
  /** The ids the encoder reads for `text`: [CLS] … [SEP], truncated. */
  tokenize(text: string): Promise<number[]>;
  dispose(): Promise<void>;
}

/** An OpenAI-style client over a loaded model (`js/openai.js`, re-exported here). */
export declare function openai(model: Model, options?: { name?: string }): OpenAIClient;

export interface ChatCompletionRequest {
  messages: { role: 'system' | 'user' | 'assistant'; content: string }[];
  /** Ignored: the client runs the model it was made with. */
  model?: string;
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  /** Default 1, as OpenAI's; 0 is greedy. */
  temperature?: number;
  top_p?: number;
  seed?: number;
  /** Up to 4 strings; the reply ends before the first one that appears (finish_reason 'stop'). */
  stop?: string | string[];
  /** Must be 1. */
  n?: 1;
  signal?: AbortSignal;
}

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  /** Seconds since the epoch. */
  created: number;
  model: string;
  choices: {
    index: 0;
    message: { role: 'assistant'; content: string };
    logprobs: null;
    finish_reason: 'stop' | 'length';
  }[];
  usage: ChatCompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  /** The first chunk's delta opens the assistant's message; the last one is empty and carries
   * the finish reason. */
  choices: {
    index: 0;
    delta: { role?: 'assistant'; content?: string };
    logprobs: null;
    finish_reason: 'stop' | 'length' | null;
  }[];
}

export interface OpenAIClient {
  chat: {
    completions: {
      create(request: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
      create(request: ChatCompletionRequest & { stream?: false }): Promise<ChatCompletion>;
    };
  };
}
