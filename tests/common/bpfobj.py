"""The functions of a BPF ELF object, for comparing two objects function by function
(tests/compiler/modes.py, tests/compiler/fixed.py): objects laid out differently compare equal
when each function has the same instructions, relocations and callees."""
import hashlib
import re
import struct


def elf(path):
    """{function name: (section, normalised instructions, relocations, callees)}"""
    d = open(path, 'rb').read()
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]

    def cstr(tab, off):
        base = secs[tab][4] + off
        return d[base:d.index(b'\0', base)].decode()

    names = [cstr(shstrndx, s[0]) for s in secs]
    symtab = next(i for i, s in enumerate(secs) if s[1] == 2)
    syms = []
    for k in range(secs[symtab][5] // 24):
        st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from('<IBBHQQ', d, secs[symtab][4] + 24 * k)
        syms.append((cstr(secs[symtab][6], st_name), st_info & 15, st_shndx, st_value, st_size))
    funcs, objs = {}, {}   # (section index, start offset) -> name (and size)
    for n, typ, shndx, value, size in syms:
        if typ == 2 and size:   # STT_FUNC; LLVM numbers internal copies (l7_xxh64_cb.41) per module
            funcs[(shndx, value)] = (re.sub(r'\.[0-9]+$', '', n), size)
        elif typ == 1:          # STT_OBJECT
            objs[(shndx, value)] = n
    relocs = {}  # section index -> {offset: symbol index}
    for i, s in enumerate(secs):
        if s[1] == 9:   # SHT_REL
            relocs[s[7]] = {o: info >> 32 for o, info in
                            (struct.unpack_from('<QQ', d, s[4] + 16 * k) for k in range(s[5] // 16))}
    # a datum without a symbol (a private constant in .rodata) is named by its bytes: up to the
    # next datum any instruction points at, less the padding (the objects lay .rodata out
    # differently)
    points = {}
    for shndx, rs in relocs.items():
        for o, sym in rs.items():
            sn, styp, sshndx, svalue, _ = syms[sym]
            if styp == 3:
                imm, = struct.unpack_from('<i', d, secs[shndx][4] + o + 4)
                points.setdefault(sshndx, set()).add(svalue + imm)

    def datum(sshndx, o):
        ends = [p for p in points.get(sshndx, ()) if p > o] + [secs[sshndx][5]]
        b = d[secs[sshndx][4] + o:secs[sshndx][4] + min(ends)].rstrip(b'\0')
        return '%s:%s' % (names[sshndx], hashlib.sha1(b).hexdigest()[:12])

    out = {}
    for (shndx, start), (name, size) in funcs.items():
        code = bytearray(d[secs[shndx][4] + start:secs[shndx][4] + start + size])
        rel, calls = [], []
        for off in range(0, size, 8):
            at = start + off
            op, regs = code[off], code[off + 1]
            imm, = struct.unpack_from('<i', code, off + 4)
            sym = relocs.get(shndx, {}).get(at)
            if op == 0x85 and regs >> 4 == 1:   # a BPF-to-BPF call: name its target
                if sym is not None:
                    sn, styp, sshndx, svalue, _ = syms[sym]
                    target = (sshndx, svalue + (imm + 1) * 8) if styp == 3 else (sshndx, svalue)
                else:
                    target = (shndx, at + (imm + 1) * 8)
                calls.append((off, funcs.get(target, ('?%s+%d' % target, 0))[0]))
                struct.pack_into('<i', code, off + 4, 0)
            elif sym is not None:   # a map, a global, or a function's or datum's address in a section
                sn, styp, sshndx, svalue, _ = syms[sym]
                if styp == 3 and op == 0x18:
                    at_ = (sshndx, svalue + imm)
                    sn = funcs.get(at_, (objs.get(at_) or datum(sshndx, svalue + imm), 0))[0]
                    struct.pack_into('<i', code, off + 4, 0)
                rel.append((off, sn or names[sshndx]))
        out[name] = (names[shndx], bytes(code), rel, calls)
    return out
