"""The dynamic symbol table, symbol versions, and which symbols the relocations look up.

Located as ld.so locates them, through the dynamic section's addresses (DT_SYMTAB,
DT_VERSYM, DT_VERDEF, DT_VERNEED, DT_RELA/DT_REL/DT_JMPREL); the section headers only give
the symbol count when they are there.
"""

from __future__ import annotations

import array
import struct
import sys
from collections import Counter
from dataclasses import dataclass, field

from .binary import AddressMap, Blob, Layout, Malformed, Pages, Section, c_string, elf_hash

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


DT_PLTRELSZ = 2
DT_HASH = 4
DT_SYMTAB = 6
DT_RELA = 7
DT_RELASZ = 8
DT_RELAENT = 9
DT_SYMENT = 11
DT_REL = 17
DT_RELSZ = 18
DT_RELENT = 19
DT_PLTREL = 20
DT_JMPREL = 23
DT_GNU_HASH = 0x6FFFFEF5
DT_VERSYM = 0x6FFFFFF0
DT_VERDEF = 0x6FFFFFFC
DT_VERNEED = 0x6FFFFFFE
DT_RELACOUNT = 0x6FFFFFF9
DT_RELCOUNT = 0x6FFFFFFA
SHT_DYNSYM = 11

STB_LOCAL = 0
BINDINGS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
STB_WEAK = 2
TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS"}
TYPES[10] = "IFUNC"
STT_TLS = 6
# The types check_match (glibc's dl-lookup.c) accepts as definitions, and the bindings
# do_lookup_x takes (GLOBAL, WEAK, GNU_UNIQUE): the st_info values that can define.
DEFINITION_TYPES = frozenset([0, 1, 2, 5, 6, 10])
_DEFINING = bytes(
    1 if (b >> 4) in (1, 2, 10) and (b & 0xF) in DEFINITION_TYPES else 0 for b in range(256)
)
VISIBILITIES = ("DEFAULT", "INTERNAL", "HIDDEN", "PROTECTED")
_LOCAL_VISIBILITY = b"\0\1\1\0"  # INTERNAL and HIDDEN bind within their object
SHN_UNDEF = 0
SHN_ABS = 0xFFF1
VER_FLG_BASE = 0x1
VER_FLG_WEAK = 0x2
VERSYM_HIDDEN = 0x8000
MAX_VERSIONS = 1 << 16  # a chain longer than this loops


@dataclass(frozen=True)
class VersionDef:
    """One version an object defines (.gnu.version_d), e.g. GLIBCXX_3.4.30."""

    index: int
    name: str
    hash: int
    flags: int  # VER_FLG_BASE: the object's own name; VER_FLG_WEAK

    @property
    def base(self) -> bool:
        return bool(self.flags & VER_FLG_BASE)


@dataclass(frozen=True)
class VersionNeed:
    """One version an object needs from one file (.gnu.version_r)."""

    file: str  # vn_file: the DT_NEEDED name that must define it
    name: str
    hash: int
    flags: int
    index: int
    hidden: bool = False

    @property
    def weak(self) -> bool:
        return bool(self.flags & VER_FLG_WEAK)


@dataclass(frozen=True)
class Reference:
    """An undefined symbol a relocation makes the loader look up."""

    name: str
    version: str | None = None  # None: an unversioned reference
    version_key: str | None = None  # the version as compared (name, and hash when unusual)
    file: str | None = None  # the file its version is needed from (verneed's vn_file)
    hidden_version: bool = False
    weak: bool = False  # a weak reference may stay unresolved
    lazy: bool = False  # referenced only from PLT slots: resolved at load only with RTLD_NOW


@dataclass(frozen=True)
class Symbol:
    """One .dynsym entry, for readers who want the whole table."""

    name: str
    binding: str
    type: str
    visibility: str
    defined: bool
    version: str | None
    hidden: bool  # the version is not the default one (name@VER, not name@@VER)


@dataclass(frozen=True)
class Exports:
    """What an object defines for other objects, arranged for glibc's check_match.

    `plain` are the names an unversioned reference accepts; `by_version` the names defined
    at each version (by version key); `base` the names any non-hidden versioned reference
    accepts (defined with no version entry). An object with no .gnu.version has `plain`
    and `base` None: every name in `names` serves every reference.
    """

    names: frozenset[str]
    plain: frozenset[str] | None = None
    base: frozenset[str] | None = None
    by_version: dict[str, frozenset[str]] = field(default_factory=dict)

    def provides(self, ref: Reference) -> bool:
        if self.plain is None or self.base is None:
            return ref.name in self.names
        if ref.version_key is None:
            return ref.name in self.plain
        if ref.name in self.by_version.get(ref.version_key, ()):
            return True
        return not ref.hidden_version and ref.name in self.base


