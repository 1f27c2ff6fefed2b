"""Raw-socket HTTP/1.1 client helpers for the gateway tests: send bytes, read framed
responses (Content-Length only, which is what the echo backend and l7run send)."""
import socket
import time


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def req(path, extra=b"", method=b"GET"):
    return method + b" " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n"


class Reader:
    def __init__(self, sock):
        self.s = sock
        self.buf = b""

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def response(self):
        """Returns (status, headers dict, body)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode()
        n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body.decode(errors="replace")


def get(port, path, extra=b""):
    s = connect(port)
    try:
        s.sendall(req(path, extra))
        return Reader(s).response()
    finally:
        s.close()


def wait_port(port, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False
