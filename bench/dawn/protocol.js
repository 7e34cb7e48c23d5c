// The timing protocol of the JS API's benchmarks, shared by bench/dawn/run.mjs (Dawn under Node)
// and bench/dawn/page.js (a browser's own WebGPU): the protocol of `weft bench --prompt-len 128
// --gen 128 --reps 3`, with text prompts (the API takes text). reps + 1 prompts of random words,
// each exactly promptLen tokens past what the KV cache reuses (the BOS token the prompts share),
// greedy decoding of gen tokens, the first repetition untimed; medians of the rest (the upper
// middle for an even count, as weft bench). Plain ES module: no Node or DOM APIs.

/** A seeded generator of 32-bit values (mulberry32). */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** A random word: a few letters, or `t` and a number. */
function word(next) {
  if (next() % 2) return `t${next() % 30000}`;
  return Array.from({ length: 2 + (next() % 5) }, () => String.fromCharCode(97 + (next() % 26))).join('');
}

function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/** A text of random words that runs exactly `len` tokens after the ones it shares with `prev`
 * (the ids of the prompt before, which the KV cache then holds): what a tokenizer puts before any
 * text (BOS, SentencePiece's leading "▁") is shared by every prompt and the cache reuses it.
 * The cut is found on characters, by the token count of each prefix, so it needs no decoding.
 * Resolves to { text, ids }. */
export async function promptOf(m, len, prev, seed) {
  const count = async (text) => (await m.encode(text)).length;
  for (let attempt = 0; attempt < 32; attempt++) {
    const next = rng(seed * 1000 + attempt);
    let text = word(next);
    while ((await count(text)) < len + 40) text += ` ${Array.from({ length: 16 }, () => word(next)).join(' ')}`;
    const common = prev ? commonPrefix(prev, await m.encode(text)) : 0;
    if (common > 8) continue;
    const target = len + common;
    let [lo, hi] = [0, text.length];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((await count(text.slice(0, mid))) >= target) hi = mid;
      else lo = mid + 1;
    }
    for (const n of [lo, lo + 1, lo + 2, lo - 1]) {
      const ids = await m.encode(text.slice(0, n));
      if (ids.length === target && (!prev || commonPrefix(prev, ids) === common)) return { text: text.slice(0, n), ids };
    }
  }
  throw new Error(`no text of random words found that runs exactly ${len} tokens past a cached prefix`);
}

/** Greedy ids of `text` through the JS API. */
export async function jsIds(m, text, count) {
  const ids = [];
  for await (const c of m.generate(text, { maxTokens: count, temperature: 0 })) if (c.token >= 0) ids.push(c.token);
  return ids;
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

export const round = (x, digits) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/** One timed generation: the page's view (its clock around the iterator) and the API's stats. */
export async function timedRun(m, prompt, gen) {
  const start = performance.now();
  let first = null;
  let generated = 0;
  for await (const c of m.generate(prompt, { maxTokens: gen, temperature: 0 })) {
    if (c.token < 0) continue;
    first ??= performance.now();
    generated += 1;
  }
  const end = performance.now();
  const s = await m.stats();
  return {
    prefillTokens: s.prefillTokens,
    generated,
    ttftMs: first - start,
    decodeMs: end - first,
    statsPrefill: s.prefillTokensPerSecond,
    statsDecode: s.tokensPerSecond,
  };
}

/** The timed repetitions on model `m` (options promptLen, gen, reps), as `weft bench --json`'s keys
 * where they mean the same; what went wrong with a repetition is pushed onto `problems`. */
export async function timeModel(m, o, problems) {
  const runs = [];
  let prev = null;
  for (let r = 0; r <= o.reps; r++) {
    const p = await promptOf(m, o.promptLen, prev, r + 1);
    runs.push(await timedRun(m, p.text, o.gen));
    prev = p.ids;
  }
  const timed = runs.slice(1);
  for (const [i, r] of timed.entries()) {
    if (r.prefillTokens !== o.promptLen) problems.push(`rep ${i + 1}: the prompt pass ran ${r.prefillTokens} tokens`);
    if (r.generated !== o.gen) problems.push(`rep ${i + 1}: ${r.generated} tokens generated (end of sequence)`);
  }
  const prefill = timed.map((r) => r.prefillTokens / (r.ttftMs / 1e3));
  const decode = timed.map((r) => (r.generated - 1) / (r.decodeMs / 1e3));
  const ttft = timed.map((r) => r.ttftMs);
  const s = await m.stats();
  return {
    prefill_tok_s: prefill.map((x) => round(x, 2)),
    decode_tok_s: decode.map((x) => round(x, 2)),
    ttft_ms: ttft.map((x) => round(x, 2)),
    prefill_tok_s_median: round(median(prefill), 2),
    decode_tok_s_median: round(median(decode), 2),
    ttft_ms_median: round(median(ttft), 2),
    stats_prefill_tok_s_median: round(median(timed.map((r) => r.statsPrefill)), 2),
    stats_decode_tok_s_median: round(median(timed.map((r) => r.statsDecode)), 2),
    prefill_tokens: timed.map((r) => r.prefillTokens),
    generated: timed.map((r) => r.generated),
    weight_bytes: s.weightBytes,
    gpu_bytes: s.gpuBytes,
    decode_weight_gb_s: round((s.weightBytes * median(decode)) / 1e9, 3),
    kv: 'f32',
    activations: s.activations,
  };
}