@dataclass(frozen=True)
class SymbolTable:
    count: int  # .dynsym entries, the null one included
    defined: int
    undefined: int
    exports: Exports
    references: tuple[Reference, ...]
    verdefs: tuple[VersionDef, ...] = ()
    verneeds: tuple[VersionNeed, ...] = ()


@dataclass(frozen=True)
class _Version:
    name: str
    key: str
    file: str | None
    hidden: bool


@dataclass(frozen=True)
class _Raw:
    """The symbol table's columns, names still undecoded."""

    names: Sequence[int]  # st_name
    info: bytes
    other: bytes
    shndx: Sequence[int]
    value: Sequence[int]
    versym: Sequence[int] | None
    strtab: bytes

    def __len__(self) -> int:
        return len(self.info)


def version_key(name: str, hash_value: int) -> str:
    """How glibc compares versions: by hash and name; a hash that is not the name's own
    (a crafted file) must not match the real version."""
    return name if elf_hash(name) == hash_value else f"{name}#{hash_value:x}"


def read_symbols(
    blob: Blob,
    layout: Layout,
    amap: AddressMap,
    tags: dict[int, int],
    strtab: bytes,
    sections: tuple[Section, ...],
) -> SymbolTable | None:
    """The object's dynamic symbols, versions and looked-up references (None: no DT_SYMTAB)."""
    if DT_SYMTAB not in tags:
        return None
    raw = _raw(blob, layout, amap, tags, strtab, sections)
    pages = Pages(blob)
    verdefs = _verdefs(pages, layout, amap, tags, strtab)
    verneeds = _verneeds(pages, layout, amap, tags, strtab)
    versions = _version_table(verdefs, verneeds)
    eager, lazy = _looked_up(blob, layout, amap, tags)
    undefined = max(0, list(raw.shndx).count(SHN_UNDEF) - 1)  # the null symbol is not one
    return SymbolTable(
        count=len(raw),
        defined=max(0, len(raw) - 1 - undefined),
        undefined=undefined,
        exports=_exports(raw, versions),
        references=_references(raw, versions, eager, lazy),
        verdefs=verdefs,
        verneeds=verneeds,
    )


def list_symbols(
    blob: Blob,
    layout: Layout,
    amap: AddressMap,
    tags: dict[int, int],
    strtab: bytes,
    sections: tuple[Section, ...],
) -> tuple[Symbol, ...]:
    """Every .dynsym entry but the null one, with binding, type, visibility and version."""
    raw = _raw(blob, layout, amap, tags, strtab, sections)
    pages = Pages(blob)
    verdefs = _verdefs(pages, layout, amap, tags, strtab)
    versions = _version_table(verdefs, _verneeds(pages, layout, amap, tags, strtab))
    indices = range(1, len(raw))
    return tuple(_symbol(raw, versions, i, name) for i, name in zip(indices, _names(raw, indices)))


def _symbol(raw: _Raw, versions: dict[int, _Version], i: int, name: str) -> Symbol:
    version, hidden = None, False
    if raw.versym is not None:
        entry = versions.get(raw.versym[i] & 0x7FFF)
        version, hidden = (entry.name if entry else None), bool(raw.versym[i] & VERSYM_HIDDEN)
    info = raw.info[i]
    return Symbol(
        name=name,
        binding=BINDINGS.get(info >> 4, str(info >> 4)),
        type=TYPES.get(info & 0xF, str(info & 0xF)),
        visibility=VISIBILITIES[raw.other[i] & 3],
        defined=raw.shndx[i] != SHN_UNDEF,
        version=version,
        hidden=hidden,
    )


