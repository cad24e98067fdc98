"""Frozen dataclasses shared by the stages, and their plain-dict (JSON) codec."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

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
    # its path relative to `location` as RECORD spells it, and how they differ from RECORD.
    files: Mapping[str, str] | None = None
    patched: tuple[str, ...] = ()  # hash differs from RECORD: a local patch
    missing: tuple[str, ...] = ()  # in RECORD, not on disk
    added: tuple[str, ...] = ()  # in the package's directories, not in RECORD

    @property
    def watched(self) -> bool:
        return self.files is not None


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
class ImportEdge:
    """One import statement in a module, as the probe's ast reading saw it."""

    module: str  # absolute name of the imported module (`from X import ...`: X)
    names: tuple[str, ...] = ()  # `from X import a, b`: a, b
    line: int
    context: str  # module | if | try | typing | function
    statement: str
    condition: str | None = None  # the enclosing `if` line, for context "if"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupGraph:
    """The static import graph of the service's startup modules on one host."""

    roots: tuple[str, ...]
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

    def distribution(self, name: str) -> Distribution | None:
        for dist in self.distributions:
            if dist.name == name:
                return dist
        return None


# Fields that describe one act of collection, not the environment itself.
TRANSPORT_FIELDS = ("collected_at", "duration_s", "source")


# ---------------------------------------------------------------------------------------
# Codec: dataclasses <-> plain dicts of JSON types. An Unavailable is {"unavailable": why}.

T = TypeVar("T")


class DecodeError(ValueError):
    """Raised with a dotted path to the offending value."""


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
    return typing.cast(T, _decode(cls, data, path or cls.__name__))


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _decode(tp: Any, data: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None:
            if type(None) in options:
                return None
            raise DecodeError(f"{path}: a value is required")
        if isinstance(data, dict) and set(data) == {"unavailable"} and Unavailable in options:
            reason = data["unavailable"]
            if not isinstance(reason, str):
                raise DecodeError(f"{path}.unavailable: expected a string, got {reason!r}")
            return Unavailable(reason=reason)
        errors = []
        for option in options:
            if option is type(None) or option is Unavailable:
                continue
            try:
                return _decode(option, data, path)
            except DecodeError as e:
                errors.append(str(e))
        raise DecodeError(errors[0] if len(errors) == 1 else f"{path}: unexpected value {data!r}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise DecodeError(f"{path}: expected a table, got {type(data).__name__}")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise DecodeError(f"{path}: unknown key {unknown[0]!r}")
        kwargs = {k: _decode(hints[k], v, f"{path}.{k}") for k, v in data.items()}
        try:
            return tp(**kwargs)
        except TypeError as e:
            missing = [
                f.name
                for f in dataclasses.fields(tp)
                if f.name not in data
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING
            ]
            raise DecodeError(f"{path}: missing key {missing[0]!r}" if missing else str(e)) from e
    if origin is tuple:
        if not isinstance(data, list):
            raise DecodeError(f"{path}: expected a list, got {type(data).__name__}")
        (item,) = typing.get_args(tp)[:1]
        return tuple(_decode(item, v, f"{path}[{i}]") for i, v in enumerate(data))
    if origin in (Mapping, dict):
        if not isinstance(data, dict):
            raise DecodeError(f"{path}: expected a table, got {type(data).__name__}")
        _, value_type = typing.get_args(tp)
        if value_type is str and all(type(v) is str for v in data.values()):
            return dict(data)  # fast path for the large {path: sha256} tables
        return {str(k): _decode(value_type, v, f"{path}.{k}") for k, v in data.items()}
    if tp is Any:
        return data
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        raise DecodeError(f"{path}: expected a number, got {data!r}")
    if tp in (str, int, bool):
        if type(data) is not tp:
            raise DecodeError(f"{path}: expected {tp.__name__}, got {data!r}")
        return data
    raise DecodeError(f"{path}: cannot decode type {tp!r}")  # pragma: no cover


# ---------------------------------------------------------------------------------------
# Differences, findings and fixes

SEVERITIES = ("fatal", "risky", "degraded", "benign")
KINDS = ("version", "missing", "extra", "file", "torch", "gpu", "python", "system")


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One raw difference between a reference and a target snapshot (from deepdiff)."""

    kind: str  # one of KINDS
    subject: str  # distribution name, file path (dist/path), or fact name
    reference: str | None
    target: str | None
    dist: str | None = None  # for `file`: the distribution the file belongs to


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    source: str  # import-graph | name-check | rule-pack | import-probe | requirements | facts
    detail: str  # one sentence
    file: str | None = None
    line: int | None = None
    statement: str | None = None
    context: str | None = None  # module | if | try | function, and how startup gets there


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    kind: str  # pin | sync-dist | sync-file | flag
    summary: str  # what to do, in words a human can act on
    requirement: str | None = None  # pin: NAME==VERSION
    dist: str | None = None  # sync-dist / sync-file: the distribution
    path: str | None = None  # sync-file: the file, relative to the distribution's location
    flag: str | None = None  # flag: e.g. --grammar-backend
    value: str | None = None  # flag: e.g. none
    gives_up: str | None = None  # flag: the capability it costs


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    subject: str
    kind: str
    reference: str | None
    target: str | None
    severity: str  # one of SEVERITIES
    reason: str
    decided_by: str  # the evidence source that set the severity
    evidence: tuple[Evidence, ...] = ()
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The result of comparing a target with a reference."""

    schema_version: int = 1
    reference: str
    target: str
    entrypoint: str | None = None
    command: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()  # what envsync could not tell, and why

    @property
    def summary(self) -> dict[str, int]:
        counts = {s: 0 for s in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts
