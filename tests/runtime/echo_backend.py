#!/usr/bin/env python3
"""Echo backend for the gateway tests: answers every HTTP/1.1 request on a kept-alive
connection with a body that lists what it received (name, method, target, headers, body
length). Pipelining is handled by answering requests in arrival order. Stdlib only."""
import socket
import sys
import threading


def handle(conn, name):
    buf = b""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = conn.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            method, target, _ = lines[0].split(b" ", 2)
            headers = [l for l in lines[1:]]
            clen = 0
            for h in headers:
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    clen = int(v.strip())
            while len(buf) < clen:
                d = conn.recv(65536)
                if not d:
                    return
                buf += d
            body_in, buf = buf[:clen], buf[clen:]
            out = b"backend=" + name.encode() + b"\nmethod=" + method + b"\ntarget=" + target + b"\n"
            out += b"".join(b"header=" + h + b"\n" for h in headers)
            out += b"body_len=" + str(len(body_in)).encode() + b"\n"
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
    port, name = int(sys.argv[1]), sys.argv[2]
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1024)
    print("ready", flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c, name), daemon=True).start()


if __name__ == "__main__":
    main()