def _raw(
    blob: Blob,
    layout: Layout,
    amap: AddressMap,
    tags: dict[int, int],
    strtab: bytes,
    sections: tuple[Section, ...],
) -> _Raw:
    entsize = tags.get(DT_SYMENT, layout.sym.size)
    if entsize != layout.sym.size:
        raise Malformed(f"DT_SYMENT is {entsize}, not {layout.sym.size}")
    count = _symbol_count(blob, layout, amap, tags, sections)
    size = count * entsize
    data = blob.read(amap.offset(tags[DT_SYMTAB], size, "DT_SYMTAB"), size, "dynamic symbols")
    versym = _versym(blob, layout, amap, tags, count)
    big = layout.big_endian
    words, halves = _words(data, "I", big), _words(data, "H", big)
    # Columns by strided slices (C loops): a 75,000-symbol table costs milliseconds.
    if layout.is64:  # st_name I, st_info B, st_other B, st_shndx H, st_value Q, st_size Q
        values = _words(data, "Q", big)[1::3]
        return _Raw(words[0::6], data[4::24], data[5::24], halves[3::12], values, versym, strtab)
    # st_name I, st_value I, st_size I, st_info B, st_other B, st_shndx H
    return _Raw(words[0::4], data[12::16], data[13::16], halves[7::8], words[1::4], versym, strtab)


def _symbol_count(
    blob: Blob, layout: Layout, amap: AddressMap, tags: dict[int, int], sections: Sequence[Section]
) -> int:
    """The number of dynamic symbols: the .dynsym section's size, else the hash tables'."""
    for section in sections:
        if section.type == SHT_DYNSYM and section.addr == tags[DT_SYMTAB] and section.entsize:
            return section.size // section.entsize
    if DT_HASH in tags:
        offset = amap.offset(tags[DT_HASH], 8, "DT_HASH")
        _nbucket, nchain = _struct(layout, "II").unpack(blob.read(offset, 8, "DT_HASH"))
        return int(nchain)
    if DT_GNU_HASH in tags:
        return _gnu_hash_count(Pages(blob), layout, amap, tags[DT_GNU_HASH])
    raise Malformed("no .dynsym section and no hash table: the symbol count is unknown")


def _gnu_hash_count(pages: Pages, layout: Layout, amap: AddressMap, address: int) -> int:
    """The symbol count from DT_GNU_HASH: one past the end of the chain that ends last."""
    start = amap.offset(address, 16, "DT_GNU_HASH")
    nbuckets, symoffset, bloom_size, _shift = pages.unpack(
        _struct(layout, "IIII"), start, "DT_GNU_HASH"
    )
    buckets = start + 16 + bloom_size * (8 if layout.is64 else 4)
    table = pages.blob.read(buckets, 4 * nbuckets, "GNU hash buckets")
    last = max(_words(table, "I", layout.big_endian), default=0)
    if last < symoffset:
        return int(symoffset)
    word, chain, index = _struct(layout, "I"), buckets + 4 * nbuckets, int(last)
    while not pages.unpack(word, chain + 4 * (index - symoffset), "GNU hash chain")[0] & 1:
        index += 1
    return index + 1


def _versym(
    blob: Blob, layout: Layout, amap: AddressMap, tags: dict[int, int], count: int
) -> Sequence[int] | None:
    if DT_VERSYM not in tags:
        return None
    size = 2 * count
    data = blob.read(amap.offset(tags[DT_VERSYM], size, "DT_VERSYM"), size, "symbol versions")
    return _words(data, "H", layout.big_endian)


def _words(data: bytes, code: str, big_endian: bool) -> array.array[int]:
    """`data` as an array of unsigned words in this machine's order."""
    words = array.array(code)
    words.frombytes(data[: len(data) - len(data) % words.itemsize])
    if big_endian != (sys.byteorder == "big"):
        words.byteswap()
    return words


def _struct(layout: Layout, fmt: str) -> struct.Struct:
    return struct.Struct((">" if layout.big_endian else "<") + fmt)


def _verdefs(
    pages: Pages, layout: Layout, amap: AddressMap, tags: dict[int, int], strtab: bytes
) -> tuple[VersionDef, ...]:
    if DT_VERDEF not in tags:
        return ()
    entry, aux = _struct(layout, "HHHHIII"), _struct(layout, "II")
    offset = amap.offset(tags[DT_VERDEF], entry.size, "DT_VERDEF")
    out = []
    for _ in range(MAX_VERSIONS):
        version, flags, ndx, _cnt, hash_value, aux_off, next_off = pages.unpack(
            entry, offset, "version definition"
        )
        if version != 1:
            raise Malformed(f"unsupported version {version} of Verdef record")
        name_off, _next = pages.unpack(aux, offset + aux_off, "version definition name")
        name = c_string(strtab, name_off, "version definition name")
        out.append(VersionDef(index=ndx & 0x7FFF, name=name, hash=hash_value, flags=flags))
        if next_off == 0:
            return tuple(out)
        offset += next_off
    raise Malformed("the version definitions loop")


