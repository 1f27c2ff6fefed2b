#!/usr/bin/python3
"""Test vectors of the HTTP/2 building blocks (stdlib/bpf/h2.h, hpack.h, huffman.h), written
at test time into OUTDIR for test_h2 (native and in the kernel):

  huff.tsv     Huffman strings: every one of the 257 codes, random strings, hostile padding
  blocks.tsv   header blocks: RFC 7541 Appendix C, blocks of the Python hpack encoder (with
               and without Huffman, never-indexed fields), hostile ones
  streams.tsv  byte streams of frames: captures of real clients and servers (data/*.h2cap),
               hostile frame sequences
  static.tsv   RFC 7541 Appendix A as Python's hpack has it

Expected results come from outside the C code: the Python hpack decoder (an independent
implementation) for what a valid block holds, the RFC for its examples, and the RFC sections
cited next to each hostile case for the error it must give. The summary format (summary()) is
the one test_h2.c prints (h2_summary); both escape bytes the same way.

usage: vectors.py OUTDIR DATADIR
       vectors.py --check-reenc OUTDIR   (after test_h2 native/reenc wrote OUTDIR/reenc.tsv)
"""
import json
import os
import random
import sys

import hpack
from hpack import Encoder, Decoder, NeverIndexedHeaderTuple
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.table import HeaderTable

# ---- what the C side agrees on ------------------------------------------------------------
# the wanted names (tests/h2/wanted_names.h), in order
WANTED = ["user-agent", "accept", "authorization", "content-type", "custom-key", "cache-control",
          "password", "date", "location", "content-encoding", "set-cookie", "grpc-timeout",
          "x-user", "cookie", "te", "grpc-message"]
PSEUDO = [":method", ":scheme", ":authority", ":path", ":status", ":protocol"]
METHODS = {"GET": 1, "HEAD": 2, "POST": 3, "PUT": 4, "DELETE": 5, "CONNECT": 6, "OPTIONS": 7,
           "TRACE": 8, "PATCH": 9}
# l7/h2.h connection bits
HP_PENDING, HP_ACKED, HP_ZERO, HP_UPDATE, HP_UNKNOWN = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
FIELDS, REQUEST, RESPONSE, TRAILERS = 0, 1, 2, 3
MODE = {"fields": FIELDS, "request": REQUEST, "response": RESPONSE, "trailers": TRAILERS}

HUFF = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)


def esc(b):
    if isinstance(b, str):
        b = b.encode("latin-1")
    return "".join(chr(c) if 0x21 <= c <= 0x7e and c not in b"\\|" else "\\x%02x" % c for c in b)


def is_grpc(v):
    return v.startswith(b"application/grpc") and (len(v) == 16 or v[16:17] in (b"+", b";"))


def digits(v):
    return int(v) if v and v.isdigit() and len(v) <= 10 and int(v) < 2**32 else None


def summary(fields, mode, update=None):
    """fields: [(name bytes, value bytes, never)] of a block the C decoder accepts."""
    out = ["ok"]
    pseudo = {}
    want = {}
    flags = []
    cl = None
    gstatus = None
    host_hdr = None
    for n, v, never in fields:
        n = n.decode("latin-1")
        if n in PSEUDO:
            pseudo[n] = v
        elif n == "host":
            host_hdr = v
        if n in WANTED:
            assert n not in want, "a wanted name twice (the decoder says slow)"
            want[n] = (v, never)
        if n == "content-type" and is_grpc(v):
            flags.append("grpc")
        if n == "te" and mode != FIELDS:
            flags.append("te")
        if n == "content-length" and mode != FIELDS:
            cl = digits(v)
        if n == "grpc-status" and digits(v) is not None:
            gstatus = digits(v)
    for p in PSEUDO:
        if p in pseudo:
            out.append("%s=%s" % (p, esc(pseudo[p])))
    for w in WANTED:
        if w in want:
            out.append("%s=%s%s" % (w, esc(want[w][0]), "!" if want[w][1] else ""))
    out.append("n=%d" % len(fields))
    out.append("never=%d" % sum(1 for f in fields if f[2]))
    if "grpc" in flags:
        out.append("grpc")
    if "te" in flags:
        out.append("te")
    if cl is not None:
        out.append("cl=%d" % cl)
    if gstatus is not None:
        out.append("grpc-status=%d" % gstatus)
    if update is not None:
        out.append("update=%d" % update)
    if mode == REQUEST:
        m = pseudo[":method"].decode()
        path = pseudo.get(":path", b"")
        p, _, q = path.partition(b"?")
        host = pseudo.get(":authority", host_hdr or b"")
        out.append("method=%d host=%s path=%s query=%s" % (METHODS.get(m, 0), esc(host), esc(p),
                                                           esc(q)))
    elif mode == RESPONSE:
        out.append("status=%d" % int(pseudo[":status"]))
    return " ".join(out)


# ---- a small HPACK encoder of my own, for blocks no real encoder sends -----------------------
def hint(prefix_bits, first, v):
    """RFC 7541 5.1: v with an N-bit prefix; `first` holds the representation's high bits."""
    m = (1 << prefix_bits) - 1
    if v < m:
        return bytes([first | v])
    out = [first | m]
    v -= m
    while v >= 128:
        out.append(v % 128 + 128)
        v //= 128
    out.append(v)
    return bytes(out)


def hstr(s, huff=False):
    if isinstance(s, str):
        s = s.encode("latin-1")
    if huff:
        s = HUFF.encode(s)
        return hint(7, 0x80, len(s)) + s
    return hint(7, 0, len(s)) + s


def idx(i):                       # indexed field
    return hint(7, 0x80, i)


def lit(kind, name, value, huff=False):
    """kind: 'inc' (0x40), 'without' (0x00), 'never' (0x10); name: a static index or a string"""
    first, bits = {"inc": (0x40, 6), "without": (0x00, 4), "never": (0x10, 4)}[kind]
    if isinstance(name, int):
        return hint(bits, first, name) + hstr(value, huff)
    return hint(bits, first, 0) + hstr(name, huff) + hstr(value, huff)


def update(v):
    return hint(5, 0x20, v)


def block(*reps):
    """the block and the offset of each representation"""
    offs, b = [], b""
    for r in reps:
        offs.append(len(b))
        b += r
    return b, offs


def huff_bits(syms, pad="1" * 7):
    """my own bit-level Huffman encoder: codes of syms (256 = EOS), then pad bits until a byte
    boundary (pad gives them; longer pads make longer paddings)"""
    bits = "".join(format(REQUEST_CODES[s], "0%db" % REQUEST_CODES_LENGTH[s]) for s in syms)
    n = (-len(bits)) % 8
    bits += pad[:n] if len(pad) <= 7 else pad
    assert len(bits) % 8 == 0
    return int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""


