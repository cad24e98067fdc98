"""read_elf(path): an ELF object's headers, segments, sections and dynamic section, never loaded.

The file is read where its tables are (pread), never whole and never mapped for execution;
what cannot be read is a value (`Unreadable`), never an exception out of this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .binary import (
    ELFCLASS64,
    ELFDATA2MSB,
    AddressMap,
    Blob,
    Layout,
    Malformed,
    Section,
    c_string,
)
from .binary import make_layout as _make_layout
from .dynsym import Symbol, SymbolTable, list_symbols, read_symbols

ET_EXEC = 2
ET_DYN = 3
PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_GNU_STACK = 0x6474E551
PF_X = 1
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF

DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_STRSZ = 10
DT_SONAME = 14
DT_RPATH = 15
DT_BIND_NOW = 24
DT_RUNPATH = 29
DT_FLAGS = 30
DT_FLAGS_1 = 0x6FFFFFFB
DT_AUXILIARY = 0x7FFFFFFD
DT_FILTER = 0x7FFFFFFF

DF_FLAGS = {0x1: "ORIGIN", 0x2: "SYMBOLIC", 0x4: "TEXTREL", 0x8: "BIND_NOW", 0x10: "STATIC_TLS"}
DF_BIND_NOW = 0x8
DF_1_FLAGS = {
    0x1: "NOW",
    0x2: "GLOBAL",
    0x4: "GROUP",
    0x8: "NODELETE",
    0x10: "LOADFLTR",
    0x20: "INITFIRST",
    0x40: "NOOPEN",
    0x80: "ORIGIN",
    0x100: "DIRECT",
    0x400: "INTERPOSE",
    0x800: "NODEFLIB",
    0x1000: "NODUMP",
    0x8000: "DISPRELDNE",
    0x10000: "DISPRELPND",
    0x20000: "NODIRECT",
    0x8000000: "PIE",
}
DF_1_NOW = 0x1
DF_1_NOOPEN = 0x40
DF_1_NODEFLIB = 0x800
DF_1_PIE = 0x8000000
MAX_PHNUM = 4096
MAX_SHNUM = 1 << 16


@dataclass(frozen=True)
class Unreadable:
    """A file that could not be read as ELF, and why."""

    path: str
    why: str  # "unreadable: ..."


@dataclass(frozen=True)
class Segment:
    type: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    flags: int


@dataclass(frozen=True)
class Dynamic:
    """The dynamic section's entries that decide how the object is loaded and linked."""

    needed: tuple[str, ...]
    soname: str | None = None
    rpath: str | None = None  # as written; ld.so ignores it when the object has a runpath
    runpath: str | None = None
    flags: int = 0
    flags_1: int = 0
    bind_now: bool = False  # DT_BIND_NOW, DF_BIND_NOW or DF_1_NOW
    filters: tuple[str, ...] = ()  # DT_FILTER and DT_AUXILIARY names (not modelled)

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def pie(self) -> bool:
        return bool(self.flags_1 & DF_1_PIE)

    @property
    def noopen(self) -> bool:
        return bool(self.flags_1 & DF_1_NOOPEN)

    def flag_names(self) -> tuple[str, ...]:
        """DT_FLAGS and DT_FLAGS_1 bits by name, e.g. ("BIND_NOW", "1:NODEFLIB")."""
        names = [name for bit, name in DF_FLAGS.items() if self.flags & bit]
        names += ["1:" + name for bit, name in DF_1_FLAGS.items() if self.flags_1 & bit]
        return tuple(names)


@dataclass(frozen=True)
class ElfFile:
    """What the loader reads of one ELF object."""

    path: str
    elf_class: int  # 32 or 64
    big_endian: bool
    type: int  # ET_DYN, ET_EXEC, ...
    machine: int  # e_machine: EM_X86_64 = 62, EM_AARCH64 = 183, ...
    osabi: int
    segments: tuple[Segment, ...]
    sections: tuple[Section, ...]
    interp: str | None = None  # PT_INTERP: the program's dynamic loader
    exec_stack: bool = False  # PT_GNU_STACK asks for an executable stack
    dynamic: Dynamic | None = None  # None: no PT_DYNAMIC (a static object)
    symbols: SymbolTable | None = None
    sections_unreadable: str | None = None  # section headers ld.so never reads, broken


@dataclass(frozen=True)
class _Header:
    layout: Layout
    elf_class: int
    big_endian: bool
    osabi: int
    type: int
    machine: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int


