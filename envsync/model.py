"""Frozen dataclasses shared by the stages, and their plain-dict (JSON) codec."""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union

from envsync.vocab import Context

SNAPSHOT_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Unavailable:
    """A fact that could not be collected, and why ("could not tell" is a value)."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Interpreter:
    executable: str
    version: str
    implementation: str
    interpreter_tag: str  # e.g. cp311
    abi_tag: str  # e.g. cp311, from SOABI
    platform: str  # e.g. linux_x86_64 (sysconfig.get_platform, normalized)
    prefix: str
    base_prefix: str
    in_venv: bool
    sys_path: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GitState:
    """A source checkout's git state, read from .git by the probe (git is never run)."""

    root: str  # the work tree's root folder
    commit: str | None = None
    branch: str | None = None  # None: a detached HEAD
    remote: str | None = None  # origin's URL (else the first remote's), credentials removed
    # The package's files (keys as in Distribution.files) that differ from HEAD.
    modified: tuple[str, ...] = ()
    added: tuple[str, ...] = ()  # staged, not in HEAD
    deleted: tuple[str, ...] = ()
    untracked: tuple[str, ...] = ()
    against_head: bool = False  # False: HEAD's tree is packed; compared with the index only
    unavailable_changes: str | None = None  # why the changed files could not be read


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceTree:
    """Where an editable or development install's packages live (not in RECORD)."""

    mode: str  # editable-finder | editable-pth | develop | sys.path
    packages: Mapping[str, str]  # top-level import name -> its folder (or module file)
    git: GitState | Unavailable | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Installers:
    """How packages can be installed in this environment."""

    pip: str | None = None  # pip's package as the interpreter imports it; None: no pip
    uv: str | None = None  # uv's path on the host (PATH, or beside the interpreter)


@dataclass(frozen=True, slots=True, kw_only=True)
class Distribution:
    name: str  # PEP 503 normalized
    display_name: str
    version: str  # as installed, local labels such as +cu130 kept
    installer: str | None = None
    location: str | None = None  # the sys.path entry holding the metadata directory
    metadata_dir: str | None = None  # e.g. xgrammar-0.1.32.dist-info
    requires: tuple[str, ...] = ()  # Requires-Dist, verbatim
    top_level: tuple[str, ...] = ()  # import names the distribution provides
    direct_url: Mapping[str, Any] | None = None  # direct_url.json (PEP 610), redacted
    shadowed: tuple[str, ...] = ()  # later sys.path entries holding the same name
    # Only for watched distributions: sha256 (hex) of every installed file, keyed by
    # its path relative to `location` as RECORD spells it (for a source tree: relative to
    # the import root, the same key), and how they differ from RECORD (or from HEAD).
    files: Mapping[str, str] | None = None
    patched: tuple[str, ...] = ()  # hash differs from RECORD (or HEAD): a local patch
    missing: tuple[str, ...] = ()  # in RECORD (or HEAD), not on disk
    added: tuple[str, ...] = ()  # in the package's directories, not in RECORD (or HEAD)
    source: SourceTree | None = None  # an editable or development install

    @property
    def watched(self) -> bool:
        return self.files is not None

    @property
    def custom_build(self) -> bool:
        """A local build (+label) or a VCS/directory install: no index serves this version,
        so envsync never pins it, and never replaces it as a side effect."""
        url = self.direct_url or {}
        return "+" in self.version or "vcs_info" in url or "dir_info" in url

    def file_path(self, key: str) -> str | None:
        """The real path of a file key of `files` on this host, wherever it is installed."""
        if self.source is None:
            return f"{self.location}/{key}" if self.location else None
        name, sep, rest = key.partition("/")
        if not sep:
            name = name.rpartition(".")[0] or name
        where = self.source.packages.get(name)
        if where is None:
            return None
        return f"{where}/{rest}" if sep else where


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokenDistribution:
    path: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Torch:
    version: str
    location: str
    cuda: str | None = None
    git_version: str | None = None
    hip: str | None = None
    # Only with --deep (needs importing torch on the host):
    arch_list: tuple[str, ...] | Unavailable | None = None
    cudnn: str | Unavailable | None = None
    nccl: str | Unavailable | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    index: int
    name: str
    compute_capability: str | None = None  # e.g. "12.0"
    driver_version: str | None = None
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuInfo:
    gpus: tuple[Gpu, ...] = ()
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # highest CUDA version the driver supports


@dataclass(frozen=True, slots=True, kw_only=True)
class System:
    os: str
    kernel: str
    machine: str
    glibc: str | None = None
    hostname: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash:
    """A crash of the service that envsync's smoke test watched: ground truth."""

    exception: str  # "ImportError: cannot import name 'X' from 'y' (...)"
    line: str | None = None  # the traceback's last frame, as the log printed it
    at: str | None = None  # when (UTC, ISO 8601)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOutcome:
    """What really importing one startup module in the target's interpreter did."""

    module: str
    ok: bool
    exception: str | None = None  # e.g. "ImportError"
    message: str | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportEdge:
    """One import statement in a module, as the probe's ast reading saw it."""

    module: str  # absolute name of the imported module (`from X import ...`: X)
    names: tuple[str, ...] = ()  # `from X import a, b`: a, b
    line: int
    context: Context
    statement: str
    condition: str | None = None  # the enclosing `if` line, for context "if"
    group: int | None = None  # the line of the enclosing `try` (contexts try and fallback)


