#!/usr/bin/python3
"""Capture the HTTP/2 frames a real client and server exchange, for tests/h2/data/.

  capture.py OUT.h2cap SERVER_PORT -- CLIENT ARGS...   ({port} in ARGS: the relay's port)

A socket relay between the client and an h2c server already listening on 127.0.0.1:SERVER_PORT
(nghttpd --no-tls) logs every chunk it passes, in the order it passed them:
    c HEX    bytes the client sent (as the server received them)
    s HEX    bytes the server sent
It does what l7run does on each hop it terminates: the first SETTINGS frame of each direction
gets SETTINGS_HEADER_TABLE_SIZE = 0 appended (a later entry overrides an earlier one), so
after each side's ACK its encoder must keep the dynamic table at size 0 (RFC 7541 4.2) and the
kernel decoder can decode its blocks. The log has the rewritten bytes: what the peer saw.
Only the first connection is logged.
"""
import os
import socket
import subprocess
import sys
import threading
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Injector:
    """Rewrites the first SETTINGS frame of one direction (after the preface, for the client)."""

    def __init__(self, client):
        self.skip = len(PREFACE) if client else 0
        self.buf = b""
        self.done = False

    def feed(self, data):
        if self.done:
            return data
        self.buf += data
        if len(self.buf) < self.skip + 9:
            return b""
        head = self.buf[self.skip:self.skip + 9]
        n = int.from_bytes(head[0:3], "big")
        if head[3] != 0x4 or head[4] & 1:
            raise SystemExit("capture: the first frame is not SETTINGS")
        end = self.skip + 9 + n
        if len(self.buf) < end:
            return b""
        payload = self.buf[self.skip + 9:end] + b"\x00\x01\x00\x00\x00\x00"
        out = (self.buf[:self.skip] + len(payload).to_bytes(3, "big") + head[3:] + payload +
               self.buf[end:])
        self.done = True
        self.buf = b""
        return out


def main():
    out, sport = sys.argv[1], int(sys.argv[2])
    args = sys.argv[sys.argv.index("--") + 1:]
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    port = lsock.getsockname()[1]
    log, lock = [], threading.Lock()
    first = threading.Event()

    def pump(src, dst, tag, inj, keep):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            data = inj.feed(data)
            if not data:
                continue
            if keep:
                with lock:
                    log.append((tag, data))
            dst.sendall(data)

    def accept():
        n = 0
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", sport))
            keep = n == 0
            n += 1
            first.set()
            threading.Thread(target=pump, args=(c, u, "c", Injector(True), keep), daemon=True).start()
            threading.Thread(target=pump, args=(u, c, "s", Injector(False), keep), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    cmd = [a.replace("{port}", str(port)) for a in args]
    rc = subprocess.run(cmd, timeout=60, stdout=subprocess.DEVNULL).returncode
    time.sleep(0.3)
    lsock.close()
    with open(out, "w") as f:
        f.write("# h2 capture: %s\n# server on 127.0.0.1:%d; client exit status %d\n" %
                (" ".join(args), sport, rc))
        with lock:
            for tag, data in log:
                f.write("%s %s\n" % (tag, data.hex()))
    print("%s: %d chunks, client exit %d" % (out, len(log), rc))


if __name__ == "__main__":
    main()