# ---- huff.tsv -------------------------------------------------------------------------------
def huff_cases(rng):
    rows = []
    for b in range(256):
        rows.append(("sym%d" % b, HUFF.encode(bytes([b])), bytes([b])))
    rows.append(("all256", HUFF.encode(bytes(range(256))), bytes(range(256))))
    rows.append(("empty", b"", b""))
    for n in list(range(1, 120)) + [255, 256, 257, 1000, 4093, 8000]:
        if n <= 4093:   # random bytes take 3 bytes each Huffman-coded at worst
            s = bytes(rng.randrange(256) for _ in range(n))
            rows.append(("random%d" % n, HUFF.encode(s), s))
        t = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789-./_=&?%") for _ in range(n))
        rows.append(("text%d" % n, HUFF.encode(t), t))
    # RFC 7541 5.2: padding of 1..7 most significant bits of EOS (all ones) is fine
    for syms in ([ord("a")], [ord("0"), ord("0")], [0], [ord("!")], [ord("a")] * 7):
        rows.append(("pad-ok-%s" % "-".join(map(str, syms)), huff_bits(syms), bytes(syms)))
    # exactly 7 bits of padding (a code of 8k + 1 bits), and the same with one of them 0
    for a in range(256):
        if (REQUEST_CODES_LENGTH[a]) % 8 == 1:
            rows.append(("pad7-%d" % a, huff_bits([a]), bytes([a])))
            rows.append(("pad7-zero-%d" % a, huff_bits([a], "1111110"), None))
            break
    rows.append(("eos-alone", huff_bits([256]), None))                 # 5.2: EOS decoded
    rows.append(("eos-after-a", huff_bits([ord("a"), 256]), None))
    rows.append(("eos-before-a", huff_bits([256, ord("a")]), None))
    rows.append(("pad-zeros", huff_bits([ord("a")], "000"), None))      # not the EOS prefix
    rows.append(("pad-mixed", huff_bits([ord("a")], "101"), None))
    rows.append(("pad-8-ones", HUFF.encode(b"a") + b"\xff", None))      # > 7 bits of padding
    rows.append(("pad-16-ones", HUFF.encode(b"ab") + b"\xff\xff", None))
    rows.append(("pad-byte-only", b"\xff", None))                       # 8 bits, no symbol
    rows.append(("pad-7-alone", b"\xfe", None))                          # not all ones
    return rows


# ---- blocks.tsv -----------------------------------------------------------------------------
def rfc_rows(datadir):
    """tests/h2/data/rfc7541_c.tsv: the Appendix C examples as the RFC prints them."""
    rows, later = [], []
    decs = {}
    for line in open(os.path.join(datadir, "rfc7541_c.tsv")):
        if line.startswith("#") or not line.strip() or line.startswith("seq\t"):
            continue
        seq, name, mode, hexs, headers, slow, zero = line.rstrip("\n").split("\t")
        blk = bytes.fromhex(hexs.replace(" ", ""))
        hl = [tuple(h.split(": ", 1)) for h in headers.split(" ; ")]
        # the transcription check: Python's decoder reads the RFC's headers from the hex
        if seq not in decs:
            decs[seq] = Decoder()
            if seq in ("c5", "c6"):
                decs[seq].header_table_size = 256
        got = decs[seq].decode(blk, raw=True)
        assert [(n.decode(), v.decode()) for n, v in got] == hl, (name, got, hl)
        fields = [(n.encode(), v.encode(), isinstance(g, NeverIndexedHeaderTuple))
                  for (n, v), g in zip(hl, got)]
        m = MODE[mode]
        # nothing acknowledged, the table kept: the examples of one seq in a row, as the RFC
        # has them (C.5 and C.6 with the 256-byte table it says, set by a size update in
        # front of the first block: entries are evicted as the RFC shows, and a later
        # reference reads the entry that is left)
        first = seq + "-fresh" not in [r[0] for r in rows]
        upd, fblk = None, blk
        if first and seq in ("c5", "c6"):
            fblk, upd = update(256) + blk, 256
        # (a sequence's rows in a row: the C side carries the table from one to the next)
        rows.append((seq + "-fresh", name + ", fresh", m, 0 if first else -1, fblk,
                     summary(fields, m, upd)))
        # `slow`: what a decoder that keeps no table returns
        later.append((seq + "-unknown", name + ", no table kept", m, HP_UNKNOWN, blk,
                      summary(fields, m) if slow == "-" else slow))
        # a table of size 0: the first block of each example decodes, later ones index
        # entries a size-0 table cannot hold
        later.append((seq + "-zero", name + ", size 0", m, HP_ACKED | HP_ZERO, blk,
                     summary(fields, m) if zero == "ok" else zero))
    return rows + later


def gen_request(rng, i):
    h = [(":method", rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])),
         (":scheme", rng.choice(["http", "https"])),
         (":authority", rng.choice(["example.com", "api.internal:8443", "127.0.0.1:8080",
                                    "svc-%d.ns.svc.cluster.local" % i]))]
    path = "/" + "/".join(rng.choice(["api", "v1", "users", str(i), "items", "a-b_c.d", "%41"])
                          for _ in range(rng.randrange(0, 5)))
    if rng.random() < 0.5:
        path += "?" + "&".join("%s=%s" % (rng.choice("abcxyz"), rng.randrange(1000))
                               for _ in range(rng.randrange(1, 4)))
    h.append((":path", path))
    rng.shuffle(h)   # pseudo-headers in any order, all before the regular ones
    names = rng.sample(WANTED[:4] + WANTED[11:15] + ["x-other", "accept-language",
                                                      "x-request-id", "via"],
                       rng.randrange(0, 8))
    for n in names:
        if n == "te":
            v = "trailers"
        elif n == "content-type":
            v = rng.choice(["application/json", "application/grpc", "application/grpc+proto",
                            "text/plain; charset=utf-8"])
        else:
            v = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ,;=/+-.:_~\"'()")
                        for _ in range(rng.randrange(1, 90))).strip() or "x"
        if n in ("authorization", "cookie") or rng.random() < 0.15:
            h.append(NeverIndexedHeaderTuple(n, v))
        else:
            h.append((n, v))
    return h


