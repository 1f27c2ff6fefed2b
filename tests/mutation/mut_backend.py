#!/usr/bin/env python3
"""Backend of the header-mutation tests: answers every HTTP/1.1 request (keep-alive, pipelined,
in order) with what it received, and with response fields a policy edits.

usage: mut_backend.py PORT LOG
Response head: Server: one, X-Frame-Options: SAMEORIGIN, X-Keep: k, Server: two (a name sent
twice), then Content-Type and Content-Length; a target with "many" gets 9 Server lines apart. Body: "target=...", one "line=<raw field line>"
per received field line, "body=<len> <sha256 of the request body>", then `size=N` in the query
pads it with a pattern to N more bytes; last "sha=<sha256 of everything before>" so the client
can check the body arrived intact. Every request is also logged to LOG (one line: target and
its raw field lines), so the test can tell what never reached the backend."""
import hashlib
import os
import socket
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from rawhttp import listen, requests, serve  # noqa: E402

PORT, LOG = int(sys.argv[1]), sys.argv[2]
log_lock = threading.Lock()


def respond(conn, target, lines, body):
    info = [b"target=" + target] + [b"line=" + l for l in lines]
    info.append(b"body=%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode()))
    payload = b"\n".join(info) + b"\n"
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(target.decode()).query)
    if "size" in q:
        pat = hashlib.sha256(target).hexdigest().encode()
        n = int(q["size"][0])
        payload += (pat * (n // len(pat) + 1))[:n]
    out = payload + b"\nsha=" + hashlib.sha256(payload).hexdigest().encode() + b"\n"
    head = (b"HTTP/1.1 200 OK\r\nServer: one\r\nX-Frame-Options: SAMEORIGIN\r\nX-Keep: k\r\n"
            b"Server: two\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(out))
    if b"many" in target:   # 9 Server lines apart from each other: more cuts than an edit holds
        head = head.replace(b"X-Keep: k\r\n", b"".join(b"X-Keep: k\r\nServer: s%d\r\n" % i for i in range(8)))
    conn.sendall(head + out)


def handle(conn):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for lines, body, _ in requests(conn):
            target = lines[0].split(b" ")[1]
            with log_lock, open(LOG, "ab") as f:
                f.write(target + b" " + b" | ".join(lines[1:]) + b"\n")
            respond(conn, target, lines[1:], body)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    serve(listen(PORT), handle)


if __name__ == "__main__":
    main()
