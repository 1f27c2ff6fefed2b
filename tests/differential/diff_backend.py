#!/usr/bin/env python3
"""Recording echo backends for the differential test: one process, one listener per upstream
(NAME=PORT arguments). Every request head received is logged, before its body is read, as one
line "NAME HEXHEAD" in LOG (so the test sees what reached a backend even when the body never
comes); the answer is 200 with "backend=NAME" (no body for HEAD). Content-Length and chunked
bodies are framed; anything else unframeable closes the connection. Stdlib only."""
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from rawhttp import listen  # noqa: E402

lock = threading.Lock()


def log(f, name, head):
    with lock:
        f.write("%s %s\n" % (name, head.hex()))
        f.flush()


def recv_until(conn, buf, pred):
    while not pred(buf):
        d = conn.recv(65536)
        if not d:
            return None
        buf += d
    return buf


def handle(conn, name, f):
    buf = b""
    try:
        while True:
            buf = recv_until(conn, buf, lambda b: b"\r\n\r\n" in b)
            if buf is None:
                return
            head, buf = buf.split(b"\r\n\r\n", 1)
            log(f, name, head)
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ")
            method = parts[0]
            clen, chunked = 0, False
            for h in lines[1:]:
                k, _, v = h.partition(b":")
                k = k.strip().lower()
                if k == b"content-length":
                    clen = int(v.strip())
                elif k == b"transfer-encoding" and v.strip().lower() == b"chunked":
                    chunked = True
            if chunked:
                while True:
                    buf = recv_until(conn, buf, lambda b: b"\r\n" in b)
                    if buf is None:
                        return
                    line, buf = buf.split(b"\r\n", 1)
                    size = int(line.split(b";")[0].strip(), 16)
                    if size == 0:   # trailers, then the empty line
                        while True:
                            buf = recv_until(conn, buf, lambda b: b"\r\n" in b)
                            if buf is None:
                                return
                            t, buf = buf.split(b"\r\n", 1)
                            if not t:
                                break
                        break
                    buf = recv_until(conn, buf, lambda b: len(b) >= size + 2)
                    if buf is None:
                        return
                    buf = buf[size + 2:]
            else:
                buf = recv_until(conn, buf, lambda b: len(b) >= clen)
                if buf is None:
                    return
                buf = buf[clen:]
            out = b"backend=" + name.encode() + b"\n"
            resp = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(out)
            conn.sendall(resp if method == b"HEAD" else resp + out)
    except (ConnectionError, OSError, ValueError):
        pass
    finally:
        conn.close()


def serve(s, name, f):
    while True:
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(c, name, f), daemon=True).start()


def main():
    f = open(sys.argv[1], "a")
    threads = []
    for arg in sys.argv[2:]:
        name, port = arg.rsplit("=", 1)
        s = listen(int(port))
        t = threading.Thread(target=serve, args=(s, name, f), daemon=True)
        t.start()
        threads.append(t)
    print("ready", flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
