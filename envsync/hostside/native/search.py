"""One needed name to a file, as glibc's _dl_map_object searches for it.

A name with a slash is a path. Else, in order: the DT_RPATH of the object and of the
objects that loaded it, then the program's (all skipped when the object has a DT_RUNPATH),
LD_LIBRARY_PATH, the object's DT_RUNPATH, /etc/ld.so.cache, the system folders (the last
two skipped for an object marked NODEFLIB). Inside every folder the hwcaps subfolders
come first. Each candidate is checked as open_verify checks it: a file of another ELF
class or machine is skipped, one that is no ELF at all stops the search with an error.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass, field

from ..shared import Stamp, stamp_of

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from collections.abc import Sequence

    from .ldcache import LdCache
    from .ldso import LoaderFacts

ET_EXEC = 2
ET_DYN = 3
_PHDR_SIZE = {1: 32, 2: 56}
_EHDR_SIZE = {1: 52, 2: 64}
_OSABI_GNU = 3
_MAX_ABIVERSION = 4


@dataclass(frozen=True)
class Target:
    """What the loader loads: its own ELF class, byte order and machine (the program's)."""

    elf_class: int  # 32 or 64
    big_endian: bool
    machine: int


@dataclass(frozen=True)
class PathList:
    """One search list, its folders expanded, each ending in "/" ("" is the working folder)."""

    what: str  # RPATH, LD_LIBRARY_PATH, RUNPATH, system search path
    dirs: tuple[str, ...]
    where: str | None = None  # the object whose dynamic section holds it


@dataclass(frozen=True)
class Plan:
    """Where one object's needed names are looked for."""

    lists: tuple[PathList, ...]  # before the cache: RPATHs, LD_LIBRARY_PATH, RUNPATH
    nodeflib: bool = False  # the object (or the program) is marked DF_1_NODEFLIB


@dataclass(frozen=True)
class Found:
    path: str  # the name ld.so gives it (l_name): the folder as written, then the name
    how: str  # e.g. "RUNPATH of /x/libfoo.so", "ld.so.cache", "system search path"
    uncertain: str | None = None  # why another file may be the one loaded


@dataclass(frozen=True)
class Missing:
    name: str
    searched: tuple[str, ...]  # "RUNPATH: /a/lib", "ld.so.cache", ... in order
    other_class: bool = False  # a file of the other ELF class was skipped
    tried: bool = True  # some file was tried: ld.so's message then ends with ENOENT's text


@dataclass(frozen=True)
class Rejected:
    """A file found where the loader looked, which it refuses: the search stops there."""

    path: str
    why: str  # "invalid ELF header", "file too short", ...

    def message(self) -> str:
        return f"{self.path}: {self.why}"


@dataclass
class Disk:
    """The loader's view of the file system, each folder and file asked once.

    The one place the native layer touches files (but for reading the ELF files it
    chose): what it saw is kept, so that a cache of verdicts can tell later that nothing
    it depended on changed (`stamps`: each file's stamp, or the errno opening it gave)."""

    cwd: str = "/"
    folders: dict[str, bool] = field(default_factory=dict)
    heads: dict[str, bytes | int] = field(default_factory=dict)
    stamps: dict[str, Stamp | int] = field(default_factory=dict)

    def is_dir(self, path: str) -> bool:
        known = self.folders.get(path)
        if known is None:
            known = self.folders[path] = os.path.isdir(self.absolute(path))
        return known

    def head(self, path: str) -> bytes | int:
        """The first 64 bytes of a file, or the errno opening or reading it failed with."""
        known = self.heads.get(path)
        if known is None:
            known, self.stamps[path] = _read_head(self.absolute(path))
            self.heads[path] = known
        return known

    def identity(self, path: str) -> tuple[int, int]:
        """(st_dev, st_ino): a file the process has under another name is the same object."""
        try:
            st = os.stat(self.absolute(path))
        except OSError as e:
            self.stamps.setdefault(path, e.errno or errno.ENOENT)
            return (-1, hash(path))
        self.stamps.setdefault(path, stamp_of(st))
        return (st.st_dev, st.st_ino)

    def absolute(self, path: str) -> str:
        return path if path.startswith("/") else os.path.join(self.cwd, path)


def _read_head(path: str) -> tuple[bytes | int, Stamp | int]:
    """The first 64 bytes and the file's stamp; the errno when opening fails (its negative
    when reading does)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        code = e.errno or errno.ENOENT
        return code, code
    try:
        stamp = stamp_of(os.fstat(fd))
        return os.read(fd, 64), stamp
    except OSError as e:
        return -(e.errno or errno.EIO), -(e.errno or errno.EIO)
    finally:
        os.close(fd)


def expand_dst(text: str, origin: str, facts: LoaderFacts) -> str | None:
    """$ORIGIN, $LIB and $PLATFORM (or ${...}) replaced, as _dl_dst_substitute does; None
    when a known token has no value (the path is then dropped); other `$` kept."""
    values = {"ORIGIN": origin, "PLATFORM": facts.platform, "LIB": facts.lib}
    out = []
    i = 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
            continue
        token, length = _dst_at(text, i + 1)
        if token is None:
            out.append("$")
            i += 1
            continue
        if not values[token]:
            return None
        out.append(values[token])
        i += 1 + length
    return "".join(out)


def _dst_at(text: str, i: int) -> tuple[str | None, int]:
    """(token, its length after "$") when a known token starts at i (glibc's is_dst)."""
    curly = text.startswith("{", i)
    start = i + 1 if curly else i
    for token in ("ORIGIN", "PLATFORM", "LIB"):
        if not text.startswith(token, start):
            continue
        after = start + len(token)
        if curly and text.startswith("}", after):
            return token, len(token) + 2
        if not curly and not (after < len(text) and (text[after].isalnum() or text[after] == "_")):
            return token, len(token)
    return None, 0


def expand_list(
    value: str, origin: str, facts: LoaderFacts, separators: str = ":"
) -> tuple[str, ...]:
    """A DT_RPATH, DT_RUNPATH or LD_LIBRARY_PATH value as fillin_rpath makes its folders:
    tokens expanded, trailing slashes made one, an empty element the working folder ("")
    and the same folder kept once."""
    for sep in separators[1:]:
        value = value.replace(sep, separators[0])
    out: list[str] = []
    for element in value.split(separators[0]):
        if element:
            expanded = expand_dst(element, origin, facts)
            if not expanded:
                continue
            element = expanded.rstrip("/") + "/" if expanded.strip("/") else "/"
        if element not in out:
            out.append(element)
    return tuple(out)


def verify(head: bytes | int, target: Target) -> str | None:
    """open_verify's verdict on one candidate: None usable, "absent" (try the next),
    "skip" (another class or machine: try the next), "other-class", "stop" (an error that
    ends this list), or the loader's error, which ends the whole search."""
    if isinstance(head, int):
        if head < 0:  # opened, not readable (a folder of that name): ld.so gives up here
            return f"cannot read file data: {os.strerror(-head)}"
        return "absent" if head in (errno.ENOENT, errno.ENOTDIR, errno.EACCES) else "stop"
    expected_class = 2 if target.elf_class == 64 else 1
    if len(head) < _EHDR_SIZE[expected_class]:
        return "file too short"
    if head[:4] != b"\x7fELF":
        return "invalid ELF header"
    if head[4] != expected_class:
        return "other-class"
    return _verify_ident(head, target) or _verify_header(head, target)


def _verify_ident(head: bytes, target: Target) -> str | None:
    if head[5] != (2 if target.big_endian else 1):
        order = "big" if target.big_endian else "little"
        return f"ELF file data encoding not {order}-endian"
    if head[6] != 1:
        return "ELF file version ident does not match current one"
    if head[7] not in (0, _OSABI_GNU):
        return "ELF file OS ABI invalid"
    if (head[7] == 0 and head[8] != 0) or head[8] > _MAX_ABIVERSION:
        return "ELF file ABI version invalid"
    if any(head[9:16]):
        return "nonzero padding in e_ident"
    return None


def _verify_header(head: bytes, target: Target) -> str | None:
    order = ">" if target.big_endian else "<"
    e_type, machine, version = struct.unpack_from(order + "HHI", head, 16)
    phentsize_at = 54 if target.elf_class == 64 else 42
    (phentsize,) = struct.unpack_from(order + "H", head, phentsize_at)
    if version != 1:
        return "ELF file version does not match current one"
    if machine != target.machine:
        return "skip"
    if e_type not in (ET_DYN, ET_EXEC):
        return "only ET_DYN and ET_EXEC can be loaded"
    if phentsize != _PHDR_SIZE[2 if target.elf_class == 64 else 1]:
        return "ELF file's phentsize not the expected size"
    return None


@dataclass(frozen=True)
class Searcher:
    """The search's fixed parts: the loader's facts, its cache, what it loads, the disk."""

    facts: LoaderFacts
    cache: LdCache | None
    target: Target
    disk: Disk
    cache_flags: frozenset[int] = frozenset()

    def find(self, name: str, plan: Plan) -> Found | Missing | Rejected:
        """Where ld.so finds `name` (a name without a slash) for an object with `plan`."""
        searched: list[str] = []
        other = False
        for plist in plan.lists:
            outcome, skipped = self._in_list(name, plist)
            other = other or skipped
            searched.append(_describe(plist))
            if outcome is not None:
                return outcome
        outcome, skipped, opened = self._in_cache(name, plan.nodeflib)
        other = other or skipped
        searched.append("ld.so.cache")
        if outcome is not None:
            return outcome
        if not plan.nodeflib:
            system = PathList("system search path", tuple(d + "/" for d in self.facts.system_dirs))
            outcome, skipped = self._in_list(name, system)
            other = other or skipped
            searched.append(_describe(system))
            if outcome is not None:
                return outcome
        tried = bool(plan.lists) or not plan.nodeflib or opened
        return Missing(name=name, searched=tuple(searched), other_class=other, tried=tried)

    def open_path(self, path: str) -> Found | Missing | Rejected:
        """A name with a slash: that file, relative to the working folder if relative."""
        verdict = verify(self.disk.head(path), self.target)
        if verdict is None:
            return Found(path=path, how="path")
        if verdict in ("absent", "stop", "skip"):
            return Missing(name=path, searched=("path",))
        if verdict == "other-class":
            return Missing(name=path, searched=("path",), other_class=True)
        return Rejected(path=path, why=verdict)

    def _in_list(self, name: str, plist: PathList) -> tuple[Found | Rejected | None, bool]:
        """(the outcome in this list or None, whether a file of the other class was seen)."""
        other = False
        for folder in plist.dirs:
            for sub in self._subdirs(folder):
                path = folder + sub + name
                verdict = verify(self.disk.head(path), self.target)
                if verdict is None:
                    how = f"{plist.what} of {plist.where}" if plist.where else plist.what
                    return Found(path=path, how=how, uncertain=self._guessed(sub)), other
                if verdict == "other-class":
                    other = True
                elif verdict == "stop":
                    return None, other
                elif verdict not in ("absent", "skip"):
                    return Rejected(path=path, why=verdict), other
        return None, other

    def _subdirs(self, folder: str) -> list[str]:
        """The hwcaps subfolders of `folder` that exist, then the folder itself."""
        out = []
        for sub in self.facts.subdirs():
            if sub and not self.disk.is_dir((folder or "./") + sub):
                continue
            out.append(sub)
        return out

    def _guessed(self, sub: str) -> str | None:
        if sub and self.facts.source != "ld.so --help":
            return f"found in {sub}: which hwcaps subfolders this loader tries is a guess"
        return None

    def _in_cache(self, name: str, nodeflib: bool) -> tuple[Found | Rejected | None, bool, bool]:
        """(the outcome from /etc/ld.so.cache or None, a file of the other class seen, a file
        opened)."""
        if self.cache is None:
            return None, False, False
        path = self.cache.lookup(name, self.cache_flags, self.facts.hwcaps)
        if path is None:
            return None, False, False
        if nodeflib and any(path.startswith(d + "/") for d in self.facts.system_dirs):
            return None, False, False  # NODEFLIB: no cache entry inside the system folders
        verdict = verify(self.disk.head(path), self.target)
        if verdict is None:
            uncertain = None
            if self.cache.legacy(name, self.cache_flags):
                uncertain = "the cache has legacy hwcaps entries for it"
            return Found(path=path, how="ld.so.cache", uncertain=uncertain), False, True
        if verdict in ("absent", "skip", "stop"):
            return None, False, True
        if verdict == "other-class":
            return None, True, True
        return Rejected(path=path, why=verdict), False, True


def _describe(plist: PathList) -> str:
    where = f" of {plist.where}" if plist.where else ""
    folders = ":".join(d.rstrip("/") or "." for d in plist.dirs)
    return f"{plist.what}{where}: {folders}"


def rpath_lists(
    chain: Sequence[tuple[str, str | None, str | None, str]],
    main: tuple[str, str | None, str | None, str] | None,
    facts: LoaderFacts,
) -> list[PathList]:
    """The RPATH lists _dl_map_object walks for a requester without a RUNPATH: its own,
    its loader's and on up (`chain`: (name, rpath, runpath, origin) each), then the
    program's unless it was in the chain. An object with a RUNPATH has no RPATH."""
    lists = []
    seen_main = False
    for who, rpath, runpath, origin in chain:
        if rpath and not runpath:
            lists.append(PathList("RPATH", expand_list(rpath, origin, facts), who))
        seen_main = seen_main or (main is not None and who == main[0])
    if main is not None and not seen_main:
        who, rpath, runpath, origin = main
        if rpath and not runpath:
            lists.append(PathList("RPATH", expand_list(rpath, origin, facts), who))
    return [plist for plist in lists if plist.dirs]
