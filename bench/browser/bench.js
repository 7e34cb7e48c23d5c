// One benchmark per call, same model file, same prompt text, greedy: prompt tokens/s, decode
// tokens/s and time to first token as each engine reports them.
const log = (line) => { document.getElementById('log').textContent += `\n${line}`; };

async function weft({ model, prompt, gen }) {
  const api = await import('/js/index.js');
  await api.init();
  const caps = await api.capabilities();
  const t0 = performance.now();
  const m = await api.loadModel(model, { maxContext: 512, cache: false });
  const loadMs = performance.now() - t0;
  let text = '';
  // One untimed token compiles the prefill and decode pipelines.
  for await (const c of m.generate('Hello', { maxTokens: 2 })) text += c.text;
  text = '';
  for await (const c of m.generate(prompt, { maxTokens: gen })) text += c.text;
  const s = await m.stats();
  await m.dispose();
  return {
    engine: 'weft',
    adapter: caps.adapterName,
    loadMs,
    promptTokens: s.promptTokens,
    generated: s.generatedTokens,
    prefillTokS: s.prefillTokensPerSecond,
    decodeTokS: s.tokensPerSecond,
    ttftMs: s.timeToFirstTokenMs,
    text,
  };
}

async function wllama({ model, prompt, gen, threads }) {
  const { Wllama } = await import('/wllama/index.js');
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' });
  const t0 = performance.now();
  await w.loadModelFromUrl(new URL(model, location.href).href, {
    n_ctx: 512,
    n_threads: threads,
    n_gpu_layers: 0,
  });
  const loadMs = performance.now() - t0;
  await w.createCompletion({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
  const r = await w.createCompletion({ prompt, max_tokens: gen, temperature: 0 });
  const t = r.timings;
  const multithread = w.isMultithread();
  const usedThreads = w.getNumThreads();
  await w.exit();
  return {
    engine: 'wllama',
    threads: usedThreads,
    multithread,
    loadMs,
    promptTokens: t?.prompt_n,
    generated: t?.predicted_n,
    prefillTokS: t?.prompt_per_second,
    decodeTokS: t?.predicted_per_second,
    ttftMs: t?.prompt_ms,
    text: r.choices?.[0]?.text ?? '',
  };
}

window.bench = async (engine, options) => {
  log(`${engine}: running`);
  const result = engine === 'weft' ? await weft(options) : await wllama(options);
  log(JSON.stringify(result));
  return result;
};
