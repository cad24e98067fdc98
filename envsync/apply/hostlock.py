"""One change at a time per target: the lock a changing command holds on the host.

The lock lives on the target, next to its backups (the agent's `hold`, `locked` and `unlock`
operations), so it works the same for local and SSH hosts. A `hold` process on the host
stays alive for as long as this command does; when it is gone (killed, connection cut) the
holder lets running steps end, restores an apply that did not finish and releases the lock.
A lock whose holder died with it is stale and taken over, with a message.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from envsync.apply import Agent
from envsync.errors import EnvsyncError, TargetLocked
from envsync.inventory import HostSpec
from envsync.runner import Runner

HOLD_TIMEOUT = 7 * 24 * 3600.0  # a hold ends with its command, not by a clock


def describe(who: dict[str, Any]) -> str:
    """'pid 123 on buildbox (envsync repair --apply tgt) since 2026-...' from a lock's holder."""
    if not who or who.get("damaged"):
        return "an unreadable lock file"
    return (
        f"pid {who.get('pid', '?')} on {who.get('host', '?')} "
        f"({who.get('command', 'envsync')}) since {who.get('since', '?')}"
    )


@contextmanager
def target_lock(
    spec: HostSpec,
    runner: Runner,
    *,
    command: str,
    wait: float = 0.0,
    on_stale: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Hold the target's lock for the body; yields the token that operations carry."""
    token = secrets.token_hex(8)
    who = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "command": command,
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    agent = Agent(spec, runner)
    outcome: dict[str, Any] = {}
    hold = {"op": "hold", "token": token, "who": who, "wait": max(0.0, wait)}
    holder = threading.Thread(target=_hold, args=(agent, hold, outcome), daemon=True)
    holder.start()
    stale = _taken(agent, token, holder, outcome)
    if stale is not None and on_stale is not None:
        on_stale(f"{spec.name}: took over a stale lock of {describe(stale)}: its holder is gone")
    try:
        yield token
    finally:
        with suppress(EnvsyncError):
            agent.call({"op": "unlock", "token": token})
        holder.join(timeout=10)


def _hold(agent: Agent, hold: dict[str, Any], outcome: dict[str, Any]) -> None:
    # The hold's output is a heartbeat, then its answer when it ends: at once when the lock
    # is held by another, else when the lock is released or its client is gone.
    try:
        out = agent.raw(hold, timeout=float(hold["wait"]) + HOLD_TIMEOUT).stdout
        lines = out.decode("utf-8", "replace").strip().strip(".").splitlines()
        outcome.update(json.loads(lines[-1]) if lines else {})
    except (EnvsyncError, ValueError) as e:
        outcome["error"] = e


def _taken(
    agent: Agent, token: str, holder: threading.Thread, outcome: dict[str, Any]
) -> dict[str, Any] | None:
    """Wait until the hold has the lock (its stale predecessor, if any), or say who has it."""
    started = time.monotonic()
    while True:
        holder.join(timeout=0.05 if time.monotonic() - started < 2 else 0.5)
        if not holder.is_alive():
            break
        state = agent.call({"op": "locked", "token": token})
        if state.get("ours"):
            stale = state.get("stale")
            return dict(stale) if isinstance(stale, dict) else None
    error = outcome.get("error")
    if isinstance(error, EnvsyncError):
        raise error
    if outcome.get("acquired") is False:
        busy = outcome.get("busy") or []
        step = f"; its step (pid {busy[0]}) is still running" if busy else ""
        wait = float(outcome.get("waited") or 0)
        waited = f" after waiting {wait:g}s" if wait else ""
        raise TargetLocked(
            f"{agent.spec.name}: locked by another envsync{waited}: "
            f"{describe(outcome.get('who') or {})}{step}",
            tip="wait for it to finish, or pass --wait SECONDS to queue behind it",
        )
    raise TargetLocked(
        f"{agent.spec.name}: could not take the target's lock (its holder ended at once)",
        tip="check that the host can run its python and write ~/.envsync/locks",
    )
