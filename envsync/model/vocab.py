"""The vocabularies of envsync, each defined once, in its one order (surest or worst first).

Every rank, sort order and CLI choice is derived from these tuples. The import contexts
are the host side's (envsync/hostside/shared.py: the probe records them on hosts, where
envsync's own modules do not run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from envsync.hostside import shared as _host

# How much a difference matters to the service's startup, worst first.
# unknown: envsync could not read the service's startup, so it cannot say; never benign.
Severity = Literal["fatal", "risky", "unknown", "degraded", "benign"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}

# What fails by default, at this severity and worse: `check --fail-on` (the gate) and the
# JUnit cases of every report (check's and `diff --format junit`): one default.
FAIL_ON_DEFAULT: Severity = "fatal"

# What differs, in the order a report lists raw differences.
Kind = Literal[
    "python", "torch", "gpu", "native", "missing", "version", "extra", "commit", "file", "system"
]
KINDS: tuple[Kind, ...] = get_args(Kind)
KIND_RANK: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
PACKAGE_KINDS: tuple[Kind, ...] = ("missing", "version", "extra")

# How a fix repairs a finding, and the kind of the plan step that carries it out (each a
# class of its own: findings.Fix, plan.Step; a test ties their tags to these words).
FixKind = Literal["pin", "sync-dist", "sync-file", "flag"]

# What installs a pin on the target: its own pip, or uv aimed at its interpreter.
Installer = Literal["pip", "uv"]
INSTALLERS: tuple[Installer, ...] = get_args(Installer)

# Where an import statement stands, surest to run first. A path is as weak as its weakest
# edge: a module reached through a `try` is guarded even if its own imports are not.
# "fallback": an except body, which runs only when its try failed (judged with that try).
# The one order is the host side's; the codec checks values against it at run time.
if TYPE_CHECKING:
    from envsync.hostside.shared import Context as Context
else:
    Context = Literal[_host.CONTEXTS]
CONTEXTS: tuple[Context, ...] = _host.CONTEXTS
CONTEXT_RANK: dict[str, int] = _host.CONTEXT_RANK
# contexts that run when the module does
RUNS: tuple[Context, ...] = _host.RUNS

# Which evidence decided a finding.
EvidenceSource = Literal[
    "import-graph",
    "name-check",
    "rule-pack",
    "native",
    "import-check",
    "requirements",
    "version-check",
    "facts",
    "crash",
]


# The less sure of two contexts (an import is as sure as the weakest step to it).
weaker = _host.weaker


# --prefer: pins and syncs; launch-flag workarounds wherever one exists; a flag only when
# it gives up nothing the configured command uses. The first is the default of --prefer.
Prefer = Literal["auto", "fix", "workaround"]
PREFER: tuple[Prefer, ...] = get_args(Prefer)
# --only: which findings start a step (default: fatal and risky).
Only = Literal["fatal", "risky", "degraded", "all"]
ONLY_DEFAULT: Only = "risky"
# unknown (envsync could not read the startup) is addressed by default, like risky.
ONLY: dict[Only, tuple[Severity, ...]] = {
    "fatal": ("fatal",),
    "risky": ("fatal", "risky", "unknown"),
    "degraded": ("fatal", "risky", "unknown", "degraded"),
    "all": SEVERITIES,
}
