#!/usr/bin/env python3
"""Recording backend for the reliability suite: appends every byte it receives to
DIR/c<N>.bin (one file per accepted connection, flushed per recv) so a test can see exactly
what got past the data plane, and answers each request it can frame (Content-Length or
chunked, lenient: it must not hide what arrived) with 200 and a small body.

usage: rec_backend.py PORT DIR [NAME]
A body of "backend=NAME\\nmethod=M\\ntarget=T\\n" lets tests tell backends apart."""
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from rawhttp import listen  # noqa: E402

counter = [0]
lock = threading.Lock()


def frame(buf):
    """(method, target, request length) of the first request in buf, None if incomplete,
    False if unframeable."""
    i = 0
    while buf[i:i + 2] == b"\r\n":
        i += 2
    end = buf.find(b"\r\n\r\n", i)
    if end < 0:
        return None
    lines = buf[i:end].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) < 2:
        return False
    clen, chunked = 0, False
    for h in lines[1:]:
        k, _, v = h.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            v = v.strip()
            if not v.isdigit():
                return False   # "-1", "+5", "1,2", empty: no framing a test can trust
            clen = int(v)
        elif k == b"transfer-encoding" and b"chunked" in v.lower():
            chunked = True
    pos = end + 4
    if not chunked:
        return (parts[0], parts[1], pos + clen) if len(buf) >= pos + clen else None
    while True:
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None
        hexs = buf[pos:nl].split(b";")[0].strip()
        if not hexs or any(c not in b"0123456789abcdefABCDEF" for c in hexs):
            return False
        size = int(hexs, 16)
        pos = nl + 2
        if size == 0:
            while True:   # trailers until an empty line
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    return None
                if nl == pos:
                    return parts[0], parts[1], nl + 2
                pos = nl + 2
        if len(buf) < pos + size + 2:
            return None
        pos += size + 2


def framed(buf):
    """The requests framed in buf, [(method, target, head)] (head: the request line and fields,
    without the empty lines before it), and what is left that cannot be framed (yet)."""
    out = []
    while buf:
        f = frame(buf)
        if not f:
            break
        out.append((f[0], f[1], buf[:buf.find(b"\r\n\r\n")].lstrip(b"\r\n")))
        buf = buf[f[2]:]
    return out, buf


def handle(conn, path, name):
    buf = b""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with open(path, "ab", buffering=0) as log:
        try:
            while True:
                d = conn.recv(65536)
                if not d:
                    return
                log.write(d)
                buf += d
                while buf:
                    f = frame(buf)
                    if not f:
                        if f is False:
                            buf = b""   # unframeable: keep recording, stop answering
                        break
                    method, target, n = f
                    buf = buf[n:]
                    body = b"backend=%s\nmethod=%s\ntarget=%s\n" % (name.encode(), method, target)
                    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body)
                    conn.sendall(head if method == b"HEAD" else head + body)
        except OSError:
            pass
        finally:
            conn.close()


def main():
    port, d = int(sys.argv[1]), sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else "rec"
    os.makedirs(d, exist_ok=True)
    s = listen(port)
    while True:
        c, _ = s.accept()
        with lock:
            counter[0] += 1
            p = os.path.join(d, "c%06d.bin" % counter[0])
        threading.Thread(target=handle, args=(c, p, name), daemon=True).start()


if __name__ == "__main__":
    main()
