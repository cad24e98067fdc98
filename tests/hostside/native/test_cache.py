"""The native layer's caches: parsed files and whole verdicts reused while every stamp they
depended on holds, and judged again as soon as one changes (a provider replaced, a file
appearing where the loader looks first); the JSON codec gives back equal values."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envsync.hostside.caches.store import Store
from envsync.hostside.native.cache import (
    ElfStore,
    cached_facts,
    cached_judge,
    elf_key,
    unchanged,
)
from envsync.hostside.native.codec import decode_elf, encode_elf
from envsync.hostside.native.elf import ElfFile, read_elf
from envsync.hostside.native.verdicts import (
    BadObject,
    Fails,
    Load,
    NotFound,
    Request,
    Step,
    UndefinedSymbol,
    Unknown,
    VersionNotFound,
    decode_load,
    encode_load,
)
from envsync.hostside.shared import Stamp, stamp
from tests.hostside.native.toolchain import build, facts, real_load

F_AND_G = "int f(void) { return 1; }\nint g(void) { return 2; }\n"
USES_G = "extern int g(void);\nint use_g(void) { return g(); }\n"


def aged(*paths: Path) -> None:
    """Files as old as a deployed venv's (the racy rule keeps new ones out of caches)."""
    old = time.time() - 3600
    for path in paths:
        os.utime(path, (old, old))


def test_parsed_files_are_kept_by_stamp_in_the_hosts_store(tmp_path: Path) -> None:
    lib = build(tmp_path / "libp.so.1", F_AND_G, soname="libp.so.1")
    other = build(tmp_path / "libq.so.1", USES_G, soname="libq.so.1")
    folder = str(tmp_path / "elves")
    cache = ElfStore(Store(folder))
    first = cache.read(str(lib))
    assert isinstance(first, ElfFile)
    assert cache.read(str(lib)) is first and (cache.hits, cache.misses) == (0, 1)
    assert not os.path.isdir(folder)  # just written: too fresh to trust its stamp
    aged(lib, other)
    again = ElfStore(Store(folder))  # the next run: each file read, then kept
    assert again.read(str(lib)) == first and again.read(str(other)) == read_elf(str(other))
    assert (again.hits, again.misses) == (0, 2) and len(_entries(folder)) == 2
    third = ElfStore(Store(folder))  # and the one after: both from the store
    assert third.read(str(lib)) == first and (third.hits, third.misses) == (1, 0)
    build(lib, F_AND_G + "int h(void) { return 3; }\n", soname="libp.so.1")  # rewritten
    aged(lib)
    fourth = ElfStore(Store(folder))
    changed = fourth.read(str(lib))
    assert isinstance(changed, ElfFile) and changed.symbols is not None
    assert "h" in changed.symbols.exports.names
    assert fourth.read(str(other)) == read_elf(str(other))
    assert (fourth.hits, fourth.misses) == (1, 1)  # what changed read again, alone


def test_a_damaged_elf_entry_is_dropped_and_the_file_read_again(tmp_path: Path) -> None:
    lib = build(tmp_path / "libp.so.1", F_AND_G, soname="libp.so.1")
    aged(lib)
    folder = str(tmp_path / "elves")
    ElfStore(Store(folder)).read(str(lib))
    (entry,) = _entries(folder)
    head, _, text = entry.read_bytes().partition(b"\n")
    entry.write_bytes(head + b"\n" + text.replace(b"libp.so.1", b"libX.so.1", 1))
    cache = ElfStore(Store(folder))
    got = cache.read(str(lib))
    assert got == read_elf(str(lib)) and (cache.hits, cache.misses) == (0, 1)
    assert cache.store.dropped == 1 and len(_entries(folder)) == 1  # learned again
    # an entry that decodes to another file's facts is never taken for this one
    elf = read_elf(str(lib))
    assert isinstance(elf, ElfFile)
    lying = encode_elf(elf)
    lying["path"] = "/elsewhere/libp.so.1"
    now = stamp(str(lib))
    assert isinstance(now, Stamp)
    cache.store.put(elf_key(str(lib), now), lying)
    last = ElfStore(Store(folder))
    assert last.read(str(lib)) == got and last.misses == 1


def _entries(folder: str) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*.json"))


def test_the_codec_gives_back_equal_values() -> None:
    for path in ("/lib/x86_64-linux-gnu/libstdc++.so.6", os.path.realpath(sys.executable)):
        elf = read_elf(path)
        assert isinstance(elf, ElfFile)
        assert decode_elf(json.loads(json.dumps(encode_elf(elf)))) == elf
    reasons = (
        NotFound(name="libx.so", needed_by="/a", searched=("RUNPATH of /a: /b",), tried=False),
        BadObject(path="/c", needed_by=None, why="invalid ELF header"),
        VersionNotFound(version="V_2", file="libp.so.1", provider="/p", needed_by="/a"),
        UndefinedSymbol(
            symbol="_ZN3c104HashEv", needed_by="/a", searched=("/a", "/p"), version="V"
        ),
    )
    for verdict in (Fails(reasons=reasons), Unknown(why=("a reason",))):
        load = Load(
            verdict=verdict, steps=(Step("/a", "libx.so", None, "not found"),), searchlist=("/a",)
        )
        assert decode_load(json.loads(json.dumps(encode_load(load)))) == load