def read_elf(path: str) -> ElfFile | Unreadable:
    """The ELF facts of `path`, or why they could not be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return Unreadable(path=path, why=f"unreadable: {e.strerror or e}")
    try:
        return _parse(path, Blob(fd, os.fstat(fd).st_size))
    except Malformed as e:
        return Unreadable(path=path, why=f"unreadable: {e}")
    except (OSError, ValueError, OverflowError, MemoryError) as e:
        return Unreadable(path=path, why=f"unreadable: {type(e).__name__}: {e}")
    finally:
        os.close(fd)


def dynamic_symbols(path: str) -> tuple[Symbol, ...] | Unreadable:
    """Every .dynsym entry of `path` (binding, type, visibility, defined, version), for
    readers who want the whole table; the loader's checks use `read_elf`."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return Unreadable(path=path, why=f"unreadable: {e.strerror or e}")
    try:
        blob = Blob(fd, os.fstat(fd).st_size)
        header = _header(blob)
        segments = _segments(blob, header)
        sections, _broken = _sections_or_why(blob, header)
        amap = AddressMap([(s.vaddr, s.filesz, s.offset) for s in segments if s.type == PT_LOAD])
        seg = next((s for s in segments if s.type == PT_DYNAMIC), None)
        if seg is None:
            return ()
        tags = dict(_dynamic_entries(blob, header.layout, seg))
        if 6 not in tags:  # DT_SYMTAB
            return ()
        strtab = _string_table(blob, amap, tags)
        return list_symbols(blob, header.layout, amap, tags, strtab, sections)
    except Malformed as e:
        return Unreadable(path=path, why=f"unreadable: {e}")
    except (OSError, ValueError, OverflowError, MemoryError) as e:
        return Unreadable(path=path, why=f"unreadable: {type(e).__name__}: {e}")
    finally:
        os.close(fd)


def _parse(path: str, blob: Blob) -> ElfFile:
    header = _header(blob)
    segments = _segments(blob, header)
    sections, broken = _sections_or_why(blob, header)
    amap = AddressMap([(s.vaddr, s.filesz, s.offset) for s in segments if s.type == PT_LOAD])
    dynamic, symbols = _dynamic_part(blob, header.layout, segments, sections, amap)
    return ElfFile(
        path=path,
        elf_class=header.elf_class,
        big_endian=header.big_endian,
        type=header.type,
        machine=header.machine,
        osabi=header.osabi,
        segments=segments,
        sections=sections,
        interp=_interp(blob, segments),
        exec_stack=any(s.type == PT_GNU_STACK and s.flags & PF_X for s in segments),
        dynamic=dynamic,
        symbols=symbols,
        sections_unreadable=broken,
    )


def _header(blob: Blob) -> _Header:
    if blob.size < 16:
        raise Malformed("file too short")
    ident = blob.read(0, 16, "e_ident")
    if ident[:4] != b"\x7fELF":
        raise Malformed("invalid ELF header")
    layout = _make_layout(ident[4], ident[5])
    fields = layout.ehdr.unpack(blob.read(16, layout.ehdr.size, "ELF header"))
    e_type, machine, _version, _entry, phoff, shoff, _flags, _ehsize = fields[:8]
    phentsize, phnum, shentsize, shnum, shstrndx = fields[8:]
    return _Header(
        layout=layout,
        elf_class=64 if ident[4] == ELFCLASS64 else 32,
        big_endian=ident[5] == ELFDATA2MSB,
        osabi=ident[7],
        type=e_type,
        machine=machine,
        phoff=phoff,
        phentsize=phentsize,
        phnum=phnum,
        shoff=shoff,
        shentsize=shentsize,
        shnum=shnum,
        shstrndx=shstrndx,
    )


def _first_section(blob: Blob, header: _Header) -> tuple[int, ...] | None:
    """Section 0, which holds the real counts when they overflow the header's fields."""
    if header.shoff == 0 or header.shentsize != header.layout.shdr.size:
        return None
    return header.layout.shdr.unpack(blob.read(header.shoff, header.shentsize, "section 0"))


def _segments(blob: Blob, header: _Header) -> tuple[Segment, ...]:
    layout = header.layout
    count = header.phnum
    if count == PN_XNUM:  # extended numbering: the count is section 0's sh_info
        first = _first_section(blob, header)
        count = first[7] if first else 0
    if count == 0:
        return ()
    if header.phentsize != layout.phdr.size or count > MAX_PHNUM:
        raise Malformed(f"program headers of {header.phentsize} bytes ({count} of them)")
    data = blob.read(header.phoff, count * layout.phdr.size, "program headers")
    out = []
    for raw in layout.phdr.iter_unpack(data):
        if layout.is64:  # type, flags, offset, vaddr, paddr, filesz, memsz, align
            p_type, flags, offset, vaddr, _pa, filesz, memsz, _al = raw
        else:  # type, offset, vaddr, paddr, filesz, memsz, flags, align
            p_type, offset, vaddr, _pa, filesz, memsz, flags, _al = raw
        out.append(Segment(p_type, offset, vaddr, filesz, memsz, flags))
    return tuple(out)


