"""/etc/ld.so.cache read as glibc's dl-cache.c reads it: both formats, flags and glibc-hwcaps.

`read_ldcache(path)` gives every entry with its flags (the ELF class and ABI ldconfig
found), so that a lookup for a 64-bit object never returns a 32-bit library; `lookup`
chooses among same-named entries as `search_cache` does.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Sequence

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
EXTENSION_MAGIC = 0xEAA42174
EXTENSION_GENERATOR = 0
EXTENSION_GLIBC_HWCAPS = 1
HWCAP_EXTENSION = 1 << 62
ISA_LEVEL_MASK = (1 << 10) - 1
FLAG_ELF_LIBC6 = 0x0003
# _dl_cache_check_flags of each ld.so: (ELF class, e_machine) -> the flags it accepts.
_ACCEPTED: dict[tuple[int, int], frozenset[int]] = {
    (64, 62): frozenset([0x0303]),  # x86_64: FLAG_X8664_LIB64
    (32, 62): frozenset([0x0803]),  # x32: FLAG_X8664_LIBX32
    (64, 183): frozenset([0x0A03]),  # aarch64: FLAG_AARCH64_LIB64
    (64, 21): frozenset([0x0503]),  # ppc64: FLAG_POWERPC_LIB64
    (64, 22): frozenset([0x0403]),  # s390x: FLAG_S390_LIB64
    (64, 2): frozenset([0x0103]),  # sparc64
    (64, 43): frozenset([0x0103]),  # sparcv9
    (64, 50): frozenset([0x0203]),  # ia64
    (64, 243): frozenset([0x1003]),  # riscv64, double-float ABI
    (32, 40): frozenset([0x0903, FLAG_ELF_LIBC6]),  # arm, hard-float
}
_GENERIC = frozenset([0x0001, FLAG_ELF_LIBC6])  # i386 and the rest
# How ldconfig -p names the flags (glibc's elf/cache.c, print_entry).
_TYPES = ("libc4", "ELF", "libc5", "libc6")
_ABIS = {
    0x0100: "64bit",
    0x0200: "IA-64",
    0x0300: "x86-64",
    0x0400: "64bit",
    0x0500: "64bit",
    0x0600: "N32",
    0x0700: "64bit",
    0x0800: "x32",
    0x0900: "hard-float",
    0x0A00: "AArch64",
    0x0B00: "soft-float",
    0x0C00: "nan2008",
    0x0D00: "N32,nan2008",
    0x0E00: "64bit,nan2008",
    0x0F00: "soft-float",
    0x1000: "double-float",
}
MAX_ENTRIES = 1 << 20


@dataclass(frozen=True)
class Unreadable:
    path: str
    why: str


@dataclass(frozen=True)
class CacheEntry:
    name: str  # the soname ldconfig found
    path: str
    flags: int  # FLAG_ELF_LIBC6 | an ABI flag such as FLAG_X8664_LIB64 (0x0300)
    hwcap: int = 0

    @property
    def hwcaps_index(self) -> int | None:
        """The glibc-hwcaps subfolder's index, for entries ldconfig found in one."""
        if ((self.hwcap >> 32) & ~ISA_LEVEL_MASK) == (HWCAP_EXTENSION >> 32):
            return self.hwcap & 0xFFFFFFFF
        return None


@dataclass(frozen=True)
class LdCache:
    path: str
    format: str  # the magic strings found, e.g. "glibc-ld.so.cache1.1"
    entries: tuple[CacheEntry, ...]
    hwcaps: tuple[str, ...] = ()  # glibc-hwcaps subfolder names, by index
    generator: str | None = None  # the glibc that wrote it
    by_name: dict[str, tuple[CacheEntry, ...]] = field(default_factory=dict, compare=False)

    def describe(self, entry: CacheEntry) -> str:
        """The entry's flags as `ldconfig -p` prints them, e.g. 'libc6,x86-64'."""
        kind = entry.flags & 0xFF
        text = _TYPES[kind] if kind < len(_TYPES) else "unknown"
        required = entry.flags & 0xFF00
        if required:
            text += "," + _ABIS.get(required, str(required))
        index = entry.hwcaps_index
        if index is not None and index < len(self.hwcaps):
            text += f', hwcap: "{self.hwcaps[index]}"'
        elif entry.hwcap:
            text += f", hwcap: {entry.hwcap:#018x}"
        return text

    def paths(self) -> dict[str, list[str]]:
        """{soname: [paths]}, in the cache's order."""
        return {name: [e.path for e in group] for name, group in self.by_name.items()}

    def lookup(self, name: str, accepted: frozenset[int], hwcaps: Sequence[str] = ()) -> str | None:
        """The path ld.so takes from the cache for `name` (glibc's search_cache): entries in
        glibc-hwcaps subfolders first, by the priority of `hwcaps` (the subfolders this CPU
        supports, best first); else the first plain entry with accepted flags."""
        if self.format == OLD_MAGIC.decode():
            return self._lookup_old(name, accepted)
        best: str | None = None
        best_priority = 0
        for entry in self.by_name.get(name, ()):
            if entry.flags not in accepted:
                continue
            index = entry.hwcaps_index
            if index is None:
                if best is not None:
                    break
                if entry.hwcap:  # a legacy hwcap entry: see `legacy`
                    continue
                return entry.path
            priority = self._priority(index, hwcaps)
            if priority and (best is None or priority < best_priority):
                best, best_priority = entry.path, priority
        return best

    def legacy(self, name: str, accepted: frozenset[int]) -> bool:
        """Whether `name` has entries of the legacy hwcaps (tls/, platform folders), which
        `lookup` cannot rank as this CPU's ld.so would."""
        return any(
            e.flags in accepted and e.hwcap and e.hwcaps_index is None
            for e in self.by_name.get(name, ())
        )

    def _lookup_old(self, name: str, accepted: frozenset[int]) -> str | None:
        """The libc5 format: the last accepted entry, or the first with the default flags."""
        best = None
        for entry in self.by_name.get(name, ()):
            if entry.flags in accepted:
                best = entry.path
                if entry.flags == max(accepted):
                    break
        return best

    def _priority(self, index: int, hwcaps: Sequence[str]) -> int:
        """1 for the best supported subfolder, 2 for the next...; 0: not supported here."""
        if index >= len(self.hwcaps) or self.hwcaps[index] not in hwcaps:
            return 0
        return list(hwcaps).index(self.hwcaps[index]) + 1


