"""A command's hold on its target: the target's mutex (runner/mutex.py), taken through the
session's runner, waited for as the command was told, stale holders reported to its notes."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from envsync.runner.mutex import target_mutex

if TYPE_CHECKING:
    from envsync.model.inventory import HostSpec
    from envsync.sources.session import Session


def hold_target(
    session: Session, spec: HostSpec, command: str, wait: float
) -> AbstractContextManager[str]:
    """`with hold_target(...) as lock:` the body runs holding `spec`'s mutex for `command`
    (what another envsync is told holds it); `lock` is the token its operations carry."""
    return target_mutex(
        spec, session.runners(spec), command=command, wait=wait, on_stale=session.note
    )