def _sections_or_why(blob: Blob, header: _Header) -> tuple[tuple[Section, ...], str | None]:
    """The section headers; ld.so never reads them, so broken ones are a note, not a failure."""
    try:
        return _sections(blob, header), None
    except Malformed as e:
        return (), str(e)


def _sections(blob: Blob, header: _Header) -> tuple[Section, ...]:
    layout = header.layout
    first = _first_section(blob, header)
    if first is None:
        return ()
    count = header.shnum or first[5]  # shnum 0: the count is section 0's sh_size
    if count > MAX_SHNUM:
        raise Malformed(f"{count} section headers")
    data = blob.read(header.shoff, count * layout.shdr.size, "section headers")
    rows = list(layout.shdr.iter_unpack(data))
    names = _section_names(blob, header, rows, first)
    out = []
    for raw in rows:
        name_off, s_type, _flags, addr, offset, size, link, _info, _align, entsize = raw
        name = c_string(names, name_off, "section name") if names else ""
        out.append(Section(name, s_type, offset, addr, size, entsize, link))
    return tuple(out)


def _section_names(
    blob: Blob, header: _Header, rows: list[tuple[int, ...]], first: tuple[int, ...]
) -> bytes:
    index = first[6] if header.shstrndx == SHN_XINDEX else header.shstrndx
    if index == 0 or index >= len(rows):
        return b""
    row = rows[index]
    return blob.read(row[4], row[5], "section names")


def _interp(blob: Blob, segments: tuple[Segment, ...]) -> str | None:
    for seg in segments:
        if seg.type == PT_INTERP:
            data = blob.read(seg.offset, seg.filesz, "PT_INTERP")
            return data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    return None


def _dynamic_part(
    blob: Blob,
    layout: Layout,
    segments: tuple[Segment, ...],
    sections: tuple[Section, ...],
    amap: AddressMap,
) -> tuple[Dynamic | None, SymbolTable | None]:
    seg = next((s for s in segments if s.type == PT_DYNAMIC), None)
    if seg is None:
        return None, None
    entries = _dynamic_entries(blob, layout, seg)
    tags = {tag: value for tag, value in entries}  # ld.so keeps the last of each tag
    strtab = _string_table(blob, amap, tags)
    dynamic = _dynamic(entries, tags, strtab)
    symbols = read_symbols(blob, layout, amap, tags, strtab, sections)
    return dynamic, symbols


def _dynamic_entries(blob: Blob, layout: Layout, seg: Segment) -> list[tuple[int, int]]:
    size = seg.filesz - seg.filesz % layout.dyn.size
    data = blob.read(seg.offset, size, "dynamic section")
    entries = []
    for tag, value in layout.dyn.iter_unpack(data):
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    return entries


def _string_table(blob: Blob, amap: AddressMap, tags: dict[int, int]) -> bytes:
    if DT_STRTAB not in tags:
        return b""
    size = tags.get(DT_STRSZ, 0)
    return blob.read(amap.offset(tags[DT_STRTAB], size, "DT_STRTAB"), size, "DT_STRTAB")


def _dynamic(entries: list[tuple[int, int]], tags: dict[int, int], strtab: bytes) -> Dynamic:
    def text(tag: int) -> str | None:
        return c_string(strtab, tags[tag], f"dynamic tag {tag}") if tag in tags else None

    flags = tags.get(DT_FLAGS, 0)
    flags_1 = tags.get(DT_FLAGS_1, 0)
    return Dynamic(
        needed=tuple(c_string(strtab, v, "DT_NEEDED") for t, v in entries if t == DT_NEEDED),
        soname=text(DT_SONAME),
        rpath=text(DT_RPATH),
        runpath=text(DT_RUNPATH),
        flags=flags,
        flags_1=flags_1,
        bind_now=DT_BIND_NOW in tags or bool(flags & DF_BIND_NOW) or bool(flags_1 & DF_1_NOW),
        filters=tuple(
            c_string(strtab, v, "DT_FILTER") for t, v in entries if t in (DT_FILTER, DT_AUXILIARY)
        ),
    )
