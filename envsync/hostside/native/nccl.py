"""NCCL on the host, read without loading it: the libnccl torch loads, its version and hash,
and the NCCL net plugins (libnccl-net*.so) NCCL would find.

The library is the first of, in the loader's order for torch (whose RUNPATH points at its
own folder and at the nvidia-nccl wheel): LD_LIBRARY_PATH's folders, torch/lib, a
site-packages' nvidia/nccl/lib (the nvidia-nccl-cu* wheel), then the ld.so cache. Its
version is NCCL's own string in the library's read-only data ("2.21.5+cuda12.4"), else
the file name's (libnccl.so.2.21.5); its sha256 is cached by the file's stat like every
other hash of the probe. A net plugin is what NCCL dlopens by name: libnccl-net.so, or
libnccl-net-NAME.so for NCCL_NET_PLUGIN=NAME, in the same folders.
"""

from __future__ import annotations

import os
import re

from ..facts.files import hash_files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..facts.files import HashCache

LIBRARY = "libnccl.so.2"
NET_PLUGIN = re.compile(r"^libnccl-net(?:-[A-Za-z0-9_.-]+)?\.so(?:\.[0-9.]+)?$")
# NCCL's version string: NCCL_MAJOR.MINOR.PATCH, a suffix, "+cuda" and CUDA's major.minor.
VERSION = re.compile(rb"(?<![0-9.])([0-9]+\.[0-9]+\.[0-9]+[a-z0-9-]*\+cuda[0-9]+\.[0-9]+)\x00")
FILE_VERSION = re.compile(r"libnccl\.so\.([0-9]+\.[0-9]+\.[0-9]+)$")
READ_LIMIT = 1 << 28  # read at most this much of a section for the version string
CHUNK = 1 << 22


def _folders(paths: list[str]) -> list[str]:
    """Where torch's libnccl is looked for, in the loader's order for torch."""
    out = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    for base in paths:
        out.append(os.path.join(base, "torch", "lib"))
    for base in paths:
        out.append(os.path.join(base, "nvidia", "nccl", "lib"))
    return out


def _cached(name: str) -> list[str]:
    from .ldcache import LdCache, read_ldcache

    cache = read_ldcache()
    if not isinstance(cache, LdCache):
        return []
    return cache.paths().get(name, [])


def find_library(paths: list[str]) -> str | None:
    for folder in _folders(paths):
        candidate = os.path.join(folder, LIBRARY)
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    for candidate in _cached(LIBRARY):
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


def library_version(path: str) -> tuple[str | None, str | None]:
    """(NCCL's version string, the soname), read from the file, never loaded."""
    from .elf import ElfFile, read_elf

    elf = read_elf(path)
    soname = elf.dynamic.soname if isinstance(elf, ElfFile) and elf.dynamic else None
    spans = [(0, os.path.getsize(path))]
    if isinstance(elf, ElfFile):
        data = [(s.offset, s.size) for s in elf.sections if s.name in (".rodata", ".data")]
        spans = data or spans
    for offset, size in spans:
        found = _search(path, offset, min(size, READ_LIMIT))
        if found:
            return found, soname
    by_name = FILE_VERSION.search(os.path.basename(path))
    return (by_name.group(1) if by_name else None), soname


def _search(path: str, offset: int, size: int) -> str | None:
    """The first version string in the file's bytes [offset, offset+size), read in chunks
    that overlap so that a string across two chunks is found too."""
    with open(path, "rb") as f:
        f.seek(offset)
        left, tail = size, b""
        while left > 0:
            chunk = f.read(min(CHUNK, left))
            if not chunk:
                return None
            left -= len(chunk)
            found = VERSION.search(tail + chunk)
            if found:
                return found.group(1).decode("ascii")
            tail = chunk[-64:]
    return None


def net_plugins(library: str | None, paths: list[str]) -> list[str]:
    """The net plugins NCCL can dlopen here (real paths, sorted, each once)."""
    wanted = os.environ.get("NCCL_NET_PLUGIN")
    folders = [os.path.dirname(library)] if library else []
    folders += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    folders += [os.path.join(base, "nvidia", "nccl", "lib") for base in paths]
    found: dict[str, None] = {}
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if NET_PLUGIN.match(name) and os.path.isfile(os.path.join(folder, name)):
                found[os.path.realpath(os.path.join(folder, name))] = None
    from .ldcache import LdCache, read_ldcache

    cache = read_ldcache()
    if isinstance(cache, LdCache):
        for name, entries in cache.paths().items():
            if NET_PLUGIN.match(name):
                found.update(
                    dict.fromkeys(os.path.realpath(p) for p in entries if os.path.isfile(p))
                )
    if wanted and "/" in wanted and os.path.isfile(wanted):
        found[os.path.realpath(wanted)] = None
    return sorted(found)


def nccl_facts(paths: list[str], hashes: HashCache | None) -> dict[str, Any] | None:
    """The NCCL facts of a snapshot (None: no libnccl here)."""
    library = find_library(paths)
    plugins = net_plugins(library, paths)
    if library is None and not plugins:
        return None
    digests = hash_files([p for p in [library, *plugins] if p], hashes)
    if library is None:
        return {
            "library": None,
            "net_plugins": [_plugin(p, digests) for p in plugins],
        }
    try:
        version, soname = library_version(library)
    except OSError as e:
        return {"unavailable": f"cannot read {library}: {e.strerror or e}"}
    digest = digests.get(library)
    return {
        "library": library,
        "version": version,
        "soname": soname,
        "sha256": digest if isinstance(digest, str) else None,
        "net_plugins": [_plugin(p, digests) for p in plugins],
    }


def _plugin(path: str, digests: dict[str, str | OSError]) -> dict[str, Any]:
    digest = digests.get(path)
    return {
        "name": os.path.basename(path),
        "path": path,
        "sha256": digest if isinstance(digest, str) else None,
    }
