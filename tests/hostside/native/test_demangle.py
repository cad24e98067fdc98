"""C++ names in findings: c++filt's words when the host has it, else the best effort, which
must agree with c++filt wherever it gives a name at all."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envsync.hostside.native.demangle import best_effort, demangle, with_demangled
from envsync.hostside.native.elf import ElfFile, read_elf
from envsync.hostside.native.verdicts import Fails, UndefinedSymbol
from tests.helpers import REPO
from tests.hostside.native.toolchain import build, real_load, static_load

LIBC10 = (
    REPO
    / "examples"
    / ".hosts"
    / "runtime"
    / "lib"
    / "python3.11"
    / "site-packages"
    / "torch"
    / "lib"
    / "libc10.so"
)


def sample() -> list[str]:
    source = LIBC10 if LIBC10.exists() else Path("/lib/x86_64-linux-gnu/libstdc++.so.6")
    elf = read_elf(str(source))
    assert isinstance(elf, ElfFile) and elf.symbols is not None
    return sorted(n for n in elf.symbols.exports.names if n.startswith("_Z"))[:4000]


def test_the_best_effort_agrees_with_cxxfilt() -> None:
    if shutil.which("c++filt") is None:
        pytest.skip("c++filt (binutils) is missing")
    names = sample()
    told = demangle(names)
    read = 0
    for name in names:
        mine = best_effort(name)
        if mine is None:
            continue
        read += 1
        theirs = told[name]
        if mine.endswith("(...)"):
            assert theirs.startswith(mine[:-5] + "("), (name, mine, theirs)
        else:
            assert theirs == mine, (name, mine, theirs)
    assert read > len(names) // 4  # it reads the plain qualified names, the common case


def test_a_missing_cxx_symbol_named_readably(tmp_path: Path) -> None:
    if shutil.which("g++") is None:
        pytest.skip("g++ is missing")
    lib = build(
        tmp_path / "lib" / "libshape.so",
        "namespace shapes { struct Circle { double area(double r) const; }; "
        "double Circle::area(double r) const { return 3.14 * r * r; } }\n",
        soname="libshape.so",
        cxx=True,
    )
    consumer = build(
        tmp_path / "libuse.so",
        "namespace shapes { struct Circle { double area(double r) const; }; }\n"
        "double use(double r) { shapes::Circle c; return c.area(r); }\n",
        link=(lib,),
        runpath="$ORIGIN/lib",
        cxx=True,
    )
    build(lib, "int nothing_here(void) { return 0; }\n", soname="libshape.so")
    real = real_load(consumer)
    assert real == f"{consumer}: undefined symbol: _ZNK6shapes6Circle4areaEd"
    load = static_load(consumer)
    demangled = with_demangled(load).verdict
    assert isinstance(demangled, Fails), demangled
    reason = demangled.reasons[0]
    assert isinstance(reason, UndefinedSymbol) and reason.symbol == "_ZNK6shapes6Circle4areaEd"
    if shutil.which("c++filt"):
        assert reason.demangled == "shapes::Circle::area(double) const"
    plainly = with_demangled(load, cxxfilt=None).verdict
    assert isinstance(plainly, Fails), plainly
    plain = plainly.reasons[0]
    assert isinstance(plain, UndefinedSymbol) and plain.demangled == "shapes::Circle::area(...)"
