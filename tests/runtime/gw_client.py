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


    def framed(self, no_body=False):
        """One response, Content-Length or chunked framed (a 1xx, 204 or 304 has no body, nor
        has the response to a HEAD: no_body). Returns (status, bytes it took on the wire, body): the telemetry tests sum the bytes."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        end = self.buf.index(b"\r\n\r\n") + 4
        lines = self.buf[:end - 4].split(b"\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, _, v = l.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode()
        body = b""
        if no_body or 100 <= status < 200 or status in (204, 304):
            pass
        elif "chunked" in hdrs.get("transfer-encoding", ""):
            while True:
                while b"\r\n" not in self.buf[end:]:
                    self._fill()
                eol = self.buf.index(b"\r\n", end)
                size = int(self.buf[end:eol].split(b";")[0], 16)
                while len(self.buf) < eol + 2 + size + 2:
                    self._fill()
                body += self.buf[eol + 2:eol + 2 + size]
                end = eol + 2 + size + 2
                if size == 0:
                    break
        else:
            n = int(hdrs.get("content-length", "0"))
            while len(self.buf) < end + n:
                self._fill()
            body = self.buf[end:end + n]
            end += n
        self.buf = self.buf[end:]
        return status, end, body


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
