"""What the probe, the agent and envsync hold alike: redaction, names, state paths, files.

Each rule here is the only copy: the host-side programs import it relatively, envsync
imports it as `envsync.hostside.shared`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds on every host run: for the checker only
    from typing import Any, Literal

    # Where an import statement stands (the probe records it, envsync judges it).
    Context = Literal["module", "if", "try", "fallback", "function", "typing"]

# ---------------------------------------------------------------------------------------
# Redaction. A secret is known by the name it is kept under (SECRET_NAME), by its shape
# wherever it appears (tokens of Hugging Face, OpenAI, Anthropic, GitHub, GitLab, Slack,
# AWS keys, JWTs), inside a URL (user:password@), and as the value of an option or setting
# that takes one. The probe applies them on the host; envsync to what it shows and saves.

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|PRIVATE|COOKIE|SESSION|AUTH"
    r"|(?:^|_)KEY(?:$|_)|APIKEY|ACCESS_KEY|(?:^|_)PASS|(?:^|_)PWD(?:$|_)",
    re.IGNORECASE,
)
REDACTED = "<redacted>"
SECRET_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
SECRET_WORD = r"(?:api[-_]?key|token|password|passwd|passphrase|secret|credentials?|auth|key)"
SECRET_OPTION = re.compile(r"^--?(?:[A-Za-z0-9]+[-_])*" + SECRET_WORD + r"$", re.IGNORECASE)
# `api_key='...'`, `"hf_token": "..."`, `--api-key VALUE` inside a line of text (a log)
SECRET_SETTING = re.compile(
    r"(?P<key>(?<![A-Za-z0-9])(?:--?)?(?:[A-Za-z0-9]+[-_])*" + SECRET_WORD + r"['\"]?)"
    r"(?P<sep>\s*[=:]\s*|\s+(?=['\"]?[A-Za-z0-9_./+-]{6,}))"
    r"(?P<quote>['\"]?)(?P<value>[^'\"\s,;)}\]]+)",
    re.IGNORECASE,
)
# An HTTP header that carries a credential, in a line of a log (`Authorization: Bearer x`,
# `Cookie: a=b; c=d`): everything after the colon is the secret.
SECRET_HEADER = re.compile(
    r"(?P<key>(?<![A-Za-z0-9-])(?:Proxy-)?(?:Authorization|Cookie|Set-Cookie|X-Api-Key"
    r"|X-Auth-Token)['\"]?\s*[:=]\s*['\"]?)(?P<value>[^\r\n'\"]+)",
    re.IGNORECASE,
)
HARMLESS_VALUES = frozenset(["none", "null", "false", "true", "", REDACTED.lower()])
# A URL's userinfo runs from its scheme's `//` to the LAST `@` of the authority: a
# password may hold `@` itself (`https://bob:pa@ssW0rd@index/`), and only `/`, `?`, `#`
# and whitespace end an authority. A scp-like remote (`git@host:path`) has no scheme.
USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]+@")


def strip_credentials(text: str, mark: str = "") -> str:
    """Every URL in `text` without its `user:password@` (`mark@` in its place when given).

    The one credential stripper: git remotes and index URLs lose theirs (a lock names an
    index without them), facts and logs show `<redacted>@` (redact_url).
    """
    keep = mark + "@" if mark else ""
    return USERINFO.sub(lambda m: m.group("scheme") + keep, text)


def redact_url(value: str) -> str:
    """Every URL's credentials in a string replaced by `<redacted>`."""
    return strip_credentials(value, REDACTED)


def _setting(match: re.Match[str]) -> str:
    value = match.group("value")
    spaced = not match.group("sep").strip()  # `--api-key VALUE`: options only
    if value.lower() in HARMLESS_VALUES or value.isdigit():
        return match.group(0)
    if spaced and not match.group("key").startswith("-"):
        return match.group(0)
    return match.group("key") + match.group("sep") + match.group("quote") + REDACTED


def redact_text(value: str) -> str:
    """Every secret a line of text may hold: URL credentials, token shapes, settings."""
    value = redact_url(value)
    value = SECRET_HEADER.sub(lambda m: m.group("key") + REDACTED, value)
    value = SECRET_SHAPE.sub(REDACTED, value)
    return SECRET_SETTING.sub(_setting, value)


def redact_argv(argv: list[str]) -> list[str]:
    """A command line as it may be shown: the value of every secret-bearing option hidden."""
    out = []
    hide = False
    for arg in argv:
        if hide:
            out.append(REDACTED)
            hide = False
            continue
        name, eq, _ = arg.partition("=")
        if name.startswith("-") and SECRET_OPTION.match(name):
            if eq:
                out.append(name + "=" + REDACTED)
            else:
                out.append(arg)
                hide = True
            continue
        out.append(redact_text(arg))
    return out