def _verneeds(
    pages: Pages, layout: Layout, amap: AddressMap, tags: dict[int, int], strtab: bytes
) -> tuple[VersionNeed, ...]:
    if DT_VERNEED not in tags:
        return ()
    entry, aux = _struct(layout, "HHIII"), _struct(layout, "IHHII")
    offset = amap.offset(tags[DT_VERNEED], entry.size, "DT_VERNEED")
    out: list[VersionNeed] = []
    for _ in range(MAX_VERSIONS):
        version, _cnt, file_off, aux_off, next_off = pages.unpack(entry, offset, "version need")
        if version != 1:
            raise Malformed(f"unsupported version {version} of Verneed record")
        file = c_string(strtab, file_off, "version need file")
        out.extend(_needed_versions(pages, aux, offset + aux_off, file, strtab))
        if next_off == 0:
            return tuple(out)
        offset += next_off
    raise Malformed("the version needs loop")


def _needed_versions(
    pages: Pages, aux: struct.Struct, offset: int, file: str, strtab: bytes
) -> list[VersionNeed]:
    out = []
    for _ in range(MAX_VERSIONS):
        hash_value, flags, other, name_off, next_off = pages.unpack(aux, offset, "needed version")
        out.append(
            VersionNeed(
                file=file,
                name=c_string(strtab, name_off, "needed version name"),
                hash=hash_value,
                flags=flags,
                index=other & 0x7FFF,
                hidden=bool(other & VERSYM_HIDDEN),
            )
        )
        if next_off == 0:
            return out
        offset += next_off
    raise Malformed("the needed versions loop")


def _version_table(
    verdefs: Iterable[VersionDef], verneeds: Iterable[VersionNeed]
) -> dict[int, _Version]:
    """Version index to version, as _dl_check_map_versions fills l_versions: the needs,
    then the definitions but the base one (the object's own name matches no reference)."""
    table = {
        need.index: _Version(need.name, version_key(need.name, need.hash), need.file, need.hidden)
        for need in verneeds
    }
    for vdef in verdefs:
        if not vdef.base:
            table[vdef.index] = _Version(vdef.name, version_key(vdef.name, vdef.hash), None, False)
    return table


def _looked_up(
    blob: Blob, layout: Layout, amap: AddressMap, tags: dict[int, int]
) -> tuple[set[int], set[int]]:
    """Symbol indices the relocations look up: (at load time, only from PLT slots), split
    the way glibc's _ELF_DYNAMIC_DO_RELOC splits DT_RELA and DT_JMPREL."""
    eager: set[int] = set()
    plt = _plt_range(tags)
    kinds = ((DT_RELA, DT_RELASZ, DT_RELACOUNT, True), (DT_REL, DT_RELSZ, DT_RELCOUNT, False))
    for table, size_tag, count_tag, rela in kinds:
        start, size = tags.get(table, 0), tags.get(size_tag, 0)
        if plt is not None and plt[2] == rela:
            if start == 0:
                start = plt[0]
            if start + size == plt[0] + plt[1]:  # a DT_RELASZ that counts the PLT slots too
                size -= plt[1]
        if start and size > 0:
            skip = tags.get(count_tag, 0)
            eager |= _relocated(blob, layout, amap, start, size, rela, skip)
    lazy = _relocated(blob, layout, amap, plt[0], plt[1], plt[2], 0) if plt else set()
    return eager, lazy - eager


def _plt_range(tags: dict[int, int]) -> tuple[int, int, bool] | None:
    if DT_JMPREL not in tags or not tags.get(DT_PLTRELSZ):
        return None
    return tags[DT_JMPREL], tags[DT_PLTRELSZ], tags.get(DT_PLTREL, DT_RELA) == DT_RELA


