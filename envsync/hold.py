"""A command's hold on its target: the target's lock (apply/hostlock.py), taken through the
session's runner, waited for as the command was told, stale holders reported to its notes."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from envsync.apply.hostlock import target_lock

if TYPE_CHECKING:
    from envsync.inventory import HostSpec
    from envsync.session import Session


def hold_target(
    session: Session, spec: HostSpec, command: str, wait: float
) -> AbstractContextManager[str]:
    """`with hold_target(...) as lock:` the body runs holding `spec`'s lock for `command`
    (what another envsync is told holds it); `lock` is the token its operations carry."""
    return target_lock(
        spec, session.runners(spec), command=command, wait=wait, on_stale=session.note
    )