def redact_env(name: str, value: str) -> str:
    """An environment variable's value as it may be shown."""
    if SECRET_NAME.search(name):
        return REDACTED
    return redact_text(value)


def redact_data(value: Any) -> Any:
    """Every string inside JSON-like data redacted (a direct_url.json)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_data(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------
# Names


def normalize(name: str) -> str:
    """A distribution's normalized name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------------------
# State on the host: one folder inside each environment

# envsync's state lives in the environment it is about, `PREFIX/.envsync`: whoever reaches
# the environment (another user, another HOME, a bind mount, a container's view of it)
# finds the same lock, the same backups and the same service state.
STATE_FOLDER = ".envsync"


def env_key(prefix: str) -> str:
    """Several environments may live on one host: a key for each, from its prefix (the
    probe's caches of file hashes, which live in the caller's cache folder, are keyed so)."""
    return hashlib.sha256(os.path.realpath(prefix).encode()).hexdigest()[:12]


class StatePaths:
    """Where envsync keeps its state for one environment: inside it."""

    __slots__ = ("backups", "busy", "guard", "holder", "lock", "prefix", "root", "run", "service")

    def __init__(self, prefix: str) -> None:
        self.prefix = os.path.realpath(prefix)
        self.root = os.path.join(self.prefix, STATE_FOLDER)
        # the launch flags `repair` chose and the crash the smoke test last saw
        self.service = os.path.join(self.root, "service.json")
        self.backups = os.path.join(self.root, "backups")
        # held with flock by the process that holds the lock, for as long as it lives
        self.lock = os.path.join(self.root, "lock")
        self.holder = os.path.join(self.root, "lock.json")  # who holds it, and its token
        self.guard = os.path.join(self.root, "guard")  # flock'ed while lock.json changes
        self.busy = os.path.join(self.root, "busy")  # one flock'ed file per running step
        self.run = os.path.join(self.root, "run")  # pid and log files of services


# ---------------------------------------------------------------------------------------
# Files: which belong to a package, and the temporary files of envsync's own writes

# Every write goes through `NAME.envsync-PID.tmp` beside NAME, then os.replace: a write
# that was killed half-way leaves one behind (older envsync versions: `NAME.envsync-tmp`).
TEMP_NAME = re.compile(r"\.envsync(?:-[0-9]+\.tmp|-tmp)$")


def text_digest(text: bytes) -> str:
    """The digest a part of the probe's answer is known by, on both sides (the text of a
    graph's modules, of the distributions, of the native facts)."""
    return hashlib.sha256(text).hexdigest()[:32]


# A module's facts whose error starts so: this interpreter cannot compile it, and importing
# it raises what follows (`SyntaxError: ...`); any other error is a file not read.
COMPILE_ERROR = "cannot compile: "


# ---------------------------------------------------------------------------------------
# The seal of every file a cache keeps on this host

# envsync holds the key (derived from its machine's own, never written on this host) and
# hands it over on stdin for the run (boot.py sets it here). Each file a cache writes ends
# with an HMAC of its text under that key; a file that does not verify (edited, forged
# with a recomputed digest, another machine's) is never used. No key: nothing is kept.
KEY: bytes | None = None
SEAL_MARK = b"\n#envsync-seal "
SEAL_SIZE = len(SEAL_MARK) + 64


def seal(data: bytes) -> bytes | None:
    """`data` with its seal after it (None: no key for this run, so nothing is kept)."""
    if KEY is None:
        return None
    import hmac

    return data + SEAL_MARK + hmac.new(KEY, data, hashlib.sha256).hexdigest().encode()


def unseal(data: bytes) -> bytes:
    """The text a sealed file holds; ValueError when its seal is missing or does not
    verify under this run's key."""
    import hmac

    if KEY is None or len(data) < SEAL_SIZE or data[-SEAL_SIZE:][: len(SEAL_MARK)] != SEAL_MARK:
        raise ValueError("not sealed")
    text, found = data[:-SEAL_SIZE], data[-64:]
    if not hmac.compare_digest(hmac.new(KEY, text, hashlib.sha256).hexdigest().encode(), found):
        raise ValueError("its seal does not verify")
    return text


