#!/usr/bin/env node
// Static file server for the demo and the browser tests. It honours single HTTP Range requests
// (206 + Content-Range), sends ETag/Last-Modified validators, and keeps a log of the requests it
// served at /__requests so tests can check what a load fetched.
//
//   node scripts/serve.mjs [--port 8080] [--host 127.0.0.1] [--root www]
//                          [--mount /models=models] [--no-range] [--coop]
//
// --no-range answers every request with the whole file, like servers that ignore Range.
// --coop adds the cross-origin isolation headers that threaded wasm needs.
//
// Faults for the loader tests, chosen per request by query parameters (each distinct URL, query
// included, keeps its own count, so a test picks a fresh URL with e.g. &t=NAME):
//   norange=1   ignore Range and send the whole file (200)
//   fail503=K   answer the first K requests for this URL with 503
//   drop=N      cut the connection after N body bytes, once, on the first response longer than N
//   badrange=1  send a Content-Range that starts one byte later than the bytes sent
// A lying server, for the cache-validator tests (version B of a file is version A with the
// middle byte inverted, or with `grow=1` 4096 zero bytes longer; its ETag differs):
//   change=K     requests after the K-th (the HEAD counts) see version B
//   alternate=1  even-numbered requests see version B, odd ones version A (mixed versions)
//   scramble=1   version B is version A with every byte inverted
//   keepetag=1   version B keeps version A's validators (a server whose ETag lies)
//   validator=weak|lm|none  a weak ETag, Last-Modified only, or no validator at all
//   nolength=1   no Content-Length on GET (the body is sent chunked)
//   longbody=N   N bytes more than Content-Length, on a raw socket
//   shortbody=N  N bytes fewer than Content-Length, then the connection is closed
// Each log entry records the version it served (`version: 'a' | 'b'`).
import { createServer } from 'node:http';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';

const args = process.argv.slice(2);
const opt = { port: 8080, host: '127.0.0.1', root: 'www', mounts: [], range: true, coop: false };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--port') opt.port = Number(args[++i]);
  else if (a === '--host') opt.host = args[++i];
  else if (a === '--root') opt.root = args[++i];
  else if (a === '--mount') {
    const [prefix, dir] = args[++i].split('=');
    opt.mounts.push({ prefix: prefix.replace(/\/$/, ''), dir });
  } else if (a === '--no-range') opt.range = false;
  else if (a === '--coop') opt.coop = true;
  else {
    console.error(`unknown argument ${a}`);
    process.exit(2);
  }
}

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.ts': 'text/plain; charset=utf-8',
};

const log = [];
const MAX_LOG = 10000;
// Per-URL fault state: requests seen, and whether the one connection drop has happened. Only
// URLs with a query get one, and the oldest is forgotten past MAX_FAULTS, so a client that
// makes up URLs cannot grow it without bound.
const faults = new Map();
const MAX_FAULTS = 1000;

function faultState(key) {
  let state = faults.get(key);
  if (state) {
    // Most recently used last, so the eviction below drops the stalest URL.
    faults.delete(key);
  } else {
    state = { seen: 0, dropped: false };
  }
  faults.set(key, state);
  while (faults.size > MAX_FAULTS) faults.delete(faults.keys().next().value);
  return state;
}

function resolve(urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  for (const { prefix, dir } of opt.mounts) {
    if (decoded === prefix || decoded.startsWith(prefix + '/')) {
      return safeJoin(dir, decoded.slice(prefix.length));
    }
  }
  return safeJoin(opt.root, decoded);
}

function safeJoin(dir, rel) {
  const base = path.resolve(dir);
  const full = path.resolve(base, '.' + path.posix.normalize('/' + rel));
  return inside(base, full) ? { base, full } : null;
}

function inside(base, full) {
  return full === base || full.startsWith(base + path.sep);
}

// The file's real path if it lies under the real path of its root, else null: a symlink that
// leads out of the root is not served.
async function realInside({ base, full }) {
  try {
    const [realBase, realFull] = await Promise.all([fs.realpath(base), fs.realpath(full)]);
    return inside(realBase, realFull) ? realFull : null;
  } catch {
    return null;
  }
}

