"""/etc/ld.so.cache read as ldconfig writes it: every format ldconfig writes, against its own
`ldconfig -p`; lookups that never give a 64-bit object a 32-bit library."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envsync.hostside.native.ldcache import LdCache, Unreadable, cache_flags, read_ldcache
from tests.hostside.native.toolchain import build, build_32, facts

X86_64 = cache_flags(64, 62)
I386 = cache_flags(32, 3)


def ldconfig() -> str:
    found = shutil.which("ldconfig") or (
        "/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None
    )
    if found is None:
        pytest.skip("ldconfig is missing")
    return found


def printed(cache: Path) -> list[str]:
    """`ldconfig -p -C cache`'s entry lines."""
    out = subprocess.run([ldconfig(), "-p", "-C", str(cache)], capture_output=True, check=True)
    text = out.stdout.decode("utf-8", "surrogateescape")
    return [line for line in text.splitlines()[1:] if line.startswith("\t")]


def mine(cache: LdCache) -> list[str]:
    return [f"\t{e.name} ({cache.describe(e)}) => {e.path}" for e in cache.entries]


def test_this_machines_cache_as_ldconfig_prints_it() -> None:
    if not os.path.exists("/etc/ld.so.cache"):
        pytest.skip("no /etc/ld.so.cache here")
    cache = read_ldcache()
    assert isinstance(cache, LdCache), cache
    assert mine(cache) == printed(Path("/etc/ld.so.cache"))
    libc = cache.lookup("libc.so.6", X86_64, facts().hwcaps)
    assert libc is not None and os.path.exists(libc)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A root with libq.so.1 of both classes and one in a glibc-hwcaps subfolder."""
    if os.geteuid() != 0:
        pytest.skip("ldconfig -r needs root")
    root = tmp_path / "root"
    build(root / "l64" / "libq.so.1", "int q(void) { return 64; }\n", soname="libq.so.1")
    build(
        root / "l64" / "glibc-hwcaps" / "x86-64-v3" / "libq.so.1",
        "int q(void) { return 3; }\n",
        soname="libq.so.1",
    )
    build_32(root / "l32" / "libq.so.1", "int q(void) { return 32; }\n", soname="libq.so.1")
    (root / "etc").mkdir()
    (root / "etc" / "ld.so.conf").write_text("/l64\n/l32\n")
    return root


@pytest.mark.parametrize("fmt", ["new", "old", "compat"])
def test_each_format_ldconfig_writes(tree: Path, fmt: str) -> None:
    target = f"/cache.{fmt}"
    subprocess.run(
        [ldconfig(), "-r", str(tree), "-c", fmt, "-C", target, "-f", "/etc/ld.so.conf"],
        check=True,
        capture_output=True,
    )
    cache = read_ldcache(str(tree / target.lstrip("/")))
    assert isinstance(cache, LdCache), cache
    assert (
        cache.format
        == {
            "new": "glibc-ld.so.cache1.1",
            "old": "ld.so-1.7.0",
            "compat": "ld.so-1.7.0+glibc-ld.so.cache1.1",
        }[fmt]
    )
    assert mine(cache) == printed(tree / target.lstrip("/"))
    hwcap_lib = "/l64/glibc-hwcaps/x86-64-v3/libq.so.1"
    assert sorted(cache.paths()["libq.so.1"]) == sorted(
        ["/l32/libq.so.1", "/l64/libq.so.1", hwcap_lib]
    )
    hwcaps = facts().hwcaps
    if fmt == "old":  # no hwcap field: the subfolder's entry is an entry like any other, first
        assert cache.lookup("libq.so.1", X86_64, hwcaps) == hwcap_lib
        assert cache.lookup("libq.so.1", X86_64, ()) == hwcap_lib
    else:
        # In the compat layout ld.so (and ldconfig -p) read the hwcaps names at offsets
        # from the file's start, which are the new header's: garbage, matched by no CPU.
        usable = "x86-64-v3" in hwcaps and fmt == "new"
        expected = hwcap_lib if usable else "/l64/libq.so.1"
        assert cache.lookup("libq.so.1", X86_64, hwcaps) == expected
        assert cache.lookup("libq.so.1", X86_64, ()) == "/l64/libq.so.1"  # a CPU below v3
    assert cache.lookup("libq.so.1", I386, ()) == "/l32/libq.so.1"
    assert cache.lookup("libnothing.so.1", X86_64, hwcaps) is None


def test_broken_caches_are_values(tmp_path: Path) -> None:
    data = Path("/etc/ld.so.cache").read_bytes() if os.path.exists("/etc/ld.so.cache") else b""
    for n, blob in enumerate(
        [b"", b"garbage", data[:30], data[:200], b"glibc-ld.so.cache1.1" + b"\xff" * 60]
    ):
        path = tmp_path / f"cache{n}"
        path.write_bytes(blob)
        outcome = read_ldcache(str(path))
        assert isinstance(outcome, Unreadable) and outcome.why.startswith("unreadable: "), (
            n,
            outcome,
        )
    assert isinstance(read_ldcache(str(tmp_path / "absent")), Unreadable)
