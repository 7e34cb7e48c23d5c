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
import { createServer } from 'node:http';
import { createReadStream, promises as fs } from 'node:fs';
import path from 'node:path';

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
// Per-URL fault state: requests seen, and whether the one connection drop has happened.
const faults = new Map();

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
  return full === base || full.startsWith(base + path.sep) ? full : null;
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

const server = createServer(async (req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname === '/__requests') {
    if (req.method === 'DELETE') log.length = 0;
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    res.end(JSON.stringify(log));
    return;
  }
  const entry = { method: req.method, path: url.pathname, range: req.headers.range ?? null, status: 0 };
  if (url.search) entry.query = url.search;
  const q = url.searchParams;
  const state = faults.get(req.url) ?? { seen: 0, dropped: false };
  faults.set(req.url, state);
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
  let file = resolve(url.pathname);
  if (!file) return send(400, {}, 'bad path\n');
  let stat;
  try {
    stat = await fs.stat(file);
    if (stat.isDirectory()) {
      file = path.join(file, 'index.html');
      stat = await fs.stat(file);
    }
  } catch {
    return send(404, { 'Content-Type': 'text/plain' }, 'not found\n');
  }
  const headers = {
    'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
    ETag: `"${stat.size.toString(16)}-${Math.floor(stat.mtimeMs).toString(16)}"`,
    'Last-Modified': stat.mtime.toUTCString(),
    'Cache-Control': 'no-cache',
  };
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
  let end = stat.size - 1;
  let status = 200;
  if (honourRange && req.headers.range) {
    const r = parseRange(req.headers.range, stat.size);
    if (r?.unsatisfiable) {
      return send(416, { ...headers, 'Content-Range': `bytes */${stat.size}` }, '');
    }
    if (r) {
      ({ start, end } = r);
      status = 206;
      headers['Content-Range'] = q.has('badrange')
        ? `bytes ${start + 1}-${end + 1}/${stat.size}`
        : `bytes ${start}-${end}/${stat.size}`;
    }
  }
  headers['Content-Length'] = String(stat.size === 0 ? 0 : end - start + 1);
  entry.status = status;
  res.writeHead(status, headers);
  if (req.method === 'HEAD' || stat.size === 0) return res.end();
  const dropAfter = Number(q.get('drop') ?? 0);
  if (dropAfter > 0 && !state.dropped && end - start + 1 > dropAfter) {
    state.dropped = true;
    entry.dropped = dropAfter;
    createReadStream(file, { start, end: start + dropAfter - 1 })
      .on('error', () => res.destroy())
      .on('end', () => res.destroy())
      .pipe(res, { end: false });
    return;
  }
  createReadStream(file, { start, end })
    .on('error', () => res.destroy())
    .pipe(res);
});

server.listen(opt.port, opt.host, () => {
  const what = opt.range ? 'with Range support' : 'ignoring Range';
  console.log(`serving ${opt.root} on http://${opt.host}:${opt.port}/ (${what})`);
});