// One "bytes=a-b" range (or "a-" or "-n") within a file of `size` bytes, else null.
function parseRange(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start, end;
  if (m[1] === '') {
    const n = Number(m[2]);
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start > end || start >= size) {
    return { unsatisfiable: true };
  }
  return { start, end };
}

// The bytes start..end (inclusive) of a file as version A, or as version B (see the top): the
// middle byte of the original inverted, or zeros past its end when it grew.
async function* fileBytes(file, size, start, end, version) {
  const grown = version === 'b-grow';
  const last = Math.min(end, size - 1);
  if (start <= last) {
    const flip = version === 'b' ? size >> 1 : -1;
    let at = start;
    for await (const chunk of createReadStream(file, { start, end: last })) {
      if (version === 'b-scramble') for (let i = 0; i < chunk.length; i++) chunk[i] ^= 0xff;
      if (flip >= at && flip < at + chunk.length) chunk[flip - at] ^= 0xff;
      at += chunk.length;
      yield chunk;
    }
  }
  if (grown && end >= size) yield Buffer.alloc(end - Math.max(start, size) + 1);
}

async function handle(req, res) {
  let url;
  try {
    url = new URL(req.url, 'http://localhost');
  } catch {
    res.writeHead(400, { 'Content-Type': 'text/plain' });
    res.end('bad request target\n');
    return;
  }
  if (url.pathname === '/__requests') {
    if (req.method === 'DELETE') log.length = 0;
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    res.end(JSON.stringify(log));
    return;
  }
  const entry = { method: req.method, path: url.pathname, range: req.headers.range ?? null, status: 0 };
  if (url.search) entry.query = url.search;
  const q = url.searchParams;
  const state = url.search ? faultState(req.url) : { seen: 0, dropped: false };
  state.seen += 1;
  if (log.length < MAX_LOG) log.push(entry);
  const send = (status, headers, body) => {
    entry.status = status;
    res.writeHead(status, headers);
    res.end(body);
  };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return send(405, { Allow: 'GET, HEAD' }, 'method not allowed\n');
  }
  const resolved = resolve(url.pathname);
  let file = resolved && (await realInside(resolved));
  if (!resolved) return send(400, {}, 'bad path\n');
  if (!file) return send(404, { 'Content-Type': 'text/plain' }, 'not found\n');
  let stat;
  try {
    stat = await fs.stat(file);
    if (stat.isDirectory()) {
      file = await realInside({ base: resolved.base, full: path.join(file, 'index.html') });
      if (!file) throw new Error('not found');
      stat = await fs.stat(file);
    }
    if (!stat.isFile()) throw new Error('not a file');
  } catch {
    return send(404, { 'Content-Type': 'text/plain' }, 'not found\n');
  }
  // Which version this request sees (lying-server faults).
  const changed =
    (q.has('change') && state.seen > Number(q.get('change'))) || (q.has('alternate') && state.seen % 2 === 0);
  const version = changed ? (q.has('grow') ? 'b-grow' : q.has('scramble') ? 'b-scramble' : 'b') : 'a';
  if (q.has('change') || q.has('alternate')) entry.version = changed ? 'b' : 'a';
  const size = stat.size + (version === 'b-grow' ? 4096 : 0);
  // The inode and change time are in the ETag: a file replaced by one of the same size and
  // modification time (cp -p, rsync -a, tar) still gets a new ETag.
  const tag = [stat.size, Math.floor(stat.mtimeMs), Math.floor(stat.ctimeMs), stat.ino].map((n) => n.toString(16)).join('-');
  const versionTag = changed && !q.has('keepetag') ? `${tag}-b` : tag;
  const headers = {
    'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
    ETag: `"${versionTag}"`,
    'Last-Modified': new Date(stat.mtimeMs + (changed && !q.has('keepetag') ? 1000 : 0)).toUTCString(),
    'Cache-Control': 'no-cache',
  };
  const validator = q.get('validator');
  if (validator === 'weak') headers.ETag = `W/${headers.ETag}`;
  if (validator === 'lm' || validator === 'none') delete headers.ETag;
  if (validator === 'none') delete headers['Last-Modified'];
  const honourRange = opt.range && !q.has('norange');
  if (honourRange) headers['Accept-Ranges'] = 'bytes';
  if (state.seen <= Number(q.get('fail503') ?? 0)) {
    return send(503, { 'Retry-After': '0', 'Cache-Control': 'no-store' }, 'try again\n');
  }
  if (opt.coop) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
  }
  let start = 0;
  let end = size - 1;
  let status = 200;
  if (honourRange && req.headers.range) {
    const r = parseRange(req.headers.range, size);
    if (r?.unsatisfiable) {
      return send(416, { ...headers, 'Content-Range': `bytes */${size}` }, '');
    }
    // If-Range: a validator that does not match the current version asks for the whole file.
    const ifRange = req.headers['if-range'];
    const matches = ifRange === undefined || ifRange === headers.ETag || ifRange === headers['Last-Modified'];
    if (r && matches) {
      ({ start, end } = r);
      status = 206;
      headers['Content-Range'] = q.has('badrange') ? `bytes ${start + 1}-${end + 1}/${size}` : `bytes ${start}-${end}/${size}`;
    }
  }
  const length = size === 0 ? 0 : end - start + 1;
  if (!q.has('nolength') || req.method === 'HEAD') headers['Content-Length'] = String(length);
  entry.status = status;
  const longBy = Number(q.get('longbody') ?? 0);
  const shortBy = Number(q.get('shortbody') ?? 0);
  if ((longBy > 0 || shortBy > 0) && req.method === 'GET' && length > shortBy) {
    // Written on the socket itself: Node refuses a body that disagrees with Content-Length.
    const lines = [`HTTP/1.1 ${status} ${status === 206 ? 'Partial Content' : 'OK'}`];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    lines.push('Connection: close', '', '');
    const socket = res.socket;
    res.detachSocket?.(socket);
    socket.write(lines.join('\r\n'));
    entry[longBy ? 'longBy' : 'shortBy'] = longBy || shortBy;
    const stop = end - shortBy;
    for await (const chunk of fileBytes(file, stat.size, start, stop, version)) socket.write(chunk);
    if (longBy) socket.write(Buffer.alloc(longBy, 0x5a));
    socket.end();
    return;
  }
  res.writeHead(status, headers);
  if (req.method === 'HEAD' || size === 0) return res.end();
  const dropAfter = Number(q.get('drop') ?? 0);
  if (dropAfter > 0 && !state.dropped && length > dropAfter) {
    state.dropped = true;
    entry.dropped = dropAfter;
    Readable.from(fileBytes(file, stat.size, start, start + dropAfter - 1, version))
      .on('error', () => res.destroy())
      .on('end', () => res.destroy())
      .pipe(res, { end: false });
    return;
  }
  Readable.from(fileBytes(file, stat.size, start, end, version))
    .on('error', () => res.destroy())
    .pipe(res);
}

const server = createServer((req, res) => {
  // Nothing a client sends may stop the server: a failure ends this response only.
  handle(req, res).catch((e) => {
    if (process.env.WEFT_SERVE_DEBUG) console.error(e);
    if (!res.headersSent) {
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end('internal error\n');
    } else {
      res.destroy();
    }
  });
});
// A client that keeps a connection open for its next request (Playwright's request context,
// browsers) must never find it closed under that request: Node's default 5 s idle timeout races
// with reuse and the client sees ECONNRESET. Idle connections are left to the client to close.
server.keepAliveTimeout = 10 * 60_000;
server.on('clientError', (_err, socket) => {
  if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  else socket.destroy();
});

server.listen(opt.port, opt.host, () => {
  const what = opt.range ? 'with Range support' : 'ignoring Range';
  console.log(`serving ${opt.root} on http://${opt.host}:${opt.port}/ (${what})`);
});