def _judge(consumer: Path, store: dict[str, dict[str, Any]]) -> str:
    _, loads = cached_judge(sys.executable, [Request(str(consumer))], store)
    verdict = loads[0].verdict
    return verdict.message() if isinstance(verdict, Fails) else verdict.kind


def test_verdicts_are_kept_until_something_they_depended_on_changes(tmp_path: Path) -> None:
    lib = build(tmp_path / "a" / "lib" / "libp.so.1", F_AND_G, soname="libp.so.1")
    consumer = build(
        tmp_path / "a" / "libconsumer.so", USES_G, link=(lib,), runpath="$ORIGIN/lib:$ORIGIN/late"
    )
    (tmp_path / "a" / "late").mkdir()
    aged(lib, consumer)
    store: dict[str, dict[str, Any]] = {}
    assert _judge(consumer, store) == "ok" and len(store) == 1
    record = next(iter(store.values()))
    assert unchanged(record["observed"])
    assert _judge(consumer, json.loads(json.dumps(store))) == "ok"  # from the host's cache file

    build(lib, "int f(void) { return 1; }\n", soname="libp.so.1")  # the provider drops g
    aged(lib)
    assert not unchanged(record["observed"])
    assert _judge(consumer, store) == real_load(consumer) == f"{consumer}: undefined symbol: g"

    # a file appearing where the loader looks first changes the verdict too
    build(
        tmp_path / "a" / "lib" / "glibc-hwcaps" / "x86-64-v2" / "libp.so.1",
        F_AND_G,
        soname="libp.so.1",
    )
    aged(tmp_path / "a" / "lib" / "glibc-hwcaps" / "x86-64-v2" / "libp.so.1")
    expected = real_load(consumer)
    assert _judge(consumer, store) == (expected or "ok")


def test_the_loaders_facts_are_kept_by_its_stamp() -> None:
    store: dict[str, dict[str, Any]] = {}
    told = facts()
    first = cached_facts(told.interpreter, os.uname().machine, store)
    assert first == told
    assert cached_facts(told.interpreter, os.uname().machine, json.loads(json.dumps(store))) == told


def test_a_library_replaced_is_the_only_file_the_native_scan_reads_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two real extension modules, one linked to a library beside it; the library rebuilt
    (a wheel of another build): the next scan reads that file alone, the rest from the
    host's store, and judges what a scan with an empty cache judges."""
    from envsync.hostside.caches import store as host_store
    from envsync.hostside.graph.finder import ModuleFinder
    from envsync.hostside.native import elf as elf_module
    from envsync.hostside.native import scan as nativescan
    from tests.hostside.native.toolchain import extension

    site = tmp_path / "site"
    lib = build(site / "libs" / "libp.so.1", F_AND_G, soname="libp.so.1")
    one = extension(
        site,
        "one",
        "extern int g(void);\nint module_value(void) { return g(); }\n",
        link=(lib,),
        runpath="$ORIGIN/libs",
    )
    two = extension(site, "two", "int module_value(void) { return 2; }\n")
    aged(lib, one, two)
    graph = {
        "roots": ["app"],
        "modules": {
            "app": {
                "kind": "source",
                "file": str(site / "app.py"),
                "imports": [
                    {"module": m, "names": [], "line": n, "context": "module"}
                    for n, m in enumerate(("one", "two"), 1)
                ],
            },
            "one": {"kind": "extension", "file": str(one)},
            "two": {"kind": "extension", "file": str(two)},
        },
    }
    (site / "app.py").write_text("import one\nimport two\n")
    read: list[str] = []
    real = elf_module.read_elf

    def counted(path: str) -> Any:
        read.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(elf_module, "read_elf", counted)

    def scan(base: Path) -> Any:
        host_store._OPEN.clear()  # a probe is a process of its own
        return nativescan.native_facts(
            {}, ModuleFinder([str(site)]), graph, None, [], str(base), "d"
        )

    base = tmp_path / "cache"
    first = scan(base)
    assert {"libp.so.1", one.name, two.name} <= set(read)
    assert [load["verdict"]["kind"] for load in first["loads"]] == ["ok", "ok"]
    assert not list(base.glob("elves-*"))  # a first scan (a fleet's cold node) keeps none
    for n, more in enumerate(("h", "k"), 1):
        build(lib, F_AND_G + f"int {more}(void) {{ return 3; }}\n", soname="libp.so.1")
        aged(lib)
        del read[:]
        again = scan(base)
        if n == 1:  # the environment changed: every file read, and kept from now on
            assert {"libp.so.1", one.name, two.name} <= set(read)
        else:  # what changed, alone: the others from the store
            assert read == ["libp.so.1"]
    del read[:]
    assert again == scan(tmp_path / "empty") and len(read) > 1  # as a cold scan judges
