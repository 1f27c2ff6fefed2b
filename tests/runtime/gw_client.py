"""Raw-socket HTTP/1.1 client helpers for the gateway tests: send bytes, read framed
responses (Reader.response: Content-Length, which is what the echo backend and l7run send;
Reader.framed: chunked too). The socket, reader and port helpers are the shared ones of
tests/common."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from procs import wait_port  # noqa: E402,F401 - for the tests that import it from here
from rawhttp import Reader, connect  # noqa: E402


def req(path, extra=b"", method=b"GET"):
    return method + b" " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n"


def get(port, path, extra=b""):
    """(status, headers dict, body text) of one GET on a fresh connection."""
    s = connect(port)
    try:
        s.sendall(req(path, extra))
        return Reader(s).response()
    finally:
        s.close()
