"""The ELF reader against binutils' readelf, on real objects (this machine's libraries, the
runtime's, ones built here, 32-bit ones) and written ones of every class and byte order;
and on broken files: a value saying why, never an exception."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from envsync.hostside.native.elf import ElfFile, Unreadable, dynamic_symbols, read_elf
from tests.helpers import REPO
from tests.hostside.native import elfwriter as w
from tests.hostside.native.toolchain import build, build_32

RUNTIME_SITE = REPO / "examples" / ".hosts" / "runtime" / "lib" / "python3.11" / "site-packages"
_ROW = re.compile(r"^\s*(\d+): [0-9a-f]+\s+\d+ (\S+)\s+(\S+)\s+(\S+)\s+(\S+) ?(.*)$")


@dataclass
class Readelf:
    """What readelf says of a file."""

    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    rpath: str | None = None
    runpath: str | None = None
    flags_1: list[str] = field(default_factory=list)
    symbols: list[tuple[str, str, str, str, bool, str | None, bool]] = field(default_factory=list)
    verdefs: list[tuple[int, str, bool]] = field(default_factory=list)
    verneeds: list[tuple[str, str, int]] = field(default_factory=list)
    relocated: set[int] = field(default_factory=set)


def readelf(path: Path, is64: bool) -> Readelf:
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is missing")
    out = subprocess.run(
        ["readelf", "-W", "-d", "--dyn-syms", "-V", "-r", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    facts = Readelf()
    section = ""
    file = ""
    for line in out.splitlines():
        if line.startswith(("Dynamic section", "Relocation section", "Symbol table", "Version")):
            section = line
        _dynamic_line(facts, line)
        if section.startswith("Symbol table '.dynsym'"):
            _symbol_line(facts, line)
        elif section.startswith("Relocation section"):
            _relocation_line(facts, line, is64)
        elif section.startswith("Version definition"):
            m = re.search(r"Flags: (\S+)\s+Index: (\d+)\s+Cnt: \d+\s+Name: (\S+)", line)
            if m:
                facts.verdefs.append((int(m.group(2)), m.group(3), m.group(1) == "BASE"))
        elif section.startswith("Version needs"):
            m = re.search(r"File: (\S+)", line)
            file = m.group(1) if m else file
            m = re.search(r"Name: (\S+)\s+Flags: (\S+)\s+Version: (\d+)", line)
            if m:
                facts.verneeds.append((file, m.group(1), int(m.group(3))))
    return facts


def _dynamic_line(facts: Readelf, line: str) -> None:
    for tag, attr in (("Shared library", "needed"), ("Library soname", "soname")):
        m = re.search(rf"{tag}: \[(.*)\]", line)
        if m and attr == "needed":
            facts.needed.append(m.group(1))
        elif m:
            facts.soname = m.group(1)
    m = re.search(r"Library (rpath|runpath): \[(.*)\]", line)
    if m:
        setattr(facts, m.group(1), m.group(2))
    if "(FLAGS_1)" in line:
        facts.flags_1 = line.split("Flags:", 1)[1].split()


def _symbol_line(facts: Readelf, line: str) -> None:
    m = _ROW.match(line)
    if not m or m.group(1) == "0":
        return
    kind, bind, vis, ndx, name = m.groups()[1:]
    name = re.sub(r" \(\d+\)$", "", name)
    version, hidden = None, False
    if "@@" in name:
        name, version = name.split("@@", 1)
    elif "@" in name:
        name, version = name.split("@", 1)
        hidden = ndx != "UND"
    facts.symbols.append((name, bind, kind, vis, ndx != "UND", version, hidden))


def _relocation_line(facts: Readelf, line: str, is64: bool) -> None:
    parts = line.split()
    if (
        len(parts) >= 3
        and re.fullmatch(r"[0-9a-f]{8,16}", parts[0])
        and re.fullmatch(r"[0-9a-f]+", parts[1])
    ):
        info = int(parts[1], 16)
        sym, kind = (info >> 32, info & 0xFFFFFFFF) if is64 else (info >> 8, info & 0xFF)
        if kind and sym:
            facts.relocated.add(sym)


def _kind(kind: str) -> str:
    return {"GNU_IFUNC": "IFUNC", "IFUNC": "IFUNC"}.get(kind, kind)


def assert_same(path: Path, twin: Path | None = None) -> ElfFile:
    """readelf's facts of `twin` (default: the file itself) are envsync's of `path`."""
    elf = read_elf(str(path))
    assert isinstance(elf, ElfFile), elf
    expected = readelf(twin or path, elf.elf_class == 64)
    dyn = elf.dynamic
    assert dyn is not None
    assert (list(dyn.needed), dyn.soname, dyn.rpath, dyn.runpath) == (
        expected.needed,
        expected.soname,
        expected.rpath,
        expected.runpath,
    )
    assert [n.split(":")[-1] for n in dyn.flag_names() if n.startswith("1:")] == [
        f for f in expected.flags_1 if f in {n.split(":")[-1] for n in dyn.flag_names()}
    ]
    listed = dynamic_symbols(str(path))
    assert not isinstance(listed, Unreadable), listed
    # readelf prints no version for a version's own symbol (GLIBCXX_3.4.10@@GLIBCXX_3.4.10)
    mine = [
        (
            s.name,
            s.binding,
            s.type,
            s.visibility,
            s.defined,
            *((None, False) if s.version == s.name else (s.version, s.hidden)),
        )
        for s in listed
    ]
    theirs = [(n, b, _kind(k), v, d, ver, h) for n, b, k, v, d, ver, h in expected.symbols]
    assert [m[:5] for m in mine] == [t[:5] for t in theirs]
    assert [m[5:] for m in mine] == [t[5:] for t in theirs]
    table = elf.symbols
    assert table is not None
    assert [(v.index, v.name, v.base) for v in table.verdefs] == expected.verdefs
    assert [(v.file, v.name, v.index) for v in table.verneeds] == expected.verneeds
    # the references: every undefined, non-local symbol some relocation names
    looked_up = {
        mine[i - 1][0]
        for i in expected.relocated
        if not mine[i - 1][4]
        and mine[i - 1][1] != "LOCAL"
        and mine[i - 1][3] not in ("HIDDEN", "INTERNAL")
    }
    assert {r.name for r in table.references} == looked_up
    defined = {
        m[0]
        for m in mine
        if m[4] and m[1] in ("GLOBAL", "WEAK", "UNIQUE") and m[3] in ("DEFAULT", "PROTECTED")
    }
    assert table.exports.names <= defined
    assert table.count == len(mine) + 1
    return elf


def system_files() -> list[Path]:
    found = [
        Path(p)
        for p in (
            "/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/lib64/ld-linux-x86-64.so.2",
            os.path.realpath(sys.executable),
        )
        if os.path.exists(p)
    ]
    for rel in (
        "torch/lib/libtorch_python.so",
        "torch/lib/libc10.so",
        "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
        "tokenizers/tokenizers.abi3.so",
    ):
        if (RUNTIME_SITE / rel).exists():
            found.append(RUNTIME_SITE / rel)
    return found


@pytest.mark.parametrize("path", system_files(), ids=lambda p: p.name)
def test_real_libraries_read_as_readelf_reads_them(path: Path) -> None:
    assert_same(path)


def test_built_libraries_with_versions_rpath_and_flags(tmp_path: Path) -> None:
    script = "VERS_1 { global: f; local: *; };\nVERS_2 { global: g; } VERS_1;\n"
    lib = build(
        tmp_path / "libp.so.1",
        "int f(void) { return 1; }\nint g(void) { return 2; }\nint f_old(void) { return 0; }\n"
        '__asm__(".symver f_old,f_compat@VERS_1");\n',
        soname="libp.so.1",
        version_script=script.replace("f;", "f; f_compat;"),
    )
    consumer = build(
        tmp_path / "libc.so",
        "extern int g(void);\nextern int h(void) __attribute__((weak));\n"
        "int use(void) { return g() + (h ? h() : 0); }\n",
        link=(lib,),
        rpath="$ORIGIN/x:/opt/y",
        flags=("-Wl,-z,nodefaultlib", "-Wl,-z,now"),
    )
    assert_same(lib)
    elf = assert_same(consumer)
    assert elf.dynamic is not None and elf.dynamic.bind_now and elf.dynamic.nodeflib


def test_a_32_bit_library(tmp_path: Path) -> None:
    lib = build_32(
        tmp_path / "lib32.so",
        "int f(void) { return 1; }\nint g(int x) { return x; }\n",
        soname="lib32.so",
    )
    elf = assert_same(lib)
    assert (elf.elf_class, elf.machine, elf.big_endian) == (32, 3, False)


SPEC = w.Spec(
    needed=["libc.so.6", "libfoo.so.1"],
    soname="libsyn.so.1",
    runpath="$ORIGIN/lib",
    flags_1=0x800,
    versions=["libsyn.so.1", "SYN_1", "SYN_2"],
    defined=[
        w.Defined("a", "SYN_1"),
        w.Defined("b", "SYN_2"),
        w.Defined("b", "SYN_1", hidden=True),
        w.Defined("c"),
        w.Defined("weak_one", binding=2),
    ],
    undefined=[
        w.Undefined("malloc", "GLIBC_2.2.5", "libc.so.6"),
        w.Undefined("foo", "FOO_1", "libfoo.so.1", plt=False),
        w.Undefined("bar"),
        w.Undefined("weakling", binding=2),
    ],
)
LAYOUTS = [(c, be, h) for c in (32, 64) for be in (False, True) for h in ("gnu", "sysv")]


@pytest.mark.parametrize(("elf_class", "big_endian", "hash_kind"), LAYOUTS)
def test_written_objects_of_every_class_and_byte_order(
    tmp_path: Path, elf_class: int, big_endian: bool, hash_kind: str
) -> None:
    machine = {(64, True): 22, (32, True): 20, (64, False): 183, (32, False): 40}[
        (elf_class, big_endian)
    ]
    spec = replace(
        SPEC, elf_class=elf_class, big_endian=big_endian, machine=machine, hash=hash_kind
    )
    with_sections = w.write(tmp_path / "with.so", spec)
    elf = assert_same(with_sections)
    assert (elf.elf_class, elf.big_endian, elf.machine) == (elf_class, big_endian, machine)
    # without section headers the count comes from the hash table, as ld.so never needs it
    spec.sections = False
    bare = w.write(tmp_path / "bare.so", spec)
    bare_elf = assert_same(bare, twin=with_sections)
    assert bare_elf.sections == () and bare_elf.symbols == elf.symbols
    assert elf.symbols is not None
    refs = {r.name: r for r in elf.symbols.references}
    assert refs["malloc"].version == "GLIBC_2.2.5" and refs["malloc"].file == "libc.so.6"
    assert refs["malloc"].lazy and not refs["foo"].lazy and refs["weakling"].weak


def test_broken_files_are_values_never_exceptions(tmp_path: Path) -> None:
    source = Path("/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not source.exists():
        pytest.skip("no libstdc++ here")
    data = source.read_bytes()
    rng = random.Random(22)
    cuts = [0, 3, 16, 40, 63, 64, 100, 1000] + [rng.randrange(len(data)) for _ in range(40)]
    target = tmp_path / "broken.so"
    outcomes: dict[str, int] = {}
    for cut in cuts:
        target.write_bytes(data[:cut])
        outcome = read_elf(str(target))
        outcomes[type(outcome).__name__] = outcomes.get(type(outcome).__name__, 0) + 1
        assert isinstance(outcome, (ElfFile, Unreadable))
        if isinstance(outcome, Unreadable):
            assert outcome.why.startswith("unreadable: ")
    for _ in range(120):  # bytes flipped in the headers and the tables
        mutated = bytearray(data)
        for _ in range(rng.randrange(1, 20)):
            mutated[rng.randrange(0, min(len(data), 0x40000))] = rng.randrange(256)
        target.write_bytes(bytes(mutated))
        assert isinstance(read_elf(str(target)), (ElfFile, Unreadable))
        assert isinstance(dynamic_symbols(str(target)), (tuple, Unreadable))
    assert outcomes.get("Unreadable", 0) >= len(cuts) - 1
    absent = read_elf(str(tmp_path / "absent.so"))
    assert isinstance(absent, Unreadable) and absent.why == "unreadable: No such file or directory"
    (tmp_path / "text.so").write_text("not an ELF file at all, just text that is long enough\n" * 3)
    text = read_elf(str(tmp_path / "text.so"))
    assert isinstance(text, Unreadable) and text.why == "unreadable: invalid ELF header"
