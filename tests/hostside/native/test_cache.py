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

from envsync.hostside.native.cache import ElfCache, cached_facts, cached_judge, unchanged
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
from tests.hostside.native.toolchain import build, facts, real_load

F_AND_G = "int f(void) { return 1; }\nint g(void) { return 2; }\n"
USES_G = "extern int g(void);\nint use_g(void) { return g(); }\n"


def aged(*paths: Path) -> None:
    """Files as old as a deployed venv's (the racy rule keeps new ones out of caches)."""
    old = time.time() - 3600
    for path in paths:
        os.utime(path, (old, old))


def test_parsed_files_are_kept_by_stamp_and_exported(tmp_path: Path) -> None:
    lib = build(tmp_path / "libp.so.1", F_AND_G, soname="libp.so.1")
    cache = ElfCache()
    first = cache.read(str(lib))
    assert cache.read(str(lib)) is first and (cache.hits, cache.misses) == (1, 1)
    assert cache.export()["files"] == {}  # just written: too fresh to trust its stamp
    aged(lib)
    cache.read(str(lib))
    exported = json.loads(json.dumps(cache.export()))
    again = ElfCache()
    again.load(exported)
    assert again.read(str(lib)) == first and again.hits == 1
    build(lib, F_AND_G + "int h(void) { return 3; }\n", soname="libp.so.1")  # rewritten
    changed = again.read(str(lib))
    assert isinstance(changed, ElfFile) and changed.symbols is not None
    assert "h" in changed.symbols.exports.names
    again.load({"schema": 999, "files": {"x": []}})  # another version's cache: ignored


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