def temp_name(path: str) -> str:
    """The temporary file through which this process writes `path`."""
    return f"{path}.envsync-{os.getpid()}.tmp"


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of envsync's temporary files (never a package's file)."""
    return TEMP_NAME.search(name) is not None


_TEMP_PID = re.compile(r"\.envsync-([0-9]+)\.tmp$")


def sweep_temps(folder: str, older_than: float = 3600.0) -> int:
    """Remove the temporary files that writes into `folder` left behind (killed, or on a
    full disk): those of a process that is gone, and any older than `older_than` seconds.
    Returns how many were removed; a folder that cannot be read removes none."""
    import time

    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    now = time.time()
    for name in names:
        if not is_temp_name(name):
            continue
        path = os.path.join(folder, name)
        match = _TEMP_PID.search(name)
        pid = int(match.group(1)) if match else None
        stale = pid is not None and pid != os.getpid() and not _alive(pid)
        try:
            if stale or now - os.lstat(path).st_mtime > older_than:
                os.unlink(path)
                removed += 1
        except OSError:
            continue
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: alive
    return True


# Never part of the package: bytecode, packaging metadata, version control, tool caches.
# (Only package folders are walked: a checkout's build/ and dist/ are never reached, and
# a package may ship dot-folders of its own, as SGLang ships .claude/.)
NOT_PACKAGE_DIRS = frozenset(
    [
        "__pycache__",
        ".git",
        ".eggs",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    ]
)
NOT_PACKAGE_FILES = frozenset(["uv_cache.json", ".DS_Store"])


# A watched file's value in a snapshot, when it is no regular file: a link is recorded as
# the link it is (never followed out of its package), a FIFO, socket or device is never
# opened (a FIFO would block the probe).
LINK_VALUE = "symlink:"  # then the link's target
SKIPPED_VALUE = "skipped: "  # then what it is ("a FIFO")


def not_package_dir(name: str) -> bool:
    """Whether a folder of that name is never part of a package."""
    return name in NOT_PACKAGE_DIRS or name.endswith(".egg-info")


def package_file_name(name: str) -> bool:
    """Whether a file of that name may be part of a package."""
    return not (name in NOT_PACKAGE_FILES or name.endswith((".pyc", ".pyo")) or is_temp_name(name))


def package_file(rel: str) -> bool:
    """Whether a file (a path inside the import root) is part of the package."""
    parts = rel.split("/")
    if any(not_package_dir(part) for part in parts[:-1]):
        return False
    return package_file_name(parts[-1])


# ---------------------------------------------------------------------------------------
# Stat keys: what every cache on the host is keyed by. Any write to a file changes one of
# (size, mtime_ns, ctime_ns, inode): ctime moves on every write and cannot be set back.
# A file modified less than RACY_SECONDS before it was cached may still be being written:
# nothing that recent is cached (git's "racy" rule).

RACY_SECONDS = 2
RACY_NS = RACY_SECONDS * 10**9


class Stamp:
    """A file's stat keys, as every host-side cache keeps them."""

    __slots__ = ("ctime_ns", "inode", "mtime_ns", "size")

    def __init__(self, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> None:
        self.size = size
        self.mtime_ns = mtime_ns
        self.ctime_ns = ctime_ns
        self.inode = inode

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stamp) and self.plain() == other.plain()

    def __hash__(self) -> int:
        return hash((self.size, self.mtime_ns, self.ctime_ns, self.inode))

    def __repr__(self) -> str:
        return f"Stamp({self.size}, {self.mtime_ns}, {self.ctime_ns}, {self.inode})"

    def plain(self) -> list[int]:
        return [self.size, self.mtime_ns, self.ctime_ns, self.inode]


def stamp_of(st: os.stat_result) -> Stamp:
    return Stamp(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def stamp(path: str) -> Stamp | int:
    """The file's stamp, or the errno stat gave (absent files: ENOENT whatever the errno)."""
    try:
        return stamp_of(os.stat(path))
    except OSError as e:
        return absent(e.errno or errno.ENOENT)


def absent(code: int) -> int:
    """Absent is one outcome whatever the errno: ld.so tries the next place either way."""
    return errno.ENOENT if code in (errno.ENOENT, errno.ENOTDIR) else code


def plain(value: Stamp | int) -> list[int] | int:
    """A stamp or an errno as JSON data."""
    return value.plain() if isinstance(value, Stamp) else absent(value)


def racy(mtime_ns: int, now_ns: int) -> bool:
    """Whether a file modified at `mtime_ns` changed too recently to cache what it holds."""
    return now_ns - mtime_ns < RACY_NS


# ---------------------------------------------------------------------------------------
# The dynamic loader's settings that a service's environment may give: the native layer
# judges the startup's loads with the service's own (envsync sends them to the probe).

LOADER_ENV = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW")


# ---------------------------------------------------------------------------------------
# Import contexts: where an import statement stands, surest to run first (envsync's
# vocabulary imports this order). A path is as weak as its weakest edge.

CONTEXTS: tuple[Context, ...] = ("module", "if", "try", "fallback", "function", "typing")
CONTEXT_RANK: dict[str, int] = {c: i for i, c in enumerate(CONTEXTS)}
# contexts that run when the module does
RUNS: tuple[Context, ...] = ("module", "if", "try", "fallback")


def weaker(a: Context, b: Context) -> Context:
    """The less sure of two contexts (an import is as sure as the weakest step to it)."""
    return a if CONTEXT_RANK[a] >= CONTEXT_RANK[b] else b
