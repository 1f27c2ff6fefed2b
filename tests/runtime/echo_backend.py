#!/usr/bin/env python3
"""Echo backend for the gateway tests: answers every HTTP/1.1 request on a kept-alive
connection with a body that lists what it received (name, method, target, headers, body
length and SHA-256, trailer fields) and seq=N, the requests this process has read so far
(a test sees whether one reached it in between). Pipelining is handled by answering requests in arrival order. Stdlib only.
Request bodies: Content-Length or chunked. Query knobs (telemetry tests):
status=N answers status N; size=N sends N bytes of 'x' as the body instead of the listing;
chunked=K sends the body chunked, K bytes a chunk, one write per chunk; interim=1 sends a
103 interim response first (its own write)."""
import hashlib
import os
import itertools
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from rawhttp import listen, requests, serve  # noqa: E402


def answer(conn, method, target, status, body):
    """Write a response as the query in target asks (see the module's docstring)."""
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(target.decode()).query)
    status = int(q.get("status", [status])[0])
    if "size" in q:
        body = b"x" * int(q["size"][0])
    if q.get("interim"):
        conn.sendall(b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n")
        time.sleep(0.01)
    chunk = int(q.get("chunked", ["0"])[0])
    head = b"HTTP/1.1 %d X\r\ncontent-type: text/plain\r\n" % status
    if not chunk:
        resp = head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
        conn.sendall(resp if method == b"HEAD" else resp + body)
        return
    conn.sendall(head + b"transfer-encoding: chunked\r\n\r\n")
    if method == b"HEAD":
        return
    for i in range(0, len(body), chunk):
        time.sleep(0.002)   # each chunk a segment of its own: a body streamed in pieces
        conn.sendall(b"%x\r\n" % len(body[i:i + chunk]) + body[i:i + chunk] + b"\r\n")
    conn.sendall(b"0\r\n\r\n")


SEQ = itertools.count(1)   # next() is atomic under the GIL: one count across the threads


def handle(conn, name):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for lines, body_in, trailers in requests(conn):
            method, target, _ = lines[0].split(b" ", 2)
            headers = lines[1:]
            out = b"backend=" + name.encode() + b"\nmethod=" + method + b"\ntarget=" + target + b"\n"
            out += b"".join(b"header=" + h + b"\n" for h in headers)
            out += b"body_len=" + str(len(body_in)).encode() + b"\n"
            out += b"body_sha256=" + hashlib.sha256(body_in).hexdigest().encode() + b"\n"
            out += b"".join(b"trailer=" + t + b"\n" for t in trailers)
            out += b"seq=%d\n" % next(SEQ)
            if b"?" in target:
                answer(conn, method, target, 200, out)
                continue
            resp = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: " + str(len(out)).encode() + b"\r\n\r\n"
            if method == b"HEAD":
                conn.sendall(resp)
            else:
                conn.sendall(resp + out)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()


def main():
    host, _, port = sys.argv[1].rpartition(":")   # PORT, or ADDR:PORT (another loopback address)
    s = listen(int(port), host or "127.0.0.1")
    name = sys.argv[2]
    print("ready", flush=True)
    serve(s, handle, name)


if __name__ == "__main__":
    main()
