#!/usr/bin/env python3
"""A static server for bench/dawn/chromium.sh on a machine without Node (the GPU machine): single
HTTP Range requests (206 + Content-Range) and strong ETags as scripts/serve.mjs serves them, so the
loader reads models as a page does (not cross-origin isolated: the page takes the JS API's
single-thread build, as run.mjs does); POST /result appends the body as one line to RESULTS and
prints it, POST /done writes RESULTS + ".done".

    python3 bench/dawn/serve.py PORT RESULTS /=www /js=js /bench=bench/dawn /m=MODELS_DIR
"""
import http.server
import json
import mimetypes
import os
import sys

port, results = int(sys.argv[1]), sys.argv[2]
# Longest prefix first, so /js wins over /.
mounts = sorted((m.split("=", 1) for m in sys.argv[3:]), key=lambda m: -len(m[0]))
mimetypes.add_type("application/wasm", ".wasm")
mimetypes.add_type("text/javascript", ".js")
mimetypes.add_type("text/javascript", ".mjs")


def local_path(url_path):
    path = url_path.split("?", 1)[0]
    for prefix, folder in mounts:
        base = prefix.rstrip("/")
        if path == base or path.startswith(base + "/"):
            rest = os.path.normpath(path[len(base):].lstrip("/"))
            if rest.startswith(".."):
                return None
            return os.path.join(folder, rest)
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/result":
            line = json.dumps(json.loads(body))
            print(line, flush=True)
            with open(results, "a") as f:
                f.write(line + "\n")
        elif self.path == "/done":
            open(results + ".done", "w").close()
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def serve(self, head):
        path = local_path(self.path)
        if path and os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not path or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        st = os.stat(path)
        size, etag = st.st_size, f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and "," not in rng:
            a, b = rng[6:].split("-", 1)
            if a:
                start, end = int(a), min(int(b) if b else size - 1, size - 1)
            else:
                start = max(size - int(b), 0)
            if start > end or start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", mimetypes.guess_type(path)[0] or "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Cache-Control", "no-store")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if head:
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
