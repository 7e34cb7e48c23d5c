// An OpenAI-style client over a loaded weft model, for code written against OpenAI's JavaScript
// client: `client.chat.completions.create({ messages, stream, max_tokens, temperature, top_p,
// seed, stop })` resolves to a `chat.completion` object, or with `stream: true` to an async
// iterable of `chat.completion.chunk` objects, in the shapes OpenAI's API returns. The model's
// chat template renders the messages; generation runs through `model.chatStream`.
import { WeftError } from './direct.js';

const KEYS = new Set(['model', 'messages', 'stream', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'seed', 'stop', 'n', 'signal']);
const ROLES = new Set(['system', 'user', 'assistant']);

function invalid(message) {
  return new WeftError('INVALID_ARGUMENT', message);
}

/** The request's fields checked and turned into chatStream options and stop strings. */
function parseRequest(params) {
  if (params === null || typeof params !== 'object') throw invalid('create() takes a request object');
  for (const key of Object.keys(params)) {
    if (!KEYS.has(key)) throw invalid(`unknown request field '${key}'; the fields are ${[...KEYS].join(', ')}`);
  }
  const { messages, stream = false, temperature = 1, top_p: topP, seed, stop, n = 1, signal } = params;
  if (!Array.isArray(messages) || messages.length === 0) throw invalid("'messages' must be a non-empty array");
  for (const m of messages) {
    if (!m || !ROLES.has(m.role) || typeof m.content !== 'string') {
      throw invalid("each message must be { role: 'system' | 'user' | 'assistant', content: string }");
    }
  }
  if (n !== 1) throw invalid("'n' must be 1: one choice per request");
  if (typeof stream !== 'boolean') throw invalid("'stream' must be a boolean");
  const stops = stop === undefined || stop === null ? [] : Array.isArray(stop) ? stop : [stop];
  if (stops.length > 4 || stops.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw invalid("'stop' must be a non-empty string or an array of up to 4 of them");
  }
  const maxTokens = params.max_completion_tokens ?? params.max_tokens;
  const options = { temperature };
  if (maxTokens !== undefined && maxTokens !== null) options.maxTokens = maxTokens;
  if (topP !== undefined) options.topP = topP;
  if (seed !== undefined) options.seed = seed;
  if (signal !== undefined) options.signal = signal;
  return { messages: messages.map(({ role, content }) => ({ role, content })), stream, stops, options };
}

/** Text of a generation cut at the first stop string; what may still begin one is held back. */
class StopScanner {
  constructor(stops) {
    this.stops = stops;
    this.text = '';
    this.sent = 0;
    this.stopped = false;
  }

  /** Adds `piece`; returns the text now safe to emit. */
  push(piece) {
    this.text += piece;
    let end = this.text.length;
    for (const s of this.stops) {
      // Text already sent never ends in the start of a stop string, so none begins before it.
      const at = this.text.indexOf(s, this.sent);
      if (at >= 0 && at < end) {
        end = at;
        this.stopped = true;
      }
    }
    if (this.stopped) {
      this.text = this.text.slice(0, end);
    } else {
      // Keep back the longest tail that is a prefix of a stop string.
      for (const s of this.stops) {
        for (let k = Math.min(s.length - 1, this.text.length - this.sent); k > 0; k--) {
          if (this.text.endsWith(s.slice(0, k))) {
            end = Math.min(end, this.text.length - k);
            break;
          }
        }
      }
    }
    const out = this.text.slice(this.sent, end);
    this.sent = end;
    return out;
  }

  /** The text held back, at the end of a generation that did not stop on a string. */
  flush() {
    const out = this.text.slice(this.sent);
    this.sent = this.text.length;
    return out;
  }
}

let serial = 0;
function completionId() {
  serial += 1;
  return `chatcmpl-weft-${Date.now().toString(36)}-${serial}`;
}

/** A client whose `chat.completions.create` runs on `model` (a loaded weft Model); `name` is
 * the `model` field of the responses. */
export function openai(model, { name = 'weft' } = {}) {
  /** The generation as pieces of text and, at the end, the finish reason and token counts. */
  async function* run(req) {
    const scanner = new StopScanner(req.stops);
    let tokens = 0;
    let finish = 'length';
    for await (const chunk of model.chatStream(req.messages, req.options)) {
      tokens += 1;
      const text = scanner.push(chunk.text);
      if (text) yield { text };
      if (scanner.stopped || chunk.done) {
        finish = 'stop';
        // Leaving the loop ends the generation in the model (the iterator is dropped).
        break;
      }
    }
    if (!scanner.stopped) {
      const rest = scanner.flush();
      if (rest) yield { text: rest };
    }
    const stats = await model.stats();
    yield { finish, usage: { prompt_tokens: stats.promptTokens, completion_tokens: tokens, total_tokens: stats.promptTokens + tokens } };
  }

  function envelope(object) {
    return { id: completionId(), object, created: Math.floor(Date.now() / 1000), model: name };
  }

  async function complete(req) {
    let content = '';
    let end;
    for await (const part of run(req)) {
      if (part.text !== undefined) content += part.text;
      else end = part;
    }
    return {
      ...envelope('chat.completion'),
      choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: end.finish }],
      usage: end.usage,
    };
  }

  async function* streamChunks(req) {
    const base = envelope('chat.completion.chunk');
    const chunk = (delta, finish) => ({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    yield chunk({ role: 'assistant', content: '' }, null);
    for await (const part of run(req)) {
      if (part.text !== undefined) yield chunk({ content: part.text }, null);
      else yield chunk({}, part.finish);
    }
  }

  return {
    chat: {
      completions: {
        /** A chat.completion, or with `stream: true` an async iterable of chunks. */
        async create(params) {
          const req = parseRequest(params);
          return req.stream ? streamChunks(req) : complete(req);
        },
      },
    },
  };
}
