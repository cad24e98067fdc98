"""Frozen dataclasses shared by the stages: what envsync knows of a host's environment.

envsync/codec.py turns them into plain data (JSON) and back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    # When it was installed on this host (UTC, ISO 8601): the time of its RECORD (else its
    # METADATA). A fact of the machine, never compared: `history` says when each arrived.
    installed_at: str | None = None
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
