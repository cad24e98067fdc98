"""Frozen dataclasses shared by the stages: what envsync knows of a host's environment.

envsync/model/codec.py turns them into plain data (JSON) and back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from envsync.hostside.native import verdicts as _loader  # the reasons: one definition
from envsync.model.vocab import Context

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
class NetPlugin:
    """An NCCL net plugin (libnccl-net*.so) NCCL would find on the host."""

    name: str
    path: str
    sha256: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Nccl:
    """NCCL as torch would load it on the host, read without loading it."""

    library: str | None = None  # the libnccl.so.2 torch loads (None: none, plugins only)
    version: str | None = None  # NCCL's own version string: "2.21.5+cuda12.4"
    soname: str | None = None
    sha256: str | None = None
    net_plugins: tuple[NetPlugin, ...] = ()


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
    # An app-specific digest of the machine's id (/etc/machine-id): which machine answered;
    # it keys the host's recorded states, never compared (null: unreadable, or not recorded)
    machine_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One frame of a traceback: where code ran when an exception went through it."""

    file: str  # as the interpreter named it (a path, or "<frozen importlib._bootstrap>")
    line: int | None = None
    function: str | None = None
    code: str | None = None  # the source line, when the traceback showed it


@dataclass(frozen=True, slots=True, kw_only=True)
class Raised:
    """One exception of a chain: its type, its first line and the frames it went through
    (outermost first, the raising frame last)."""

    exception: str  # e.g. "RuntimeError", "transformers.x.SomeError"
    message: str = ""
    frames: tuple[Frame, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash:
    """A crash of the service that envsync's smoke test watched: ground truth."""

    exception: str  # "ImportError: cannot import name 'X' from 'y' (...)"
    line: str | None = None  # the traceback's last frame, as the log printed it
    at: str | None = None  # when (UTC, ISO 8601)
    # The traceback's frames as the log printed them (outermost first), and the exceptions
    # that led to it (`__cause__` / `__context__`), innermost last.
    frames: tuple[Frame, ...] = ()
    chain: tuple[Raised, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOutcome:
    """What really importing one startup module in a host's interpreter did."""

    module: str
    ok: bool
    exception: str | None = None  # e.g. "ImportError"
    message: str | None = None
    file: str | None = None  # the raising frame's file and line
    line: int | None = None
    frames: tuple[Frame, ...] = ()  # outermost first, the raising frame last
    # The exceptions that led to it (`__cause__`, else an unsuppressed `__context__`),
    # each the cause of the one before: the innermost last.
    chain: tuple[Raised, ...] = ()


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
    # the module's line at which the statement runs when not at its own: the call of the
    # function that holds it (0: after the module ran, as a console script's function)
    at: int | None = None
    # in a function, inside a try whose ImportError handler raises: an install check, run
    # by whatever calls it (a route decorator may, while a module is imported)
    raises: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Door:
    """Where reading a module stops: an import whose module name is computed at run time
    (`importlib.import_module(name)`, `__import__(name)`)."""

    line: int
    context: Context
    statement: str
    prefix: str | None = None  # the constant start of the name, absolute ("pkg.models.")
    # every module the prefix can name was read (each an edge "if"): the door is closed
    read: bool = False
    # it opens only where this environment variable is set (`if name := os.getenv(X):`)
    env: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LazyExports:
    """What a lazy module (transformers' `_LazyModule`, lazy_loader...) exports on demand."""

    names: Mapping[str, str] = field(default_factory=dict)  # name -> module that defines it
    stars: tuple[str, ...] = ()  # submodules whose public names it exports too
    exact: bool = False  # the table is complete: a name in none of them is absent
    # name -> the star submodules whose files mention it (the probe read only those)
    candidates: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionCheck:
    """A version comparison a module runs while it is imported, whose `if` raises
    (envsync/hostside/graph/versionchecks.py): `if numpy_version > (2, 2): raise ImportError`."""

    of: Literal["module", "dist"]  # the module's `__version__`, or the distribution's metadata
    name: str  # the module (`numpy`) or the distribution it reads the version of
    parts: int | None = None  # compares the first N parts as integers (compares "ints")
    # how the code compares: "ints" (a tuple of integers), "version" (packaging's Version,
    # LooseVersion), "str" (the version text with a string, as Python compares strings)
    compares: Literal["ints", "version", "str"] = "version"
    op: Literal["<", "<=", ">", ">=", "==", "!="]  # raises when `version OP value` holds
    value: str  # the constant it compares with: "2.2" for `(2, 2)`
    line: int  # the line of the `raise`
    test_line: int  # the line of the `if`
    statement: str  # the `if` statement, as the source writes it
    raises: str  # the `raise` statement
    exception: str | None = None  # the exception it raises (`ImportError`)
    context: Context  # as sure as an import edge at that place
    at: int | None = None  # the module's line that calls the function holding it


@dataclass(frozen=True, slots=True, kw_only=True)
class Answers:
    """The names a module `__getattr__` can return for, read path by path
    (envsync/hostside/graph/answers.py): any other name raises."""

    names: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    # where a path returns what another module's factory made for this module (pydantic's
    # getattr_migration(__name__)): that module, the function, this module's name
    delegate: tuple[str, str, str] | None = None
    # a factory's: how a key is made of the module's name and the name asked for (the
    # separator, the suffix); its names marked QUALIFIED ("=") are such keys
    template: tuple[str, str] | None = None

    def answers(self, name: str) -> bool:
        return name in self.names or name.startswith(self.prefixes)

    def names_for(self, module: str) -> set[str]:
        """A factory's: the names what it made for `module` answers for (its prefixes
        aside)."""
        plain = {n for n in self.names if not n.startswith("=")}
        if self.template is None:
            return plain
        sep, suffix = self.template
        head = f"={module}{sep}"
        for key in self.names:
            if key.startswith(head) and key.endswith(suffix):
                plain.add(key[len(head) : len(key) - len(suffix)])
        return plain

    def answers_for(self, module: str, name: str) -> bool:
        """A factory's: whether what it made for `module` answers for `name`."""
        if self.answers(name):
            return True
        if self.template is None:
            return False
        sep, suffix = self.template
        return f"={module}{sep}{name}{suffix}" in self.names


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleFacts:
    # source | extension | namespace | missing | error | provided (put in sys.modules by
    # its parent, a module that is no package: envsync cannot read it)
    kind: str
    file: str | None = None
    sha256: str | None = None
    defines: tuple[str, ...] | None = None  # names bound at module level (source only)
    all: tuple[str, ...] | None = None  # literal __all__
    dynamic: bool = False  # a module __getattr__: any name may exist
    # where a module __getattr__ is all that is dynamic: the names it can return for
    getattr: Answers | None = None
    stars: tuple[str, ...] = ()  # modules it does `from M import *` from
    imports: tuple[ImportEdge, ...] = ()
    error: str | None = None
    lazy: LazyExports | None = None  # a module that exports names it does not bind
    doors: tuple[Door, ...] = ()  # imports of computed names: what is behind is not read
    checks: tuple[VersionCheck, ...] = ()  # version comparisons that raise while it runs
    # its functions that make a module __getattr__ for the module they are given: what
    # each made one answers for (Answers.delegate names one)
    factories: Mapping[str, Answers] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupGraph:
    """The static import graph of the service's startup modules on one host."""

    roots: tuple[str, ...]
    # How launch roots resolved on the host: "console:sglang" -> "sglang.cli.main:main",
    # "script:serve.py" -> "__main__"; an unresolved one is absent.
    resolved: Mapping[str, str] = field(default_factory=dict)
    internal: tuple[str, ...]  # the service's own packages and the watched ones
    # the module that runs as __main__ (`-m X`: X, `-m pkg`: pkg.__main__; a script:
    # __main__); None: none does
    main: str | None = None
    # what the interpreter's site runs at every start: "site:NAME" (a .pth file's import
    # lines, a module of the graph), sitecustomize, usercustomize
    site: tuple[str, ...] = ()
    modules: Mapping[str, ModuleFacts] = field(default_factory=dict)
    parsed: int = 0  # files read with ast on this run
    cached: int = 0  # files whose facts came from the host's cache


# The native layer: what the startup's imports dlopen, judged from the ELF files as the
# host's ld.so would (envsync/hostside/native/scan.py). Each reason is worded by the host
# side's own verdict classes: the loader's words, in one place.


# The failure reasons are the host side's own classes (hostside/native/verdicts.py: their
# fields and the loader's message), tagged with the `kind` the snapshot's union decodes by.


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeNotFound(_loader.NotFound):
    """A needed library no search place provides."""

    kind: Literal["not-found"] = "not-found"


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeBadObject(_loader.BadObject):
    """A file found where the loader looked, which it refuses to load."""

    kind: Literal["bad-object"] = "bad-object"


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeVersionNotFound(_loader.VersionNotFound):
    """A symbol version (GLIBCXX_3.4.32, GLIBC_2.34) the providing file does not define."""

    kind: Literal["version-not-found"] = "version-not-found"


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeUndefinedSymbol(_loader.UndefinedSymbol):
    """A non-weak undefined symbol no object in the lookup scope defines."""

    kind: Literal["undefined-symbol"] = "undefined-symbol"


NativeReason = NativeNotFound | NativeBadObject | NativeVersionNotFound | NativeUndefinedSymbol


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeVerdict:
    """What the loader will do with one load."""

    kind: Literal["ok", "fails", "unknown"]
    reasons: tuple[NativeReason, ...] = ()  # fails: the first is what ld.so reports
    why: tuple[str, ...] = ()  # unknown: what the files could not prove

    def message(self) -> str | None:
        """The loader's own message (None when it loads)."""
        if self.kind == "fails" and self.reasons:
            return self.reasons[0].message()
        if self.kind == "unknown":
            return "; ".join(self.why)
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeStep:
    """One needed name of a load and where the loader finds it."""

    needed_by: str  # the file that needs it ("dlopen": the load itself)
    name: str  # the needed name (DT_NEEDED, or the path dlopen is given)
    path: str | None = None  # None: not found, or refused
    how: str  # "RUNPATH of ...", "ld.so.cache", "already loaded", "not found", ...


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeLoad:
    """One dlopen of the startup, in the order startup makes them, and its verdict."""

    path: str  # the file as the load opens it
    key: str  # the file inside its sys.path entry (both hosts name it alike), else its path
    module: str | None = None  # the extension module an import loads it as
    # import: an import statement loads it; preload: torch loads it before torch._C;
    # shipped: a reached package ships it, and no import loads it (not shown to load)
    origin: Literal["import", "preload", "shipped"]
    via: str  # the module whose import makes the load (for shipped: the package)
    global_: bool = False  # RTLD_GLOBAL: its symbols serve every later load
    verdict: NativeVerdict
    steps: tuple[NativeStep, ...] = ()  # the load tree, breadth first as ld.so walks it


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeFacts:
    """The native layer's facts of one host: every load of the startup, judged statically."""

    program: str  # the interpreter the loads are judged in
    loads: tuple[NativeLoad, ...] = ()
    owners: Mapping[str, str] = field(default_factory=dict)  # file -> distribution (RECORD)

    def load(self, key: str) -> NativeLoad | None:
        return next((load for load in self.loads if load.key == key), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedModel:
    """The model the service serves, from its config.json on the host."""

    model: str  # as the command names it: a folder, or a Hugging Face repository id
    config: str  # the config.json read
    architectures: tuple[str, ...]
    # architecture -> the modules its rule packs' registries import for it (none: the
    # registry does not know it)
    modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class _Weak:
    """A slot for weak references (dataclass's weakref_slot, before Python 3.11): the
    views envsync hashes of a snapshot are kept while it lives (collect/identity.py)."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot(_Weak):
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
    nccl: Nccl | Unavailable | None = None  # None: no NCCL found (or not recorded)
    gpu: GpuInfo | Unavailable
    system: System | Unavailable
    env: Mapping[str, str] = field(default_factory=dict)
    startup: StartupGraph | None = None  # only when a service entrypoint is known
    # Launch flags envsync keeps for the service on this host (`repair` workarounds).
    service_flags: Mapping[str, str] | None = None
    # The crash envsync's smoke test last saw on this host, kept until it is next ready.
    crash: Crash | None = None
    installers: Installers | None = None  # None: not known (a lock, an older snapshot)
    # The served model, when a rule pack imports model modules by it (Unavailable: why
    # envsync cannot tell which, e.g. the model path does not exist on the host).
    model: ServedModel | Unavailable | None = None
    # What the startup's imports dlopen and whether the loader will (None: no startup
    # graph, a lock, an older snapshot)
    native: NativeFacts | Unavailable | None = None

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