@dataclass(frozen=True, slots=True, kw_only=True)
class LazyExports:
    """What a lazy module (transformers' `_LazyModule`, lazy_loader...) exports on demand."""

    names: Mapping[str, str] = field(default_factory=dict)  # name -> module that defines it
    stars: tuple[str, ...] = ()  # submodules whose public names it exports too
    exact: bool = False  # the table is complete: a name in none of them is absent
    # name -> the star submodules whose files mention it (the probe read only those)
    candidates: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleFacts:
    kind: str  # source | extension | namespace | missing | error
    file: str | None = None
    sha256: str | None = None
    defines: tuple[str, ...] | None = None  # names bound at module level (source only)
    all: tuple[str, ...] | None = None  # literal __all__
    dynamic: bool = False  # a module __getattr__: any name may exist
    stars: tuple[str, ...] = ()  # modules it does `from M import *` from
    imports: tuple[ImportEdge, ...] = ()
    error: str | None = None
    lazy: LazyExports | None = None  # a module that exports names it does not bind


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupGraph:
    """The static import graph of the service's startup modules on one host."""

    roots: tuple[str, ...]
    # How launch roots resolved on the host: "console:sglang" -> "sglang.cli.main:main",
    # "script:serve.py" -> "__main__"; an unresolved one is absent.
    resolved: Mapping[str, str] = field(default_factory=dict)
    internal: tuple[str, ...]  # top-level packages whose modules were followed
    modules: Mapping[str, ModuleFacts] = field(default_factory=dict)
    parsed: int = 0  # files read with ast on this run
    cached: int = 0  # files whose facts came from the host's cache


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Everything envsync knows of one Python environment on one host."""

    schema_version: int = SNAPSHOT_SCHEMA_VERSION
    host: str
    source: str  # probe | snapshot | lock | requirements
    partial: bool = False  # True when only some facts are known (a requirements file)
    collected_at: str | None = None
    duration_s: float | None = None
    interpreter: Interpreter | Unavailable
    distributions: tuple[Distribution, ...] = ()
    broken: tuple[BrokenDistribution, ...] = ()
    watch: tuple[str, ...] = ()
    torch: Torch | Unavailable | None = None  # None: torch is not installed
    gpu: GpuInfo | Unavailable
    system: System | Unavailable
    env: Mapping[str, str] = field(default_factory=dict)
    startup: StartupGraph | None = None  # only when a service entrypoint is known
    # Launch flags envsync keeps for the service on this host (`repair` workarounds).
    service_flags: Mapping[str, str] | None = None
    # The crash envsync's smoke test last saw on this host, kept until it is next ready.
    crash: Crash | None = None
    installers: Installers | None = None  # None: not known (a lock, an older snapshot)

    def distribution(self, name: str) -> Distribution | None:
        for dist in self.distributions:
            if dist.name == name:
                return dist
        return None


# Fields that describe one act of collection, not the environment itself.
TRANSPORT_FIELDS = ("collected_at", "duration_s", "source")


def why_no_files(reference: Snapshot) -> str | None:
    """Why the reference cannot send installed files (None: it is a live host)."""
    if reference.source != "probe":
        return f"the reference is a {reference.source} file, not a live host with installed files"
    return None


def why_files_cannot_serve(reference: Snapshot, target: Snapshot) -> str | None:
    """Why the reference's installed (compiled) files cannot serve the target, or None when
    they can: a live reference with the same interpreter version, ABI and platform."""
    why = why_no_files(reference)
    if why is not None:
        return why
    a, b = reference.interpreter, target.interpreter
    if isinstance(a, Unavailable) or isinstance(b, Unavailable):
        return "the interpreter of one host is unknown"
    ours = (a.version.rsplit(".", 1)[0], a.abi_tag, a.platform)
    theirs = (b.version.rsplit(".", 1)[0], b.abi_tag, b.platform)
    if ours != theirs:
        return f"the reference runs Python {' '.join(ours)}, the target {' '.join(theirs)}"
    return None


# ---------------------------------------------------------------------------------------
# Codec: dataclasses <-> plain dicts of JSON types. An Unavailable is {"unavailable": why}.

T = TypeVar("T")


class DecodeError(ValueError):
    """Raised with a dotted path to the offending value."""


class _Fail(Exception):
    """A decoding failure on its way out; collects the path while it unwinds."""

    def __init__(self, message: str, *segments: str) -> None:
        super().__init__(message)
        self.message = message
        self.segments = list(segments)


Decoder = Callable[[Any], Any]
_DECODERS: dict[Any, Decoder] = {}


def to_data(value: Any) -> Any:
    """Encode a model value as plain JSON-compatible data (dicts, lists, scalars)."""
    if isinstance(value, Unavailable):
        return {"unavailable": value.reason}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out = dict(value)
        # Fast path for the large {path: sha256} tables: plain strings need no encoding.
        if all(type(v) is str for v in out.values()):
            return out
        return {str(k): to_data(v) for k, v in out.items()}
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    return value


def from_data(cls: type[T], data: Any, path: str = "") -> T:
    """Decode plain data into dataclass `cls`, checking types; raise DecodeError."""
    try:
        return typing.cast(T, _decoder(cls)(data))
    except _Fail as e:
        where = (path or cls.__name__) + "".join(reversed(e.segments))
        raise DecodeError(f"{where}: {e.message}") from None


def _decoder(tp: Any) -> Decoder:
    """A decoding function for type `tp`, built once (decoding large graphs is hot)."""
    if tp not in _DECODERS:
        _DECODERS[tp] = _build(tp)
    return _DECODERS[tp]


def _scalar(tp: type) -> Decoder:
    def decode(data: Any) -> Any:
        if type(data) is not tp:
            raise _Fail(f"expected {tp.__name__}, got {data!r}")
        return data

    return decode


def _decode_float(data: Any) -> float:
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return float(data)
    raise _Fail(f"expected a number, got {data!r}")


def _build(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _build_union(typing.get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build_dataclass(tp)
    if origin is tuple:
        return _build_tuple(typing.get_args(tp)[0])
    if origin in (Mapping, dict):
        return _build_mapping(typing.get_args(tp)[1])
    if origin is Literal:
        return _build_literal(typing.get_args(tp))
    if tp is Any:
        return lambda data: data
    if tp is float:
        return _decode_float
    if tp in (str, int, bool):
        return _scalar(tp)
    raise TypeError(f"cannot decode type {tp!r}")  # pragma: no cover


def _build_literal(allowed: tuple[Any, ...]) -> Decoder:
    def decode(data: Any) -> Any:
        if data not in allowed or type(data) is not type(allowed[0]):
            shown = ", ".join(repr(a) for a in allowed)
            raise _Fail(f"expected one of {shown}, got {data!r}")
        return data

    return decode


def _build_union(options: tuple[Any, ...]) -> Decoder:
    nullable = type(None) in options
    unavailable = Unavailable in options
    decoders = [_decoder(o) for o in options if o is not type(None) and o is not Unavailable]

    def decode(data: Any) -> Any:
        if data is None:
            if nullable:
                return None
            raise _Fail("a value is required")
        if unavailable and type(data) is dict and len(data) == 1 and "unavailable" in data:
            reason = data["unavailable"]
            if type(reason) is not str:
                raise _Fail(f"expected a string, got {reason!r}", ".unavailable")
            return Unavailable(reason=reason)
        if len(decoders) == 1:
            return decoders[0](data)
        for decoder in decoders:
            with contextlib.suppress(_Fail):
                return decoder(data)
        raise _Fail(f"unexpected value {data!r}")

    return decode


def _build_dataclass(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    decoders = {f.name: _decoder(hints[f.name]) for f in fields}
    required = {
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }

    def decode(data: Any) -> Any:
        if type(data) is not dict:
            raise _Fail(f"expected a table, got {type(data).__name__}")
        kwargs = {}
        for key, value in data.items():
            decoder = decoders.get(key)
            if decoder is None:
                raise _Fail(f"unknown key {key!r}")
            try:
                kwargs[key] = decoder(value)
            except _Fail as e:
                e.segments.append(f".{key}")
                raise
        if not required <= kwargs.keys():
            missing = next(f.name for f in fields if f.name in required and f.name not in kwargs)
            raise _Fail(f"missing key {missing!r}")
        return cls(**kwargs)

    return decode


def _build_tuple(item: Any) -> Decoder:
    decoder = _decoder(item)

    def decode(data: Any) -> Any:
        if type(data) is not list:
            raise _Fail(f"expected a list, got {type(data).__name__}")
        if item is str and all(type(v) is str for v in data):
            return tuple(data)
        out = []
        for i, value in enumerate(data):
            try:
                out.append(decoder(value))
            except _Fail as e:
                e.segments.append(f"[{i}]")
                raise
        return tuple(out)

    return decode


def _build_mapping(value_type: Any) -> Decoder:
    decoder = _decoder(value_type)

    def decode(data: Any) -> Any:
        if type(data) is not dict:
            raise _Fail(f"expected a table, got {type(data).__name__}")
        if value_type is str and all(type(v) is str for v in data.values()):
            return dict(data)  # the large {path: sha256} tables
        out = {}
        for key, value in data.items():
            try:
                out[str(key)] = decoder(value)
            except _Fail as e:
                e.segments.append(f".{key}")
                raise
        return out

    return decode
