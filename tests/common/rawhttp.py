"""Raw-socket HTTP/1.1 for the tests, client and backend side: the bytes sent are the ones a test
wrote; what comes back is framed here by Content-Length (what l7run, the echo backends and the
policies' answers send; Reader.framed and the backends' requests() also take chunked bodies).
Heads are decoded as latin-1 (never fails; ASCII stays ASCII)."""
import socket
import threading


def connect(port, timeout=5.0, src=None, host="127.0.0.1"):
    """A client socket to host:port (from address src if given), TCP_NODELAY, with timeout."""
    s = socket.socket()
    if src:
        s.bind((src, 0))
    s.settimeout(timeout)
    s.connect((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def content_length(fields):
    return int(dict(fields).get("content-length", "0"))


class Reader:
    """Responses read one after another off one connection (keep-alive, pipelined)."""

    def __init__(self, sock, bufsize=65536):
        self.s, self.buf, self.bufsize = sock, b"", bufsize

    def more(self):
        d = self.s.recv(self.bufsize)
        if not d:
            raise EOFError("connection closed")
        self.buf += d

    def head(self):
        """(status, [(lower-case name, value)] in the order sent); status 0 for a head that is
        not HTTP."""
        while b"\r\n\r\n" not in self.buf:
            self.more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else 0
        fields = [(l.partition(":")[0].strip().lower(), l.partition(":")[2].strip()) for l in lines[1:]]
        return status, fields

    def message(self, head_only=False):
        """(status, fields, body bytes) of the next response; head_only for a HEAD's answer."""
        status, fields = self.head()
        n = 0 if head_only else content_length(fields)
        while len(self.buf) < n:
            self.more()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, fields, body

    def response(self, head_only=False):
        """(status, {field: value}, body text) of the next response."""
        status, fields, body = self.message(head_only)
        return status, dict(fields), body.decode(errors="replace")

    def framed(self, no_body=False):
        """One response, Content-Length or chunked framed (a 1xx, 204 or 304 has no body, nor
        has the response to a HEAD: no_body). Returns (status, bytes it took on the wire, body):
        the telemetry tests sum the bytes."""
        while b"\r\n\r\n" not in self.buf:
            self.more()
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
                    self.more()
                eol = self.buf.index(b"\r\n", end)
                size = int(self.buf[end:eol].split(b";")[0], 16)
                while len(self.buf) < eol + 2 + size + 2:
                    self.more()
                body += self.buf[eol + 2:eol + 2 + size]
                end = eol + 2 + size + 2
                if size == 0:
                    break
        else:
            n = int(hdrs.get("content-length", "0"))
            while len(self.buf) < end + n:
                self.more()
            body = self.buf[end:end + n]
            end += n
        self.buf = self.buf[end:]
        return status, end, body


def exchange(sock, data):
    """Sends data and reads one response on an open connection: (status, body text); (0,
    "closed") if the connection ends before a head, (0, why) on a socket error. A body cut short
    by the peer closing is returned as far as it came."""
    r = Reader(sock)
    try:
        sock.sendall(data)
        status, fields = r.head()
        n = content_length(fields)
        try:
            while len(r.buf) < n:
                r.more()
        except EOFError:
            pass
        return status, r.buf[:n].decode(errors="replace")
    except EOFError:
        return 0, "closed"
    except OSError as e:
        return 0, str(e)


def request(port, data, src=None, timeout=5.0):
    """exchange() on a fresh connection to 127.0.0.1:port (from src if given), closed after."""
    s = connect(port, timeout, src)
    try:
        return exchange(s, data)
    finally:
        s.close()


# ---- backend side ------------------------------------------------------------------------------

def listen(port, host="127.0.0.1"):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(1024)
    return s


def serve(s, handle, *args):
    """Accepts on s until it is closed (shut down); handle(conn, *args) runs in a thread of its
    own per connection."""
    while True:
        try:
            c, _ = s.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(c,) + args, daemon=True).start()


def read_chunked(conn, buf):
    """Decodes a chunked body at the start of buf: (body, [trailer field lines], rest of buf),
    None at EOF."""
    def line():
        nonlocal buf
        while b"\r\n" not in buf:
            d = conn.recv(65536)
            if not d:
                return None
            buf += d
        ln, buf = buf.split(b"\r\n", 1)
        return ln

    body = b""
    while True:
        ln = line()
        if ln is None:
            return None
        size = int(ln.split(b";")[0], 16)
        if size == 0:
            trailers = []
            while True:   # the trailer section ends with an empty line
                ln = line()
                if ln is None:
                    return None
                if not ln:
                    return body, trailers, buf
                trailers.append(ln)
        while len(buf) < size + 2:
            d = conn.recv(65536)
            if not d:
                return None
            buf += d
        body += buf[:size]
        buf = buf[size + 2:]


def requests(conn):
    """The requests arriving on conn, in order (keep-alive, pipelined): (head lines, body,
    trailers) with the raw lines (request line first), the body, Content-Length or chunked
    framed, and a chunked body's trailer field lines. Ends when the peer closes."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = conn.recv(65536)
            if not d:
                return
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        clen, chunked = 0, False
        for l in lines[1:]:
            k, _, v = l.partition(b":")
            if k.strip().lower() == b"content-length":
                clen = int(v.strip())
            if k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
                chunked = True
        if chunked:
            got = read_chunked(conn, buf)
            if got is None:
                return
            body, trailers, buf = got
        else:
            while len(buf) < clen:
                d = conn.recv(65536)
                if not d:
                    return
                buf += d
            body, buf, trailers = buf[:clen], buf[clen:], []
        yield lines, body, trailers


def parse_responses(buf, methods=()):
    """The complete responses at the start of buf: ([(status, body)], the bytes after them);
    methods[i] is the method of the request response i answers (the answer to a HEAD has no
    body). A head that is not HTTP ends the list with (-1, all from there), no bytes after."""
    out = []
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return out, buf
        lines = buf[:end].split(b"\r\n")
        try:
            st = int(lines[0].split()[1])
        except (IndexError, ValueError):
            return out + [(-1, buf)], b""
        n = 0
        for l in lines[1:]:
            k, _, v = l.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v.strip())
        m = methods[len(out)] if len(out) < len(methods) else b""
        if m == b"HEAD":
            n = 0
        if len(buf) < end + 4 + n:
            return out, buf
        out.append((st, buf[end + 4:end + 4 + n]))
        buf = buf[end + 4 + n:]


def hop_cut(head):
    """A request head (request line and field lines, CRLF-separated, without the empty line) as
    gateway mode forwards it: without its Connection and Keep-Alive lines (hop-by-hop, RFC 9110
    7.6.1) when it has a Connection line, unless it is HTTP/1.0, CONNECT, or an Upgrade
    (Connection names upgrade and an Upgrade field is there), which go as they came
    (stdlib/bpf/gateway.h l7_client_act, l7g_hop_cut)."""
    lines = head.split(b"\r\n")
    names = [ln.partition(b":")[0].lower() for ln in lines[1:]]
    conn = b",".join(ln.partition(b":")[2] for ln, n in zip(lines[1:], names) if n == b"connection")
    toks = [t.lower() for t in conn.replace(b" ", b",").replace(b"\t", b",").split(b",") if t]
    first = lines[0].split(b" ")
    if b"connection" not in names or first[-1] == b"HTTP/1.0" or first[0] == b"CONNECT" or \
            (b"upgrade" in toks and b"upgrade" in names):
        return head
    return b"\r\n".join([lines[0]] + [ln for ln, n in zip(lines[1:], names) if n not in (b"connection", b"keep-alive")])
