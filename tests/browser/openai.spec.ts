import { test, expect } from '@playwright/test';

// js/openai.js over SmolLM2 on the CPU backend: a chat.completion and a stream of
// chat.completion.chunk objects in OpenAI's shapes, both with the reply `chat()` gives for the
// same messages (greedy), a stop string that ends the reply before it, and bad requests refused
// with INVALID_ARGUMENT.

const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

test('openai facade: completion, stream chunks, stop strings and refused requests', async ({ page }) => {
  test.setTimeout(300_000);
  await page.goto('/harness.html');
  const r = await page.evaluate(async (model) => {
    const weft = await import('/js/index.js');
    await weft.init({ backend: 'cpu' });
    const m = await weft.loadModel(`${model}?t=openai`, { maxContext: 256, cache: false });
    const client = weft.openai(m, { name: 'smollm2' });
    const messages = [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is the capital of France?' },
    ];
    const reference = await m.chat(messages, { maxTokens: 12, temperature: 0 });
    const completion = await client.chat.completions.create({ model: 'x', messages, max_tokens: 12, temperature: 0 });
    const chunks = [];
    for await (const c of await client.chat.completions.create({ messages, max_tokens: 12, temperature: 0, stream: true })) chunks.push(c);
    // A stop string from the middle of the reply.
    const words = completion.choices[0].message.content.split(' ');
    const stop = ` ${words[2]}`;
    const stopped = await client.chat.completions.create({ messages, max_tokens: 12, temperature: 0, stop: [stop, 'never appears'] });
    // Three tokens, short of the reply's end.
    const short = await client.chat.completions.create({ messages, max_tokens: 3, temperature: 0 });
    const shortChunks = [];
    for await (const c of await client.chat.completions.create({ messages, max_tokens: 3, temperature: 0, stream: true })) shortChunks.push(c);
    const streamedStop = [];
    for await (const c of await client.chat.completions.create({ messages, max_tokens: 12, temperature: 0, stop, stream: true })) streamedStop.push(c);
    const refused = [];
    for (const bad of [{ messages: [] }, { messages, n: 2 }, { messages, frequency_penalty: 1 }, { messages, stop: [''] }]) {
      try {
        await client.chat.completions.create(bad);
        refused.push('accepted');
      } catch (e) {
        refused.push(e.code);
      }
    }
    await m.dispose();
    return { reference, completion, chunks, stop, stopped, streamedStop, short, shortChunks, refused };
  }, MODEL);

  console.log(`reply ${JSON.stringify(r.completion.choices[0].message.content)}; stop ${JSON.stringify(r.stop)} gives ${JSON.stringify(r.stopped.choices[0].message.content)}`);
  const c = r.completion;
  expect(c.object).toBe('chat.completion');
  expect(c.id).toMatch(/^chatcmpl-/);
  expect(c.model).toBe('smollm2');
  expect(Number.isInteger(c.created)).toBe(true);
  expect(c.choices).toHaveLength(1);
  expect(c.choices[0].message).toEqual({ role: 'assistant', content: r.reference });
  // The reply ends with the model's end of turn within 12 tokens.
  expect(c.choices[0].finish_reason).toBe('stop');
  expect(c.usage.completion_tokens).toBeLessThan(12);
  expect(c.usage.total_tokens).toBe(c.usage.prompt_tokens + c.usage.completion_tokens);
  expect(c.usage.prompt_tokens).toBeGreaterThan(10);
  // Cut short by max_tokens: 'length', streamed or not, with the reply's start.
  expect(r.short.choices[0].finish_reason).toBe('length');
  expect(r.short.usage.completion_tokens).toBe(3);
  expect(r.reference.startsWith(r.short.choices[0].message.content)).toBe(true);
  expect(r.short.choices[0].message.content.length).toBeGreaterThan(0);
  expect(r.shortChunks[r.shortChunks.length - 1].choices[0].finish_reason).toBe('length');
  expect(r.shortChunks.map((k) => k.choices[0].delta.content ?? '').join('')).toBe(r.short.choices[0].message.content);

  // The stream: one id, the role first, content deltas adding up to the reply, the finish last.
  expect(new Set(r.chunks.map((k) => k.id)).size).toBe(1);
  expect(r.chunks.every((k) => k.object === 'chat.completion.chunk' && k.choices.length === 1)).toBe(true);
  expect(r.chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
  const last = r.chunks[r.chunks.length - 1].choices[0];
  expect(last).toMatchObject({ delta: {}, finish_reason: 'stop' });
  expect(r.chunks.slice(0, -1).every((k) => k.choices[0].finish_reason === null)).toBe(true);
  expect(r.chunks.map((k) => k.choices[0].delta.content ?? '').join('')).toBe(r.reference);

  // Stop strings: the reply ends before the first one, streamed or not.
  const cut = r.reference.slice(0, r.reference.indexOf(r.stop));
  expect(r.reference.indexOf(r.stop)).toBeGreaterThan(0);
  expect(r.stopped.choices[0]).toMatchObject({ message: { content: cut }, finish_reason: 'stop' });
  expect(r.streamedStop.map((k) => k.choices[0].delta.content ?? '').join('')).toBe(cut);
  expect(r.streamedStop[r.streamedStop.length - 1].choices[0].finish_reason).toBe('stop');

  expect(r.refused).toEqual(['INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT']);
});
