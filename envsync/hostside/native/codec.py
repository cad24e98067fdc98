"""Parsed ELF files as plain JSON data and back, for the host's cache file.

For the host's caches and for the trip from the host to envsync. Name sets travel as one
newline-joined string (a 75,000-name export list is one JSON string, not 75,000), and a set
equal to the object's whole name set travels as "=names".
"""

from __future__ import annotations

from .binary import Section
from .dynsym import Exports, Reference, SymbolTable, VersionDef, VersionNeed
from .elf import Dynamic, ElfFile, Segment

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from typing import Any, Dict

    Data = Dict[str, Any]

SCHEMA = 1
_SAME = "=names"


def _names(names: frozenset[str] | None, every: frozenset[str]) -> str | None:
    if names is None:
        return None
    if names is every or names == every:
        return _SAME
    return "\n".join(names)


def _unnames(text: str | None, every: frozenset[str]) -> frozenset[str] | None:
    if text is None:
        return None
    if text == _SAME:
        return every
    return frozenset(text.split("\n")) if text else frozenset()


def encode_exports(exports: Exports) -> Data:
    every = exports.names
    return {
        "names": "\n".join(every),
        "plain": _names(exports.plain, every),
        "base": _names(exports.base, every),
        "by_version": {k: _names(v, every) for k, v in exports.by_version.items()},
    }


def decode_exports(data: Data) -> Exports:
    every = frozenset(data["names"].split("\n")) if data["names"] else frozenset()
    by_version = {k: _unnames(v, every) or frozenset() for k, v in data["by_version"].items()}
    return Exports(
        names=every,
        plain=_unnames(data["plain"], every),
        base=_unnames(data["base"], every),
        by_version=by_version,
    )


def encode_symbols(table: SymbolTable) -> Data:
    return {
        "count": table.count,
        "defined": table.defined,
        "undefined": table.undefined,
        "exports": encode_exports(table.exports),
        "references": [
            [r.name, r.version, r.version_key, r.file, r.hidden_version, r.weak, r.lazy]
            for r in table.references
        ],
        "verdefs": [[v.index, v.name, v.hash, v.flags] for v in table.verdefs],
        "verneeds": [[v.file, v.name, v.hash, v.flags, v.index, v.hidden] for v in table.verneeds],
    }


def decode_symbols(data: Data) -> SymbolTable:
    return SymbolTable(
        count=data["count"],
        defined=data["defined"],
        undefined=data["undefined"],
        exports=decode_exports(data["exports"]),
        references=tuple(
            Reference(
                name=r[0],
                version=r[1],
                version_key=r[2],
                file=r[3],
                hidden_version=r[4],
                weak=r[5],
                lazy=r[6],
            )
            for r in data["references"]
        ),
        verdefs=tuple(
            VersionDef(index=v[0], name=v[1], hash=v[2], flags=v[3]) for v in data["verdefs"]
        ),
        verneeds=tuple(
            VersionNeed(file=v[0], name=v[1], hash=v[2], flags=v[3], index=v[4], hidden=v[5])
            for v in data["verneeds"]
        ),
    )


def encode_elf(elf: ElfFile) -> Data:
    dyn = elf.dynamic
    return {
        "path": elf.path,
        "class": elf.elf_class,
        "big_endian": elf.big_endian,
        "type": elf.type,
        "machine": elf.machine,
        "osabi": elf.osabi,
        "segments": [[s.type, s.offset, s.vaddr, s.filesz, s.memsz, s.flags] for s in elf.segments],
        "sections": [
            [s.name, s.type, s.offset, s.addr, s.size, s.entsize, s.link] for s in elf.sections
        ],
        "interp": elf.interp,
        "exec_stack": elf.exec_stack,
        "dynamic": None if dyn is None else _encode_dynamic(dyn),
        "symbols": None if elf.symbols is None else encode_symbols(elf.symbols),
        "sections_unreadable": elf.sections_unreadable,
    }


def _encode_dynamic(dyn: Dynamic) -> Data:
    return {
        "needed": list(dyn.needed),
        "soname": dyn.soname,
        "rpath": dyn.rpath,
        "runpath": dyn.runpath,
        "flags": dyn.flags,
        "flags_1": dyn.flags_1,
        "bind_now": dyn.bind_now,
        "filters": list(dyn.filters),
    }


def decode_elf(data: Data) -> ElfFile:
    dyn = data["dynamic"]
    return ElfFile(
        path=data["path"],
        elf_class=data["class"],
        big_endian=data["big_endian"],
        type=data["type"],
        machine=data["machine"],
        osabi=data["osabi"],
        segments=tuple(Segment(*s) for s in data["segments"]),
        sections=tuple(Section(*s) for s in data["sections"]),
        interp=data["interp"],
        exec_stack=data["exec_stack"],
        dynamic=None
        if dyn is None
        else Dynamic(
            needed=tuple(dyn["needed"]),
            soname=dyn["soname"],
            rpath=dyn["rpath"],
            runpath=dyn["runpath"],
            flags=dyn["flags"],
            flags_1=dyn["flags_1"],
            bind_now=dyn["bind_now"],
            filters=tuple(dyn["filters"]),
        ),
        symbols=None if data["symbols"] is None else decode_symbols(data["symbols"]),
        sections_unreadable=data["sections_unreadable"],
    )
