"""What the loader will do with one object: ok, fails (each reason in its own words), unknown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Union


@dataclass(frozen=True)
class NotFound:
    """A needed library no search place provides."""

    name: str
    needed_by: str
    searched: tuple[str, ...]  # each search list tried, with its folders
    other_class: bool = False  # only a file of the other ELF class was there
    elf_class: int = 64
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

    path: str
    needed_by: str | None
    why: str  # "invalid ELF header", "cannot dynamically load executable", ...

    def message(self) -> str:
        return f"{self.path}: {self.why}"


@dataclass(frozen=True)
class VersionNotFound:
    """A version need (verneed) the providing file does not define."""

    version: str
    file: str  # the needed name the version is asked of (vn_file)
    provider: str  # the file that name resolved to
    needed_by: str

    def message(self) -> str:
        return f"{self.provider}: version `{self.version}' not found (required by {self.needed_by})"


@dataclass(frozen=True)
class UndefinedSymbol:
    """A non-weak undefined symbol no object in the lookup scope defines."""

    symbol: str
    needed_by: str
    searched: tuple[str, ...]  # the lookup scope, in order
    version: str | None = None
    file: str | None = None  # the file its version is asked of: the one that should define it
    demangled: str | None = None

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
