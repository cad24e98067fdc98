"""What every step of one apply runs with (the target's agent and fresh snapshot, the
backup made for it, the reference), what a step backs up, and where a distribution's files
are on each host.

Each kind's `apply` is handed one `StepContext`; each kind's `backs_up` says which
distributions and files the backup must hold before any step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from envsync.errors import ApplyError
from envsync.model.environment import Snapshot
from envsync.model.inventory import HostSpec
from envsync.runner import Runner
from envsync.runner.agent import Agent, Claim


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """What every step of one apply runs with: the target's agent and fresh snapshot, the
    backup it made, and the reference (a host, or None when it is a file)."""

    flags: Mapping[str, str]  # the plan's: what service.json keeps once it is applied
    agent: Agent
    target: Snapshot
    backup: str
    ident: str
    runners: Callable[[HostSpec], Runner]
    reference_spec: HostSpec | None
    reference: Snapshot | None
    pip_options: tuple[str, ...]
    claims: tuple[Claim, ...] = ()  # RECORD lines over other distributions' files

    def source(self, kind: str) -> tuple[Agent, Snapshot]:
        """The reference's agent and snapshot, for a step (of `kind`) that copies its files."""
        reference_spec, runners = self.reference_spec, self.runners
        if reference_spec is None or self.reference is None:
            raise ApplyError(f"{kind} needs the reference host, and it is a file here")
        source = Agent(reference_spec, runners(reference_spec))
        return source, self.reference


@dataclass(frozen=True, slots=True, kw_only=True)
class BacksUp:
    """What the backup holds for one step: whole distributions, and single files (paths)."""

    dists: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def location(snapshot: Snapshot, dist: str) -> str | None:
    """Where `dist` is installed on the host (None: not installed, or not known)."""
    found = snapshot.distribution(dist)
    return found.location if found else None


def file_paths(snapshot: Snapshot, dist: str, keys: Sequence[str]) -> dict[str, str]:
    """{file key: real path} on one host: in site-packages, or in the source tree of an
    editable install."""
    found = snapshot.distribution(dist)
    if found is None:
        raise ApplyError(f"{dist} is not installed on {snapshot.host}")
    out = {}
    for key in keys:
        path = found.file_path(key)
        if path is None:
            raise ApplyError(f"{snapshot.host}: no place for {key} in {dist}'s install")
        out[key] = path
    return out