def _relocated(
    blob: Blob, layout: Layout, amap: AddressMap, address: int, size: int, rela: bool, skip: int
) -> set[int]:
    """Symbol indices of one relocation table, its first `skip` entries (DT_RELACOUNT's
    relative relocations, which name no symbol) left out."""
    word = 8 if layout.is64 else 4
    entry = word * (3 if rela else 2)
    size -= size % entry
    offset = amap.offset(address, size, "relocations")
    skip = min(max(skip, 0), size // entry)
    data = blob.read(offset + skip * entry, size - skip * entry, "relocations")
    words = _words(data, "I", layout.big_endian)
    step = entry // 4
    if layout.is64:  # r_info: the symbol in its high 32 bits, the type in its low ones
        high = 2 if layout.big_endian else 3
        symbols, types = words[high::step], words[5 - high :: step]
        return set(symbols) if 0 not in types else {s for s, t in zip(symbols, types) if t}
    return {info >> 8 for info in set(words[1::step]) if info & 0xFF}


def _definitions(raw: _Raw) -> list[int]:
    """Indices of the symbols check_match and do_lookup_x accept as another object's
    definition: defined, GLOBAL/WEAK/UNIQUE, not hidden or internal, a code or data type,
    with a value (or absolute, or TLS)."""
    info, other, shndx, value = raw.info, raw.other, raw.shndx, raw.value
    return [
        i
        for i in range(1, len(raw))
        if _DEFINING[info[i]]
        and shndx[i] != SHN_UNDEF
        and not _LOCAL_VISIBILITY[other[i] & 3]
        and (value[i] or shndx[i] == SHN_ABS or info[i] & 0xF == STT_TLS)
    ]


def _names(raw: _Raw, indices: Sequence[int]) -> list[str]:
    """The names of some symbols, decoded in one pass."""
    strtab, offsets = raw.strtab, raw.names
    if strtab[-1:] != b"\0":
        strtab += b"\0"
    starts = [offsets[i] for i in indices]
    if not starts:
        return []
    if max(starts) >= len(strtab):
        raise Malformed(f"a symbol name lies outside .dynstr ({len(strtab)} bytes)")
    find = strtab.find
    parts = [strtab[start : find(b"\0", start)] for start in starts]
    return b"\0".join(parts).decode("utf-8", "surrogateescape").split("\0")


def _exports(raw: _Raw, versions: dict[int, _Version]) -> Exports:
    indices = _definitions(raw)
    names = _names(raw, indices)
    every = frozenset(names)
    if raw.versym is None:
        return Exports(names=every)
    plain: list[str] = []
    base: list[str] = []
    by_version: dict[str, list[str]] = {}
    versioned: list[str] = []  # defined only at a non-default, non-hidden version
    for value, group in _by_versym(raw.versym, indices, names).items():
        ndx, hidden = value & 0x7FFF, value & VERSYM_HIDDEN
        if ndx < 3:  # local, global or the first defined version: what old binaries get
            plain += group
        elif not hidden:
            versioned += group
        entry = versions.get(ndx)
        if entry is not None:
            by_version.setdefault(entry.key, []).extend(group)
        elif not hidden:
            base += group
    # An unversioned reference takes the one non-default version when it is the only one.
    plain += [n for n, count in Counter(versioned).items() if count == 1]
    return Exports(
        names=every,
        plain=_shared(frozenset(plain), every),
        base=_shared(frozenset(base), every),
        by_version={k: _shared(frozenset(v), every) for k, v in by_version.items()},
    )


def _by_versym(versym: Sequence[int], indices: list[int], names: list[str]) -> dict[int, list[str]]:
    """Names grouped by their .gnu.version value (one group for most libraries)."""
    values = [versym[i] for i in indices]
    if len(set(values)) <= 1:
        return {values[0]: names} if values else {}
    groups: dict[int, list[str]] = {}
    for value, name in zip(values, names):
        groups.setdefault(value, []).append(name)
    return groups


def _shared(names: frozenset[str], every: frozenset[str]) -> frozenset[str]:
    """`every` itself when equal: most libraries define all their names at one version."""
    return every if names == every else names


def _references(
    raw: _Raw, versions: dict[int, _Version], eager: set[int], lazy: set[int]
) -> tuple[Reference, ...]:
    looked_up = sorted(eager | lazy)
    if looked_up and looked_up[-1] >= len(raw):
        raise Malformed(f"a relocation names symbol {looked_up[-1]} of {len(raw)}")
    info, other, shndx = raw.info, raw.other, raw.shndx
    indices = [
        i
        for i in looked_up
        if i
        and shndx[i] == SHN_UNDEF
        and info[i] >> 4 != STB_LOCAL
        and not _LOCAL_VISIBILITY[other[i] & 3]
    ]
    return tuple(
        _reference(raw, versions, i, name, i not in eager)
        for i, name in zip(indices, _names(raw, indices))
    )


def _reference(
    raw: _Raw, versions: dict[int, _Version], i: int, name: str, lazy: bool
) -> Reference:
    entry = versions.get(raw.versym[i] & 0x7FFF) if raw.versym is not None else None
    return Reference(
        name=name,
        version=entry.name if entry else None,
        version_key=entry.key if entry else None,
        file=entry.file if entry else None,
        hidden_version=entry.hidden if entry else False,
        weak=raw.info[i] >> 4 == STB_WEAK,
        lazy=lazy,
    )