def cache_flags(elf_class: int, machine: int) -> frozenset[int]:
    """The entry flags the ld.so of that class and machine accepts."""
    return _ACCEPTED.get((elf_class, machine), _GENERIC)


def read_ldcache(path: str = "/etc/ld.so.cache") -> LdCache | Unreadable:
    """The entries of an ld.so.cache, or why it could not be read."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return Unreadable(path=path, why=f"unreadable: {e.strerror or e}")
    try:
        return _parse(path, data)
    except (struct.error, ValueError, IndexError) as e:
        return Unreadable(path=path, why=f"unreadable: {e}")


def _parse(path: str, data: bytes) -> LdCache:
    if data.startswith(NEW_MAGIC):
        return _new_format(path, data, 0, NEW_MAGIC.decode())
    if data.startswith(OLD_MAGIC):
        return _old_format(path, data)
    raise ValueError("neither an old nor a new ld.so.cache")


def _old_format(path: str, data: bytes) -> LdCache:
    """The libc5 format, which may hold the new format after its own entries."""
    order = "<" if sys.byteorder == "little" else ">"
    (count,) = struct.unpack_from(order + "I", data, 12)
    if count > MAX_ENTRIES or 16 + 12 * count > len(data):
        raise ValueError(f"{count} entries do not fit in {len(data)} bytes")
    new_at = (16 + 12 * count + 7) & ~7  # ALIGN_CACHE: the new header's alignment
    if data[new_at : new_at + len(NEW_MAGIC)] == NEW_MAGIC:
        return _new_format(path, data, new_at, "ld.so-1.7.0+glibc-ld.so.cache1.1")
    strings = 16 + 12 * count
    entries = []
    for n in range(count):
        flags, key, value = struct.unpack_from(order + "iII", data, 16 + 12 * n)
        entries.append(
            CacheEntry(
                name=_string(data, strings + key), path=_string(data, strings + value), flags=flags
            )
        )
    return _cache(path, "ld.so-1.7.0", entries)


def _new_format(path: str, data: bytes, base: int, label: str) -> LdCache:
    order = _new_order(data[base + 28])
    count, _strings_len = struct.unpack_from(order + "II", data, base + 20)
    if count > MAX_ENTRIES or base + 48 + 24 * count > len(data):
        raise ValueError(f"{count} entries do not fit in {len(data)} bytes")
    (extension,) = struct.unpack_from(order + "I", data, base + 32)
    entries = []
    for n in range(count):
        at = base + 48 + 24 * n
        flags, key, value, _os, hwcap = struct.unpack_from(order + "iIIIQ", data, at)
        # String offsets count from the new header; the extension's from the file's start.
        entries.append(
            CacheEntry(
                name=_string(data, base + key),
                path=_string(data, base + value),
                flags=flags,
                hwcap=hwcap,
            )
        )
    hwcaps, generator = _extension(data, order, extension)
    return _cache(path, label, entries, hwcaps, generator)


def _new_order(flags: int) -> str:
    """The new header's byte order: 2 little, 3 big, 0 (an old ldconfig) this machine's."""
    endian = flags & 3
    if endian == 1:
        raise ValueError("the cache marks itself invalid")
    if endian == 0:
        return "<" if sys.byteorder == "little" else ">"
    return "<" if endian == 2 else ">"


def _extension(data: bytes, order: str, offset: int) -> tuple[tuple[str, ...], str | None]:
    """The glibc-hwcaps subfolder names and the generator, from the extension directory."""
    if offset == 0 or offset + 8 > len(data):
        return (), None
    magic, count = struct.unpack_from(order + "II", data, offset)
    if magic != EXTENSION_MAGIC or count > 64:
        return (), None
    hwcaps: tuple[str, ...] = ()
    generator = None
    for n in range(count):
        tag, _flags, start, size = struct.unpack_from(order + "IIII", data, offset + 8 + 16 * n)
        if start + size > len(data):
            continue
        if tag == EXTENSION_GLIBC_HWCAPS:
            indices = struct.unpack_from(order + f"{size // 4}I", data, start)
            hwcaps = tuple(_string(data, i) for i in indices)
        elif tag == EXTENSION_GENERATOR:
            generator = data[start : start + size].decode("utf-8", "replace")
    return hwcaps, generator


def _cache(
    path: str,
    label: str,
    entries: list[CacheEntry],
    hwcaps: tuple[str, ...] = (),
    generator: str | None = None,
) -> LdCache:
    by_name: dict[str, list[CacheEntry]] = {}
    for entry in entries:
        by_name.setdefault(entry.name, []).append(entry)
    return LdCache(
        path=path,
        format=label,
        entries=tuple(entries),
        hwcaps=hwcaps,
        generator=generator,
        by_name={name: tuple(group) for name, group in by_name.items()},
    )


def _string(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode("utf-8", "surrogateescape")
