"""What the loader is asked (Request) and what it will do (Load): ok, fails, unknown.

Each failure reason carries the loader's own words; all of it travels as plain JSON data
(`encode_load`, `decode_load`) from the host's cache and to envsync. These reason classes
are the one definition of them: envsync's snapshot model (envsync/model/environment.py's Native*
reasons) subclasses them only to tag each with its `kind`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

TYPE_CHECKING = False  # typing costs milliseconds on a host: for the checker only
if TYPE_CHECKING:
    from typing import Any, Dict, Union

    Data = Dict[str, Any]


@dataclass(frozen=True)
class NotFound:
    """A needed library no search place provides."""

    name: str  # the DT_NEEDED name, e.g. libcudart.so.12
    needed_by: str  # the file that needs it
    searched: tuple[str, ...] = ()  # each search list ld.so tried, with its folders
    other_class: bool = False  # only a file of the other ELF class was there
    elf_class: int = 64  # the class of the object that needs it (64 or 32)
    tried: bool = True  # False: no file was even tried (NODEFLIB and no search path)

    def message(self) -> str:
        if self.other_class:
            other = "ELFCLASS32" if self.elf_class == 64 else "ELFCLASS64"
            return f"{self.name}: wrong ELF class: {other}"
        # errno is ENOENT after a failed open; when nothing was opened ld.so adds no text
        errno_text = ": No such file or directory" if self.tried else ""
        return f"{self.name}: cannot open shared object file{errno_text}"


@dataclass(frozen=True)
class BadObject:
    """A file found where the loader looked, which it refuses to load."""

    path: str  # the file found
    needed_by: str | None  # None: the load itself
    why: str  # "invalid ELF header", "cannot dynamically load executable", ...

    def message(self) -> str:
        return f"{self.path}: {self.why}"


@dataclass(frozen=True)
class VersionNotFound:
    """A version need (verneed) the providing file does not define."""

    version: str
    file: str  # the needed name the version is asked of (vn_file)
    provider: str  # the file that name resolved to
    needed_by: str  # the file that needs the version

    def message(self) -> str:
        return f"{self.provider}: version `{self.version}' not found (required by {self.needed_by})"


@dataclass(frozen=True)
class UndefinedSymbol:
    """A non-weak undefined symbol no object in the lookup scope defines."""

    symbol: str  # as the file names it (mangled)
    needed_by: str
    searched: tuple[str, ...] = ()  # the lookup scope, in order
    version: str | None = None  # the symbol version it asks for (GLIBCXX_3.4.30)
    file: str | None = None  # the file its version is asked of: the one that should define it
    demangled: str | None = None  # the C++ name, readable

    def message(self) -> str:
        version = f", version {self.version}" if self.version else ""
        return f"{self.needed_by}: undefined symbol: {self.symbol}{version}"


@dataclass(frozen=True)
class Ok:
    kind: str = "ok"


@dataclass(frozen=True)
class Fails:
    """The load fails; `reasons[0]` is what ld.so would report first."""

    reasons: tuple[Reason, ...]
    kind: str = "fails"

    def message(self) -> str:
        return self.reasons[0].message()


@dataclass(frozen=True)
class Unknown:
    """What could not be proved either way, and why."""

    why: tuple[str, ...]
    kind: str = "unknown"


if TYPE_CHECKING:
    Reason = Union[NotFound, BadObject, VersionNotFound, UndefinedSymbol]
    Verdict = Union[Ok, Fails, Unknown]


@dataclass(frozen=True)
class Request:
    """One dlopen of a startup, as `Linker.judge` replays it."""

    path: str
    global_: bool = False  # RTLD_GLOBAL (torch's preloads)
    now: bool = True  # RTLD_NOW: Python's imports and ctypes use it
    caller: str | None = None  # for a name without a slash: whose search it is


@dataclass(frozen=True)
class Step:
    """One needed name of the load tree and where it led."""

    needed_by: str
    name: str
    path: str | None  # None: not loaded
    how: str  # "already loaded", "RUNPATH of ...", "ld.so.cache", "not found", ...


@dataclass(frozen=True)
class Load:
    """The outcome of one load: its verdict, its tree, the object's search list."""

    verdict: Verdict
    steps: tuple[Step, ...] = ()
    searchlist: tuple[str, ...] = ()  # the root and its dependencies, breadth first


_REASONS = {
    "not-found": NotFound,
    "bad-object": BadObject,
    "version-not-found": VersionNotFound,
    "undefined-symbol": UndefinedSymbol,
}
_REASON_KINDS = {cls: kind for kind, cls in _REASONS.items()}


def encode_reason(reason: Reason) -> Data:
    data: Data = {"reason": _REASON_KINDS[type(reason)]}
    for f in fields(reason):
        value = getattr(reason, f.name)
        data[f.name] = list(value) if isinstance(value, tuple) else value
    return data


def decode_reason(data: Data) -> Reason:
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "reason"}
    reason: Reason = _REASONS[data["reason"]](**values)
    return reason


def encode_verdict(verdict: Verdict) -> Data:
    if isinstance(verdict, Fails):
        return {"kind": "fails", "reasons": [encode_reason(r) for r in verdict.reasons]}
    if isinstance(verdict, Unknown):
        return {"kind": "unknown", "why": list(verdict.why)}
    return {"kind": "ok"}


def decode_verdict(data: Data) -> Verdict:
    if data["kind"] == "fails":
        return Fails(reasons=tuple(decode_reason(r) for r in data["reasons"]))
    if data["kind"] == "unknown":
        return Unknown(why=tuple(data["why"]))
    return Ok()


def encode_load(load: Load) -> Data:
    return {
        "verdict": encode_verdict(load.verdict),
        "steps": [[s.needed_by, s.name, s.path, s.how] for s in load.steps],
        "searchlist": list(load.searchlist),
    }


def decode_load(data: Data) -> Load:
    return Load(
        verdict=decode_verdict(data["verdict"]),
        steps=tuple(Step(*s) for s in data["steps"]),
        searchlist=tuple(data["searchlist"]),
    )
