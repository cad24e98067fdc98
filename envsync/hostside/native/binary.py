"""Bounded reads of one file, and the ELF encodings of each class and byte order."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Tuple

    Span = Tuple[int, int, int]  # (vaddr, filesz, offset) of a PT_LOAD segment

ELFCLASS32 = 1
ELFCLASS64 = 2
ELFDATA2LSB = 1
ELFDATA2MSB = 2
# Upper bound on one table read: far above any real .dynstr (libtriton's is 14 MB), low
# enough that a crafted size never makes the reader allocate gigabytes.
MAX_TABLE = 1 << 30


class Malformed(Exception):
    """A file that is not the ELF its header promises (caught at the reader's edge)."""


PAGE = 1 << 16


class Blob:
    """One open file, read only where asked (pread): a 500 MB library is never read whole."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size

    def read(self, offset: int, size: int, what: str) -> bytes:
        """`size` bytes at `offset`, or Malformed naming `what` when they are not all there."""
        if offset < 0 or size < 0 or size > MAX_TABLE or offset + size > self.size:
            raise Malformed(
                f"{what} at offset {offset} ({size} bytes) lies outside the file "
                f"({self.size} bytes)"
            )
        data = os.pread(self.fd, size, offset)
        if len(data) != size:
            raise Malformed(f"{what}: short read at offset {offset}")
        return data


class Pages:
    """Small reads of chained tables (version entries, hash chains), served from 64 KiB pages."""

    def __init__(self, blob: Blob) -> None:
        self.blob = blob
        self.pages: dict[int, bytes] = {}

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        if offset < 0 or offset + fmt.size > self.blob.size:
            raise Malformed(f"{what} at offset {offset} lies outside the file")
        first, last = offset // PAGE, (offset + fmt.size - 1) // PAGE
        data = b"".join(self._page(n) for n in range(first, last + 1))
        return fmt.unpack_from(data, offset - first * PAGE)

    def _page(self, number: int) -> bytes:
        page = self.pages.get(number)
        if page is None:
            start = number * PAGE
            page = self.blob.read(start, min(PAGE, self.blob.size - start), "table page")
            self.pages[number] = page
        return page


@dataclass(frozen=True)
class Layout:
    """The struct formats of one ELF class and byte order."""

    is64: bool
    big_endian: bool
    ehdr: struct.Struct  # the header after e_ident
    phdr: struct.Struct
    shdr: struct.Struct
    dyn: struct.Struct
    sym: struct.Struct

    def sym_fields(self, raw: Sequence[int]) -> tuple[int, int, int, int, int]:
        """(st_name, st_info, st_other, st_shndx, st_value) of one unpacked symbol."""
        if self.is64:  # name, info, other, shndx, value, size
            return raw[0], raw[1], raw[2], raw[3], raw[4]
        return raw[0], raw[3], raw[4], raw[5], raw[1]  # name, value, size, info, other, shndx

    def r_sym(self, info: int) -> int:
        return info >> 32 if self.is64 else info >> 8

    def r_type(self, info: int) -> int:
        return info & 0xFFFFFFFF if self.is64 else info & 0xFF


def make_layout(elf_class: int, data: int) -> Layout:
    """The layout of EI_CLASS/EI_DATA values, or Malformed when they name neither."""
    if elf_class not in (ELFCLASS32, ELFCLASS64) or data not in (ELFDATA2LSB, ELFDATA2MSB):
        raise Malformed(f"unknown ELF class {elf_class} or data encoding {data}")
    order = ">" if data == ELFDATA2MSB else "<"
    if elf_class == ELFCLASS64:
        return Layout(
            is64=True,
            big_endian=order == ">",
            ehdr=struct.Struct(order + "HHIQQQIHHHHHH"),
            phdr=struct.Struct(order + "IIQQQQQQ"),
            shdr=struct.Struct(order + "IIQQQQIIQQ"),
            dyn=struct.Struct(order + "qQ"),
            sym=struct.Struct(order + "IBBHQQ"),
        )
    return Layout(
        is64=False,
        big_endian=order == ">",
        ehdr=struct.Struct(order + "HHIIIIIHHHHHH"),
        phdr=struct.Struct(order + "IIIIIIII"),
        shdr=struct.Struct(order + "IIIIIIIIII"),
        dyn=struct.Struct(order + "iI"),
        sym=struct.Struct(order + "IIIBBH"),
    )


class AddressMap:
    """Virtual addresses to file offsets through the PT_LOAD segments, as ld.so maps them."""

    def __init__(self, spans: Sequence[Span]) -> None:
        self.spans = tuple(spans)

    def offset(self, vaddr: int, size: int, what: str) -> int:
        """The file offset of `size` bytes at `vaddr`, or Malformed when no segment holds them."""
        for start, filesz, offset in self.spans:
            if start <= vaddr and vaddr + size <= start + filesz:
                return vaddr - start + offset
        raise Malformed(f"{what} at address {vaddr:#x} is in no loaded segment")


def c_string(table: bytes, offset: int, what: str) -> str:
    """The NUL-terminated string at `offset` of a string table (bytes kept: surrogateescape)."""
    if offset < 0 or offset >= len(table):
        raise Malformed(f"{what}: string offset {offset} outside its table ({len(table)} bytes)")
    end = table.find(b"\0", offset)
    if end < 0:
        raise Malformed(f"{what}: string at offset {offset} is not terminated")
    return table[offset:end].decode("utf-8", "surrogateescape")


def elf_hash(name: str) -> int:
    """The SysV ELF hash of a name (what vd_hash and vna_hash hold)."""
    h = 0
    for byte in name.encode("utf-8", "surrogateescape"):
        h = ((h << 4) + byte) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


@dataclass(frozen=True)
class Section:
    """A section header's fields that envsync reads (elf.py reads them, dynsym.py uses them)."""

    name: str
    type: int
    offset: int
    addr: int
    size: int
    entsize: int
    link: int
