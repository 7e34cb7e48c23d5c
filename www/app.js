// The chat demo: loads a model (a preset, or any GGUF, weft file or Hugging Face folder URL) through
// weft's worker-backed API and streams replies.
import * as weft from './js/index.js';

const $ = (id) => document.getElementById(id);

// Mild sampling: greedy decoding makes a 135M model repeat itself within a few sentences.
const SAMPLING = { temperature: 0.3, topP: 0.9, repeatPenalty: 1.1 };

const state = { model: null, messages: [], generation: null, loading: false, context: 0 };

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const yes = (b) => (b ? 'yes' : 'no');
const duration = (ms) => (ms < 10_000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(1)} s`);

function fill(dl, rows) {
  dl.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    dl.append(dt, dd);
  }
}

function setLoadState(text, kind) {
  $('load-state').textContent = text;
  $('load-state').dataset.state = kind;
}

/** Without WebGPU the CPU backend still runs: the WebGPU choice is disabled, auto means CPU. */
function showNoWebGPU(detail) {
  $('no-webgpu').hidden = false;
  if (detail) $('no-webgpu-detail').textContent = `${detail} Models run on the CPU backend instead.`;
  $('caps-state').textContent = 'No WebGPU adapter.';
  $('backend').querySelector('option[value="webgpu"]').disabled = true;
}

/** Which backend `auto` takes here, and why (the rule of init's `backend: 'auto'`). */
function renderAuto(caps) {
  const why = !caps.webgpu ? 'no WebGPU adapter' : caps.isSoftware ? 'the adapter is a software one' : 'a hardware adapter';
  $('auto-state').textContent = `auto runs on ${caps.selectedBackend === 'cpu' ? 'the CPU' : 'WebGPU'} (${why}); ` +
    `CPU kernels: ${caps.cpu?.simd ?? 'scalar'}, ${caps.cpu?.threads ?? 1} thread${caps.cpu?.threads > 1 ? 's' : ''}.`;
  $('auto-state').dataset.backend = caps.selectedBackend;
}

function renderCaps(caps) {
  $('caps-state').textContent = caps.isSoftware
    ? 'Software rendering (CPU emulation): correct, but slow.'
    : 'Hardware GPU.';
  $('caps-state').dataset.kind = caps.isSoftware ? 'software' : 'hardware';
  const l = caps.limits;
  fill($('caps'), [
    ['adapter', caps.adapterName || caps.architecture || '(not reported)'],
    ['vendor', caps.vendor || '(not reported)'],
    ['kind', caps.isSoftware ? 'software' : 'hardware'],
    ['shader-f16', yes(caps.shaderF16)],
    ['subgroups', yes(caps.subgroups)],
    ['max storage binding', mib(l.maxStorageBufferBindingSize)],
    ['max buffer', mib(l.maxBufferSize)],
    ['max workgroup storage', `${(l.maxComputeWorkgroupStorageSize / 1024).toFixed(0)} KiB`],
    ['max invocations / group', String(l.maxComputeInvocationsPerWorkgroup)],
  ]);
}

function cacheText(load, cacheOn) {
  const whole = load.streamedWholeBody ? ' (the server ignored Range: streamed the whole file)' : '';
  if (!cacheOn) return `off — fetched ${mib(load.bytesFetched)}${whole}`;
  if (load.cacheHits > 0 && load.cacheMisses === 0) return `warm — all ${load.cacheHits} ranges from the cache`;
  if (load.cacheHits === 0) return `cold — fetched ${mib(load.bytesFetched)} in ${load.requests} requests${whole}`;
  return `partly warm — ${load.cacheHits} ranges cached, ${load.cacheMisses} fetched`;
}

async function showFigures() {
  const s = await state.model.stats();
  const set = (id, text) => {
    $(id).textContent = text;
    $(id).dataset.ready = 'true';
  };
  if (s.generatedTokens > 0) {
    set('fig-ttft', duration(s.timeToFirstTokenMs));
    set('fig-decode', `${s.tokensPerSecond.toFixed(2)} tok/s`);
    // A turn extending the conversation runs only its new tokens: the rest is in the KV cache.
    const reused = s.promptTokens - s.prefillTokens;
    const ran = reused > 0 ? `${s.prefillTokens} new of ${s.promptTokens} tokens` : `${s.promptTokens} tokens`;
    set('fig-prefill', `${s.prefillTokensPerSecond.toFixed(1)} tok/s (${ran})`);
  }
  set('fig-backend', s.backend === 'cpu' ? 'CPU (wasm)' : 'WebGPU');
  const held = s.backend === 'cpu' ? 'wasm memory' : 'GPU';
  set('fig-gpu', `${mib(s.backend === 'cpu' ? s.weightBytes : s.gpuBytes)} on ${held} (weights ${mib(s.weightBytes)})`);
  set('fig-load', `${(s.load.loadMs / 1000).toFixed(1)} s`);
  set('fig-wasm', mib(s.wasmMemoryBytes));
  return s;
}

/** The file's name, or a folder's: `…/ORG/NAME/resolve/main/` is NAME. */
function modelName(url) {
  const parts = url.split('?')[0].split('/').filter(Boolean);
  const resolve = parts.lastIndexOf('resolve');
  return resolve > 0 ? parts[resolve - 1] : parts.pop() ?? url;
}

/** What quantizing at load chose: matrices per format. */
function quantText(quantized) {
  if (!quantized?.length) return 'as stored in the file';
  const counts = new Map();
  for (const q of quantized) counts.set(q.format, (counts.get(q.format) ?? 0) + 1);
  return `quantized at load: ${[...counts].map(([f, n]) => `${n} × ${f}`).join(', ')}`;
}

/** A preset fills the URL and its quantization; editing the URL picks "another URL". */
function pickPreset() {
  const option = $('model-preset').selectedOptions[0];
  if (!option.value) return;
  $('model-url').value = option.value;
  $('quantize').value = option.dataset.quantize;
  $('model-url').focus();
}

function onProgress(p) {
  const bar = $('progress');
  const text = $('progress-text');
  if (p.phase === 'header') {
    bar.value = 0;
    text.textContent = 'Reading the header and the tokenizer…';
  } else if (p.phase === 'weights') {
    bar.value = p.bytesTotal ? p.bytesLoaded / p.bytesTotal : 0;
    text.textContent = `${mib(p.bytesLoaded)} of ${mib(p.bytesTotal)} · layer group ${p.step} of ${p.steps}`;
  } else if (p.phase === 'compile') {
    bar.removeAttribute('value');
    text.textContent = 'Compiling shaders…';
  } else if (p.phase === 'ready') {
    bar.value = 1;
    text.textContent = `${mib(p.bytesTotal)} loaded.`;
  }
  setLoadState(p.phase === 'compile' ? 'Compiling…' : p.phase === 'ready' ? 'Ready.' : 'Loading…', 'loading');
}

function setChatEnabled(on) {
  $('prompt').disabled = !on;
  $('send').disabled = !on;
  $('new-chat').disabled = !state.model;
}

/** Half the device's memory (`navigator.deviceMemory`, GB, where the browser tells) as the
 * model's memory budget in MB, so a model that cannot fit is refused before it downloads; a page
 * can add `?budget=MB` to set it. */
function memoryBudgetMB() {
  const asked = Number(new URLSearchParams(location.search).get('budget'));
  if (asked > 0) return asked;
  const gb = navigator.deviceMemory;
  return typeof gb === 'number' && gb > 0 ? gb * 500 : undefined;
}

async function load(event) {
  event.preventDefault();
  if (state.loading) return;
  state.loading = true;
  state.generation?.abort();
  $('load').disabled = true;
  setChatEnabled(false);
  $('progress-box').hidden = false;
  $('cache-state').textContent = '—';
  const url = $('model-url').value.trim();
  const cacheOn = $('use-cache').checked;
  try {
    if (state.model) {
      const old = state.model;
      state.model = null;
      await old.dispose();
    }
    setLoadState('Loading…', 'loading');
    const budget = memoryBudgetMB();
    const backend = $('backend').value;
    const quantize = $('quantize').value;
    const model = await weft.loadModel(url, {
      backend,
      ...(quantize !== 'none' ? { quantize } : {}),
      kv: $('kv').value,
      // The decode GEMVs' inputs at 8 bits (a hardware GPU's WebGPU backend; the CPU keeps f32).
      ...($('precision').value === 'int8' ? { activations: 'int8' } : {}),
      maxContext: Number($('max-context').value),
      cache: cacheOn,
      onProgress,
      ...(budget ? { memoryBudgetMB: budget } : {}),
    });
    model.addEventListener('devicelost', () => {
      if (state.model !== model) return;
      state.model = null;
      setChatEnabled(false);
      setLoadState('The GPU device was lost. Load the model again.', 'error');
    });
    state.model = model;
    const s = await showFigures();
    state.context = s.contextLength;
    $('cache-state').textContent = cacheText(s.load, cacheOn);
    $('arch-state').textContent = s.architecture;
    $('quant-state').textContent = quantText(s.load.quantized);
    $('model-name').textContent = modelName(url);
    const on = s.backend === 'cpu' ? 'the CPU' : s.activations === 'int8' ? 'WebGPU with 8-bit activations' : 'WebGPU';
    setLoadState(`Ready on ${on}: ${mib(s.load.fileBytes)} file, ${s.contextLength} positions of context.`, 'ready');
    $('empty-hint').textContent = 'Ask something. Replies stream token by token.';
    setChatEnabled(true);
    $('prompt').focus();
  } catch (e) {
    if (e.code === 'GPU_OOM' && e.available !== undefined) {
      setLoadState(
        `This model does not fit this device: it needs ${mib(e.needed)} of GPU memory (weights, KV cache and ` +
          `activations) and ${mib(e.available)} is available. No weights were downloaded. Try a smaller maximum ` +
          'context, the q8 KV cache, or a smaller model.',
        'error',
      );
    } else {
      setLoadState(`Load failed (${e.code ?? 'ERROR'}): ${e.message}`, 'error');
    }
  } finally {
    state.loading = false;
    $('load').disabled = false;
  }
}

function bubble(role, text) {
  $('empty-hint').hidden = true;
  const li = document.createElement('li');
  li.className = `msg ${role}`;
  const body = document.createElement('div');
  body.className = 'text';
  body.textContent = text;
  li.append(body);
  $('messages').append(li);
  li.scrollIntoView({ block: 'end' });
  return li;
}

async function send(event) {
  event.preventDefault();
  const content = $('prompt').value.trim();
  if (!content || !state.model || state.generation) return;
  $('prompt').value = '';
  state.messages.push({ role: 'user', content });
  bubble('user', content);
  const li = bubble('assistant', '');
  li.classList.add('streaming');
  const body = li.querySelector('.text');
  const meta = document.createElement('div');
  meta.className = 'meta';
  li.append(meta);

  const controller = new AbortController();
  state.generation = controller;
  $('send').disabled = true;
  $('stop').hidden = false;
  let reply = '';
  let tokens = 0;
  let first = 0;
  const sent = performance.now();
  const maxTokens = Math.max(1, Number($('max-tokens').value) || 256);
  let dropped = 0;
  try {
    const fitted = await fitToContext(state.model, state.messages, Math.min(maxTokens, Math.floor(state.context / 4)));
    dropped = fitted.dropped;
    li.dataset.dropped = String(dropped);
    for await (const chunk of state.model.chatStream(fitted.messages, { ...SAMPLING, maxTokens, signal: controller.signal })) {
      tokens++;
      // Live figures as the page sees them; the worker's exact ones replace them at the end.
      if (tokens === 1) {
        first = performance.now();
        $('fig-ttft').textContent = duration(first - sent);
      }
      reply += chunk.text;
      body.textContent = reply;
      const rate = ((tokens - 1) / (performance.now() - first)) * 1000;
      meta.textContent = tokens > 1 ? `${tokens} tokens · ${rate.toFixed(2)} tok/s` : '1 token';
      if (tokens > 1) $('fig-decode').textContent = `${rate.toFixed(2)} tok/s`;
      li.scrollIntoView({ block: 'end' });
    }
  } catch (e) {
    if (e.code === 'ABORTED') {
      li.classList.add('stopped');
    } else {
      li.classList.add('failed');
      meta.textContent = `Error (${e.code ?? 'ERROR'}): ${e.message}`;
    }
  } finally {
    li.classList.remove('streaming');
    state.generation = null;
    $('stop').hidden = true;
  }
  state.messages.push({ role: 'assistant', content: reply });
  if (!state.model) return;
  try {
    const s = await showFigures();
    const left = dropped ? ` · ${dropped} earlier message${dropped > 1 ? 's' : ''} left out to fit the context` : '';
    const suffix = (li.classList.contains('stopped') ? ' · stopped' : '') + left;
    if (!li.classList.contains('failed')) meta.textContent = `${s.generatedTokens} tokens · ${s.tokensPerSecond.toFixed(2)} tok/s${suffix}`;
  } catch {
    // The figures stay as they were; a lost device is reported by its own event.
  }
  setChatEnabled(true);
}

// The messages to send: the oldest turns are left out until the prompt fits the context with
// room for `reserve` reply tokens (past the context generation goes on over a sliding window,
// but a prompt longer than the context is refused). A system message and the newest user
// message always stay.
async function fitToContext(model, messages, reserve) {
  const budget = Math.max(1, state.context - reserve);
  const system = messages[0]?.role === 'system' ? [messages[0]] : [];
  let rest = messages.slice(system.length);
  for (;;) {
    const tokens = (await model.encode(await model.chatPrompt([...system, ...rest]))).length;
    if (tokens <= budget || rest.length <= 1) {
      return { messages: [...system, ...rest], dropped: messages.length - system.length - rest.length };
    }
    // The oldest turn: a user message and the reply to it.
    rest = rest.slice(rest[1]?.role === 'assistant' ? 2 : 1);
  }
}

function newChat() {
  state.generation?.abort();
  state.messages = [];
  $('messages').replaceChildren($('empty-hint'));
  $('empty-hint').hidden = false;
  $('prompt').focus();
}

async function clearCache() {
  await weft.clearCache();
  $('cache-state').textContent = 'cleared — the next load is cold';
}

async function main() {
  $('model-form').addEventListener('submit', load);
  $('model-preset').addEventListener('change', pickPreset);
  $('model-url').addEventListener('input', () => {
    const preset = [...$('model-preset').options].find((o) => o.value === $('model-url').value.trim());
    $('model-preset').value = preset ? preset.value : '';
  });
  $('composer').addEventListener('submit', send);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) send(e);
  });
  $('stop').addEventListener('click', () => state.generation?.abort());
  $('new-chat').addEventListener('click', newChat);
  $('clear-cache').addEventListener('click', () => clearCache().catch((e) => ($('cache-state').textContent = e.message)));

  try {
    await weft.init({ backend: 'auto' });
    // capabilities() never rejects: without a usable adapter it reports webgpu: false, and
    // the CPU backend in every case.
    const caps = await weft.capabilities();
    renderAuto(caps);
    if (!navigator.gpu) showNoWebGPU();
    else if (!caps.webgpu) showNoWebGPU(`WebGPU is present but no adapter could be used (${caps.code ?? 'ERROR'}): ${caps.reason}.`);
    else renderCaps(caps);
    $('load').disabled = false;
    $('clear-cache').disabled = false;
    setLoadState('Not loaded. Press Load to fetch the model.', 'idle');
  } catch (e) {
    setLoadState(`weft did not start (${e.code ?? 'ERROR'}): ${e.message}`, 'error');
  }
}

main();
