"""The loader's facts against the loader: the files it tries, in its order (LD_DEBUG=libs),
for a needed name in a search folder of its own; the same facts without its --help."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

from envsync.hostside.native.ldso import loader_facts
from envsync.hostside.native.loader import Environment, Linker
from envsync.hostside.native.search import expand_list
from envsync.hostside.native.verdicts import Request, Unknown
from tests.hostside.native.toolchain import build, facts


def tried(consumer: Path, folder: Path) -> list[str]:
    """The files ld.so tries for the consumer's needs inside `folder`, in order."""
    env = {**os.environ, "LD_DEBUG": "libs"}
    script = f"import ctypes\ntry:\n    ctypes.CDLL({str(consumer)!r})\nexcept OSError:\n    pass\n"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    files = re.findall(r"trying file=(\S+)", proc.stderr)
    return [f for f in files if f.startswith(str(folder) + "/")]


def test_the_subfolders_ld_so_tries_in_every_search_folder(tmp_path: Path) -> None:
    stub = build(
        tmp_path / "stub" / "libgone.so.3", "int gone(void) { return 0; }\n", soname="libgone.so.3"
    )
    folder = tmp_path / "search"
    folder.mkdir()
    consumer = build(
        tmp_path / "libconsumer.so",
        "extern int gone(void);\nint use(void) { return gone(); }\n",
        link=(stub,),
        runpath=str(folder),
    )
    stub.unlink()
    expected = [f"{folder}/{sub}libgone.so.3" for sub in facts().subdirs()]
    assert tried(consumer, folder) == expected


def test_facts_from_the_loaders_own_strings_match_its_help() -> None:
    told = facts()
    read = loader_facts(told.interpreter, None, None, os.uname().machine)
    assert read.source == "ld.so's strings"
    assert read.system_dirs == told.system_dirs
    assert read.lib == told.lib
    assert read.platform == told.platform


def test_path_lists_as_fillin_rpath_makes_them() -> None:
    f = facts()
    assert expand_list("$ORIGIN/lib:/a//::/b/", "/x/y", f) == ("/x/y/lib/", "/a/", "", "/b/")
    assert expand_list("${ORIGIN}/../$LIB:$PLATFORM", "/o", f) == (
        f"/o/../{f.lib}/",
        f"{f.platform}/",
    )
    assert expand_list("$ORIGINAL/x:$FOO", "/o", f) == ("$ORIGINAL/x/", "$FOO/")  # not tokens
    assert expand_list("/a;/b:/a", "/o", f, ":;") == ("/a/", "/b/")


def test_a_loader_other_than_glibcs_gives_unknown_never_ok() -> None:
    musl = dataclasses.replace(facts(), interpreter="/lib/ld-musl-x86_64.so.1")
    started, loads = Linker(Environment(facts=musl)).judge(
        sys.executable, [Request("/lib/x86_64-linux-gnu/libc.so.6")]
    )
    assert started.verdict.kind == "unknown" and loads[0].verdict.kind == "unknown"
    assert isinstance(loads[0].verdict, Unknown) and "musl" in loads[0].verdict.why[-1]
