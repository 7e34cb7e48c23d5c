// The page side of bench/browser/run.mjs. Every engine gets the same model file, the same prompt
// texts (one per repetition, each exactly `promptLen` tokens under the model's tokenizer) and
// greedy decoding of `gen` tokens. Repetition 0 is untimed: it compiles pipelines and warms caches.
//
// Per timed repetition each engine reports, from its own clock:
//   promptTokens  tokens in the prompt it ran
//   generated     tokens it produced (the first one comes out of the prompt pass)
//   ttftMs        from the start of the prompt pass to the first token picked (weft also counts
//                 tokenizing the prompt, a fraction of a millisecond)
//   decodeMs      the generated - 1 single-token steps after that, each one a forward pass and
//                 the pick of the next token
const log = (line) => { document.getElementById('log').textContent += `\n${line}`; };

/** `count` prompt texts, each `promptLen` tokens under weft's tokenizer of `model`. Text r starts
 * at sentence r of `source`, so no two repetitions share a prefix (no engine can reuse a cache). */
window.makePrompts = async ({ model, source, promptLen, count }) => {
  const api = await import('/js/index.js');
  await api.init();
  const m = await api.loadModel(model, { maxContext: 16, cache: false });
  try {
    const sentences = source.match(/[^.!?]+[.!?]+\s*/g);
    const prompts = [];
    for (let r = 0; r < count; r++) {
      const text = [...sentences.slice(r % sentences.length), ...sentences].join('');
      const ids = await m.encode(text);
      if (ids.length < promptLen + 2) throw new Error(`the source text has only ${ids.length} tokens`);
      // Decoding a prefix of ids and encoding it again gives the same ids almost always; search
      // nearby cuts for the rare case where a merge across the cut changes the count.
      let found = null;
      for (const k of [0, 1, -1, 2, -2, 3, -3].map((d) => promptLen + d)) {
        const t = await m.decode(ids.slice(0, k));
        if ((await m.encode(t)).length === promptLen) {
          found = t;
          break;
        }
      }
      if (found === null) throw new Error(`no prefix of prompt ${r} is exactly ${promptLen} tokens`);
      prompts.push(found);
    }
    return prompts;
  } finally {
    await m.dispose();
  }
};

/** weft on one backend: 'webgpu' (the engine named `weft`) or 'cpu' with `threads` threads
 * (`weft-cpu`: the threaded build, as many as wllama has; `weft-cpu-1`: the single-thread one). */
async function weft({ model, prompts, gen, maxContext }, backend, threads) {
  const api = await import('/js/index.js');
  await api.init(threads ? { threads } : {});
  let caps = await api.capabilities();
  // The pool's workers join as they start.
  for (let i = 0; i < 100 && backend === 'cpu' && caps.cpu.threads < threads; i++) {
    await new Promise((r) => setTimeout(r, 50));
    caps = await api.capabilities();
  }
  const t0 = performance.now();
  const m = await api.loadModel(model, { maxContext, cache: false, backend });
  const loadMs = performance.now() - t0;
  const reps = [];
  try {
    for (const [i, prompt] of prompts.entries()) {
      let text = '';
      // The page's own clock as well: it also counts the worker's messages.
      const start = performance.now();
      let first = null;
      for await (const c of m.generate(prompt, { maxTokens: gen, temperature: 0 })) {
        first ??= performance.now();
        text += c.text;
      }
      const end = performance.now();
      const s = await m.stats();
      const decodeMs = s.tokensPerSecond > 0 ? (s.generatedTokens - 1) * 1000 / s.tokensPerSecond : 0;
      const rep = {
        promptTokens: s.promptTokens,
        // A prompt sharing a prefix with the last sequence would run only the rest.
        cachedTokens: s.promptTokens - s.prefillTokens,
        generated: s.generatedTokens,
        ttftMs: s.timeToFirstTokenMs,
        decodeMs,
        pageTtftMs: first - start,
        pageDecodeMs: end - first,
        text,
      };
      log(`weft ${backend} rep ${i}${i === 0 ? ' (warm-up)' : ''}: ${JSON.stringify(rep)}`);
      reps.push(rep);
    }
  } finally {
    await m.dispose();
  }
  return {
    engine: backend === 'cpu' ? (threads === 1 ? 'weft-cpu-1' : 'weft-cpu') : 'weft',
    backend,
    cpu: caps.cpu,
    adapter: { backend: caps.backend, name: caps.adapterName, vendor: caps.vendor, architecture: caps.architecture },
    loadMs,
    reps,
  };
}

async function wllama({ model, prompts, gen, threads, maxContext }) {
  const { Wllama } = await import('/wllama/index.js');
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' });
  const t0 = performance.now();
  await w.loadModelFromUrl(new URL(model, location.href).href, {
    n_ctx: maxContext,
    n_threads: threads,
    n_gpu_layers: 0,
  });
  const loadMs = performance.now() - t0;
  const reps = [];
  try {
    for (const [i, prompt] of prompts.entries()) {
      // llama.cpp's server code (wllama runs it): prompt_ms ends when the first token is
      // sampled, predicted_ms spans from there to the last token (predicted_n - 1 steps).
      const r = await w.createCompletion({ prompt, max_tokens: gen, temperature: 0, cache_prompt: false, ignore_eos: true });
      const t = r.timings ?? {};
      const rep = {
        promptTokens: t.prompt_n,
        cachedTokens: t.cache_n,
        generated: t.predicted_n,
        ttftMs: t.prompt_ms,
        decodeMs: t.predicted_ms,
        text: r.choices?.[0]?.text ?? '',
      };
      log(`wllama rep ${i}${i === 0 ? ' (warm-up)' : ''}: ${JSON.stringify(rep)}`);
      reps.push(rep);
    }
    return { engine: 'wllama', threads: w.getNumThreads(), multithread: w.isMultithread(), loadMs, reps };
  } finally {
    await w.exit();
  }
}

window.bench = async (engine, options) => {
  log(`${engine}: running`);
  if (engine === 'weft') return weft(options, 'webgpu');
  if (engine === 'weft-cpu') return weft(options, 'cpu', options.threads);
  if (engine === 'weft-cpu-1') return weft(options, 'cpu', 1);
  if (engine === 'wllama') return wllama(options);
  throw new Error(`unknown engine ${engine}`);
};
