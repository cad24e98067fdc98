"""One change at a time per target: the mutex a changing command holds on the host.

The lock lives on the target, next to its backups (the agent's `hold`, `locked` and `unlock`
operations), so it works the same for local and SSH hosts. A `hold` process on the host
stays alive for as long as this command does; when it is gone (killed, connection cut) the
holder lets running steps end, restores an apply that did not finish and releases the lock.
A lock whose holder died with it is stale and taken over, with a message.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from envsync.errors import EnvsyncError, TargetLocked
from envsync.model.inventory import HostSpec
from envsync.runner import Runner
from envsync.runner.agent import Agent, HoldEnded, Holder, HoldRefused

HOLD_TIMEOUT = 7 * 24 * 3600.0  # a hold ends with its command, not by a clock


def describe(who: Holder) -> str:
    """'pid 123 on buildbox (envsync repair --apply tgt) since 2026-...' from a lock's holder."""
    if who.damaged:
        return "an unreadable lock file"
    pid = who.pid if who.pid is not None else "?"
    return f"pid {pid} on {who.host or '?'} ({who.command or 'envsync'}) since {who.since or '?'}"


@contextmanager
def target_mutex(
    spec: HostSpec,
    runner: Runner,
    *,
    command: str,
    wait: float = 0.0,
    on_stale: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Hold the target's lock for the body; yields the token that operations carry."""
    token = secrets.token_hex(8)
    who = Holder(
        host=socket.gethostname(),
        pid=os.getpid(),
        command=command,
        since=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    agent = Agent(spec, runner)
    outcome: list[HoldRefused | HoldEnded | EnvsyncError] = []
    holder = threading.Thread(
        target=_hold, args=(agent, token, who, max(0.0, wait), outcome), daemon=True
    )
    holder.start()
    stale = _taken(agent, token, holder, outcome)
    if stale is not None and on_stale is not None:
        on_stale(f"{spec.name}: took over a stale lock of {describe(stale)}: its holder is gone")
    try:
        yield token
    finally:
        with suppress(EnvsyncError):
            agent.unlock(token)
        holder.join(timeout=10)


def _hold(
    agent: Agent,
    token: str,
    who: Holder,
    wait: float,
    outcome: list[HoldRefused | HoldEnded | EnvsyncError],
) -> None:
    # The hold answers at once when the lock is held by another, else when the lock is
    # released or its client is gone.
    try:
        outcome.append(agent.hold(token, who, wait=wait, timeout=wait + HOLD_TIMEOUT))
    except EnvsyncError as e:
        outcome.append(e)


def _taken(
    agent: Agent,
    token: str,
    holder: threading.Thread,
    outcome: list[HoldRefused | HoldEnded | EnvsyncError],
) -> Holder | None:
    """Wait until the hold has the lock (its stale predecessor, if any), or say who has it."""
    started = time.monotonic()
    while True:
        holder.join(timeout=0.05 if time.monotonic() - started < 2 else 0.5)
        if not holder.is_alive():
            break
        state = agent.locked(token)
        if state.ours:
            return state.stale
    match outcome[0] if outcome else None:
        case EnvsyncError() as error:
            raise error
        case HoldRefused(who=who, busy=busy, waited=wait):
            step = f"; its step (pid {busy[0]}) is still running" if busy else ""
            waited = f" after waiting {wait:g}s" if wait else ""
            raise TargetLocked(
                f"{agent.spec.name}: locked by another envsync{waited}: {describe(who)}{step}",
                tip="wait for it to finish, or pass --wait SECONDS to queue behind it",
            )
        case _:  # the hold ended before it held: it could not take the lock at all
            raise TargetLocked(
                f"{agent.spec.name}: could not take the target's lock (its holder ended at once)",
                tip="check that the host can run its python and write ~/.envsync/locks",
            )
