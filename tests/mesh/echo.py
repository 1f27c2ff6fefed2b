#!/usr/bin/env python3
"""Echo backend for the mesh tests: answers every request with the headers it received.

usage: echo.py NAME PORT [ADDR]   (ADDR: where it listens, default 127.0.0.1)
Body: "backend=NAME", "path=...", "method=...", "len=N sha256=HEX" for request bodies, then
one "h:name=value" line per received header (lower-case names). HTTP/1.1 keep-alive.
A query "size=N" asks for an N-byte body of 'x' instead (written 1 MiB at a time). HEAD gets
the head a GET would get (its Content-Length) and no body. Telemetry knobs: "status=N" answers
status N; "chunked=K" sends the body chunked, K bytes a chunk, one write each; "interim=1"
writes a 103 interim response first."""
import hashlib
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME, PORT = sys.argv[1], int(sys.argv[2])
ADDR = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        n = int(self.headers.get("content-length") or 0)
        h = hashlib.sha256()
        left = n
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                data = self.rfile.read(size + 2)[:size]
                h.update(data)
                n += size
                if not size:
                    break
        while left:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        size = q.get("size")
        status = int(q.get("status", ["200"])[0])
        if q.get("interim"):
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n")
            time.sleep(0.01)
        if q.get("chunked"):
            k = int(q["chunked"][0])
            body = b"x" * int(size[0]) if size else b"chunked reply\n" * 100
            self.send_response(status)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            if self.command == "HEAD":
                return
            for i in range(0, len(body), k):
                time.sleep(0.002)   # a body streamed in pieces: one write (sendmsg) a chunk
                self.wfile.write(b"%x\r\n" % len(body[i:i + k]) + body[i:i + k] + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if size:
            n = int(size[0])
            self.send_response(status)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("content-length", str(n))
            self.end_headers()
            if self.command == "HEAD":
                return
            chunk = b"x" * (1 << 20)
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= len(chunk)
            return
        lines = ["backend=" + NAME, "path=" + self.path, "method=" + self.command,
                 "len=%d sha256=%s" % (n, h.hexdigest())]
        lines += ["h:%s=%s" % (k.lower(), v) for k, v in self.headers.items()]
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


Server((ADDR, PORT), Handler).serve_forever()
