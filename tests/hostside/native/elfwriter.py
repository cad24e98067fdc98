"""A small ELF writer for the reader's tests: shared objects of any class and byte order.

This machine's compiler makes only x86 objects; the reader must also read 32- and 64-bit,
little- and big-endian ones (an aarch64_be or s390x host's). The files written here are
read by binutils' readelf as the reference, then by envsync's reader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

ET_DYN = 3
SHT_STRTAB, SHT_RELA, SHT_HASH, SHT_DYNAMIC, SHT_DYNSYM = 3, 4, 5, 6, 11
SHT_GNU_HASH, SHT_VERDEF, SHT_VERNEED, SHT_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT = {
    "NEEDED": 1,
    "PLTRELSZ": 2,
    "HASH": 4,
    "STRTAB": 5,
    "SYMTAB": 6,
    "RELA": 7,
    "RELASZ": 8,
    "RELAENT": 9,
    "STRSZ": 10,
    "SYMENT": 11,
    "SONAME": 14,
    "RPATH": 15,
    "PLTREL": 20,
    "JMPREL": 23,
    "RUNPATH": 29,
    "GNU_HASH": 0x6FFFFEF5,
    "VERSYM": 0x6FFFFFF0,
    "FLAGS_1": 0x6FFFFFFB,
    "VERDEF": 0x6FFFFFFC,
    "VERDEFNUM": 0x6FFFFFFD,
    "VERNEED": 0x6FFFFFFE,
    "VERNEEDNUM": 0x6FFFFFFF,
}


@dataclass
class Defined:
    name: str
    version: str | None = None  # one of Spec.versions
    hidden: bool = False  # name@VER rather than name@@VER
    binding: int = 1  # GLOBAL
    kind: int = 2  # FUNC


@dataclass
class Undefined:
    name: str
    version: str | None = None  # needed from `file`
    file: str | None = None
    binding: int = 1
    plt: bool = True  # a PLT slot (lazy) rather than a data relocation


@dataclass
class Spec:
    elf_class: int = 64
    big_endian: bool = False
    machine: int = 62
    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    rpath: str | None = None
    runpath: str | None = None
    flags_1: int = 0
    versions: list[str] = field(default_factory=list)  # defined versions (the base first)
    defined: list[Defined] = field(default_factory=list)
    undefined: list[Undefined] = field(default_factory=list)
    sections: bool = True
    hash: str = "gnu"  # "gnu" or "sysv": what counts the symbols without section headers


def elf_hash(name: str) -> int:
    h = 0
    for c in name.encode():
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def gnu_hash(name: str) -> int:
    h = 5381
    for c in name.encode():
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


class _Strings:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.index: dict[str, int] = {"": 0}

    def add(self, text: str) -> int:
        if text not in self.index:
            self.index[text] = len(self.data)
            self.data += text.encode() + b"\0"
        return self.index[text]


def write(path: Path, spec: Spec) -> Path:
    """Write the shared object `spec` describes to `path`."""
    path.write_bytes(_image(spec))
    return path


def _image(spec: Spec) -> bytes:
    o = ">" if spec.big_endian else "<"
    is64 = spec.elf_class == 64
    word = "Q" if is64 else "I"
    strings = _Strings()
    for name in spec.needed:
        strings.add(name)
    # symbols: null, the undefined ones, then the defined (GNU hash wants them last)
    symbols: list[tuple[str, int, int, int]] = [("", 0, 0, 0)]  # name, info, shndx, value
    versym = [0]
    need_index = _need_indices(spec)
    for u in spec.undefined:
        symbols.append((u.name, (u.binding << 4) | 2, 0, 0))
        versym.append(need_index[(u.file, u.version)] if u.version else 1)
    first_defined = len(symbols)
    for n, d in enumerate(spec.defined):
        symbols.append((d.name, (d.binding << 4) | d.kind, 7, 0x1000 + 16 * n))
        index = spec.versions.index(d.version) + 1 if d.version else 1
        versym.append(index | (0x8000 if d.hidden else 0))
    for name, *_ in symbols:
        strings.add(name)
    for v in spec.versions:
        strings.add(v)
    for file, version in need_index:
        strings.add(file or "")
        strings.add(version or "")
    for text in (spec.soname, spec.rpath, spec.runpath):
        if text:
            strings.add(text)
    tables = _tables(spec, o, is64, word, strings, symbols, versym, first_defined, need_index)
    return _layout(spec, o, is64, word, strings, tables)


def _need_indices(spec: Spec) -> dict[tuple[str | None, str | None], int]:
    out: dict[tuple[str | None, str | None], int] = {}
    for u in spec.undefined:
        if u.version and (u.file, u.version) not in out:
            out[(u.file, u.version)] = max(len(spec.versions), 1) + 1 + len(out)
    return out


def _tables(spec, o, is64, word, strings, symbols, versym, first_defined, need_index):
    sym = struct.Struct(o + ("IBBHQQ" if is64 else "IIIBBH"))
    dynsym = b"".join(
        sym.pack(strings.add(n), info, 0, shndx, value, 16)
        if is64
        else sym.pack(strings.add(n), value, 16, info, 0, shndx)
        for n, info, shndx, value in symbols
    )
    tables = {
        ".dynsym": dynsym,
        ".gnu.version": struct.pack(o + f"{len(versym)}H", *versym),
        ".rela.dyn": b"",
        ".rela.plt": b"",
    }
    if spec.versions:
        tables[".gnu.version_d"] = _verdefs(o, spec.versions, strings)
    if need_index:
        tables[".gnu.version_r"] = _verneeds(o, need_index, strings)
    rela = struct.Struct(o + (word * 2 + ("q" if is64 else "i")))
    for i, u in enumerate(spec.undefined, start=1):
        info = (i << 32 | (7 if u.plt else 6)) if is64 else (i << 8 | (7 if u.plt else 6))
        key = ".rela.plt" if u.plt else ".rela.dyn"
        tables[key] += rela.pack(0x2000 + 8 * i, info, 0)
    names = [n for n, *_ in symbols]
    tables[".hash" if spec.hash == "sysv" else ".gnu.hash"] = (
        _sysv_hash(o, names) if spec.hash == "sysv" else _gnu_hash(o, is64, names, first_defined)
    )
    return tables


def _verdefs(o: str, versions: list[str], strings: _Strings) -> bytes:
    out = b""
    for n, name in enumerate(versions, start=1):
        last = n == len(versions)
        out += struct.pack(
            o + "HHHHIII", 1, 1 if n == 1 else 0, n, 1, elf_hash(name), 20, 0 if last else 28
        )
        out += struct.pack(o + "II", strings.add(name), 0)
    return out


def _verneeds(o: str, needs: dict[tuple[str | None, str | None], int], strings: _Strings) -> bytes:
    files: dict[str, list[tuple[str, int]]] = {}
    for (file, version), index in needs.items():
        files.setdefault(file or "", []).append((version or "", index))
    out = b""
    for n, (file, versions) in enumerate(files.items()):
        size = 16 + 16 * len(versions)
        nxt = 0 if n == len(files) - 1 else size
        out += struct.pack(o + "HHIII", 1, len(versions), strings.add(file), 16, nxt)
        for m, (version, index) in enumerate(versions):
            last = m == len(versions) - 1
            out += struct.pack(
                o + "IHHII", elf_hash(version), 0, index, strings.add(version), 0 if last else 16
            )
    return out


def _sysv_hash(o: str, names: list[str]) -> bytes:
    chain = [0] * len(names)
    bucket = 0
    for i in range(1, len(names)):
        chain[i] = bucket
        bucket = i
    return struct.pack(o + f"II{1 + len(names)}I", 1, len(names), bucket, *chain)


def _gnu_hash(o: str, is64: bool, names: list[str], first: int) -> bytes:
    hashed = [gnu_hash(n) for n in names[first:]]
    chain = [h & ~1 for h in hashed]
    if chain:
        chain[-1] |= 1
    bloom = struct.pack(o + ("Q" if is64 else "I"), (1 << (64 if is64 else 32)) - 1)
    bucket = first if chain else 0
    return (
        struct.pack(o + "IIII", 1, first, 1, 6)
        + bloom
        + struct.pack(o + "I", bucket)
        + struct.pack(o + f"{len(chain)}I", *chain)
    )


def _layout(spec, o, is64, word, strings, tables):
    """Everything in one PT_LOAD at vaddr == offset: headers, tables, .dynamic, section headers."""
    ehdr_size, phdr_size = (64, 56) if is64 else (52, 32)
    cursor = ehdr_size + 3 * phdr_size
    placed: dict[str, tuple[int, bytes]] = {}
    order = [
        ".dynstr",
        ".dynsym",
        ".gnu.version",
        ".gnu.version_d",
        ".gnu.version_r",
        ".hash",
        ".gnu.hash",
        ".rela.dyn",
        ".rela.plt",
    ]
    tables[".dynstr"] = bytes(strings.data)
    for name in order:
        if name in tables:
            cursor = (cursor + 7) & ~7
            placed[name] = (cursor, tables[name])
            cursor += len(tables[name])
    dynamic = _dynamic(spec, o, is64, strings, placed)
    cursor = (cursor + 7) & ~7
    placed[".dynamic"] = (cursor, dynamic)
    cursor += len(dynamic)
    shstr = _Strings()
    section_names = ["", *placed, ".shstrtab"]
    for name in section_names:
        shstr.add(name)
    placed[".shstrtab"] = (cursor, bytes(shstr.data))
    cursor += len(shstr.data)
    shoff = (cursor + 7) & ~7 if spec.sections else 0
    image = bytearray(
        shoff + (len(section_names) * (64 if is64 else 40) if spec.sections else cursor)
    )
    image[: ehdr_size + 3 * phdr_size] = _headers(
        spec, o, is64, shoff, len(section_names), cursor, placed[".dynamic"]
    )
    for offset, data in placed.values():
        image[offset : offset + len(data)] = data
    if spec.sections:
        files = len({u.file for u in spec.undefined if u.version})
        infos = {".gnu.version_d": len(spec.versions), ".gnu.version_r": files}
        image[shoff:] = _section_headers(o, is64, section_names, shstr, placed, infos)
    return bytes(image)


def _dynamic(spec, o, is64, strings, placed):
    entries = [(DT["NEEDED"], strings.add(n)) for n in spec.needed]
    for tag, text in (("SONAME", spec.soname), ("RPATH", spec.rpath), ("RUNPATH", spec.runpath)):
        if text:
            entries.append((DT[tag], strings.add(text)))
    entries += [
        (DT["STRTAB"], placed[".dynstr"][0]),
        (DT["STRSZ"], len(placed[".dynstr"][1])),
        (DT["SYMTAB"], placed[".dynsym"][0]),
        (DT["SYMENT"], 24 if is64 else 16),
        (DT["VERSYM"], placed[".gnu.version"][0]),
        (DT["RELA"], placed[".rela.dyn"][0]),
        (DT["RELASZ"], len(placed[".rela.dyn"][1])),
        (DT["RELAENT"], 24 if is64 else 12),
        (DT["JMPREL"], placed[".rela.plt"][0]),
        (DT["PLTRELSZ"], len(placed[".rela.plt"][1])),
        (DT["PLTREL"], DT["RELA"]),
    ]
    if ".gnu.hash" in placed:
        entries.append((DT["GNU_HASH"], placed[".gnu.hash"][0]))
    if ".hash" in placed:
        entries.append((DT["HASH"], placed[".hash"][0]))
    if ".gnu.version_d" in placed:
        entries += [
            (DT["VERDEF"], placed[".gnu.version_d"][0]),
            (DT["VERDEFNUM"], len(spec.versions)),
        ]
    if ".gnu.version_r" in placed:
        count = len({u.file for u in spec.undefined if u.version})
        entries += [(DT["VERNEED"], placed[".gnu.version_r"][0]), (DT["VERNEEDNUM"], count)]
    if spec.flags_1:
        entries.append((DT["FLAGS_1"], spec.flags_1))
    entries.append((0, 0))
    dyn = struct.Struct(o + ("qQ" if is64 else "iI"))
    return b"".join(dyn.pack(tag, value) for tag, value in entries)


def _headers(spec, o, is64, shoff, shnum, size, dynamic):
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 2 if spec.big_endian else 1, 1, 0]) + bytes(8)
    ehdr_size, phdr_size = (64, 56) if is64 else (52, 32)
    shentsize = (64 if is64 else 40) if spec.sections else 0
    fmt = o + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH")
    header = ident + struct.pack(
        fmt, ET_DYN, spec.machine, 1, 0, ehdr_size, shoff, 0, ehdr_size, phdr_size, 3,
        shentsize, shnum if spec.sections else 0, shnum - 1 if spec.sections else 0,
    )  # fmt: skip
    segments = [
        (1, 0, 0, size, 5),
        (2, dynamic[0], dynamic[0], len(dynamic[1]), 6),
        (0x6474E551, 0, 0, 0, 6),
    ]
    out = header
    for p_type, offset, vaddr, filesz, flags in segments:
        if is64:
            out += struct.pack(
                o + "IIQQQQQQ", p_type, flags, offset, vaddr, vaddr, filesz, filesz, 8
            )
        else:
            out += struct.pack(
                o + "IIIIIIII", p_type, offset, vaddr, vaddr, filesz, filesz, flags, 8
            )
    return out


_TYPES = {
    ".dynstr": (SHT_STRTAB, 0, 0),
    ".dynsym": (SHT_DYNSYM, 1, -1),
    ".gnu.version": (SHT_VERSYM, 2, 2),
    ".gnu.version_d": (SHT_VERDEF, 1, 0),
    ".gnu.version_r": (SHT_VERNEED, 1, 0),
    ".hash": (SHT_HASH, 2, 4),
    ".gnu.hash": (SHT_GNU_HASH, 2, 0),
    ".rela.dyn": (SHT_RELA, 2, -2),
    ".rela.plt": (SHT_RELA, 2, -2),
    ".dynamic": (SHT_DYNAMIC, 1, 16),
    ".shstrtab": (SHT_STRTAB, 0, 0),
}


def _section_headers(o, is64, names, shstr, placed, infos):
    index = {name: n for n, name in enumerate(names)}
    fmt = o + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII")
    out = struct.pack(fmt, *([0] * 10))
    for name in names[1:]:
        offset, data = placed[name]
        s_type, link_to, entsize = _TYPES[name]
        link = index[".dynstr"] if link_to == 1 else index[".dynsym"] if link_to == 2 else 0
        if entsize == -1:
            entsize = 24 if is64 else 16
        elif entsize == -2:
            entsize = 24 if is64 else 12
        if name == ".dynamic":
            entsize = 16 if is64 else 8
        addr = 0 if name == ".shstrtab" else offset
        info = infos.get(name, 1 if name == ".dynsym" else 0)
        out += struct.pack(
            fmt, shstr.add(name), s_type, 2, addr, offset, len(data), link, info, 8, entsize
        )
    return out
