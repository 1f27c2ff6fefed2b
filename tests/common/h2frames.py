"""HTTP/2 frames as the mesh tests write and read them by hand (RFC 9113 4.1): the preface,
frame types, a frame, the frames of a byte string, a small request header block of literals,
HPACK representations that use the dynamic table, and the answers among frames (HPACK-decoded)."""
import socket
import struct

import hpack
import hpack.huffman
import hpack.huffman_constants

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9


def fr(t, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", stream) + payload


def frames(data):
    """[(type, flags, stream, payload)] of the whole frames in data"""
    out = []
    while len(data) >= 9:
        n = int.from_bytes(data[:3], "big")
        out.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7fffffff, data[9:9 + n]))
        data = data[9 + n:]
    return out


def block(path=b"/a", extra=()):
    """GET http <path> :authority x, then (name, value) literals without indexing"""
    b = bytes([0x82, 0x86, 0x04, len(path)]) + path + bytes([0x01, 0x01]) + b"x"
    for n, v in extra:
        b += bytes([0, len(n)]) + n + bytes([len(v)]) + v
    return b


def hint(bits, first, v):
    """an HPACK prefix integer (RFC 7541 5.1)"""
    m = (1 << bits) - 1
    if v < m:
        return bytes([first | v])
    out, v = [first | m], v - m
    while v >= 128:
        out.append(0x80 | (v & 0x7f))
        v >>= 7
    return bytes(out + [v])


def hstr(s, huff=False):
    """an HPACK string, raw or Huffman-coded (RFC 7541 5.2)"""
    if huff:
        s = hpack.huffman.HuffmanEncoder(hpack.huffman_constants.REQUEST_CODES,
                                         hpack.huffman_constants.REQUEST_CODES_LENGTH).encode(s)
        return hint(7, 0x80, len(s)) + s
    return hint(7, 0, len(s)) + s


def idx(i):
    """an indexed field: 1-61 static, 62 on the dynamic table, newest first"""
    return hint(7, 0x80, i)


def lit_inc(name, value, huff=False):
    """a literal with incremental indexing (inserted into the dynamic table): name a static
    or dynamic index, or a string"""
    if isinstance(name, int):
        return hint(6, 0x40, name) + hstr(value, huff)
    return hint(6, 0x40, 0) + hstr(name, huff) + hstr(value, huff)


def update(size):
    """a dynamic table size update (RFC 7541 6.3)"""
    return hint(5, 0x20, size)


def answers(fs):
    """{stream: [headers dict, data, rst code or None, flags of its last HEADERS]}"""
    out = {}
    dec = hpack.Decoder()
    for t, flags, sid, p in fs:
        a = out.setdefault(sid, [{}, b"", None, 0]) if t in (HEADERS, DATA, RST_STREAM) else None
        if t == HEADERS:
            a[0].update((n.decode(), v.decode()) for n, v in dec.decode(p, raw=True))
            a[3] = flags
        elif t == DATA:
            a[1] += p
        elif t == RST_STREAM:
            a[2] = struct.unpack(">I", p)[0]
    return out


def read_until(sock, got=b"", done=None):
    """got and what sock sends after it, until the peer closes, the socket's timeout passes,
    or done(bytes so far) holds."""
    try:
        while not (done and done(got)):
            d = sock.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        pass
    return got