def gen_rows(rng):
    rows = []
    for huff in (False, True):
        # one encoder per sequence: the first block carries the size update to 0, the rest
        # rely on the state it left (the C side carries it from row to row)
        for s in range(6):
            e = Encoder()
            e.header_table_size = 0
            d = Decoder()
            seq = "gen-%s-%d" % ("huff" if huff else "raw", s)
            for i in range(12):
                h = gen_request(rng, i)
                blk = e.encode(h, huffman=huff)
                fields = [(h[0], h[1], isinstance(h, NeverIndexedHeaderTuple))
                          for h in d.decode(blk, raw=True)]
                conn = 0 if i == 0 else -1   # -1: what the previous row left
                rows.append((seq, "%s #%d" % (seq, i), REQUEST, conn, blk,
                             summary(fields, REQUEST, 0 if i == 0 else None)))
        # the same requests with the default table (4096), one encoder for the sequence: the
        # decoder keeps the table (40 requests insert far more than 4,096 bytes: entries are
        # evicted, the ring wraps, names of entries are referenced with new values), and,
        # as a decoder that keeps none sees each block, slow at the first reference to an
        # entry an earlier block (or this one) inserted, exactly where Python's encoder put it
        e = Encoder()
        d = Decoder()
        unknown = []
        for i in range(40):
            h = gen_request(rng, i)
            blk = e.encode(h, huffman=huff)
            fields = [(h[0], h[1], isinstance(h, NeverIndexedHeaderTuple))
                      for h in d.decode(blk, raw=True)]
            rows.append(("gen-dyn-%d" % huff, "dynamic table #%d" % i, REQUEST,
                         0 if i == 0 else -1, blk, summary(fields, REQUEST)))
            dyn = first_dynamic(blk)
            unknown.append(("gen-dyn-unknown-%d-%d" % (huff, i), "no table kept #%d" % i, REQUEST,
                         HP_UNKNOWN, blk, "%s@%d" % dyn if dyn else summary(fields, REQUEST)))
        rows.extend(unknown)
    # responses and trailers
    for huff in (False, True):
        e = Encoder()
        e.header_table_size = 0
        d = Decoder()
        for i, h in enumerate([[(":status", "200"), ("content-type", "application/grpc"),
                                ("grpc-accept-encoding", "identity")],
                               [("grpc-status", "7"), ("grpc-message", "permission denied")],
                               [(":status", "404"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                                ("content-length", "148"), ("set-cookie", "a=b; Path=/")]]):
            blk = e.encode(h, huffman=huff)
            got = d.decode(blk, raw=True)
            fields = [(n, v, False) for n, v in got]
            m = TRAILERS if i == 1 else RESPONSE
            rows.append(("gen-resp-%d" % huff, "response %d" % i, m, 0 if i == 0 else -1, blk,
                         summary(fields, m, 0 if i == 0 else None)))
    return rows


def first_dynamic(blk):
    """the result and offset where a decoder that does not know the dynamic table must stop"""
    p = 0
    while p < len(blk):
        b = blk[p]
        if b & 0x80:
            i, k = rint(blk, p, 7)
            if i > 61:
                return "slow:DYNAMIC", p
            p += k
            continue
        if b & 0x20 and not b & 0x40:
            p += rint(blk, p, 5)[1]
            continue
        i, k = rint(blk, p, 6 if b & 0x40 else 4)
        if i > 61:
            return "slow:DYNAMIC", p
        p += k
        if i == 0:
            p += skip_str(blk, p)
        p += skip_str(blk, p)
    return None


def rint(b, p, bits):
    m = (1 << bits) - 1
    v = b[p] & m
    if v < m:
        return v, 1
    k, sh = 1, 0
    while True:
        c = b[p + k]
        v += (c & 0x7f) << sh
        sh += 7
        k += 1
        if not c & 0x80:
            return v, k


def skip_str(b, p):
    n, k = rint(b, p, 7)
    return k + n


# Hostile and edge blocks, each with the result the RFCs require (and what the kernel path
# adds: the slow path for what it does not track). Offsets are the representation's.
def hostile_rows():
    rows = []
    REQ = [idx(2), idx(6), idx(4), lit("without", 1, "example.com")]   # GET http / example.com
    Z = HP_ACKED | HP_ZERO

    def ok_req(name, reps, mode=REQUEST, conn=Z, update=None):
        b, _ = block(*reps)
        rows.append(("hostile", name, mode, conn, b, summary(fields_of(b), mode, update)))

    def bad(name, reps, expect, at_rep=None, mode=REQUEST, conn=Z, at=None):
        b, offs = block(*reps)
        if at is None:
            at = offs[at_rep] if at_rep is not None else len(b)
        rows.append(("hostile", name, mode, conn, b, "%s@%d" % (expect, at)))

    C = "conn:COMPRESSION_ERROR"
    M = "stream:PROTOCOL_ERROR"
    # RFC 7541 5.1 and the implementation limit: 4 continuation bytes at most
    bad("integer overflow (index)", REQ + [b"\xff\xff\xff\xff\xff\xff\x0f"], C, 4)
    bad("integer 5 continuation bytes", REQ + [b"\x7f\x80\x80\x80\x80\x00"], C, 4)
    bad("integer truncated", REQ + [b"\xff\x80"], C, 4)
    # the limit exactly: a length of 127 in 1 + 4 bytes (zero continuations) decodes, in 1 + 5
    # it is past the limit
    ok_req("integer of 4 continuation bytes", REQ + [b"\x0f\x2b\x7f\x80\x80\x80\x00" + b"u" * 127])
    bad("integer of 5 continuation bytes", REQ + [b"\x0f\x2b\x7f\x80\x80\x80\x80\x00" + b"u" * 127],
        C, 4)
    bad("integer of 2^28 + 126", REQ + [b"\xff\xff\xff\xff\x7f"], C, 4)
    bad("string length overflow", REQ + [b"\x00\xff\xff\xff\xff\x0f"], C, 4)
    bad("string past the block", REQ + [b"\x00\x05abc"], C, 4)
    bad("string length truncated", REQ + [b"\x00\x7f"], C, 4)
    bad("value missing", REQ + [b"\x00\x01a"], C, 4)
    bad("index 0 (2.3.3, 6.1)", REQ + [idx(0)], C, 4)
    bad("dynamic index, empty table", REQ + [idx(62)], C, 4)
    bad("dynamic name index, empty table", REQ + [lit("without", 62, "x")], C, 4)
    bad("dynamic index, table unknown", REQ + [idx(62)], "slow:DYNAMIC", 4, conn=HP_UNKNOWN)
    bad("dynamic index, initial table", REQ + [idx(62)], C, 4, conn=0)
    bad("dynamic name index, initial table", REQ + [lit("without", 62, "x")], C, 4, conn=0)
    # a table not kept: what a literal with indexing inserts only a later dynamic reference
    # reads (slow above)
    ok_req("indexing, table unknown", REQ + [lit("inc", 58, "x")], conn=HP_UNKNOWN)
    ok_req("indexing, initial table", REQ + [lit("inc", 58, "x")], conn=0)
    ok_req("indexing, table size 0 pending", REQ + [lit("inc", 58, "x")], conn=HP_PENDING)
    ok_req("indexing, table size 0", REQ + [lit("inc", 58, "x")])
    ok_req("indexing after an update to 0", [update(0)] + REQ + [lit("inc", 58, "x")], conn=0,
           update=0)
    # 4.2 / 6.3: size updates at the start only, within the limit
    bad("size update after a field", REQ + [update(0)], C, 4)
    bad("size update above 4096", [update(4097)] + REQ, C, 0, conn=0)
    ok_req("size update 4096 then 0", [update(4096), update(0)] + REQ, conn=0, update=0)
    bad("size update 1 after our 0 is acked", [update(1)] + REQ, C, 0, conn=HP_ACKED)
    bad("size update due, not sent (4.2)", REQ, C, 0, conn=HP_ACKED | HP_UPDATE)
    bad("size update due, empty block", [], C, conn=HP_ACKED | HP_UPDATE, at=0)
    bad("size update above 4096, table unknown", [update(4097)] + REQ, C, 0, conn=HP_UNKNOWN)
    bad("size update to 0: an unknown table is known (empty)", [update(0)] + REQ + [idx(62)], C, 5,
        conn=HP_UNKNOWN)
    ok_req("size update due, sent", [update(0)] + REQ, conn=HP_ACKED | HP_UPDATE, update=0)
    # Huffman (5.2)
    bad("huffman EOS in a value", REQ + [b"\x00" + hstr("x-a") + bytes([0x80 | 4]) +
                                         huff_bits([256])], C, 4)
    bad("huffman padding zeros", REQ + [b"\x00" + hstr("x-a") + bytes([0x81]) +
                                        huff_bits([ord("a")], "000")], C, 4)
    bad("huffman padding > 7 bits", REQ + [b"\x00" + hstr("x-a") + bytes([0x82]) +
                                           HUFF.encode(b"a") + b"\xff"], C, 4)
    bad("huffman EOS in a name", REQ + [b"\x00" + bytes([0x84]) + huff_bits([256]) +
                                        hstr("v")], C, 4)
    # RFC 9113 8.2.1: field names and values
    bad("uppercase name", REQ + [lit("without", "X-User", "a")], M, 4)
    bad("uppercase name (huffman)", REQ + [lit("without", "User-Agent", "a", True)], M, 4)
    bad("space in a name", REQ + [lit("without", "x user", "a")], M, 4)
    bad("colon in a name", REQ + [lit("without", "x:user", "a")], M, 4)
    bad("empty name", REQ + [lit("without", "", "a")], M, 4)
    bad("NUL in a value", REQ + [lit("without", "x-a", "a\x00b")], M, 4)
    bad("CR in a value", REQ + [lit("without", "x-a", "a\rb")], M, 4)
    bad("LF in a value (huffman)", REQ + [lit("without", "x-a", "a\nb", True)], M, 4)
    bad("LF in a wanted value", REQ + [lit("without", 58, "a\nb")], M, 4)
    bad("leading space", REQ + [lit("without", "x-a", " a")], M, 4)
    bad("trailing tab", REQ + [lit("without", "x-a", "a\t")], M, 4)
    bad("trailing space, long value", REQ + [lit("without", "x-a", "v" * 100 + " ")], M, 4)
    ok_req("inner spaces", REQ + [lit("without", "x-a", "a  b")])
    # 8.2.2: connection-specific fields; te only "trailers"
    for n in ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"):
        bad("connection-specific: " + n, REQ + [lit("without", n, "x")], M, 4)
    bad("transfer-encoding (static name)", REQ + [lit("without", 57, "chunked")], M, 4)
    bad("te: gzip", REQ + [lit("without", "te", "gzip")], M, 4)
    bad("te: trailers, gzip", REQ + [lit("without", "te", "trailers, gzip")], M, 4)
    ok_req("te: trailers", REQ + [lit("without", "te", "trailers")])
    bad("te in a response", [idx(8), lit("without", "te", "trailers")], M, 1, mode=RESPONSE)
    # 8.3: pseudo-headers
    bad("pseudo after a regular field", [idx(2), idx(6), lit("without", 58, "x"), idx(4)], M, 3)
    bad(":path twice", [idx(2), idx(6), idx(4), idx(5)], M, 3)
    bad(":method twice", [idx(2), idx(3), idx(6), idx(4)], M, 1)
    bad("unknown pseudo", REQ[:3] + [lit("without", ":foo", "x")] + REQ[3:], M, 3)
    bad("unknown long pseudo", REQ[:3] + [lit("without", ":" + "x" * 40, "x")] + REQ[3:], M, 3)
    bad(":protocol (not enabled)", REQ + [lit("without", ":protocol", "websocket")], M, 4)
    bad(":status in a request", [idx(8)] + REQ, M, 0)
    bad(":method in a response", [idx(8), idx(2)], M, 1, mode=RESPONSE)
    bad("pseudo in trailers", [idx(8)], M, 0, mode=TRAILERS)
    bad(":path missing", [idx(2), idx(6), lit("without", 1, "a")], M)
    bad(":path empty", [idx(2), idx(6), lit("without", 4, ""), lit("without", 1, "a")], M)
    bad(":method missing", [idx(6), idx(4), lit("without", 1, "a")], M)
    bad(":scheme missing", [idx(2), idx(4), lit("without", 1, "a")], M)
    bad(":path not origin-form", [idx(2), idx(6), lit("without", 4, "http://a/b"),
                                  lit("without", 1, "a")], M)
    bad(":path * for GET", [idx(2), idx(6), lit("without", 4, "*"), lit("without", 1, "a")], M)
    ok_req(":path * for OPTIONS", [lit("without", 2, "OPTIONS"), idx(6), lit("without", 4, "*"),
                                   lit("without", 1, "a")])
    bad(":path with '#'", [idx(2), idx(6), lit("without", 4, "/a#b"), lit("without", 1, "a")],
        M, 2)
    bad(":path with a space", [idx(2), idx(6), lit("without", 4, "/a b"),
                               lit("without", 1, "a")], M, 2)
    bad(":path with a backslash", [idx(2), idx(6), lit("without", 4, "/a\\b"),
                                   lit("without", 1, "a")], M, 2)
    bad("empty :method", [lit("without", 2, ""), idx(6), idx(4)], M, 0)
    bad(":method not a token", [lit("without", 2, "GE T"), idx(6), idx(4)], M, 0)
    bad("unknown method (slow path)", [lit("without", 2, "BREW"), idx(6), idx(4)],
        "slow:METHOD")
    ok_req("CONNECT", [lit("without", 2, "CONNECT"), lit("without", 1, "example.com:443")])
    bad("CONNECT with :path", [lit("without", 2, "CONNECT"), lit("without", 1, "a:1"), idx(4)],
        M)
    bad("CONNECT without :authority", [lit("without", 2, "CONNECT")], M)
    bad(":authority with userinfo", [idx(2), idx(6), idx(4), lit("without", 1, "u@h")], M, 3)
    bad(":authority empty", [idx(2), idx(6), idx(4), idx(1)], M)
    bad("host differs from :authority", REQ + [lit("without", 38, "other.com")], M)
    ok_req("host equals :authority (case)", REQ + [lit("without", 38, "Example.COM")])
    ok_req("host alone", [idx(2), idx(6), idx(4), lit("without", 38, "h.example")])
    bad("two host fields", [idx(2), idx(6), idx(4), lit("without", 38, "a"),
                            lit("without", 38, "a")], M, 4)
    bad("host with userinfo", [idx(2), idx(6), idx(4), lit("without", 38, "u@h")], M, 3)
    bad("content-length not digits", REQ + [lit("without", 28, "12a")], M, 4)
    bad("content-length empty", REQ + [lit("without", 28, "")], M, 4)
    bad("content-length twice", REQ + [lit("without", 28, "1"), lit("without", 28, "1")], M, 5)
    ok_req("content-length", REQ + [lit("without", 28, "1234")])
    bad("content-length > 4 GiB (slow path)", REQ + [lit("without", 28, "4294967296")],
        "slow:VALUE_SIZE", 4)
    bad("response without :status", [lit("without", 31, "text/plain")], M, mode=RESPONSE)
    bad("response :status 2 digits", [lit("without", 8, "20")], M, 0, mode=RESPONSE)
    bad("response :status not digits", [lit("without", 8, "2x0")], M, 0, mode=RESPONSE)
    bad("response :status 099", [lit("without", 8, "099")], M, mode=RESPONSE)
    # what the kernel leaves to the slow path
    bad("wanted header twice", REQ + [lit("without", 58, "a"), lit("without", 58, "b")],
        "slow:DUP_WANTED", 5)
    bad("129 fields", REQ + [lit("without", "x-a", "b")] * 125, "slow:FIELDS", 4 + 124)
    bad(":authority longer than 255", [idx(2), idx(6), idx(4), lit("without", 1, "a" * 256)],
        "slow:VALUE_SIZE", 3)
    # Huffman-coded values decode to more than the block: 3 x 6,000 bytes from 11 KiB
    bad("values past the request buffer", REQ + [lit("without", 58, "a" * 6000, True),
                                                 lit("without", "x-user", "a" * 6000, True),
                                                 lit("without", 23, "a" * 6000, True)],
        "slow:OUT_SIZE", 6)
    # malformed comes after a compression error in the same block: the connection error wins
    bad("malformed then compression error", REQ + [lit("without", "X-A", "b"), idx(0)], C, 5)
    ok_req("unread long value", REQ + [lit("without", "x-long", "z" * 15000)])
    ok_req("unread long huffman value", REQ + [lit("without", "x-long", "zq" * 4000, True)])
    ok_req("never-indexed wanted", REQ + [lit("never", 23, "Bearer t"),
                                          lit("never", "x-user", "alice", True)])
    ok_req("static table values", [idx(3), idx(7), idx(5), lit("without", 1, "a"), idx(16),
                                   idx(19), idx(58), idx(24)])
    ok_req("fields mode: anything goes", [lit("without", "X-Up", "a\r\n"), idx(8), idx(2)],
           mode=FIELDS)
    rows.extend(table_rows(REQ))
    return rows


def table_rows(REQ):
    """Blocks that use the dynamic table, in sequences (one table: conn -1 carries the state
    the previous row left), with what the RFC says of each: the fields from Python's decoder
    (which keeps the table), or the error."""
    rows = []
    C = "conn:COMPRESSION_ERROR"

    def seq(name, blocks, conn=0):
        d = Decoder()
        d.max_header_list_size = 1 << 30
        for i, (what, reps, expect) in enumerate(blocks):
            b, offs = block(*reps)
            if expect is None:
                fields = [(h[0], h[1], isinstance(h, NeverIndexedHeaderTuple))
                          for h in d.decode(b, raw=True)]
                upd = d.header_table_size if b and b[0] & 0xe0 == 0x20 else None
                s = summary(fields, REQUEST, upd)
            else:
                s = "%s@%d" % (expect[0], offs[expect[1]])
            rows.append(("table-" + name, "%s: %s" % (name, what), REQUEST,
                         conn if i == 0 else -1, b, s))

    # an entry read in the block that inserted it, and from later blocks; its name with a
    # new value (itself inserted), never indexed with the entry's name
    seq("insert", [
        ("insert, read", REQ + [lit("inc", "x-a", "one"), idx(62)], None),
        ("read later", REQ + [idx(62)], None),
        ("name with a new value", REQ + [lit("inc", 62, "two"), idx(62), idx(63)], None),
        ("never indexed, the entry's name", REQ + [lit("never", 63, "three"), idx(63)], None),
        ("past the table", REQ + [idx(64)], (C, 4)),
    ])
    # :path from the table: what an earlier block inserted decides this one
    seq("path", [
        ("path inserted", [idx(2), idx(6), lit("inc", 4, "/admin/users"),
                           lit("without", 1, "example.com")], None),
        ("path referenced", [idx(2), idx(6), idx(62), lit("without", 1, "example.com")], None),
    ])
    # Huffman-coded names and values inserted, then read
    seq("huffman", [
        ("insert", REQ + [lit("inc", "x-huffman-name", "a value that is Huffman coded", True)],
         None),
        ("read", REQ + [idx(62), lit("inc", 62, "another one, coded too", True), idx(62)], None),
    ])
    # eviction (4.4): a table of 100 bytes holds one 52-byte entry; the second evicts the
    # first, so index 63 is past the table
    e1, e2 = lit("inc", "aaaaaaaaaa", "bbbbbbbbbb"), lit("inc", "cccccccccc", "dddddddddd")
    # (an error ends a sequence: the connection ends with it)
    seq("evict", [
        ("two entries, room for one", [update(100)] + REQ + [e1, e2, idx(62)], None),
        ("the newer one is there", REQ + [idx(62)], None),
        ("the older one is gone", REQ + [idx(63)], (C, 4)),
    ])
    # an entry larger than the table empties it (4.4)
    seq("too-large", [
        ("one entry", [update(64)] + REQ + [lit("inc", "aaaaaaaaaaaaaa", "bbbbbbbbbbbbbb")],
         None),
        ("larger than the table", REQ + [lit("inc", "x", "y" * 40)], None),
        ("nothing left", REQ + [idx(62)], (C, 4)),
    ])
    # a size update evicts (4.3) and a later one may raise the size again up to the limit
    three = REQ + [lit("inc", "x-1", "a" * 20), lit("inc", "x-2", "b" * 20),
                   lit("inc", "x-3", "c" * 20)]
    seq("shrink", [
        ("three entries", three, None),
        ("shrunk to two: the oldest went", [update(120)] + REQ + [idx(64)], (C, 5)),
    ])
    seq("resize", [
        ("three entries", three, None),
        ("shrunk to two", [update(120)] + REQ + [idx(62), idx(63)], None),
        ("emptied, raised", [update(0), update(4096)] + REQ + [lit("inc", "x-4", "d")], None),
        ("one entry again", REQ + [idx(62)], None),
        ("only one", REQ + [idx(63)], (C, 4)),
    ])
    # the ring wraps: entries of 1,000-byte values, 60 of them through a 4,096-byte table
    big = []
    for i in range(20):
        v = ("%02d" % i) * 500
        big.append(("entry %d" % i, REQ + [lit("inc", "x-big-%d" % (i % 3), v), idx(62)] +
                    ([idx(63), idx(64)] if i >= 2 else []), None))
    seq("wrap", big)
    # an entry's name copied into a new entry over the entry itself: one entry of 4,032
    # bytes leaves 64 free, so the copy's writes run 64 bytes behind its reads (and over the
    # entry: a re-encoder that read the name from there would read it shifted); the value
    # is upper case, so a name that took any of its bytes would be malformed
    seq("overlap", [
        ("one entry of 4,032 bytes", REQ + [lit("inc", "abcdefghijklmnopqrstuvwxy" * 80, "V" * 2000)], None),
        ("its name with a new value, inserted", REQ + [lit("inc", 62, "v"), idx(62)], None),
        ("read again", REQ + [idx(62)], None),
        ("the first one went", REQ + [idx(63)], (C, 4)),
    ])
    # an entry of the largest size that fits (4,096 - 32 bytes of name and value), read
    seq("largest", [
        ("4064 bytes", REQ + [lit("inc", "x-l", "v" * 4061), idx(62)], None),
        ("one byte more empties it", REQ + [lit("inc", "x-l", "v" * 4062)], None),
        ("empty", REQ + [idx(62)], (C, 4)),
    ])
    return rows


def fields_of(b):
    d = Decoder()
    d.max_header_list_size = 1 << 30
    out = []
    for h in d.decode(b, raw=True):
        out.append((h[0], h[1], isinstance(h, NeverIndexedHeaderTuple)))
    return out


# ---- streams.tsv ----------------------------------------------------------------------------
def frame(t, fl, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([t, fl]) + sid.to_bytes(4, "big") + payload


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS0 = frame(4, 0, 0, b"\x00\x01\x00\x00\x00\x00")   # the client's own SETTINGS


class Oracle:
    """What the scan + decode transcript of one direction must be (test_h2.c h2_transcript):
    the frames, and per completed header block its stream and summary. The HPACK state follows
    the same rules as l7/h2.h documents (the ACK of our SETTINGS_HEADER_TABLE_SIZE 0, size
    updates), the fields come from Python's decoder, which keeps the real dynamic table."""

    def __init__(self, client):
        self.client = client
        self.pending, self.acked, self.zero, self.upd = True, False, False, False
        self.dec = Decoder()
        self.final = set()   # streams with a final response (server) / headers (client)
        self.events = []
        self.frames = 0

    def run(self, data):
        p = len(PREFACE) if self.client else 0
        blk, sid0 = b"", 0
        while p + 9 <= len(data):
            n = int.from_bytes(data[p:p + 3], "big")
            t, fl, sid = data[p + 3], data[p + 4], int.from_bytes(data[p + 5:p + 9], "big")
            pay = data[p + 9:p + 9 + n]
            self.frames += 1
            if t == 4 and fl & 1 and self.pending:
                self.pending, self.acked = False, True
                self.upd = not self.zero
            if t == 1:
                o = (1 if fl & 8 else 0) + (5 if fl & 0x20 else 0)
                pad = pay[0] if fl & 8 else 0
                blk, sid0 = pay[o:len(pay) - pad], sid
            elif t == 9:
                blk += pay
            if t in (1, 9) and fl & 4:
                self.block(sid0, blk)
            p += 9 + n
        self.events.append("frames=%d" % self.frames)
        return " || ".join(self.events)

    def block(self, sid, blk):
        if self.client:
            mode = TRAILERS if sid in self.final else REQUEST
        else:
            mode = TRAILERS if sid in self.final else RESPONSE
        rc = self.check(blk)
        got = self.dec.decode(blk, raw=True)
        update = None
        if blk and blk[0] & 0xe0 == 0x20:
            update = self.dec.header_table_size
        if rc is None:
            fields = [(h[0], h[1], isinstance(h, NeverIndexedHeaderTuple)) for h in got]
            s = summary(fields, mode, update)
            if mode == RESPONSE:
                st = int(dict((h[0], h[1]) for h in got)[b":status"])
                if st >= 200:
                    self.final.add(sid)
            elif mode == REQUEST:
                self.final.add(sid)
        else:
            s = "%s@%d" % rc
            if self.client:
                self.final.add(sid)
        self.events.append("%d:%s" % (sid, s))

    def check(self, blk):
        """None if the kernel decodes it, else (result, offset); updates the state"""
        p, first = 0, True
        while p < len(blk):
            b = blk[p]
            if b & 0xe0 == 0x20:
                v, k = rint(blk, p, 5)
                assert first and v <= (0 if self.acked else 4096)
                self.zero, self.upd = v == 0, False
                p += k
                continue
            first = False
            assert not self.upd
            # a dynamic reference: the decoder keeps the table (Python's decodes it), which
            # is empty once its size is 0
            if b & 0x80:
                i, k = rint(blk, p, 7)
                if i > 61 and self.zero:
                    return ("conn:COMPRESSION_ERROR", p)
                p += k
                continue
            inc = bool(b & 0x40)
            i, k = rint(blk, p, 6 if inc else 4)
            if i > 61 and self.zero:
                return ("conn:COMPRESSION_ERROR", p)
            p += k
            if i == 0:
                p += skip_str(blk, p)
            p += skip_str(blk, p)
        return None


def capture_rows(datadir):
    rows = []
    for fn in sorted(os.listdir(datadir)):
        if not fn.endswith(".h2cap"):
            continue
        chunks = {"c": [], "s": []}
        for line in open(os.path.join(datadir, fn)):
            if line[:2] in ("c ", "s "):
                chunks[line[0]].append(line[2:].strip())
        for d in "cs":
            data = bytes.fromhex("".join(chunks[d]))
            expect = Oracle(d == "c").run(data)
            rows.append(("%s %s" % (fn, d), "c" if d == "c" else "s", "cap:%s:%s" % (fn, d),
                         expect))
    return rows


def hostile_streams():
    """frame sequences in the client's direction (after the preface and SETTINGS), each
    with the error RFC 9113 gives it (the section is in the name) and the frame it is about"""
    rows = []
    GET = bytes([0x82, 0x86, 0x84, 0x01, 0x01, 0x61])   # GET http / :authority a
    ok_summary = "ok :method=GET :scheme=http :authority=a :path=/ n=4 never=0 method=1 host=a path=/ query="

    def case(name, frames, expect, head=PREFACE + SETTINGS0, client="c"):
        data, offs = head, []
        for f in frames:
            offs.append(len(data))
            data += f
        e = expect(offs) if callable(expect) else expect
        rows.append((name, client, "hex:" + data.hex(), e))

    def at_last(code, before=""):
        return lambda offs: "%s%s@%d" % (before, code, offs[-1])

    def H(sid, fl=5, blk=GET):
        return frame(1, fl, sid, blk)

    FS, PE = "conn:FRAME_SIZE_ERROR", "conn:PROTOCOL_ERROR"
    R1 = "1:%s || " % ok_summary   # the request on stream 1 came first
    case("preface, settings, request", [H(1)], "1:%s || frames=2" % ok_summary)
    case("bad preface (3.4)", [], "conn:PROTOCOL_ERROR@0", head=b"PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n")
    case("HTTP/1.1 instead (3.4)", [], "conn:PROTOCOL_ERROR@0", head=b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    case("first frame not SETTINGS (3.4)", [H(1)], at_last(PE), head=PREFACE)
    case("first frame a SETTINGS ACK (3.4)", [frame(4, 1, 0, b"")], at_last(PE), head=PREFACE)
    case("server: first frame not SETTINGS", [frame(6, 0, 0, b"12345678")], at_last(PE),
         head=b"", client="s")
    case("oversized frame (4.2)", [frame(0, 0, 1, b"x" * 16385)], at_last(FS))
    case("oversized HEADERS header alone (4.2)", [b"\x00\x40\x01\x01\x04\x00\x00\x00\x01"],
         at_last(FS))
    case("max-size DATA on an open stream", [H(1, 4), frame(0, 1, 1, b"d" * 16384)],
         "1:%s || frames=3" % ok_summary)
    case("DATA on stream 0 (6.1)", [frame(0, 0, 0, b"x")], at_last(PE))
    case("DATA on an idle stream (5.1)", [frame(0, 0, 3, b"x")], at_last(PE))
    case("DATA padding = length (6.1)", [H(1, 4), frame(0, 8, 1, b"\x04abc")], at_last(PE, R1))
    case("DATA padding > length (6.1)", [H(1, 4), frame(0, 8, 1, b"\x09abc")], at_last(PE, R1))
    case("DATA padded, empty (6.1)", [H(1, 4), frame(0, 8, 1, b"")], at_last(FS, R1))
    case("DATA padding fits", [H(1, 4), frame(0, 9, 1, b"\x02ab\x00\x00")],
         "1:%s || frames=3" % ok_summary)
    case("HEADERS on stream 0 (6.2)", [H(0)], at_last(PE))
    case("HEADERS on an even stream (5.1.1)", [H(2)], at_last(PE))
    case("HEADERS padding > fragment (6.2)", [frame(1, 0x0d, 1, b"\x07" + GET)], at_last(PE))
    case("HEADERS padded + priority, too short (6.2)", [frame(1, 0x2d, 1, b"\x00\x00\x00")],
         at_last(FS))
    case("HEADERS padded + priority", [frame(1, 0x2d, 1, b"\x02\x00\x00\x00\x00\x10" + GET +
                                             b"\x00\x00")], "1:%s || frames=2" % ok_summary)
    case("HEADERS depends on itself (5.3.1)", [frame(1, 0x25, 3, b"\x00\x00\x00\x03\x10" + GET)],
         at_last("stream:PROTOCOL_ERROR"))
    case("PRIORITY length 4 (6.3)", [frame(2, 0, 1, b"\x00\x00\x00\x00")],
         at_last("stream:FRAME_SIZE_ERROR"))
    case("PRIORITY on stream 0 (6.3)", [frame(2, 0, 0, b"\x00\x00\x00\x01\x10")], at_last(PE))
    case("PRIORITY depends on itself (5.3.1)", [frame(2, 0, 5, b"\x00\x00\x00\x05\x10")],
         at_last("stream:PROTOCOL_ERROR"))
    case("PRIORITY on idle streams (as nghttp sends)", [frame(2, 0, 3, b"\x00\x00\x00\x00\x10"),
                                                        H(5)], "5:%s || frames=3" % ok_summary)
    case("RST_STREAM length 3 (6.4)", [H(1, 4), frame(3, 0, 1, b"\x00\x00\x08")],
         at_last(FS, R1))
    case("RST_STREAM on stream 0 (6.4)", [frame(3, 0, 0, b"\x00\x00\x00\x08")], at_last(PE))
    case("RST_STREAM on an idle stream (6.4)", [frame(3, 0, 1, b"\x00\x00\x00\x08")],
         at_last(PE))
    case("SETTINGS on stream 1 (6.5)", [frame(4, 0, 1, b"")], at_last(PE))
    case("SETTINGS length 5 (6.5)", [frame(4, 0, 0, b"\x00\x03\x00\x00\x00")], at_last(FS))
    case("SETTINGS ACK with payload (6.5)", [frame(4, 1, 0, b"\x00\x03\x00\x00\x00\x01")],
         at_last(FS))
    case("SETTINGS_ENABLE_PUSH 2 (6.5.2)", [frame(4, 0, 0, b"\x00\x02\x00\x00\x00\x02")],
         at_last(PE))
    case("SETTINGS_INITIAL_WINDOW_SIZE 2^31 (6.5.2)",
         [frame(4, 0, 0, b"\x00\x04\x80\x00\x00\x00")], at_last("conn:FLOW_CONTROL_ERROR"))
    case("SETTINGS_MAX_FRAME_SIZE 16383 (6.5.2)", [frame(4, 0, 0, b"\x00\x05\x00\x00\x3f\xff")],
         at_last(PE))
    case("SETTINGS_MAX_FRAME_SIZE 2^24 (6.5.2)", [frame(4, 0, 0, b"\x00\x05\x01\x00\x00\x00")],
         at_last(PE))
    case("SETTINGS: 40 entries, one bad at the end", [frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x64" * 39 +
                                                            b"\x00\x02\x00\x00\x00\x05")], at_last(PE))
    case("SETTINGS: unknown ids ignored", [frame(4, 0, 0, b"\x00\x63\xff\xff\xff\xff" * 10), H(1)],
         "1:%s || frames=3" % ok_summary)
    case("PUSH_PROMISE (8.4)", [frame(5, 4, 1, b"\x00\x00\x00\x02" + GET)], at_last(PE))
    case("PING length 7 (6.7)", [frame(6, 0, 0, b"1234567")], at_last(FS))
    case("PING on stream 1 (6.7)", [frame(6, 0, 1, b"12345678")], at_last(PE))
    case("GOAWAY length 7 (6.8)", [frame(7, 0, 0, b"\x00" * 7)], at_last(FS))
    case("GOAWAY on stream 1 (6.8)", [frame(7, 0, 1, b"\x00" * 8)], at_last(PE))
    case("GOAWAY with debug data", [frame(7, 0, 0, b"\x00" * 8 + b"bye" * 100)], "frames=2")
    case("WINDOW_UPDATE 0 on a stream (6.9)", [H(1, 4), frame(8, 0, 1, b"\x00\x00\x00\x00")],
         at_last("stream:PROTOCOL_ERROR", R1))
    case("WINDOW_UPDATE 0 on the connection (6.9)", [frame(8, 0, 0, b"\x00\x00\x00\x00")],
         at_last(PE))
    case("WINDOW_UPDATE length 3 (6.9)", [frame(8, 0, 0, b"\x00\x00\x01")], at_last(FS))
    case("WINDOW_UPDATE on an idle stream (5.1)", [frame(8, 0, 7, b"\x00\x00\x00\x01")],
         at_last(PE))
    case("CONTINUATION without HEADERS (6.10)", [frame(9, 4, 1, GET)], at_last(PE))
    case("CONTINUATION after a complete block (6.10)", [H(1), frame(9, 4, 1, GET)],
         at_last(PE, R1))
    case("CONTINUATION on another stream (6.10)", [H(1, 1, GET[:3]), frame(9, 4, 3, GET[3:])],
         at_last(PE))
    case("DATA inside a header block (6.2)", [H(1, 1, GET[:3]), frame(0, 0, 1, b"x")],
         at_last(PE))
    case("unknown frame inside a header block (6.2)", [H(1, 1, GET[:3]), frame(0x20, 0, 0, b"x")],
         at_last(PE))
    case("PING inside a header block (6.2)", [H(1, 1, GET[:3]), frame(6, 0, 0, b"12345678")],
         at_last(PE))
    case("unknown frame types are ignored (4.1)", [frame(0x20, 0xff, 0, b"xyz"),
                                                   frame(0xfa, 0, 9, b""), H(1)],
         "1:%s || frames=4" % ok_summary)
    case("reserved bit of the stream id ignored (4.1)",
         [frame(1, 5, 0x80000001, GET)], "1:%s || frames=2" % ok_summary)
    case("block split over 8 CONTINUATION frames", [H(1, 1, GET[:1])] +
         [frame(9, 0, 1, GET[i:i + 1]) for i in range(1, 5)] + [frame(9, 0, 1, b"")] * 3 +
         [frame(9, 4, 1, GET[5:])], "1:%s || frames=10" % ok_summary)
    case("CONTINUATION flood: 9 frames (slow path)", [H(1, 1, GET[:1])] +
         [frame(9, 0, 1, b"")] * 8 + [frame(9, 4, 1, GET[1:])], at_last("slow:CONT_FLOOD"))
    case("CONTINUATION flood: 1000 empty frames", [H(1, 1, GET[:1])] +
         [frame(9, 0, 1, b"")] * 1000, lambda offs: "slow:CONT_FLOOD@%d" % offs[9])
    # a block of exactly 16 KiB decodes; one byte more is the slow path's
    big = lit("without", "x-big", "b" * 16000)
    big = lit("without", "x-big", "b" * (16000 + 16384 - len(GET) - len(big)))
    assert len(GET) + len(big) == 16384
    full = "1:ok :method=GET :scheme=http :authority=a :path=/ n=5 never=0 method=1 host=a " \
           "path=/ query= || frames=3"
    case("header block of 16 KiB", [H(1, 0, GET + big[:8000]), frame(9, 5, 1, big[8000:])], full)
    case("header block past 16 KiB (slow path)", [H(1, 0, GET + big[:8000]),
                                                   frame(9, 0, 1, big[8000:]),
                                                   frame(9, 4, 1, b"\x00")],
         at_last("slow:BLOCK_SIZE"))
    # 4.2: once the client acknowledged our SETTINGS_HEADER_TABLE_SIZE 0, its next block must
    # start with a size update (its table was 4,096 bytes)
    ack = frame(4, 1, 0, b"")
    case("block after the ACK without the size update (RFC 7541 4.2)", [ack, H(1)],
         "1:conn:COMPRESSION_ERROR@0")
    case("block after the ACK with the size update", [ack, H(1, 5, b"\x20" + GET)],
         "1:%s || frames=3" % ok_summary.replace(" method=1", " update=0 method=1"))
    case("indexing after the ACK and the update", [ack, H(1, 5, b"\x20" + GET + lit("inc", 58, "x"))],
         "1:%s || frames=3" % ok_summary.replace(" n=4", " user-agent=x n=5").replace(
             " method=1", " update=0 method=1"))
    case("indexing before the ACK", [H(1, 5, GET + lit("inc", 58, "x"))],
         "1:%s || frames=2" % ok_summary.replace(" n=4", " user-agent=x n=5"))
    case("malformed request, then a good one", [H(1, 5, GET + lit("without", "X-A", "b")), H(3)],
         lambda offs: "1:stream:PROTOCOL_ERROR@6 || 3:%s || frames=3" % ok_summary)
    case("trailers on the request's stream", [H(1, 4), frame(0, 0, 1, b"body"),
                                             H(1, 5, lit("without", "x-trailer", "t"))],
         "1:%s || 1:ok n=1 never=0 || frames=4" % ok_summary)
    case("compression error inside a stream", [H(1, 5, GET + idx(0))],
         "1:conn:COMPRESSION_ERROR@6")
    return rows


def timing_blocks(datadir):
    """typical blocks of the captures, for ns per block: the first request and response of
    curl, nghttp, gRPC (and its trailers), decoded with a table of size 0 (their literals with
    incremental indexing then index nothing)"""
    out = []
    for fn, what in (("curl.h2cap", "curl"), ("nghttp.h2cap", "nghttp"), ("grpc.h2cap", "grpc")):
        chunks = {"c": b"", "s": b""}
        for line in open(os.path.join(datadir, fn)):
            if line[:2] in ("c ", "s "):
                chunks[line[0]] += bytes.fromhex(line[2:].strip())
        for d, mode in (("c", REQUEST), ("s", RESPONSE)):
            data, p, n = chunks[d], len(PREFACE) if d == "c" else 0, 0
            while p + 9 <= len(data):
                ln, t, fl = int.from_bytes(data[p:p + 3], "big"), data[p + 3], data[p + 4]
                if t == 1 and fl & 4:
                    o = (1 if fl & 8 else 0) + (5 if fl & 0x20 else 0)
                    pad = data[p + 9] if fl & 8 else 0
                    blk = data[p + 9 + o:p + 9 + ln - pad]
                    m = mode if n == 0 else TRAILERS
                    out.append(("%s %s" % (what, ["request", "response", "trailers"][
                        [REQUEST, RESPONSE, TRAILERS].index(m)]), m, blk))
                    n += 1
                    if d == "c" or n == 2 or what != "grpc":
                        break
                p += 9 + ln
    # for the cost model: per field, and per byte of raw and Huffman strings, read or not
    out.append(("1 indexed field", FIELDS, idx(16)))
    out.append(("33 indexed fields", FIELDS, idx(16) * 33))
    out.append(("1 KiB raw, not read", FIELDS, lit("without", "x-v", "v" * 1024)))
    out.append(("1 KiB raw, read", FIELDS, lit("without", 58, "v" * 1024)))
    out.append(("1 KiB Huffman, not read", FIELDS, lit("without", "x-v", "v" * 1024, True)))
    out.append(("1 KiB Huffman, read", FIELDS, lit("without", 58, "v" * 1024, True)))
    return out


def block_fields(blocks):
    """Every field (name, value, never indexed) of each block of blocks.tsv, by Python's
    decoder, which keeps the table from one row of a sequence to the next as the C side does
    (conn -1); None where it cannot decode the block (then its table is reset)."""
    out, d, prev = [], None, None
    for seq, name, mode, conn, blk, expect in blocks:
        if conn != -1 or seq != prev or d is None:
            d = Decoder()
            d.max_header_list_size = 1 << 30
        prev = seq
        try:
            out.append([(h[0], h[1], isinstance(h, NeverIndexedHeaderTuple)) for h in d.decode(blk, raw=True)])
        except Exception:
            out.append(None)
            d = None
    return out


def check_reenc(outdir):
    """test_h2's native/reenc wrote reenc.tsv: l7run's re-encoding (runtime/h2_reenc.c) of
    every block the C decoder accepts. Each must decode, by Python's decoder with a table of
    its own that it never touches, to every field of the block as the client meant it: names,
    values and never-indexed marks, in order (the C summary shows only the wanted ones)."""
    fields = {}
    for line in open(os.path.join(outdir, "fields.tsv")):
        i, js = line.rstrip("\n").split("\t")
        fields[int(i)] = js
    n = bad = 0
    for line in open(os.path.join(outdir, "reenc.tsv")):
        i, name, hexs = line.rstrip("\n").split("\t")
        d = Decoder()
        d.max_header_list_size = 1 << 30
        got = json.dumps([[h[0].hex(), h[1].hex(), isinstance(h, NeverIndexedHeaderTuple)]
                          for h in d.decode(bytes.fromhex(hexs), raw=True)])
        n += 1
        if got != fields.get(int(i)) or len(d.header_table.dynamic_entries) != 0:
            bad += 1
            print("FAIL %s: re-encoded %s\n  want %s" % (name, got[:300], fields.get(int(i), "?")[:300]))
    print("reenc: %d re-encoded blocks decoded by Python's decoder to the client's fields, %d differ" % (n, bad))
    return 1 if bad or n < 100 else 0


def main():
    if sys.argv[1] == "--check-reenc":
        return check_reenc(sys.argv[2])
    outdir, datadir = sys.argv[1], sys.argv[2]
    rng = random.Random(7541)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "huff.tsv"), "w") as f:
        f.write("name\tencoded\tdecoded\n")
        for name, enc, dec in huff_cases(rng):
            f.write("%s\t%s\t%s\n" % (name, enc.hex() or "-", "err" if dec is None else
                                      (dec.hex() or "-")))
    blocks = rfc_rows(datadir) + gen_rows(rng) + hostile_rows()
    with open(os.path.join(outdir, "blocks.tsv"), "w") as f:
        f.write("seq\tname\tmode\tconn\tblock\texpect\n")
        for seq, name, mode, conn, blk, expect in blocks:
            f.write("%s\t%s\t%d\t%d\t%s\t%s\n" % (seq, name, mode, conn, blk.hex() or "-",
                                                  expect))
    with open(os.path.join(outdir, "fields.tsv"), "w") as f:   # row (from 0) -> its fields
        for i, fl in enumerate(block_fields(blocks)):
            if fl is not None:
                f.write("%d\t%s\n" % (i, json.dumps([[n.hex(), v.hex(), never] for n, v, never in fl])))
    with open(os.path.join(outdir, "streams.tsv"), "w") as f:
        f.write("name\tdir\tsource\texpect\n")
        for name, d, src, expect in capture_rows(datadir) + hostile_streams():
            f.write("%s\t%s\t%s\t%s\n" % (name, d, src, expect))
    with open(os.path.join(outdir, "timing.tsv"), "w") as f:
        f.write("name\tmode\tconn\tblock\n")
        for name, mode, blk in timing_blocks(datadir):
            f.write("%s\t%d\t%d\t%s\n" % (name, mode, HP_ACKED | HP_ZERO, blk.hex()))
    with open(os.path.join(outdir, "static.tsv"), "w") as f:
        f.write("index\tname\tvalue\n")
        for i, (n, v) in enumerate(HeaderTable.STATIC_TABLE):
            f.write("%d\t%s\t%s\n" % (i + 1, n.decode(), v.decode() or "-"))
    print("vectors: %d huffman, %d blocks, %d streams in %s" % (
        len(huff_cases(random.Random(7541))), len(blocks),
        len(capture_rows(datadir)) + len(hostile_streams()), outdir))


if __name__ == "__main__":
    sys.exit(main())
